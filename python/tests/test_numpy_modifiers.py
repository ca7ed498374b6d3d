"""Score modifiers through the NumPy API (softcap, ALiBi, sinks, bias,
mask), alone and together, with causal / window in both alignments, GQA,
seq_q != seq_k, every dtype: forward and backward against the float64
reference (attn_reference.py, written from include/flashattn.h's formulas).

Pass rules: those of test_numpy_forward.py (O, LSE) and
test_numpy_backward.py (dq, dk, dv), with the modifiers in both the
reference and the plain float32 yardstick. dsinks, the rule of
tests/test_modifiers.c: |dsinks - ref| <= eps * terms + 1e-7, terms =
sum over the rows of exp(sink - LSE) * sum |dO * O| (D's magnitude, which
o's rounding to its dtype perturbs), eps 1e-5 (float32), 2e-3 (float16),
1.6e-2 (bfloat16).
"""

import ml_dtypes
import numpy as np
import pytest

import attn_reference as ref
import flashattn
from flashattn import _lib, numpy_api
from test_numpy_backward import check_grads
from test_numpy_forward import BF16, DTYPES, check, make

pytestmark = pytest.mark.skipif(not _lib.has("flashattn_bwd"),
                                reason="the C library has no flashattn_bwd")

# (batch, seq_q, seq_k, heads_q, heads_kv, head_dim)
SHAPES = [
    (2, 17, 33, 4, 2, 16),    # seq_q < seq_k, GQA
    (1, 40, 13, 6, 2, 32),    # seq_q > seq_k: bottom-right causal leaves rows empty
    (1, 7, 130, 3, 3, 80),    # several kv-blocks
]
# (causal, window_size, align)
MASKS = [(False, (-1, -1), "bottom-right"), (True, (-1, -1), "bottom-right"),
         (True, (-1, -1), "top-left"), (False, (5, 3), "top-left")]


def hidden_rows_mask(rng, shape):
    """A random (batch, heads, seq_q, seq_k) boolean mask, 30% hidden, with
    query row 1 of every head and row 3 of head 0 hidden entirely."""
    b, h, sq, sk = shape
    mask = rng.random(shape) > 0.3
    mask[:, :, 1 % sq] = False
    mask[:, 0, 3 % sq] = False
    return mask


def modifiers(name, shape, dtype, seed=0):
    """The keyword arguments of one modifier case for q of (batch, seq_q,
    heads, dim) against seq_k keys; 'all' combines every kind."""
    b, sq, sk, hq = shape[:4]
    rng = np.random.default_rng(100 + seed)
    slopes = lambda *s: rng.uniform(0.02, 0.5, s).astype(np.float32)
    normal = lambda *s, dt=np.float32: rng.standard_normal(s).astype(dt)
    if name == "softcap":
        return dict(softcap=1.5)
    if name == "alibi":
        return dict(alibi_slopes=slopes(hq))
    if name == "alibi_batch":
        return dict(alibi_slopes=slopes(b, hq))
    if name == "sinks":
        return dict(sinks=normal(hq) + 1)
    if name == "bias":          # every dimension, in the inputs' dtype
        return dict(bias=normal(b, hq, sq, sk, dt=dtype))
    if name == "bias_broadcast":  # (seq_k, seq_q) memory viewed transposed, bfloat16
        return dict(bias=normal(sk, sq, dt=BF16).T)
    if name == "mask":
        return dict(mask=hidden_rows_mask(rng, (b, hq, sq, sk)))
    if name == "key_padding":   # (batch, 1, 1, seq_k)
        mask = np.ones((b, 1, 1, sk), bool)
        mask[:, :, :, sk - sk // 3:] = False
        return dict(mask=mask)
    assert name == "all"
    return dict(softcap=2.0, alibi_slopes=slopes(hq), sinks=normal(hq),
                bias=normal(1, hq, 1, sk), mask=hidden_rows_mask(rng, (1, 1, sq, sk)))


KINDS = ["softcap", "alibi", "alibi_batch", "sinks", "bias", "bias_broadcast", "mask",
         "key_padding", "all"]


def check_dsinks(got, expected, dout, o, lse, sinks, dtype):
    """tests/test_modifiers.c's rule for dsinks (module docstring), given
    the reference's dsinks, O and LSE: dense (batch, seq_q, heads, dim)
    and (batch, heads, seq_q), or packed (total_q, heads, dim) and
    (heads, total_q)."""
    d = np.moveaxis(np.abs(dout.astype(np.float64) * o).sum(axis=-1), -1, -2)  # lse's layout
    terms = (np.exp(sinks.astype(np.float64).reshape(-1, 1) - lse) * d).sum(axis=-1)
    terms = terms.sum(axis=0) if terms.ndim == 2 else terms
    eps = {np.dtype(np.float32): 1e-5, np.dtype(np.float16): 2e-3, BF16: 1.6e-2}[np.dtype(dtype)]
    assert got.dtype == np.float32 and got.shape == expected.shape
    err = np.abs(got - expected)
    assert np.all(err <= eps * terms + 1e-7), "dsinks error %s > %s" % (err, eps * terms + 1e-7)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal,window,align", MASKS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_modifiers_match_reference(shape, kind, causal, window, align, dtype):
    q, k, v = make(shape, dtype, seed=1)
    dout = np.random.default_rng(2).standard_normal(q.shape).astype(dtype)
    kw = dict(causal=causal, window_size=window, align=align, **modifiers(kind, shape, dtype))
    o, lse = flashattn.attention(q, k, v, return_lse=True, **kw)
    check(q, k, v, o, lse, **kw)
    # without the LSE, few rows per kv-head take the decode route
    check(q, k, v, flashattn.attention(q, k, v, **kw), None, **kw)
    got = flashattn.attention_backward(dout, q, k, v, o, lse, **kw)
    assert len(got) == (4 if "sinks" in kw else 3)
    check_grads(got[:3], dout, q, k, v, o, **kw)
    if "sinks" in kw:
        o_ref, lse_ref = ref.attention(q, k, v, **kw)
        expected = ref.attention_backward(dout, q, k, v, **kw)[3]
        check_dsinks(got[3], expected, dout, o_ref, lse_ref, kw["sinks"], dtype)


def test_reference_gradients_by_finite_differences():
    """The reference's analytic gradients, through softcap, ALiBi, bias,
    mask and sinks, against central differences (dsinks too)."""
    shape = (2, 3, 5, 2, 1, 4)
    q, k, v = make(shape, np.float64, seed=3)
    rng = np.random.default_rng(4)
    dout = rng.standard_normal(q.shape)
    mask = rng.random((2, 1, 3, 5)) > 0.3
    mask[0, 0, 1] = False   # a row that sees no key
    kw = dict(causal=True, window_size=(3, -1), softmax_scale=0.7, softcap=1.2,
              alibi_slopes=np.array([[0.3, 0.1], [0.2, 0.05]]), bias=rng.standard_normal((5,)),
              mask=mask)
    sinks = np.array([0.5, -1.0])
    loss = lambda q, k, v, sinks: np.sum(dout * ref.attention(q, k, v, sinks=sinks, **kw)[0])
    grads = ref.attention_backward(dout, q, k, v, sinks=sinks, **kw)
    h = 1e-6
    for which, g in enumerate(grads):
        x = [q, k, v, sinks][which]
        numeric = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            args = [a.copy() for a in (q, k, v, sinks)]
            args[which][idx] += h
            up = loss(*args)
            args[which][idx] -= 2 * h
            numeric[idx] = (up - loss(*args)) / (2 * h)
        assert np.abs(numeric - g).max() < 1e-7, "grad %d" % which


def near_sink(lse, sinks):
    """LSE of rows without keys against the sink logits: equal, as the
    header says (test_lse_without_keys_is_the_sink_exactly)."""
    return np.all(lse == sinks)


def test_lse_without_keys_is_the_sink_exactly():
    q = np.ones((1, 1, 1, 8), np.float32)
    k = np.zeros((1, 4, 1, 8), np.float32)
    sinks = np.array([0.42434883], np.float32)
    _, lse = flashattn.attention(q, k, k, mask=np.zeros((1, 4), bool), sinks=sinks,
                                 return_lse=True)
    assert lse[0, 0, 0] == sinks[0]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rows_with_every_key_hidden(dtype):
    """A row the mask hides entirely gets O = 0 and LSE = -inf, or with
    sinks LSE = the sink's logit; its dq is 0."""
    shape = (1, 6, 9, 2, 1, 16)
    q, k, v = make(shape, dtype, seed=5)
    mask = np.ones((1, 2, 6, 9), bool)
    mask[0, 0, 2] = False
    mask[0, :, 4] = False
    sinks = np.array([0.3, -0.7], np.float32)
    dout = np.ones(q.shape, dtype)
    for extra in (dict(), dict(sinks=sinks)):
        o, lse = flashattn.attention(q, k, v, mask=mask, return_lse=True, **extra)
        zero = lambda x: np.all(x.astype(np.float32) == 0)
        assert zero(o[0, 2, 0]) and zero(o[0, 4])
        hidden = lse[0, 0, 2], lse[0, :, 4]
        if extra:
            assert near_sink(hidden[0], sinks[0]) and near_sink(hidden[1], sinks)
        else:
            assert np.isneginf(hidden[0]) and np.all(np.isneginf(hidden[1]))
        check(q, k, v, o, lse, mask=mask, **extra)
        dq = flashattn.attention_backward(dout, q, k, v, o, lse, mask=mask, **extra)[0]
        assert zero(dq[0, 2, 0]) and zero(dq[0, 4])


def test_causal_boolean_mask_equals_built_in_causal():
    q, k, v = make((2, 30, 50, 4, 2, 32), np.float32, seed=6)
    dout = np.random.default_rng(7).standard_normal(q.shape).astype(np.float32)
    tril = ref.visible(30, 50, causal=True)
    o1, l1 = flashattn.attention(q, k, v, causal=True, return_lse=True, block_m=16, block_n=32)
    o2, l2 = flashattn.attention(q, k, v, mask=tril, return_lse=True, block_m=16, block_n=32)
    assert np.array_equal(o1, o2) and np.array_equal(l1, l2)
    g1 = flashattn.attention_backward(dout, q, k, v, o1, l1, causal=True, deterministic=True)
    g2 = flashattn.attention_backward(dout, q, k, v, o2, l2, mask=tril, deterministic=True)
    assert all(np.array_equal(a, b) for a, b in zip(g1, g2))


@pytest.mark.parametrize("tiles", [dict(), dict(block_m=16, block_n=32)], ids=["auto", "16x32"])
def test_structured_masks_over_many_tiles(tiles):
    """Masks whose tiles are hidden, open and mixed (documents under causal,
    key padding per batch entry, with a bias), over many tiles, on 2 threads."""
    shape = (2, 300, 500, 4, 2, 32)
    q, k, v = make(shape, np.float32, seed=16)
    rng = np.random.default_rng(17)
    dout = rng.standard_normal(q.shape).astype(np.float32)
    docs = (np.arange(300)[:, None] * 4 // 300) == (np.arange(500)[None, :] * 4 // 500)
    keys = np.ones((2, 1, 1, 500), bool)
    keys[1, ..., 350:] = False
    for kw in (dict(mask=docs, causal=True),
               dict(mask=keys, bias=rng.standard_normal((2, 4, 300, 500)).astype(np.float32))):
        o, lse = flashattn.attention(q, k, v, return_lse=True, num_threads=2, **tiles, **kw)
        check(q, k, v, o, lse, **kw)
        got = flashattn.attention_backward(dout, q, k, v, o, lse, num_threads=2, **tiles, **kw)
        check_grads(got, dout, q, k, v, o, **kw)


# ---- bias and mask arrays: read in place through their strides ---------------

def test_broadcast_arrays_are_read_in_place():
    shape = (2, 4, 9, 13)
    mask = np.ones((9, 13), bool)
    t, view = numpy_api._scores(mask, shape, "mask", False)
    assert np.shares_memory(view, mask) and t.data == mask.ctypes.data
    assert (t.batch, t.heads, t.seq_q, t.seq_k) == shape
    assert (t.stride_batch, t.stride_head, t.stride_q, t.stride_k) == (0, 0, 13, 1)
    base = np.zeros((13, 2, 9), np.float16)            # a transposed, sliced view
    bias = base[:, 1].T                                # (9, 13), strides (1, 18) elements
    t, view = numpy_api._scores(bias, shape, "bias", True)
    assert np.shares_memory(view, base) and t.dtype == _lib.F16
    assert (t.stride_batch, t.stride_head, t.stride_q, t.stride_k) == (0, 0, 1, 18)
    keys = np.ones((2, 1, 1, 13), np.uint8)             # one byte per element: used as is
    t, view = numpy_api._scores(keys, shape, "mask", False)
    assert np.shares_memory(view, keys)
    assert (t.stride_batch, t.stride_head, t.stride_q, t.stride_k) == (13, 0, 0, 1)


@pytest.mark.parametrize("kind", ["reversed", "float64", "int32", "big_endian"])
def test_arrays_that_need_a_copy_still_give_the_right_result(kind):
    shape = (1, 8, 11, 2, 2, 16)
    q, k, v = make(shape, np.float32, seed=8)
    rng = np.random.default_rng(9)
    if kind in ("reversed", "float64", "big_endian"):
        bias = rng.standard_normal((2, 8, 11))
        kw = dict(bias={"reversed": bias.astype(np.float32)[:, ::-1], "float64": bias,
                        "big_endian": bias.astype(">f4")}[kind])
        assert kind != "reversed" or kw["bias"].strides[1] < 0
    else:
        kw = dict(mask=(rng.random((8, 11)) > 0.4).astype(np.int32) * 7)
    o, lse = flashattn.attention(q, k, v, return_lse=True, **kw)
    check(q, k, v, o, lse, **kw)


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(bias=np.zeros((3, 11), np.float32)), ValueError, "does not broadcast"),
    (dict(mask=np.ones((3, 8, 11), bool)), ValueError, "does not broadcast"),
    (dict(bias=np.zeros((1, 1, 1, 8, 11), np.float32)), ValueError, "at most 4"),
    (dict(bias=np.zeros((8, 11), np.int32)), ValueError, "dtype int32 is not supported"),
    (dict(mask=np.zeros((8, 11), np.float32)), ValueError, "give an additive float mask"),
    (dict(alibi_slopes=np.ones(3, np.float32)), ValueError, "alibi_slopes must have shape"),
    (dict(alibi_slopes=np.ones((2, 2), np.float32)), ValueError, "alibi_slopes must have shape"),
    (dict(sinks=np.ones((1, 2), np.float32)), ValueError, "sinks must have shape"),
    (dict(softcap=-1.0), ValueError, "softcap"),
    (dict(softcap="x"), ValueError, "softcap must be a number"),
    (dict(sinks=np.array([0.0, np.inf], np.float32)), ValueError, "sinks"),
    (dict(alibi_slopes=np.array([np.nan, 0.0], np.float32)), ValueError, "alibi_slopes"),
])
def test_bad_modifiers_raise_and_write_nothing(kwargs, error, message):
    q, k, v = make((1, 8, 11, 2, 1, 16), np.float32, seed=10)
    out = np.full(q.shape, 5.0, np.float32)
    with pytest.raises(error, match=message):
        flashattn.attention(q, k, v, out=out, **kwargs)
    assert np.all(out == 5.0)


def test_backward_without_sinks_returns_three_gradients():
    q, k, v = make((1, 5, 7, 2, 2, 8), np.float32, seed=11)
    o, lse = flashattn.attention(q, k, v, softcap=3.0, return_lse=True)
    assert len(flashattn.attention_backward(o, q, k, v, o, lse, softcap=3.0)) == 3


# ---- packed sequences and the KV cache -----------------------------------------

def packed_case(dtype, seed=12):
    """Packed sequences (an empty one, seq_q > seq_k, a single row) and
    their per-sequence modifiers: ALiBi per sequence, sinks, and a bias
    and mask over (batch, heads, max_seqlen_q, max_seqlen_k)."""
    from test_varlen import make as make_packed
    pairs = [(3, 5), (0, 4), (9, 2), (1, 1), (12, 20)]
    q, k, v, cu_q, cu_k = make_packed(pairs, dtype, seed=seed)
    rng = np.random.default_rng(seed + 1)
    n, hq = len(pairs), q.shape[1]
    mask = rng.random((n, 1, 12, 20)) > 0.3
    mask[2, 0, 4] = False   # a row of sequence 2 sees no key
    mods = dict(softcap=2.5, alibi_slopes=rng.uniform(0.05, 0.4, (n, hq)).astype(np.float32),
                sinks=rng.standard_normal(hq).astype(np.float32),
                bias=rng.standard_normal((n, hq, 12, 20)).astype(np.float32), mask=mask)
    return q, k, v, cu_q, cu_k, mods


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), BF16], ids=str)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("subset", [("softcap", "alibi_slopes", "sinks"), ("bias", "mask"),
                                    ("softcap", "alibi_slopes", "sinks", "bias", "mask")])
def test_varlen_modifiers_match_reference(subset, causal, dtype):
    from test_varlen import check_forward
    q, k, v, cu_q, cu_k, mods = packed_case(dtype)
    kw = dict(causal=causal, **{name: mods[name] for name in subset})
    o, lse = flashattn.attention_varlen(q, k, v, cu_q, cu_k, 12, 20, return_lse=True, **kw)
    check_forward(o, lse, q, k, v, cu_q, cu_k, **kw)
    dout = np.random.default_rng(14).standard_normal(o.shape).astype(dtype)
    got = flashattn.attention_varlen_backward(dout, q, k, v, o, lse, cu_q, cu_k, 12, 20, **kw)
    expected = ref.attention_varlen_backward(dout, q, k, v, cu_q, cu_k, **kw)
    plain = ref.attention_varlen_backward(dout, q, k, v, cu_q, cu_k, dtype=np.float32,
                                          plain=True, out=o, **kw)
    scale = max(np.abs(e).max(initial=0) for e in expected[:3])
    for name, g, e, p in zip(("dq", "dk", "dv"), got, expected, plain):
        bound = max(2 * np.abs(p.astype(dtype).astype(np.float64) - e).max(initial=0),
                    1e-6 * scale)
        err = np.abs(g.astype(np.float64) - e).max(initial=0)
        assert err <= bound, "%s: max abs error %.3g > bound %.3g" % (name, err, bound)
    assert len(got) == (4 if "sinks" in kw else 3)
    if "sinks" in kw:
        o_ref, lse_ref = ref.attention_varlen(q, k, v, cu_q, cu_k, **kw)
        check_dsinks(got[3], expected[3], dout, o_ref, lse_ref, kw["sinks"], dtype)


def test_varlen_bias_sized_by_the_longest_or_the_max_seqlen_given():
    q, k, v, cu_q, cu_k, mods = packed_case(np.float32)
    bias = mods["bias"]                      # (batch, heads, 12, 20): the longest sequence
    padded = np.zeros((5, 4, 16, 24), np.float32)
    padded[:, :, :12, :20] = bias            # sized by larger max_seqlen_q/k
    want = flashattn.attention_varlen(q, k, v, cu_q, cu_k, bias=bias)
    got = flashattn.attention_varlen(q, k, v, cu_q, cu_k, 16, 24, bias=padded)
    assert np.array_equal(want, got)
    with pytest.raises(ValueError, match="does not broadcast"):
        flashattn.attention_varlen(q, k, v, cu_q, cu_k, bias=padded)   # no max_seqlen: 12, 20


def test_varlen_paged_cache_takes_a_mask():
    """Decode takes masks shaped [.., the longest new rows, the longest
    sequence's keys]: one that hides nothing changes nothing, a shorter
    one is a bad shape."""
    q, k, v, cu_q, cu_k, mods = packed_case(np.float32)
    rng = np.random.default_rng(3)
    pool = rng.standard_normal((8, 16, 2, 16)).astype(np.float32)
    table = np.arange(10, dtype=np.int32).reshape(5, 2) % 8
    plain = flashattn.attention_varlen(q, pool, pool, cu_q, cu_k, block_table=table)
    masked = flashattn.attention_varlen(q, pool, pool, cu_q, cu_k, block_table=table,
                                        mask=np.ones((1, 1, 12, 20), bool))
    assert np.array_equal(plain, masked)
    with pytest.raises(flashattn.BadArgumentError):
        flashattn.attention_varlen(q, pool, pool, cu_q, cu_k, block_table=table,
                                   mask=np.ones((1, 1, 12, 17), bool))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_kvcache_softcap_alibi_sinks(causal, dtype):
    """Decode against a cache of per-sequence lengths, every modifier the
    cache takes, each sequence against the reference over its own rows
    (ALiBi aligned to its own length), with 1 and 3 splits."""
    rng = np.random.default_rng(15)
    lens = [0, 9, 30]
    q = rng.standard_normal((3, 2, 4, 32)).astype(dtype)
    k_cache = rng.standard_normal((3, 40, 2, 32)).astype(dtype)
    v_cache = rng.standard_normal((3, 40, 2, 32)).astype(dtype)
    mods = dict(softcap=1.5, alibi_slopes=rng.uniform(0.05, 0.5, (3, 4)).astype(np.float32),
                sinks=rng.standard_normal(4).astype(np.float32))
    for splits in (1, 3):
        o, lse = flashattn.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens,
                                                  causal=causal, return_lse=True,
                                                  num_splits=splits, **mods)
        for b, n in enumerate(lens):
            kw = dict(mods, alibi_slopes=mods["alibi_slopes"][b])
            if n == 0:   # no key: the sink alone
                assert np.all(o[b].astype(np.float32) == 0)
                assert near_sink(lse[b], mods["sinks"][:, None])
                continue
            check(q[b:b + 1], k_cache[b:b + 1, :n], v_cache[b:b + 1, :n], o[b:b + 1],
                  lse[b:b + 1], causal=causal, **kw)
