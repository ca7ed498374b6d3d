"""CPU torch tensors as flashattn_tensor descriptors (torch strides are
already in elements and never negative)."""

import torch

from . import _lib

_DTYPES = {torch.float32: _lib.F32, torch.float16: _lib.F16, torch.bfloat16: _lib.BF16}
DTYPES = _DTYPES  # the float dtypes, for flash_attn_interface's plain path
# A KV cache's storage may also be 8-bit (with scales): the packing knows every dtype.
CACHE_DTYPES = {torch.int8: _lib.INT8, torch.float8_e4m3fn: _lib.FP8_E4M3,
                torch.float8_e5m2: _lib.FP8_E5M2}
_ALL_DTYPES = {**_DTYPES, **CACHE_DTYPES}



def _check(t, name, ndim, cache=False):
    if not isinstance(t, torch.Tensor):
        raise ValueError("%s must be a torch.Tensor, got %s" % (name, type(t).__name__))
    if not t.is_cpu:  # (t.device.type costs seven times as much)
        raise ValueError("%s is on %s: flashattn computes on the CPU; move it with .cpu()"
                         % (name, t.device))
    if t.dtype not in _DTYPES and not (cache and t.dtype in CACHE_DTYPES):
        raise ValueError("%s: dtype %s is not supported (torch.float32, torch.float16, "
                         "torch.bfloat16)" % (name, t.dtype))
    if t.dim() != ndim:
        raise ValueError("%s must have %d dimensions, got shape %s"
                         % (name, ndim, tuple(t.shape)))


def readable(t, name, ndim=4, cache=False):
    """`t` itself when the library can read it in place, else a contiguous
    copy (only when its last dimension is not contiguous). cache: int8 and
    fp8 too (a KV cache's storage)."""
    _check(t, name, ndim, cache)
    if t.stride(-1) != 1 and t.shape[-1] > 1:
        t = t.contiguous()
    return t


def in_place(t, name, cache=False):
    """`t` itself, which the library writes into: a copy would get the rows."""
    _check(t, name, 4, cache)
    if t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError("%s: its last dimension must be contiguous: new keys and values are "
                         "written into it in place" % name)
    return t


def index_tensor(t, name, ndim, dtypes):
    """An integer tensor as a contiguous CPU tensor of one of `dtypes`
    (converted to the first, if its values fit)."""
    if not isinstance(t, torch.Tensor) or t.dim() != ndim or t.is_floating_point() \
            or t.is_complex() or t.dtype == torch.bool:
        raise ValueError("%s must be a %d-D integer tensor" % (name, ndim))
    if t.device.type != "cpu":
        raise ValueError("%s is on %s: flashattn computes on the CPU" % (name, t.device))
    if t.dtype not in dtypes:
        converted = t.to(dtypes[0])
        if not torch.equal(converted.to(t.dtype), t):
            raise ValueError("%s: values do not fit in %s" % (name, dtypes[0]))
        t = converted
    return t.contiguous()


_TENSOR = _lib.TENSOR


def pack(buf, offset, t):
    """The flashattn_tensor of a readable 4-D tensor (or a view of one),
    written into buf at offset (a slot of _lib.descriptor_slots, or the KV
    cache's k or v) for the calls that take addresses. Written out
    longhand: at short sequences the calls' Python side is a visible share
    of their time."""
    b, s, h, d = t.shape
    sb, ss, sh, _ = t.stride()
    _TENSOR.pack_into(buf, offset, t.data_ptr(), _ALL_DTYPES[t.dtype], b, s, h, d,
                      sb if b > 1 else 0, ss if s > 1 else 0, sh if h > 1 else 0, 1)
