"""NumPy front end: arrays in FlashAttention's (batch, seqlen, nheads, headdim)
order, described to the C library by their strides, so views (transposes,
slices, packed QKV) are read in place."""

import ctypes
import operator
from typing import Optional, Sequence, Tuple, Union

import ml_dtypes
import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from . import _lib

_DTYPES = {
    np.dtype(np.float32): _lib.F32,
    np.dtype(np.float16): _lib.F16,
    np.dtype(ml_dtypes.bfloat16): _lib.BF16,
}

# A KV cache's storage may also be 8-bit, with scales (attention_with_kvcache).
_CACHE_DTYPES = {
    np.dtype(np.int8): _lib.INT8,
    np.dtype(ml_dtypes.float8_e4m3fn): _lib.FP8_E4M3,
    np.dtype(ml_dtypes.float8_e5m2): _lib.FP8_E5M2,
}
_ALL_DTYPES = {**_DTYPES, **_CACHE_DTYPES}

_ALIGNS = {"bottom-right": _lib.ALIGN_BOTTOM_RIGHT, "top-left": _lib.ALIGN_TOP_LEFT}

_FLOAT_PTR = ctypes.POINTER(ctypes.c_float)


# out, or out with the LSE (return_lse) or the gradients: NumPy arrays.
Result = Union[np.ndarray, Tuple[np.ndarray, ...]]


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
    return a.shape[-1] <= 1 or a.strides[-1] == a.itemsize


def _input(a, name, cache=False):
    """`a` as an array the library can read: the same memory when possible,
    a contiguous copy only when the descriptor cannot express it. cache:
    int8 and fp8 too (a KV cache's storage)."""
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
    elif a.dtype not in _DTYPES and not (cache and a.dtype in _CACHE_DTYPES):
        raise ValueError("%s: dtype %s is not supported (float32, float16, "
                         "ml_dtypes.bfloat16; float64 is converted to float32)" % (name, a.dtype))
    if not _describable(a):
        a = np.ascontiguousarray(a)
    return a


def _packed_input(a, name, ndim=3):
    """A packed (total, nheads, headdim) array as _input's 4-D view of it,
    (1, total, nheads, headdim): the layout the library reads packed
    sequences in."""
    a = np.asarray(a)
    if a.ndim != ndim:
        raise ValueError("%s must have 3 dimensions (total, nheads, headdim), got shape %s"
                         % (name, a.shape))
    return _input(a[None], name)


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
    return (ai["data"][0], _ALL_DTYPES[a.dtype], b, s, h, d,
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


def _lse_input(lse, shape, what="batch, nheads, seqlen_q"):
    lse = np.asarray(lse)
    if lse.shape != shape:
        raise ValueError("lse must have shape %s (%s), got %s" % (shape, what, lse.shape))
    return np.ascontiguousarray(lse, dtype=np.float32)


def _align(align):
    try:
        return _ALIGNS[align]
    except (KeyError, TypeError):
        raise ValueError("align must be 'bottom-right' (FlashAttention) or 'top-left' "
                         "(PyTorch SDPA), got %r" % (align,)) from None


# ---- score modifiers ----------------------------------------------------------

def _strided(a):
    """Whether flashattn_scores can address `a` where it lies: aligned,
    native, element strides non-negative (0 broadcasts)."""
    if not (a.flags.aligned and a.dtype.isnative):
        return False
    return all(stride >= 0 and stride % a.itemsize == 0
               for size, stride in zip(a.shape, a.strides) if size > 1)


def _scores(a, shape, name, is_bias):
    """The flashattn_scores of a bias (float) or mask (boolean) array
    broadcast to shape (batch, nheads, seqlen_q, seqlen_k), as NumPy
    broadcasts (missing leading dimensions and dimensions of 1 repeat),
    and the array it points at. Read in place through its strides, 0 on
    the broadcast dimensions; copied only when its strides cannot be
    given (negative, unaligned, byte-swapped) or its dtype must change:
    a float64 bias becomes float32, a mask of wider integers nonzero-ness."""
    a = np.asarray(a)
    if is_bias:
        if not a.dtype.isnative and a.dtype.kind == "f":
            a = a.astype(a.dtype.newbyteorder("="))
        if a.dtype == np.float64:
            a = a.astype(np.float32)
        elif a.dtype not in _DTYPES:
            raise ValueError("bias: dtype %s is not supported (float32, float16, "
                             "ml_dtypes.bfloat16; float64 is converted to float32)" % a.dtype)
        code = _DTYPES[a.dtype]
    else:
        if a.dtype.kind in "iu" and a.itemsize > 1:
            a = a != 0
        elif a.dtype.kind not in "biu":
            raise ValueError("mask must be boolean (True, or nonzero, attends), got dtype %s; "
                             "give an additive float mask as bias=" % a.dtype)
        code = _lib.F32  # (ignored: one byte per element)
    if a.ndim > 4:
        raise _lib.bad_shape("%s has %d dimensions: at most 4 (batch, nheads, seqlen_q, seqlen_k)"
                             % (name, a.ndim))
    try:
        view = np.broadcast_to(a, shape)
    except ValueError:
        raise _lib.bad_shape("%s has shape %s, which does not broadcast to (batch, nheads, "
                             "seqlen_q, seqlen_k) = %s" % (name, a.shape, shape)) from None
    if not _strided(view):
        view = np.broadcast_to(np.ascontiguousarray(a), shape)
    n = view.itemsize
    strides = [st // n if size > 1 else 0 for size, st in zip(shape, view.strides)]
    return _lib.Scores(view.__array_interface__["data"][0], code, *shape, *strides), view


def _trimmed(a, longest, given):
    """A varlen bias or mask sized by the max_seqlen given (larger than the
    longest sequence): its view over the longest sequence's rows, which is
    the size the library reads. Other sizes are left for _scores to judge."""
    a = np.asarray(a)
    for axis, (n, m) in zip((-2, -1), zip(longest, given)):
        if a.ndim >= -axis and m is not None and a.shape[axis] == m and m != n:
            a = a[..., :n, :] if axis == -2 else a[..., :n]
    return a


def _real(a, name):
    """`a` as a contiguous float32 array, refused (ValueError) unless its
    values are real numbers: np.float32() would raise TypeError on objects
    and drop a complex value's imaginary part with only a warning."""
    a = np.asarray(a)
    if a.dtype.kind not in "biuf":
        raise ValueError("%s must hold real numbers, got dtype %s" % (name, a.dtype))
    return np.ascontiguousarray(a, np.float32)


def _float_vector(a, name, shape):
    a = _real(a, name)
    if a.shape != shape:
        raise _lib.bad_shape("%s must have shape %s, got %s" % (name, shape, a.shape))
    return a


def _modifiers(params, batch, heads, shape, softcap=0.0, alibi_slopes=None, sinks=None,
               bias=None, mask=None, dsinks=False):
    """params with the score modifiers, or params itself when there are
    none. batch: sequences (alibi_slopes (batch, nheads)); heads: query
    heads; shape: (batch, nheads, seqlen_q, seqlen_k) that bias and mask
    broadcast to. With dsinks (and sinks given), the copy's dsinks points
    at a new float32 (nheads,) array, its attribute .dsinks_array. The arrays
    the copy points at live as long as it does (its .arrays)."""
    if not softcap and alibi_slopes is None and sinks is None and bias is None and mask is None:
        return params
    arrays = []
    alibi = sink_at = dsink_at = bias_t = mask_t = None
    if alibi_slopes is not None:
        a = np.asarray(alibi_slopes)
        a = _float_vector(a, "alibi_slopes", (batch, heads) if a.ndim == 2 else (heads,))
        alibi = (a.ctypes.data, heads if a.ndim == 2 else 0)
        arrays.append(a)
    if sinks is not None:
        a = _float_vector(sinks, "sinks", (heads,))
        sink_at = a.ctypes.data
        arrays.append(a)
    grad = np.zeros(heads, np.float32) if dsinks and sinks is not None else None
    if grad is not None:
        dsink_at = grad.ctypes.data
    if bias is not None:
        bias_t, a = _scores(bias, shape, "bias", True)
        arrays.append(a)
    if mask is not None:
        mask_t, a = _scores(mask, shape, "mask", False)
        arrays.append(a)
    p = _lib.with_modifiers(params, softcap, alibi, sink_at, dsink_at, bias_t, mask_t)
    p.arrays, p.dsinks_array = arrays, grad
    return p


def attention(q: ArrayLike, k: ArrayLike, v: ArrayLike, causal: bool = False,
              softmax_scale: Optional[float] = None, window_size: Tuple[int, int] = (-1, -1),
              align: str = 'bottom-right', return_lse: bool = False, num_threads: int = 0, *,
              out: Optional[ArrayLike] = None, block_m: int = 0, block_n: int = 0,
              softcap: float = 0.0, alibi_slopes: Optional[ArrayLike] = None,
              sinks: Optional[ArrayLike] = None, bias: Optional[ArrayLike] = None,
              mask: Optional[ArrayLike] = None, precision: str = "exact") -> Result:
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

    Score modifiers, applied to the scaled logit s of query i and key j in
    this order (off by default):
      softcap > 0     s = softcap * tanh(s / softcap) (Gemma 2);
      alibi_slopes    (nheads,) or (batch, nheads) float32:
                      s -= slope * |i + off - j|, off aligned as the causal
                      diagonal (seqlen_k - seqlen_q bottom-right, 0 top-left);
      bias            added to s: float32, float16 or bfloat16, broadcastable
                      to (batch, nheads, seqlen_q, seqlen_k) (-inf hides a key);
      mask            boolean, broadcastable likewise: False hides a key (as
                      torch SDPA's bool attn_mask), on top of causal/window;
      sinks           (nheads,) float32: a logit per head that joins every
                      row's softmax denominator and adds no value.
    bias and mask are read through their strides, broadcast dimensions at
    stride 0 (no copies, unless their strides are negative or their dtype
    must change: a float64 bias is converted to float32).

    precision="int8" computes q k^T on 8-bit integers (SageAttention's
    scheme: per-row scales, K smoothed by its mean; AMX-INT8 or VNNI where
    the CPU has them) and the rest in float32; "int8+bf16" also rounds P
    and V to bfloat16 for P V (on AMX, about 2.5-3x the exact call at
    seqlen 4096-8192); "int8+int8" computes P V on 8-bit integers too (P
    per row and block as uint8, V per channel as int8; on AVX512_VNNI about
    2.4x the exact call at seqlen 4096). For inference: not exact (the
    header's "Precision", docs/precision.md for the error);
    attention_backward takes only "exact".

    Returns out with q's dtype and shape (batch, seqlen_q, nheads, headdim),
    and with return_lse also the float32 log-sum-exp of each row,
    (batch, nheads, seqlen_q): -inf where a row sees no key (its out is 0;
    with sinks its lse is the sink's logit). The GIL is released while the
    library computes.
    """
    q, k, v = _input(q, "q"), _input(k, "k"), _input(v, "v")
    params = _lib.params(scale=softmax_scale, causal=causal, window_size=window_size,
                         align=_align(align), num_threads=num_threads,
                         block_m=block_m, block_n=block_n)
    params = _lib.with_precision(params, precision)
    params = _modifiers(params, q.shape[0], q.shape[2], (q.shape[0], q.shape[2], q.shape[1],
                                                         k.shape[1]),
                        softcap, alibi_slopes, sinks, bias, mask)
    o = _output(out, q.shape[:3] + v.shape[3:], q.dtype)
    lse = np.empty((q.shape[0], q.shape[2], q.shape[1]), np.float32) if return_lse else None
    at = _lib.descriptors(pack, q, k, v, o)
    status = _lib.run(_lib.fwd_at, _lib.fwd_workspace_size_at, *at,
                      None if lse is None else lse.ctypes.data, ctypes.addressof(params))
    _lib.check(status, "flashattn_fwd")
    return (o, lse) if return_lse else o


def attention_backward(dout: ArrayLike, q: ArrayLike, k: ArrayLike, v: ArrayLike, out: ArrayLike,
                       lse: ArrayLike, causal: bool = False, softmax_scale: Optional[float] = None,
                       window_size: Tuple[int, int] = (-1, -1), align: str = 'bottom-right',
                       deterministic: bool = False, num_threads: int = 0, *,
                       dq: Optional[ArrayLike] = None, dk: Optional[ArrayLike] = None,
                       dv: Optional[ArrayLike] = None, block_m: int = 0, block_n: int = 0,
                       softcap: float = 0.0, alibi_slopes: Optional[ArrayLike] = None,
                       sinks: Optional[ArrayLike] = None, bias: Optional[ArrayLike] = None,
                       mask: Optional[ArrayLike] = None) -> Result:
    """Gradients (dq, dk, dv) of attention() for the upstream gradient dout.

    q, k, v and the options are those given to attention(); out and lse are
    what it returned (attention(..., return_lse=True)). dout has out's shape.
    dq has q's shape and dtype, dk and dv k's: under GQA they sum the
    gradients of every query head sharing their kv head. Arrays may be any
    views, as in attention(); dq, dk, dv, when given, are written in place.
    deterministic=True makes dq bit-identical across runs and thread counts
    (dk and dv always are). The score modifiers must be those given to
    attention(); the gradient goes through softcap, and with sinks the
    result is (dq, dk, dv, dsinks), dsinks the float32 (nheads,) gradient
    of the sinks. bias gets no gradient. The GIL is released while the
    library computes.
    """
    _lib.require("flashattn_bwd", "attention_backward")
    q, k, v = _input(q, "q"), _input(k, "k"), _input(v, "v")
    out, dout = _input(out, "out"), _input(dout, "dout")
    lse = _lse_input(lse, (q.shape[0], q.shape[2], q.shape[1]))
    params = _lib.params(scale=softmax_scale, causal=causal, window_size=window_size,
                         align=_align(align), num_threads=num_threads,
                         block_m=block_m, block_n=block_n, deterministic=deterministic)
    params = _modifiers(params, q.shape[0], q.shape[2], (q.shape[0], q.shape[2], q.shape[1],
                                                         k.shape[1]),
                        softcap, alibi_slopes, sinks, bias, mask, dsinks=True)
    dq = _output(dq, q.shape, q.dtype, "dq")
    dk = _output(dk, k.shape, k.dtype, "dk")
    dv = _output(dv, v.shape, v.dtype, "dv")
    at = _lib.descriptors(pack, q, k, v, out, dout, dq, dk, dv)
    status = _lib.run(_lib.bwd_at, _lib.bwd_workspace_size_at, *at[:5], lse.ctypes.data,
                      *at[5:], ctypes.addressof(params))
    _lib.check(status, "flashattn_bwd")
    return _gradients(dq, dk, dv, params)


def _gradients(dq, dk, dv, params):
    """(dq, dk, dv), and dsinks when the call had sinks."""
    dsinks = getattr(params, "dsinks_array", None)
    return (dq, dk, dv) if dsinks is None else (dq, dk, dv, dsinks)


def _inplace(a, name, cache=False):
    """A cache the call appends to: it must be given to the library as it
    lies, since a copy would receive the new rows."""
    ok = _ALL_DTYPES if cache else _DTYPES
    if not isinstance(a, np.ndarray) or a.ndim != 4 or a.dtype not in ok:
        raise ValueError("%s must be a 4-D numpy.ndarray of float32, float16 or "
                         "ml_dtypes.bfloat16%s" % (name, " (or int8, float8_e4m3fn, float8_e5m2)"
                                                   if cache else ""))
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


_INT32 = [np.dtype(np.int32)]


def _lengths(cu):
    """Sequence lengths (int64) of a cu_seqlens array."""
    return np.diff(cu.astype(np.int64))


def _check_max_seqlen(max_seqlen, lengths, name):
    """A max_seqlen the caller gave (None: not checked) against the real
    longest sequence: smaller would mean the caller's buffers or plans were
    sized for less than the call computes."""
    if max_seqlen is None:
        return
    longest = int(lengths.max(initial=0))
    if _lib._int_arg(max_seqlen, name) < longest:
        raise _lib.bad_shape("%s is %d, but the longest sequence has %d rows"
                             % (name, max_seqlen, longest))


def _cu_seqlens(cu, name, batch=None):
    """cu_seqlens as a contiguous int32 array of batch + 1 offsets. Their
    values (start at 0, never decrease, end at the tensor's total) are
    checked by the library, which cannot see the array's length."""
    cu = _index_array(cu, name, 1, _INT32)
    if cu.shape[0] < 1:
        raise ValueError("%s must hold batch + 1 offsets, at least [0]" % name)
    if batch is not None and cu.shape[0] != batch + 1:
        raise _lib.bad_shape("%s has %d offsets, cu_seqlens_q %d: both must hold batch + 1"
                             % (name, cu.shape[0], batch + 1))
    return cu


def _per_sequence(a, name, batch, dtypes=_INT32):
    """An optional int32 array with one value per sequence."""
    if a is None:
        return None
    a = _index_array(a, name, 1, dtypes)
    if a.shape[0] != batch:
        raise _lib.bad_shape("%s has %d values for %d sequences" % (name, a.shape[0], batch))
    return a


def _rotary(rotary_cos, rotary_sin, interleaved):
    """The cache's rotary tables: (cos, sin, the float32 contiguous arrays
    to keep alive) as decode's `rotary` argument, or None."""
    if rotary_cos is None and rotary_sin is None:
        return None, ()
    if rotary_cos is None or rotary_sin is None:
        raise ValueError("give both rotary_cos and rotary_sin, or neither")
    cos, sin = _real(rotary_cos, "rotary_cos"), _real(rotary_sin, "rotary_sin")
    if cos.ndim != 2 or cos.shape != sin.shape:
        raise ValueError("rotary_cos and rotary_sin must both be (seqlen_ro, rotary_dim / 2), "
                         "got %s and %s" % (cos.shape, sin.shape))
    return (cos.ctypes.data, sin.ctypes.data, cos.shape[0], 2 * cos.shape[1],
            1 if interleaved else 0), (cos, sin)


def _scalar_length(n):
    """One cache length for every sequence: an integer (int() would turn
    2.5 into 2 without a word)."""
    try:
        return operator.index(n)
    except TypeError:
        raise ValueError("cache_seqlens must be an integer or a 1-D integer array, got %r"
                         % (n,)) from None


def attention_with_kvcache(q: ArrayLike, k_cache: ArrayLike, v_cache: ArrayLike,
                           k: Optional[ArrayLike] = None, v: Optional[ArrayLike] = None,
                           cache_seqlens: Union[int, ArrayLike, None] = None,
                           block_table: Optional[ArrayLike] = None, causal: bool = False,
                           softmax_scale: Optional[float] = None,
                           window_size: Tuple[int, int] = (-1, -1), align: str = 'bottom-right',
                           return_lse: bool = False, num_splits: int = 0, num_threads: int = 0, *,
                           out: Optional[ArrayLike] = None, block_n: int = 0,
                           rotary_cos: Optional[ArrayLike] = None,
                           rotary_sin: Optional[ArrayLike] = None, rotary_interleaved: bool = True,
                           cache_batch_idx: Optional[ArrayLike] = None,
                           cache_leftpad: Optional[ArrayLike] = None,
                           cu_seqlens_q: Optional[ArrayLike] = None,
                           max_seqlen_q: Optional[int] = None, softcap: float = 0.0,
                           alibi_slopes: Optional[ArrayLike] = None,
                           sinks: Optional[ArrayLike] = None,
                           k_scale: Union[float, ArrayLike, None] = None,
                           v_scale: Union[float, ArrayLike, None] = None) -> Result:
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

    cu_seqlens_q (batch + 1,) packs the queries by sequence instead, as
    FlashAttention-3's flash_attn_with_kvcache: q (total_q, nheads,
    headdim), k and v (total_q, nheads_k, headdim), sequence b bringing
    (and appending) its own cu_seqlens_q[b + 1] - cu_seqlens_q[b] rows;
    out is then (total_q, nheads, headdim) and lse (nheads, total_q).
    max_seqlen_q, when given, must be at least the longest of them.
    cache_batch_idx (batch,): sequence b uses cache entry cache_batch_idx[b]
    (contiguous caches). cache_leftpad (batch,): sequence b's keys start at
    cache row cache_leftpad[b] (its keys are rows cache_leftpad[b] ..
    cache_seqlens[b] + seqlen_new - 1). rotary_cos, rotary_sin (seqlen_ro,
    rotary_dim / 2): rotary embedding of q and k before the attention, on
    their first rotary_dim elements, pairs (0, 1), (2, 3)... with
    rotary_interleaved, else (i, i + rotary_dim / 2) (GPT-NeoX); k row j of
    sequence b at position cache_seqlens[b] + j, q row i at cache_seqlens[b]
    + i when causal or windowed (a window narrower than the cache), else
    every q row at cache_seqlens[b] (positions are cache rows, as
    FlashAttention-2's, leftpad or not; q is rotated whether or not k is
    given).
    softcap, alibi_slopes (nheads,) or (batch, nheads) and sinks (nheads,):
    the score modifiers of attention(), ALiBi aligned to each sequence's own
    length (bias and mask are not available against a cache).
    Quantised caches: k_cache and v_cache int8, ml_dtypes.float8_e4m3fn or
    float8_e5m2 (one dtype for both) with k_scale and v_scale, float32:
    (batch_cache, seqlen_cache, nheads_k) one per token (written for the
    appended rows), (nheads_k, headdim) one per channel, (nheads_k,) one per
    head, or a number; element e stands for e * scale (quantize_kv_cache
    makes them; the rule: include/flashattn.h, flashattn_kv_cache).
    Returns out (q's shape and dtype), and with return_lse the float32 LSE
    (batch, nheads, seqlen_q).
    """
    _lib.require("flashattn_decode", "attention_with_kvcache")
    packed = cu_seqlens_q is not None
    q = _packed_input(q, "q") if packed else _input(q, "q")
    if (k is None) != (v is None):
        raise ValueError("give both k and v, or neither")
    if k is None:
        k_cache, v_cache = _input(k_cache, "k_cache", True), _input(v_cache, "v_cache", True)
        new = [None, None]
    else:
        k_cache, v_cache = _inplace(k_cache, "k_cache", True), _inplace(v_cache, "v_cache", True)
        if packed:
            k, v = _packed_input(k, "k"), _packed_input(v, "v")
        else:
            k, v = _input(k, "k"), _input(v, "v")
        new = [k, v]
    scales = None
    if k_cache.dtype in _CACHE_DTYPES or v_cache.dtype in _CACHE_DTYPES:
        scales = (_scale_view(k_scale, k_cache, "k_scale", k is not None),
                  _scale_view(v_scale, v_cache, "v_scale", k is not None))
    elif k_scale is not None or v_scale is not None:
        raise ValueError("k_scale and v_scale go with an int8 or fp8 cache (this one is %s)"
                         % k_cache.dtype)
    batch = q.shape[0]
    if packed:
        cu_q = _cu_seqlens(cu_seqlens_q, "cu_seqlens_q")
        batch = cu_q.shape[0] - 1
        _check_max_seqlen(max_seqlen_q, _lengths(cu_q), "max_seqlen_q")
    elif max_seqlen_q is not None:
        raise ValueError("max_seqlen_q goes with cu_seqlens_q")
    table = None
    capacity = k_cache.shape[1]
    if block_table is not None:
        block_table = _index_array(block_table, "block_table", 2, _INT32)
        if block_table.shape[0] != batch:
            raise _lib.bad_shape("block_table has %d rows for %d sequences"
                                 % (block_table.shape[0], batch))
        table = (block_table.ctypes.data, block_table.shape[1])
        capacity *= block_table.shape[1]
    if cache_seqlens is None or np.ndim(cache_seqlens) == 0:
        fill = capacity if cache_seqlens is None else _scalar_length(cache_seqlens)
        cache_seqlens = np.full(batch, fill, np.int64)
    lens = _index_array(cache_seqlens, "cache_seqlens", 1,
                        [np.dtype(np.int64), np.dtype(np.int32)])
    if lens.shape[0] != batch:
        raise ValueError("cache_seqlens must have one length per batch entry (%d), got %d"
                         % (batch, lens.shape[0]))
    batch_idx = _per_sequence(cache_batch_idx, "cache_batch_idx", batch)
    leftpad = _per_sequence(cache_leftpad, "cache_leftpad", batch)
    rotary, _keep = _rotary(rotary_cos, rotary_sin, rotary_interleaved)
    params = _lib.params(scale=softmax_scale, causal=causal, window_size=window_size,
                         align=_align(align), num_threads=num_threads, block_n=block_n,
                         num_splits=num_splits)
    if packed:
        params = _lib.with_varlen(params, batch, cu_q.ctypes.data)
    params = _modifiers(params, batch, q.shape[2], None, softcap, alibi_slopes, sinks)
    if packed:
        o = _output(out, q.shape[1:3] + v_cache.shape[3:], q.dtype)
        lse = np.empty((q.shape[2], q.shape[1]), np.float32) if return_lse else None
        o_view = o[None]
    else:
        o = o_view = _output(out, q.shape[:3] + v_cache.shape[3:], q.dtype)
        lse = np.empty((q.shape[0], q.shape[2], q.shape[1]), np.float32) if return_lse else None
    address = lambda a: None if a is None else a.ctypes.data
    _lib.decode(pack, q, k_cache, v_cache, *new, o_view, address(lse),
                (lens.ctypes.data, lens.dtype == np.int64), table, params,
                batch_idx=address(batch_idx), leftpad=address(leftpad), rotary=rotary,
                scales=scales)
    return (o, lse) if return_lse else o


def _scale_view(scale, cache, name, appending):
    """A quantised cache's scale as the library's 4-D float32 view and its
    flashattn_scale_kind, from the shapes attention_with_kvcache takes."""
    b, s, h, d = cache.shape
    if scale is None:
        raise ValueError("%s: a %s cache needs its scales" % (name, cache.dtype))
    if np.ndim(scale) == 0:
        try:
            one = np.full((1, 1, 1, 1), float(scale), np.float32)
        except (TypeError, ValueError):
            raise ValueError("%s must be a float32 array or a number" % name) from None
        return np.broadcast_to(one, (1, 1, h, 1)), _lib.SCALE_PER_HEAD
    if not isinstance(scale, np.ndarray) or scale.dtype != np.float32:
        raise ValueError("%s must be a float32 numpy.ndarray or a number" % name)
    shape = scale.shape
    if shape == (h,):
        view, kind = scale.reshape(1, 1, h, 1), _lib.SCALE_PER_HEAD
    elif shape == (h, d):
        view, kind = scale.reshape(1, 1, h, d), _lib.SCALE_PER_CHANNEL
    elif shape in ((b, s, h), (b, s, h, 1)):
        view, kind = scale.reshape(b, s, h, 1), _lib.SCALE_PER_TOKEN
        if appending and not (np.shares_memory(view, scale) and scale.flags.writeable):
            raise ValueError("%s: per-token scales are written for the appended rows: give a "
                             "writeable array the library can address" % name)
    else:
        raise _lib.bad_shape("%s has shape %s: for a cache %s it must be %s per token, %s per "
                             "channel, (%d,) per head or a number"
                             % (name, shape, cache.shape, (b, s, h), (h, d), h))
    if not _describable(view):
        view = np.ascontiguousarray(view)
    return view, kind


_QUANT_DTYPES = {"int8": np.dtype(np.int8), "fp8_e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
                 "fp8_e5m2": np.dtype(ml_dtypes.float8_e5m2)}


def quantize_kv_cache(x: ArrayLike, dtype="int8", scale: str = "token",
                      num_threads: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """An 8-bit copy of a float K or V cache x (batch, seqlen, nheads_k,
    headdim) and its float32 scales, for attention_with_kvcache: dtype
    "int8", "fp8_e4m3", "fp8_e5m2" (or numpy.int8, ml_dtypes.float8_e4m3fn,
    float8_e5m2); scale "token" ((batch, seqlen, nheads_k)), "channel"
    ((nheads_k, headdim)) or "head" ((nheads_k,)), the fixed kinds
    calibrated on x (max|x| over its rows / the dtype's largest value).
    docs/quantised-cache.md: per channel suits int8 K, per token the rest."""
    dt = _QUANT_DTYPES.get(dtype) if isinstance(dtype, str) else np.dtype(dtype)
    if dt not in _CACHE_DTYPES:
        raise ValueError("dtype must be int8, fp8_e4m3 or fp8_e5m2, got %r" % (dtype,))
    x = _input(x, "x")
    b, s, h, d = x.shape
    kinds = {"token": ((b, s, h), _lib.SCALE_PER_TOKEN),
             "channel": ((h, d), _lib.SCALE_PER_CHANNEL), "head": ((h,), _lib.SCALE_PER_HEAD)}
    if scale not in kinds:
        raise ValueError("scale must be 'token', 'channel' or 'head', got %r" % (scale,))
    shape, kind = kinds[scale]
    out = np.empty(x.shape, dt)
    scales = np.empty(shape, np.float32)
    view, _ = _scale_view(scales, out, "scale", True)
    _lib.quantize(pack, x, out, view, kind, 1, _lib._int_arg(num_threads, "num_threads"))
    return out, scales


def _varlen_setup(cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q, max_seqlen_k):
    """The int32 arrays of a packed batch, their lengths checked against
    each other and against the max_seqlen given: (batch, cu_q, cu_k, used)."""
    cu_q = _cu_seqlens(cu_seqlens_q, "cu_seqlens_q")
    batch = cu_q.shape[0] - 1
    cu_k = _cu_seqlens(cu_seqlens_k, "cu_seqlens_k", batch)
    used = _per_sequence(seqused_k, "seqused_k", batch)
    _check_max_seqlen(max_seqlen_q, _lengths(cu_q), "max_seqlen_q")
    keys = _lengths(cu_k) if used is None else used
    _check_max_seqlen(max_seqlen_k, keys, "max_seqlen_k")
    return batch, cu_q, cu_k, used


def _varlen_modifiers(params, heads, cu_q, keys, max_seqlen_q, max_seqlen_k, softcap,
                      alibi_slopes, sinks, bias, mask, dsinks=False):
    """_modifiers for packed sequences: bias and mask broadcast to
    (batch, nheads, longest seqlen_q, longest seqlen_k), or sized by the
    max_seqlen given (only the longest sequence's rows are read)."""
    longest = (int(_lengths(cu_q).max(initial=0)), int(np.max(keys, initial=0)))
    given = (max_seqlen_q, max_seqlen_k)
    if bias is not None:
        bias = _trimmed(bias, longest, given)
    if mask is not None:
        mask = _trimmed(mask, longest, given)
    batch = cu_q.shape[0] - 1
    return _modifiers(params, batch, heads, (batch, heads) + longest, softcap, alibi_slopes,
                      sinks, bias, mask, dsinks)


def _paged_varlen(q, k_cache, v_cache, cu_q, lens, block_table, params, return_lse, out):
    """Packed queries against a paged cache without appending: decode with
    cu_seqlens_q and the key lengths as cache seqlens (FlashAttention-2's
    flash_attn_varlen_func with block_table)."""
    table = _index_array(block_table, "block_table", 2, _INT32)
    if table.shape[0] != lens.shape[0]:
        raise _lib.bad_shape("block_table has %d rows for %d sequences"
                             % (table.shape[0], lens.shape[0]))
    lens = np.ascontiguousarray(lens, np.int32)
    params = _lib.with_varlen(params, lens.shape[0], cu_q.ctypes.data)
    o = _output(out, q.shape[1:3] + v_cache.shape[3:], q.dtype)
    lse = np.empty((q.shape[2], q.shape[1]), np.float32) if return_lse else None
    _lib.decode(pack, q, k_cache, v_cache, None, None, o[None],
                None if lse is None else lse.ctypes.data, (lens.ctypes.data, False),
                (table.ctypes.data, table.shape[1]), params)
    return (o, lse) if return_lse else o


def attention_varlen(q: ArrayLike, k: ArrayLike, v: ArrayLike, cu_seqlens_q: ArrayLike,
                     cu_seqlens_k: ArrayLike, max_seqlen_q: Optional[int] = None,
                     max_seqlen_k: Optional[int] = None, causal: bool = False,
                     softmax_scale: Optional[float] = None,
                     window_size: Tuple[int, int] = (-1, -1), align: str = 'bottom-right',
                     return_lse: bool = False, num_threads: int = 0, *,
                     seqused_k: Optional[ArrayLike] = None,
                     block_table: Optional[ArrayLike] = None, out: Optional[ArrayLike] = None,
                     block_m: int = 0, block_n: int = 0, softcap: float = 0.0,
                     alibi_slopes: Optional[ArrayLike] = None, sinks: Optional[ArrayLike] = None,
                     bias: Optional[ArrayLike] = None, mask: Optional[ArrayLike] = None,
                     precision: str = "exact") -> Result:
    """attention() over a batch of packed variable-length sequences, as
    flash_attn_varlen_func: no padding is stored or computed.

    q: (total_q, nheads, headdim), k, v: (total_k, nheads_k, headdim), the
    sequences one after another; cu_seqlens_q, cu_seqlens_k (batch + 1,)
    integer offsets: sequence b has queries cu_seqlens_q[b] ..
    cu_seqlens_q[b + 1] - 1 and keys cu_seqlens_k[b] .. cu_seqlens_k[b + 1]
    - 1 (only the first seqused_k[b] of them when seqused_k (batch,) is
    given). Each sequence is computed as attention() would on it alone:
    causal and window aligned to its own lengths, empty sequences allowed.
    max_seqlen_q, max_seqlen_k, when given, must be at least the longest
    sequence's (a smaller one raises).
    With block_table (batch, max_pages_per_seq), k and v are instead a
    paged cache (num_pages, page_size, nheads_k, headdim) and sequence b's
    keys are its first cu_seqlens_k[b + 1] - cu_seqlens_k[b] rows (or
    seqused_k[b]; cu_seqlens_k may then be None); nothing is appended.
    Score modifiers as attention(): alibi_slopes (nheads,) or (batch,
    nheads), one row per sequence; bias and mask broadcastable to (batch,
    nheads, max_seqlen_q, max_seqlen_k), sequence b's query i and key j at
    [b, :, i, j] (counted from the sequence's first row), the last two
    dimensions 1, the longest sequence's or the max_seqlen given (bias and
    mask are not available with block_table).
    Returns out (total_q, nheads, headdim) in q's dtype, and with
    return_lse the float32 LSE (nheads, total_q), FlashAttention-2's
    varlen layout. Other options as attention(), precision too (each
    sequence's K smoothed by its own mean; not with block_table, whose
    cache runs on decode's exact path: UnsupportedError).
    """
    q = _packed_input(q, "q")
    params = _lib.params(scale=softmax_scale, causal=causal, window_size=window_size,
                         align=_align(align), num_threads=num_threads, block_m=block_m,
                         block_n=block_n)
    params = _lib.with_precision(params, precision)
    if block_table is not None:
        _lib.require("flashattn_decode", "attention_varlen with block_table")
        k, v = _input(k, "k"), _input(v, "v")
        cu_q = _cu_seqlens(cu_seqlens_q, "cu_seqlens_q")
        batch = cu_q.shape[0] - 1
        if cu_seqlens_k is None and seqused_k is None:
            raise ValueError("give cu_seqlens_k or seqused_k: the key length of each sequence")
        used = _per_sequence(seqused_k, "seqused_k", batch)
        lens = used if used is not None else _lengths(
            _cu_seqlens(cu_seqlens_k, "cu_seqlens_k", batch))
        _check_max_seqlen(max_seqlen_q, _lengths(cu_q), "max_seqlen_q")
        _check_max_seqlen(max_seqlen_k, lens, "max_seqlen_k")
        params = _varlen_modifiers(params, q.shape[2], cu_q, lens, max_seqlen_q, max_seqlen_k,
                                   softcap, alibi_slopes, sinks, bias, mask)
        return _paged_varlen(q, k, v, cu_q, lens, block_table, params, return_lse, out)
    k, v = _packed_input(k, "k"), _packed_input(v, "v")
    batch, cu_q, cu_k, used = _varlen_setup(cu_seqlens_q, cu_seqlens_k, seqused_k,
                                            max_seqlen_q, max_seqlen_k)
    params = _lib.with_varlen(params, batch, cu_q.ctypes.data, cu_k.ctypes.data,
                              None if used is None else used.ctypes.data)
    params = _varlen_modifiers(params, q.shape[2], cu_q, _lengths(cu_k) if used is None else used,
                               max_seqlen_q, max_seqlen_k, softcap, alibi_slopes, sinks, bias,
                               mask)
    o = _output(out, q.shape[1:3] + v.shape[3:], q.dtype)
    lse = np.empty((q.shape[2], q.shape[1]), np.float32) if return_lse else None
    at = _lib.descriptors(pack, q, k, v, o[None])
    status = _lib.run(_lib.fwd_at, _lib.fwd_workspace_size_at, *at,
                      None if lse is None else lse.ctypes.data, ctypes.addressof(params))
    _lib.check(status, "flashattn_fwd")
    return (o, lse) if return_lse else o


def attention_varlen_backward(dout: ArrayLike, q: ArrayLike, k: ArrayLike, v: ArrayLike,
                              out: ArrayLike, lse: ArrayLike, cu_seqlens_q: ArrayLike,
                              cu_seqlens_k: ArrayLike, max_seqlen_q: Optional[int] = None,
                              max_seqlen_k: Optional[int] = None, causal: bool = False,
                              softmax_scale: Optional[float] = None,
                              window_size: Tuple[int, int] = (-1, -1), align: str = 'bottom-right',
                              deterministic: bool = False, num_threads: int = 0, *,
                              seqused_k: Optional[ArrayLike] = None,
                              dq: Optional[ArrayLike] = None, dk: Optional[ArrayLike] = None,
                              dv: Optional[ArrayLike] = None, block_m: int = 0, block_n: int = 0,
                              softcap: float = 0.0, alibi_slopes: Optional[ArrayLike] = None,
                              sinks: Optional[ArrayLike] = None, bias: Optional[ArrayLike] = None,
                              mask: Optional[ArrayLike] = None) -> Result:
    """Gradients (dq, dk, dv) of attention_varlen() for the upstream
    gradient dout (total_q, nheads, headdim), given its out and lse
    (nheads, total_q) and the same arrays and options; as
    attention_backward() otherwise (with sinks, (dq, dk, dv, dsinks)). dk
    and dv are 0 on keys past seqused_k. (Paged caches have no backward.)"""
    _lib.require("flashattn_bwd", "attention_varlen_backward")
    q, k, v = _packed_input(q, "q"), _packed_input(k, "k"), _packed_input(v, "v")
    out, dout = _packed_input(out, "out"), _packed_input(dout, "dout")
    lse = _lse_input(lse, (q.shape[2], q.shape[1]), "nheads, total_q")
    batch, cu_q, cu_k, used = _varlen_setup(cu_seqlens_q, cu_seqlens_k, seqused_k,
                                            max_seqlen_q, max_seqlen_k)
    params = _lib.params(scale=softmax_scale, causal=causal, window_size=window_size,
                         align=_align(align), num_threads=num_threads,
                         block_m=block_m, block_n=block_n, deterministic=deterministic)
    params = _lib.with_varlen(params, batch, cu_q.ctypes.data, cu_k.ctypes.data,
                              None if used is None else used.ctypes.data)
    params = _varlen_modifiers(params, q.shape[2], cu_q, _lengths(cu_k) if used is None else used,
                               max_seqlen_q, max_seqlen_k, softcap, alibi_slopes, sinks, bias,
                               mask, dsinks=True)
    dq = _output(dq, q.shape[1:], q.dtype, "dq")
    dk = _output(dk, k.shape[1:], k.dtype, "dk")
    dv = _output(dv, v.shape[1:], v.dtype, "dv")
    at = _lib.descriptors(pack, q, k, v, out, dout, dq[None], dk[None], dv[None])
    status = _lib.run(_lib.bwd_at, _lib.bwd_workspace_size_at, *at[:5], lse.ctypes.data,
                      *at[5:], ctypes.addressof(params))
    _lib.check(status, "flashattn_bwd")
    return _gradients(dq, dk, dv, params)


def _out_dtype(dtype):
    """A dtype argument as one of the library's output dtypes."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt not in _DTYPES:
        raise ValueError("dtype %s is not supported: give float32, float16 or "
                         "ml_dtypes.bfloat16" % (dt if dt is not None else repr(dtype)))
    return dt


def merge(outs: Sequence[ArrayLike], lses: Sequence[ArrayLike], dtype: DTypeLike = None,
          num_threads: int = 0, *, out: Optional[ArrayLike] = None) -> Result:
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
    o = _output(out, shape, outs[0].dtype if dtype is None else _out_dtype(dtype))
    lse = np.empty((shape[0], shape[2], shape[1]), np.float32)
    parts = (_lib.Tensor * len(outs))(*[describe(x) for x in outs])
    lse_ptrs = (_FLOAT_PTR * len(lses))(*[x.ctypes.data_as(_FLOAT_PTR) for x in lses])
    params = _lib.new_params(num_threads=num_threads)
    status = _lib.lib.flashattn_merge(len(outs), parts, lse_ptrs, ctypes.byref(describe(o)),
                                      lse.ctypes.data_as(_FLOAT_PTR), ctypes.byref(params))
    _lib.check(status, "flashattn_merge")
    return o, lse
