"""flashattn.integrations.transformers: small models built from configs
with seeded random weights, run with attn_implementation=NAME against the
same weights on transformers' own implementations. Skipped (with the
reason) where torch or transformers is not installed.

Pass rules: float32 logits within 1e-4 of the reference's largest logit
(both compute the same attention to float32 rounding, in another order);
bfloat16 logits no further from the float32 reference than twice what
transformers' own implementation in bfloat16 is (as the C tests' rule for
16-bit dtypes); greedy generate() gives the same tokens; a training step's
gradients within 1e-4 relative of the reference's.
"""

import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", reason="transformers is not installed "
                                   "(an optional test dependency)")

from flashattn import _lib  # noqa: E402
import flashattn.integrations.transformers as fa_hf  # noqa: E402

pytestmark = pytest.mark.skipif(not _lib.has("flashattn_bwd"),
                                reason="the C library has no backward pass")

SMALL = dict(vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
             num_attention_heads=4, max_position_embeddings=128, initializer_range=0.3)


def pair(model_class, config, reference, dtype=torch.float32):
    """Two copies of one seeded model: on the reference implementation and
    on flashattn's (each with its own config: set_attn_implementation
    writes into it)."""
    torch.manual_seed(0)
    ref = model_class(copy.deepcopy(config)).to(dtype).eval()
    ours = model_class(copy.deepcopy(config)).to(dtype).eval()
    ours.load_state_dict(ref.state_dict())
    ref.set_attn_implementation(reference)
    ours.set_attn_implementation(fa_hf.NAME)
    assert ours.config._attn_implementation == fa_hf.NAME
    return ref, ours


def batch(b=3, n=21, vocab=96, pad=(0, 6, 13), seed=1):
    """Token ids and a left-padded attention mask (row r padded by pad[r])."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (b, n), generator=g)
    mask = torch.ones(b, n, dtype=torch.long)
    for r, p in enumerate(pad):
        mask[r, :p] = 0
    return ids, mask


def logits(model, ids, mask):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits.float()


def assert_close_f32(ref, got, mask):
    live = mask.bool()  # padding positions' logits are meaningless in both
    err = (ref - got).abs()[live].max()
    assert err <= 1e-4 * max(1.0, ref[live].abs().max()), float(err)


def count_calls(monkeypatch):
    """Count calls of flashattn's attention function (so a test cannot pass
    by running the reference twice)."""
    calls = [0]
    original = fa_hf.attention_forward

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    transformers.AttentionInterface.register(fa_hf.NAME, counted)
    monkeypatch.setattr(fa_hf, "attention_forward", counted)
    restore = lambda: transformers.AttentionInterface.register(fa_hf.NAME, original)
    return calls, restore


def llama(**kw):
    return transformers.LlamaConfig(**SMALL, num_key_value_heads=2, **kw)


def test_llama_gqa_padded_batch_and_generate(monkeypatch):
    ref, ours = pair(transformers.LlamaForCausalLM, llama(), "sdpa")
    ids, mask = batch()
    calls, restore = count_calls(monkeypatch)
    try:
        assert_close_f32(logits(ref, ids, mask), logits(ours, ids, mask), mask)
        assert calls[0] == 2  # one call per layer
        kw = dict(attention_mask=mask, max_new_tokens=12, do_sample=False, pad_token_id=0)
        assert torch.equal(ref.generate(ids, **kw), ours.generate(ids, **kw))
        assert calls[0] > 2 + 2 * 11  # prefill and every decoding step went through flashattn
    finally:
        restore()


def test_llama_static_cache_generate():
    ref, ours = pair(transformers.LlamaForCausalLM, llama(), "sdpa")
    ids, mask = batch(pad=(0, 4, 9))
    kw = dict(attention_mask=mask, max_new_tokens=8, do_sample=False, pad_token_id=0,
              cache_implementation="static")
    assert torch.equal(ref.generate(ids, **kw), ours.generate(ids, **kw))


def test_llama_bf16_within_twice_sdpa_error():
    ref32, _ = pair(transformers.LlamaForCausalLM, llama(), "sdpa")
    ref16, ours16 = pair(transformers.LlamaForCausalLM, llama(), "sdpa", torch.bfloat16)
    ids, mask = batch()
    truth = logits(ref32, ids, mask)
    live = mask.bool()
    err_ref = (logits(ref16, ids, mask) - truth).abs()[live].max()
    err_ours = (logits(ours16, ids, mask) - truth).abs()[live].max()
    assert err_ours <= 2 * err_ref, (float(err_ours), float(err_ref))


def test_llama_training_gradients():
    ref, ours = pair(transformers.LlamaForCausalLM, llama(attention_dropout=0.0), "sdpa")
    ids, mask = batch()
    grads = []
    for model in (ref, ours):
        model.train()
        loss = model(input_ids=ids, attention_mask=mask, labels=ids).loss
        loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for name, g in grads[0].items():
        err = (g - grads[1][name]).abs().max()
        assert err <= 1e-4 * max(1e-3, g.abs().max()), (name, float(err))


def test_mistral_sliding_window():
    config = transformers.MistralConfig(**SMALL, num_key_value_heads=1, sliding_window=7)
    ref, ours = pair(transformers.MistralForCausalLM, config, "sdpa")
    ids, mask = batch(n=30, pad=(0, 3, 8))
    assert_close_f32(logits(ref, ids, mask), logits(ours, ids, mask), mask)
    kw = dict(attention_mask=mask, max_new_tokens=10, do_sample=False, pad_token_id=0)
    assert torch.equal(ref.generate(ids, **kw), ours.generate(ids, **kw))


def test_gemma2_softcap_and_window():
    """transformers' SDPA refuses softcap: eager is the reference."""
    config = transformers.Gemma2Config(**SMALL, num_key_value_heads=2, head_dim=16,
                                       sliding_window=6, attn_logit_softcapping=2.0,
                                       final_logit_softcapping=None, query_pre_attn_scalar=16)
    ref, ours = pair(transformers.Gemma2ForCausalLM, config, "eager")
    ids, mask = batch(n=25)
    assert_close_f32(logits(ref, ids, mask), logits(ours, ids, mask), mask)
    kw = dict(attention_mask=mask, max_new_tokens=8, do_sample=False, pad_token_id=0)
    assert torch.equal(ref.generate(ids, **kw), ours.generate(ids, **kw))


def test_bert_encoder_padded_batch():
    config = transformers.BertConfig(vocab_size=96, hidden_size=64, intermediate_size=96,
                                     num_hidden_layers=2, num_attention_heads=4,
                                     max_position_embeddings=64, initializer_range=0.3,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    ref, ours = pair(transformers.BertModel, config, "sdpa")
    ids, mask = batch(n=19, pad=(0, 5, 11))
    mask = mask.flip(1)  # BERT pads on the right
    with torch.no_grad():
        a = ref(input_ids=ids, attention_mask=mask).last_hidden_state
        b = ours(input_ids=ids, attention_mask=mask).last_hidden_state
    assert_close_f32(a, b, mask)


def test_output_attentions_raises():
    _, ours = pair(transformers.LlamaForCausalLM, llama(), "sdpa")
    ids, mask = batch()
    with pytest.raises(NotImplementedError, match="output_attentions"):
        ours(input_ids=ids, attention_mask=mask, output_attentions=True)


def test_sinks_and_their_gradient():
    """gpt-oss's s_aux through the attention function, against an explicit
    softmax with the sink as an extra column."""
    torch.manual_seed(2)
    q = torch.randn(2, 4, 9, 16, dtype=torch.float64)
    k, v = torch.randn(2, 2, 9, 16, dtype=torch.float64), torch.randn(2, 2, 9, 16, dtype=torch.float64)
    sinks = torch.randn(4, dtype=torch.float64)
    mask = torch.ones(2, 1, 9, 9, dtype=torch.bool).tril()
    xs = [x.float().requires_grad_() for x in (q, k, v, sinks)]
    module = torch.nn.Module()
    out, _ = fa_hf.attention_forward(module, *xs[:3], mask, scaling=0.25, s_aux=xs[3])
    # float64 reference
    ys = [x.clone().requires_grad_() for x in (q, k, v, sinks)]
    kk, vv = ys[1].repeat_interleave(2, 1), ys[2].repeat_interleave(2, 1)
    s = (ys[0] @ kk.transpose(-1, -2) * 0.25).masked_fill(~mask, float("-inf"))
    s = torch.cat([s, ys[3].view(1, 4, 1, 1).expand(2, 4, 9, 1)], dim=-1)
    ref = (torch.softmax(s, -1)[..., :9] @ vv).transpose(1, 2)
    assert (out.double() - ref).abs().max() <= 1e-5
    dout = torch.randn(ref.shape, dtype=torch.float64)
    got = torch.autograd.grad(out, xs, dout.float())
    want = torch.autograd.grad(ref, ys, dout)
    for g, w in zip(got, want):
        assert (g.double() - w).abs().max() <= 1e-4 * max(1.0, w.abs().max())


def test_llama_compiles_in_one_graph():
    """The backend under torch.compile(fullgraph=True): through the
    scaled_dot_product_attention operators, the same logits as eager."""
    _, ours = pair(transformers.LlamaForCausalLM, llama(), "sdpa")
    ids, mask = batch()
    run = lambda ids, mask: ours(input_ids=ids, attention_mask=mask, use_cache=False).logits
    with torch.no_grad():
        eager = run(ids, mask)
        compiled = torch.compile(run, fullgraph=True, backend="aot_eager")(ids, mask)
    assert torch.equal(eager, compiled)
