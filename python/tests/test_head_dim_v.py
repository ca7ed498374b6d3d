"""A value head size different from the query/key one (MLA's 576 / 512):
the forward and the KV-cache call from NumPy against the float64
reference (the pass rules of test_numpy_forward), from torch against SDPA,
and the gradients against float64 autograd."""

import ml_dtypes
import numpy as np
import pytest

import attn_reference as ref
import flashattn
from flashattn import numpy_api
from test_numpy_forward import check

BF16 = np.dtype(ml_dtypes.bfloat16)


def make(b, sq, sk, hq, hk, d, dv, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((b, sq, hq, d)).astype(dtype),
            rng.standard_normal((b, sk, hk, d)).astype(dtype),
            rng.standard_normal((b, sk, hk, dv)).astype(dtype))


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16), BF16], ids=str)
@pytest.mark.parametrize("shape", [(2, 17, 33, 4, 2, 64, 32), (1, 40, 40, 2, 1, 24, 100),
                                   (1, 3, 70, 16, 1, 576, 512)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("causal", [False, True])
def test_forward_matches_reference(shape, causal, dtype):
    q, k, v = make(*shape, dtype)
    o, lse = flashattn.attention(q, k, v, causal=causal, return_lse=True)
    assert o.shape == q.shape[:3] + v.shape[3:]
    check(q, k, v, o, lse, causal=causal)


def test_kvcache_appends_and_attends():
    q, k, v = make(2, 2, 50, 8, 2, 96, 40, np.float32, seed=3)
    kc, vc = np.zeros((2, 64, 2, 96), np.float32), np.zeros((2, 64, 2, 40), np.float32)
    kc[:, :48], vc[:, :48] = k[:, :48], v[:, :48]
    o = numpy_api.attention_with_kvcache(q, kc, vc, k[:, 48:], v[:, 48:],
                                         cache_seqlens=np.array([48, 48], np.int32), causal=True)
    assert o.shape == (2, 2, 8, 40)
    assert np.array_equal(vc[:, 48:50], v[:, 48:]) and np.array_equal(kc[:, 48:50], k[:, 48:])
    ro, _ = ref.attention(q, k, v, causal=True)
    assert np.abs(o - ro).max() <= 1e-5


def test_mismatched_o_is_refused():
    q, k, v = make(1, 4, 8, 2, 1, 64, 32, np.float32)
    with pytest.raises(ValueError, match=r"out must have shape \(1, 4, 2, 32\)"):
        flashattn.attention(q, k, v, out=np.empty(q.shape, np.float32))


def test_torch_forward_and_kvcache_match_sdpa():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    from flashattn import flash_attn_func, flash_attn_with_kvcache, scaled_dot_product_attention
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 30, 4, 64, generator=g), torch.randn(2, 45, 4, 64, generator=g),
               torch.randn(2, 45, 4, 48, generator=g))
    want = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                          v.transpose(1, 2)).transpose(1, 2)
    assert (flash_attn_func(q, k, v) - want).abs().max() <= 1e-5
    got = scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    assert (got.transpose(1, 2) - want).abs().max() <= 1e-5
    out = flash_attn_with_kvcache(q, k, v, cache_seqlens=45)
    assert out.shape == (2, 30, 4, 48) and (out - want).abs().max() <= 1e-5


def test_torch_gradients_match_float64_autograd():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    from flashattn import flash_attn_func, scaled_dot_product_attention
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 20, 4, 40, generator=g), torch.randn(2, 26, 2, 40, generator=g),
               torch.randn(2, 26, 2, 72, generator=g))
    dout = torch.randn(2, 20, 4, 72, generator=g)
    ins = [t.clone().requires_grad_() for t in (q, k, v)]
    flash_attn_func(*ins, causal=True).backward(dout)
    ref = [t.double().requires_grad_() for t in (q, k, v)]
    kr, vr = (t.repeat_interleave(2, dim=2) for t in ref[1:])
    F.scaled_dot_product_attention(ref[0].transpose(1, 2), kr.transpose(1, 2), vr.transpose(1, 2),
                                   attn_mask=torch.ones(20, 26, dtype=torch.bool).tril(6)
                                   ).transpose(1, 2).backward(dout.double())
    for got, want in zip(ins, ref):
        assert (got.grad.double() - want.grad).abs().max() <= 2e-5
    ins2 = [t.clone().transpose(1, 2).requires_grad_() for t in (q, k, v)]
    scaled_dot_product_attention(*ins2, enable_gqa=True).sum().backward()
    assert ins2[2].grad.shape == (2, 2, 26, 72)
