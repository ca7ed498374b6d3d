"""flashattn.attention_with_kvcache with packed queries (cu_seqlens_q),
rotary embeddings, cache_batch_idx and cache_leftpad, and attention_varlen
against a paged cache: each sequence against the float64 reference over
its own keys, with a reference rotary (attn_reference.rotary). Pass rules
as in test_varlen.py."""

import numpy as np
import pytest

import attn_reference as ref
import flashattn
from flashattn import _lib
from test_numpy_decode import gather, paged
from test_numpy_forward import BF16, DTYPES
from test_varlen import check_forward, offsets

pytestmark = pytest.mark.skipif(
    not (_lib.has("flashattn_decode") and _lib.has("flashattn_varlen_init_size")),
    reason="the C library has no varlen decode")


def rotary_tables(length, rotary_dim, seed=9):
    angle = np.random.default_rng(seed).uniform(0, 2 * np.pi, (length, rotary_dim // 2))
    return np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)


class Case:
    """A cache of `entries` sequences (entries, capacity, heads_kv, dim),
    lens[b] valid rows, packed queries of lens_q[b] rows each; with append,
    as many new rows per sequence."""

    def __init__(self, lens_q=(1, 0, 4, 2), lens=(5, 0, 9, 3), capacity=20, heads=(4, 2),
                 dim=16, append=True, dtype=np.float32, entries=None, seed=0):
        rng = np.random.default_rng(seed)
        normal = lambda *s: rng.standard_normal(s).astype(dtype)
        self.cu = offsets(lens_q)
        total = self.cu[-1]
        self.lens = np.array(lens, np.int32)
        self.q = normal(total, heads[0], dim)
        entries = len(lens) if entries is None else entries
        self.k_cache = normal(entries, capacity, heads[1], dim)
        self.v_cache = normal(entries, capacity, heads[1], dim)
        self.k = normal(total, heads[1], dim) if append else None
        self.v = normal(total, heads[1], dim) if append else None

    def expected(self, batch_idx=None, leftpad=None, rotary=None, q_step=False):
        """The cache once the new rows are in, and each sequence's (q, k, v)
        as the reference sees them: q rotated in float64, the keys from
        leftpad to the end of the append."""
        k_cache, v_cache = self.k_cache.copy(), self.v_cache.copy()
        cos, sin, interleaved = (None,) * 3 if rotary is None else rotary
        seqs = []
        for b in range(len(self.lens)):
            e = b if batch_idx is None else batch_idx[b]
            n, pad = int(self.lens[b]), 0 if leftpad is None else int(leftpad[b])
            rows = slice(self.cu[b], self.cu[b + 1])
            add = rows.stop - rows.start if self.k is not None else 0
            q = self.q[rows]
            if self.k is not None:
                k_new = self.k[rows]
                if rotary is not None:
                    k_new = ref.rotary(k_new, cos, sin, n + np.arange(add), interleaved)
                k_cache[e, n:n + add] = k_new.astype(k_cache.dtype)
                v_cache[e, n:n + add] = self.v[rows]
            if rotary is not None:
                steps = np.arange(len(q)) if q_step else np.zeros(len(q), int)
                q = ref.rotary(q, cos, sin, n + steps, interleaved)
            seqs.append((q, k_cache[e, pad:n + add], v_cache[e, pad:n + add]))
        return k_cache, v_cache, seqs


def check_sequences(o, lse, seqs, **kw):
    """check_forward on sequences given one by one, packed like o."""
    q, k, v = (np.concatenate([s[i] for s in seqs]) for i in range(3))
    check_forward(o, lse, q, k, v, offsets([len(s[0]) for s in seqs]),
                  offsets([len(s[1]) for s in seqs]), dtype=o.dtype, **kw)


MASKS = [(False, (-1, -1)), (True, (-1, -1)), (True, (3, -1)), (False, (2, 2))]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal,window", MASKS)
@pytest.mark.parametrize("append", [False, True])
def test_packed_queries_append_their_own_rows(append, causal, window, dtype):
    c = Case(append=append, dtype=dtype)
    kw = dict(causal=causal, window_size=window)
    o, lse = flashattn.attention_with_kvcache(c.q, c.k_cache, c.v_cache, c.k, c.v,
                                              cache_seqlens=c.lens, cu_seqlens_q=c.cu,
                                              max_seqlen_q=4, return_lse=True, **kw)
    assert o.shape == c.q.shape and lse.shape == (4, len(c.q))
    k_cache, v_cache, seqs = c.expected()
    assert np.array_equal(c.k_cache, k_cache) and np.array_equal(c.v_cache, v_cache)
    check_sequences(o, lse, seqs, **kw)


@pytest.mark.parametrize("page_size", [1, 4, 16])
def test_packed_queries_paged_cache(page_size):
    c = Case(lens_q=(3, 1, 0, 6), lens=(9, 0, 30, 17), capacity=40, heads=(6, 3), dim=32,
             dtype=np.float16, seed=1)
    k_pool, table = paged(c.k_cache, c.lens, page_size)
    v_pool, _ = paged(c.v_cache, c.lens, page_size)
    o, lse = flashattn.attention_with_kvcache(c.q, k_pool, v_pool, c.k, c.v,
                                              cache_seqlens=c.lens, block_table=table,
                                              cu_seqlens_q=c.cu, causal=True, return_lse=True)
    k_cache, _, seqs = c.expected()
    capacity = table.shape[1] * page_size
    assert np.array_equal(gather(k_pool, table, capacity)[:, :40], k_cache)
    check_sequences(o, lse, seqs, causal=True)


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("causal,window", [(False, (-1, -1)), (True, (-1, -1)), (False, (4, 0))])
@pytest.mark.parametrize("packed", [False, True])
def test_rotary(packed, causal, window, interleaved):
    """q rotated at the position of the row it follows (every q row at
    cache_seqlens when neither causal nor windowed), the new keys at theirs
    and written rotated; rotary_dim below head_dim leaves the rest as is."""
    c = Case(lens_q=(2, 1, 3) if packed else (2, 2, 2), lens=(4, 0, 7), capacity=16,
             dim=24, seed=2)
    cos, sin = rotary_tables(16, 16)
    kw = dict(causal=causal, window_size=window)
    if packed:
        args, extra = (c.q, c.k_cache, c.v_cache, c.k, c.v), dict(cu_seqlens_q=c.cu)
    else:
        dense = lambda x: x.reshape(3, 2, *x.shape[1:])
        args, extra = (dense(c.q), c.k_cache, c.v_cache, dense(c.k), dense(c.v)), {}
    o, lse = flashattn.attention_with_kvcache(*args, cache_seqlens=c.lens, rotary_cos=cos,
                                              rotary_sin=sin, rotary_interleaved=interleaved,
                                              return_lse=True, **extra, **kw)
    k_cache, _, seqs = c.expected(rotary=(cos, sin, interleaved),
                                  q_step=causal or window != (-1, -1))
    assert np.abs(c.k_cache - k_cache).max() <= 1e-6      # rotated in float32
    assert np.array_equal(c.k_cache[..., 16:], k_cache[..., 16:])
    if not packed:
        o, lse = o.reshape(c.q.shape), lse.transpose(1, 0, 2).reshape(4, -1)
    check_sequences(o, lse, seqs, **kw)


def test_rotary_16_bit_cache_and_query():
    c = Case(lens_q=(3, 2), lens=(5, 1), capacity=12, dim=32, dtype=BF16, seed=3)
    cos, sin = rotary_tables(12, 32)
    o, lse = flashattn.attention_with_kvcache(c.q, c.k_cache, c.v_cache, c.k, c.v,
                                              cache_seqlens=c.lens, cu_seqlens_q=c.cu,
                                              rotary_cos=cos, rotary_sin=sin, causal=True,
                                              rotary_interleaved=False, return_lse=True)
    k_cache, _, seqs = c.expected(rotary=(cos, sin, False), q_step=True)
    # the new rows rotated in float32, rounded once to bfloat16: within one ulp
    ulp = np.abs(k_cache.astype(np.float32)) * 2.0 ** -7
    assert np.all(np.abs(c.k_cache.astype(np.float32) - k_cache.astype(np.float32)) <= ulp)
    seqs = [(q, kc, vc) for (q, _, vc), kc in
            zip(seqs, [c.k_cache[0, :8], c.k_cache[1, :3]])]   # the keys as written
    check_sequences(o, lse, seqs, causal=True)


@pytest.mark.parametrize("packed", [False, True])
def test_batch_idx_and_leftpad(packed):
    """Sequence b reads and appends cache entry batch_idx[b]; its keys start
    at row leftpad[b]; with rotary, positions are cache rows (FlashAttention-2's)."""
    lens_q = (2, 1, 3) if packed else (2, 2, 2)
    c = Case(lens_q=lens_q, lens=(6, 3, 9), capacity=16, entries=5, seed=4)
    batch_idx = np.array([3, 0, 4], np.int32)
    leftpad = np.array([2, 3, 0], np.int32)     # the middle sequence has no cached key left
    cos, sin = rotary_tables(16, 8)
    before = c.k_cache.copy()
    kw = dict(cache_seqlens=c.lens, cache_batch_idx=batch_idx, cache_leftpad=leftpad,
              rotary_cos=cos, rotary_sin=sin, causal=True, return_lse=True)
    if packed:
        o, lse = flashattn.attention_with_kvcache(c.q, c.k_cache, c.v_cache, c.k, c.v,
                                                  cu_seqlens_q=c.cu, **kw)
    else:
        dense = lambda x: x.reshape(3, 2, *x.shape[1:])
        o, lse = flashattn.attention_with_kvcache(dense(c.q), c.k_cache, c.v_cache, dense(c.k),
                                                  dense(c.v), **kw)
        o, lse = o.reshape(c.q.shape), lse.transpose(1, 0, 2).reshape(4, -1)
    k_cache, _, seqs = c.expected(batch_idx, leftpad, rotary=(cos, sin, True), q_step=True)
    assert np.abs(c.k_cache - k_cache).max() <= 1e-6
    assert np.array_equal(c.k_cache[[1, 2]], before[[1, 2]])   # entries no sequence uses
    check_sequences(o, lse, seqs, causal=True)


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), BF16], ids=str)
@pytest.mark.parametrize("page_size", [3, 8])
def test_attention_varlen_on_a_paged_cache(page_size, dtype):
    """FlashAttention-2's paged varlen: packed queries against the first
    cu_seqlens_k[b + 1] - cu_seqlens_k[b] (or seqused_k[b]) rows of each
    sequence's pages, nothing appended."""
    c = Case(lens_q=(3, 0, 1, 5), lens=(7, 4, 0, 20), capacity=24, append=False, dtype=dtype,
             seed=5)
    k_pool, table = paged(c.k_cache, c.lens, page_size)
    v_pool, _ = paged(c.v_cache, c.lens, page_size)
    cu_k = offsets(c.lens)
    for used, lens in [(None, c.lens), (np.array([2, 4, 0, 11], np.int32), [2, 4, 0, 11])]:
        o, lse = flashattn.attention_varlen(c.q, k_pool, v_pool, c.cu, cu_k, 5, 20,
                                            seqused_k=used, block_table=table, causal=True,
                                            return_lse=True)
        seqs = [(c.q[c.cu[b]:c.cu[b + 1]], c.k_cache[b, :n], c.v_cache[b, :n])
                for b, n in enumerate(lens)]
        check_sequences(o, lse, seqs, causal=True)
    assert np.array_equal(gather(k_pool, table, table.shape[1] * page_size)[:, :24], c.k_cache)


# ---- errors ------------------------------------------------------------------

@pytest.mark.parametrize("change,message", [
    (dict(cu_seqlens_q=np.array([0, 1, 3, 2, 7], np.int32)), "decreases"),
    (dict(cu_seqlens_q=np.array([0, 1, 1, 5, 8], np.int32)), "holds 7 rows"),
    (dict(max_seqlen_q=3), "max_seqlen_q is 3"),
    (dict(cache_seqlens=np.array([5, 0, 17, 3], np.int32)), "overflows the cache capacity"),
    (dict(cache_leftpad=np.array([0, 1, 0, 0], np.int32)), r"leftpad\[1\] = 1"),
    (dict(cache_batch_idx=np.array([0, 1, 4, 2], np.int32)), r"batch_idx\[2\] = 4"),
    (dict(cache_batch_idx=np.array([0, 1], np.int32)), "2 values for 4 sequences"),
    (dict(rotary_cos=np.ones((12, 8), np.float32), rotary_sin=np.ones((12, 8), np.float32)),
     "rotary position 12"),
])
def test_bad_decode_arguments_write_nothing(change, message):
    c = Case()
    before = c.k_cache.copy(), c.v_cache.copy()
    out = np.full(c.q.shape, 3.0, np.float32)
    kw = dict(dict(cache_seqlens=c.lens, cu_seqlens_q=c.cu), **change)
    with pytest.raises(flashattn.BadArgumentError, match=message):
        flashattn.attention_with_kvcache(c.q, c.k_cache, c.v_cache, c.k, c.v, out=out, **kw)
    assert np.all(out == 3.0)
    assert np.array_equal(c.k_cache, before[0]) and np.array_equal(c.v_cache, before[1])


def test_bad_rotary_tables():
    c = Case()
    cos, sin = rotary_tables(20, 8)
    with pytest.raises(ValueError, match="both rotary_cos and rotary_sin"):
        flashattn.attention_with_kvcache(c.q, c.k_cache, c.v_cache, cache_seqlens=c.lens,
                                         cu_seqlens_q=c.cu, rotary_cos=cos)
    with pytest.raises(ValueError, match="rotary_dim / 2"):
        flashattn.attention_with_kvcache(c.q, c.k_cache, c.v_cache, cache_seqlens=c.lens,
                                         cu_seqlens_q=c.cu, rotary_cos=cos, rotary_sin=sin[:, :2])
    with pytest.raises(ValueError, match="rotary_dim is 18"):
        wide = np.ones((20, 9), np.float32)
        flashattn.attention_with_kvcache(c.q, c.k_cache, c.v_cache, cache_seqlens=c.lens,
                                         cu_seqlens_q=c.cu, rotary_cos=wide, rotary_sin=wide)
    with pytest.raises(ValueError, match="max_seqlen_q goes with cu_seqlens_q"):
        flashattn.attention_with_kvcache(c.q[None], c.k_cache[:1], c.v_cache[:1],
                                         max_seqlen_q=7)


def test_packed_queries_split_keys():
    """Long caches split across threads: every split count gives the
    reference's result."""
    c = Case(lens_q=(1, 3, 0, 2), lens=(577, 1, 300, 0), capacity=600, heads=(8, 1), dim=64,
             append=True, seed=6)
    k_cache, v_cache = c.k_cache.copy(), c.v_cache.copy()
    results = []
    for n in (1, 2, 7):
        c.k_cache[:], c.v_cache[:] = k_cache, v_cache
        results.append(flashattn.attention_with_kvcache(
            c.q, c.k_cache, c.v_cache, c.k, c.v, cache_seqlens=c.lens, cu_seqlens_q=c.cu,
            num_splits=n, causal=True, return_lse=True))
    c.k_cache[:], c.v_cache[:] = k_cache, v_cache
    _, _, seqs = c.expected()
    for o, lse in results:
        check_sequences(o, lse, seqs, causal=True)
