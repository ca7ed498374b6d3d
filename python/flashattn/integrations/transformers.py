"""flashattn as a Hugging Face transformers attention implementation.

    import flashattn.integrations.transformers as fa_hf
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation=fa_hf.NAME)

(or model.set_attn_implementation(fa_hf.NAME)). Importing this module
registers the attention function (AttentionInterface) and its mask
function (AttentionMaskInterface: transformers' SDPA mask, a boolean
(batch, 1, q, kv) mask with padding, causality and sliding windows in it,
or None where the call is plainly causal or full), under NAME. The name
holds no "flash", "sdpa" or "flex": transformers gives names with those
words their own handling (hub kernels, torch's SDPA, flex attention).

What the models pass is computed by the C library in one call, on CPU
tensors: GQA/MQA without repeating the key heads, the mask (never
copied to the query heads), softcap (Gemma 2), attention sinks (gpt-oss's
s_aux, with their gradient), a float position bias, dropout in training.
Gradients flow to the queries, keys, values, sinks and a trainable bias.
output_attentions is not available (no probabilities are materialised):
it raises.
"""

import torch

from ..sdpa import _sdpa

__all__ = ["NAME", "attention_forward", "register"]

NAME = "fa_cpu"


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                      is_causal=None, softcap=None, s_aux=None, position_bias=None, **kwargs):
    """transformers' attention function signature: query (batch, heads,
    q_len, head_dim), key and value (batch, kv_heads, kv_len, head_dim)
    (the cache already updated), attention_mask a (batch, 1, q_len,
    kv_len) bool or float mask, or None. Returns (out (batch, q_len,
    heads, head_dim), None)."""
    if kwargs.get("output_attentions", False):
        raise NotImplementedError("flashattn: output_attentions=True needs the attention "
                                  "probabilities, which flashattn never materialises; use "
                                  "attn_implementation='eager' for them")
    mask = attention_mask
    if mask is not None and mask.dim() == 4:
        mask = mask[:, :, :, : key.shape[-2]]  # a static cache's mask runs past the keys
    if position_bias is not None:
        bias = position_bias[:, :, :, : key.shape[-2]]
        if mask is None:
            mask = bias
        elif mask.dtype == torch.bool:
            mask = bias.masked_fill(~mask, float("-inf"))
        else:
            mask = bias + mask
    # as transformers' SDPA: causal only where no mask says otherwise, for
    # several query rows (one decoding row sees every cached key)
    if is_causal is None:
        is_causal = getattr(module, "is_causal", True)
    is_causal = bool(query.shape[2] > 1 and mask is None and is_causal)
    out = _sdpa(query, key, value, mask, dropout, is_causal, scaling,
                enable_gqa=query.shape[1] != key.shape[1], softcap=softcap or 0.0, sinks=s_aux)
    return out.transpose(1, 2).contiguous(), None


def register():
    """Register NAME with transformers (done once, on import)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    AttentionInterface.register(NAME, attention_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)


register()
