"""softcap and alibi_slopes through the flash_attn interface (dense, packed,
varlen, KV cache), forward and autograd gradients, against the float64
NumPy reference (attn_reference.py; torch has no softcap to compare with).
Skipped where torch is not installed.

Pass rules as in test_torch.py: O within 1e-5 (float32) or twice the plain
float32 error (16-bit), LSE within 1e-5 / 1e-4; each gradient within
max(2 * plain error, 1e-6 * the largest magnitude of the three).
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import attn_reference as ref  # noqa: E402
from flashattn import _lib  # noqa: E402
from flashattn import (flash_attn_func, flash_attn_kvpacked_func,  # noqa: E402
                       flash_attn_qkvpacked_func, flash_attn_varlen_func,
                       flash_attn_varlen_kvpacked_func, flash_attn_varlen_qkvpacked_func,
                       flash_attn_with_kvcache)
from test_torch import DTYPES, grads, make, max_err, numpy, plain  # noqa: E402

pytestmark = pytest.mark.skipif(not _lib.has("flashattn_bwd"),
                                reason="the C library has no flashattn_bwd")

# (batch, seq_q, seq_k, heads_q, heads_kv, head_dim)
SHAPES = [(2, 17, 45, 4, 2, 16), (1, 40, 21, 6, 2, 32)]
MASKS = [(False, (-1, -1)), (True, (-1, -1)), (False, (6, 2))]
KINDS = ["softcap", "alibi", "alibi_batch", "both"]


def modifiers(kind, batch, heads, seed=0):
    """(torch keyword arguments, the reference's)."""
    g = torch.Generator().manual_seed(50 + seed)
    slopes = lambda *s: (torch.rand(*s, generator=g) * 0.45 + 0.05)
    kw = {}
    if kind in ("softcap", "both"):
        kw["softcap"] = 1.5
    if kind in ("alibi", "both"):
        kw["alibi_slopes"] = slopes(heads)
    if kind == "alibi_batch":
        kw["alibi_slopes"] = slopes(batch, heads)
    ref_kw = {n: (x.numpy() if isinstance(x, torch.Tensor) else x) for n, x in kw.items()}
    return kw, ref_kw


def check_out(out, dtype, ref_fn, *args, **kw):
    expected = torch.from_numpy(ref_fn(*numpy(*args), **kw)[0])
    plain_out = plain(ref_fn, dtype, *args, **kw)[0]
    bound = 1e-5 if dtype == torch.float32 else 2 * max_err(plain_out, expected)
    err = max_err(out, expected)
    assert err <= bound, "out: max abs error %.3g > bound %.3g" % (err, bound)


def check_grads(got, expected, plain_grads):
    scale = max(e.abs().max().item() for e in expected)
    for name, g, e, p in zip("qkv", got, expected, plain_grads):
        assert g.dtype == p.dtype and g.shape == e.shape
        bound = max(2 * max_err(p, e), 1e-6 * scale)
        err = max_err(g, e)
        assert err <= bound, "d%s: max abs error %.3g > bound %.3g" % (name, err, bound)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal,window", MASKS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_flash_attn_func_with_modifiers(shape, kind, causal, window, dtype):
    q, k, v = make(shape, dtype, seed=1)
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(2)).to(dtype)
    mods, ref_mods = modifiers(kind, shape[0], shape[3])
    kw = dict(causal=causal, window_size=window)
    out, lse, _ = flash_attn_func(q, k, v, return_attn_probs=True, **kw, **mods)
    check_out(out, dtype, ref.attention, q, k, v, **kw, **ref_mods)
    _, ref_lse = ref.attention(*numpy(q, k, v), **kw, **ref_mods)
    ref_lse = torch.from_numpy(ref_lse)
    empty = torch.isneginf(ref_lse)   # bottom-right causal, seq_q > seq_k: rows without keys
    assert torch.equal(torch.isneginf(lse), empty)
    assert max_err(lse[~empty], ref_lse[~empty]) <= (1e-5 if dtype == torch.float32 else 1e-4)
    got = grads(lambda *x: flash_attn_func(*x, **kw, **mods), (q, k, v), dout)
    expected = [torch.from_numpy(g) for g in
                ref.attention_backward(*numpy(dout, q, k, v), **kw, **ref_mods)]
    plain_grads = plain(ref.attention_backward, dtype, dout, q, k, v, out=numpy(out)[0], **kw,
                        **ref_mods)
    check_grads(got, expected, plain_grads)


def test_packed_variants_equal_the_unpacked_call():
    g = torch.Generator().manual_seed(3)
    qkv = torch.randn(2, 25, 3, 4, 16, generator=g)
    kv = torch.randn(2, 31, 2, 2, 16, generator=g)
    dout = torch.randn(2, 25, 4, 16, generator=g)
    mods = dict(softcap=2.0, alibi_slopes=torch.rand(2, 4, generator=g) * 0.3)
    f = lambda *x: flash_attn_func(*x, causal=True, **mods)
    dq, dk, dv = grads(f, qkv.unbind(2), dout)
    (dqkv,) = grads(lambda x: flash_attn_qkvpacked_func(x, causal=True, **mods), [qkv], dout)
    assert torch.equal(dqkv, torch.stack([dq, dk, dv], 2))
    q = qkv[:, :, 0]
    assert torch.equal(flash_attn_kvpacked_func(q, kv, **mods), flash_attn_func(q, *kv.unbind(2),
                                                                                **mods))
    dq, dk, dv = grads(lambda *x: flash_attn_func(*x, **mods), [q, *kv.unbind(2)], dout)
    dq2, dkv = grads(lambda *x: flash_attn_kvpacked_func(*x, **mods), [q, kv], dout)
    assert torch.equal(dq2, dq) and torch.equal(dkv, torch.stack([dk, dv], 2))


def test_slopes_get_no_gradient_and_any_float_dtype_is_used_as_float32():
    q, k, v = make((1, 9, 12, 2, 2, 16), torch.float32, seed=4, requires_grad=True)
    slopes = torch.tensor([0.25, 0.125], dtype=torch.float64, requires_grad=True)
    out = flash_attn_func(q, k, v, alibi_slopes=slopes)
    out.sum().backward()
    assert slopes.grad is None and q.grad is not None
    assert torch.equal(out, flash_attn_func(q, k, v, alibi_slopes=slopes.float().detach()))
    with pytest.raises(ValueError, match="alibi_slopes must be a float tensor"):
        flash_attn_func(q, k, v, alibi_slopes=[0.25, 0.125])
    with pytest.raises(ValueError, match="alibi_slopes must have shape"):
        flash_attn_func(q, k, v, alibi_slopes=torch.ones(3))
    with pytest.raises(ValueError, match="softcap"):
        flash_attn_func(q, k, v, softcap=-1.0)


def varlen_case(dtype, seed=5):
    pairs = [(3, 5), (0, 4), (9, 2), (12, 20)]
    cu = lambda n: torch.tensor(np.concatenate([[0], np.cumsum(n)]), dtype=torch.int32)
    cu_q, cu_k = cu([p[0] for p in pairs]), cu([p[1] for p in pairs])
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g).to(dtype)
    q, k, v = mk(int(cu_q[-1]), 4, 16), mk(int(cu_k[-1]), 2, 16), mk(int(cu_k[-1]), 2, 16)
    return q, k, v, cu_q, cu_k


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_with_modifiers(causal, dtype):
    q, k, v, cu_q, cu_k = varlen_case(dtype)
    mods, ref_mods = modifiers("both", 4, 4)
    mods["alibi_slopes"] = torch.rand(4, 4, generator=torch.Generator().manual_seed(6)) * 0.4
    ref_mods["alibi_slopes"] = mods["alibi_slopes"].numpy()
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(7)).to(dtype)
    f = lambda *x: flash_attn_varlen_func(*x, cu_q, cu_k, 12, 20, causal=causal, **mods)
    out = f(q, k, v)
    rkw = dict(causal=causal, **ref_mods)
    check_out(out, dtype, ref.attention_varlen, q, k, v, cu_q, cu_k, **rkw)
    got = grads(f, (q, k, v), dout)
    expected = [torch.from_numpy(g) for g in
                ref.attention_varlen_backward(*numpy(dout, q, k, v), cu_q.numpy(), cu_k.numpy(),
                                              **rkw)]
    plain_grads = [torch.from_numpy(g).to(dtype) for g in ref.attention_varlen_backward(
        *numpy(dout, q, k, v), cu_q.numpy(), cu_k.numpy(), dtype=np.float32, plain=True,
        out=numpy(out)[0], **rkw)]
    check_grads(got, expected, plain_grads)


def test_varlen_packed_variants_equal_the_unpacked_call():
    q, k, v, cu_q, cu_k = varlen_case(torch.float32, seed=8)
    mods = dict(softcap=3.0, alibi_slopes=torch.tensor([0.1, 0.2, 0.3, 0.4]))
    kv = torch.stack([k, v], 1)
    want = flash_attn_varlen_func(q, k, v, cu_q, cu_k, 12, 20, causal=True, **mods)
    got = flash_attn_varlen_kvpacked_func(q, kv, cu_q, cu_k, 12, 20, causal=True, **mods)
    assert torch.equal(want, got)
    qkv = torch.stack([q, q.flip(0), q.flip(1)], 1)
    want = flash_attn_varlen_func(*qkv.unbind(1), cu_q, cu_q, 12, 12, **mods)
    assert torch.equal(want, flash_attn_varlen_qkvpacked_func(qkv, cu_q, 12, **mods))


@pytest.mark.skipif(not _lib.has("flashattn_decode"), reason="the C library has no decode")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_kvcache_with_modifiers(dtype):
    from test_torch import kvcache_case
    q, k_cache, v_cache, k, v, lens = kvcache_case(dtype, seq_q=2)
    slopes = torch.tensor([[0.3, 0.1, 0.05, 0.2], [0.1, 0.1, 0.4, 0.02], [0.2, 0.3, 0.1, 0.1]])
    out = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=lens, causal=True,
                                  softcap=2.0, alibi_slopes=slopes)
    for b, n in enumerate((lens + 2).tolist()):
        args = (q[b:b + 1], k_cache[b:b + 1, :n], v_cache[b:b + 1, :n])
        check_out(out[b:b + 1], dtype, ref.attention, *args, causal=True, softcap=2.0,
                  alibi_slopes=slopes[b].numpy())
