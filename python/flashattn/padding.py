"""Between padded batches and packed sequences, as flash_attn.bert_padding:
unpad_input packs the valid tokens of a (batch, seqlen, ...) batch for the
varlen functions, pad_input puts their results back. Both take NumPy arrays
or torch tensors (differentiable: autograd flows through the gathers), and
return the same kind; torch is only used when given a tensor.
"""

import sys
from typing import Any

import numpy as np


def _torch_of(x):
    """The torch module when x is a torch tensor, else None (never imports
    torch: a caller holding a tensor has imported it already)."""
    torch = sys.modules.get("torch")
    return torch if torch is not None and isinstance(x, torch.Tensor) else None


def unpad_input(hidden_states: Any, attention_mask: Any, unused_mask: Any = None) -> tuple:
    """Pack the tokens that attention_mask marks valid.

    hidden_states: (batch, seqlen, ...); attention_mask: (batch, seqlen),
    bool or integer, nonzero for a valid token; unused_mask (optional, the
    same shape): tokens that are packed too but not attended to, as
    FlashAttention-2's (allocated room past each sequence's used keys: the
    seqused_k of the varlen functions). Returns
        packed       (total, ...): the selected tokens, sequence by sequence
        indices      (total,) int64: their positions in the flattened
                     (batch * seqlen) input, for pad_input
        cu_seqlens   (batch + 1,) int32: the packed sequences' offsets
        max_seqlen   int: the longest packed sequence
        seqused      (batch,) int32: each sequence's valid tokens (the
                     attention_mask counts; the packed lengths when no
                     unused_mask is given)
    """
    torch = _torch_of(hidden_states)
    if torch is not None:
        return _unpad_torch(torch, hidden_states, attention_mask, unused_mask)
    x = np.asarray(hidden_states)
    used = np.asarray(attention_mask) != 0
    if x.ndim < 2 or used.shape != x.shape[:2]:
        raise ValueError("attention_mask must be (batch, seqlen) = %s, got %s"
                         % (x.shape[:2], used.shape))
    kept = used if unused_mask is None else used | (np.asarray(unused_mask) != 0)
    lengths = kept.sum(axis=1, dtype=np.int32)
    indices = np.flatnonzero(kept).astype(np.int64)
    cu_seqlens = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=cu_seqlens[1:])
    packed = x.reshape((-1,) + x.shape[2:])[indices]
    return (packed, indices, cu_seqlens, int(lengths.max(initial=0)),
            used.sum(axis=1, dtype=np.int32))


def _unpad_torch(torch, x, attention_mask, unused_mask):
    if x.dim() < 2 or tuple(attention_mask.shape) != tuple(x.shape[:2]):
        raise ValueError("attention_mask must be (batch, seqlen) = %s, got %s"
                         % (tuple(x.shape[:2]), tuple(attention_mask.shape)))
    used = attention_mask != 0
    kept = used if unused_mask is None else used | (unused_mask != 0)
    lengths = kept.sum(dim=1, dtype=torch.int32)
    indices = torch.nonzero(kept.flatten(), as_tuple=False).flatten()
    cu_seqlens = torch.zeros(len(lengths) + 1, dtype=torch.int32, device=lengths.device)
    torch.cumsum(lengths, dim=0, dtype=torch.int32, out=cu_seqlens[1:])
    packed = x.reshape((-1,) + tuple(x.shape[2:]))[indices]   # differentiable gather
    max_seqlen = int(lengths.max().item()) if lengths.numel() else 0
    return packed, indices, cu_seqlens, max_seqlen, used.sum(dim=1, dtype=torch.int32)


def pad_input(hidden_states: Any, indices: Any, batch: int, seqlen: int) -> Any:
    """The inverse of unpad_input: packed (total, ...) rows put back at
    `indices` of a zero (batch, seqlen, ...) batch."""
    torch = _torch_of(hidden_states)
    if torch is not None:
        rest = tuple(hidden_states.shape[1:])
        out = hidden_states.new_zeros((batch * seqlen,) + rest)
        # out of place, so autograd takes the gradient back through the scatter
        out = out.index_put((torch.as_tensor(indices, device=out.device),), hidden_states)
        return out.reshape((batch, seqlen) + rest)
    x = np.asarray(hidden_states)
    out = np.zeros((batch * seqlen,) + x.shape[1:], x.dtype)
    out[np.asarray(indices)] = x
    return out.reshape((batch, seqlen) + x.shape[1:])
