"""The flash_attn varlen functions, flash_attn_with_kvcache's rotary,
cache_batch_idx, cache_leftpad and cu_seqlens_q, and unpad_input/pad_input
on torch tensors. Skipped where torch is not installed.

Pass rules those of test_varlen.py (the float64 reference on each sequence
alone), gradients through autograd; one case also against float64 autograd
through torch's SDPA on each sequence.
"""

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import attn_reference as ref  # noqa: E402
import flashattn  # noqa: E402
from flashattn import _lib  # noqa: E402
from flashattn import (flash_attn_func, flash_attn_varlen_func,  # noqa: E402
                       flash_attn_varlen_kvpacked_func, flash_attn_varlen_qkvpacked_func,
                       flash_attn_with_kvcache)
from test_numpy_decode import paged  # noqa: E402
from test_varlen import LONG, MASKS, MIX, check_forward, check_grads, offsets  # noqa: E402
from test_varlen_decode import Case, check_sequences, rotary_tables  # noqa: E402

pytestmark = pytest.mark.skipif(
    not (_lib.has("flashattn_varlen_init_size") and _lib.has("flashattn_bwd")),
    reason="the C library has no variable-length batches")

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def to_numpy(t):
    """A tensor's values as a NumPy array of the same dtype (bfloat16 as
    ml_dtypes.bfloat16, which torch cannot export itself)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def from_numpy(a):
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def make(pairs, dtype, heads=(4, 2), dim=16, seed=0, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    cu_q, cu_k = offsets([p[0] for p in pairs]), offsets([p[1] for p in pairs])
    mk = lambda n, h: torch.randn(n, h, dim, generator=g).to(dtype).requires_grad_(requires_grad)
    return (mk(int(cu_q[-1]), heads[0]), mk(int(cu_k[-1]), heads[1]), mk(int(cu_k[-1]), heads[1]),
            torch.from_numpy(cu_q), torch.from_numpy(cu_k))


def grads(fn, inputs, dout):
    inputs = [x.detach().clone().requires_grad_() for x in inputs]
    out = fn(*inputs)
    out.backward(dout)
    return [x.grad for x in inputs]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal,window", MASKS)
def test_varlen_forward_and_gradients(causal, window, dtype):
    q, k, v, cu_q, cu_k = make(MIX, dtype)
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    kw = dict(causal=causal, window_size=window)
    out, lse, probs = flash_attn_varlen_func(q, k, v, cu_q, cu_k, 12, 12, return_attn_probs=True,
                                             **kw)
    assert probs is None and lse.shape == (4, q.shape[0]) and out.shape == q.shape
    arrays = [to_numpy(x) for x in (q, k, v)] + [cu_q.numpy(), cu_k.numpy()]
    check_forward(to_numpy(out), to_numpy(lse), *arrays, **kw)
    got = grads(lambda *x: flash_attn_varlen_func(*x, cu_q, cu_k, 12, 12, **kw), (q, k, v), dout)
    check_grads([to_numpy(g) for g in got], to_numpy(dout), *arrays[:3], to_numpy(out),
                *arrays[3:], **kw)


def test_gradients_match_float64_autograd_per_sequence():
    q, k, v, cu_q, cu_k = make(LONG, torch.float32, heads=(4, 1), dim=32, seed=2)
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(3))
    got = grads(lambda *x: flash_attn_varlen_func(*x, cu_q, cu_k, 33, 130, causal=True),
                (q, k, v), dout)
    F = torch.nn.functional

    def sdpa_packed(q, k, v):
        outs = []
        for qs, ks in ref.sequences(cu_q, cu_k):
            mask = torch.from_numpy(ref.visible(qs.stop - qs.start, ks.stop - ks.start, True))
            qb, kb, vb = (x.transpose(0, 1) for x in (q[qs], k[ks], v[ks]))
            kb, vb = kb.repeat_interleave(4, 0), vb.repeat_interleave(4, 0)
            outs.append(F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask).transpose(0, 1))
        return torch.cat(outs)

    expected = grads(sdpa_packed, [x.double() for x in (q, k, v)], dout.double())
    scale = max(e.abs().max().item() for e in expected)
    for g, e in zip(got, expected):
        assert (g.double() - e).abs().max().item() <= 1e-5 * max(scale, 1)


def test_packed_variants_equal_the_unpacked_call():
    g = torch.Generator().manual_seed(4)
    cu = torch.from_numpy(offsets([5, 0, 9, 1]))
    qkv = torch.randn(15, 3, 4, 16, generator=g)
    dout = torch.randn(15, 4, 16, generator=g)
    call = lambda *x: flash_attn_varlen_func(*x, cu, cu, 9, 9, causal=True)
    expected = call(*qkv.unbind(1))
    assert torch.equal(flash_attn_varlen_qkvpacked_func(qkv, cu, 9, causal=True), expected)
    dq, dk, dv = grads(call, qkv.unbind(1), dout)
    (dqkv,) = grads(lambda x: flash_attn_varlen_qkvpacked_func(x, cu, 9, causal=True), [qkv], dout)
    assert torch.equal(dqkv, torch.stack([dq, dk, dv], 1))
    cu_k = torch.from_numpy(offsets([2, 7, 3, 3]))
    kv = torch.randn(15, 2, 2, 16, generator=g)
    q = qkv[:, 0]
    call = lambda q, kv: flash_attn_varlen_kvpacked_func(q, kv, cu, cu_k, 9, 7, window_size=(2, 1))
    assert torch.equal(call(q, kv), flash_attn_varlen_func(q, *kv.unbind(1), cu, cu_k, 9, 7,
                                                           window_size=(2, 1)))
    dq, dk, dv = grads(lambda *x: flash_attn_varlen_func(*x, cu, cu_k, 9, 7, window_size=(2, 1)),
                       [q, *kv.unbind(1)], dout)
    dq2, dkv = grads(call, [q, kv], dout)
    assert torch.equal(dq2, dq) and torch.equal(dkv, torch.stack([dk, dv], 1))


def test_seqused_k_and_calls_without_autograd():
    q, k, v, cu_q, cu_k = make([(4, 10), (0, 3), (6, 6), (3, 8)], torch.bfloat16, seed=5)
    used = torch.tensor([7, 2, 0, 8], dtype=torch.int32)
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(6)).to(torch.bfloat16)
    call = lambda *x: flash_attn_varlen_func(*x, cu_q, cu_k, 6, 8, causal=True, seqused_k=used,
                                             return_attn_probs=True)
    recorded = call(*(x.detach().requires_grad_() for x in (q, k, v)))
    free = call(q, k, v)
    assert torch.equal(free[0], recorded[0].detach()) and torch.equal(free[1], recorded[1])
    assert not free[0].requires_grad
    arrays = [to_numpy(x) for x in (q, k, v)] + [cu_q.numpy(), cu_k.numpy(), used.numpy()]
    check_forward(to_numpy(free[0]), to_numpy(free[1]), *arrays, causal=True)
    got = grads(lambda *x: call(*x)[0], (q, k, v), dout)
    check_grads([to_numpy(g) for g in got], to_numpy(dout), *arrays[:3], to_numpy(free[0]),
                *arrays[3:], causal=True)


def test_paged_varlen_forward_and_no_backward():
    c = Case(lens_q=(3, 0, 1, 5), lens=(7, 4, 0, 20), capacity=24, append=False, seed=7)
    k_pool, table = paged(c.k_cache, c.lens, 8)
    v_pool, _ = paged(c.v_cache, c.lens, 8)
    q = torch.from_numpy(c.q)
    args = (torch.from_numpy(k_pool), torch.from_numpy(v_pool), torch.from_numpy(c.cu),
            torch.from_numpy(offsets(c.lens)), 5, 20)
    out, lse, _ = flash_attn_varlen_func(q, *args, causal=True, block_table=torch.from_numpy(table),
                                         return_attn_probs=True)
    seqs = [(c.q[c.cu[b]:c.cu[b + 1]], c.k_cache[b, :n], c.v_cache[b, :n])
            for b, n in enumerate(c.lens)]
    check_sequences(out.numpy(), lse.numpy(), seqs, causal=True)
    out = flash_attn_varlen_func(q.requires_grad_(), *args, causal=True,
                                 block_table=torch.from_numpy(table))
    with pytest.raises(NotImplementedError, match="no backward"):
        out.sum().backward()


@pytest.mark.parametrize("cu_q,max_q,message", [
    ([0, 5, 3, 11], 9, "decreases"),
    ([0, 4, 8, 10], 9, "holds 11 rows"),
    ([0, 4, 8, 11], 3, "max_seqlen_q is 3"),
])
def test_varlen_errors(cu_q, max_q, message):
    q, k, v, _, cu_k = make([(4, 2), (4, 2), (3, 5)], torch.float32)
    with pytest.raises(flashattn.BadArgumentError, match=message):
        flash_attn_varlen_func(q, k, v, torch.tensor(cu_q, dtype=torch.int32), cu_k, max_q, 5)
    with pytest.raises(flashattn.BadArgumentError, match="max_seqlen_k is 4"):
        flash_attn_varlen_func(q, k, v, torch.tensor([0, 4, 8, 11], dtype=torch.int32), cu_k,
                               4, 4)
    with pytest.raises(ValueError, match="integer tensor"):
        flash_attn_varlen_func(q, k, v, cu_k.float(), cu_k, 4, 5)
    with pytest.raises(ValueError, match="dropout_p"):
        flash_attn_varlen_func(q, k, v, torch.tensor([0, 4, 8, 11], dtype=torch.int32), cu_k, 4, 5,
                               dropout_p=1.5)


# ---- padding helpers ----------------------------------------------------------

def test_unpad_pad_round_trip_with_autograd():
    g = torch.Generator().manual_seed(8)
    x = torch.randn(3, 6, 2, 4, generator=g, requires_grad=True)
    mask = torch.tensor([[1] * 6, [1, 1, 0, 0, 0, 0], [0] * 6], dtype=torch.int32)
    packed, indices, cu, max_seqlen, used = flashattn.unpad_input(x, mask)
    assert cu.tolist() == [0, 6, 8, 8] and max_seqlen == 6 and used.tolist() == [6, 2, 0]
    assert cu.dtype == torch.int32 and indices.dtype == torch.int64
    back = flashattn.pad_input(packed, indices, 3, 6)
    keep = mask.bool()[..., None, None]
    assert torch.equal(back, torch.where(keep, x, torch.zeros(())))
    w = torch.randn(back.shape, generator=g)
    (back * w).sum().backward()
    assert torch.equal(x.grad, torch.where(keep, w, torch.zeros(())))


def test_unpad_varlen_pad_equals_each_sequence_alone():
    g = torch.Generator().manual_seed(9)
    lengths = [7, 3, 0, 1]
    q, k, v = (torch.randn(4, 7, 2, 16, generator=g, requires_grad=True) for _ in range(3))
    mask = torch.arange(7)[None, :] < torch.tensor(lengths)[:, None]
    (qp, idx, cu, m, _), kp, vp = (flashattn.unpad_input(q, mask),
                                    flashattn.unpad_input(k, mask)[0],
                                    flashattn.unpad_input(v, mask)[0])
    out = flashattn.pad_input(flash_attn_varlen_func(qp, kp, vp, cu, cu, m, m, causal=True),
                              idx, 4, 7)
    dout = torch.randn(out.shape, generator=g)
    out.backward(dout)
    for b, n in enumerate(lengths):
        if n == 0:
            assert torch.all(out[b] == 0) and torch.all(q.grad[b] == 0)
            continue
        args = [x[b:b + 1, :n].detach().requires_grad_() for x in (q, k, v)]
        alone = flash_attn_func(*args, causal=True)
        alone.backward(dout[b:b + 1, :n])
        assert (out[b:b + 1, :n] - alone).abs().max().item() <= 1e-5
        assert torch.all(out[b, n:] == 0)
        for x, a in zip((q, k, v), args):
            assert (x.grad[b:b + 1, :n] - a.grad).abs().max().item() <= 1e-5
            assert torch.all(x.grad[b, n:] == 0)


# ---- flash_attn_with_kvcache: rotary, batch_idx, leftpad, cu_seqlens_q ---------

def tensors(c):
    return [None if x is None else torch.from_numpy(x) for x in (c.q, c.k_cache, c.v_cache, c.k,
                                                                c.v)]


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("causal", [False, True])
def test_kvcache_rotary_as_flash_attn(causal, interleaved):
    """FlashAttention-2's positions: k at cache_seqlens + j, q likewise when
    causal, else all of q at cache_seqlens."""
    c = Case(lens_q=(2, 2, 2), lens=(4, 0, 7), capacity=16, dim=32, seed=10)
    cos, sin = rotary_tables(16, 16)
    q, k_cache, v_cache, k, v = tensors(c)
    dense = lambda x: x.reshape(3, 2, *x.shape[1:])
    out, lse = flash_attn_with_kvcache(
        dense(q), k_cache, v_cache, dense(k), dense(v), torch.from_numpy(cos).half(),
        torch.from_numpy(sin).half(), torch.from_numpy(c.lens), causal=causal,
        rotary_interleaved=interleaved, return_softmax_lse=True)
    tables = (cos.astype(np.float16).astype(np.float32), sin.astype(np.float16).astype(np.float32),
              interleaved)   # the tables as given, in float16
    expected_k, _, seqs = c.expected(rotary=tables, q_step=causal)
    assert np.abs(c.k_cache - expected_k).max() <= 1e-6
    check_sequences(out.reshape(6, 4, 32).numpy(), lse.transpose(0, 1).reshape(4, 6).numpy(),
                    seqs, causal=causal)


def test_kvcache_packed_queries_batch_idx_and_leftpad():
    c = Case(lens_q=(2, 1, 3), lens=(6, 3, 9), capacity=16, entries=5, dtype=np.float16, seed=11)
    batch_idx = np.array([3, 0, 4], np.int32)
    leftpad = np.array([2, 3, 0], np.int32)
    q, k_cache, v_cache, k, v = tensors(c)
    cu = torch.from_numpy(c.cu)
    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k, v,
                                       cache_seqlens=torch.from_numpy(c.lens),
                                       cache_batch_idx=torch.from_numpy(batch_idx),
                                       cache_leftpad=torch.from_numpy(leftpad), causal=True,
                                       return_softmax_lse=True, cu_seqlens_q=cu, max_seqlen_q=3,
                                       cu_seqlens_k_new=cu)
    assert out.shape == q.shape and lse.shape == (4, 6)
    expected_k, _, seqs = c.expected(batch_idx, leftpad)
    assert np.array_equal(c.k_cache, expected_k)
    check_sequences(out.numpy(), lse.numpy(), seqs, causal=True)


def test_kvcache_refusals():
    c = Case(lens_q=(2, 1, 3), lens=(6, 3, 9), capacity=16, seed=12)
    q, k_cache, v_cache, k, v = tensors(c)
    cos, sin = (torch.from_numpy(t) for t in rotary_tables(16, 8))
    cu, lens = torch.from_numpy(c.cu), torch.from_numpy(c.lens)
    before = k_cache.clone()
    with pytest.raises(ValueError, match="give k and v"):
        flash_attn_with_kvcache(q, k_cache, v_cache, rotary_cos=cos, rotary_sin=sin,
                                cache_seqlens=lens, cu_seqlens_q=cu)
    with pytest.raises(NotImplementedError, match="cu_seqlens_k_new"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=lens, cu_seqlens_q=cu,
                                cu_seqlens_k_new=torch.tensor([0, 1, 3, 6], dtype=torch.int32))
    with pytest.raises(flashattn.BadArgumentError, match="max_seqlen_q is 2"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=lens, cu_seqlens_q=cu,
                                max_seqlen_q=2)
    with pytest.raises(flashattn.BadArgumentError, match="overflows the cache capacity"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cu_seqlens_q=cu,
                                cache_seqlens=torch.tensor([6, 3, 14], dtype=torch.int32))
    assert torch.equal(k_cache, before)
    # leftpad all zero is no leftpad: rotary runs
    flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cos, sin, lens, cu_seqlens_q=cu,
                            cache_leftpad=torch.zeros(3, dtype=torch.int32))
