#!/usr/bin/env bash
# `flashattn bench --varlen` (forward and --bwd) on tiny batches: the table
# prints, the JSON rows carry every documented key, the lengths are the
# seed's on every machine, FLOPs and ratios follow from the lengths and the
# times, and the check found varlen bit-identical to the per-sequence calls.
# No timing is judged (the machine is shared); only the output's arithmetic.
set -u
cli="$1"
fail=0
passed=0
check() { # name, command...
    local name="$1"; shift
    if "$@"; then passed=$((passed + 1)); else fail=$((fail + 1)); echo "FAIL: $name"; fi
}

validate() { # file, rows, backward (0/1), seqs, heads, head_dim
    python3 - "$@" <<'PY'
import json, math, sys
path, want, bwd, n, h, d = sys.argv[1], *map(int, sys.argv[2:])
rows = [json.loads(l) for l in open(path) if l.strip()]
assert len(rows) == want, f"{len(rows)} rows, expected {want}"
num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
for r in rows:
    assert r["mode"] == ("varlen backward" if bwd else "varlen forward"), r
    for k in ["varlen_ms", "padded_ms", "perseq_ms", "varlen_min_ms", "varlen_max_ms",
              "useful_flops", "padded_flops", "speedup_vs_padded", "speedup_vs_perseq",
              "target_vs_padded", "varlen_gflops"]:
        assert k in r and num(r[k]) and r[k] > 0, f"{k} = {r.get(k)!r} in {r}"
    L = r["lengths"]
    assert len(L) == n == r["seqs"] and sum(L) == r["total"] and max(L) == r["longest"], r
    assert all(r["min_len"] <= x <= r["max_len"] for x in L), L
    pairs = (lambda x: x * (x + 1) // 2) if r["causal"] else (lambda x: x * x)
    per_pair = 4 * h * d * (2.5 if bwd else 1)
    assert r["useful_flops"] == per_pair * sum(map(pairs, L)), r
    assert r["padded_flops"] == per_pair * n * pairs(max(L)), r
    assert abs(r["target_vs_padded"] - 0.9 * r["padded_flops"] / r["useful_flops"]) <= 1e-6 * r["target_vs_padded"]
    assert abs(r["speedup_vs_padded"] - r["padded_ms"] / r["varlen_ms"]) <= 1e-6 * r["speedup_vs_padded"]
    assert r["pass_vs_padded"] == (r["speedup_vs_padded"] >= r["target_vs_padded"]), r
    assert r["varlen_min_ms"] <= r["varlen_ms"] <= r["varlen_max_ms"], r
    if r["threads"] == 1:
        assert r["scaling_vs_1thread"] is None and r["pass_scaling"] is None, r
    else:
        assert num(r["scaling_vs_1thread"]) and r["target_scaling"] == 0.925 * r["threads"], r
    assert r["check_bit_identical"] is True, r
PY
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
small="--seqs 4 --max-len 128 --reps 1"

check "varlen table" bash -c "'$cli' bench --varlen $small >'$tmp/t.txt' && grep -q 'vs padded' '$tmp/t.txt' && grep -q 'bit-identical' '$tmp/t.txt'"
# seed 1's lengths for these options, the same on every machine
check "varlen lengths" grep -q 'lengths (4): 95 107 126 87$' "$tmp/t.txt"
check "varlen --json" "$cli" bench --varlen --json $small --heads 2 --head-dim 32 >"$tmp/f.json"
check "varlen rows" validate "$tmp/f.json" 4 0 4 2 32
check "varlen --bwd --json GQA" "$cli" bench --varlen --bwd --json --seqs 3 --min-len 5 --max-len 90 \
    --heads 4 --heads-kv 2 --head-dim 16 --reps 2 --causal --seed 7 >"$tmp/b.json"
check "varlen bwd rows" validate "$tmp/b.json" 2 1 3 4 16
check "varlen bf16 tiles" bash -c "'$cli' bench --varlen --seqs 3 --max-len 100 --reps 1 --dtype bf16 \
    --block-m 32 --block-n 64 --threads 1 --no-causal | grep -q 'tiles 32x64: O, LSE bit-identical'"
check "varlen --help" bash -c "'$cli' bench --varlen --help | grep -q -- '--min-len'"
check "bench --help lists --varlen" bash -c "'$cli' bench --help | grep -q -- '--varlen'"
check "varlen bad option" bash -c "! '$cli' bench --varlen --nope 2>/dev/null"
check "varlen bad lengths" bash -c "! '$cli' bench --varlen --min-len 200 --max-len 100 2>/dev/null"
check "varlen bad heads" bash -c "! '$cli' bench --varlen --heads 5 --heads-kv 2 2>/dev/null"

echo "test_bench_varlen: $passed passed, $fail failed"
[ "$fail" -eq 0 ]
