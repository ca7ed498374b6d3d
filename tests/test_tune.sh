#!/bin/bash
# `flashattn tune` on a small shape: the table (every grid point, the best
# and the automatic choice marked, errors within FP32 rounding), --save
# writing the tuning file, the library then using it (seen through `plan`),
# a corrupt file ignored with one warning, and the errors: tiles the kernels
# cannot run reported per point, bad options, a foreign file not overwritten.
# Usage: bash test_tune.sh path/to/flashattn
set -u
BIN=${1:?usage: test_tune.sh path/to/flashattn}
[ -x "$BIN" ] || { echo "test_tune.sh: $BIN is not an executable"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/fa_test_tune.XXXXXX")
trap 'rm -rf "$T"' EXIT
unset FLASHATTN_BLOCK_M FLASHATTN_BLOCK_N FLASHATTN_TUNE_FILE
failures=0 passes=0
pass() { passes=$((passes + 1)); }
fail() { failures=$((failures + 1)); echo "FAIL: $*"; }
check() { if eval "$1"; then pass; else fail "$2"; fi; }

SHAPE="--seq 96 --head-dim 32 --heads 2 --reps 1"
out=$("$BIN" tune $SHAPE --save --tune-file "$T/t.tsv" 2>&1); rc=$?
check '[ $rc -eq 0 ]' "tune --save: status $rc"
nr=$(sed -n 's/.*(MR \([0-9]*\), NR \([0-9]*\)).*/\2/p' <<<"$out")
check '[ -n "$nr" ]' "no 'MR m, NR n' line"
rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +[0-9.]+ ' <<<"$out")
# the grid up to the shape: block_m 16..96 (5 values); block_n the multiples of NR
# up to the keys rounded to NR
keys=$(( (96 + ${nr:-1} - 1) / ${nr:-1} * ${nr:-1} )) nn=0
for b in 16 32 48 64 96 128 192 256 384 512; do
    [ $((b % ${nr:-1})) -eq 0 ] && nn=$((nn + 1)) && [ $b -ge $keys ] && break
done
check '[ "$rows" -ge $((5 * nn)) ]' "table has $rows rows, expected at least $((5 * nn))"
check 'grep -q "\* best" <<<"$out"' "no best marked"
check 'grep -q "  auto" <<<"$out"' "automatic choice not marked"
maxerr=$(awk '/^ +[0-9]+ +[0-9]+ +[0-9.]+ / {print $7}' <<<"$out" | sort -g | tail -1)
check 'awk -v e="$maxerr" "BEGIN {exit !(e > 0 && e < 1e-5)}"' "f32 max error $maxerr"
check 'head -1 "$T/t.tsv" | grep -qx "# flashattn tuning file v1"' "tuning file header"
entry=$(grep -v '^#' "$T/t.tsv")
check '[ "$(wc -l <<<"$entry")" -eq 1 ] && [ "$(cut -f3-5 <<<"$entry")" = "$(printf "32\tf32\t0")" ]' \
    "tuning file entry: '$entry'"
best=$(sed -n 's/^best \([0-9]*\) x \([0-9]*\):.*/\1 \2/p' <<<"$out")
saved=$(cut -f6,7 <<<"$entry" | tr '\t' ' ')
check '[ "$best" = "$saved" ]' "saved '$saved', best '$best'"

# the library uses the entry for this shape (block_m may shrink for threads; block_n may not)
p=$(FLASHATTN_TUNE_FILE=$T/t.tsv "$BIN" plan --seq 96 --head-dim 32 --heads 2 --threads 1 2>&1)
check 'grep -q "block_m from tuning file, block_n from tuning file" <<<"$p"' "plan does not use the file"
check 'grep -q "block_n ${saved#* } " <<<"$p"' "plan's block_n is not the saved ${saved#* }"
p=$(FLASHATTN_TUNE_FILE=$T/t.tsv "$BIN" plan --seq 96 --head-dim 32 --heads 2 --causal 2>&1)
check 'grep -q "from rule" <<<"$p" && ! grep -q warning <<<"$p"' "causal has no entry: rule, no warning"
# a second save of another shape keeps the first
"$BIN" tune --seq 96 --head-dim 32 --heads 2 --reps 1 --causal --block-m 16 --block-n "$nr" --save \
    --tune-file "$T/t.tsv" >/dev/null 2>&1
check '[ "$(grep -vc "^#" "$T/t.tsv")" -eq 2 ]' "second save: $(grep -vc '^#' "$T/t.tsv") entries"

printf '# flashattn tuning file v1\nbroken line\n' >"$T/corrupt.tsv"
p=$(FLASHATTN_TUNE_FILE=$T/corrupt.tsv "$BIN" plan --seq 96 --head-dim 32 2>&1); rc=$?
check '[ $rc -eq 0 ] && [ "$(grep -c "warning: tuning file" <<<"$p")" -eq 1 ]' "corrupt file: $rc, $p"

# errors
out=$("$BIN" tune --seq 64 --head-dim 32 --heads 1 --reps 1 --block-m 16 --block-n $((nr + 8)),$nr 2>&1); rc=$?
check '[ $rc -eq 0 ] && grep -q "not run: params.block_n=$((nr + 8)): must be a multiple of $nr" <<<"$out"' \
    "unrunnable point not reported: $out"
"$BIN" tune --seq 64 --head-dim 32 --block-m 0 >"$T/o" 2>&1; rc=$?
check '[ $rc -eq 2 ] && grep -q "tiles must be >= 1" "$T/o"' "--block-m 0: status $rc"
"$BIN" tune --head-dim 32 >"$T/o" 2>&1; rc=$?
check '[ $rc -eq 2 ] && grep -q "required" "$T/o"' "missing --seq: status $rc"
"$BIN" tune --seq 64 --head-dim 32 --reps 0 >"$T/o" 2>&1; rc=$?
check '[ $rc -eq 2 ]' "--reps 0: status $rc"
printf 'my notes\n' >"$T/notes.txt"
"$BIN" tune --seq 64 --head-dim 32 --heads 1 --reps 1 --block-m 16 --block-n "$nr" --save \
    --tune-file "$T/notes.txt" >"$T/o" 2>&1; rc=$?
check '[ $rc -eq 1 ] && grep -q "not overwriting" "$T/o" && [ "$(cat "$T/notes.txt")" = "my notes" ]' \
    "foreign file: status $rc"

echo "test_tune.sh: $passes passed, $failures failed"
[ "$failures" -eq 0 ]
