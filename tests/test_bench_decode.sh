#!/usr/bin/env bash
# `flashattn bench --decode --json` on tiny caches, contiguous and paged:
# every documented key is present, numbers are numbers, kv_gbs and
# pct_bandwidth follow from the others, and bad options fail. No timing is
# judged (the machine is shared); only the output's shape and arithmetic.
set -u
cli="$1"
fail=0
passed=0
check() { # name, command...
    local name="$1"; shift
    if "$@"; then passed=$((passed + 1)); else fail=$((fail + 1)); echo "FAIL: $name"; fi
}

validate() { # file, expected rows, page size
    python3 - "$1" "$2" "$3" <<'PY'
import json, math, sys
path, want, page = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = [json.loads(l) for l in open(path) if l.strip()]
assert len(rows) == want, f"{len(rows)} rows, expected {want}"
num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
keys = ["kv_len", "kv_dtype", "batch", "heads", "heads_kv", "head_dim", "decode_ms", "kv_gbs",
        "pct_bandwidth", "bandwidth_gbs", "bandwidth_best_gbs", "page_size", "threads",
        "workspace_bytes"]
for r in rows:
    missing = [k for k in keys if k not in r]
    assert not missing, f"missing keys {missing} in {r}"
    for k in ["decode_ms", "kv_gbs", "pct_bandwidth", "bandwidth_gbs", "bandwidth_best_gbs"]:
        assert num(r[k]) and r[k] > 0, f"{k} = {r[k]!r} is not a positive number"
    es = 4 if r["kv_dtype"] == "f32" else 2
    kv = 2 * r["batch"] * r["kv_len"] * r["heads_kv"] * r["head_dim"] * es
    assert r["kv_bytes"] == kv, (r["kv_bytes"], kv)
    assert abs(r["kv_gbs"] - kv / (r["decode_ms"] * 1e6)) <= 1e-6 * r["kv_gbs"], r
    assert abs(r["pct_bandwidth"] - 100 * r["kv_gbs"] / r["bandwidth_gbs"]) <= 1e-6 * r["pct_bandwidth"], r
    # the median of the reads beside the calls is at most their best
    assert r["bandwidth_best_gbs"] >= r["bandwidth_gbs"], r
    assert r["page_size"] == page and r["workspace_bytes"] > 0, r
PY
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
small="--heads 4 --heads-kv 2 --head-dim 32 --reps 3 --threads 2 --bw-mib 64"

check "decode contiguous" "$cli" bench --decode --json --kv-len 64,100 --batch 2 $small >"$tmp/c.json"
check "decode contiguous rows" validate "$tmp/c.json" 2 0
check "decode paged bf16" "$cli" bench --decode --json --kv-len 77 --batch 3 --page-size 16 \
    --kv-dtype bf16 --seq-q 2 --splits 3 $small >"$tmp/p.json"
check "decode paged rows" validate "$tmp/p.json" 1 16
check "decode table" bash -c "'$cli' bench --decode --kv-len 50 $small | grep -q '% bandwidth'"
check "decode --help" bash -c "'$cli' bench --decode --help | grep -q 'kv-len'"
check "bench --help lists --decode" bash -c "'$cli' bench --help | grep -q -- '--decode'"
check "decode bad option" bash -c "! '$cli' bench --decode --nope 2>/dev/null"
check "decode bad heads" bash -c "! '$cli' bench --decode --heads 5 --heads-kv 2 2>/dev/null"
check "decode bad kv-len" bash -c "! '$cli' bench --decode --kv-len 0 2>/dev/null"
check "decode bad dtype" bash -c "! '$cli' bench --decode --kv-dtype f8 2>/dev/null"

# --cache: the quantised step beside the float one; its bytes count 1 a
# value plus 4 a per-token scale, its ratio and rates follow from the rest,
# and O stays close to the float cache's.
validate_cache() { # file, expected rows
    python3 - "$1" "$2" <<'PY'
import json, sys
path, want = sys.argv[1], int(sys.argv[2])
rows = [json.loads(l) for l in open(path) if l.strip()]
assert len(rows) == want, f"{len(rows)} rows, expected {want}"
for r in rows:
    per = lambda k: 4 if r[k] == "token" else 0
    n = r["batch"] * r["kv_len"] * r["heads_kv"]
    want_bytes = n * (r["head_dim"] + per("k_scale")) + n * (r["head_dim"] + per("v_scale"))
    assert r["cache_bytes"] == want_bytes, (r["cache_bytes"], want_bytes)
    assert abs(r["ratio"] - r["cache_ms"] / r["decode_ms"]) <= 1e-6 * r["ratio"], r
    assert abs(r["cache_gbs"] - want_bytes / (r["cache_ms"] * 1e6)) <= 1e-6 * r["cache_gbs"], r
    assert 0 < r["err_vs_float"] < 0.2 and 0.98 < r["cosine_vs_float"] <= 1.0, r
PY
}
check "decode int8 cache" "$cli" bench --decode --json --kv-len 64,100 --cache int8 --k-scale channel $small >"$tmp/q.json"
check "decode int8 rows" validate "$tmp/q.json" 2 0
check "decode int8 cache fields" validate_cache "$tmp/q.json" 2
check "decode fp8 paged outliers" "$cli" bench --decode --json --kv-len 80 --cache fp8_e4m3 --page-size 16 \
    --outliers --v-scale head $small >"$tmp/f.json"
check "decode fp8 cache fields" validate_cache "$tmp/f.json" 1
check "decode cache table" bash -c "'$cli' bench --decode --kv-len 50 --cache fp8_e5m2 $small | grep -q 'cosine'"
check "decode bad cache" bash -c "! '$cli' bench --decode --cache int4 2>/dev/null"
check "decode bad scale kind" bash -c "! '$cli' bench --decode --cache int8 --k-scale row 2>/dev/null"

echo "test_bench_decode: $passed passed, $fail failed"
[ "$fail" -eq 0 ]
