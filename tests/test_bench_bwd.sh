#!/usr/bin/env bash
# `flashattn bench --bwd --json` on tiny shapes: the documented keys are
# present, numbers are numbers, FLOPs are 2.5x the forward's over the pairs
# the mask lets through, bwd_gflops and bwd_over_fwd follow from the times.
# No timing is judged (the machine is shared); only the output's arithmetic.
set -u
cli="$1"
fail=0
passed=0
check() { # name, command...
    local name="$1"; shift
    if "$@"; then passed=$((passed + 1)); else fail=$((fail + 1)); echo "FAIL: $name"; fi
}

validate() { # file, rows, causal (0/1), batch, heads, head_dim, seq_q, seq_k
    python3 - "$@" <<'PY'
import json, math, sys
path, want, causal, b, h, d, sq, sk = sys.argv[1], *map(int, sys.argv[2:])
rows = [json.loads(l) for l in open(path) if l.strip()]
assert len(rows) == want, f"{len(rows)} rows, expected {want}"
num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
for r in rows:
    assert r["mode"] == "backward", r
    for k in ["bwd_ms", "bwd_gflops", "pct_peak", "fwd_ms", "bwd_over_fwd", "flops", "workspace_bytes"]:
        assert k in r and num(r[k]) and r[k] > 0, f"{k} = {r.get(k)!r} in {r}"
    diag = sk - sq  # bottom-right alignment, the default
    pairs = sum(min(sk, i + diag + 1) if causal else sk for i in range(sq) if not causal or i + diag >= 0)
    assert r["flops"] == 2.5 * 4 * b * h * pairs * d, (r["flops"], pairs)
    assert abs(r["bwd_gflops"] * r["bwd_ms"] * 1e6 - r["flops"]) <= 1e-6 * r["flops"], r
    assert abs(r["bwd_over_fwd"] - r["bwd_ms"] / r["fwd_ms"]) <= 1e-6 * r["bwd_over_fwd"], r
    assert r["bwd_ms"] == r["flash_ms"] and r["standard_ms"] is None, r
PY
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check "bench --bwd --json GQA" "$cli" bench --bwd --json --seq 24 --heads 4 --heads-kv 2 \
    --head-dim 32 --reps 2 --threads 2 >"$tmp/a.json"
check "rows GQA" validate "$tmp/a.json" 1 0 1 4 32 24 24
check "bench --bwd --json causal bf16" "$cli" bench --bwd --json --seq 40 --seq-k 57 --heads 2 \
    --head-dim 16 --dtype bf16 --causal --reps 1 --threads 1 >"$tmp/b.json"
check "rows causal" validate "$tmp/b.json" 1 1 1 2 16 40 57
check "bench --bwd table" bash -c "'$cli' bench --bwd --seq 16 --heads 1 --head-dim 8 --reps 1 | grep -q 'bwd/fwd'"
echo "test_bench_bwd: $passed passed, $fail failed"
[ "$fail" -eq 0 ]
