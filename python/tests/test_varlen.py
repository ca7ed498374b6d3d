"""flashattn.attention_varlen and attention_varlen_backward: packed
sequences against the float64 reference applied to each sequence alone.

Pass rules those of test_numpy_forward.py and test_numpy_backward.py, taken
over the whole packed batch: the float32 bound 1e-5; for 16-bit inputs twice
the error of plain float32 attention (each sequence computed plainly,
rounded to the dtype); gradients within max(2 * plain error, 1e-6 * the
largest reference gradient magnitude).
"""

import numpy as np
import pytest

import attn_reference as ref
import flashattn
from flashattn import _lib
from test_numpy_forward import BF16, DTYPES

pytestmark = pytest.mark.skipif(not _lib.has("flashattn_varlen_init_size"),
                                reason="the C library has no variable-length batches")

# (seq_q, seq_k) per sequence: empty sequences, single rows, seq_q > seq_k
# (bottom-right causal leaves rows without keys), seq_q < seq_k.
MIX = [(3, 5), (0, 4), (1, 1), (7, 2), (5, 0), (12, 12), (0, 0), (1, 9)]
LONG = [(1, 70), (33, 40), (2, 130), (17, 3)]   # several kv-blocks
MASKS = [(False, (-1, -1)), (True, (-1, -1)), (False, (3, 2)), (True, (4, -1))]


def offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def make(pairs, dtype, heads=(4, 2), dim=16, seed=0):
    """Packed q, k, v for sequences of the given (seq_q, seq_k), and their
    cu_seqlens."""
    rng = np.random.default_rng(seed)
    cu_q, cu_k = offsets([p[0] for p in pairs]), offsets([p[1] for p in pairs])
    q = rng.standard_normal((cu_q[-1], heads[0], dim)).astype(dtype)
    k = rng.standard_normal((cu_k[-1], heads[1], dim)).astype(dtype)
    v = rng.standard_normal((cu_k[-1], heads[1], dim)).astype(dtype)
    return q, k, v, cu_q, cu_k


def check_forward(o, lse, q, k, v, cu_q, cu_k, seqused_k=None, dtype=None, **kw):
    """The pass rules for out (and lse) of packed q, k, v; dtype: that of
    out (q's unless q was prepared in float64, as a rotated q is)."""
    dtype = q.dtype if dtype is None else np.dtype(dtype)
    ro, rl = ref.attention_varlen(q, k, v, cu_q, cu_k, seqused_k, **kw)
    if dtype == np.float32:
        bound = 1e-5
    else:
        plain = ref.attention_varlen(q, k, v, cu_q, cu_k, seqused_k, dtype=np.float32,
                                     plain=True, **kw)[0].astype(dtype)
        bound = 2 * np.abs(plain.astype(np.float64) - ro).max(initial=0)
    assert o.dtype == dtype and o.shape == ro.shape
    err = np.abs(o.astype(np.float64) - ro).max(initial=0)
    assert err <= bound, "max abs error %.3g > bound %.3g" % (err, bound)
    if lse is not None:
        assert lse.dtype == np.float32 and lse.shape == rl.shape
        assert np.array_equal(np.isneginf(lse), np.isneginf(rl)), "-inf rows differ"
        finite = np.isfinite(rl)
        lerr = np.abs(lse[finite] - rl[finite]).max(initial=0)
        assert lerr <= (1e-5 if dtype == np.float32 else 1e-4), "lse error %.3g" % lerr


def check_grads(got, dout, q, k, v, o, cu_q, cu_k, seqused_k=None, **kw):
    dtype = q.dtype
    expected = ref.attention_varlen_backward(dout, q, k, v, cu_q, cu_k, seqused_k, **kw)
    plain = ref.attention_varlen_backward(dout, q, k, v, cu_q, cu_k, seqused_k,
                                          dtype=np.float32, plain=True, out=o, **kw)
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
def test_forward_matches_each_sequence(causal, window, align, dtype):
    q, k, v, cu_q, cu_k = make(MIX, dtype)
    kw = dict(causal=causal, window_size=window, align=align)
    o, lse = flashattn.attention_varlen(q, k, v, cu_q, cu_k, 12, 12, return_lse=True, **kw)
    check_forward(o, lse, q, k, v, cu_q, cu_k, **kw)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal,window", [(False, (-1, -1)), (True, (9, -1))])
def test_forward_long_sequences_mqa(causal, window, dtype):
    q, k, v, cu_q, cu_k = make(LONG, dtype, heads=(4, 1), dim=40, seed=1)
    o, lse = flashattn.attention_varlen(q, k, v, cu_q, cu_k, return_lse=True, causal=causal,
                                        window_size=window)
    check_forward(o, lse, q, k, v, cu_q, cu_k, causal=causal, window_size=window)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("align", ["bottom-right", "top-left"])
@pytest.mark.parametrize("causal,window", MASKS)
def test_backward_matches_each_sequence(causal, window, align, dtype):
    q, k, v, cu_q, cu_k = make(MIX, dtype, seed=2)
    dout = np.random.default_rng(3).standard_normal(q.shape).astype(dtype)
    kw = dict(causal=causal, window_size=window, align=align)
    o, lse = flashattn.attention_varlen(q, k, v, cu_q, cu_k, return_lse=True, **kw)
    got = flashattn.attention_varlen_backward(dout, q, k, v, o, lse, cu_q, cu_k, 12, 12, **kw)
    check_grads(got, dout, q, k, v, o, cu_q, cu_k, **kw)


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), BF16], ids=str)
def test_seqused_k_forward_and_backward(dtype):
    pairs = [(4, 10), (0, 3), (6, 6), (3, 8), (1, 5)]
    q, k, v, cu_q, cu_k = make(pairs, dtype, heads=(6, 3), dim=24, seed=4)
    used = np.array([7, 2, 0, 8, 1], np.int32)   # a full, an empty and a shortened sequence
    dout = np.random.default_rng(5).standard_normal(q.shape).astype(dtype)
    kw = dict(causal=True)
    # keys past seqused_k are never read: NaN there must not reach any result
    for b, (_, ks) in enumerate(ref.sequences(cu_q, cu_k)):
        k[ks.start + used[b]:ks.stop] = np.nan
        v[ks.start + used[b]:ks.stop] = np.nan
    o, lse = flashattn.attention_varlen(q, k, v, cu_q, cu_k, 6, 8, seqused_k=used,
                                        return_lse=True, **kw)
    check_forward(o, lse, q, k, v, cu_q, cu_k, used, **kw)
    dq, dk, dv = flashattn.attention_varlen_backward(dout, q, k, v, o, lse, cu_q, cu_k,
                                                     seqused_k=used, **kw)
    check_grads((dq, dk, dv), dout, q, k, v, o, cu_q, cu_k, used, **kw)
    unused = np.ones(len(k), bool)   # dk = dv = 0 past seqused_k
    for _, ks in ref.sequences(cu_q, cu_k, used):
        unused[ks] = False
    assert np.all(dk[unused].astype(np.float32) == 0) and np.all(dv[unused].astype(np.float32) == 0)


@pytest.mark.parametrize("causal,window", [(True, (-1, -1)), (False, (5, 2))])
def test_each_sequence_is_bit_identical_to_a_dense_call_with_the_same_tiles(causal, window):
    q, k, v, cu_q, cu_k = make([(20, 37), (1, 1), (0, 5), (40, 9), (16, 64)], np.float32,
                               dim=32, seed=6)
    dout = np.random.default_rng(7).standard_normal(q.shape).astype(np.float32)
    kw = dict(causal=causal, window_size=window, block_m=16, block_n=32)
    o, lse = flashattn.attention_varlen(q, k, v, cu_q, cu_k, return_lse=True, **kw)
    dq, dk, dv = flashattn.attention_varlen_backward(dout, q, k, v, o, lse, cu_q, cu_k,
                                                     deterministic=True, **kw)
    for qs, ks in ref.sequences(cu_q, cu_k):
        args = (q[None, qs], k[None, ks], v[None, ks])
        od, ld = flashattn.attention(*args, return_lse=True, **kw)
        assert np.array_equal(o[qs], od[0]) and np.array_equal(lse[:, qs], ld[0])
        g = flashattn.attention_backward(dout[None, qs], *args, od, ld, deterministic=True, **kw)
        assert np.array_equal(dq[qs], g[0][0])
        assert np.array_equal(dk[ks], g[1][0]) and np.array_equal(dv[ks], g[2][0])


def test_views_and_outputs_in_place():
    cu = offsets([3, 0, 1, 7, 5, 12])
    qkv = np.random.default_rng(8).standard_normal((cu[-1], 3, 4, 16)).astype(np.float32)
    q, k, v = qkv[:, 0], qkv[:, 1, :2], qkv[:, 2, 2:]   # strided views of one buffer
    out = np.full((cu[-1], 8, 16), np.nan, np.float32)[:, ::2]
    got = flashattn.attention_varlen(q, k, v, cu, cu, causal=True, out=out)
    assert got is out
    check_forward(out, None, q, k, v, cu, cu, causal=True)


def test_empty_batch_and_all_empty_sequences():
    q, k, v, cu_q, cu_k = make([], np.float32)
    o, lse = flashattn.attention_varlen(q, k, v, cu_q, cu_k, return_lse=True)
    assert o.shape == (0, 4, 16) and lse.shape == (4, 0)
    q, k, v, cu_q, cu_k = make([(3, 0), (2, 0)], np.float32)
    o, lse = flashattn.attention_varlen(q, k, v, cu_q, cu_k, return_lse=True)
    assert np.all(o == 0) and np.all(np.isneginf(lse))


# ---- errors: the library's error types, nothing written ----------------------

@pytest.mark.parametrize("change,message", [
    (lambda cu_q, cu_k: (np.array([0, 5, 3, 11], np.int32), cu_k), "decreases"),
    (lambda cu_q, cu_k: (np.array([1, 4, 8, 11], np.int32), cu_k), r"\[0\] is 1"),
    (lambda cu_q, cu_k: (np.array([0, 4, 8, 10], np.int32), cu_k), "holds 11 rows"),
    (lambda cu_q, cu_k: (cu_q, np.array([0, 2, 4, 20], np.int32)), "holds 9 rows"),
    (lambda cu_q, cu_k: (cu_q, cu_k[:3]), "batch \\+ 1"),
    (lambda cu_q, cu_k: (cu_q.astype(np.float32), cu_k), "integer array"),
])
def test_bad_cu_seqlens_raise_and_write_nothing(change, message):
    q, k, v, cu_q, cu_k = make([(4, 2), (4, 2), (3, 5)], np.float32)
    cu_q, cu_k = change(cu_q, cu_k)
    out = np.full(q.shape, 7.0, np.float32)
    with pytest.raises(ValueError, match=message) as info:
        flashattn.attention_varlen(q, k, v, cu_q, cu_k, out=out)
    assert np.all(out == 7.0)
    if "integer" not in message:
        assert isinstance(info.value, flashattn.BadArgumentError)
        assert info.value.status == _lib.ERR_BAD_SHAPE


@pytest.mark.parametrize("max_q,max_k,seqused,message", [
    (3, 5, None, "max_seqlen_q is 3, but the longest sequence has 4"),
    (4, 4, None, "max_seqlen_k is 4, but the longest sequence has 5"),
    (4, 1, [1, 2, 2], "max_seqlen_k is 1, but the longest sequence has 2"),
    (4, 5, [1, 3, 2], r"seqused_k\[1\] is 3"),
    (4, 5, [1, 2], "seqused_k has 2 values for 3 sequences"),
])
def test_bad_max_seqlen_and_seqused_k(max_q, max_k, seqused, message):
    q, k, v, cu_q, cu_k = make([(4, 2), (4, 2), (3, 5)], np.float32)
    used = None if seqused is None else np.array(seqused, np.int32)
    dq = np.full(q.shape, 7.0, np.float32)
    with pytest.raises(flashattn.BadArgumentError, match=message):
        flashattn.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, seqused_k=used)
    o, lse = flashattn.attention_varlen(q, k, v, cu_q, cu_k, return_lse=True)
    with pytest.raises(flashattn.BadArgumentError, match=message):
        flashattn.attention_varlen_backward(o, q, k, v, o, lse, cu_q, cu_k, max_q, max_k,
                                            seqused_k=used, dq=dq)
    assert np.all(dq == 7.0)


def test_bad_shapes():
    q, k, v, cu_q, cu_k = make([(4, 2), (3, 5)], np.float32)
    with pytest.raises(ValueError, match="3 dimensions"):
        flashattn.attention_varlen(q[None], k, v, cu_q, cu_k)
    o, lse = flashattn.attention_varlen(q, k, v, cu_q, cu_k, return_lse=True)
    with pytest.raises(ValueError, match=r"lse must have shape \(4, 7\) \(nheads, total_q\)"):
        flashattn.attention_varlen_backward(o, q, k, v, o, lse.T, cu_q, cu_k)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("with_lse", [False, True])
def test_few_query_rows(with_lse, dtype):
    """Few rows a kv-head: the forward runs as a decode against k and v."""
    q, k, v, cu_q, cu_k = make([(1, 50), (1, 3), (0, 7), (2, 90), (1, 0)], dtype, heads=(8, 2),
                               dim=64, seed=9)
    got = flashattn.attention_varlen(q, k, v, cu_q, cu_k, return_lse=with_lse, causal=True)
    o, lse = got if with_lse else (got, None)
    check_forward(o, lse, q, k, v, cu_q, cu_k, causal=True)


@pytest.mark.parametrize("threads", [2, 3])
def test_thread_counts_give_identical_bits(threads):
    q, k, v, cu_q, cu_k = make(LONG + MIX, np.float32, seed=10)
    dout = np.random.default_rng(11).standard_normal(q.shape).astype(np.float32)
    runs = []
    for n in (1, threads):
        o, lse = flashattn.attention_varlen(q, k, v, cu_q, cu_k, causal=True, return_lse=True,
                                            num_threads=n)
        g = flashattn.attention_varlen_backward(dout, q, k, v, o, lse, cu_q, cu_k, causal=True,
                                                deterministic=True, num_threads=n)
        runs.append((o, lse) + g)
    assert all(np.array_equal(a, b) for a, b in zip(*runs))
