"""flash_attn_func(..., precision="int8" / "int8+bf16"): the 8-bit Q K^T
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


@pytest.mark.parametrize("precision", ["int8", "int8+bf16"])
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
