"""flashattn.attention_with_kvcache: each sequence against the float64
reference over its own valid cache rows, contiguous and paged caches, with
and without appending new rows; pass rules as in test_numpy_forward.py."""

import numpy as np
import pytest

import flashattn
from flashattn import _lib
from test_numpy_forward import BF16, DTYPES, check

pytestmark = pytest.mark.skipif(not _lib.has("flashattn_decode"),
                                reason="the C library has no flashattn_decode")


class Case:
    """A logical cache (batch, capacity, heads_kv, dim) with lengths, the
    queries, and optionally rows to append."""

    def __init__(self, batch=3, capacity=40, heads_q=4, heads_kv=2, dim=16, seq_q=1,
                 seq_new=0, lens=(0, 17, 33), dtype=np.float32, q_dtype=None, seed=0):
        rng = np.random.default_rng(seed)
        normal = lambda *s, dt=dtype: rng.standard_normal(s).astype(dt)
        self.q = normal(batch, seq_q, heads_q, dim, dt=q_dtype or dtype)
        self.k_cache = normal(batch, capacity, heads_kv, dim)
        self.v_cache = normal(batch, capacity, heads_kv, dim)
        self.lens = np.array(lens, np.int32)
        self.k = normal(batch, seq_new, heads_kv, dim) if seq_new else None
        self.v = normal(batch, seq_new, heads_kv, dim) if seq_new else None
        self.seq_new = seq_new

    def expected_cache(self):
        """The logical cache once the new rows are in (in the cache's dtype)."""
        k, v = self.k_cache.copy(), self.v_cache.copy()
        for b, n in enumerate(self.lens):
            if self.seq_new:
                k[b, n:n + self.seq_new] = self.k[b].astype(k.dtype)
                v[b, n:n + self.seq_new] = self.v[b].astype(v.dtype)
        return k, v

    def check(self, o, lse, **kw):
        k, v = self.expected_cache()
        for b, n in enumerate(self.lens + self.seq_new):
            check(self.q[b:b + 1], k[b:b + 1, :n], v[b:b + 1, :n], o[b:b + 1], lse[b:b + 1],
                  **kw)


def paged(cache, lens_after, page_size, seed=1):
    """The logical cache split into shuffled pages of a pool, plus its block table."""
    batch, capacity = cache.shape[:2]
    pages_per_seq = -(-capacity // page_size)
    order = np.random.default_rng(seed).permutation(batch * pages_per_seq)
    pool = np.zeros((batch * pages_per_seq, page_size) + cache.shape[2:], cache.dtype)
    table = order.reshape(batch, pages_per_seq).astype(np.int32)
    for b in range(batch):
        for i in range(pages_per_seq):
            rows = cache[b, i * page_size:(i + 1) * page_size]
            pool[table[b, i], :len(rows)] = rows
    return pool, table


def gather(pool, table, capacity):
    """The logical cache back out of a paged pool."""
    return np.stack([np.concatenate([pool[p] for p in row])[:capacity] for row in table])


MASKS = [(False, (-1, -1)), (True, (-1, -1)), (True, (7, -1)), (False, (5, 5))]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal,window", MASKS)
@pytest.mark.parametrize("seq_q,seq_new", [(1, 0), (1, 1), (5, 0), (3, 3)])
def test_contiguous_cache(seq_q, seq_new, causal, window, dtype):
    c = Case(seq_q=seq_q, seq_new=seq_new, dtype=dtype)
    kw = dict(causal=causal, window_size=window)
    o, lse = flashattn.attention_with_kvcache(c.q, c.k_cache, c.v_cache, c.k, c.v,
                                              cache_seqlens=c.lens, return_lse=True, **kw)
    c.check(o, lse, **kw)
    expected_k, expected_v = c.expected_cache()
    assert np.array_equal(c.k_cache, expected_k) and np.array_equal(c.v_cache, expected_v)


@pytest.mark.parametrize("page_size", [1, 5, 16])
@pytest.mark.parametrize("seq_new", [0, 4])
def test_paged_cache(page_size, seq_new):
    c = Case(batch=3, capacity=48, heads_q=6, heads_kv=3, dim=32, seq_q=2, seq_new=seq_new,
             lens=(9, 0, 31), dtype=np.float16)
    k_pool, table = paged(c.k_cache, c.lens, page_size)
    v_pool, _ = paged(c.v_cache, c.lens, page_size)
    o, lse = flashattn.attention_with_kvcache(c.q, k_pool, v_pool, c.k, c.v,
                                              cache_seqlens=c.lens, block_table=table,
                                              causal=True, return_lse=True)
    c.check(o, lse, causal=True)
    expected_k, _ = c.expected_cache()
    capacity = table.shape[1] * page_size
    got = gather(k_pool, table, capacity)[:, :48]
    assert np.array_equal(got, expected_k)   # appends crossed page boundaries in place


def test_query_and_cache_dtypes_may_differ():
    c = Case(dtype=np.float16, q_dtype=np.float32, seq_q=2)
    o, lse = flashattn.attention_with_kvcache(c.q, c.k_cache, c.v_cache,
                                              cache_seqlens=c.lens, return_lse=True)
    assert o.dtype == np.float32
    k, v = c.k_cache.astype(np.float32), c.v_cache.astype(np.float32)
    for b, n in enumerate(c.lens):
        check(c.q[b:b + 1], k[b:b + 1, :n], v[b:b + 1, :n], o[b:b + 1], lse[b:b + 1])


def test_int_and_default_lengths():
    c = Case(lens=(40, 40, 40), seq_q=3)
    everything = flashattn.attention_with_kvcache(c.q, c.k_cache, c.v_cache, causal=True)
    as_int = flashattn.attention_with_kvcache(c.q, c.k_cache, c.v_cache, cache_seqlens=40,
                                              causal=True)
    forward = flashattn.attention(c.q, c.k_cache, c.v_cache, causal=True)
    assert np.array_equal(everything, as_int)
    check(c.q, c.k_cache, c.v_cache, everything, None, causal=True)
    assert np.abs(everything - forward).max() <= 1e-5


def test_splits_agree_to_f32_rounding():
    c = Case(batch=1, capacity=600, heads_q=4, heads_kv=1, dim=64, lens=(577,))
    results = [flashattn.attention_with_kvcache(c.q, c.k_cache, c.v_cache, cache_seqlens=c.lens,
                                                num_splits=n) for n in (1, 2, 7)]
    for r in results[1:]:
        assert np.abs(r - results[0]).max() <= 1e-6


@pytest.mark.parametrize("lens,message", [
    ((0, 41, 3), "seqlens"),
    ((0, -1, 3), "seqlens"),
    ((0, 38, 3), "overflow|capacity|beyond"),   # 38 + 4 new rows > 40
])
def test_bad_lengths_write_nothing(lens, message):
    c = Case(seq_new=4, lens=lens)
    k_before = c.k_cache.copy()
    out = np.full(c.q.shape, 3.0, np.float32)
    with pytest.raises(ValueError, match=message):
        flashattn.attention_with_kvcache(c.q, c.k_cache, c.v_cache, c.k, c.v,
                                         cache_seqlens=c.lens, out=out)
    assert np.array_equal(c.k_cache, k_before) and np.all(out == 3.0)


def test_block_table_out_of_range():
    c = Case(capacity=20, lens=(1, 2, 3))
    k_pool, table = paged(c.k_cache, c.lens, 4)
    v_pool, _ = paged(c.v_cache, c.lens, 4)
    table[1, 0] = len(k_pool)
    with pytest.raises(ValueError, match="block_table"):
        flashattn.attention_with_kvcache(c.q, k_pool, v_pool, cache_seqlens=c.lens,
                                         block_table=table)


def test_a_cache_that_cannot_take_rows_in_place_is_refused():
    c = Case(seq_new=1, dtype=BF16)
    with pytest.raises(ValueError, match="in place"):
        flashattn.attention_with_kvcache(c.q, c.k_cache[..., ::-1], c.v_cache, c.k, c.v,
                                         cache_seqlens=c.lens)
    frozen = c.v_cache.copy()
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="in place"):
        flashattn.attention_with_kvcache(c.q, c.k_cache, frozen, c.k, c.v, cache_seqlens=c.lens)
    with pytest.raises(ValueError, match="both k and v"):
        flashattn.attention_with_kvcache(c.q, c.k_cache, c.v_cache, c.k, None)


def test_a_scratch_buffer_too_small_for_the_decode_is_grown():
    """The decode must see the true size of the thread's scratch buffer:
    one left over from a smaller call is refused by the library, grown,
    and the result is that of a call with its own workspace. (Its
    workspace_bytes once arrived undeclared, with garbage in its upper
    half, and the library wrote past a small buffer.)"""
    c = Case(batch=2, capacity=300, heads_q=8, heads_kv=2, dim=64, seq_q=3, seq_new=2,
             lens=(250, 17))
    k_cache, v_cache = c.k_cache.copy(), c.v_cache.copy()
    _lib.release_workspace()
    fresh = flashattn.attention_with_kvcache(c.q, k_cache, v_cache, c.k, c.v,
                                             cache_seqlens=c.lens, num_splits=4)
    _lib.release_workspace()
    tiny = np.ones((1, 1, 1, 1), np.float32)
    flashattn.attention(tiny, tiny, tiny)          # leaves a scratch buffer of a few bytes
    small = len(_lib._scratch.buf)
    got = flashattn.attention_with_kvcache(c.q, c.k_cache, c.v_cache, c.k, c.v,
                                           cache_seqlens=c.lens, num_splits=4)
    assert len(_lib._scratch.buf) > small
    assert np.array_equal(got, fresh) and np.array_equal(c.k_cache, k_cache)
