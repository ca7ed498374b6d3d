#!/usr/bin/env bash
# Build bench/ggml/ggml_compare against ggml's CPU backend (llama.cpp's ggml_flash_attn_ext).
#
# usage: bench/ggml/build.sh LLAMA_CPP_SRC [FLASHATTN_BUILD]
#   LLAMA_CPP_SRC   a llama.cpp source tree (a checkout, or vendor/llama.cpp of the
#                   llama-cpp-python source package); nothing is downloaded here
#   FLASHATTN_BUILD flashattn's build directory (default: build), for libflashattn.a
# Output: $FLASHATTN_BUILD/ggml/ggml_compare. Run it without arguments for its usage.
# ggml is configured from the llama.cpp root with every llama target off (ggml alone
# does not configure from some source packages), native ISA, static, OpenMP.
set -euo pipefail
SRC=${1:?usage: bench/ggml/build.sh LLAMA_CPP_SRC [FLASHATTN_BUILD]}
FA_BUILD=${2:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
FA_BUILD=$(cd "$ROOT" && mkdir -p "$FA_BUILD" && cd "$FA_BUILD" && pwd)
OUT="$FA_BUILD/ggml"
[ -f "$SRC/ggml/include/ggml.h" ] || { echo "no ggml/include/ggml.h under $SRC" >&2; exit 1; }
[ -f "$FA_BUILD/libflashattn.a" ] || { echo "build flashattn first (make build)" >&2; exit 1; }
cmake -S "$SRC" -B "$OUT/ggml-build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DBUILD_SHARED_LIBS=OFF -DGGML_OPENMP=ON -DGGML_CCACHE=OFF \
    -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF >/dev/null
cmake --build "$OUT/ggml-build" -j "$(nproc)" --target ggml-cpu ggml-base
LIBS="$OUT/ggml-build/ggml/src"
${CC:-gcc} -std=c11 -O2 -march=native -Wall -Wextra -I"$SRC/ggml/include" -I"$ROOT/include" \
    "$HERE/ggml_compare.c" -o "$OUT/ggml_compare" "$LIBS/libggml-cpu.a" "$LIBS/libggml-base.a" \
    "$FA_BUILD/libflashattn.a" -fopenmp -lm -lstdc++
echo "built $OUT/ggml_compare"
