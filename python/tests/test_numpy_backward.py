"""flashattn.attention_backward against NumPy float64 reference gradients,
the reference itself against central finite differences.

Pass rule (that of tests/test_backward.c, FlashAttention's own), per
gradient G, with the float64 gradients of the same rounded inputs as truth:
    max |G - G_ref| <= max(2 * max |G_plain - G_ref|, 1e-6 * scale)
where G_plain is plain float32 attention's gradient on the same inputs
(D from the same O), rounded to the dtype, and scale is the largest
magnitude among the three reference gradients. The floor only matters when
the plain error happens to be 0; it is taken over all three gradients
because one can vanish exactly (one key: dS = P * (dP - D) = 0) while the
rounding of dP - D in any other summation order is ~1e-8, not 0.
"""

import numpy as np
import pytest

import attn_reference as ref
import flashattn
from flashattn import _lib
from test_numpy_forward import BF16, DTYPES, make

pytestmark = pytest.mark.skipif(not _lib.has("flashattn_bwd"),
                                reason="the C library has no flashattn_bwd")

SHAPES = [
    (1, 1, 1, 1, 1, 8),
    (2, 23, 23, 4, 4, 32),
    (1, 17, 41, 4, 2, 16),    # seq_q < seq_k, GQA
    (1, 40, 13, 6, 2, 24),    # seq_q > seq_k: bottom-right causal leaves rows empty
    (1, 9, 150, 2, 1, 128),   # MQA, several kv-blocks
]
MASKS = [(False, (-1, -1)), (True, (-1, -1)), (False, (6, 2)), (True, (10, -1))]


def check_grads(got, dout, q, k, v, o, **kw):
    dtype = q.dtype
    expected = ref.attention_backward(dout, q, k, v, **kw)
    plain = ref.attention_backward(dout, q, k, v, dtype=np.float32, plain=True, out=o, **kw)
    scale = max(np.abs(e).max(initial=0) for e in expected)
    for name, g, e, p in zip(("dq", "dk", "dv"), got, expected, plain):
        assert g.dtype == dtype and g.shape == e.shape, name
        plain_err = np.abs(p.astype(dtype).astype(np.float64) - e).max(initial=0)
        bound = max(2 * plain_err, 1e-6 * scale)
        err = np.abs(g.astype(np.float64) - e).max(initial=0)
        assert err <= bound, "%s: max abs error %.3g > bound %.3g" % (name, err, bound)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("align", ["bottom-right", "top-left"])
@pytest.mark.parametrize("causal,window", MASKS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_backward_matches_reference(shape, causal, window, align, dtype):
    q, k, v = make(shape, dtype, seed=1)
    dout = np.random.default_rng(2).standard_normal(q.shape).astype(dtype)
    kw = dict(causal=causal, window_size=window, align=align)
    o, lse = flashattn.attention(q, k, v, return_lse=True, **kw)
    got = flashattn.attention_backward(dout, q, k, v, o, lse, **kw)
    check_grads(got, dout, q, k, v, o, **kw)


def test_reference_gradients_by_finite_differences():
    q, k, v = make((1, 3, 5, 2, 1, 4), np.float64, seed=3)
    dout = np.random.default_rng(4).standard_normal(q.shape)
    kw = dict(causal=True, window_size=(3, -1), softmax_scale=0.7)
    loss = lambda q, k, v: np.sum(dout * ref.attention(q, k, v, **kw)[0])
    grads = ref.attention_backward(dout, q, k, v, **kw)
    h = 1e-6
    for which, g in enumerate(grads):
        x = [q, k, v][which]
        numeric = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            args = [a.copy() for a in (q, k, v)]
            args[which][idx] += h
            up = loss(*args)
            args[which][idx] -= 2 * h
            numeric[idx] = (up - loss(*args)) / (2 * h)
        assert np.abs(numeric - g).max() < 1e-7, "grad %d" % which


def test_views_and_outputs_in_place():
    q, k, v = make((2, 19, 27, 4, 2, 16), np.float32, seed=5)
    dout = np.random.default_rng(6).standard_normal(q.shape).astype(np.float32)
    o, lse = flashattn.attention(q, k, v, causal=True, return_lse=True)
    bhsd = lambda x: np.ascontiguousarray(x.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
    dkv = np.full((2, 27, 2, 2, 16), np.nan, np.float32)     # packed (.., 2, heads, dim)
    got = flashattn.attention_backward(bhsd(dout), bhsd(q), k, bhsd(v), o, lse, causal=True,
                                       dk=dkv[:, :, 0], dv=dkv[:, :, 1])
    assert got[1].base is dkv and got[2].base is dkv
    check_grads((got[0], dkv[:, :, 0], dkv[:, :, 1]), dout, q, k, v, o, causal=True)


def test_deterministic_dq_is_identical_across_thread_counts():
    q, k, v = make((1, 80, 120, 4, 2, 32), np.float32, seed=7)
    dout = np.random.default_rng(8).standard_normal(q.shape).astype(np.float32)
    o, lse = flashattn.attention(q, k, v, return_lse=True)
    runs = [flashattn.attention_backward(dout, q, k, v, o, lse, deterministic=True,
                                         num_threads=t) for t in (1, 2, 3)]
    assert all(np.array_equal(a, b) for run in runs[1:] for a, b in zip(run, runs[0]))


def test_rows_that_see_no_key_give_zero_gradients():
    q, k, v = make((1, 10, 4, 2, 2, 8), BF16, seed=9)
    dout = np.ones(q.shape, BF16)
    o, lse = flashattn.attention(q, k, v, causal=True, return_lse=True)
    dq, dk, dv = flashattn.attention_backward(dout, q, k, v, o, lse, causal=True)
    assert np.all(dq[:, :6].astype(np.float32) == 0)   # rows 0..5 see no key


def test_bad_lse_and_dout():
    q, k, v = make((1, 4, 6, 2, 2, 8), np.float32)
    o, lse = flashattn.attention(q, k, v, return_lse=True)
    with pytest.raises(ValueError, match="lse must have shape"):
        flashattn.attention_backward(o, q, k, v, o, lse[:, :1])
    with pytest.raises(ValueError, match="dout"):
        flashattn.attention_backward(o[:, :3], q, k, v, o, lse)
    dq = np.full(q.shape, 5.0, np.float32)
    with pytest.raises(ValueError, match="head_dim"):
        flashattn.attention_backward(o, q, k[..., :4], v, o, lse, dq=dq)
    assert np.all(dq == 5.0)
