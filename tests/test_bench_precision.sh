#!/usr/bin/env bash
# `flashattn bench --precision int8` on a tiny problem: a row per (seq,
# causal, threads, option) with both times, the speed-up against its target, the
# cosine and the error; exit 0; bad options rejected. No timing is judged
# (the machine is shared); the error is: the 8-bit O is close to the exact.
set -u
cli="$1"
out=$("$cli" bench --precision int8 --seq 64,96 --heads 2 --head-dim 32 --reps 1 --threads 1,2) || {
    echo "FAIL: bench --precision exited $?"; exit 1; }
fail=0
for prec in "int8" "int8\+bf16 pv"; do
    rows=$(grep -E "^[12] +\| (64|96) +\| [01] +\| $prec +\| +[0-9.]+ \| +[0-9.]+ \| [0-9.]+x \(>= 2\.5x (PASS|MISS)\) +\| 0\.999[0-9]+ \| [0-9.e-]+\$" <<<"$out")
    n=$(grep -c . <<<"$rows")
    [ "$n" -eq 8 ] || { echo "FAIL: $n well-formed '$prec' rows, expected 8"; echo "$out"; fail=1; }
done
"$cli" bench --precision int4 >/dev/null 2>&1 && { echo "FAIL: --precision int4 accepted"; fail=1; }
"$cli" bench --precision int8 --bogus 3 >/dev/null 2>&1 && { echo "FAIL: an unknown option accepted"; fail=1; }
[ $fail -eq 0 ] && echo "test_bench_precision: passed"
exit $fail
