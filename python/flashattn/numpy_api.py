"""NumPy front end: arrays in FlashAttention's (batch, seqlen, nheads, headdim)
order, described to the C library by their strides, so views (transposes,
slices, packed QKV) are read in place."""

import ctypes

import ml_dtypes
import numpy as np

from . import _lib

_DTYPES = {
    np.dtype(np.float32): _lib.F32,
    np.dtype(np.float16): _lib.F16,
    np.dtype(ml_dtypes.bfloat16): _lib.BF16,
}

_ALIGNS = {"bottom-right": _lib.ALIGN_BOTTOM_RIGHT, "top-left": _lib.ALIGN_TOP_LEFT}

_FLOAT_PTR = ctypes.POINTER(ctypes.c_float)


def _describable(a):
    """Whether a flashattn_tensor can address `a` where it lies: element
    strides that are non-negative, head_dim contiguous, native and aligned."""
    flags = a.flags
    if not flags.aligned:
        return False
    if flags.c_contiguous and a.dtype in _DTYPES:
        return True  # the common case, without the loop (0.9 -> 0.4 us an array)
    if not a.dtype.isnative:
        return False
    for size, stride in zip(a.shape, a.strides):
        if size > 1 and (stride < 0 or stride % a.itemsize):
            return False
    return a.shape[3] <= 1 or a.strides[3] == a.itemsize


def _input(a, name):
    """`a` as an array the library can read: the same memory when possible,
    a contiguous copy only when the descriptor cannot express it."""
    a = np.asarray(a)
    if a.ndim != 4:
        raise ValueError("%s must have 4 dimensions (batch, seqlen, nheads, headdim), "
                         "got shape %s" % (name, a.shape))
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    if a.dtype == np.float64:
        # The kernels compute in float32 whatever the input; say so with
        # the output dtype rather than pretending to double precision.
        a = a.astype(np.float32)
    elif a.dtype not in _DTYPES:
        raise ValueError("%s: dtype %s is not supported (float32, float16, "
                         "ml_dtypes.bfloat16; float64 is converted to float32)" % (name, a.dtype))
    if not _describable(a):
        a = np.ascontiguousarray(a)
    return a


def _fields(a):
    """flashattn_tensor's fields for a describable 4-D array. Written out
    longhand from one __array_interface__ (a.ctypes.data alone builds it
    and more): 2.3 -> 1.6 us an array, four arrays a forward call."""
    ai = a.__array_interface__
    n = a.itemsize
    b, s, h, d = ai["shape"]
    st = ai["strides"]  # None: C-contiguous
    if st is None:
        sb, ss, sh = s * h * d, h * d, d
    else:
        sb, ss, sh = st[0] // n, st[1] // n, st[2] // n
    return (ai["data"][0], _DTYPES[a.dtype], b, s, h, d,
            sb if b > 1 else 0, ss if s > 1 else 0, sh if h > 1 else 0, 1)


def describe(a):
    """The flashattn_tensor for a describable 4-D array, as a ctypes
    structure (flashattn_merge takes an array of them)."""
    return _lib.Tensor(*_fields(a))


def pack(buf, offset, a):
    """describe(a) written into buf at offset, for the calls that take
    addresses."""
    _lib.TENSOR.pack_into(buf, offset, *_fields(a))


def _output(out, shape, dtype, name="out"):
    """A new array, or the caller's `out` checked: it is written in place,
    so it may not be swapped for a copy."""
    if out is None:
        return np.empty(shape, dtype)
    if not isinstance(out, np.ndarray):
        raise ValueError("%s must be a numpy.ndarray" % name)
    if out.shape != shape or out.dtype != dtype:
        raise ValueError("%s must have shape %s and dtype %s, got %s %s"
                         % (name, shape, dtype, out.shape, out.dtype))
    if not out.flags.writeable:
        raise ValueError("%s is read-only" % name)
    if not _describable(out):
        raise ValueError("%s: its strides cannot be given to the library (head_dim must be "
                         "contiguous, strides non-negative); results would land in a copy"
                         % name)
    return out


def _lse_input(lse, shape):
    lse = np.asarray(lse)
    if lse.shape != shape:
        raise ValueError("lse must have shape %s (batch, nheads, seqlen_q), got %s"
                         % (shape, lse.shape))
    return np.ascontiguousarray(lse, dtype=np.float32)


def _align(align):
    try:
        return _ALIGNS[align]
    except (KeyError, TypeError):
        raise ValueError("align must be 'bottom-right' (FlashAttention) or 'top-left' "
                         "(PyTorch SDPA), got %r" % (align,)) from None


def attention(q, k, v, causal=False, softmax_scale=None, window_size=(-1, -1),
              align="bottom-right", return_lse=False, num_threads=0, *,
              out=None, block_m=0, block_n=0):
    """Exact attention softmax(softmax_scale * q k^T + mask) v, FlashAttention-2's way.

    q: (batch, seqlen_q, nheads, headdim); k, v: (batch, seqlen_k, nheads_k,
    headdim), nheads a multiple of nheads_k (GQA/MQA). float32, float16 or
    ml_dtypes.bfloat16, all three the same (float64 is converted to float32).
    Any strides: a view in another order, such as
    x.transpose(0, 2, 1, 3) of a (batch, nheads, seqlen, headdim) array, is
    read in place; only arrays whose last axis is not contiguous are copied.

    causal: query i sees keys j <= i + seqlen_k - seqlen_q ("bottom-right",
    as flash_attn) or j <= i ("top-left", as torch SDPA's is_causal).
    window_size=(left, right): query i sees keys within [i + off - left,
    i + off + right], -1 being unbounded. softmax_scale: None means
    1/sqrt(headdim). num_threads: 0 means the OpenMP default.
    block_m, block_n: tile sizes, 0 for the library's choice.

    Returns out with q's dtype and shape (batch, seqlen_q, nheads, headdim),
    and with return_lse also the float32 log-sum-exp of each row,
    (batch, nheads, seqlen_q): -inf where a row sees no key (its out is 0).
    The GIL is released while the library computes.
    """
    q, k, v = _input(q, "q"), _input(k, "k"), _input(v, "v")
    params = _lib.params(scale=softmax_scale, causal=causal, window_size=window_size,
                         align=_align(align), num_threads=num_threads,
                         block_m=block_m, block_n=block_n)
    o = _output(out, q.shape[:3] + v.shape[3:], q.dtype)
    lse = np.empty((q.shape[0], q.shape[2], q.shape[1]), np.float32) if return_lse else None
    at = _lib.descriptors(pack, q, k, v, o)
    status = _lib.run(_lib.fwd_at, _lib.fwd_workspace_size_at, *at,
                      None if lse is None else lse.ctypes.data, ctypes.addressof(params))
    _lib.check(status, "flashattn_fwd")
    return (o, lse) if return_lse else o


def attention_backward(dout, q, k, v, out, lse, causal=False, softmax_scale=None,
                       window_size=(-1, -1), align="bottom-right", deterministic=False,
                       num_threads=0, *, dq=None, dk=None, dv=None, block_m=0, block_n=0):
    """Gradients (dq, dk, dv) of attention() for the upstream gradient dout.

    q, k, v and the options are those given to attention(); out and lse are
    what it returned (attention(..., return_lse=True)). dout has out's shape.
    dq has q's shape and dtype, dk and dv k's: under GQA they sum the
    gradients of every query head sharing their kv head. Arrays may be any
    views, as in attention(); dq, dk, dv, when given, are written in place.
    deterministic=True makes dq bit-identical across runs and thread counts
    (dk and dv always are). The GIL is released while the library computes.
    """
    _lib.require("flashattn_bwd", "attention_backward")
    q, k, v = _input(q, "q"), _input(k, "k"), _input(v, "v")
    out, dout = _input(out, "out"), _input(dout, "dout")
    lse = _lse_input(lse, (q.shape[0], q.shape[2], q.shape[1]))
    params = _lib.params(scale=softmax_scale, causal=causal, window_size=window_size,
                         align=_align(align), num_threads=num_threads,
                         block_m=block_m, block_n=block_n, deterministic=deterministic)
    dq = _output(dq, q.shape, q.dtype, "dq")
    dk = _output(dk, k.shape, k.dtype, "dk")
    dv = _output(dv, v.shape, v.dtype, "dv")
    at = _lib.descriptors(pack, q, k, v, out, dout, dq, dk, dv)
    status = _lib.run(_lib.bwd_at, _lib.bwd_workspace_size_at, *at[:5], lse.ctypes.data,
                      *at[5:], ctypes.addressof(params))
    _lib.check(status, "flashattn_bwd")
    return dq, dk, dv


def _inplace(a, name):
    """A cache the call appends to: it must be given to the library as it
    lies, since a copy would receive the new rows."""
    if not isinstance(a, np.ndarray) or a.ndim != 4 or a.dtype not in _DTYPES:
        raise ValueError("%s must be a 4-D numpy.ndarray of float32, float16 or "
                         "ml_dtypes.bfloat16" % name)
    if not (a.flags.writeable and _describable(a)):
        raise ValueError("%s must be writeable with a contiguous last axis and non-negative "
                         "strides: new keys and values are written into it in place" % name)
    return a


def _index_array(a, name, ndim, dtypes):
    """`a` as a contiguous array of one of `dtypes` (converted to the first
    when it has another integer type, if its values fit)."""
    a = np.asarray(a)
    if a.ndim != ndim or a.dtype.kind not in "iu":
        raise ValueError("%s must be a %d-D integer array, got %s %s"
                         % (name, ndim, a.dtype, a.shape))
    if a.dtype in dtypes:
        return np.ascontiguousarray(a)
    converted = np.ascontiguousarray(a, dtypes[0])
    if not np.array_equal(converted, a):
        raise ValueError("%s: values do not fit in %s" % (name, dtypes[0]))
    return converted


def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None,
                           block_table=None, causal=False, softmax_scale=None,
                           window_size=(-1, -1), align="bottom-right", return_lse=False,
                           num_splits=0, num_threads=0, *, out=None, block_n=0):
    """Attention of q against a KV cache (inference decode), as
    flash_attn_with_kvcache.

    q: (batch, seqlen_q, nheads, headdim). The cache, contiguous: k_cache,
    v_cache (batch, capacity, nheads_k, headdim); or paged, with block_table
    (batch, max_pages_per_seq) of page indices: k_cache, v_cache are the page
    pool (num_pages, page_size, nheads_k, headdim). cache_seqlens (batch,)
    or an int: rows already valid per sequence (None: the whole capacity).
    k, v (batch, seqlen_new, nheads_k, headdim), when given, are first
    written into the cache in place at rows cache_seqlens[b] onward (the
    caller then adds seqlen_new to its lengths); attention covers
    cache_seqlens[b] + seqlen_new rows, with causal and window aligned to
    each sequence's own length. num_splits: parts each sequence's keys are
    split into across threads (0: automatic).
    Returns out (q's shape and dtype), and with return_lse the float32 LSE
    (batch, nheads, seqlen_q).
    """
    _lib.require("flashattn_decode", "attention_with_kvcache")
    q = _input(q, "q")
    if (k is None) != (v is None):
        raise ValueError("give both k and v, or neither")
    if k is None:
        k_cache, v_cache = _input(k_cache, "k_cache"), _input(v_cache, "v_cache")
        new = [None, None]
    else:
        k_cache, v_cache = _inplace(k_cache, "k_cache"), _inplace(v_cache, "v_cache")
        k, v = _input(k, "k"), _input(v, "v")
        new = [k, v]
    table = None
    capacity = k_cache.shape[1]
    if block_table is not None:
        block_table = _index_array(block_table, "block_table", 2, [np.dtype(np.int32)])
        table = (block_table.ctypes.data, block_table.shape[1])
        capacity *= block_table.shape[1]
    if cache_seqlens is None or np.ndim(cache_seqlens) == 0:
        fill = capacity if cache_seqlens is None else int(cache_seqlens)
        cache_seqlens = np.full(q.shape[0], fill, np.int64)
    lens = _index_array(cache_seqlens, "cache_seqlens", 1,
                        [np.dtype(np.int64), np.dtype(np.int32)])
    if lens.shape[0] != q.shape[0]:
        raise ValueError("cache_seqlens must have one length per batch entry (%d), got %d"
                         % (q.shape[0], lens.shape[0]))
    params = _lib.params(scale=softmax_scale, causal=causal, window_size=window_size,
                         align=_align(align), num_threads=num_threads, block_n=block_n,
                         num_splits=num_splits)
    o = _output(out, q.shape, q.dtype)
    lse = np.empty((q.shape[0], q.shape[2], q.shape[1]), np.float32) if return_lse else None
    _lib.decode(pack, q, k_cache, v_cache, *new, o, None if lse is None else lse.ctypes.data,
                (lens.ctypes.data, lens.dtype == np.int64), table, params)
    return (o, lse) if return_lse else o


def merge(outs, lses, dtype=None, num_threads=0, *, out=None):
    """Combine attention results over disjoint sets of keys into the result
    over their union, exactly (split-KV, long contexts in pieces, ring
    attention): LSE = log sum_n exp(LSE_n), O = sum_n exp(LSE_n - LSE) O_n.

    outs: partial outputs (batch, seqlen, nheads, headdim), each any
    supported dtype (float32 partials keep the merge exact to float32
    rounding); lses: their float32 LSE (batch, nheads, seqlen), as
    attention(..., return_lse=True) returns them. A part whose LSE is -inf
    for a row contributes nothing there. out may be one of outs (merging in
    place). Returns (out, lse); out has `dtype`, by default that of outs[0].
    """
    _lib.require("flashattn_merge", "merge")
    outs = [_input(o, "outs[%d]" % i) for i, o in enumerate(outs)]
    if not outs or len(lses) != len(outs):
        raise ValueError("give one lse per partial output, and at least one of each")
    shape = outs[0].shape
    lses = [_lse_input(x, (shape[0], shape[2], shape[1])) for x in lses]
    o = _output(out, shape, outs[0].dtype if dtype is None else np.dtype(dtype))
    lse = np.empty((shape[0], shape[2], shape[1]), np.float32)
    parts = (_lib.Tensor * len(outs))(*[describe(x) for x in outs])
    lse_ptrs = (_FLOAT_PTR * len(lses))(*[x.ctypes.data_as(_FLOAT_PTR) for x in lses])
    params = _lib.new_params(num_threads=num_threads)
    status = _lib.lib.flashattn_merge(len(outs), parts, lse_ptrs, ctypes.byref(describe(o)),
                                      lse.ctypes.data_as(_FLOAT_PTR), ctypes.byref(params))
    _lib.check(status, "flashattn_merge")
    return o, lse
