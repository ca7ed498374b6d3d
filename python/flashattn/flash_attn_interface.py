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
  - return_attn_probs returns (out, softmax_lse, None): the attention
    probabilities S are never materialised (flash_attn too returns them
    only for testing, with dropout);
  - options the library lacks (dropout_p > 0, alibi_slopes, softcap != 0,
    varlen, rotary embeddings) raise NotImplementedError, never ignored.
The library uses torch.get_num_threads() threads, as torch's own CPU ops do.
"""

import torch

from . import _lib
from ._lib import ALIGN_BOTTOM_RIGHT
from .torch_tensors import describe, float_ptr, readable

__all__ = [
    "flash_attn_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_kvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_with_kvcache",
]


def _unsupported(dropout_p=0.0, softcap=0.0, alibi_slopes=None):
    if dropout_p != 0.0:
        raise NotImplementedError("flashattn: dropout_p=%r is not supported (the C library "
                                  "has no dropout yet); pass dropout_p=0.0" % (dropout_p,))
    if softcap != 0.0:
        raise NotImplementedError("flashattn: softcap=%r is not supported (the C library has "
                                  "no logit soft-capping yet); pass softcap=0.0" % (softcap,))
    if alibi_slopes is not None:
        raise NotImplementedError("flashattn: alibi_slopes is not supported (the C library "
                                  "has no ALiBi bias yet); pass alibi_slopes=None")


def _params(softmax_scale, causal, window_size, deterministic):
    return _lib.new_params(scale=softmax_scale, causal=causal, window_size=window_size,
                           align=ALIGN_BOTTOM_RIGHT, num_threads=torch.get_num_threads(),
                           deterministic=deterministic)


def _forward(q, k, v, params):
    """out and softmax_lse (batch, nheads, seqlen_q) for readable q, k, v."""
    out = torch.empty(q.shape[:3] + v.shape[3:], dtype=q.dtype)
    lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
    tq, tk, tv, to = describe(q), describe(k), describe(v), describe(out)
    status = _lib.lib.flashattn_fwd(tq, tk, tv, to, float_ptr(lse), params, None, 0)
    _lib.check(status, "flashattn_fwd")
    return out, lse


def _backward(q, k, v, out, dout, lse, dq, dk, dv, params):
    """Fill dq, dk, dv (tensors the library can write) from the saved forward."""
    _lib.require("flashattn_bwd", "the gradient of flash_attn_func")
    inputs = [describe(t) for t in (q, k, v, out, readable(dout, "dout"))]
    grads = [describe(t) for t in (dq, dk, dv)]
    status = _lib.lib.flashattn_bwd(*inputs, float_ptr(lse), *grads, params, None, 0)
    _lib.check(status, "flashattn_bwd")


class _FlashAttnFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, params):
        q, k, v = readable(q, "q"), readable(k, "k"), readable(v, "v")
        out, lse = _forward(q, k, v, params)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.params = params
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        _backward(q, k, v, out, dout, lse, dq, dk, dv, ctx.params)
        return dq, dk, dv, None


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
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        qkv, out, lse = ctx.saved_tensors
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
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, kv, out, lse = ctx.saved_tensors
        dq, dkv = torch.empty_like(q), torch.empty_like(kv)
        _backward(q, *kv.unbind(2), out, dout, lse, dq, *dkv.unbind(2), ctx.params)
        return dq, dkv, None


def _result(out, lse, return_attn_probs):
    return (out, lse, None) if return_attn_probs else out


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                    window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                    deterministic=False, return_attn_probs=False):
    """q: (batch, seqlen_q, nheads, headdim); k, v: (batch, seqlen_k,
    nheads_k, headdim) with nheads a multiple of nheads_k (MQA/GQA).
    causal aligns the mask bottom-right: query i sees keys
    j <= i + seqlen_k - seqlen_q. window_size=(left, right), -1 unbounded.
    softmax_scale defaults to 1/sqrt(headdim). deterministic makes the
    backward pass bit-reproducible.
    Returns out (batch, seqlen_q, nheads, headdim), or with
    return_attn_probs (out, softmax_lse (batch, nheads, seqlen_q) float32, None).
    """
    _unsupported(dropout_p, softcap, alibi_slopes)
    params = _params(softmax_scale, causal, window_size, deterministic)
    out, lse = _FlashAttnFunc.apply(q, k, v, params)
    return _result(out, lse, return_attn_probs)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False,
                              window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                              deterministic=False, return_attn_probs=False):
    """qkv: (batch, seqlen, 3, nheads, headdim). Otherwise as flash_attn_func."""
    _unsupported(dropout_p, softcap, alibi_slopes)
    params = _params(softmax_scale, causal, window_size, deterministic)
    out, lse = _FlashAttnQKVPackedFunc.apply(qkv, params)
    return _result(out, lse, return_attn_probs)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False,
                             window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                             deterministic=False, return_attn_probs=False):
    """q: (batch, seqlen_q, nheads, headdim); kv: (batch, seqlen_k, 2,
    nheads_k, headdim). Otherwise as flash_attn_func."""
    _unsupported(dropout_p, softcap, alibi_slopes)
    params = _params(softmax_scale, causal, window_size, deterministic)
    out, lse = _FlashAttnKVPackedFunc.apply(q, kv, params)
    return _result(out, lse, return_attn_probs)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False,
                           window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """Packed variable-length batches (cu_seqlens): not available yet."""
    raise NotImplementedError(
        "flashattn: flash_attn_varlen_func is not supported yet: the C library has no "
        "variable-length (cu_seqlens) attention; call flash_attn_func per sequence")


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None,
                            rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, block_table=None, softmax_scale=None,
                            causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0,
                            return_softmax_lse=False):
    """Decode against a KV cache: not available yet."""
    raise NotImplementedError(
        "flashattn: flash_attn_with_kvcache needs the C library's KV-cache decode "
        "(issue 5), which this build does not have")
