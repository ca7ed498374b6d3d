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
    varlen; in flash_attn_with_kvcache rotary_cos/sin, cache_batch_idx,
    cache_leftpad) raise NotImplementedError, never ignored.
The library uses torch.get_num_threads() threads, as torch's own CPU ops do.
"""

import ctypes

import torch

from . import _lib
from ._lib import ALIGN_BOTTOM_RIGHT
from .torch_tensors import in_place, index_tensor, pack, readable

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
    if _no_grad(q, k, v):
        out, lse = _forward(readable(q, "q"), readable(k, "k"), readable(v, "v"), params,
                            want_lse=return_attn_probs)
    else:
        out, lse = _FlashAttnFunc.apply(q, k, v, params)
    return _result(out, lse, return_attn_probs)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False,
                              window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                              deterministic=False, return_attn_probs=False):
    """qkv: (batch, seqlen, 3, nheads, headdim). Otherwise as flash_attn_func."""
    _unsupported(dropout_p, softcap, alibi_slopes)
    params = _params(softmax_scale, causal, window_size, deterministic)
    if _no_grad(qkv):
        out, lse = _forward(*readable(qkv, "qkv", ndim=5).unbind(2), params,
                            want_lse=return_attn_probs)
    else:
        out, lse = _FlashAttnQKVPackedFunc.apply(qkv, params)
    return _result(out, lse, return_attn_probs)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False,
                             window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                             deterministic=False, return_attn_probs=False):
    """q: (batch, seqlen_q, nheads, headdim); kv: (batch, seqlen_k, 2,
    nheads_k, headdim). Otherwise as flash_attn_func."""
    _unsupported(dropout_p, softcap, alibi_slopes)
    params = _params(softmax_scale, causal, window_size, deterministic)
    if _no_grad(q, kv):
        out, lse = _forward(readable(q, "q"), *readable(kv, "kv", ndim=5).unbind(2), params,
                            want_lse=return_attn_probs)
    else:
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
    """Inference decode against a KV cache (no autograd, as in flash_attn).

    q: (batch, seqlen_q, nheads, headdim). k_cache, v_cache: (batch,
    seqlen_cache, nheads_k, headdim), or with block_table (batch,
    max_blocks_per_seq) int32 a paged pool (num_blocks, page_block_size,
    nheads_k, headdim). cache_seqlens: int or (batch,) int32/int64, the
    valid rows of each sequence (None: the whole cache). k, v: (batch,
    seqlen_new, nheads_k, headdim), written into the cache in place at
    cache_seqlens onward before the attention, which then covers them;
    cache_seqlens is not updated. causal and window_size are aligned to each
    sequence's own length. num_splits: 0 automatic, 1 no split.
    Returns out, or (out, softmax_lse) with return_softmax_lse.
    """
    _unsupported(softcap=softcap, alibi_slopes=alibi_slopes)
    for arg, value, what in [("rotary_cos", rotary_cos, "rotary embeddings"),
                             ("rotary_sin", rotary_sin, "rotary embeddings"),
                             ("cache_batch_idx", cache_batch_idx, "cache batch indices"),
                             ("cache_leftpad", cache_leftpad, "left-padded caches")]:
        if value is not None:
            raise NotImplementedError("flashattn: %s is not supported (the C library has no %s "
                                      "yet); pass %s=None" % (arg, what, arg))
    _lib.require("flashattn_decode", "flash_attn_with_kvcache")
    q = readable(q, "q")
    if (k is None) != (v is None):
        raise ValueError("give both k and v, or neither")
    if k is None:
        k_cache, v_cache = readable(k_cache, "k_cache"), readable(v_cache, "v_cache")
        new = [None, None]
    else:
        k_cache, v_cache = in_place(k_cache, "k_cache"), in_place(v_cache, "v_cache")
        new = [readable(k, "k"), readable(v, "v")]
    table, capacity = None, k_cache.shape[1]
    if block_table is not None:
        block_table = index_tensor(block_table, "block_table", 2, [torch.int32])
        table = (block_table.data_ptr(), block_table.shape[1])
        capacity *= block_table.shape[1]
    if cache_seqlens is None or isinstance(cache_seqlens, int):
        fill = capacity if cache_seqlens is None else cache_seqlens
        cache_seqlens = torch.full((q.shape[0],), fill, dtype=torch.int64)
    lens = index_tensor(cache_seqlens, "cache_seqlens", 1, [torch.int32, torch.int64])
    if lens.shape[0] != q.shape[0]:
        raise ValueError("cache_seqlens must have one length per batch entry (%d), got %d"
                         % (q.shape[0], lens.shape[0]))
    params = _params(softmax_scale, causal, window_size, False, num_splits)
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32) \
        if return_softmax_lse else None
    _lib.decode(pack, q, k_cache, v_cache, *new, out, None if lse is None else lse.data_ptr(),
                (lens.data_ptr(), lens.dtype == torch.int64), table, params)
    return (out, lse) if return_softmax_lse else out
