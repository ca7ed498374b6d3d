#!/bin/bash
# The public header must compile as C++ (strict C++11, every warning an
# error) and its extern "C" must hold: header_cxx.cpp calls the library and
# is linked against the shared library and run. g++ is required, not
# optional: a C++ user is who this test stands for (.ci/run installs it).
# Usage: bash test_header_cxx.sh path/to/libflashattn.so INCLUDE_DIR SOURCE_DIR SANITIZE
set -u
LIB=${1:?usage: test_header_cxx.sh LIB INCLUDE_DIR SOURCE_DIR SANITIZE} INC=${2:?} SRC=${3:?} SANITIZE=${4:-OFF}
command -v g++ >/dev/null || { echo "FAIL: g++ is needed to compile the header as C++"; exit 1; }
[ -f "$LIB" ] || { echo "FAIL: $LIB does not exist"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/fa_test_header_cxx.XXXXXX")
trap 'rm -rf "$T"' EXIT
san=()
# A sanitizer build's library needs the sanitizer runtime in the program.
case $SANITIZE in ON|on|1|TRUE|true|YES|yes) san=(-fsanitize=address,undefined);; esac
LIBDIR=$(cd "$(dirname "$LIB")" && pwd)
if ! g++ -std=c++11 -Wall -Wextra -Werror -pedantic "${san[@]}" -I"$INC" \
     "$SRC/tests/install/header_cxx.cpp" -o "$T/header_cxx" -L"$LIBDIR" -lflashattn \
     -Wl,-rpath,"$LIBDIR" 2>"$T/log"; then
  cat "$T/log"
  echo "FAIL: flashattn.h does not compile or link as C++11 (g++ -std=c++11 -Wall -Wextra -Werror -pedantic)"
  exit 1
fi
"$T/header_cxx" || { echo "FAIL: the C++ program failed"; exit 1; }
