"""flashattn as a Hugging Face transformers attention implementation: a
small Llama (grouped-query attention) built from a config with random
weights, so nothing is downloaded, generating greedily from a padded batch
with attn_implementation="sdpa" and with flashattn's; the tokens must be
the same. With a real checkpoint it is one argument:

    import flashattn.integrations.transformers as fa_hf
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation=fa_hf.NAME)

    python examples/transformers_generate.py
"""

import copy

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import flashattn.integrations.transformers as fa_hf

config = LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                     num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=512)
torch.manual_seed(0)
reference = LlamaForCausalLM(copy.deepcopy(config)).eval()
model = LlamaForCausalLM(copy.deepcopy(config)).eval()
model.load_state_dict(reference.state_dict())
reference.set_attn_implementation("sdpa")
model.set_attn_implementation(fa_hf.NAME)

prompts = torch.randint(3, 256, (3, 24))
mask = torch.ones_like(prompts)
mask[1, :7] = mask[2, :15] = 0  # left padding: prompts of 24, 17 and 9 tokens
kw = dict(attention_mask=mask, max_new_tokens=16, do_sample=False, pad_token_id=0)
ours = model.generate(prompts, **kw)
theirs = reference.generate(prompts, **kw)
print("generated with %s:" % fa_hf.NAME)
for row in ours[:, prompts.shape[1]:].tolist():
    print("  ", row)
assert torch.equal(ours, theirs), "flashattn's tokens differ from SDPA's"
print("the same tokens as attn_implementation='sdpa': ok")
