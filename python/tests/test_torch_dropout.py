"""Attention dropout from torch: flash_attn_func and its siblings, the
varlen functions and scaled_dot_product_attention, against float64 torch
attention that applies the same mask (the one return_attn_probs gives
back), forward and gradients; the seed from torch's generator (manual_seed
reproduces a call, the next call draws a fresh mask)."""

import pytest

torch = pytest.importorskip("torch")

import flashattn  # noqa: E402
from flashattn import _lib  # noqa: E402
from flashattn import (flash_attn_func, flash_attn_kvpacked_func,  # noqa: E402
                       flash_attn_qkvpacked_func, flash_attn_varlen_func)
import torch.nn.functional as F  # noqa: E402


def dropped_attention(q, k, v, keep, p, causal=False, top_left=False):
    """float64 (batch, heads, sq, d) attention, P times keep / (1 - p)."""
    sq, sk = q.shape[2], k.shape[2]
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        off = 0 if top_left else sk - sq
        hidden = torch.arange(sk)[None, :] > torch.arange(sq)[:, None] + off
        s = s.masked_fill(hidden, float("-inf"))
    return (torch.softmax(s, -1) * keep / (1 - p)) @ v


def bshd(x):
    return x.transpose(1, 2)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.bfloat16, 2e-2)], ids=str)
def test_flash_attn_func_against_the_mask_it_returns(causal, dtype, tol):
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 37, 4, 32, generator=g).to(dtype).requires_grad_()
    k = torch.randn(2, 50, 2, 32, generator=g).to(dtype).requires_grad_()
    v = torch.randn(2, 50, 2, 32, generator=g).to(dtype).requires_grad_()
    dout = torch.randn(2, 37, 4, 32, generator=g).to(dtype)
    out, lse, keep = flash_attn_func(q, k, v, dropout_p=0.3, causal=causal, return_attn_probs=True)
    assert keep.shape == (2, 4, 37, 50) and keep.dtype == torch.bool
    visible = torch.ones(37, 50, dtype=torch.bool) if not causal else \
        torch.arange(50)[None, :] <= torch.arange(37)[:, None] + 13
    rate = keep[:, :, visible].float().mean().item()
    assert abs(rate - 0.7) < 0.05, rate
    out.backward(dout)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    ref = dropped_attention(bshd(q64), bshd(k64).repeat_interleave(2, 1), bshd(v64).repeat_interleave(2, 1),
                            keep, 0.3, causal)
    ref.backward(bshd(dout.double()))
    assert (out.double() - bshd(ref)).abs().max().item() <= tol * (1 + bshd(ref).abs().max().item())
    for got, want in ((q.grad, q64.grad), (k.grad, k64.grad), (v.grad, v64.grad)):
        assert (got.double() - want).abs().max().item() <= 4 * tol * (1 + want.abs().max().item())


def test_the_seed_is_torchs():
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, 20, 2, 16, generator=g) for _ in range(3))
    torch.manual_seed(11)
    a = flash_attn_func(q, k, v, dropout_p=0.5)
    b = flash_attn_func(q, k, v, dropout_p=0.5)
    torch.manual_seed(11)
    c = flash_attn_func(q, k, v, dropout_p=0.5)
    assert torch.equal(a, c) and not torch.equal(a, b)
    # the packed entry points draw the same way
    torch.manual_seed(11)
    d = flash_attn_qkvpacked_func(torch.stack([q, k, v], 2), dropout_p=0.5)
    torch.manual_seed(11)
    e = flash_attn_kvpacked_func(q, torch.stack([k, v], 2), dropout_p=0.5)
    assert torch.equal(a, d) and torch.equal(a, e)


def test_varlen_against_each_sequence():
    g = torch.Generator().manual_seed(5)
    lens = [(5, 9), (0, 3), (12, 12)]
    cu_q = torch.tensor([0, 5, 5, 17], dtype=torch.int32)
    cu_k = torch.tensor([0, 9, 12, 24], dtype=torch.int32)
    q = torch.randn(17, 2, 16, generator=g, requires_grad=True)
    k = torch.randn(24, 2, 16, generator=g, requires_grad=True)
    v = torch.randn(24, 2, 16, generator=g, requires_grad=True)
    out, _, keep = flash_attn_varlen_func(q, k, v, cu_q, cu_k, 12, 12, dropout_p=0.2, causal=True,
                                          return_attn_probs=True)
    assert keep.shape == (3, 2, 12, 12)
    for b, (sq, sk) in enumerate(lens):
        if sq == 0:
            continue
        qs, ks, vs = (x[c[b]:c[b] + n].detach().double().transpose(0, 1).unsqueeze(0)
                      for x, c, n in ((q, cu_q, sq), (k, cu_k, sk), (v, cu_k, sk)))
        ref = dropped_attention(qs, ks, vs, keep[b:b + 1, :, :sq, :sk], 0.2, causal=True)
        got = out[cu_q[b]:cu_q[b] + sq].double().transpose(0, 1).unsqueeze(0)
        assert (got - ref).abs().max().item() <= 2e-5 * (1 + ref.abs().max().item())
    out.sum().backward()   # the backward draws the same masks: gradients finite and nonzero
    assert torch.isfinite(q.grad).all() and q.grad.abs().sum() > 0


def test_sdpa_dropout_is_torchs_formula_on_the_librarys_mask():
    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(2, 3, 10, 16, generator=g) for _ in range(3))
    torch.manual_seed(21)
    seed = int(torch.randint(0, 2 ** 62, (1,)).item())   # the draw the call makes
    torch.manual_seed(21)
    out = flashattn.scaled_dot_product_attention(q, k, v, dropout_p=0.25, is_causal=True)
    params = _lib.with_dropout(_lib.params(), 0.25, seed)
    keep = torch.tensor([[[list(_lib.dropout_keep(params, 3, b, h, i, 10)) for i in range(10)]
                          for h in range(3)] for b in range(2)], dtype=torch.bool)
    ref = dropped_attention(q.double(), k.double(), v.double(), keep, 0.25, causal=True, top_left=True)
    assert (out.double() - ref).abs().max().item() <= 2e-5 * (1 + ref.abs().max().item())
    # and its gradient runs through the same mask
    qg = q.clone().requires_grad_()
    torch.manual_seed(21)
    flashattn.scaled_dot_product_attention(qg, k, v, dropout_p=0.25, is_causal=True).sum().backward()
    q64 = q.double().requires_grad_()
    dropped_attention(q64, k.double(), v.double(), keep, 0.25, causal=True, top_left=True).sum().backward()
    assert (qg.grad.double() - q64.grad).abs().max().item() <= 1e-4 * (1 + q64.grad.abs().max().item())
