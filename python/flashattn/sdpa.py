"""torch.nn.functional.scaled_dot_product_attention for CPU tensors,
computed by the flashattn C library: the same arguments, shapes, masks and
broadcasting, differentiable for query, key and value.

Inputs are (batch, heads, seq, dim), as torch's, or without the batch (or
the heads) dimension. The mask is handed to the library by its strides
after torch's broadcast (expand: stride 0 on the broadcast dimensions), so
a (seq_q, seq_k) mask is never copied to (batch, heads, seq_q, seq_k).
A float mask that requires grad gets its gradient (the C library's
dbias). dropout_p drops as torch does (P times mask / (1 - p)), the mask
from the library's Philox stream, seeded from torch's CPU generator (so
torch.manual_seed reproduces it; the masks are not torch's own). What the
library cannot compute raises (NotImplementedError): float64 and other
dtypes, tensors off the CPU, more than four dimensions, a scale of 0 or
not finite. Inputs torch itself rejects raise RuntimeError, as torch does.

The one difference in results: a row that sees no key (a bool mask all
False on it, a float mask all -inf, or both) gets out = 0 and zero
gradients, as the library's rule is (O = 0, LSE = -inf). torch 2.5 and
later give the same on the CPU; earlier torch versions return NaN rows
there.
"""

import ctypes
import math
from typing import Optional

import torch

from . import _lib
from . import flash_attn_interface as _fai  # (its torch_ops: the operators)
from .torch_tensors import _DTYPES, pack, readable

__all__ = ["scaled_dot_product_attention"]


def _check(t, name):
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s must be a torch.Tensor, got %s" % (name, type(t).__name__))
    if not t.is_cpu:
        raise NotImplementedError("flashattn: %s is on %s: flashattn computes on the CPU; "
                                  "move it with .cpu()" % (name, t.device))
    if t.dtype not in _DTYPES:
        raise NotImplementedError("flashattn: %s: dtype %s is not supported (torch.float32, "
                                  "torch.float16, torch.bfloat16)" % (name, t.dtype))


def _broadcast(sizes, what):
    """torch's broadcast of one dimension's sizes."""
    n = max(sizes)
    if any(s != n and s != 1 for s in sizes):
        raise RuntimeError("scaled_dot_product_attention: the %s sizes %s of query, key and "
                           "value do not broadcast" % (what, tuple(sizes)))
    return n


def _expanded_mask(mask, query_dtype, shape):
    """attn_mask expanded to shape (batch, heads, seq_q, seq_k) as torch
    broadcasts it, after torch's checks."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError("attn_mask must be a torch.Tensor or None, got %s" % type(mask).__name__)
    if mask.dtype != torch.bool and mask.dtype != torch.float32 and mask.dtype != query_dtype:
        raise RuntimeError("Expected attn_mask dtype to be bool or float or to match query "
                           "dtype, but got attn_mask.dtype: %s and query.dtype: %s instead."
                           % (mask.dtype, query_dtype))
    if not mask.is_cpu:
        raise NotImplementedError("flashattn: attn_mask is on %s: flashattn computes on the CPU"
                                  % mask.device)
    if not 2 <= mask.dim() <= 4:
        # (torch too rejects a 1-D mask, with an IndexError)
        raise RuntimeError("attn_mask must have 2 to 4 dimensions, broadcastable to (batch, "
                           "heads, seq_q, seq_k) = %s; got shape %s" % (shape, tuple(mask.shape)))
    try:
        m = mask.expand(shape)
    except RuntimeError:
        raise RuntimeError("attn_mask of shape %s does not broadcast to the attention's "
                           "(batch, heads, seq_q, seq_k) = %s" % (tuple(mask.shape), shape)) \
            from None
    return m


def _scores(mask, query_dtype, shape):
    """attn_mask expanded (_expanded_mask) and its flashattn_scores: a bool
    mask (True attends) or a float bias, read through the expanded strides
    (0 where broadcast)."""
    m = _expanded_mask(mask, query_dtype, shape)
    strides = [st if n > 1 else 0 for n, st in zip(shape, m.stride())]
    code = _lib.F32 if m.dtype == torch.bool else _DTYPES[m.dtype]
    return m, _lib.Scores(m.data_ptr(), code, *shape, *strides)


def _run_forward(q, k, v, params, want_lse):
    """out (batch, heads, seq_q, dim_v) and the LSE (batch, heads, seq_q)
    (None unless wanted) of (batch, heads, seq, dim) q, k, v."""
    b, h, sq, _ = q.shape
    out = torch.empty((b, h, sq, v.shape[3]), dtype=q.dtype)
    lse = torch.empty((b, h, sq), dtype=torch.float32) if want_lse else None
    views = [readable(x.transpose(1, 2), name) for x, name in ((q, "query"), (k, "key"),
                                                                (v, "value"))]
    at = _lib.descriptors(pack, *views, out.transpose(1, 2))
    status = _lib.run(_lib.fwd_at, _lib.fwd_workspace_size_at, *at,
                      None if lse is None else lse.data_ptr(), ctypes.addressof(params))
    _lib.check(status, "flashattn_fwd")
    return out, lse


def _dbias_shape(mask, b, h, seq_k, heads_kv):
    """The layout the library writes a float mask's gradient in: the
    mask's own (batch, heads, seq_q) sizes where it sums them itself (over
    queries always, over heads of one kv-head), whole otherwise; the rest
    is summed here."""
    m4 = (1,) * (4 - mask.dim()) + tuple(mask.shape)
    heads = m4[1] if m4[1] == h or heads_kv == 1 else h
    return (b, heads, m4[2], seq_k), m4


class _SDPAFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask, sinks, params):
        out, lse = _run_forward(q, k, v, params, True)
        # mask (the caller's attn_mask) and sinks are saved so that autograd
        # reports an in-place change to them before the backward reads them.
        ctx.save_for_backward(q, k, v, out, lse, mask, sinks)
        ctx.params = params
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse, mask, sinks = ctx.saved_tensors
        return _backward(q, k, v, out, dout, lse, mask, sinks, ctx.params,
                         ctx.needs_input_grad[3], ctx.needs_input_grad[4]) + (None,)


def _backward(q, k, v, out, dout, lse, mask, sinks, params, want_dmask, want_dsinks):
    """(dq, dk, dv, the mask's gradient or None, the sinks' or None)."""
    _lib.require("flashattn_bwd", "the gradient of scaled_dot_product_attention")
    dq, dk, dv = (torch.empty(x.shape, dtype=x.dtype) for x in (q, k, v))
    views = [readable(x.transpose(1, 2), name) for x, name in (
        (q, "query"), (k, "key"), (v, "value"), (out, "out"), (dout, "grad_output"))]
    at = _lib.descriptors(pack, *views, *(x.transpose(1, 2) for x in (dq, dk, dv)))
    dmask, dbias, dsinks = None, None, None
    if want_dmask or want_dsinks:  # a copy, so the forward's params stay as they were
        params = _lib.Params.from_buffer_copy(params)
    if want_dmask:
        shape, m4 = _dbias_shape(mask, q.shape[0], q.shape[1], k.shape[2], k.shape[1])
        dbias = torch.empty(shape, dtype=torch.float32)
        scores = _lib.Scores(dbias.data_ptr(), _lib.F32, *shape, *dbias.stride())
        params.dbias = ctypes.addressof(scores)
    if want_dsinks:
        dsinks = torch.empty(q.shape[1], dtype=torch.float32)
        params.dsinks = dsinks.data_ptr()
    status = _lib.run(_lib.bwd_at, _lib.bwd_workspace_size_at, *at[:5], lse.data_ptr(),
                      *at[5:], ctypes.addressof(params))
    _lib.check(status, "flashattn_bwd")
    if dbias is not None:
        dmask = dbias.sum_to_size(m4).reshape(mask.shape).to(mask.dtype)
    if dsinks is not None:
        dsinks = dsinks.to(sinks.dtype)
    return dq, dk, dv, dmask, dsinks


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                 attn_mask: Optional[torch.Tensor] = None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: Optional[float] = None,
                                 enable_gqa: bool = False) -> torch.Tensor:
    """torch.nn.functional.scaled_dot_product_attention on CPU tensors.

    query (batch, heads_q, seq_q, dim), key and value (batch, heads_k,
    seq_k, dim), float32, float16 or bfloat16 (all one dtype); 3-D
    (heads, seq, dim) and 2-D (seq, dim) inputs too.
    Batch and head sizes broadcast as torch's (a size of 1 repeats);
    enable_gqa=True lets heads_q be a multiple of heads_k, query head h
    using key head h // (heads_q // heads_k).
    attn_mask: bool (True attends) or float (added to the scaled logits;
    float32 or query's dtype), broadcastable to (batch, heads_q, seq_q,
    seq_k); never copied. is_causal: query i sees keys j <= i (top-left,
    as torch, also when seq_q != seq_k); with attn_mask it is an error, as
    in torch. scale: None is 1/sqrt(dim).
    Returns (batch, heads_q, seq_q, dim) in query's dtype (the input's
    number of dimensions), differentiable for query, key and value.

    Difference from torch: a row that sees no key (all False in a bool
    mask, all -inf in a float one) gives out = 0 and zero gradients (the
    library's rule: O = 0, LSE = -inf). torch 2.5 and later do the same
    on the CPU; earlier torch versions return NaN rows.
    dropout_p drops P as torch does, with the library's own masks.
    Raises NotImplementedError for what the library cannot compute:
    float64 or other dtypes, tensors off the CPU, more than 4 dimensions, a scale of 0 or
    not finite.
    """
    return _sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def _sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, softcap=0.0,
          sinks=None):
    """scaled_dot_product_attention, and what the library adds to it (for
    flashattn.integrations): softcap > 0 caps the scaled logits to
    softcap * tanh(s / softcap) before the mask; sinks (heads_q,) a float
    tensor, a learned logit per query head that joins each row's softmax
    denominator (its gradient is computed when it requires grad)."""
    for t, name in ((query, "query"), (key, "key"), (value, "value")):
        _check(t, name)
    if not query.dtype == key.dtype == value.dtype:
        raise RuntimeError("Expected query, key, and value to have the same dtype, but got "
                           "query.dtype: %s key.dtype: %s and value.dtype: %s instead."
                           % (query.dtype, key.dtype, value.dtype))
    ndim = query.dim()
    if key.dim() != ndim or value.dim() != ndim:
        raise NotImplementedError("flashattn: query, key and value must have the same number "
                                  "of dimensions, got %d, %d, %d" % (ndim, key.dim(), value.dim()))
    if ndim > 4:
        raise NotImplementedError("flashattn: inputs of %d dimensions are not supported: "
                                  "(batch, heads, seq, dim) at most" % ndim)
    if ndim < 2:
        raise RuntimeError("scaled_dot_product_attention: query must have at least 2 "
                           "dimensions (seq, dim), got %d" % ndim)
    if attn_mask is not None and is_causal:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be "
                           "set when is_causal=True")
    if scale is not None:
        scale = float(scale)
        if scale == 0.0 or not math.isfinite(scale):
            raise NotImplementedError("flashattn: scale=%r is not supported (the library "
                                      "takes finite, nonzero scales)" % scale)
    if ndim == 4:
        q, k, v = query, key, value
    else:
        lead = (None,) * (4 - ndim)
        q, k, v = query[lead], key[lead], value[lead]
    seq_q, seq_k, dim = q.shape[2], k.shape[2], q.shape[3]
    if k.shape[3] != dim or v.shape[2] != seq_k:
        raise RuntimeError("scaled_dot_product_attention: key must be (.., seq_k, %d) and value "
                           "(.., seq_k, dim_v), got key %s, value %s"
                           % (dim, tuple(key.shape), tuple(value.shape)))
    batch = _broadcast([q.shape[0], k.shape[0], v.shape[0]], "batch")
    hq, hk, hv = q.shape[1], k.shape[1], v.shape[1]
    if enable_gqa:
        if hk != hv:
            raise NotImplementedError("flashattn: enable_gqa with key and value of different "
                                      "head counts (%d, %d) is not supported" % (hk, hv))
        if hk == 0 or hq % hk:
            raise RuntimeError("Number of heads in key and value must divide the number of "
                               "heads in query")
        heads = hq
    else:
        heads = _broadcast([hq, hk, hv], "heads")
        if not hk == hv == 1:   # (one key head for all query heads is MQA as it is)
            hk = hv = heads
    if q.shape[:2] != (batch, heads):
        q = q.expand(batch, heads, seq_q, dim)
    if k.shape[:2] != (batch, hk):
        k = k.expand(batch, hk, seq_k, dim)
    if v.shape[:2] != (batch, hv):
        v = v.expand(batch, hv, seq_k, v.shape[3])

    torch_ops = _fai.torch_ops
    if torch_ops.tracing():  # through the operators
        if attn_mask is not None:
            _expanded_mask(attn_mask, query.dtype, (batch, heads, seq_q, seq_k))
        if sinks is not None and (not isinstance(sinks, torch.Tensor) or sinks.shape != (heads,)):
            raise ValueError("sinks must be a tensor of one logit per query head (%d,)" % heads)
        out = torch_ops.sdpa(q, k, v, attn_mask, dropout_p, bool(is_causal), scale,
                             float(softcap or 0.0), sinks)
        return out[(0,) * (4 - ndim)] if ndim < 4 else out
    # (seeded from torch's CPU generator, as torch's own dropout is)
    seed = int(torch.randint(0, 2 ** 62, (1,)).item()) if dropout_p != 0.0 else 0
    params = _params(q, k, attn_mask, dropout_p, is_causal, scale, softcap, sinks, seed)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad or
                                    (attn_mask is not None and attn_mask.requires_grad) or
                                    (sinks is not None and sinks.requires_grad)):
        out = _SDPAFunc.apply(q, k, v, attn_mask, sinks, params)
    else:
        out, _ = _run_forward(q, k, v, params, False)
    return out[(0,) * (4 - ndim)] if ndim < 4 else out


def _params(q, k, attn_mask, dropout_p, is_causal, scale, softcap, sinks, seed):
    """The library's params for (batch, heads, seq, dim) q and k as _sdpa
    prepared them (expanded to the call's batch and heads)."""
    batch, heads, seq_q, seq_k = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    params = _lib.params(scale=scale, causal=bool(is_causal), align=_lib.ALIGN_TOP_LEFT,
                         num_threads=torch.get_num_threads())
    if dropout_p != 0.0:
        params = _lib.with_dropout(params, dropout_p, seed)
    modifiers = {}
    if softcap:
        modifiers["softcap"] = softcap
    sinks32 = None
    if sinks is not None:
        if not isinstance(sinks, torch.Tensor) or sinks.shape != (heads,):
            raise ValueError("sinks must be a tensor of one logit per query head (%d,)" % heads)
        sinks32 = sinks.detach().to(torch.float32).contiguous()
        modifiers["sinks"] = sinks32.data_ptr()
    if attn_mask is not None:
        mask, scores = _scores(attn_mask, q.dtype, (batch, heads, seq_q, seq_k))
        modifiers["mask" if mask.dtype == torch.bool else "bias"] = scores
    if modifiers:
        params = _lib.with_modifiers(params, **modifiers)
        params.keep = (params.keep, sinks32)
    return params
