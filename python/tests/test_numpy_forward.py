"""flashattn.attention against the NumPy float64 reference.

Pass rules (those of tests/test_forward.c): float32 inputs drawn from
N(0, 1), max abs error of O <= 1e-5; float16/bfloat16 inputs, error against
the float64 reference of the same rounded inputs at most twice that of plain
float32 attention whose output is rounded to the same dtype. LSE: abs error
<= 1e-5 (float32) / 1e-4 (16-bit) where finite, -inf exactly where the
reference is -inf.
"""

import itertools

import ml_dtypes
import numpy as np
import pytest

import attn_reference as ref
import flashattn
from flashattn import numpy_api

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16]

# (batch, seq_q, seq_k, heads_q, heads_kv, head_dim)
SHAPES = [
    (1, 1, 1, 1, 1, 1),
    (2, 17, 33, 4, 4, 16),    # seq_q < seq_k
    (1, 40, 13, 6, 2, 32),    # seq_q > seq_k, GQA: bottom-right causal leaves rows empty
    (2, 64, 64, 8, 1, 64),    # MQA
    (1, 7, 130, 3, 3, 80),    # odd sizes, several kv-blocks
    (1, 3, 5, 2, 1, 256),     # largest head_dim
]

# (causal, window_size)
MASKS = [(False, (-1, -1)), (True, (-1, -1)), (False, (5, 3)), (True, (8, -1)),
         (False, (0, 0)), (False, (2, -1))]


def make(shape, dtype, seed=0):
    b, sq, sk, hq, hk, d = shape
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, sq, hq, d)).astype(dtype)
    k = rng.standard_normal((b, sk, hk, d)).astype(dtype)
    v = rng.standard_normal((b, sk, hk, d)).astype(dtype)
    return q, k, v


def check(q, k, v, o, lse, **kw):
    """Assert the pass rules for O (and LSE when given) computed from q, k, v."""
    dtype = np.asarray(q).dtype
    ro, rl = ref.attention(q, k, v, **kw)
    if dtype == np.float32:
        bound = 1e-5
    else:
        plain = ref.attention(q, k, v, dtype=np.float32, plain=True, **kw)[0].astype(dtype)
        bound = 2 * np.abs(plain.astype(np.float64) - ro).max(initial=0)
    assert o.dtype == dtype and o.shape == ro.shape
    err = np.abs(o.astype(np.float64) - ro).max(initial=0)
    assert err <= bound, "max abs error %.3g > bound %.3g" % (err, bound)
    if lse is not None:
        assert lse.dtype == np.float32 and lse.shape == rl.shape
        assert np.array_equal(np.isneginf(lse), np.isneginf(rl)), "-inf rows differ"
        finite = np.isfinite(rl)
        lbound = 1e-5 if dtype == np.float32 else 1e-4
        lerr = np.abs(lse[finite] - rl[finite]).max(initial=0)
        assert lerr <= lbound, "lse error %.3g > %.3g" % (lerr, lbound)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("align", ["bottom-right", "top-left"])
@pytest.mark.parametrize("causal,window", MASKS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_forward_matches_reference(shape, causal, window, align, dtype):
    q, k, v = make(shape, dtype)
    kw = dict(causal=causal, window_size=window, align=align)
    o, lse = flashattn.attention(q, k, v, return_lse=True, **kw)
    check(q, k, v, o, lse, **kw)


def test_softmax_scale_and_no_lse():
    q, k, v = make((2, 9, 21, 4, 2, 24), np.float32, seed=1)
    o = flashattn.attention(q, k, v, softmax_scale=0.37)
    assert isinstance(o, np.ndarray)
    check(q, k, v, o, None, softmax_scale=0.37)


def test_rows_that_see_no_key_get_zero_and_neg_inf():
    q, k, v = make((1, 10, 4, 2, 2, 8), np.float32, seed=2)
    o, lse = flashattn.attention(q, k, v, causal=True, return_lse=True)
    # Bottom-right: query i sees keys j <= i - 6, so rows 0..5 see none.
    assert np.all(o[:, :6] == 0) and np.all(np.isneginf(lse[:, :, :6]))
    assert np.all(np.isfinite(lse[:, :, 6:]))
    check(q, k, v, o, lse, causal=True)


def test_empty_sequences():
    q, k, v = make((2, 0, 5, 2, 2, 8), np.float32)
    o, lse = flashattn.attention(q, k, v, return_lse=True)
    assert o.shape == (2, 0, 2, 8) and lse.shape == (2, 2, 0)
    q, k, v = make((1, 3, 0, 2, 2, 8), np.float32)
    o, lse = flashattn.attention(q, k, v, return_lse=True)
    assert np.all(o == 0) and np.all(np.isneginf(lse))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_thread_counts_give_identical_bits(threads):
    q, k, v = make((2, 70, 90, 4, 2, 32), np.float32, seed=3)
    o1, l1 = flashattn.attention(q, k, v, causal=True, return_lse=True, num_threads=1)
    o, lse = flashattn.attention(q, k, v, causal=True, return_lse=True, num_threads=threads)
    assert np.array_equal(o, o1) and np.array_equal(lse, l1)


def test_explicit_tiles():
    q, k, v = make((1, 50, 77, 2, 2, 16), np.float32, seed=4)
    o = flashattn.attention(q, k, v, causal=True, block_m=16, block_n=32)
    check(q, k, v, o, None, causal=True)


def test_float64_is_computed_in_float32():
    q, k, v = make((1, 12, 19, 2, 1, 16), np.float64, seed=5)
    o, lse = flashattn.attention(q, k, v, return_lse=True)
    assert o.dtype == np.float32
    check(*(x.astype(np.float32) for x in (q, k, v)), o, lse)


# ---- layouts: views the descriptor expresses are read in place ----------------

def bhsd_views(shape, dtype, seed=6):
    """q, k, v stored as (batch, heads, seq, dim), viewed as (batch, seq, heads, dim)."""
    return [np.ascontiguousarray(x.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
            for x in make(shape, dtype, seed)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bhsd_views_read_in_place(dtype):
    q, k, v = bhsd_views((2, 19, 23, 4, 2, 16), dtype)
    assert not q.flags.c_contiguous and numpy_api._describable(q)
    o, lse = flashattn.attention(q, k, v, causal=True, return_lse=True)
    check(q, k, v, o, lse, causal=True)


def test_packed_qkv_views():
    qkv = np.random.default_rng(7).standard_normal((2, 31, 3, 4, 16)).astype(np.float32)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    assert all(numpy_api._describable(x) for x in (q, k, v))
    o, lse = flashattn.attention(q, k, v, window_size=(4, 4), return_lse=True)
    check(q, k, v, o, lse, window_size=(4, 4))


def test_strided_slices_and_broadcast():
    base = np.random.default_rng(8).standard_normal((3, 40, 6, 20)).astype(np.float32)
    q = base[::2, ::3, 1:5, 2:18]            # steps in batch and seq, sliced heads and dim
    k = np.broadcast_to(base[:1, :25, :2, :16], (2, 25, 2, 16))   # batch stride 0
    v = base[1:, 5:30, 2:4, 4:20]
    assert all(numpy_api._describable(x) for x in (q, k, v))
    o, lse = flashattn.attention(q, k, v, return_lse=True)
    check(q, k, v, o, lse)


@pytest.mark.parametrize("kind", ["reversed", "dim_not_contiguous", "fortran", "big_endian"])
def test_views_the_descriptor_cannot_express_are_copied(kind):
    q, k, v = make((2, 11, 14, 2, 2, 8), np.float32, seed=9)
    if kind == "reversed":
        q = q[:, ::-1]
    elif kind == "dim_not_contiguous":
        q = np.repeat(q, 2, axis=3)[..., ::2]
    elif kind == "fortran":
        q = np.asfortranarray(q)
    else:
        q = q.astype(">f4")
    assert not numpy_api._describable(q)
    o, lse = flashattn.attention(q, k, v, causal=True, return_lse=True)
    check(q.astype(np.float32), k, v, o, lse, causal=True)


def test_out_written_in_place_through_strides():
    q, k, v = make((2, 13, 17, 4, 2, 16), np.float32, seed=10)
    storage = np.full((2, 4, 13, 16), np.nan, np.float32)  # (batch, heads, seq, dim)
    out = storage.transpose(0, 2, 1, 3)
    got = flashattn.attention(q, k, v, causal=True, out=out)
    assert got is out
    check(q, k, v, storage.transpose(0, 2, 1, 3), None, causal=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dtypes_round_trip(dtype):
    q, k, v = make((1, 5, 6, 2, 2, 8), dtype, seed=11)
    assert flashattn.attention(q, k, v).dtype == dtype


def test_every_combination_of_layouts():
    shape = (2, 9, 12, 4, 2, 8)
    layouts = (make(shape, np.float32, seed=12), bhsd_views(shape, np.float32, seed=12))
    for choice in itertools.product([0, 1], repeat=3):
        q, k, v = (layouts[c][i] for i, c in enumerate(choice))
        o = flashattn.attention(q, k, v, causal=True)
        check(q, k, v, o, None, causal=True)
