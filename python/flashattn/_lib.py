"""ctypes view of include/flashattn.h: the shared library, its structs, its errors.

ctypes drops the GIL for the whole of every foreign call made through a CDLL,
so other Python threads run while the library computes.
"""

import ctypes
import glob
import operator
import os
import struct
import threading

c_int64 = ctypes.c_int64

# flashattn_status, in the header's order.
OK = 0
(ERR_NULL_POINTER, ERR_BAD_SHAPE, ERR_BAD_HEAD_DIM, ERR_BAD_HEADS, ERR_BAD_STRIDE,
 ERR_BAD_DTYPE, ERR_BAD_PARAM, ERR_BAD_TILE, ERR_WORKSPACE_TOO_SMALL, ERR_OVERFLOW,
 ERR_OUT_OF_MEMORY, ERR_UNSUPPORTED) = range(1, 13)

# flashattn_dtype (the last three: KV-cache storage only, with scales)
F32, F16, BF16, INT8, FP8_E4M3, FP8_E5M2 = 0, 1, 2, 3, 4, 5

# flashattn_scale_kind
SCALE_PER_TOKEN, SCALE_PER_CHANNEL, SCALE_PER_HEAD = 0, 1, 2

# flashattn_align
ALIGN_BOTTOM_RIGHT, ALIGN_TOP_LEFT = 0, 1


class Tensor(ctypes.Structure):
    """flashattn_tensor: a 4-D view with element (not byte) strides."""
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("batch", c_int64), ("seqlen", c_int64), ("heads", c_int64), ("head_dim", c_int64),
        ("stride_batch", c_int64), ("stride_seq", c_int64), ("stride_head", c_int64),
        ("stride_dim", c_int64),
    ]


class Params(ctypes.Structure):
    """flashattn_params as this binding knows it. The library may have grown
    fields since; struct_size tells it which ones we have, and it gives the
    rest their defaults."""
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("scale", ctypes.c_float),
        ("causal", ctypes.c_int),
        ("window_left", c_int64),
        ("window_right", c_int64),
        ("align", ctypes.c_int),
        ("block_m", ctypes.c_int),
        ("block_n", ctypes.c_int),
        ("num_threads", ctypes.c_int),
        ("deterministic", ctypes.c_int),
        ("reserved_flags", ctypes.c_uint32),
        ("num_splits", ctypes.c_int),
        ("varlen", ctypes.c_void_p),  # const flashattn_varlen *; NULL: a dense batch
        ("softcap", ctypes.c_float),
        ("alibi_slopes", ctypes.c_void_p),  # const float *: [heads] or [batch, heads]
        ("alibi_batch_stride", c_int64),
        ("sinks", ctypes.c_void_p),         # const float * [heads]
        ("dsinks", ctypes.c_void_p),        # float * [heads], backward output
        ("bias", ctypes.c_void_p),          # const flashattn_scores *
        ("mask", ctypes.c_void_p),          # const flashattn_scores *
        ("dbias", ctypes.c_void_p),         # flashattn_scores *, written by the backward
        ("dropout_p", ctypes.c_float),
        ("dropout_seed", ctypes.c_uint64),
        ("dropout_offset", ctypes.c_uint64),
        ("precision", ctypes.c_int),        # flashattn_precision
    ]


class Varlen(ctypes.Structure):
    """flashattn_varlen: packed sequences (cu_seqlens), pointed to by
    Params.varlen. Every pointer is an int32 array's address."""
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("batch", c_int64),
        ("cu_seqlens_q", ctypes.c_void_p),  # [batch + 1]
        ("cu_seqlens_k", ctypes.c_void_p),  # [batch + 1]; NULL in flashattn_decode
        ("seqused_k", ctypes.c_void_p),     # [batch] or NULL
    ]


class Scores(ctypes.Structure):
    """flashattn_scores: a [batch, heads, seq_q, seq_k] array of per-score
    values (Params.bias, Params.mask), element strides, each dimension the
    problem's or 1. No struct_size: the library only reads it."""
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),            # bias: F32, F16 or BF16; ignored for a mask
        ("batch", c_int64), ("heads", c_int64), ("seq_q", c_int64), ("seq_k", c_int64),
        ("stride_batch", c_int64), ("stride_head", c_int64), ("stride_q", c_int64),
        ("stride_k", c_int64),
    ]


class KVCache(ctypes.Structure):
    """flashattn_kv_cache: contiguous (block_table NULL) or paged."""
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("k", Tensor),
        ("v", Tensor),
        ("block_table", ctypes.c_void_p),
        ("max_pages_per_seq", c_int64),
        ("seqlens_i32", ctypes.c_void_p),
        ("seqlens_i64", ctypes.c_void_p),
        ("batch_idx", ctypes.c_void_p),     # int32 [batch] or NULL
        ("leftpad", ctypes.c_void_p),       # int32 [batch] or NULL
        ("rotary_cos", ctypes.c_void_p),    # float32 [rotary_len, rotary_dim / 2] or NULL
        ("rotary_sin", ctypes.c_void_p),
        ("rotary_len", c_int64),
        ("rotary_dim", c_int64),
        ("rotary_interleaved", ctypes.c_int),
        ("k_scale", Tensor),                # int8 / fp8 caches: float32 scales
        ("v_scale", Tensor),
        ("k_scale_kind", ctypes.c_int),     # flashattn_scale_kind
        ("v_scale_kind", ctypes.c_int),
    ]


class Error(Exception):
    """Base of the exceptions raised for a status the C library returned.
    `status` is the flashattn_status code."""
    status = None


class BadArgumentError(Error, ValueError):
    pass


class OutOfMemoryError(Error, MemoryError):
    pass


class UnsupportedError(Error, NotImplementedError):
    pass


class LibraryError(Error, RuntimeError):
    pass


_ARGUMENT_ERRORS = {
    ERR_NULL_POINTER, ERR_BAD_SHAPE, ERR_BAD_HEAD_DIM, ERR_BAD_HEADS, ERR_BAD_STRIDE,
    ERR_BAD_DTYPE, ERR_BAD_PARAM, ERR_BAD_TILE, ERR_WORKSPACE_TOO_SMALL, ERR_OVERFLOW,
}


def _library_path():
    override = os.environ.get("FLASHATTN_LIBRARY")
    if override:
        return override
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, "libflashattn*.so*")) +
                   glob.glob(os.path.join(here, "libflashattn*.dylib")) +
                   glob.glob(os.path.join(here, "flashattn*.dll")))
    if not found:
        raise ImportError(
            "flashattn: the C library is not installed beside the package in %s; "
            "install the package with `pip install .` from the repository root, "
            "or point FLASHATTN_LIBRARY at libflashattn.so" % here)
    return found[0]


lib = ctypes.CDLL(_library_path())

_P = ctypes.POINTER
_T = _P(Tensor)
_F = _P(ctypes.c_float)
_SIZE = ctypes.c_size_t
# Every entry point the package calls: (whether every library this package
# has shipped with has it, return type, argument types as
# include/flashattn.h declares them). Both kinds of prototype below are
# made from this table, and python/tests/test_prototypes.py checks it
# against the header: ctypes cannot see an argument missing here, and
# passes the value given for it with C's default conversions (a Python int
# as a 32-bit int, its slot's upper half left as it was), so decode once
# read a garbage workspace size and wrote past its scratch buffer. The
# functions that need an entry point not always there raise
# NotImplementedError when the loaded library lacks it.
PROTOTYPES = {
    "flashattn_fwd_workspace_size": (True, ctypes.c_int,
                                     [_T, _T, _T, _T, _F, _P(Params), _P(_SIZE)]),
    "flashattn_fwd": (True, ctypes.c_int,
                      [_T, _T, _T, _T, _F, _P(Params), ctypes.c_void_p, _SIZE]),
    "flashattn_params_init_size": (True, None, [_P(Params), _SIZE]),
    "flashattn_tensor_bshd": (True, Tensor, [ctypes.c_void_p, ctypes.c_int] + [c_int64] * 4),
    "flashattn_tensor_bhsd": (True, Tensor, [ctypes.c_void_p, ctypes.c_int] + [c_int64] * 4),
    "flashattn_strerror": (True, ctypes.c_char_p, [ctypes.c_int]),
    "flashattn_last_error": (True, ctypes.c_char_p, []),
    "flashattn_version": (True, ctypes.c_char_p, []),
    "flashattn_isa": (True, ctypes.c_char_p, []),
    "flashattn_info": (False, ctypes.c_char_p, []),
    "flashattn_bwd": (False, ctypes.c_int, [_T, _T, _T, _T, _T, _F, _T, _T, _T, _P(Params),
                                            ctypes.c_void_p, _SIZE]),
    "flashattn_bwd_workspace_size": (False, ctypes.c_int,
                                     [_T, _T, _T, _T, _T, _F, _T, _T, _T, _P(Params), _P(_SIZE)]),
    "flashattn_decode": (False, ctypes.c_int, [_T, _P(KVCache), _T, _T, _T, _F, _P(Params),
                                               ctypes.c_void_p, _SIZE]),
    "flashattn_decode_workspace_size": (False, ctypes.c_int,
                                        [_T, _P(KVCache), _T, _T, _T, _F, _P(Params), _P(_SIZE)]),
    "flashattn_kv_cache_init_size": (False, None, [_P(KVCache), _SIZE]),
    "flashattn_varlen_init_size": (False, None, [_P(Varlen), _SIZE]),
    "flashattn_merge": (False, ctypes.c_int, [c_int64, _T, _P(_F), _T, _F, _P(Params)]),
    "flashattn_dropout_mask": (False, ctypes.c_int, [_P(Params)] + [c_int64] * 6 +
                               [_P(ctypes.c_uint8)]),
    "flashattn_quantize": (False, ctypes.c_int, [_T, _T, _T, ctypes.c_int, ctypes.c_int,
                                                 ctypes.c_int]),
}

for _name, (_always, _restype, _argtypes) in PROTOTYPES.items():
    if _always or hasattr(lib, _name):
        _fn = getattr(lib, _name)
        _fn.restype = _restype
        _fn.argtypes = _argtypes


# The front ends call the attention entry points through second prototypes
# that take every pointer as a plain address (void *): building ctypes
# structures and passing them by reference took about a third of a seq-16
# forward called from torch, where ints convert in tens of nanoseconds.
# They pack their descriptors with TENSOR into a per-thread buffer
# (descriptor_slots) and pass its addresses. (The typed prototypes above
# stay, so that lib's functions are never called with C's default
# argument conversions.)
TENSOR = struct.Struct("@Pi8q")  # flashattn_tensor, native layout
if TENSOR.size != ctypes.sizeof(Tensor) or Tensor.stride_dim.offset != TENSOR.size - 8:
    raise ImportError("flashattn: struct layout %d bytes does not match ctypes' flashattn_tensor "
                      "(%d bytes)" % (TENSOR.size, ctypes.sizeof(Tensor)))


def _by_address_argtypes(argtypes):
    """PROTOTYPES' argument types with every pointer made a plain address."""
    return [ctypes.c_void_p if issubclass(a, (ctypes._Pointer, ctypes.c_void_p)) else a
            for a in argtypes]


def _by_address(name):
    """`name` taking its pointers as void *, or None when the library lacks
    it. ctypes drops the GIL for these calls too (CFUNCTYPE, not
    PYFUNCTYPE)."""
    if not hasattr(lib, name):
        return None
    _, restype, argtypes = PROTOTYPES[name]
    return ctypes.CFUNCTYPE(restype, *_by_address_argtypes(argtypes))((name, lib))


fwd_at = _by_address("flashattn_fwd")
fwd_workspace_size_at = _by_address("flashattn_fwd_workspace_size")
bwd_at = _by_address("flashattn_bwd")
bwd_workspace_size_at = _by_address("flashattn_bwd_workspace_size")
decode_at = _by_address("flashattn_decode")
decode_workspace_size_at = _by_address("flashattn_decode_workspace_size")


def _load_fast():
    """The compiled helper (python/ext/fast.c) beside the loaded library, bound
    to that library's flashattn_fwd and flashattn_decode; None when it is not there (a build
    without Python's headers), when FLASHATTN_NO_EXTENSION is set, or when
    it does not load on this interpreter: the ctypes path then serves."""
    if os.environ.get("FLASHATTN_NO_EXTENSION") or fwd_at is None:
        return None
    here = os.path.dirname(os.path.abspath(lib._name))
    found = sorted(glob.glob(os.path.join(here, "_fast.abi3.so")) +
                   glob.glob(os.path.join(here, "_fast.*.pyd")))
    if not found:
        return None
    import importlib.machinery
    import importlib.util
    try:
        loader = importlib.machinery.ExtensionFileLoader("flashattn._fast", found[0])
        spec = importlib.util.spec_from_file_location("flashattn._fast", found[0], loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except ImportError:
        return None
    at = lambda f: None if f is None else ctypes.cast(f, ctypes.c_void_p).value
    module.init(at(fwd_at), at(fwd_workspace_size_at), at(lib.flashattn_params_init_size),
                at(decode_at), at(decode_workspace_size_at),
                at(getattr(lib, "flashattn_kv_cache_init_size", None)) if decode_at else None)
    if hasattr(module, "init_bwd"):
        module.init_bwd(at(bwd_at), at(bwd_workspace_size_at))
    return module


fast = _load_fast()


def has(symbol):
    """Whether the loaded library exports `symbol` (features land over time)."""
    return hasattr(lib, symbol)


def require(symbol, feature):
    """Raise NotImplementedError naming `symbol` if the library lacks it."""
    if not has(symbol):
        raise NotImplementedError("flashattn: this C library has no %s, so %s is not available"
                                  % (symbol, feature))


# One scratch buffer per thread for the library's workspace, kept between
# calls and grown to the largest so far (O(seq) bytes, never O(seq^2)).
# With NULL the library allocates and frees its workspace on every call,
# and at short sequences those fresh pages cost 10-20% of the call (seq 256,
# 8 heads, d 128, 1 thread: 2.66-3.04 ms against 2.44-2.50 ms).
_scratch = threading.local()
SCRATCH_MAX = 256 << 20  # a larger workspace is left to the library, per call


def run(fn, size_fn, *args):
    """fn(*args, workspace, workspace_bytes) on this thread's scratch
    buffer. The size is asked of the library (size_fn(*args, &bytes)), and
    the buffer grown, only when there is none yet or the library reports
    it too small (it then writes nothing). Returns fn's status. The
    backward has a buffer of its own, as in the compiled helper
    (python/ext/fast.c says why)."""
    slot = "bwd_buf" if fn is bwd_at else "buf"
    buf = getattr(_scratch, slot, None)
    if buf is not None:
        status = fn(*args, ctypes.addressof(buf), len(buf))
        if status != ERR_WORKSPACE_TOO_SMALL:
            return status
    need = ctypes.c_size_t()
    status = size_fn(*args, ctypes.byref(need))
    if status != OK:
        return status
    if need.value > SCRATCH_MAX:
        return fn(*args, None, 0)
    buf = (ctypes.c_char * max(need.value, 1))()
    setattr(_scratch, slot, buf)
    return fn(*args, ctypes.addressof(buf), len(buf))


def lse_scratch(n):
    """The address of this thread's room for n floats: an LSE the library
    must compute (a call's rounding depends on it being asked for) but the
    caller discards (torch.empty alone took 1.6 us, against 17 us for a
    whole 1 x 1 call)."""
    buf = getattr(_scratch, "lse", None)
    if buf is None or len(buf) < n:
        _scratch.lse = buf = (ctypes.c_float * max(n, 256))()
    return ctypes.addressof(buf)


def release_workspace():
    """Free this thread's scratch buffer (the next call allocates afresh)."""
    _scratch.buf = _scratch.bwd_buf = None
    if fast is not None:
        fast.release()


DESCRIPTOR_SLOTS = 8


def descriptor_slots():
    """This thread's buffer of DESCRIPTOR_SLOTS flashattn_tensor slots and its
    address: slot i lies at offset i * TENSOR.size. Per thread, so
    concurrent calls never share one; fill it right before the call."""
    slots = getattr(_scratch, "slots", None)
    if slots is None:
        buf = (ctypes.c_char * (TENSOR.size * DESCRIPTOR_SLOTS))()
        _scratch.slots = slots = (buf, ctypes.addressof(buf))
    return slots


def descriptors(pack, *arrays):
    """The arrays' flashattn_tensors in this thread's descriptor slots,
    written by the front end's pack(buf, offset, array): their addresses,
    in order."""
    buf, at = descriptor_slots()
    size = TENSOR.size
    for i, a in enumerate(arrays):
        pack(buf, i * size, a)
    return [at + i * size for i in range(len(arrays))]


def check(status, what):
    """Raise the exception that matches a flashattn_status, with the
    library's own messages; do nothing for FLASHATTN_OK. Must run on the
    thread that made the call: the detail message is thread-local."""
    if status == OK:
        return
    reason = lib.flashattn_strerror(status).decode()
    detail = lib.flashattn_last_error().decode()
    message = "%s: %s (%s)" % (what, detail, reason) if detail else "%s: %s" % (what, reason)
    if status in _ARGUMENT_ERRORS:
        cls = BadArgumentError
    elif status == ERR_OUT_OF_MEMORY:
        cls = OutOfMemoryError
    elif status == ERR_UNSUPPORTED:
        cls = UnsupportedError
    else:
        cls = LibraryError
    err = cls(message)
    err.status = status
    raise err


_defaults = {}


def _initialised(kind, init):
    """A `kind` (ctypes structure) filled by the library's init function,
    `init` naming its *_init_size entry point: told our struct's size, the
    library writes only the fields we have (and rejects a struct larger
    than its own at the first call). Done once per kind (a call costs
    microseconds that decode steps notice), then copied."""
    if kind not in _defaults:
        s = kind()
        getattr(lib, init)(ctypes.byref(s), ctypes.sizeof(kind))
        if s.struct_size != ctypes.sizeof(kind):
            raise LibraryError("flashattn: the C library could not initialise this binding's %s "
                               "(%d bytes): reinstall the package" % (kind.__name__, ctypes.sizeof(kind)))
        _defaults[kind] = bytes(s)
    return kind.from_buffer_copy(_defaults[kind])


def new_params(scale=None, causal=False, window_size=(-1, -1), align=ALIGN_BOTTOM_RIGHT,
               num_threads=0, block_m=0, block_n=0, deterministic=False, num_splits=0):
    """A Params filled by flashattn_params_init, then with these options."""
    p = _initialised(Params, "flashattn_params_init_size")
    p.struct_size = ctypes.sizeof(Params)
    p.scale = 0.0 if scale is None else _finite_float(scale, "softmax_scale")
    p.causal = 1 if causal else 0
    left, right = _window(window_size)
    p.window_left, p.window_right = left, right
    p.align = align
    p.num_threads = _int_arg(num_threads, "num_threads")
    p.block_m = _int_arg(block_m, "block_m")
    p.block_n = _int_arg(block_n, "block_n")
    p.deterministic = 1 if deterministic else 0
    p.num_splits = _int_arg(num_splits, "num_splits")
    return p


_params_cache = {}
_PLAIN = (type(None), bool, int, float)


def params(scale=None, causal=False, window_size=(-1, -1), align=ALIGN_BOTTOM_RIGHT,
           num_threads=0, block_m=0, block_n=0, deterministic=False, num_splits=0):
    """new_params(...), shared between calls with the same options: the
    library only reads them, and building one costs about 2 us, which
    short calls and decode steps notice. Only plain Python values are
    keys (a tensor or array would hash by identity, not value); other
    options are validated and built afresh at every call."""
    # (tested longhand: generator expressions cost a microsecond per call)
    plain = type(scale) in _PLAIN and type(causal) in _PLAIN \
        and type(deterministic) in _PLAIN and type(num_threads) is int \
        and type(block_m) is int and type(block_n) is int and type(num_splits) is int \
        and type(align) is int and type(window_size) in (tuple, list) and len(window_size) == 2 \
        and type(window_size[0]) is int and type(window_size[1]) is int
    if plain:
        key = (scale, causal, window_size[0], window_size[1], align, num_threads, block_m,
               block_n, deterministic, num_splits)
        p = _params_cache.get(key)
        if p is not None:
            return p
    p = new_params(scale=scale, causal=causal, window_size=window_size, align=align,
                   num_threads=num_threads, block_m=block_m, block_n=block_n,
                   deterministic=deterministic, num_splits=num_splits)
    if plain and len(_params_cache) < 64:
        _params_cache[key] = p
    return p


def _kv_cache_slot():
    """This thread's flashattn_kv_cache, initialised by the library once,
    and its address; every call sets all of its fields but struct_size."""
    slot = getattr(_scratch, "cache", None)
    if slot is None:
        cache = _initialised(KVCache, "flashattn_kv_cache_init_size")
        if cache.struct_size != ctypes.sizeof(KVCache):
            raise LibraryError("flashattn: the C library's flashattn_kv_cache is %d bytes, this "
                               "binding's %d: reinstall the package"
                               % (cache.struct_size, ctypes.sizeof(KVCache)))
        _scratch.cache = slot = (cache, ctypes.addressof(cache))
    return slot


def with_varlen(params, batch, cu_seqlens_q, cu_seqlens_k=None, seqused_k=None):
    """A copy of params whose varlen points at a flashattn_varlen of
    `batch` packed sequences; the others are the addresses of int32 arrays
    (cu_seqlens_k None in flashattn_decode, seqused_k None when not given).
    The copy keeps its flashattn_varlen alive; the caller keeps the arrays."""
    require("flashattn_varlen_init_size", "variable-length (cu_seqlens) batches")
    v = _initialised(Varlen, "flashattn_varlen_init_size")
    if v.struct_size != ctypes.sizeof(Varlen):
        raise LibraryError("flashattn: the C library's flashattn_varlen is %d bytes, this "
                           "binding's %d: reinstall the package"
                           % (v.struct_size, ctypes.sizeof(Varlen)))
    v.batch = batch
    v.cu_seqlens_q, v.cu_seqlens_k, v.seqused_k = cu_seqlens_q, cu_seqlens_k, seqused_k
    p = Params.from_buffer_copy(params)
    p.varlen = ctypes.addressof(v)
    p.varlen_struct = v  # (a Python attribute: lives as long as p)
    return p


def with_modifiers(params, softcap=0.0, alibi=None, sinks=None, dsinks=None, bias=None,
                   mask=None):
    """A copy of params with the score modifiers set (see the header's
    "Score modifiers"): softcap a number (0: off); alibi (address of the
    float32 slopes, alibi_batch_stride) or None; sinks, dsinks addresses of
    float32 [heads] arrays or None; bias, mask Scores or None. The copy
    keeps params (and so its flashattn_varlen) and the Scores alive; the
    caller keeps the arrays they point at."""
    p = Params.from_buffer_copy(params)
    try:
        p.softcap = float(softcap)
    except (TypeError, ValueError):
        raise ValueError("softcap must be a number, got %r" % (softcap,)) from None
    if alibi is not None:
        p.alibi_slopes, p.alibi_batch_stride = alibi
    p.sinks, p.dsinks = sinks, dsinks
    p.bias = None if bias is None else ctypes.addressof(bias)
    p.mask = None if mask is None else ctypes.addressof(mask)
    p.keep = (params, bias, mask)  # (a Python attribute: lives as long as p)
    return p


def with_dropout(params, dropout_p, seed, offset=0):
    """A copy of params with attention dropout at rate dropout_p (the
    header's "Dropout": the mask is a function of seed, offset and the
    element), or params itself when dropout_p is 0."""
    try:
        rate = float(dropout_p)
    except (TypeError, ValueError):
        raise ValueError("dropout_p must be a number, got %r" % (dropout_p,)) from None
    if not 0.0 <= rate < 1.0:
        raise ValueError("dropout_p is %r: must be in [0, 1)" % (dropout_p,))
    if rate == 0.0:
        return params
    p = Params.from_buffer_copy(params)
    p.dropout_p, p.dropout_seed, p.dropout_offset = rate, seed, offset
    p.keep = (params, getattr(params, "keep", None))
    return p


PRECISIONS = {"exact": 0, "int8": 1, "int8+bf16": 2, "int8+int8": 3}  # flashattn_precision's values


def with_precision(params, precision):
    """A copy of params computing Q K^T at `precision` ("exact", the
    default; "int8": INT8_QK; "int8+bf16": INT8_QK_BF16_PV; "int8+int8":
    INT8_QK_INT8_PV, the header's "Precision"), or params itself for
    "exact"."""
    if precision not in PRECISIONS:
        raise ValueError("precision is %r: must be one of %s" % (precision, ", ".join(map(repr, PRECISIONS))))
    if PRECISIONS[precision] == 0:
        return params
    p = Params.from_buffer_copy(params)
    p.precision = PRECISIONS[precision]
    p.keep = (params, getattr(params, "keep", None))
    return p


def dropout_keep(params, heads, b, h, i, n):
    """The dropout mask of row (b, h, i), keys 0 .. n - 1: bytes, 1 kept."""
    require("flashattn_dropout_mask", "returning the dropout mask")
    out = (ctypes.c_uint8 * max(n, 1))()
    check(lib.flashattn_dropout_mask(ctypes.byref(params), heads, b, h, i, 0, n, out),
          "flashattn_dropout_mask")
    return bytes(out)[:n]


def bad_shape(message):
    """The BadArgumentError the library would raise for shapes that
    disagree, for the ones the front ends catch themselves (array lengths
    the library cannot see)."""
    err = BadArgumentError(message + " (%s)" % lib.flashattn_strerror(ERR_BAD_SHAPE).decode())
    err.status = ERR_BAD_SHAPE
    return err


def decode(pack, q, k_cache, v_cache, k_new, v_new, out, lse, seqlens, block_table, params,
           batch_idx=None, leftpad=None, rotary=None, scales=None):
    """flashattn_decode on a front end's arrays: pack(buf, offset, x) writes
    the flashattn_tensor of x into buf at offset. k_new, v_new: arrays or
    None; lse: an address or None; seqlens: (address, is_int64);
    block_table: (address, max_pages_per_seq), or None for a contiguous
    cache; batch_idx, leftpad: int32 addresses or None; rotary: (cos, sin
    addresses of float32 [rotary_len, rotary_dim / 2], rotary_len,
    rotary_dim, interleaved) or None; scales: ((k_scale, kind), (v_scale,
    kind)) for an int8 / fp8 cache, the scales 4-D float32 arrays, or None."""
    require("flashattn_decode", "attention against a KV cache")
    cache, cache_at = _kv_cache_slot()
    pack(cache, KVCache.k.offset, k_cache)
    pack(cache, KVCache.v.offset, v_cache)
    if scales is None:
        if cache.k_scale.data or cache.v_scale.data:
            cache.k_scale = Tensor()
            cache.v_scale = Tensor()
    else:
        (ks, cache.k_scale_kind), (vs, cache.v_scale_kind) = scales
        pack(cache, KVCache.k_scale.offset, ks)
        pack(cache, KVCache.v_scale.offset, vs)
    cache.seqlens_i64, cache.seqlens_i32 = (seqlens[0], None) if seqlens[1] else (None, seqlens[0])
    cache.block_table, cache.max_pages_per_seq = (None, 0) if block_table is None else block_table
    cache.batch_idx, cache.leftpad = batch_idx, leftpad
    if rotary is None:
        cache.rotary_cos = cache.rotary_sin = None
        cache.rotary_len = cache.rotary_dim = cache.rotary_interleaved = 0
    else:
        (cache.rotary_cos, cache.rotary_sin, cache.rotary_len, cache.rotary_dim,
         cache.rotary_interleaved) = rotary
    if k_new is None:
        (q_at, out_at), new = descriptors(pack, q, out), (None, None)
    else:
        q_at, out_at, *new = descriptors(pack, q, out, k_new, v_new)
    status = run(decode_at, decode_workspace_size_at, q_at, cache_at, *new, out_at, lse,
                 ctypes.addressof(params))
    check(status, "flashattn_decode")


def quantize(pack, src, dst, scale, kind, calibrate, num_threads):
    """flashattn_quantize on a front end's 4-D arrays (pack as decode's)."""
    require("flashattn_quantize", "quantised KV caches")
    size = ctypes.sizeof(Tensor)
    buf = ctypes.create_string_buffer(3 * size)
    for i, x in enumerate((src, dst, scale)):
        pack(buf, i * size, x)
    at = [ctypes.cast(ctypes.addressof(buf) + i * size, ctypes.POINTER(Tensor)) for i in range(3)]
    check(lib.flashattn_quantize(*at, kind, int(calibrate), num_threads), "flashattn_quantize")


def _finite_float(x, name):
    try:
        f = float(x)
    except (TypeError, ValueError):
        raise ValueError("%s must be a number, got %r" % (name, x)) from None
    # The library rejects non-finite scales itself; a zero would silently
    # mean "default" to it, which is not what a caller passing 0 asked for.
    if f == 0.0:
        raise ValueError("softmax_scale must be nonzero (None means 1/sqrt(head_dim))")
    return f


def _int_arg(x, name):
    try:
        x = operator.index(x)
    except TypeError:
        raise ValueError("%s must be an integer, got %r" % (name, x)) from None
    if not -2**31 <= x < 2**31:
        raise ValueError("%s=%d is out of range" % (name, x))
    return x


def _window(window_size):
    try:
        left, right = window_size
    except (TypeError, ValueError):
        raise ValueError("window_size must be a pair (left, right), got %r"
                         % (window_size,)) from None
    try:
        left, right = operator.index(left), operator.index(right)
    except TypeError:
        raise ValueError("window_size must hold integers, got %r" % (window_size,)) from None
    if not all(-2**63 <= w < 2**63 for w in (left, right)):
        raise ValueError("window_size %r is out of range" % (window_size,))
    return left, right
