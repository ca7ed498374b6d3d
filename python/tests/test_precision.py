"""flash_attn_func(..., precision="int8" / "int8+bf16" / "int8+int8"): the 8-bit Q K^T
from torch, inference only: close to the exact call (cosine similarity), the
NumPy front end's bits, no gradient, not under tracing, bad values rejected."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flashattn  # noqa: E402
from flashattn.flash_attn_interface import flash_attn_func  # noqa: E402


def _cos(a, b):
    a, b = a.double().flatten(), b.double().flatten()
    return float(a @ b / (a.norm() * b.norm()))


@pytest.mark.parametrize("precision", ["int8", "int8+bf16", "int8+int8"])
def test_close_to_exact_and_numpy_bits(precision):
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 96, 4, 64, generator=g) for _ in range(3))
    with torch.no_grad():
        o = flash_attn_func(q, k, v, causal=True, precision=precision)
        ref = flash_attn_func(q, k, v, causal=True)
    assert _cos(o, ref) >= 0.9999
    assert not torch.equal(o, ref)
    n = flashattn.attention(q.numpy(), k.numpy(), v.numpy(), causal=True, precision=precision)
    assert np.array_equal(o.numpy(), n)


def test_packed_forms():
    from flashattn.flash_attn_interface import flash_attn_kvpacked_func, flash_attn_qkvpacked_func
    g = torch.Generator().manual_seed(2)
    qkv = torch.randn(1, 64, 3, 2, 32, generator=g)
    with torch.no_grad():
        a = flash_attn_qkvpacked_func(qkv, precision="int8")
        b = flash_attn_kvpacked_func(qkv[:, :, 0], qkv[:, :, 1:], precision="int8")
        c = flash_attn_func(*qkv.unbind(2), precision="int8")
    assert torch.equal(a, c) and torch.equal(b, c)


def test_no_gradient():
    q = torch.randn(1, 8, 1, 16, requires_grad=True)
    with pytest.raises(ValueError):
        flash_attn_func(q, q, q, precision="int8")


def test_bad_precision():
    q = torch.zeros(1, 4, 1, 8)
    with pytest.raises(ValueError):
        flash_attn_func(q, q, q, precision="fp4")


def _varlen_batch(seed, lens_q, lens_k, hq=4, hk=2, d=64):
    g = torch.Generator().manual_seed(seed)
    cq = torch.tensor([0] + list(np.cumsum(lens_q)), dtype=torch.int32)
    ck = torch.tensor([0] + list(np.cumsum(lens_k)), dtype=torch.int32)
    q = torch.randn(int(cq[-1]), hq, d, generator=g)
    k, v = (torch.randn(int(ck[-1]), hk, d, generator=g) for _ in range(2))
    return q, k, v, cq, ck


@pytest.mark.parametrize("precision", ["int8", "int8+bf16", "int8+int8"])
def test_varlen_is_each_sequence_alone(precision):
    """A packed batch at `precision` gives each sequence the bits of a dense
    call on it alone (K is smoothed by each sequence's own mean), and stays
    close to the exact varlen call."""
    from flashattn.flash_attn_interface import flash_attn_varlen_func
    lens_q, lens_k = [5, 0, 130, 700, 1], [9, 3, 130, 1100, 40]
    q, k, v, cq, ck = _varlen_batch(3, lens_q, lens_k)
    with torch.no_grad():
        o = flash_attn_varlen_func(q, k, v, cq, ck, max(lens_q), max(lens_k), causal=True,
                                   precision=precision)
        exact = flash_attn_varlen_func(q, k, v, cq, ck, max(lens_q), max(lens_k), causal=True)
        for b in range(len(lens_q)):
            if lens_q[b] == 0:
                continue
            qs, ks = slice(int(cq[b]), int(cq[b + 1])), slice(int(ck[b]), int(ck[b + 1]))
            alone = flash_attn_func(q[None, qs], k[None, ks], v[None, ks], causal=True,
                                    precision=precision)[0]
            assert torch.equal(o[qs], alone), b
    assert _cos(o, exact) >= 0.9999
    assert not torch.equal(o, exact)


def test_varlen_packed_forms_and_refusals():
    from flashattn.flash_attn_interface import (flash_attn_varlen_func,
                                                flash_attn_varlen_kvpacked_func,
                                                flash_attn_varlen_qkvpacked_func)
    lens = [17, 64, 3]
    q, k, v, cu, _ = _varlen_batch(4, lens, lens, hq=2, hk=2, d=32)
    with torch.no_grad():
        a = flash_attn_varlen_func(q, k, v, cu, cu, 64, 64, precision="int8")
        b = flash_attn_varlen_kvpacked_func(q, torch.stack((k, v), 1), cu, cu, 64, 64,
                                            precision="int8")
        c = flash_attn_varlen_qkvpacked_func(torch.stack((q, k, v), 1), cu, 64, precision="int8")
    assert torch.equal(a, b) and torch.equal(a, c)
    with pytest.raises(ValueError):  # inference only
        flash_attn_varlen_func(q.requires_grad_(), k, v, cu, cu, 64, 64, precision="int8")
    with pytest.raises(ValueError):
        flash_attn_varlen_func(q.detach(), k, v, cu, cu, 64, 64, precision="fp4")
    # a paged cache runs on decode's exact path only
    pages = torch.zeros(4, 16, 2, 32)
    table = torch.arange(4, dtype=torch.int32).reshape(1, 4)
    with pytest.raises(NotImplementedError):
        flash_attn_varlen_func(q.detach()[:17], pages, pages, cu[:2], cu[:2], 17, 17,
                               block_table=table, precision="int8")
