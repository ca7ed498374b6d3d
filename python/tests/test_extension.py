"""The compiled helper of flash_attn_func's plain forward (python/ext/fast.c).

It reads tensors only through the methods torch's have (shape, stride(),
data_ptr(), dtype, is_cpu, is_contiguous()) and allocates through the
callables it is given, so these tests drive it with NumPy-backed stand-ins
and need no torch: its results against the ctypes path (numpy_api), the
calls it must leave to the Python path, and the library's refusals.
"""
import os

import ml_dtypes
import numpy as np
import pytest

from flashattn import _lib, numpy_api

fast = _lib.fast
needs_fast = pytest.mark.skipif(fast is None, reason="no compiled helper beside the library")

F32, F16, BF16, I32, I64 = "f32", "f16", "bf16", "i32", "i64"  # dtype stand-ins, by identity
NP = {F32: np.float32, F16: np.float16, BF16: ml_dtypes.bfloat16, I32: np.int32, I64: np.int64}
CONTIGUOUS = object()


class Fake:
    """The tensor methods fast.c calls, over a NumPy array."""

    def __init__(self, a, dtype, is_cpu=True):
        self.a, self.dtype, self.is_cpu, self.requires_grad = a, dtype, is_cpu, False

    @property
    def shape(self):
        return tuple(self.a.shape)

    def stride(self):
        if self.a.size == 0:  # NumPy gives empty arrays zero strides, torch row-major ones
            return tuple(int(np.prod(self.a.shape[i + 1:])) for i in range(self.a.ndim))
        return tuple(s // self.a.itemsize for s in self.a.strides)

    def data_ptr(self):
        return self.a.ctypes.data

    def is_contiguous(self):
        return self.a.flags.c_contiguous


class Lying(Fake):
    pass


def empty_like(x, memory_format=None):
    assert memory_format in (None, CONTIGUOUS)
    return Fake(np.full(x.a.shape, np.nan, dtype=x.a.dtype), x.dtype)


def empty(*sizes, dtype=None):
    return Fake(np.full(sizes, np.nan, dtype=NP[dtype]), dtype)


GRAD = [False]  # what the registered is_grad_enabled says


def register(cls):
    fast.register_torch(cls, ((F32, _lib.F32), (F16, _lib.F16), (BF16, _lib.BF16)), F32, I32, I64,
                        empty_like, empty, CONTIGUOUS, lambda: GRAD[0], lambda: 1)


@pytest.fixture
def fakes():
    """The helper registered for Fake, and torch's registration (if any)
    given back afterwards."""
    saved = fast.registered()
    register(Fake)
    yield
    if saved is not None:
        fast.register_torch(*saved)


def make(shape, dt, seed):
    rng = np.random.default_rng(seed)
    return Fake(rng.standard_normal(shape).astype(NP[dt]), dt)


def call(q, k, v, want_lse, scale=None, causal=False, window_size=(-1, -1), deterministic=False):
    return fast.fwd(q, k, v, scale, causal, window_size, deterministic, want_lse)


CASES = [  # q shape, k shape, dtype, options
    ((1, 1, 8, 128), (1, 1, 8, 128), F32, {}),
    ((2, 5, 4, 64), (2, 7, 2, 64), F32, {"causal": True}),
    ((1, 33, 6, 32), (1, 40, 3, 32), F16, {"window_size": (5, 0), "scale": 0.3}),
    ((3, 4, 2, 16), (3, 9, 1, 16), BF16, {"causal": True, "window_size": (-1, 2)}),
    ((1, 200, 2, 128), (1, 300, 2, 128), F32, {"causal": True}),
]


@needs_fast
@pytest.mark.parametrize("qs, ks, dt, options", CASES)
@pytest.mark.parametrize("want_lse", [False, True])
def test_matches_the_ctypes_path_bit_for_bit(fakes, qs, ks, dt, options, want_lse):
    q, k, v = make(qs, dt, 1), make(ks, dt, 2), make(ks, dt, 3)
    out, lse = call(q, k, v, want_lse, **options)
    ref_out, ref_lse = numpy_api.attention(
        q.a, k.a, v.a, causal=options.get("causal", False), softmax_scale=options.get("scale"),
        window_size=options.get("window_size", (-1, -1)), return_lse=True, num_threads=1)
    assert type(out) is Fake and out.a.dtype == q.a.dtype and out.a.shape == qs
    assert np.array_equal(out.a.view(np.uint8), ref_out.view(np.uint8))
    if want_lse:
        assert lse.a.shape == (qs[0], qs[2], qs[1])
        assert np.array_equal(lse.a, ref_lse)
    else:
        assert lse is None


def call_bwd(q, k, v, out, dout, lse, scale=None, causal=False, window_size=(-1, -1),
             deterministic=False):
    """fast.bwd into fresh gradients: (status or None, dq, dk, dv)."""
    grads = [Fake(np.full(x.a.shape, np.nan, dtype=x.a.dtype), x.dtype) for x in (q, k, v)]
    done = fast.bwd(q, k, v, out, dout, *grads, lse.a.ctypes.data, scale, causal, window_size,
                    deterministic)
    return (done, *grads)


@needs_fast
@pytest.mark.parametrize("qs, ks, dt, options", CASES)
def test_bwd_matches_the_ctypes_path_bit_for_bit(fakes, qs, ks, dt, options):
    q, k, v = make(qs, dt, 1), make(ks, dt, 2), make(ks, dt, 3)
    out, lse = call(q, k, v, True, **options)
    dout = make(qs, dt, 4)
    done, dq, dk, dv = call_bwd(q, k, v, out, dout, lse, **options)
    assert done == _lib.OK
    ref = numpy_api.attention_backward(
        dout.a, q.a, k.a, v.a, out.a, lse.a, causal=options.get("causal", False),
        softmax_scale=options.get("scale"), window_size=options.get("window_size", (-1, -1)),
        num_threads=1)
    for got, want in zip((dq, dk, dv), ref):
        assert got.a.dtype == want.dtype and np.array_equal(got.a.view(np.uint8), want.view(np.uint8))


@needs_fast
def test_bwd_leaves_other_calls_and_returns_refusals(fakes):
    q, k, v = (make((1, 3, 2, 16), F32, s) for s in (7, 8, 9))
    out, lse = call(q, k, v, True)
    dout = make((1, 3, 2, 16), F32, 10)
    assert call_bwd(Lying(q.a, F32), k, v, out, dout, lse)[0] is None  # another type
    assert call_bwd(q, k, v, out, make((1, 3, 2, 16), F16, 11), lse)[0] is None  # another dtype
    assert call_bwd(q, k, v, out, dout, lse, causal="yes")[0] is None  # an option it does not read
    done, dq, _, _ = call_bwd(q, k, v, out, dout, lse, window_size=(-5, 0))
    assert done != _lib.OK and np.isnan(dq.a).all()  # refused, nothing written
    with pytest.raises(TypeError):
        fast.bwd(1, 2)
    with pytest.raises(ValueError):
        fast.init_bwd(1, None)  # one address without the other


@needs_fast
def test_reads_views_in_place(fakes):
    """q, k and v as (batch, heads, seq, dim) memory seen transposed: the
    same bits as contiguous copies, out contiguous."""
    q, k, v = (make((2, 6, 9, 32), F32, s) for s in (4, 5, 6))
    views = [Fake(x.a.transpose(0, 2, 1, 3), F32) for x in (q, k, v)]
    copies = [Fake(np.ascontiguousarray(x.a), F32) for x in views]
    out, _ = call(*views, False, causal=True)
    ref, _ = call(*copies, False, causal=True)
    assert out.a.flags.c_contiguous and np.array_equal(out.a, ref.a)


@needs_fast
def test_leaves_other_calls_to_the_python_path(fakes):
    q, k, v = (make((1, 3, 2, 16), F32, s) for s in (7, 8, 9))
    others = [
        (q.a, k, v),                                    # not a registered tensor type
        (Lying(q.a, F32), k, v),                        # a subclass
        (Fake(q.a[0], F32), k, v),                      # 3-D
        (Fake(np.stack([q.a, q.a], -1)[..., 0], F32), k, v),  # head_dim not contiguous
        (q, make((1, 3, 2, 16), F16, 8), v),            # mixed dtypes
        (q, k, Fake(v.a, "f64")),                       # a dtype it does not read
        (q, Fake(k.a, F32, is_cpu=False), v),           # not on the CPU
        (q, k, make((1, 3, 2, 8), F32, 9)),             # V's head_dim not Q's
    ]
    for args in others:
        assert call(*args, False) is None


@needs_fast
def test_leaves_options_it_does_not_read_as_given_to_the_python_path(fakes):
    """Options of other types (a tensor, a float where an int belongs, a
    zero scale) are the Python path's to read or reject."""
    q, k, v = (make((1, 3, 2, 16), F32, s) for s in (7, 8, 9))
    for options in ({"scale": 0.0}, {"scale": "0.5"}, {"causal": None}, {"causal": np.bool_(True)},
                    {"deterministic": 1.0}, {"window_size": (1, 2, 3)}, {"window_size": (1.0, 2)},
                    {"window_size": (1, 2**70)}, {"window_size": range(2)}):
        assert call(q, k, v, False, **options) is None
    # ints and lists as flash_attn_interface._params reads them
    got = call(q, k, v, False, scale=2, causal=1, window_size=[3, 0])
    ref = call(q, k, v, False, scale=2.0, causal=True, window_size=(3, 0))
    assert np.array_equal(got[0].a, ref[0].a)


@needs_fast
def test_leaves_calls_that_record_a_gradient(fakes):
    q, k, v = (make((1, 3, 2, 16), F32, s) for s in (7, 8, 9))
    k.requires_grad = True
    q.requires_grad = v.requires_grad = False
    assert call(q, k, v, False) is not None  # grad mode off
    GRAD[0] = True
    try:
        assert call(q, k, v, False) is None
        k.requires_grad = False
        assert call(q, k, v, False) is not None
    finally:
        GRAD[0] = False


@needs_fast
def test_returns_the_library_status_on_a_refused_call(fakes):
    q, k, v = make((1, 4, 8, 16), F32, 1), make((1, 4, 3, 16), F32, 2), make((1, 4, 3, 16), F32, 3)
    status = call(q, k, v, True)
    assert status == _lib.ERR_BAD_HEADS
    with pytest.raises(_lib.BadArgumentError, match="heads"):
        _lib.check(status, "flashattn_fwd")


@needs_fast
def test_empty_sizes(fakes):
    for qs, ks in (((1, 0, 2, 16), (1, 5, 2, 16)), ((0, 3, 2, 16), (0, 3, 2, 16)),
                   ((1, 3, 2, 16), (1, 0, 2, 16))):
        q, k, v = make(qs, F32, 1), make(ks, F32, 2), make(ks, F32, 3)
        done = call(q, k, v, True)
        ref_out, ref_lse = numpy_api.attention(q.a, k.a, v.a, return_lse=True, num_threads=1)
        assert np.array_equal(done[0].a, ref_out) and np.array_equal(done[1].a, ref_lse)


@needs_fast
def test_errors_raised_by_the_tensor_propagate(fakes):
    class Broken(Fake):
        def data_ptr(self):
            raise RuntimeError("no storage")
    register(Broken)
    q = Broken(np.zeros((1, 1, 1, 16), np.float32), F32)
    with pytest.raises(RuntimeError, match="no storage"):
        call(q, q, q, False)


@needs_fast
def test_workspace_is_kept_and_released(fakes):
    q, k, v = (make((1, 64, 2, 32), F32, s) for s in (1, 2, 3))
    call(q, k, v, False)
    kept = fast.workspace_bytes()
    assert kept > 0
    call(q, k, v, False)
    assert fast.workspace_bytes() == kept
    _lib.release_workspace()
    assert fast.workspace_bytes() == 0
    out, _ = call(q, k, v, False)
    assert np.isfinite(out.a).all()


def decode(q, kc, vc, k=None, v=None, lens=None, table=None, want_lse=True, scale=None,
           causal=False, window_size=(-1, -1), num_splits=0):
    return fast.decode(q, kc, vc, k, v, lens, table, scale, causal, window_size, num_splits,
                       want_lse)


def ref_decode(q, kc, vc, k=None, v=None, lens=None, table=None, scale=None, causal=False,
               window_size=(-1, -1), num_splits=0):
    """numpy_api's call on copies of the caches: (out, lse, k cache, v cache)."""
    kc, vc = kc.a.copy(), vc.a.copy()
    out, lse = numpy_api.attention_with_kvcache(
        q.a, kc, vc, None if k is None else k.a, None if v is None else v.a,
        cache_seqlens=lens.a if isinstance(lens, Fake) else lens,
        block_table=None if table is None else table.a, causal=causal, softmax_scale=scale,
        window_size=window_size, return_lse=True, num_splits=num_splits, num_threads=1)
    return out, lse, kc, vc


DECODE_CASES = [  # q, cache (contiguous, or paged: the pool), new rows, dtype, lengths, pages
    ((2, 1, 8, 64), (2, 40, 2, 64), 1, F16, [17, 33], None, {"causal": True}),
    ((2, 3, 4, 32), (6, 16, 2, 32), 0, F32, [5, 40], (2, 3), {"window_size": (8, 0)}),
    ((1, 1, 4, 128), (1, 64, 4, 128), 0, BF16, None, None, {"num_splits": 2}),
    ((3, 1, 2, 16), (3, 20, 1, 16), 1, F32, 11, None, {"scale": 0.5, "causal": True}),
    ((2, 2, 4, 32), (8, 8, 2, 32), 2, F16, [0, 30], (2, 4), {"causal": True}),
]


@needs_fast
@pytest.mark.parametrize("qs, cs, new, dt, lens, pages, options", DECODE_CASES)
def test_decode_matches_the_ctypes_path_bit_for_bit(fakes, qs, cs, new, dt, lens, pages, options):
    q, kc, vc = make(qs, dt, 1), make(cs, dt, 2), make(cs, dt, 3)
    k = v = None
    if new:
        k, v = make((qs[0], new, cs[2], cs[3]), dt, 4), make((qs[0], new, cs[2], cs[3]), dt, 5)
    table = None
    if pages:
        order = np.random.default_rng(6).permutation(cs[0])[:pages[0] * pages[1]]
        table = Fake(order.reshape(pages).astype(np.int32), I32)
    if isinstance(lens, list):
        lens = Fake(np.array(lens, dtype=np.int64 if pages else np.int32), I64 if pages else I32)
    ref_out, ref_lse, ref_kc, ref_vc = ref_decode(q, kc, vc, k, v, lens, table, **options)
    out, lse = decode(q, kc, vc, k, v, lens, table, **options)
    assert out.a.shape == ref_out.shape and out.a.flags.c_contiguous
    assert np.array_equal(out.a.view(np.uint8), ref_out.view(np.uint8))
    assert np.array_equal(lse.a, ref_lse)
    assert np.array_equal(kc.a.view(np.uint8), ref_kc.view(np.uint8))
    assert np.array_equal(vc.a.view(np.uint8), ref_vc.view(np.uint8))
    assert decode(q, kc, vc, None, None, lens, table, want_lse=False, **options)[1] is None


@needs_fast
def test_decode_leaves_other_calls_to_the_python_path(fakes):
    q = make((2, 1, 4, 16), F32, 1)
    kc, vc = make((2, 8, 2, 16), F32, 2), make((2, 8, 2, 16), F32, 3)
    k = make((2, 1, 2, 16), F32, 4)
    lens = Fake(np.array([3, 4], np.int32), I32)
    table = Fake(np.array([[0], [1]], np.int32), I32)
    others = [
        dict(k=k),                                                  # k without v
        dict(kc=Fake(kc.a.astype(np.int8), "i8")),                  # a quantised cache
        dict(lens=Fake(np.array([3, 4, 5], np.int32), I32)),        # a length per sequence, not 2
        dict(lens=Fake(np.array([3.0, 4.0], np.float32), F32)),     # not integers
        dict(lens=Fake(np.array([3, 4, 5, 6], np.int32)[::2], I32)),  # not contiguous
        dict(lens=[3, 4]),                                          # not a tensor
        dict(table=Fake(np.array([[0], [1], [2]], np.int32), I32)),  # rows != batch
        dict(table=Fake(np.array([[0, 9], [1, 9]], np.int32)[:, :1], I32)),  # not row-major
        dict(table=Fake(np.array([[0], [1]], np.int64), I64)),      # int64 pages
        dict(window_size=(1.0, 0)),                                 # an option of another type
        dict(num_splits=2.0),
    ]
    for change in others:
        args = dict(q=q, kc=kc, vc=vc, k=None, v=None, lens=lens, table=None)
        options = {key: change.pop(key) for key in ("window_size", "num_splits") if key in change}
        args.update(change)
        assert decode(**args, **options) is None, change
    assert decode(q, kc, vc, None, None, lens, table) is not None


@needs_fast
def test_decode_returns_the_library_status_on_a_refused_call(fakes):
    q = make((2, 1, 3, 16), F32, 1)
    kc, vc = make((2, 8, 2, 16), F32, 2), make((2, 8, 2, 16), F32, 3)
    status = decode(q, kc, vc, lens=Fake(np.array([3, 4], np.int32), I32))
    assert status == _lib.ERR_BAD_HEADS
    q = make((2, 1, 4, 16), F32, 1)
    status = decode(q, kc, vc, lens=Fake(np.array([3, 9], np.int32), I32))  # past the capacity
    assert isinstance(status, int) and status != _lib.OK


@needs_fast
def test_threads_buffers_are_freed_when_they_exit(fakes):
    """Each thread's workspace is its own and goes with the thread: a pool
    of short-lived threads leaves none behind."""
    import threading
    q, k, v = (make((1, 64, 2, 32), F32, s) for s in (1, 2, 3))
    expected, _ = call(q, k, v, False)
    before = fast.live_buffers()
    results = []

    def work():
        out, _ = call(q, k, v, False)
        results.append(np.array_equal(out.a, expected.a) and fast.workspace_bytes() > 0)
    for _ in range(3):
        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert results == [True] * 24
    # Thread.join returns when Python is done with the thread, a moment
    # before the OS thread runs its destructors and ends
    import time
    deadline = time.monotonic() + 10
    while fast.live_buffers() != before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fast.live_buffers() == before


@needs_fast
def test_bad_arguments_raise():
    with pytest.raises(TypeError):
        fast.fwd(1, 2)
    with pytest.raises(ValueError):
        fast.register_torch(Fake, ((F32, 0),), F32, I32, I64, empty_like, empty, CONTIGUOUS, bool,
                            int)
    with pytest.raises(ValueError):
        fast.init(0, 0, 0, None, None, None)
    with pytest.raises(TypeError):
        fast.decode(1, 2, 3)


def test_found_when_required_and_skipped_when_asked(monkeypatch):
    if os.environ.get("FLASHATTN_REQUIRE_EXTENSION"):
        assert fast is not None, "no compiled helper beside %s (Python's headers missing at " \
            "build time? Debian: python3-dev)" % _lib.lib._name
    monkeypatch.setenv("FLASHATTN_NO_EXTENSION", "1")
    assert _lib._load_fast() is None
