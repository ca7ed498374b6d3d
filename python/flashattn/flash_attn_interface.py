"""FlashAttention-2's Python interface (flash_attn.flash_attn_interface) for
CPU torch tensors: the same names, arguments, defaults, layouts and return
values, computed by the flashattn C library.

Layout: (batch, seqlen, nheads, headdim); k and v may have fewer heads (GQA).
Tensors are handed to the library by their strides (a packed qkv is read in
place); only tensors whose last dimension is not contiguous are copied.
Differences from flash_attn, besides running on the CPU:
  - float32 is accepted as well as float16 and bfloat16;
  - the softmax_lse of a row that sees no key is -inf (its true value,
    log 0); flash_attn writes +inf there;
  - return_attn_probs returns (out, softmax_lse, None), or with dropout
    (out, softmax_lse, the kept elements as a bool (batch, nheads,
    seqlen_q, seqlen_k) tensor, for small shapes): the attention
    probabilities are never materialised (flash_attn returns them with the
    dropout encoded in their sign, for testing);
  - dropout draws its seed from torch's default CPU generator, so
    torch.manual_seed reproduces the masks;
  - the varlen functions also take seqused_k (keys used per sequence), and
    flash_attn_with_kvcache takes FlashAttention-3's cu_seqlens_q and
    max_seqlen_q (packed queries, each sequence its own count);
  - with alibi_slopes and causal=True, flash_attn's kernels add
    slope * j to the logits instead of -slope * (i + seqlen_k - seqlen_q - j)
    (the two differ by a constant per row, which the softmax cancels): out
    is the same, but flash_attn's softmax_lse is larger by
    slope * (i + seqlen_k - seqlen_q); here it is the LSE of the formula;
  - options the library lacks (dropout_p > 0 with a paged cache; in flash_attn_with_kvcache
    rotary embeddings together with a nonzero cache_leftpad, new keys
    packed unlike the queries) raise NotImplementedError, never ignored.
The library uses torch.get_num_threads() threads, as torch's own CPU ops do.
"""

import ctypes
import struct
from typing import Optional, Tuple, Union

import numpy as np
import torch
from torch import Tensor

from . import _lib, numpy_api
from ._lib import ALIGN_BOTTOM_RIGHT
from .padding import pad_input, unpad_input  # noqa: F401 (flash_attn.bert_padding's, re-exported)
from . import torch_tensors
from .torch_tensors import in_place, index_tensor, pack, readable

__all__ = [
    "flash_attn_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_kvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_attn_with_kvcache",
    "quantize_kv_cache",
    "unpad_input",
    "pad_input",
]


# _SAME_BITS: calls without autograd ask for the LSE too, returned or not.
# The library runs a forward of a few rows on its decode driver, on the
# path that rounds as the backward's does whenever the LSE is asked for
# (flashattn.h), and the autograd Function and the torch.compile operators
# always ask for it: so a call gives the same bits with and without
# gradients, eager or compiled.

# Masks returned by return_attn_probs with dropout: at most this many elements.
_MASK_ELEMENTS = 1 << 24


def _dropout(params, dropout_p):
    """params with dropout at dropout_p, its seed drawn from torch's default
    CPU generator: torch.manual_seed(s) reproduces every call's mask, and
    each call gets a fresh one (FlashAttention-2 draws its Philox seed and
    offset from torch's generator likewise)."""
    if dropout_p == 0.0:
        return params
    seed = int(torch.randint(0, 2 ** 62, (1,)).item())
    return _lib.with_dropout(params, dropout_p, seed)


def _dropout_mask(params, lens_q, lens_k, heads, max_q, max_k):
    """(batch, heads, max_q, max_k) bool: the elements dropout kept for
    sequences of lens_q queries and lens_k keys (False past them); None
    without dropout. For small shapes only: it is built row by row."""
    if params.dropout_p == 0.0:
        return None
    batch = len(lens_q)
    if batch * heads * max_q * max_k > _MASK_ELEMENTS:
        raise NotImplementedError("flashattn: return_attn_probs with dropout returns the mask for "
                                  "at most %d elements" % _MASK_ELEMENTS)
    mask = torch.zeros((batch, heads, max_q, max_k), dtype=torch.bool)
    for b in range(batch):
        for h in range(heads):
            for i in range(lens_q[b] if lens_k[b] else 0):
                row = _lib.dropout_keep(params, heads, b, h, i, lens_k[b])
                mask[b, h, i, :lens_k[b]] = torch.frombuffer(bytearray(row), dtype=torch.uint8).bool()
    return mask


def _modified(params, softcap, alibi_slopes, sizes):
    """params with FlashAttention-2's softcap and alibi_slopes ((nheads,)
    or (batch, nheads), used as float32; they get no gradient, as in
    flash_attn), or params itself without them. sizes() gives (batch,
    nheads) (called only with alibi_slopes or softcap)."""
    if not softcap and alibi_slopes is None:
        return params
    slopes = None
    if alibi_slopes is not None:
        if not isinstance(alibi_slopes, torch.Tensor) or not alibi_slopes.is_floating_point():
            raise ValueError("alibi_slopes must be a float tensor (nheads,) or (batch, nheads)")
        if not alibi_slopes.is_cpu:
            raise ValueError("alibi_slopes is on %s: flashattn computes on the CPU"
                             % alibi_slopes.device)
        slopes = alibi_slopes.detach().to(torch.float32).contiguous().numpy()
    batch, heads = sizes()
    return numpy_api._modifiers(params, batch, heads, None, softcap, slopes)


def _params(softmax_scale, causal, window_size, deterministic, num_splits=0):
    """The call's Params (shared between calls with the same options:
    _lib.params), on torch's thread count."""
    return _lib.params(scale=softmax_scale, causal=causal, window_size=window_size,
                       align=ALIGN_BOTTOM_RIGHT, num_threads=torch.get_num_threads(),
                       deterministic=deterministic, num_splits=num_splits)


def _no_grad(*tensors):
    """True when autograd would record nothing: the call can skip the
    autograd Function (and the LSE it saves) altogether."""
    if not torch.is_grad_enabled():
        return True
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.requires_grad:
            return False
    return True


def _forward(q, k, v, params, want_lse=True):
    """out and softmax_lse (batch, nheads, seqlen_q) for readable q, k, v;
    softmax_lse is None, and not computed, when not wanted."""
    if v.shape[3] != q.shape[3]:
        out = torch.empty(q.shape[:3] + v.shape[3:], dtype=q.dtype)
    elif q.is_contiguous():
        out = torch.empty_like(q)  # (asking for contiguous_format costs a microsecond more)
    else:
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32) \
        if want_lse else None
    at = _lib.descriptors(pack, q, k, v, out)
    status = _lib.run(_lib.fwd_at, _lib.fwd_workspace_size_at, *at,
                      None if lse is None else lse.data_ptr(), ctypes.addressof(params))
    _lib.check(status, "flashattn_fwd")
    return out, lse


def _backward(q, k, v, out, dout, lse, dq, dk, dv, params):
    """Fill dq, dk, dv (tensors the library can write) from the saved forward."""
    _lib.require("flashattn_bwd", "the gradient of flash_attn_func")
    dout = readable(dout, "dout")
    at = _lib.descriptors(pack, q, k, v, out, dout, dq, dk, dv)
    status = _lib.run(_lib.bwd_at, _lib.bwd_workspace_size_at, *at[:5], lse.data_ptr(), *at[5:],
                      ctypes.addressof(params))
    _lib.check(status, "flashattn_bwd")


def _defined(dout, out):
    """The output's gradient; the Functions leave lse's (never used: lse
    is not differentiable) and an unused output's unallocated
    (set_materialize_grads(False)), which saves a zeros tensor a backward,
    a visible share of a short one (docs/performance.md)."""
    return torch.zeros_like(out) if dout is None else dout


class _FlashAttnFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, params):
        q, k, v = readable(q, "q"), readable(k, "k"), readable(v, "v")
        out, lse = _forward(q, k, v, params)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.params = params
        ctx.mark_non_differentiable(lse)
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, out, lse = ctx.saved_tensors
        dout = _defined(dout, out)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        _backward(q, k, v, out, dout, lse, dq, dk, dv, ctx.params)
        return dq, dk, dv, None


class _PlainFlashAttnFunc(torch.autograd.Function):
    """_FlashAttnFunc for _plain_forward's calls that record a gradient:
    the options as given, the forward through the compiled helper (inside
    an autograd Function no gradient is recorded, so it takes the call),
    else through _forward as _FlashAttnFunc does. The same library calls,
    so the same bits; at one query and one key the general path's Python
    steps took most of a call's time (docs/performance.md)."""

    @staticmethod
    def forward(ctx, q, k, v, softmax_scale, causal, window_size, deterministic):
        done = _fast.fwd(q, k, v, softmax_scale, causal, window_size, deterministic, True) \
            if _fast is not None else None
        if type(done) is int:
            _lib.check(done, "flashattn_fwd")
        if done is None:
            q, k, v = readable(q, "q"), readable(k, "k"), readable(v, "v")
            done = _forward(q, k, v, _params(softmax_scale, causal, window_size, deterministic))
        out, lse = done
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.options = (softmax_scale, causal, window_size, deterministic)
        ctx.mark_non_differentiable(lse)
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, out, lse = ctx.saved_tensors
        dout = _defined(dout, out)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        done = _fast.bwd(q, k, v, out, dout, dq, dk, dv, lse.data_ptr(), *ctx.options) \
            if _fast is not None and hasattr(_fast, "bwd") else None
        if done is None:
            _backward(q, k, v, out, dout, lse, dq, dk, dv, _params(*ctx.options))
        else:
            _lib.check(done, "flashattn_bwd")
        return dq, dk, dv, None, None, None, None


class _FlashAttnQKVPackedFunc(torch.autograd.Function):
    """qkv (batch, seqlen, 3, nheads, headdim) is read, and its gradient
    written, in place through strided views: no unpacking copies."""

    @staticmethod
    def forward(ctx, qkv, params):
        qkv = readable(qkv, "qkv", ndim=5)
        q, k, v = qkv.unbind(2)
        out, lse = _forward(q, k, v, params)
        ctx.save_for_backward(qkv, out, lse)
        ctx.params = params
        ctx.mark_non_differentiable(lse)
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        qkv, out, lse = ctx.saved_tensors
        dout = _defined(dout, out)
        dqkv = torch.empty_like(qkv)
        _backward(*qkv.unbind(2), out, dout, lse, *dqkv.unbind(2), ctx.params)
        return dqkv, None


class _FlashAttnKVPackedFunc(torch.autograd.Function):
    """kv (batch, seqlen_k, 2, nheads_k, headdim), read and differentiated in place."""

    @staticmethod
    def forward(ctx, q, kv, params):
        q, kv = readable(q, "q"), readable(kv, "kv", ndim=5)
        k, v = kv.unbind(2)
        out, lse = _forward(q, k, v, params)
        ctx.save_for_backward(q, kv, out, lse)
        ctx.params = params
        ctx.mark_non_differentiable(lse)
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, kv, out, lse = ctx.saved_tensors
        dout = _defined(dout, out)
        dq, dkv = torch.empty_like(q), torch.empty_like(kv)
        _backward(q, *kv.unbind(2), out, dout, lse, dq, *dkv.unbind(2), ctx.params)
        return dq, dkv, None


# What the attention functions return: out, or with return_attn_probs
# (out, softmax_lse, the dropout mask or None).
Result = Union[Tensor, Tuple[Tensor, Tensor, Optional[Tensor]]]
Window = Tuple[int, int]


def _result(out, lse, return_attn_probs, mask=None):
    """out, or (out, softmax_lse, the dropout mask or None); mask() builds it."""
    if not return_attn_probs:
        return out
    return out, lse, mask() if mask is not None else None


def _dense_mask(params, q, k):
    b, sq, h, sk = q.shape[0], q.shape[1], q.shape[2], k.shape[1]
    return lambda: _dropout_mask(params, [sq] * b, [sk] * b, h, sq, sk)


def _varlen_mask(params, cu_q, cu_k, heads, max_q, max_k):
    cq, ck = [int(x) for x in cu_q], [int(x) for x in cu_k]
    return lambda: _dropout_mask(params, [b - a for a, b in zip(cq, cq[1:])],
                                 [b - a for a, b in zip(ck, ck[1:])], heads, max_q, max_k)


def _precision(params, precision, *inputs):
    """params at `precision` (numpy_api.attention's values: "exact",
    "int8", "int8+bf16", "int8+int8"); the 8-bit ones are for inference: no gradient,
    and not under torch.compile's tracing."""
    if precision == "exact":
        return params
    if torch_ops.tracing():
        raise NotImplementedError("flashattn: precision=%r under torch.compile / tracing: call it "
                                  "eagerly" % (precision,))
    if not _no_grad(*inputs):
        raise ValueError("flashattn: precision=%r is for inference: it has no backward (use "
                         "torch.no_grad() or detached inputs)" % (precision,))
    return _lib.with_precision(params, precision)


_PLAIN_DTYPES = torch_tensors.DTYPES  # {torch dtype: flashattn_dtype} of q, k, v
_fast = _lib.fast
if _fast is not None:
    _fast.register_torch(Tensor, tuple(_PLAIN_DTYPES.items()), torch.float32, torch.int32,
                         torch.int64, torch.empty_like, torch.empty, torch.contiguous_format,
                         torch.is_grad_enabled, torch.get_num_threads)
_TENSORS4 = struct.Struct("@" + _lib.TENSOR.format.lstrip("@") * 4)
if _TENSORS4.size != 4 * _lib.TENSOR.size:
    raise ImportError("flashattn: four packed flashattn_tensors are not %d bytes"
                      % (4 * _lib.TENSOR.size))


def _plain_forward(q, k, v, softmax_scale, causal, window_size, deterministic, want_lse):
    """flash_attn_func's forward, out and softmax_lse (None unless
    want_lse: the library then writes it to scratch), when nothing needs
    its general path: no gradient to record, not tracing, CPU tensors of
    one float dtype the library reads in place, V's head_dim Q's. The
    general path's steps folded into one function: at one query and one
    key they took twice the C call's time (docs/performance.md). None when
    it does not apply; the general path then runs, and raises what it
    raises. The library validates the rest, as on the general path."""
    if _fast is not None:  # the steps below in C (python/ext/fast.c)
        if torch_ops.tracing():
            return None
        done = _fast.fwd(q, k, v, softmax_scale, causal, window_size, deterministic, want_lse)
        if type(done) is int:
            _lib.check(done, "flashattn_fwd")
        return done
    if type(q) is not Tensor or type(k) is not Tensor or type(v) is not Tensor:
        return None
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return None
    dt = q.dtype
    code = _PLAIN_DTYPES.get(dt)
    if code is None or k.dtype is not dt or v.dtype is not dt \
            or not (q.is_cpu and k.is_cpu and v.is_cpu) or torch_ops.tracing():
        return None
    qs, ks, vs = q.shape, k.shape, v.shape
    if len(qs) != 4 or len(ks) != 4 or len(vs) != 4 or vs[3] != qs[3]:
        return None
    qt, kt, vt = q.stride(), k.stride(), v.stride()
    if (qt[3] != 1 and qs[3] > 1) or (kt[3] != 1 and ks[3] > 1) or (vt[3] != 1 and vs[3] > 1):
        return None
    params = _params(softmax_scale, causal, window_size, deterministic)
    b, sq, h, d = qs
    out = torch.empty_like(q) if q.is_contiguous() \
        else torch.empty_like(q, memory_format=torch.contiguous_format)
    if want_lse:
        lse = torch.empty(b, h, sq, dtype=torch.float32)
        lse_at = lse.data_ptr()
    else:
        lse, lse_at = None, _lib.lse_scratch(b * h * sq)
    buf, at = _lib.descriptor_slots()
    size = _lib.TENSOR.size
    _TENSORS4.pack_into(
        buf, 0,
        q.data_ptr(), code, b, sq, h, d,
        qt[0] if b > 1 else 0, qt[1] if sq > 1 else 0, qt[2] if h > 1 else 0, 1,
        k.data_ptr(), code, ks[0], ks[1], ks[2], ks[3],
        kt[0] if ks[0] > 1 else 0, kt[1] if ks[1] > 1 else 0, kt[2] if ks[2] > 1 else 0, 1,
        v.data_ptr(), code, vs[0], vs[1], vs[2], vs[3],
        vt[0] if vs[0] > 1 else 0, vt[1] if vs[1] > 1 else 0, vt[2] if vs[2] > 1 else 0, 1,
        out.data_ptr(), code, b, sq, h, d,
        sq * h * d if b > 1 else 0, h * d if sq > 1 else 0, d if h > 1 else 0, 1)
    status = _lib.run(_lib.fwd_at, _lib.fwd_workspace_size_at, at, at + size, at + 2 * size,
                      at + 3 * size, lse_at, ctypes.addressof(params))
    _lib.check(status, "flashattn_fwd")
    return out, lse


def flash_attn_func(q: Tensor, k: Tensor, v: Tensor, dropout_p: float = 0.0,
                    softmax_scale: Optional[float] = None, causal: bool = False,
                    window_size: Window = (-1, -1), softcap: float = 0.0,
                    alibi_slopes: Optional[Tensor] = None, deterministic: bool = False,
                    return_attn_probs: bool = False, precision: str = "exact") -> Result:
    """q: (batch, seqlen_q, nheads, headdim); k, v: (batch, seqlen_k,
    nheads_k, headdim) with nheads a multiple of nheads_k (MQA/GQA).
    causal aligns the mask bottom-right: query i sees keys
    j <= i + seqlen_k - seqlen_q. window_size=(left, right), -1 unbounded.
    softmax_scale defaults to 1/sqrt(headdim). softcap > 0 caps the scaled
    logits s to softcap * tanh(s / softcap) (Gemma 2); alibi_slopes
    (nheads,) or (batch, nheads) float32 adds -slope * |i + seqlen_k -
    seqlen_q - j| to them (ALiBi; the slopes get no gradient, as in
    flash_attn). deterministic makes the backward pass bit-reproducible.
    precision="int8", "int8+bf16" or "int8+int8" (a flashattn extension,
    inference only) computes q k^T on 8-bit integers, and with "int8+bf16"
    P V on bfloat16, with "int8+int8" on 8-bit integers too:
    numpy_api.attention's option, docs/precision.md.
    Returns out (batch, seqlen_q, nheads, headdim), or with
    return_attn_probs (out, softmax_lse (batch, nheads, seqlen_q) float32, None).
    """
    if dropout_p == 0.0 and not softcap and alibi_slopes is None and precision == "exact":
        plain = _plain_forward(q, k, v, softmax_scale, causal, window_size, deterministic,
                               return_attn_probs)
        if plain is not None:
            return _result(*plain, return_attn_probs)
        if not torch_ops.tracing() and not _no_grad(q, k, v):
            out, lse = _PlainFlashAttnFunc.apply(q, k, v, softmax_scale, causal, window_size,
                                                 deterministic)
            return _result(out, lse, return_attn_probs)
    if torch_ops.tracing() and precision == "exact":
        return torch_ops.flash_attn(q, k, v, dropout_p, softmax_scale, causal, window_size,
                                    softcap, alibi_slopes, deterministic, return_attn_probs)
    params = _modified(_params(softmax_scale, causal, window_size, deterministic), softcap,
                       alibi_slopes, lambda: (q.shape[0], q.shape[2]))
    params = _precision(_dropout(params, dropout_p), precision, q, k, v)
    if _no_grad(q, k, v):
        out, lse = _forward(readable(q, "q"), readable(k, "k"), readable(v, "v"), params,
                            want_lse=True)  # (see _SAME_BITS)
    else:
        out, lse = _FlashAttnFunc.apply(q, k, v, params)
    return _result(out, lse, return_attn_probs, _dense_mask(params, q, k))


def flash_attn_qkvpacked_func(qkv: Tensor, dropout_p: float = 0.0,
                              softmax_scale: Optional[float] = None, causal: bool = False,
                              window_size: Window = (-1, -1), softcap: float = 0.0,
                              alibi_slopes: Optional[Tensor] = None, deterministic: bool = False,
                              return_attn_probs: bool = False, precision: str = "exact") -> Result:
    """qkv: (batch, seqlen, 3, nheads, headdim). Otherwise as flash_attn_func."""
    if torch_ops.tracing() and precision == "exact":
        return torch_ops.flash_attn(*qkv.unbind(2), dropout_p, softmax_scale, causal, window_size,
                                    softcap, alibi_slopes, deterministic, return_attn_probs)
    params = _modified(_params(softmax_scale, causal, window_size, deterministic), softcap,
                       alibi_slopes, lambda: (qkv.shape[0], qkv.shape[3]))
    params = _precision(_dropout(params, dropout_p), precision, qkv)
    if _no_grad(qkv):
        out, lse = _forward(*readable(qkv, "qkv", ndim=5).unbind(2), params,
                            want_lse=True)  # (see _SAME_BITS)
    else:
        out, lse = _FlashAttnQKVPackedFunc.apply(qkv, params)
    return _result(out, lse, return_attn_probs, _dense_mask(params, qkv[:, :, 0], qkv[:, :, 1]))


def flash_attn_kvpacked_func(q: Tensor, kv: Tensor, dropout_p: float = 0.0,
                             softmax_scale: Optional[float] = None, causal: bool = False,
                             window_size: Window = (-1, -1), softcap: float = 0.0,
                             alibi_slopes: Optional[Tensor] = None, deterministic: bool = False,
                             return_attn_probs: bool = False, precision: str = "exact") -> Result:
    """q: (batch, seqlen_q, nheads, headdim); kv: (batch, seqlen_k, 2,
    nheads_k, headdim). Otherwise as flash_attn_func."""
    if torch_ops.tracing() and precision == "exact":
        return torch_ops.flash_attn(q, *kv.unbind(2), dropout_p, softmax_scale, causal,
                                    window_size, softcap, alibi_slopes, deterministic,
                                    return_attn_probs)
    params = _modified(_params(softmax_scale, causal, window_size, deterministic), softcap,
                       alibi_slopes, lambda: (q.shape[0], q.shape[2]))
    params = _precision(_dropout(params, dropout_p), precision, q, kv)
    if _no_grad(q, kv):
        out, lse = _forward(readable(q, "q"), *readable(kv, "kv", ndim=5).unbind(2), params,
                            want_lse=True)  # (see _SAME_BITS)
    else:
        out, lse = _FlashAttnKVPackedFunc.apply(q, kv, params)
    return _result(out, lse, return_attn_probs, _dense_mask(params, q, kv[:, :, 0]))


# ---- packed variable-length batches (cu_seqlens) ----------------------------

def _int32_array(t, name, ndim=1):
    """An int32 index tensor (converted if its values fit) as the NumPy
    array over the same memory, for numpy_api's checks and addresses."""
    return index_tensor(t, name, ndim, [torch.int32]).numpy()


def _varlen(params, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k=None):
    """The call's Params with its flashattn_varlen, after the checks the
    library cannot make (array lengths, max_seqlen), and the int32 arrays
    it points at (to keep alive as long as the Params is used)."""
    keep = (_int32_array(cu_seqlens_q, "cu_seqlens_q"), _int32_array(cu_seqlens_k, "cu_seqlens_k"),
            None if seqused_k is None else _int32_array(seqused_k, "seqused_k"))
    batch, cu_q, cu_k, used = numpy_api._varlen_setup(*keep, max_seqlen_q, max_seqlen_k)
    params = _lib.with_varlen(params, batch, cu_q.ctypes.data, cu_k.ctypes.data,
                              None if used is None else used.ctypes.data)
    return params, (cu_q, cu_k, used)


def _packed(t, name):
    """A readable packed (total, nheads, headdim) tensor as its 4-D view
    (1, total, nheads, headdim), the layout the library reads."""
    return readable(t, name, ndim=3).unsqueeze(0)


def _varlen_forward(q, k, v, params, want_lse=True):
    """out (total_q, nheads, headdim) and softmax_lse (nheads, total_q) for
    4-D views of packed q, k, v and a Params with varlen."""
    out, lse = _forward(q, k, v, params, want_lse)
    return out[0], None if lse is None else lse[0]


def _varlen_backward(q, k, v, out, dout, lse, dq, dk, dv, params):
    _backward(q, k, v, out.unsqueeze(0), dout.unsqueeze(0), lse, dq.unsqueeze(0),
              dk.unsqueeze(0), dv.unsqueeze(0), params)


class _FlashAttnVarlenFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, params, keep):
        q, k, v = _packed(q, "q"), _packed(k, "k"), _packed(v, "v")
        out, lse = _varlen_forward(q, k, v, params)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.params, ctx.keep = params, keep
        ctx.mark_non_differentiable(lse)
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, out, lse = ctx.saved_tensors
        dout = _defined(dout, out)
        dq, dk, dv = (torch.empty_like(x[0]) for x in (q, k, v))
        _varlen_backward(q, k, v, out, dout, lse, dq, dk, dv, ctx.params)
        return dq, dk, dv, None, None


class _FlashAttnVarlenQKVPackedFunc(torch.autograd.Function):
    """qkv (total, 3, nheads, headdim), read and differentiated in place."""

    @staticmethod
    def forward(ctx, qkv, params, keep):
        qkv = readable(qkv, "qkv", ndim=4)
        out, lse = _varlen_forward(*(x.unsqueeze(0) for x in qkv.unbind(1)), params)
        ctx.save_for_backward(qkv, out, lse)
        ctx.params, ctx.keep = params, keep
        ctx.mark_non_differentiable(lse)
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        qkv, out, lse = ctx.saved_tensors
        dout = _defined(dout, out)
        dqkv = torch.empty_like(qkv)
        _varlen_backward(*(x.unsqueeze(0) for x in qkv.unbind(1)), out, dout, lse,
                         *dqkv.unbind(1), ctx.params)
        return dqkv, None, None


class _FlashAttnVarlenKVPackedFunc(torch.autograd.Function):
    """kv (total_k, 2, nheads_k, headdim), read and differentiated in place."""

    @staticmethod
    def forward(ctx, q, kv, params, keep):
        q, kv = _packed(q, "q"), readable(kv, "kv", ndim=4)
        out, lse = _varlen_forward(q, *(x.unsqueeze(0) for x in kv.unbind(1)), params)
        ctx.save_for_backward(q, kv, out, lse)
        ctx.params, ctx.keep = params, keep
        ctx.mark_non_differentiable(lse)
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, kv, out, lse = ctx.saved_tensors
        dout = _defined(dout, out)
        dq, dkv = torch.empty_like(q[0]), torch.empty_like(kv)
        _varlen_backward(q, *(x.unsqueeze(0) for x in kv.unbind(1)), out, dout, lse, dq,
                         *dkv.unbind(1), ctx.params)
        return dq, dkv, None, None


class _NoBackward(torch.autograd.Function):
    """Passes a result through; its gradient raises (the paged varlen
    call, as in FlashAttention-2, has no backward)."""

    @staticmethod
    def forward(ctx, out, *inputs):
        return out.view_as(out)

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("flashattn: flash_attn_varlen_func with block_table (a paged "
                                  "KV cache) has no backward pass, as in FlashAttention-2")


def _paged_varlen(q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                  block_table, seqused_k, params, want_lse):
    """flash_attn_varlen_func with block_table: packed queries against a
    paged cache, sequence b's keys its first cu_seqlens_k[b + 1] -
    cu_seqlens_k[b] rows (seqused_k[b] when given); nothing appended."""
    _lib.require("flashattn_decode", "flash_attn_varlen_func with block_table")
    q = _packed(q, "q")
    k_cache, v_cache = readable(k_cache, "k_cache"), readable(v_cache, "v_cache")
    cu_q = numpy_api._cu_seqlens(_int32_array(cu_seqlens_q, "cu_seqlens_q"), "cu_seqlens_q")
    batch = cu_q.shape[0] - 1
    if seqused_k is not None:
        lens = numpy_api._per_sequence(_int32_array(seqused_k, "seqused_k"), "seqused_k", batch)
    elif cu_seqlens_k is not None:
        cu_k = _int32_array(cu_seqlens_k, "cu_seqlens_k")
        lens = numpy_api._lengths(numpy_api._cu_seqlens(cu_k, "cu_seqlens_k", batch))
        lens = lens.astype(np.int32)
    else:
        raise ValueError("give cu_seqlens_k or seqused_k: the key length of each sequence")
    numpy_api._check_max_seqlen(max_seqlen_q, numpy_api._lengths(cu_q), "max_seqlen_q")
    numpy_api._check_max_seqlen(max_seqlen_k, lens, "max_seqlen_k")
    table = _int32_array(block_table, "block_table", 2)
    if table.shape[0] != batch:
        raise _lib.bad_shape("block_table has %d rows for %d sequences" % (table.shape[0], batch))
    params = _lib.with_varlen(params, batch, cu_q.ctypes.data)
    out = torch.empty(q.shape[1:3] + v_cache.shape[3:], dtype=q.dtype)
    lse = torch.empty((q.shape[2], q.shape[1]), dtype=torch.float32) if want_lse else None
    _lib.decode(pack, q, k_cache, v_cache, None, None, out.unsqueeze(0),
                None if lse is None else lse.data_ptr(), (lens.ctypes.data, False),
                (table.ctypes.data, table.shape[1]), params)
    return out, lse


def flash_attn_varlen_func(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor,
                           cu_seqlens_k: Optional[Tensor], max_seqlen_q: int, max_seqlen_k: int,
                           dropout_p: float = 0.0, softmax_scale: Optional[float] = None,
                           causal: bool = False, window_size: Window = (-1, -1),
                           softcap: float = 0.0, alibi_slopes: Optional[Tensor] = None,
                           deterministic: bool = False, return_attn_probs: bool = False,
                           block_table: Optional[Tensor] = None,
                           seqused_k: Optional[Tensor] = None, precision: str = "exact") -> Result:
    """Packed variable-length batches. q: (total_q, nheads, headdim), k, v:
    (total_k, nheads_k, headdim), the sequences one after another;
    cu_seqlens_q, cu_seqlens_k (batch + 1,) int32: sequence b has the
    queries cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1 and the keys
    cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1 (only the first seqused_k[b]
    when seqused_k (batch,) is given; dk, dv are 0 past them). Each
    sequence is attended to as by flash_attn_func alone: causal and window
    aligned to its own lengths. max_seqlen_q, max_seqlen_k: at least the
    longest sequence's (smaller raises).
    block_table (batch, max_blocks_per_seq) int32: k and v are then a paged
    cache (num_blocks, page_block_size, nheads_k, headdim) and sequence b's
    keys its first cu_seqlens_k[b + 1] - cu_seqlens_k[b] rows (or
    seqused_k[b]); forward only. softcap and alibi_slopes as
    flash_attn_func, alibi_slopes (nheads,) or (batch, nheads), ALiBi
    aligned to each sequence's own lengths. precision as flash_attn_func
    (each sequence's K smoothed by its own mean; not with block_table).
    Returns out (total_q, nheads, headdim), or with return_attn_probs
    (out, softmax_lse (nheads, total_q) float32, None).
    """
    if torch_ops.tracing() and precision == "exact":
        if block_table is not None:
            raise NotImplementedError("flashattn: flash_attn_varlen_func with block_table under "
                                      "torch.compile / tracing (use flash_attn_with_kvcache)")
        return torch_ops.flash_attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                           max_seqlen_k, dropout_p, softmax_scale, causal,
                                           window_size, softcap, alibi_slopes, deterministic,
                                           return_attn_probs, seqused_k)
    params = _precision(_params(softmax_scale, causal, window_size, deterministic), precision,
                        q, k, v)
    sizes = lambda: (len(cu_seqlens_q) - 1, q.shape[1])
    if block_table is not None:
        if dropout_p != 0.0:
            raise NotImplementedError("flashattn: dropout_p with a paged cache (block_table): "
                                      "a paged cache runs forward only, without dropout")
        params = _modified(params, softcap, alibi_slopes, sizes)
        out, lse = _paged_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                 max_seqlen_k, block_table, seqused_k, params, return_attn_probs)
        if not _no_grad(q, k, v):
            out = _NoBackward.apply(out, q, k, v)
        return _result(out, lse, return_attn_probs)
    params, keep = _varlen(params, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           seqused_k)
    params = _dropout(_modified(params, softcap, alibi_slopes, sizes), dropout_p)
    if _no_grad(q, k, v):
        out, lse = _varlen_forward(_packed(q, "q"), _packed(k, "k"), _packed(v, "v"), params,
                                   want_lse=True)  # (see _SAME_BITS)
    else:
        out, lse = _FlashAttnVarlenFunc.apply(q, k, v, params, keep)
    return _result(out, lse, return_attn_probs,
                   _varlen_mask(params, cu_seqlens_q, cu_seqlens_k, q.shape[1], max_seqlen_q,
                                max_seqlen_k))


def flash_attn_varlen_qkvpacked_func(qkv: Tensor, cu_seqlens: Tensor, max_seqlen: int,
                                     dropout_p: float = 0.0,
                                     softmax_scale: Optional[float] = None, causal: bool = False,
                                     window_size: Window = (-1, -1), softcap: float = 0.0,
                                     alibi_slopes: Optional[Tensor] = None,
                                     deterministic: bool = False,
                                     return_attn_probs: bool = False,
                                     precision: str = "exact") -> Result:
    """qkv: (total, 3, nheads, headdim); cu_seqlens (batch + 1,) int32 for
    queries and keys alike. Otherwise as flash_attn_varlen_func."""
    if torch_ops.tracing() and precision == "exact":
        return torch_ops.flash_attn_varlen(*qkv.unbind(1), cu_seqlens, cu_seqlens, max_seqlen,
                                           max_seqlen, dropout_p, softmax_scale, causal,
                                           window_size, softcap, alibi_slopes, deterministic,
                                           return_attn_probs, None)
    params = _precision(_params(softmax_scale, causal, window_size, deterministic), precision,
                        qkv)
    params, keep = _varlen(params, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen)
    params = _dropout(_modified(params, softcap, alibi_slopes,
                                lambda: (keep[0].shape[0] - 1, qkv.shape[2])), dropout_p)
    if _no_grad(qkv):
        qkv = readable(qkv, "qkv", ndim=4)
        out, lse = _varlen_forward(*(x.unsqueeze(0) for x in qkv.unbind(1)), params,
                                   want_lse=True)  # (see _SAME_BITS)
    else:
        out, lse = _FlashAttnVarlenQKVPackedFunc.apply(qkv, params, keep)
    return _result(out, lse, return_attn_probs,
                   _varlen_mask(params, cu_seqlens, cu_seqlens, qkv.shape[2], max_seqlen, max_seqlen))


def flash_attn_varlen_kvpacked_func(q: Tensor, kv: Tensor, cu_seqlens_q: Tensor,
                                    cu_seqlens_k: Tensor, max_seqlen_q: int, max_seqlen_k: int,
                                    dropout_p: float = 0.0,
                                    softmax_scale: Optional[float] = None, causal: bool = False,
                                    window_size: Window = (-1, -1), softcap: float = 0.0,
                                    alibi_slopes: Optional[Tensor] = None,
                                    deterministic: bool = False,
                                    return_attn_probs: bool = False,
                                    precision: str = "exact") -> Result:
    """q: (total_q, nheads, headdim); kv: (total_k, 2, nheads_k, headdim).
    Otherwise as flash_attn_varlen_func."""
    if torch_ops.tracing() and precision == "exact":
        return torch_ops.flash_attn_varlen(q, *kv.unbind(1), cu_seqlens_q, cu_seqlens_k,
                                           max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale,
                                           causal, window_size, softcap, alibi_slopes,
                                           deterministic, return_attn_probs, None)
    params = _precision(_params(softmax_scale, causal, window_size, deterministic), precision,
                        q, kv)
    params, keep = _varlen(params, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    params = _dropout(_modified(params, softcap, alibi_slopes,
                                lambda: (keep[0].shape[0] - 1, q.shape[1])), dropout_p)
    if _no_grad(q, kv):
        kv = readable(kv, "kv", ndim=4)
        out, lse = _varlen_forward(_packed(q, "q"), *(x.unsqueeze(0) for x in kv.unbind(1)),
                                   params, want_lse=True)  # (see _SAME_BITS)
    else:
        out, lse = _FlashAttnVarlenKVPackedFunc.apply(q, kv, params, keep)
    return _result(out, lse, return_attn_probs,
                   _varlen_mask(params, cu_seqlens_q, cu_seqlens_k, q.shape[1], max_seqlen_q,
                                max_seqlen_k))


# ---- KV cache ---------------------------------------------------------------

def _rotary_tables(rotary_cos, rotary_sin, interleaved, k, leftpad):
    """decode's rotary argument and the float32 tables it points at."""
    if rotary_cos is None and rotary_sin is None:
        return None, ()
    if k is None:
        raise ValueError("flashattn: rotary_cos/rotary_sin rotate the new keys and q: give k "
                         "and v too (as FlashAttention-2 requires)")
    if not isinstance(rotary_cos, torch.Tensor) or not isinstance(rotary_sin, torch.Tensor):
        raise ValueError("give both rotary_cos and rotary_sin as tensors, or neither")
    return numpy_api._rotary(rotary_cos.detach().to(torch.float32).numpy(),
                             rotary_sin.detach().to(torch.float32).numpy(), interleaved)


def flash_attn_with_kvcache(q: Tensor, k_cache: Tensor, v_cache: Tensor,
                            k: Optional[Tensor] = None, v: Optional[Tensor] = None,
                            rotary_cos: Optional[Tensor] = None,
                            rotary_sin: Optional[Tensor] = None,
                            cache_seqlens: Union[int, Tensor, None] = None,
                            cache_batch_idx: Optional[Tensor] = None,
                            cache_leftpad: Optional[Tensor] = None,
                            block_table: Optional[Tensor] = None,
                            softmax_scale: Optional[float] = None, causal: bool = False,
                            window_size: Window = (-1, -1), softcap: float = 0.0,
                            rotary_interleaved: bool = True,
                            alibi_slopes: Optional[Tensor] = None, num_splits: int = 0,
                            return_softmax_lse: bool = False, *,
                            cu_seqlens_q: Optional[Tensor] = None,
                            max_seqlen_q: Optional[int] = None,
                            cu_seqlens_k_new: Optional[Tensor] = None,
                            k_scale: Union[float, Tensor, None] = None,
                            v_scale: Union[float, Tensor, None] = None
                            ) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """Inference decode against a KV cache (no autograd, as in flash_attn).

    q: (batch, seqlen_q, nheads, headdim). k_cache, v_cache: (batch_cache,
    seqlen_cache, nheads_k, headdim), or with block_table (batch,
    max_blocks_per_seq) int32 a paged pool (num_blocks, page_block_size,
    nheads_k, headdim). cache_seqlens: int or (batch,) int32/int64, the
    valid rows of each sequence (None: the whole cache). k, v: (batch,
    seqlen_new, nheads_k, headdim), written into the cache in place at
    cache_seqlens onward before the attention, which then covers them;
    cache_seqlens is not updated. causal and window_size are aligned to each
    sequence's own length. num_splits: 0 automatic, 1 no split.
    cache_batch_idx (batch,) int32: the cache entry of each sequence
    (contiguous caches). cache_leftpad (batch,) int32: the cache row each
    sequence's keys start at. rotary_cos, rotary_sin (seqlen_ro,
    rotary_dim / 2), with k and v: rotary embedding of k at positions
    cache_seqlens, cache_seqlens + 1, ... and of q at the same positions
    when causal or local, else all of q at cache_seqlens;
    rotary_interleaved pairs dimensions (0, 1), (2, 3)..., else (i,
    i + rotary_dim / 2) (GPT-NeoX). Any float dtype (used as float32).
    cu_seqlens_q (batch + 1,) int32, as FlashAttention-3's: q is packed
    (total_q, nheads, headdim), k and v (total_q, nheads_k, headdim), each
    sequence bringing (and appending) its own number of rows; out is then
    (total_q, nheads, headdim) and softmax_lse (nheads, total_q);
    max_seqlen_q must then be at least the longest. cu_seqlens_k_new, if
    given, must equal cu_seqlens_q (new keys packed differently from the
    queries are not supported). softcap and alibi_slopes ((nheads,) or
    (batch, nheads)) as flash_attn_func, ALiBi aligned to each sequence's
    own length.
    Quantised caches: k_cache and v_cache torch.int8, torch.float8_e4m3fn or
    torch.float8_e5m2 (one dtype for both), with k_scale and v_scale, each
    float32: (batch_cache, seqlen_cache, nheads_k) one per token (written
    for the appended rows), (nheads_k, headdim) one per channel, (nheads_k,)
    one per head, or a number (one for the whole cache, as vLLM's); element
    e of the cache stands for e * scale. quantize_kv_cache makes them from
    a float cache. Appended k and v are quantised into the cache (round to
    nearest even, saturating; per-token scales max|x| / the dtype's largest
    value).
    Returns out, or (out, softmax_lse) with return_softmax_lse.
    """
    if torch_ops.tracing():
        if k_scale is not None or v_scale is not None:
            raise NotImplementedError("flashattn: quantised KV caches under torch.compile / "
                                      "tracing")
        return torch_ops.with_kvcache(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin,
                                      cache_seqlens, cache_batch_idx, cache_leftpad, block_table,
                                      softmax_scale, causal, window_size, softcap,
                                      rotary_interleaved, alibi_slopes, num_splits,
                                      return_softmax_lse, cu_seqlens_q, max_seqlen_q,
                                      cu_seqlens_k_new)
    if _fast is not None and rotary_cos is None and rotary_sin is None \
            and cache_batch_idx is None and cache_leftpad is None and not softcap \
            and alibi_slopes is None and cu_seqlens_q is None and max_seqlen_q is None \
            and cu_seqlens_k_new is None and k_scale is None and v_scale is None:
        # a plain step in C (python/ext/fast.c); None: a call it leaves to _kvcache
        done = _fast.decode(q, k_cache, v_cache, k, v, cache_seqlens, block_table, softmax_scale,
                            causal, window_size, num_splits, return_softmax_lse)
        if type(done) is int:
            _lib.check(done, "flashattn_decode")
        if done is not None:
            return done if return_softmax_lse else done[0]
    return _kvcache(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens,
                    cache_batch_idx, cache_leftpad, block_table, softmax_scale, causal,
                    window_size, softcap, rotary_interleaved, alibi_slopes, num_splits,
                    return_softmax_lse, cu_seqlens_q, max_seqlen_q, cu_seqlens_k_new,
                    k_scale, v_scale)


def _scale_view(scale, cache, name):
    """A quantised cache's scale as the library's 4-D float32 view and its
    flashattn_scale_kind, from the shapes flash_attn_with_kvcache takes."""
    b, s, h, d = cache.shape
    if scale is None:
        raise ValueError("%s: a %s cache needs its scales" % (name, cache.dtype))
    if not isinstance(scale, torch.Tensor):
        try:
            scale = torch.tensor([float(scale)], dtype=torch.float32)
        except (TypeError, ValueError):
            raise ValueError("%s must be a float32 tensor or a number" % name) from None
    if not scale.is_cpu:
        raise ValueError("%s is on %s: flashattn computes on the CPU" % (name, scale.device))
    if scale.dtype != torch.float32:
        raise ValueError("%s must be float32, got %s" % (name, scale.dtype))
    shape = tuple(scale.shape)
    if scale.numel() == 1 and scale.dim() <= 1:
        return scale.reshape(1, 1, 1, 1).expand(1, 1, h, 1), _lib.SCALE_PER_HEAD
    if shape == (h,):
        return scale.reshape(1, 1, h, 1), _lib.SCALE_PER_HEAD
    if shape == (h, d):
        return scale.reshape(1, 1, h, d), _lib.SCALE_PER_CHANNEL
    if shape in ((b, s, h), (b, s, h, 1)):
        return scale.reshape(b, s, h, 1) if scale.dim() == 3 else scale, _lib.SCALE_PER_TOKEN
    raise _lib.bad_shape("%s has shape %s: for a cache %s it must be %s per token, %s per "
                         "channel, (%d,) per head or a number"
                         % (name, shape, tuple(cache.shape), (b, s, h), (h, d), h))


_QUANT_DTYPES = {"int8": torch.int8, "fp8_e4m3": torch.float8_e4m3fn,
                 "fp8_e5m2": torch.float8_e5m2}


def quantize_kv_cache(x: Tensor, dtype: Union[str, torch.dtype] = torch.int8,
                      scale: str = "token") -> Tuple[Tensor, Tensor]:
    """An 8-bit copy of a float K or V cache x (batch, seqlen, nheads_k,
    headdim) and its scales, for flash_attn_with_kvcache: dtype torch.int8,
    torch.float8_e4m3fn or torch.float8_e5m2 (or "int8", "fp8_e4m3",
    "fp8_e5m2"); scale "token" ((batch, seqlen, nheads_k), one per row),
    "channel" ((nheads_k, headdim)) or "head" ((nheads_k,)), the fixed kinds
    calibrated on x (max|x| over its rows / the dtype's largest value).
    Measured on Gaussian data and on K with outlier channels
    (docs/quantised-cache.md): per channel suits int8 K, per token the rest."""
    dtype = _QUANT_DTYPES.get(dtype, dtype)
    if dtype not in torch_tensors.CACHE_DTYPES:
        raise ValueError("dtype must be torch.int8, torch.float8_e4m3fn or torch.float8_e5m2")
    x = readable(x, "x")
    b, s, h, d = x.shape
    kinds = {"token": ((b, s, h), _lib.SCALE_PER_TOKEN),
             "channel": ((h, d), _lib.SCALE_PER_CHANNEL), "head": ((h,), _lib.SCALE_PER_HEAD)}
    if scale not in kinds:
        raise ValueError("scale must be 'token', 'channel' or 'head', got %r" % (scale,))
    shape, kind = kinds[scale]
    out = torch.empty(x.shape, dtype=dtype)
    scales = torch.empty(shape, dtype=torch.float32)
    view, _ = _scale_view(scales, out, "scale")
    _lib.quantize(pack, x, out, view, kind, 1, torch.get_num_threads())
    return out, scales


def _kvcache(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
             cache_leftpad, block_table, softmax_scale, causal, window_size, softcap,
             rotary_interleaved, alibi_slopes, num_splits, return_softmax_lse, cu_seqlens_q,
             max_seqlen_q, cu_seqlens_k_new, k_scale=None, v_scale=None):
    """flash_attn_with_kvcache, calling the library directly."""
    _lib.require("flashattn_decode", "flash_attn_with_kvcache")
    packed = cu_seqlens_q is not None
    q = readable(q, "q", ndim=3 if packed else 4)
    if (k is None) != (v is None):
        raise ValueError("give both k and v, or neither")
    if k is None:
        k_cache = readable(k_cache, "k_cache", cache=True)
        v_cache = readable(v_cache, "v_cache", cache=True)
        new = [None, None]
    else:
        k_cache = in_place(k_cache, "k_cache", cache=True)
        v_cache = in_place(v_cache, "v_cache", cache=True)
        new = [readable(k, "k", ndim=q.dim()), readable(v, "v", ndim=q.dim())]
    scales = None
    quantised = torch_tensors.CACHE_DTYPES
    if k_cache.dtype in quantised or v_cache.dtype in quantised:
        scales = (_scale_view(k_scale, k_cache, "k_scale"),
                  _scale_view(v_scale, v_cache, "v_scale"))
    elif k_scale is not None or v_scale is not None:
        raise ValueError("k_scale and v_scale go with an int8 or fp8 cache (this one is %s)"
                         % k_cache.dtype)
    batch = q.shape[0]
    if packed:
        cu_q = numpy_api._cu_seqlens(_int32_array(cu_seqlens_q, "cu_seqlens_q"), "cu_seqlens_q")
        batch = cu_q.shape[0] - 1
        numpy_api._check_max_seqlen(max_seqlen_q, numpy_api._lengths(cu_q), "max_seqlen_q")
        if cu_seqlens_k_new is not None and not np.array_equal(
                _int32_array(cu_seqlens_k_new, "cu_seqlens_k_new"), cu_q):
            raise NotImplementedError("flashattn: cu_seqlens_k_new must equal cu_seqlens_q: "
                                      "the new keys are packed like the queries")
        q = q.unsqueeze(0)
        new = [None if x is None else x.unsqueeze(0) for x in new]
    elif max_seqlen_q is not None or cu_seqlens_k_new is not None:
        raise ValueError("max_seqlen_q and cu_seqlens_k_new go with cu_seqlens_q")
    table, capacity = None, k_cache.shape[1]
    if block_table is not None:
        block_table = index_tensor(block_table, "block_table", 2, [torch.int32])
        if block_table.shape[0] != batch:
            raise _lib.bad_shape("block_table has %d rows for %d sequences"
                                 % (block_table.shape[0], batch))
        table = (block_table.data_ptr(), block_table.shape[1])
        capacity *= block_table.shape[1]
    if cache_seqlens is None or isinstance(cache_seqlens, int):
        fill = capacity if cache_seqlens is None else cache_seqlens
        cache_seqlens = torch.full((batch,), fill, dtype=torch.int64)
    lens = index_tensor(cache_seqlens, "cache_seqlens", 1, [torch.int32, torch.int64])
    if lens.shape[0] != batch:
        raise ValueError("cache_seqlens must have one length per batch entry (%d), got %d"
                         % (batch, lens.shape[0]))
    batch_idx, leftpad = (None if t is None else numpy_api._per_sequence(
        _int32_array(t, name), name, batch) for t, name in
        [(cache_batch_idx, "cache_batch_idx"), (cache_leftpad, "cache_leftpad")])
    rotary, _keep = _rotary_tables(rotary_cos, rotary_sin, rotary_interleaved, k, leftpad)
    params = _params(softmax_scale, causal, window_size, False, num_splits)
    if packed:
        params = _lib.with_varlen(params, batch, cu_q.ctypes.data)
    params = _modified(params, softcap, alibi_slopes, lambda: (batch, q.shape[2]))
    if packed:
        out = torch.empty(q.shape[1:3] + v_cache.shape[3:], dtype=q.dtype)
        lse = torch.empty((q.shape[2], q.shape[1]), dtype=torch.float32) \
            if return_softmax_lse else None
        out_view = out.unsqueeze(0)
    else:
        out = out_view = torch.empty(q.shape[:3] + v_cache.shape[3:], dtype=q.dtype)
        lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32) \
            if return_softmax_lse else None
    address = lambda a: None if a is None else a.ctypes.data
    _lib.decode(pack, q, k_cache, v_cache, *new, out_view,
                None if lse is None else lse.data_ptr(),
                (lens.data_ptr(), lens.dtype == torch.int64), table, params,
                batch_idx=address(batch_idx), leftpad=address(leftpad), rotary=rotary,
                scales=scales)
    return (out, lse) if return_softmax_lse else out


class _Untraced:
    """torch_ops' stand-in on a torch without torch.library.custom_op
    (before 2.4): nothing is traced through, every call is eager."""

    @staticmethod
    def tracing():
        return False


# The operators (torch.library) the functions above go through while torch
# traces them; imported last, as it reads this module's helpers.
try:
    from . import torch_ops  # noqa: E402
except AttributeError:  # torch.library.custom_op, torch.compiler.is_compiling: torch >= 2.4
    torch_ops = _Untraced()
