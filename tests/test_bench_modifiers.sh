#!/usr/bin/env bash
# `flashattn bench --modifiers` on a tiny problem: it runs every variant,
# prints a ratio with its target for each modified call, exits 0, and
# rejects bad options. No timing is judged (the machine is shared).
set -u
cli="$1"
out=$("$cli" bench --modifiers --seq 128 --heads 2 --head-dim 32 --docs 4 --reps 1 --threads 1,2) || {
    echo "FAIL: bench --modifiers exited $?"; exit 1; }
fail=0
for v in plain causal "causal as mask" "softcap 30" alibi "bias f32" "document mask" "per-document calls"; do
    n=$(grep -cE "\| $v +\|" <<<"$out")
    [ "$n" -eq 2 ] || { echo "FAIL: '$v' has $n rows, not one per thread count"; fail=1; }
done
n=$(grep -cE '[0-9.]+x of (plain|causal|calls) \(<= [0-9.]+x (PASS|MISS)\)' <<<"$out")
[ "$n" -eq 10 ] || { echo "FAIL: $n ratios with targets, expected 10"; fail=1; }
"$cli" bench --modifiers --seq 100 --docs 8 >/dev/null 2>&1 && { echo "FAIL: --seq not a multiple of --docs accepted"; fail=1; }
"$cli" bench --modifiers --bogus 3 >/dev/null 2>&1 && { echo "FAIL: an unknown option accepted"; fail=1; }
[ $fail -eq 0 ] && echo "test_bench_modifiers: passed"
exit $fail
