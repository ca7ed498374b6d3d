"""Quantised KV caches from Python: quantize_kv_cache and flash_attn_with_kvcache
on int8 / fp8 caches (every scale kind, appends, paged), against an FP64
reference on the dequantised cache; bad scales raise."""

import math

import pytest

torch = pytest.importorskip("torch")

from flashattn import flash_attn_interface as fai  # noqa: E402
from flashattn import BadArgumentError  # noqa: E402

QMAX = {torch.int8: 127.0, torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}
DTYPES = [torch.int8, torch.float8_e4m3fn, torch.float8_e5m2]


def narrow(y, dtype):
    """The library's rule on x / scale: round to nearest even, saturating."""
    top = QMAX[dtype]
    if dtype == torch.int8:
        return torch.nan_to_num(torch.round(y), nan=0.0).clamp(-127, 127).to(torch.int8)
    return y.clamp(-top, top).to(dtype)


def dequant(c, s):
    """The cache's values in float64: element * scale (in float32, as the contract says)."""
    b, n, h, d = c.shape
    if s.dim() == 3:
        s = s.reshape(b, n, h, 1)
    elif s.dim() == 2:
        s = s.reshape(1, 1, h, d)
    else:
        s = s.reshape(1, 1, -1, 1)
    return (c.to(torch.float32) * s).double()


def reference(q, k, v, lens, causal):
    """O of each sequence over its first lens[b] rows, in float64."""
    b, sq, hq, d = q.shape
    g = hq // k.shape[2]
    out = torch.zeros(b, sq, hq, v.shape[3], dtype=torch.float64)
    for i in range(b):
        n = int(lens[i])
        kk = k[i, :n].repeat_interleave(g, dim=1).transpose(0, 1)
        vv = v[i, :n].repeat_interleave(g, dim=1).transpose(0, 1)
        s = q[i].double().transpose(0, 1) @ kk.transpose(1, 2) / math.sqrt(d)
        if causal:
            j = torch.arange(n)
            row = torch.arange(sq).unsqueeze(1) + n - sq
            s = s.masked_fill(j.unsqueeze(0) > row, float("-inf"))
        out[i] = (torch.softmax(s, dim=-1) @ vv).transpose(0, 1)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kinds", [("token", "token"), ("channel", "token"), ("head", "channel")])
def test_decode_on_quantised_cache(dtype, kinds):
    torch.manual_seed(1)
    b, n, hkv, hq, d, new = 2, 80, 2, 8, 64, 3
    k_f = torch.randn(b, n, hkv, d)
    k_f[..., 3] *= 8  # an outlier channel
    v_f = torch.randn(b, n, hkv, d)
    kc, ks = fai.quantize_kv_cache(k_f, dtype, kinds[0])
    vc, vs = fai.quantize_kv_cache(v_f, dtype, kinds[1])
    assert kc.dtype == dtype and ks.dtype == torch.float32
    lens = torch.tensor([60, 41], dtype=torch.int32)
    q = torch.randn(b, new, hq, d)
    k_new, v_new = torch.randn(b, new, hkv, d), torch.randn(b, new, hkv, d)
    out = fai.flash_attn_with_kvcache(q, kc, vc, k_new, v_new, cache_seqlens=lens, causal=True,
                                      k_scale=ks, v_scale=vs)
    # the appended rows: quantised by the rule with their own (per token) or the fixed scales
    for c, s, x, kind in ((kc, ks, k_new, kinds[0]), (vc, vs, v_new, kinds[1])):
        for i in range(b):
            rows = slice(int(lens[i]), int(lens[i]) + new)
            if kind == "token":
                want_s = x[i].abs().amax(dim=-1) / QMAX[dtype]
                assert torch.equal(s[i, rows], want_s)
                scale = want_s.unsqueeze(-1)
            else:
                scale = s.reshape(1, hkv, -1)
            want = narrow(x[i] / scale, dtype)
            assert torch.equal(c[i, rows].view(torch.uint8), want.view(torch.uint8))
    ref = reference(q, dequant(kc, ks), dequant(vc, vs), lens + new, True)
    assert (out.double() - ref).abs().max().item() <= 1e-5


def test_quantisation_error_is_small():
    """int8 per-token K and V against the float cache: the attention moves little."""
    torch.manual_seed(2)
    k, v, q = torch.randn(1, 512, 2, 128), torch.randn(1, 512, 2, 128), torch.randn(1, 1, 8, 128)
    exact = fai.flash_attn_with_kvcache(q, k, v)
    kc, ks = fai.quantize_kv_cache(k, torch.int8)
    vc, vs = fai.quantize_kv_cache(v, torch.int8)
    approx = fai.flash_attn_with_kvcache(q, kc, vc, k_scale=ks, v_scale=vs)
    cos = torch.nn.functional.cosine_similarity(exact.flatten(), approx.flatten(), dim=0)
    assert cos.item() > 0.999


def test_paged_quantised_cache_and_scalar_scale():
    torch.manual_seed(3)
    pages, page, hkv, d = 6, 16, 1, 32
    pool = torch.randn(pages, page, hkv, d)
    kc, _ = fai.quantize_kv_cache(pool, "fp8_e4m3", "head")
    vc, _ = fai.quantize_kv_cache(pool * 0.5, "fp8_e4m3", "head")
    table = torch.tensor([[4, 1, 3], [0, 5, 2]], dtype=torch.int32)
    lens = torch.tensor([40, 17], dtype=torch.int32)
    q = torch.randn(2, 1, 4, d)
    out = fai.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, block_table=table,
                                      k_scale=0.02, v_scale=torch.tensor(0.01))
    k_log = torch.stack([torch.cat([kc[p] for p in row]) for row in table])
    v_log = torch.stack([torch.cat([vc[p] for p in row]) for row in table])
    k_ref = (k_log.to(torch.float32) * 0.02).double()
    v_ref = (v_log.to(torch.float32) * 0.01).double()
    ref = reference(q, k_ref, v_ref, lens, False)
    assert (out.double() - ref).abs().max().item() <= 1e-5


def test_bad_scales():
    kc = torch.zeros(1, 8, 2, 16, dtype=torch.int8)
    q = torch.randn(1, 1, 2, 16)
    ok = torch.ones(1, 8, 2)
    with pytest.raises(ValueError):
        fai.flash_attn_with_kvcache(q, kc, kc)  # no scales
    with pytest.raises(ValueError):
        fai.flash_attn_with_kvcache(q, kc, kc, k_scale=ok, v_scale=torch.ones(3, 3))
    with pytest.raises(ValueError):
        fai.flash_attn_with_kvcache(q, kc, kc, k_scale=ok.double(), v_scale=ok)
    with pytest.raises(BadArgumentError):  # a fixed scale must be > 0 (the library checks)
        fai.flash_attn_with_kvcache(q, kc, kc, k_scale=0.0, v_scale=ok)
    with pytest.raises(ValueError):  # scales on a float cache
        fai.flash_attn_with_kvcache(q, kc.float(), kc.float(), k_scale=ok, v_scale=ok)
    with pytest.raises(ValueError):  # an int8 q
        fai.flash_attn_with_kvcache(q.to(torch.int8), kc, kc, k_scale=ok, v_scale=ok)
    with pytest.raises(ValueError):
        fai.quantize_kv_cache(torch.randn(1, 2, 1, 8), torch.float16)
    with pytest.raises(ValueError):
        fai.quantize_kv_cache(torch.randn(1, 2, 1, 8), torch.int8, "row")
