"""The flash_attn functions under torch.compile, torch.export and
torch.jit.trace, through the torch.library operators (flashattn.torch_ops).
Skipped where torch is not installed.

A compiled or exported call runs the same C calls as the eager one, so
outputs and gradients must be bit for bit the eager ones; fullgraph=True
and torch._dynamo.explain check that nothing breaks the graph, and
torch.library.opcheck that each operator's fake implementation, schema and
autograd registration agree with what it computes.
"""

import pytest

torch = pytest.importorskip("torch")

from flashattn import _lib  # noqa: E402
from flashattn import (flash_attn_func, flash_attn_kvpacked_func,  # noqa: E402
                       flash_attn_qkvpacked_func, flash_attn_varlen_func,
                       flash_attn_varlen_qkvpacked_func, flash_attn_with_kvcache)

pytestmark = pytest.mark.skipif(not _lib.has("flashattn_bwd"),
                                reason="the C library has no backward pass")


def inputs(b=2, sq=37, sk=53, hq=4, hk=2, d=32, dtype=torch.float32, seed=0, grad=True):
    g = torch.Generator().manual_seed(seed)
    make = lambda s, h: torch.randn(b, s, h, d, generator=g).to(dtype).requires_grad_(grad)
    return make(sq, hq), make(sk, hk), make(sk, hk)


def grads(out, xs, seed=1):
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed)).to(out.dtype)
    return torch.autograd.grad(out, xs, dout)


def assert_same(a, b):
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert torch.equal(x, y), float((x.float() - y.float()).abs().max())


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("options", [
    dict(causal=True),
    dict(window_size=(8, 3), softcap=5.0),
    dict(alibi_slopes=torch.tensor([0.5, 0.25, 0.125, 0.0625]), deterministic=True),
])
def test_compiled_equals_eager(backend, options):
    q, k, v = inputs()
    f = lambda q, k, v: flash_attn_func(q, k, v, **options)
    out = f(q, k, v)
    compiled = torch.compile(f, fullgraph=True, backend=backend)
    got = compiled(q, k, v)
    assert_same([out], [got])
    assert_same(grads(out, (q, k, v)), grads(got, (q, k, v)))


def test_no_graph_break_in_a_model():
    """A small attention block (projections, reshape, the call) compiles to
    one graph, forward and backward, and trains like the eager one."""
    torch.manual_seed(3)
    proj = torch.nn.Linear(64, 3 * 64)

    def block(x):
        q, k, v = proj(x).view(x.shape[0], x.shape[1], 3, 4, 16).unbind(2)
        return flash_attn_func(q, k, v, causal=True).reshape(x.shape).sum()

    x = torch.randn(2, 24, 64)
    explained = torch._dynamo.explain(block)(x)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    eager = torch.autograd.grad(block(x), proj.weight)
    compiled = torch.autograd.grad(torch.compile(block, fullgraph=True)(x), proj.weight)
    assert_same(eager, compiled)


def test_packed_variants_compile():
    q, k, v = inputs(sk=37, hk=4, grad=False)
    qkv = torch.stack([q, k, v], dim=2).requires_grad_()
    f = lambda qkv: flash_attn_qkvpacked_func(qkv, causal=True)
    assert_same([f(qkv)], [torch.compile(f, fullgraph=True, backend="aot_eager")(qkv)])
    out = torch.compile(f, fullgraph=True, backend="aot_eager")(qkv)
    assert_same(grads(f(qkv), qkv), grads(out, qkv))
    kv = torch.stack([k, v], dim=2)
    g = lambda q, kv: flash_attn_kvpacked_func(q, kv, softcap=3.0)
    assert_same([g(q, kv)], [torch.compile(g, fullgraph=True, backend="aot_eager")(q, kv)])


def test_return_attn_probs_compiles():
    q, k, v = inputs(grad=False)
    f = lambda q, k, v: flash_attn_func(q, k, v, return_attn_probs=True)[:2]
    assert_same(f(q, k, v), torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v))


def test_dropout_compiles_and_its_gradient_matches_its_masks():
    """Under compile the seed is drawn in the graph: not the eager masks,
    but the compiled forward and backward use the same one (the gradient
    equals an eager call's with the seed it drew, which the test recovers
    from the operator's inputs by running the graph's ops by hand)."""
    q, k, v = inputs()
    f = lambda q, k, v: flash_attn_func(q, k, v, dropout_p=0.25)
    torch.manual_seed(5)
    out = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v)
    torch.manual_seed(5)
    out2 = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v)
    assert_same([out], [out2])  # torch.manual_seed reproduces compiled masks
    nodrop = flash_attn_func(q, k, v)
    assert not torch.equal(out, nodrop)
    # the backward with that seed: torch.ops.flashattn.fwd / bwd directly
    seed = torch.tensor([12345], dtype=torch.int64)
    o, lse = torch.ops.flashattn.fwd(q, k, v, None, False, -1, -1, 0.0, None, False, 0.25, seed)
    dout = torch.randn(o.shape)
    dq = torch.autograd.grad(o, q, dout)[0]
    dq2 = torch.ops.flashattn.bwd(dout, q, k, v, o, lse, None, False, -1, -1, 0.0, None, False,
                                  0.25, seed)[0]
    assert_same([dq], [dq2])
    # dynamo re-raises it as its own error type, with the message
    with pytest.raises(Exception, match="return_attn_probs with dropout"):
        torch.compile(lambda q, k, v: flash_attn_func(q, k, v, dropout_p=0.25,
                                                      return_attn_probs=True),
                      fullgraph=True, backend="aot_eager")(q, k, v)


def test_opcheck_dense():
    q, k, v = inputs(sq=9, sk=11, d=16)
    alibi = torch.tensor([0.5, 0.25, 0.125, 0.0625])
    for args in [(q, k, v, None, True, -1, -1, 0.0, None, False, 0.0, None),
                 (q, k, v, 0.3, False, 4, 2, 2.0, alibi, True, 0.0, None),
                 (q, k, v, None, False, -1, -1, 0.0, None, False, 0.5,
                  torch.tensor([7], dtype=torch.int64))]:
        torch.library.opcheck(torch.ops.flashattn.fwd, args)


def varlen_inputs(lens_q=(5, 0, 17, 9), lens_k=(7, 3, 17, 20), hq=4, hk=2, d=16, seed=2):
    g = torch.Generator().manual_seed(seed)
    cu = lambda lens: torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32)
    q = torch.randn(sum(lens_q), hq, d, generator=g).requires_grad_()
    k = torch.randn(sum(lens_k), hk, d, generator=g).requires_grad_()
    v = torch.randn(sum(lens_k), hk, d, generator=g).requires_grad_()
    return q, k, v, cu(lens_q), cu(lens_k), max(lens_q), max(lens_k)


@pytest.mark.parametrize("causal", [False, True])
def test_varlen_compiled_equals_eager(causal):
    q, k, v, cu_q, cu_k, mq, mk = varlen_inputs()
    f = lambda q, k, v: flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk, causal=causal,
                                               softcap=4.0)
    out = f(q, k, v)
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v)
    assert_same([out], [got])
    assert_same(grads(out, (q, k, v)), grads(got, (q, k, v)))
    torch.library.opcheck(torch.ops.flashattn.varlen_fwd,
                          (q, k, v, cu_q, cu_k, mq, mk, None, None, causal, -1, -1, 0.0, None,
                           False, 0.0, None))


def test_varlen_qkvpacked_compiles():
    q, k, v, cu, _, m, _ = varlen_inputs(lens_k=(5, 0, 17, 9), hk=4)
    qkv = torch.stack([q, k, v], dim=1).detach()
    f = lambda qkv: flash_attn_varlen_qkvpacked_func(qkv, cu, m, causal=True)
    assert_same([f(qkv)], [torch.compile(f, fullgraph=True, backend="aot_eager")(qkv)])


@pytest.mark.parametrize("paged", [False, True])
def test_kvcache_compiled_appends_as_eager(paged):
    g = torch.Generator().manual_seed(4)
    b, cap, hk, hq, d = 3, 32, 2, 4, 16
    lens = torch.tensor([0, 5, 20], dtype=torch.int32)
    if paged:
        kc = torch.randn(12, 8, hk, d, generator=g)
        table = torch.tensor([[3, 0, 7, 1], [2, 9, 4, 5], [11, 6, 8, 10]], dtype=torch.int32)
    else:
        kc, table = torch.randn(b, cap, hk, d, generator=g), None
    vc = torch.randn(kc.shape, generator=g)
    q = torch.randn(b, 2, hq, d, generator=g)
    kn, vn = torch.randn(b, 2, hk, d, generator=g), torch.randn(b, 2, hk, d, generator=g)

    def step(q, kc, vc, kn, vn):
        return flash_attn_with_kvcache(q, kc, vc, kn, vn, cache_seqlens=lens, block_table=table,
                                       causal=True, return_softmax_lse=True)

    k1, v1, k2, v2 = kc.clone(), vc.clone(), kc.clone(), vc.clone()
    out = step(q, k1, v1, kn, vn)
    got = torch.compile(step, fullgraph=True, backend="aot_eager")(q, k2, v2, kn, vn)
    assert_same(out, got)
    assert_same([k1, v1], [k2, v2])  # the append happened, in place, under compile too
    assert not torch.equal(k1, kc)


class Attention(torch.nn.Module):
    def forward(self, q, k, v):
        return flash_attn_func(q, k, v, causal=True)


def test_export_runs_the_operator():
    q, k, v = inputs(grad=False)
    exported = torch.export.export(Attention(), (q, k, v))
    assert "flashattn.fwd" in str(exported.graph)
    q2, k2, v2 = inputs(seed=9, grad=False)
    assert_same([exported.module()(q2, k2, v2)], [flash_attn_func(q2, k2, v2, causal=True)])


def test_jit_trace_records_the_operator():
    """torch.jit.trace on autograd.Functions over ctypes recorded the
    output as a constant; through the operator it runs on new inputs."""
    q, k, v = inputs(grad=False)
    traced = torch.jit.trace(Attention(), (q, k, v), check_trace=False)
    q2, k2, v2 = inputs(seed=9, grad=False)
    assert_same([traced(q2, k2, v2)], [flash_attn_func(q2, k2, v2, causal=True)])


def test_sdpa_drop_in_compiles_traces_and_exports():
    """flashattn.scaled_dot_product_attention through its operators: with a
    float mask that gets a gradient, and with softcap and sinks (what the
    transformers backend passes)."""
    import flashattn
    from flashattn.sdpa import _sdpa
    q, k, v = (x.detach().transpose(1, 2).requires_grad_() for x in inputs())
    mask = torch.randn(q.shape[2], k.shape[2]).requires_grad_()
    f = lambda q, k, v, m: flashattn.scaled_dot_product_attention(q, k, v, attn_mask=m,
                                                                  enable_gqa=True)
    out = f(q, k, v, mask)
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v, mask)
    assert_same([out], [got])
    assert_same(grads(out, (q, k, v, mask)), grads(got, (q, k, v, mask)))
    sinks = torch.randn(4).requires_grad_()
    band = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril(16)
    g = lambda q, k, v, s: _sdpa(q, k, v, band, 0.0, False, 0.2, True, softcap=3.0, sinks=s)
    out = g(q, k, v, sinks)
    got = torch.compile(g, fullgraph=True)(q, k, v, sinks)
    assert_same([out], [got])
    assert_same(grads(out, (q, k, v, sinks)), grads(got, (q, k, v, sinks)))
    torch.library.opcheck(torch.ops.flashattn.sdpa_fwd,
                          (q, k, v, mask, 0.0, False, None, 0.0, sinks, None))
    fixed = mask.detach()
    traced = torch.jit.trace(lambda q, k, v: f(q, k, v, fixed),
                             tuple(x.detach() for x in (q, k, v)), check_trace=False)
    q2, k2, v2 = (x.transpose(1, 2) for x in inputs(seed=7, grad=False))
    assert_same([traced(q2, k2, v2)], [f(q2, k2, v2, fixed)])


def test_public_torch_functions_have_type_hints():
    import inspect
    import typing

    import flashattn
    for name in flashattn._TORCH_NAMES + ("scaled_dot_product_attention",):
        fn = getattr(flashattn, name)
        hints = typing.get_type_hints(fn)
        params = inspect.signature(fn).parameters
        assert set(params) <= set(hints) and "return" in hints, (name, set(params) - set(hints))


def test_a_torch_without_custom_ops_still_runs_eagerly():
    """torch before 2.4 has no torch.library.custom_op: the functions then
    run eagerly as before (a subprocess with it removed)."""
    import subprocess
    import sys
    code = ("import torch; del torch.library.custom_op\n"
            "import flashattn\n"
            "from flashattn import flash_attn_interface as f\n"
            "assert not f.torch_ops.tracing()\n"
            "q = torch.randn(1, 5, 2, 8)\n"
            "assert flashattn.flash_attn_func(q, q, q, causal=True).shape == q.shape\n"
            "t = q.transpose(1, 2)\n"
            "assert flashattn.scaled_dot_product_attention(t, t, t).shape == t.shape\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
