"""Quantised KV caches through the NumPy API: quantize_kv_cache and
attention_with_kvcache on int8 / fp8 caches (every scale kind, appends,
paged), against an FP64 reference on the dequantised cache; the appended
rows bit for bit the documented rule; bad scales raise."""

import ml_dtypes
import numpy as np
import pytest

import flashattn
from flashattn import BadArgumentError

QMAX = {"int8": 127.0, "fp8_e4m3": 448.0, "fp8_e5m2": 57344.0}
NP = {"int8": np.int8, "fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2}


def narrow(y, name):
    """x / scale to the cache dtype: round to nearest even, saturating."""
    top = QMAX[name]
    y = np.asarray(y, np.float32)
    if name == "int8":
        return np.clip(np.nan_to_num(np.rint(y), nan=0.0), -127, 127).astype(np.int8)
    return np.clip(y, -top, top).astype(NP[name])


def dequant(c, s):
    b, n, h, d = c.shape
    s = s.reshape(b, n, h, 1) if s.ndim == 3 else s.reshape(1, 1, h, d) if s.ndim == 2 \
        else np.asarray(s, np.float32).reshape(1, 1, -1, 1)
    return (c.astype(np.float32) * s).astype(np.float64)


def reference(q, k, v, lens, causal):
    b, sq, hq, d = q.shape
    g = hq // k.shape[2]
    out = np.zeros((b, sq, hq, v.shape[3]))
    for i in range(b):
        n = int(lens[i])
        for h in range(hq):
            kk, vv = k[i, :n, h // g], v[i, :n, h // g]
            s = q[i, :, h].astype(np.float64) @ kk.T / np.sqrt(d)
            if causal:
                s = np.where(np.arange(n)[None, :] > np.arange(sq)[:, None] + n - sq, -np.inf, s)
            p = np.exp(s - s.max(axis=1, keepdims=True))
            out[i, :, h] = (p / p.sum(axis=1, keepdims=True)) @ vv
    return out


@pytest.mark.parametrize("name", ["int8", "fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("kinds", [("token", "token"), ("channel", "token"), ("head", "channel")])
def test_decode_on_quantised_cache(name, kinds):
    rng = np.random.default_rng(1)
    b, n, hkv, hq, d, new = 2, 70, 2, 8, 32, 3
    k_f = rng.standard_normal((b, n, hkv, d), dtype=np.float32)
    k_f[..., 5] *= 8  # an outlier channel
    v_f = rng.standard_normal((b, n, hkv, d), dtype=np.float32)
    kc, ks = flashattn.quantize_kv_cache(k_f, name, kinds[0])
    vc, vs = flashattn.quantize_kv_cache(v_f, name, kinds[1])
    assert kc.dtype == np.dtype(NP[name]) and ks.dtype == np.float32
    lens = np.array([50, 31], np.int32)
    q = rng.standard_normal((b, new, hq, d), dtype=np.float32)
    k_new = rng.standard_normal((b, new, hkv, d), dtype=np.float32)
    v_new = rng.standard_normal((b, new, hkv, d), dtype=np.float32)
    out = flashattn.attention_with_kvcache(q, kc, vc, k_new, v_new, cache_seqlens=lens,
                                           causal=True, k_scale=ks, v_scale=vs)
    for c, s, x, kind in ((kc, ks, k_new, kinds[0]), (vc, vs, v_new, kinds[1])):
        for i in range(b):
            rows = slice(int(lens[i]), int(lens[i]) + new)
            if kind == "token":
                want_s = np.abs(x[i]).max(axis=-1) / np.float32(QMAX[name])
                np.testing.assert_array_equal(s[i, rows], want_s)
                scale = want_s[..., None]
            else:
                scale = s.reshape(1, hkv, -1)
            want = narrow(x[i] / scale, name)
            np.testing.assert_array_equal(c[i, rows].view(np.uint8), want.view(np.uint8))
    ref = reference(q, dequant(kc, ks), dequant(vc, vs), lens + new, True)
    assert np.abs(out - ref).max() <= 1e-5


def test_quantize_rule_and_paged_number_scales():
    rng = np.random.default_rng(2)
    pool = rng.standard_normal((5, 16, 1, 16), dtype=np.float32)
    kc, ks = flashattn.quantize_kv_cache(pool, "fp8_e4m3", "head")
    np.testing.assert_array_equal(ks, np.abs(pool).max(axis=(0, 1, 3)) / np.float32(448))
    np.testing.assert_array_equal(kc.view(np.uint8), narrow(pool / ks.reshape(1, 1, 1, 1),
                                                            "fp8_e4m3").view(np.uint8))
    table = np.array([[3, 0, 4], [1, 2, 0]], np.int32)
    lens = np.array([40, 20], np.int32)
    q = rng.standard_normal((2, 1, 4, 16), dtype=np.float32)
    out = flashattn.attention_with_kvcache(q, kc, kc, cache_seqlens=lens, block_table=table,
                                           k_scale=0.05, v_scale=0.01)
    log = np.stack([np.concatenate([kc[p] for p in row]) for row in table]).astype(np.float32)
    ref = reference(q, (log * np.float32(0.05)).astype(np.float64),
                    (log * np.float32(0.01)).astype(np.float64), lens, False)
    assert np.abs(out - ref).max() <= 1e-5


def test_bad_scales():
    kc = np.zeros((1, 8, 2, 16), np.int8)
    q = np.ones((1, 1, 2, 16), np.float32)
    ok = np.ones((1, 8, 2), np.float32)
    with pytest.raises(ValueError):
        flashattn.attention_with_kvcache(q, kc, kc)
    with pytest.raises(ValueError):
        flashattn.attention_with_kvcache(q, kc, kc, k_scale=ok, v_scale=np.ones((3, 3), np.float32))
    with pytest.raises(ValueError):
        flashattn.attention_with_kvcache(q, kc, kc, k_scale=ok.astype(np.float64), v_scale=ok)
    with pytest.raises(BadArgumentError):
        flashattn.attention_with_kvcache(q, kc, kc, k_scale=-1.0, v_scale=ok)
    with pytest.raises(ValueError):
        flashattn.attention_with_kvcache(q, kc.astype(np.float32), kc.astype(np.float32),
                                         k_scale=ok, v_scale=ok)
    with pytest.raises(ValueError):
        flashattn.attention_with_kvcache(q.astype(np.int8), kc, kc, k_scale=ok, v_scale=ok)
    with pytest.raises(ValueError):
        flashattn.quantize_kv_cache(np.ones((1, 2, 1, 8), np.float32), "int4")
    with pytest.raises(ValueError):
        flashattn.quantize_kv_cache(np.ones((1, 2, 1, 8), np.float32), "int8", "row")
    with pytest.raises(BadArgumentError):  # calibrating on a NaN
        flashattn.quantize_kv_cache(np.full((1, 2, 1, 8), np.nan, np.float32), "int8", "channel")
