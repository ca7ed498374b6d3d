"""flashattn's calls as PyTorch operators (torch.library custom ops in the
namespace "flashattn"), each with a fake implementation (shapes and dtypes
only) and, for the forwards, an autograd formula calling the backward
operator. torch.compile (fullgraph=True), torch.export and torch.jit.trace
record them as single operators instead of tracing into ctypes:

    torch.ops.flashattn.fwd         flash_attn_func's forward -> (out, lse)
    torch.ops.flashattn.bwd         its gradients -> (dq, dk, dv)
    torch.ops.flashattn.varlen_fwd  flash_attn_varlen_func's -> (out, lse)
    torch.ops.flashattn.varlen_bwd  its gradients
    torch.ops.flashattn.kvcache     flash_attn_with_kvcache (writes k and v
                                    into the caches in place) -> (out, lse)
    torch.ops.flashattn.sdpa_fwd    flashattn.scaled_dot_product_attention's
                                    (and the transformers backend's) -> (out, lse)
    torch.ops.flashattn.sdpa_bwd    its gradients, the mask's and the sinks' too

The functions of flashattn.flash_attn_interface and flashattn.sdpa use them while torch is
tracing (torch.compiler.is_compiling(), torch.jit.is_tracing()) and call
the library directly otherwise (an operator costs some microseconds of
dispatch, which small eager calls would feel); both give the same bits.
Under tracing, dropout draws its seed with torch.randint inside the graph,
so a compiled call's masks are reproducible by torch.manual_seed but are
not the eager call's; return_attn_probs with dropout (the mask, built in
Python) is not available there.
"""

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _lib
from . import flash_attn_interface as fai
from . import sdpa as _sdpa
from .torch_tensors import readable

__all__ = ["tracing"]


def tracing():
    """True while torch.compile / torch.export / torch.jit.trace record
    the call, when the flashattn functions go through the operators."""
    return torch.compiler.is_compiling() or torch.jit.is_tracing()


def _params(scale, causal, wl, wr, softcap, alibi, deterministic, dropout_p, seed, sizes,
            varlen=None):
    """The library's params for the options an operator received."""
    params = fai._params(scale, causal, (wl, wr), deterministic)
    if varlen is not None:
        params, keep = fai._varlen(params, *varlen)
    else:
        keep = None
    params = fai._modified(params, softcap, alibi, sizes)
    if dropout_p != 0.0:
        params = _lib.with_dropout(params, dropout_p, int(seed.item()))
    return params, keep


def _seed(dropout_p):
    """A dropout seed drawn inside the traced graph, or None."""
    return torch.randint(0, 2 ** 62, (1,), dtype=torch.int64) if dropout_p != 0.0 else None


# ---- dense ------------------------------------------------------------------

@torch.library.custom_op("flashattn::fwd", mutates_args=())
def fwd(q: Tensor, k: Tensor, v: Tensor, softmax_scale: Optional[float], causal: bool,
        window_left: int, window_right: int, softcap: float, alibi_slopes: Optional[Tensor],
        deterministic: bool, dropout_p: float, seed: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    params, _ = _params(softmax_scale, causal, window_left, window_right, softcap, alibi_slopes,
                        deterministic, dropout_p, seed, lambda: (q.shape[0], q.shape[2]))
    return fai._forward(readable(q, "q"), readable(k, "k"), readable(v, "v"), params)


@fwd.register_fake
def _(q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes,
      deterministic, dropout_p, seed):
    out = q.new_empty((q.shape[0], q.shape[1], q.shape[2], v.shape[3]))
    return out, q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)


@torch.library.custom_op("flashattn::bwd", mutates_args=())
def bwd(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
        softmax_scale: Optional[float], causal: bool, window_left: int, window_right: int,
        softcap: float, alibi_slopes: Optional[Tensor], deterministic: bool, dropout_p: float,
        seed: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor]:
    params, _ = _params(softmax_scale, causal, window_left, window_right, softcap, alibi_slopes,
                        deterministic, dropout_p, seed, lambda: (q.shape[0], q.shape[2]))
    q, k, v, out = readable(q, "q"), readable(k, "k"), readable(v, "v"), readable(out, "out")
    dq, dk, dv = (torch.empty(x.shape, dtype=x.dtype) for x in (q, k, v))
    fai._backward(q, k, v, out, dout, lse, dq, dk, dv, params)
    return dq, dk, dv


@bwd.register_fake
def _(dout, q, k, v, out, lse, *options):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _save(ctx, tensors, options):
    """Keep the inputs' tensors for the backward (the optional ones too:
    save_for_backward takes None) and the other options as they are."""
    ctx.save_for_backward(*tensors)
    ctx.options = options


def _fwd_setup(ctx, inputs, output):
    q, k, v, scale, causal, wl, wr, softcap, alibi, det, p, seed = inputs
    _save(ctx, (q, k, v, output[0], output[1], alibi, seed),
          (scale, causal, wl, wr, softcap, det, p))


def _fwd_backward(ctx, dout, _dlse):
    q, k, v, out, lse, alibi, seed = ctx.saved_tensors
    scale, causal, wl, wr, softcap, det, p = ctx.options
    dq, dk, dv = bwd(dout, q, k, v, out, lse, scale, causal, wl, wr, softcap, alibi, det, p, seed)
    return (dq, dk, dv) + (None,) * 9


fwd.register_autograd(_fwd_backward, setup_context=_fwd_setup)


def flash_attn(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
               deterministic, return_attn_probs):
    """flash_attn_func through the operators (while tracing)."""
    if return_attn_probs and dropout_p != 0.0:
        raise NotImplementedError("flashattn: return_attn_probs with dropout under "
                                  "torch.compile / tracing (the mask is built in Python)")
    out, lse = fwd(q, k, v, softmax_scale, causal, window_size[0], window_size[1], softcap,
                   alibi_slopes, deterministic, dropout_p, _seed(dropout_p))
    return (out, lse, None) if return_attn_probs else out


# ---- packed variable-length batches -----------------------------------------

@torch.library.custom_op("flashattn::varlen_fwd", mutates_args=())
def varlen_fwd(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
               max_seqlen_q: int, max_seqlen_k: int, seqused_k: Optional[Tensor],
               softmax_scale: Optional[float], causal: bool, window_left: int, window_right: int,
               softcap: float, alibi_slopes: Optional[Tensor], deterministic: bool,
               dropout_p: float, seed: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    params, keep = _params(softmax_scale, causal, window_left, window_right, softcap,
                           alibi_slopes, deterministic, dropout_p, seed,
                           lambda: (cu_seqlens_q.shape[0] - 1, q.shape[1]),
                           (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k))
    out, lse = fai._varlen_forward(fai._packed(q, "q"), fai._packed(k, "k"), fai._packed(v, "v"),
                                   params)
    del keep  # the int32 arrays params pointed at, alive until here
    return out, lse


@varlen_fwd.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, *options):
    out = q.new_empty((q.shape[0], q.shape[1], v.shape[2]))
    return out, q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)


@torch.library.custom_op("flashattn::varlen_bwd", mutates_args=())
def varlen_bwd(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
               cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, max_seqlen_q: int, max_seqlen_k: int,
               seqused_k: Optional[Tensor], softmax_scale: Optional[float], causal: bool,
               window_left: int, window_right: int, softcap: float,
               alibi_slopes: Optional[Tensor], deterministic: bool, dropout_p: float,
               seed: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor]:
    params, keep = _params(softmax_scale, causal, window_left, window_right, softcap,
                           alibi_slopes, deterministic, dropout_p, seed,
                           lambda: (cu_seqlens_q.shape[0] - 1, q.shape[1]),
                           (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k))
    q, k, v = fai._packed(q, "q"), fai._packed(k, "k"), fai._packed(v, "v")
    dq, dk, dv = (torch.empty(x.shape[1:], dtype=x.dtype) for x in (q, k, v))
    fai._varlen_backward(q, k, v, readable(out, "out", ndim=3), readable(dout, "dout", ndim=3),
                         lse, dq, dk, dv, params)
    del keep
    return dq, dk, dv


@varlen_bwd.register_fake
def _(dout, q, k, v, *options):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _varlen_setup(ctx, inputs, output):
    (q, k, v, cu_q, cu_k, max_q, max_k, used, scale, causal, wl, wr, softcap, alibi, det, p,
     seed) = inputs
    _save(ctx, (q, k, v, output[0], output[1], cu_q, cu_k, used, alibi, seed),
          (max_q, max_k, scale, causal, wl, wr, softcap, det, p))


def _varlen_backward(ctx, dout, _dlse):
    q, k, v, out, lse, cu_q, cu_k, used, alibi, seed = ctx.saved_tensors
    max_q, max_k, scale, causal, wl, wr, softcap, det, p = ctx.options
    dq, dk, dv = varlen_bwd(dout, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, used, scale, causal,
                            wl, wr, softcap, alibi, det, p, seed)
    return (dq, dk, dv) + (None,) * 14


varlen_fwd.register_autograd(_varlen_backward, setup_context=_varlen_setup)


def flash_attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                      softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                      return_attn_probs, seqused_k):
    """flash_attn_varlen_func (without block_table) through the operators."""
    if return_attn_probs and dropout_p != 0.0:
        raise NotImplementedError("flashattn: return_attn_probs with dropout under "
                                  "torch.compile / tracing (the mask is built in Python)")
    out, lse = varlen_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q),
                          int(max_seqlen_k), seqused_k, softmax_scale, causal, window_size[0],
                          window_size[1], softcap, alibi_slopes, deterministic, dropout_p,
                          _seed(dropout_p))
    return (out, lse, None) if return_attn_probs else out


# ---- KV cache -----------------------------------------------------------------

@torch.library.custom_op("flashattn::kvcache", mutates_args=("k_cache", "v_cache"))
def kvcache(q: Tensor, k_cache: Tensor, v_cache: Tensor, k: Optional[Tensor], v: Optional[Tensor],
            rotary_cos: Optional[Tensor], rotary_sin: Optional[Tensor],
            cache_seqlens: Optional[Tensor], cache_batch_idx: Optional[Tensor],
            cache_leftpad: Optional[Tensor], block_table: Optional[Tensor],
            softmax_scale: Optional[float], causal: bool, window_left: int, window_right: int,
            softcap: float, rotary_interleaved: bool, alibi_slopes: Optional[Tensor],
            num_splits: int, cu_seqlens_q: Optional[Tensor],
            max_seqlen_q: Optional[int]) -> Tuple[Tensor, Tensor]:
    return fai._kvcache(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens,
                        cache_batch_idx, cache_leftpad, block_table, softmax_scale, causal,
                        (window_left, window_right), softcap, rotary_interleaved, alibi_slopes,
                        num_splits, True, cu_seqlens_q, max_seqlen_q, None)


@kvcache.register_fake
def _(q, k_cache, v_cache, *options):
    if q.dim() == 3:  # packed queries (cu_seqlens_q)
        out = q.new_empty((q.shape[0], q.shape[1], v_cache.shape[3]))
        return out, q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)
    out = q.new_empty((q.shape[0], q.shape[1], q.shape[2], v_cache.shape[3]))
    return out, q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)


def with_kvcache(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                 cache_leftpad, block_table, softmax_scale, causal, window_size, softcap,
                 rotary_interleaved, alibi_slopes, num_splits, return_softmax_lse, cu_seqlens_q,
                 max_seqlen_q, cu_seqlens_k_new):
    """flash_attn_with_kvcache through the operator."""
    if cu_seqlens_k_new is not None:
        raise NotImplementedError("flashattn: cu_seqlens_k_new under torch.compile / tracing "
                                  "(leave it out: the new keys are packed like the queries)")
    if isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((q.shape[0],), cache_seqlens, dtype=torch.int64)
    out, lse = kvcache(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens,
                       cache_batch_idx, cache_leftpad, block_table, softmax_scale, causal,
                       window_size[0], window_size[1], softcap, rotary_interleaved, alibi_slopes,
                       num_splits, cu_seqlens_q, max_seqlen_q)
    return (out, lse) if return_softmax_lse else out


# ---- scaled_dot_product_attention ---------------------------------------------

def _sdpa_params(q, k, attn_mask, dropout_p, is_causal, scale, softcap, sinks, seed):
    return _sdpa._params(q, k, attn_mask, dropout_p, is_causal, scale, softcap, sinks,
                         int(seed.item()) if dropout_p != 0.0 else 0)


@torch.library.custom_op("flashattn::sdpa_fwd", mutates_args=())
def sdpa_fwd(q: Tensor, k: Tensor, v: Tensor, attn_mask: Optional[Tensor], dropout_p: float,
             is_causal: bool, scale: Optional[float], softcap: float, sinks: Optional[Tensor],
             seed: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    """(batch, heads, seq, dim) q, k, v as scaled_dot_product_attention
    prepared them (expanded to the call's batch and heads)."""
    params = _sdpa_params(q, k, attn_mask, dropout_p, is_causal, scale, softcap, sinks, seed)
    return _sdpa._run_forward(q, k, v, params, True)


@sdpa_fwd.register_fake
def _(q, k, v, attn_mask, *options):
    out = q.new_empty((q.shape[0], q.shape[1], q.shape[2], v.shape[3]))
    return out, q.new_empty(q.shape[:3], dtype=torch.float32)


@torch.library.custom_op("flashattn::sdpa_bwd", mutates_args=())
def sdpa_bwd(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
             attn_mask: Optional[Tensor], dropout_p: float, is_causal: bool,
             scale: Optional[float], softcap: float, sinks: Optional[Tensor],
             seed: Optional[Tensor], mask_grad: bool,
             sinks_grad: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(dq, dk, dv, dmask, dsinks); dmask and dsinks empty unless asked for."""
    params = _sdpa_params(q, k, attn_mask, dropout_p, is_causal, scale, softcap, sinks, seed)
    dq, dk, dv, dm, ds = _sdpa._backward(q, k, v, out, dout, lse, attn_mask, sinks, params,
                                         mask_grad, sinks_grad)
    return (dq, dk, dv, dm if mask_grad else q.new_empty(0),
            ds if sinks_grad else q.new_empty(0))


@sdpa_bwd.register_fake
def _(dout, q, k, v, out, lse, attn_mask, dropout_p, is_causal, scale, softcap, sinks, seed,
      mask_grad, sinks_grad):
    dm = attn_mask.new_empty(attn_mask.shape) if mask_grad else q.new_empty(0)
    ds = sinks.new_empty(sinks.shape) if sinks_grad else q.new_empty(0)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape), dm, ds


def _sdpa_setup(ctx, inputs, output):
    q, k, v, mask, p, causal, scale, softcap, sinks, seed = inputs
    _save(ctx, (q, k, v, output[0], output[1], mask, sinks, seed), (p, causal, scale, softcap))


def _sdpa_backward(ctx, dout, _dlse):
    q, k, v, out, lse, mask, sinks, seed = ctx.saved_tensors
    p, causal, scale, softcap = ctx.options
    mask_grad = mask is not None and ctx.needs_input_grad[3]
    sinks_grad = sinks is not None and ctx.needs_input_grad[8]
    dq, dk, dv, dm, ds = sdpa_bwd(dout, q, k, v, out, lse, mask, p, causal, scale, softcap, sinks,
                                  seed, mask_grad, sinks_grad)
    return (dq, dk, dv, dm if mask_grad else None, None, None, None, None,
            ds if sinks_grad else None, None)


sdpa_fwd.register_autograd(_sdpa_backward, setup_context=_sdpa_setup)


def sdpa(q, k, v, attn_mask, dropout_p, is_causal, scale, softcap, sinks):
    """scaled_dot_product_attention's computation through the operators."""
    return sdpa_fwd(q, k, v, attn_mask, dropout_p, is_causal, scale, softcap, sinks,
                    _seed(dropout_p))[0]
