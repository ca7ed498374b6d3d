"""flashattn.attention(..., precision="int8"): the 8-bit Q K^T from NumPy.

Its result against the exact attention in float64 (cosine similarity, as
docs/precision.md reports it), the same bits on 1 and 2 threads, and bad values
rejected."""
import numpy as np
import pytest

import flashattn


def _ref(q, k, v, scale):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = np.einsum("bqhd,bkhd->bhqk", q, k) * scale
    s -= s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", p, v)


@pytest.mark.parametrize("shape", [(1, 128, 2, 64), (2, 70, 3, 40)])
def test_int8_close_to_exact(shape):
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    o = flashattn.attention(q, k, v, precision="int8")
    ref = _ref(q, k, v, 1.0 / np.sqrt(shape[3]))
    cos = float((o * ref).sum() / np.sqrt((o.astype(np.float64) ** 2).sum() * (ref ** 2).sum()))
    assert cos >= 0.9999, cos
    exact = flashattn.attention(q, k, v)
    assert not np.array_equal(o, exact)  # it is not the exact path
    assert np.abs(exact - ref).max() < 1e-5


def test_int8_bf16_close_to_exact():
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((1, 200, 2, 64)).astype(np.float32) for _ in range(3))
    o = flashattn.attention(q, k, v, causal=True, precision="int8+bf16")
    o8 = flashattn.attention(q, k, v, causal=True, precision="int8")
    ref = flashattn.attention(q, k, v, causal=True)
    cos = float((o * ref).sum() / np.sqrt((o.astype(np.float64) ** 2).sum() * (ref.astype(np.float64) ** 2).sum()))
    assert cos >= 0.9999, cos
    assert not np.array_equal(o, o8)  # P and V were rounded


def test_int8_pv_close_to_exact():
    """"int8+int8": P V on 8 bits too, close to the exact call and not int8's bits."""
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((1, 700, 2, 64)).astype(np.float32) for _ in range(3))
    o = flashattn.attention(q, k, v, causal=True, precision="int8+int8")
    o8 = flashattn.attention(q, k, v, causal=True, precision="int8")
    ref = flashattn.attention(q, k, v, causal=True)
    cos = float((o * ref).sum() / np.sqrt((o.astype(np.float64) ** 2).sum() * (ref.astype(np.float64) ** 2).sum()))
    assert cos >= 0.9998, cos
    assert not np.array_equal(o, o8)  # P V was on 8 bits


@pytest.mark.parametrize("precision", ["int8", "int8+int8"])
def test_int8_threads_same_bits(precision):
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((1, 300, 4, 64)).astype(np.float32) for _ in range(3))
    a = flashattn.attention(q, k, v, causal=True, precision=precision, num_threads=1)
    b = flashattn.attention(q, k, v, causal=True, precision=precision, num_threads=2)
    assert np.array_equal(a, b)


def test_bad_precision():
    q = np.zeros((1, 4, 1, 8), np.float32)
    with pytest.raises(ValueError):
        flashattn.attention(q, q, q, precision="int4")


def test_varlen_is_each_sequence_alone():
    """attention_varlen at precision int8: each sequence's bits are those of
    attention() on it alone; a paged cache (decode's exact path) refuses."""
    rng = np.random.default_rng(6)
    lens_q, lens_k = [5, 0, 130, 600], [9, 3, 130, 900]
    cq = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    q = rng.standard_normal((cq[-1], 4, 64)).astype(np.float32)
    k, v = (rng.standard_normal((ck[-1], 2, 64)).astype(np.float32) for _ in range(2))
    o = flashattn.attention_varlen(q, k, v, cq, ck, causal=True, precision="int8")
    for b in range(len(lens_q)):
        if lens_q[b]:
            alone = flashattn.attention(q[None, cq[b]:cq[b + 1]], k[None, ck[b]:ck[b + 1]],
                                        v[None, ck[b]:ck[b + 1]], causal=True, precision="int8")
            assert np.array_equal(o[cq[b]:cq[b + 1]], alone[0]), b
    assert not np.array_equal(o, flashattn.attention_varlen(q, k, v, cq, ck, causal=True))
    pages = np.zeros((2, 16, 2, 64), np.float32)
    with pytest.raises(NotImplementedError):
        flashattn.attention_varlen(q[:5], pages, pages, cq[:2], ck[:2], precision="int8",
                                   block_table=np.array([[0, 1]], np.int32))
