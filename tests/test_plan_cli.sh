#!/bin/bash
# `flashattn plan`: the shipped profiles, footprints that fit and that
# overflow, the CPU plan with --measure, the tile choice it reports
# (params, environment, tuning file), and the errors: unknown profile,
# broken profile file, bad tiles, --measure off this machine.
# Usage: bash test_plan_cli.sh path/to/flashattn
set -u
BIN=${1:?usage: test_plan_cli.sh path/to/flashattn}
[ -x "$BIN" ] || { echo "test_plan_cli.sh: $BIN is not an executable"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/fa_test_plan.XXXXXX")
trap 'rm -rf "$T"' EXIT
unset FLASHATTN_BLOCK_M FLASHATTN_BLOCK_N FLASHATTN_TUNE_FILE
failures=0 passes=0
pass() { passes=$((passes + 1)); }
fail() { failures=$((failures + 1)); echo "FAIL: $*"; }
# expect RC NEEDLE CMD...: exit status RC and NEEDLE in stdout+stderr
expect() {
    local rc=$1 needle=$2 out got
    shift 2
    out=$("$@" 2>&1)
    got=$?
    if [ "$got" -eq "$rc" ] && grep -qF -- "$needle" <<<"$out"; then pass
    else fail "$* -> status $got (want $rc), missing '$needle':"; echo "$out" | tail -5; fi
}

expect 0 "ascend910b" "$BIN" plan --list
for hw in ascend910 ascend910b ascend310p a100 h100; do
    expect 0 "source     " "$BIN" plan --hw $hw --seq 4096 --head-dim 128 --dtype f16
    expect 0 "OVERFLOW" "$BIN" plan --hw $hw --seq 4096 --head-dim 128 --dtype f16 --block-m 1024 --block-n 1024
done
# the seeds' hardware: a 910 AI Core holds 1 MiB of L1, so 256 x 256 tiles fit at head_dim 128
expect 0 "block_m 256 x block_n 256" "$BIN" plan --hw Ascend910 --seq 4096 --head-dim 128 --dtype f16
expect 0 "of 1024.0 KiB" "$BIN" plan --hw ascend910 --seq 4096 --head-dim 128 --dtype f16
expect 0 "no bf16 figure" "$BIN" plan --hw ascend910 --seq 1024 --head-dim 64 --dtype bf16
# flash's intensity grows with block_m: 256-row tiles put the 910 past its balance point,
# while standard attention stays memory-bound
expect 0 "memory-bound / compute-bound" "$BIN" plan --hw ascend910 --seq 16384 --head-dim 128 --dtype f16

# this CPU: the library's own choice, and the measured run beside the prediction
expect 0 "block_m from rule, block_n from rule" "$BIN" plan --seq 300 --head-dim 64 --heads 2
expect 0 "measured   flash" "$BIN" plan --seq 256 --head-dim 64 --heads 2 --measure
expect 0 "block_m from params, block_n from rule" "$BIN" plan --seq 300 --head-dim 64 --heads 2 --block-m 40
FLASHATTN_BLOCK_M=24 expect 0 "block_m from environment" "$BIN" plan --seq 300 --head-dim 64 --heads 2
FLASHATTN_BLOCK_N=0 expect 2 "FLASHATTN_BLOCK_N=0: must be >= 1" "$BIN" plan --seq 300 --head-dim 64
expect 2 "must be a multiple of" "$BIN" plan --seq 300 --head-dim 64 --block-n 24
expect 2 "must be <= 4096" "$BIN" plan --seq 300 --head-dim 64 --block-m 5000
expect 2 "tiles must be >= 1" "$BIN" plan --seq 300 --head-dim 64 --block-m 0
printf 'not a tuning file\n' >"$T/bad.tsv"
FLASHATTN_TUNE_FILE=$T/bad.tsv expect 0 "warning: tuning file $T/bad.tsv ignored" \
    "$BIN" plan --seq 300 --head-dim 64 --heads 2

# errors
expect 2 "no profile 'tpu9'" "$BIN" plan --hw tpu9 --seq 64 --head-dim 64
expect 2 "--measure runs on this machine only" "$BIN" plan --hw a100 --seq 64 --head-dim 64 --measure
expect 2 "--seq and --head-dim are required" "$BIN" plan --hw a100
expect 2 "take one value each" "$BIN" plan --hw a100 --seq 64 --head-dim 64 --block-m 64,128
printf 'x\tgpu\t2\n' >"$T/short.tsv"
expect 1 "line 1: 3 tab-separated fields" "$BIN" plan --hw x --profiles "$T/short.tsv" --seq 64 --head-dim 64
printf 'x\tgpu\t0\t64\ts\t0\tn\t10\t0\t1\t100\tsrc\n' >"$T/cores.tsv"
FLASHATTN_HW_PROFILES=$T/cores.tsv expect 1 "bad cores field" "$BIN" plan --list
expect 1 "No such file" "$BIN" plan --list --profiles "$T/missing.tsv"

echo "test_plan_cli.sh: $passes passed, $failures failed"
[ "$failures" -eq 0 ]
