"""flashattn.scaled_dot_product_attention against torch's own, on the same
bool and float masks and broadcasts: forward and gradients, GQA (enable_gqa
and MQA by broadcasting), scale, is_causal with seq_q != seq_k (top-left),
3-D and 2-D inputs, and the one documented difference (rows that see no
key). Skipped where torch is not installed.

Pass rules as in test_torch.py, with torch's SDPA in float64 (autograd for
the gradients) as truth and the NumPy plain float32 implementation (the
same mask as its mask or bias, rounded once to the dtype) setting the
bounds: out within 1e-5 (float32) or twice the plain error (16-bit); each
gradient within max(2 * plain error, 1e-6 * the largest magnitude of the
three).
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import attn_reference as ref  # noqa: E402
import flashattn  # noqa: E402
from flashattn import _lib  # noqa: E402
from test_torch import DTYPES, max_err  # noqa: E402

sdpa = flashattn.scaled_dot_product_attention

# (batch, heads_q, heads_kv, seq_q, seq_k, dim, enable_gqa)
SHAPES = [
    (2, 4, 4, 17, 45, 32, False),   # seq_q < seq_k
    (1, 6, 2, 40, 21, 16, True),    # GQA, seq_q > seq_k
    (2, 4, 1, 9, 70, 64, False),    # MQA by torch's broadcast of one key head
]
MASKS = ["none", "causal", "bool", "bool_batch", "bool_keys", "bool_full", "float",
         "float_keys", "float_full"]


def make(shape, dtype, seed=0):
    b, hq, hk, sq, sk, d, _ = shape
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g).to(dtype)
    return mk(b, hq, sq, d), mk(b, hk, sk, d), mk(b, hk, sk, d)


def make_mask(kind, shape, dtype, seed=1):
    """attn_mask of a kind: bool ones attend (30% hidden at random; keys:
    the last third of the keys hidden per batch entry), float ones add
    N(0, 1) (full: also -inf on 20%), in query's dtype or float32."""
    b, hq, _, sq, sk, _, _ = shape
    g = torch.Generator().manual_seed(seed)
    rand = lambda *s: torch.rand(*s, generator=g)
    if kind == "bool":
        return rand(sq, sk) > 0.3
    if kind == "bool_batch":
        return rand(b, 1, sq, sk) > 0.3
    if kind == "bool_keys":
        m = torch.ones(b, 1, 1, sk, dtype=torch.bool)
        m[..., sk - sk // 3:] = False
        return m
    if kind == "bool_full":
        return rand(b, hq, sq, sk) > 0.3
    if kind == "float":
        return torch.randn(sq, sk, generator=g).to(dtype)
    if kind == "float_keys":
        return torch.randn(b, 1, 1, sk, generator=g)
    assert kind == "float_full"
    m = torch.randn(b, hq, sq, sk, generator=g)
    return m.masked_fill(rand(b, hq, sq, sk) < 0.2, float("-inf")).to(dtype)


def ref_options(mask, is_causal, scale):
    """attn_reference's options for an SDPA call on (b, h, s, d) tensors."""
    kw = dict(causal=is_causal, align="top-left", softmax_scale=scale)
    if mask is not None:
        m = mask.detach().double().numpy() if mask.is_floating_point() else mask.numpy()
        kw["mask" if mask.dtype == torch.bool else "bias"] = m
    return kw


def bshd(*tensors):
    return [t.detach().double().transpose(1, 2).numpy() for t in tensors]


def bhsd(a, dtype):
    return torch.from_numpy(np.ascontiguousarray(a.transpose(0, 2, 1, 3))).to(dtype)


def as_problem(q, k, v, enable_gqa):
    """q, k, v as the reference computes them: 4-D, query and key batches
    and query heads expanded as torch broadcasts them (key heads 1 or a
    divisor of the query's stay: the reference groups them)."""
    q, k, v = (x.reshape((1,) * (4 - x.dim()) + tuple(x.shape)) for x in (q, k, v))
    batch = max(q.shape[0], k.shape[0])
    heads = q.shape[1] if enable_gqa else max(q.shape[1], k.shape[1])
    return (q.expand(batch, heads, *q.shape[2:]), k.expand(batch, *k.shape[1:]),
            v.expand(batch, *v.shape[1:]))


def reduced(g, like):
    """A gradient of an expanded input summed back to the input's shape."""
    shape = (1,) * (4 - like.dim()) + tuple(like.shape)
    for axis in (0, 1):
        if shape[axis] == 1 and g.shape[axis] > 1:
            g = g.sum(axis, keepdim=True)
    return g.reshape(like.shape)


def grads(fn, inputs, dout):
    inputs = [x.detach().clone().requires_grad_() for x in inputs]
    out = fn(*inputs)
    out.backward(dout)
    return out.detach(), [x.grad for x in inputs]


def check_call(q, k, v, dtype, attn_mask=None, is_causal=False, scale=None, enable_gqa=False,
               seed=2):
    """Forward (with and without autograd) and gradients against torch's
    SDPA in float64, under the module's rules."""
    kw = dict(attn_mask=attn_mask, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
    mask64 = attn_mask.double() if attn_mask is not None and attn_mask.is_floating_point() \
        else attn_mask
    with torch.no_grad():   # (for the shape of dout: batches and heads broadcast)
        shape = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                               **dict(kw, attn_mask=mask64)).shape
    dout = torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)
    expected, expected_grads = grads(lambda *x: F.scaled_dot_product_attention(
        *x, **dict(kw, attn_mask=mask64)), [x.double() for x in (q, k, v)], dout.double())
    out, got = grads(lambda *x: sdpa(*x, **kw), (q, k, v), dout)
    with torch.no_grad():
        free = sdpa(q, k, v, **kw)
    rkw = ref_options(attn_mask, is_causal, scale)
    problem = as_problem(q, k, v, enable_gqa)
    plain_out = bhsd(ref.attention(*bshd(*problem), dtype=np.float32, plain=True, **rkw)[0],
                     dtype).reshape(expected.shape)
    bound = 1e-5 if dtype == torch.float32 else 2 * max_err(plain_out, expected)
    for o in (out, free):
        assert o.dtype == dtype and o.shape == expected.shape
        err = max_err(o, expected)
        assert err <= bound, "out: max abs error %.3g > bound %.3g" % (err, bound)
    dout4, out4 = (x.reshape(problem[0].shape[:3] + x.shape[-1:]) for x in (dout, out))
    plain_grads = [reduced(torch.from_numpy(np.ascontiguousarray(g.transpose(0, 2, 1, 3))), x)
                   .to(dtype) for g, x in zip(ref.attention_backward(
                       *bshd(dout4, *problem), dtype=np.float32, plain=True, out=bshd(out4)[0],
                       **rkw), (q, k, v))]
    scale_g = max(e.abs().max().item() for e in expected_grads)
    for name, g, e, p in zip("qkv", got, expected_grads, plain_grads):
        assert g.dtype == dtype and g.shape == e.shape, name
        gbound = max(2 * max_err(p, e), 1e-6 * scale_g)
        err = max_err(g, e)
        assert err <= gbound, "d%s: max abs error %.3g > bound %.3g" % (name, err, gbound)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", MASKS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:6])))
def test_matches_torch_sdpa(shape, kind, dtype):
    q, k, v = make(shape, dtype)
    mask = None if kind in ("none", "causal") else make_mask(kind, shape, dtype)
    check_call(q, k, v, dtype, attn_mask=mask, is_causal=kind == "causal", enable_gqa=shape[6])


def test_scale():
    shape = (1, 2, 2, 20, 30, 16, False)
    q, k, v = make(shape, torch.float32, seed=3)
    check_call(q, k, v, torch.float32, attn_mask=make_mask("bool", shape, None), scale=0.3)
    check_call(q, k, v, torch.float32, is_causal=True, scale=0.45)


@pytest.mark.parametrize("seq_q,seq_k", [(5, 30), (30, 5), (1, 9), (9, 1)])
def test_is_causal_is_top_left(seq_q, seq_k):
    q, k, v = make((2, 3, 3, seq_q, seq_k, 16, False), torch.float32, seed=4)
    check_call(q, k, v, torch.float32, is_causal=True)
    out = sdpa(q, k, v, is_causal=True)   # query 0 sees key 0 alone
    assert max_err(out[:, :, 0], v[:, :, 0]) <= 1e-6


def test_inputs_without_batch_or_heads_and_broadcast_batches():
    q, k, v = make((2, 4, 4, 11, 13, 16, False), torch.float32, seed=5)
    mask = make_mask("bool", (2, 4, 4, 11, 13, 16, False), None)
    check_call(q[0], k[0], v[0], torch.float32, attn_mask=mask)              # (h, s, d)
    check_call(q[0, 0], k[0, 0], v[0, 0], torch.float32, is_causal=True)     # (s, d)
    check_call(q, k[:1], v[:1], torch.float32, attn_mask=mask[None, None])   # key batch 1
    check_call(q[:, :1], k, v, torch.float32)                                # query heads 1
    check_call(q, k[:, :2], v[:, :2], torch.float32, enable_gqa=True, attn_mask=mask)


def test_non_contiguous_inputs_and_mask_views():
    q, k, v = make((2, 4, 4, 19, 27, 32, False), torch.float32, seed=6)
    bshd_memory = [x.transpose(1, 2).contiguous().transpose(1, 2) for x in (q, k, v)]
    mask = torch.rand(27, 19, generator=torch.Generator().manual_seed(7)).t() > 0.3
    assert not mask.is_contiguous()
    check_call(*bshd_memory, torch.float32, attn_mask=mask)
    bias = torch.randn(2, 4, 27, 19).transpose(2, 3)[:, :1]
    check_call(q, k, v, torch.float32, attn_mask=bias)


def test_masks_are_handed_over_by_strides_without_copies():
    from flashattn.sdpa import _scores
    shape = (2, 4, 9, 13)
    mask = torch.ones(9, 13, dtype=torch.bool)
    expanded, t = _scores(mask, torch.float32, shape)
    assert t.data == mask.data_ptr() and (t.batch, t.heads, t.seq_q, t.seq_k) == shape
    assert (t.stride_batch, t.stride_head, t.stride_q, t.stride_k) == (0, 0, 13, 1)
    keys = torch.zeros(2, 1, 1, 13, dtype=torch.bfloat16)
    expanded, t = _scores(keys, torch.bfloat16, shape)
    assert t.data == keys.data_ptr() and t.dtype == _lib.BF16
    assert (t.stride_batch, t.stride_head, t.stride_q, t.stride_k) == (13, 0, 0, 1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rows_that_see_no_key_give_zero(dtype):
    """The documented difference: a row that sees no key gets out = 0 and
    zero gradients (the library's O = 0, LSE = -inf). torch 2.5 and later
    return 0 there too on the CPU; earlier versions return NaN. Either
    way the other rows must agree."""
    shape = (1, 2, 2, 8, 12, 16, False)
    q, k, v = make(shape, dtype, seed=8)
    mask = torch.rand(1, 2, 8, 12, generator=torch.Generator().manual_seed(9)) > 0.3
    mask[0, 0, 2] = False
    mask[0, :, 5] = False
    bias = torch.zeros(1, 2, 8, 12, dtype=dtype).masked_fill(~mask, float("-inf"))
    for attn_mask in (mask, bias):
        out, (dq, dk, dv) = grads(lambda *x: sdpa(*x, attn_mask=attn_mask), (q, k, v),
                                  torch.ones(q.shape, dtype=dtype))
        assert torch.all(out[0, 0, 2] == 0) and torch.all(out[0, :, 5] == 0)
        assert torch.all(dq[0, 0, 2] == 0) and torch.all(dq[0, :, 5] == 0)
        theirs = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                attn_mask=attn_mask if attn_mask.dtype ==
                                                torch.bool else attn_mask.double())
        for row in (theirs[0, 0, 2], theirs[0, :, 5]):
            assert torch.all(row == 0) or torch.all(torch.isnan(row)), row
        seen = torch.ones(1, 2, 8, dtype=torch.bool)
        seen[0, 0, 2] = seen[0, :, 5] = False
        assert max_err(out[seen], theirs[seen]) <= (1e-5 if dtype == torch.float32 else 1e-2)


@pytest.mark.parametrize("call,error,message", [
    (lambda q, k, v, m: sdpa(q, k, v, attn_mask=m, is_causal=True), RuntimeError,
     "should not be set when is_causal"),
    (lambda q, k, v, m: sdpa(q.double(), k.double(), v.double()), NotImplementedError,
     "torch.float64 is not supported"),
    (lambda q, k, v, m: sdpa(q, k.half(), v), RuntimeError, "same dtype"),
    (lambda q, k, v, m: sdpa(q, k, v, attn_mask=m.double()), RuntimeError,
     "Expected attn_mask dtype"),
    (lambda q, k, v, m: sdpa(q, k, v, attn_mask=m.to(torch.int64)), RuntimeError,
     "Expected attn_mask dtype"),
    (lambda q, k, v, m: sdpa(q, k, v, attn_mask=m[:3]), RuntimeError, "does not broadcast"),
    (lambda q, k, v, m: sdpa(q, k, v, attn_mask=m[0]), RuntimeError, "2 to 4 dimensions"),
    (lambda q, k, v, m: sdpa(q[None], k[None], v[None]), NotImplementedError,
     "5 dimensions"),
    (lambda q, k, v, m: sdpa(q, k[:, :3], v[:, :3], enable_gqa=True), RuntimeError,
     "must divide"),
    (lambda q, k, v, m: sdpa(q, k[:, :2], v[:, :2]), RuntimeError, "do not broadcast"),
    (lambda q, k, v, m: sdpa(q, k, v, scale=0.0), NotImplementedError, "scale=0.0"),
    (lambda q, k, v, m: sdpa(q, k.numpy(), v), TypeError, "torch.Tensor"),
])
def test_what_it_cannot_do_raises(call, error, message):
    q, k, v = make((2, 4, 4, 5, 7, 16, False), torch.float32, seed=10)
    m = torch.ones(5, 7, dtype=torch.bool)
    with pytest.raises(error, match=message):
        call(q, k, v, m)


def test_mask_requiring_grad_is_fine_without_autograd():
    q, k, v = make((1, 2, 2, 6, 9, 16, False), torch.float32, seed=11)
    bias = torch.randn(6, 9, requires_grad=True)
    with torch.no_grad():
        out = sdpa(q, k, v, attn_mask=bias)
        expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                  attn_mask=bias.double())
    assert max_err(out, expected) <= 1e-5


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("shape,heads_kv", [
    ((7, 9), 4),            # broadcast over batch and heads: summed here
    ((2, 1, 7, 9), 1),      # over the heads of one kv-head: summed by the library
    ((1, 4, 1, 9), 2),      # over queries (by the library) and the batch
    ((2, 4, 7, 9), 2),      # whole
])
def test_float_mask_gradient(shape, heads_kv, dtype):
    """A float mask that requires grad gets dL/dmask, against torch's SDPA
    in float64: the logits' gradient summed over the mask's broadcast
    dimensions. Its error is the rounding of O (which D = rowsum(dO * O)
    reads) times the largest sum |dO * O|, plus f32's, per element summed."""
    g = torch.Generator().manual_seed(21)
    q = torch.randn(2, 4, 7, 16, generator=g).to(dtype)
    k = torch.randn(2, heads_kv, 9, 16, generator=g).to(dtype)
    v = torch.randn(2, heads_kv, 9, 16, generator=g).to(dtype)
    bias = torch.randn(shape, generator=g).to(dtype).requires_grad_()
    dout = torch.randn(2, 4, 7, 16, generator=g).to(dtype)
    out = sdpa(q, k, v, attn_mask=bias, enable_gqa=heads_kv != 4)
    out.backward(dout)
    b64 = bias.detach().double().requires_grad_()
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=b64,
                                         enable_gqa=heads_kv != 4)
    ref.backward(dout.double())
    assert bias.grad.shape == bias.shape and bias.grad.dtype == dtype
    summed = 2 * 4 * 7 * 9 / bias.numel()
    dmax = (dout.double() * out.detach().double()).abs().sum(-1).max().item()
    eps = 1e-6 if dtype == torch.float32 else 2e-3
    bound = (eps * dmax + 1e-5 * (1 + b64.grad.abs().max().item())) * summed
    if dtype == torch.float16:   # and the rounding of the gradient to f16 itself
        bound += 1e-3 * b64.grad.abs().max().item()
    err = (bias.grad.double() - b64.grad).abs().max().item()
    assert err <= bound, "dmask max err %.3g > %.3g" % (err, bound)


def test_mask_changed_before_the_backward_is_an_error():
    q, k, v = make((1, 2, 2, 6, 9, 16, False), torch.float32, seed=12)
    q.requires_grad_()
    mask = torch.ones(6, 9, dtype=torch.bool)
    out = sdpa(q, k, v, attn_mask=mask)
    mask[0, 0] = False   # the backward would read the new mask
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
