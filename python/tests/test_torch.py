"""The flash_attn interface against torch: forward against
torch.nn.functional.scaled_dot_product_attention, gradients against autograd
through a float64 reference. Skipped where torch is not installed.

Pass rules as in test_numpy_forward.py and test_numpy_backward.py, with
torch's float64 results as truth and the NumPy plain float32 implementation
(every sum term by term, rounded once to the dtype) setting the bounds:
O within 1e-5 (float32) or twice the plain error (16-bit); each gradient
within max(2 * plain error, 1e-6 * the largest magnitude of the three).
"""

import ctypes

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import attn_reference as ref  # noqa: E402
from flashattn import _lib  # noqa: E402
from flashattn import (flash_attn_func, flash_attn_kvpacked_func,  # noqa: E402
                       flash_attn_qkvpacked_func, flash_attn_with_kvcache)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
HAS_BACKWARD = _lib.has("flashattn_bwd")
HAS_DECODE = _lib.has("flashattn_decode")

# (batch, seq_q, seq_k, heads_q, heads_kv, head_dim); every row sees a key
# under every mask below (numpy tests cover the empty rows).
SHAPES = [
    (1, 1, 1, 1, 1, 8),
    (2, 33, 33, 4, 4, 32),
    (2, 17, 45, 4, 2, 16),    # seq_q < seq_k, GQA
    (1, 70, 70, 8, 1, 64),    # MQA
    (1, 9, 200, 2, 2, 128),   # several kv-blocks
]
MASKS = [(False, (-1, -1)), (True, (-1, -1)), (False, (6, 2)), (True, (10, -1))]


def make(shape, dtype, seed=0, requires_grad=False):
    b, sq, sk, hq, hk, d = shape
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g).to(dtype).requires_grad_(requires_grad)
    return mk(b, sq, hq, d), mk(b, sk, hk, d), mk(b, sk, hk, d)


def sdpa(q, k, v, causal=False, window_size=(-1, -1), softmax_scale=None):
    """torch's SDPA in q's dtype, with flash_attn's bottom-right causal and
    window given as an explicit mask, GQA by repeating k and v."""
    group = q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
    mask = torch.from_numpy(ref.visible(q.shape[1], k.shape[1], causal, window_size))
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                       attn_mask=mask, scale=softmax_scale)
    return o.transpose(1, 2)


def max_err(a, b):
    return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0


def numpy(*tensors):
    return [t.detach().double().numpy() for t in tensors]


def plain(fn, dtype, *args, **kw):
    """The NumPy plain float32 results of fn, rounded to dtype, as tensors."""
    results = fn(*numpy(*args), dtype=np.float32, plain=True, **kw)
    return [torch.from_numpy(r).to(dtype) for r in results]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal,window", MASKS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_forward_matches_sdpa(shape, causal, window, dtype):
    q, k, v = make(shape, dtype)
    kw = dict(causal=causal, window_size=window)
    out, lse, probs = flash_attn_func(q, k, v, return_attn_probs=True, **kw)
    expected = sdpa(q.double(), k.double(), v.double(), **kw)
    plain_out = plain(ref.attention, dtype, q, k, v, **kw)[0]
    assert out.dtype == dtype and out.shape == q.shape[:3] + v.shape[3:] and probs is None
    assert max_err(out, expected) <= (1e-5 if dtype == torch.float32
                                      else 2 * max_err(plain_out, expected))
    _, ref_lse = ref.attention(q.double().numpy(), k.double().numpy(), v.double().numpy(), **kw)
    assert lse.dtype == torch.float32 and lse.shape == (shape[0], shape[3], shape[1])
    assert max_err(lse, torch.from_numpy(ref_lse)) <= (1e-5 if dtype == torch.float32 else 1e-4)


def test_causal_square_is_sdpa_is_causal():
    q, k, v = make((2, 50, 50, 4, 4, 32), torch.float32, seed=1)
    expected = F.scaled_dot_product_attention(*(x.double().transpose(1, 2) for x in (q, k, v)),
                                              is_causal=True).transpose(1, 2)
    assert max_err(flash_attn_func(q, k, v, causal=True), expected) <= 1e-5


def test_softmax_scale():
    q, k, v = make((1, 20, 30, 2, 2, 16), torch.float32, seed=2)
    expected = sdpa(q.double(), k.double(), v.double(), softmax_scale=0.3)
    assert max_err(flash_attn_func(q, k, v, softmax_scale=0.3), expected) <= 1e-5


def test_packed_variants_equal_the_unpacked_call():
    g = torch.Generator().manual_seed(3)
    qkv = torch.randn(2, 25, 3, 4, 16, generator=g)
    q, k, v = qkv.unbind(2)
    expected = flash_attn_func(q, k, v, causal=True)
    assert torch.equal(flash_attn_qkvpacked_func(qkv, causal=True), expected)
    kv = torch.randn(2, 31, 2, 2, 16, generator=g)
    expected = flash_attn_func(q, kv[:, :, 0], kv[:, :, 1], window_size=(3, 3))
    assert torch.equal(flash_attn_kvpacked_func(q, kv, window_size=(3, 3)), expected)


def test_non_contiguous_inputs():
    q, k, v = make((2, 19, 27, 4, 2, 32), torch.float32, seed=4)
    expected = flash_attn_func(q, k, v, causal=True)
    bhsd = [x.transpose(1, 2).contiguous().transpose(1, 2) for x in (q, k, v)]
    assert torch.equal(flash_attn_func(*bhsd, causal=True), expected)
    spread = [torch.stack([x, x], -1)[..., 0] for x in (q, k, v)]   # head_dim stride 2: copied
    assert spread[0].stride(-1) == 2
    assert torch.equal(flash_attn_func(*spread, causal=True), expected)


def test_packed_descriptors_hold_the_tensor_fields():
    """pack() writes the bytes of a ctypes flashattn_tensor with the
    tensor's fields (strides of size-1 dimensions 0), whatever the tensor:
    a packed-qkv view, transposed memory, size-1 dimensions, bf16, empty."""
    from flashattn.torch_tensors import pack
    qkv = torch.randn(3, 5, 3, 4, 16)
    cases = [torch.randn(2, 7, 3, 8), qkv.unbind(2)[1],
             torch.randn(1, 4, 6, 32).transpose(1, 2).contiguous().transpose(1, 2),
             torch.randn(1, 1, 1, 1, dtype=torch.bfloat16), torch.empty(0, 3, 2, 8)]
    codes = {torch.float32: _lib.F32, torch.bfloat16: _lib.BF16}
    buf, at = _lib.descriptor_slots()
    for slot, t in enumerate(cases):
        pack(buf, slot * _lib.TENSOR.size, t)
        got = ctypes.string_at(at + slot * _lib.TENSOR.size, _lib.TENSOR.size)
        strides = [st if n > 1 else 0 for n, st in zip(t.shape, t.stride())][:3]
        expected = _lib.Tensor(t.data_ptr(), codes[t.dtype], *t.shape, *strides, 1)
        assert got == bytes(expected), t.shape


def test_calls_by_address_release_the_gil():
    """ctypes keeps the GIL only for PYFUNCTYPE functions; the by-address
    entry points must stay CFUNCTYPE ones (test_package times the release
    itself on the NumPy path)."""
    for fn in (_lib.fwd_at, _lib.fwd_workspace_size_at, _lib.bwd_at, _lib.bwd_workspace_size_at,
               _lib.decode_at, _lib.decode_workspace_size_at):
        assert fn is not None and not fn._flags_ & ctypes._FUNCFLAG_PYTHONAPI


@pytest.mark.parametrize("make_bad,message", [
    (lambda q: q.double(), "dtype torch.float64 is not supported"),
    (lambda q: q[0], "must have 4 dimensions"),
    (lambda q: q.numpy(), "must be a torch.Tensor"),
])
def test_bad_tensors(make_bad, message):
    q, k, v = make((1, 4, 4, 2, 2, 8), torch.float32)
    with pytest.raises(ValueError, match=message):
        flash_attn_func(make_bad(q), k, v)


def test_library_errors_become_value_errors():
    q, k, v = make((1, 4, 4, 3, 2, 8), torch.float32)
    with pytest.raises(ValueError, match="not a multiple of heads_kv"):
        flash_attn_func(q, k, v)


# ---- gradients --------------------------------------------------------------


GRAD_SHAPES = [
    (1, 1, 1, 1, 1, 8),
    (2, 23, 23, 4, 4, 32),
    (1, 17, 41, 4, 2, 16),    # seq_q < seq_k, GQA
    (1, 40, 21, 6, 2, 64),    # seq_q > seq_k
    (1, 9, 150, 2, 1, 128),   # MQA, several kv-blocks
]


def grads(fn, inputs, dout):
    inputs = [x.detach().clone().requires_grad_() for x in inputs]
    out = fn(*inputs)
    out.backward(dout)
    return [x.grad for x in inputs]


@pytest.mark.skipif(not HAS_BACKWARD, reason="the C library has no flashattn_bwd yet")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal,window", MASKS)
@pytest.mark.parametrize("shape", GRAD_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gradients_match_float64_autograd(shape, causal, window, dtype):
    q, k, v = make(shape, dtype, seed=5)
    dout = torch.randn(q.shape[:3] + v.shape[3:], generator=torch.Generator().manual_seed(6))
    dout = dout.to(dtype)
    kw = dict(causal=causal, window_size=window)
    expected = grads(lambda *x: sdpa(*x, **kw), [x.double() for x in (q, k, v)], dout.double())
    got = grads(lambda *x: flash_attn_func(*x, **kw), (q, k, v), dout)
    out = flash_attn_func(q, k, v, **kw)
    plain_grads = plain(ref.attention_backward, dtype, dout, q, k, v, out=numpy(out)[0], **kw)
    scale = max(e.abs().max().item() for e in expected)
    for name, g, e, p in zip("qkv", got, expected, plain_grads):
        assert g.dtype == dtype and g.shape == e.shape
        err = max_err(g, e)
        bound = max(2 * max_err(p, e), 1e-6 * scale)
        assert err <= bound, "d%s: max abs error %.3g > bound %.3g" % (name, err, bound)


@pytest.mark.skipif(not HAS_BACKWARD, reason="the C library has no flashattn_bwd yet")
def test_packed_gradients_equal_the_unpacked_ones():
    g = torch.Generator().manual_seed(7)
    qkv = torch.randn(2, 21, 3, 4, 32, generator=g)
    dout = torch.randn(2, 21, 4, 32, generator=g)
    dq, dk, dv = grads(lambda *x: flash_attn_func(*x, causal=True), qkv.unbind(2), dout)
    (dqkv,) = grads(lambda x: flash_attn_qkvpacked_func(x, causal=True), [qkv], dout)
    assert torch.equal(dqkv, torch.stack([dq, dk, dv], 2))
    kv = torch.randn(2, 30, 2, 2, 32, generator=g)
    q = qkv[:, :, 0]
    dq, dk, dv = grads(lambda *x: flash_attn_func(*x, window_size=(5, 1)),
                       [q, *kv.unbind(2)], dout)
    dq2, dkv = grads(lambda *x: flash_attn_kvpacked_func(*x, window_size=(5, 1)), [q, kv], dout)
    assert torch.equal(dq2, dq) and torch.equal(dkv, torch.stack([dk, dv], 2))


@pytest.mark.skipif(not HAS_BACKWARD, reason="the C library has no flashattn_bwd yet")
def test_deterministic_backward_is_bit_reproducible_across_threads():
    q, k, v = make((1, 64, 96, 4, 2, 32), torch.float32, seed=8)
    dout = torch.randn(1, 64, 4, 32, generator=torch.Generator().manual_seed(9))
    fn = lambda *x: flash_attn_func(*x, causal=True, deterministic=True)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = grads(fn, (q, k, v), dout)
        torch.set_num_threads(2)
        two = grads(fn, (q, k, v), dout)
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(a, b) for a, b in zip(one, two))


class _NoGradient(torch.autograd.Function):
    """Passes x through; its backward gives x no gradient (None)."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return None


@pytest.mark.skipif(not HAS_BACKWARD, reason="the C library has no flashattn_bwd yet")
@pytest.mark.parametrize("call", ["plain", "softcap", "qkvpacked"])
def test_an_output_without_gradient_gives_zero_gradients(call):
    """The Functions leave an output's gradient unallocated when nothing
    flows into it (set_materialize_grads(False)); torch still runs their
    backward then, which must take it as zeros."""
    q, k, v = make((1, 9, 9, 2, 2, 16), torch.float32, seed=5)
    if call == "qkvpacked":
        inputs = [torch.stack([q, k, v], dim=2).requires_grad_()]
        out = flash_attn_qkvpacked_func(*inputs)
    else:
        inputs = [x.requires_grad_() for x in (q, k, v)]
        out = flash_attn_func(*inputs, softcap=5.0 if call == "softcap" else 0.0)
    (_NoGradient.apply(out).sum() + inputs[0].sum()).backward()
    assert torch.equal(inputs[0].grad, torch.ones_like(inputs[0]))
    for x in inputs[1:]:
        assert torch.equal(x.grad, torch.zeros_like(x))


@pytest.mark.skipif(HAS_BACKWARD, reason="the C library has its backward")
def test_backward_without_the_c_backward_says_what_is_missing():
    q, k, v = make((1, 4, 4, 2, 2, 8), torch.float32, requires_grad=True)
    out = flash_attn_func(q, k, v)
    with pytest.raises(NotImplementedError, match="flashattn_bwd"):
        out.sum().backward()


def test_no_grad_inputs_give_an_output_without_grad():
    q, k, v = make((1, 4, 4, 2, 2, 8), torch.float32)
    assert not flash_attn_func(q, k, v).requires_grad


@pytest.mark.parametrize("probs", [False, True])
def test_calls_without_autograd_equal_the_autograd_ones(probs):
    """Without gradients to record the calls skip the autograd Function (and
    the LSE, unless asked for): the results must be those of the recorded
    call, bit for bit, for the three entry points."""
    q, k, v = make((2, 33, 33, 4, 2, 32), torch.float32, seed=3)
    qkv = torch.stack([q, q.flip(1), q.flip(2)], dim=2)
    kv = torch.stack([k, v], dim=2)
    calls = [lambda a: flash_attn_func(*a, causal=True, return_attn_probs=probs),
             lambda a: flash_attn_qkvpacked_func(a[0], return_attn_probs=probs),
             lambda a: flash_attn_kvpacked_func(*a, window_size=(5, 1),
                                                return_attn_probs=probs)]
    for call, args in zip(calls, [(q, k, v), (qkv,), (q, kv)]):
        recorded = call([t.detach().requires_grad_() for t in args])
        with torch.no_grad():
            plain = call([t.detach().requires_grad_() for t in args])
        free = call([t.detach() for t in args])
        for res in (plain, free):
            if probs:
                assert res[2] is None and not res[0].requires_grad
                assert torch.equal(res[0], recorded[0].detach())
                assert torch.equal(res[1], recorded[1])
            else:
                assert torch.equal(res, recorded.detach()) and not res.requires_grad


def test_plain_calls_take_the_folded_path(monkeypatch):
    """A call with nothing to record, on tensors read in place, runs
    _plain_forward and never the general path's _forward (whose Python
    steps cost twice a 1 x 1 call's C time); with a gradient to record it
    runs in the compiled helper too, inside its own autograd Function
    (the general path where there is no helper); with a non-contiguous
    head_dim or dropout it runs the general path."""
    from flashattn import flash_attn_interface as fai
    q, k, v = make((1, 3, 5, 4, 2, 16), torch.float32, seed=8)
    expected = flash_attn_func(q, k, v, causal=True)

    def general(*args, **kwargs):
        raise AssertionError("the general path ran")
    monkeypatch.setattr(fai, "_forward", general)
    assert torch.equal(flash_attn_func(q, k, v, causal=True), expected)
    out, lse, _ = flash_attn_func(q.transpose(1, 2).contiguous().transpose(1, 2), k, v, causal=True,
                                  return_attn_probs=True)
    assert torch.equal(out, expected) and out.is_contiguous() and lse.shape == (1, 4, 3)
    recorded = lambda: flash_attn_func(q.clone().requires_grad_(), k, v, causal=True)
    if fai._fast is not None:
        out = recorded()
        assert torch.equal(out, expected) and out.requires_grad
    else:
        with pytest.raises(AssertionError, match="general path"):
            recorded()
    for call in (lambda: flash_attn_func(torch.stack([q, q], -1)[..., 0], k, v),
                 lambda: flash_attn_func(q, k, v, dropout_p=0.5)):
        with pytest.raises(AssertionError, match="general path"):
            call()


@pytest.mark.parametrize("shape,dtype,options", [
    ((1, 1, 1, 8, 8, 128), torch.float32, {}),
    ((2, 5, 7, 4, 2, 64), torch.float32, {"causal": True, "deterministic": True}),
    ((1, 33, 40, 6, 3, 32), torch.float16, {"window_size": (5, 0), "softmax_scale": 0.3}),
    ((3, 4, 9, 2, 1, 16), torch.bfloat16, {"causal": True})])
def test_plain_gradients_equal_the_general_path(shape, dtype, options):
    """flash_attn_func's plain calls that record a gradient (_PlainFlashAttnFunc:
    the compiled helper's forward and backward where it is built) give the
    general path's out, LSE and gradients bit for bit, with dout as the
    helper takes it and as only the Python path does (non-contiguous
    head_dim), and with inputs it does not take (non-contiguous head_dim)."""
    from flashattn import flash_attn_interface as fai
    q, k, v = make(shape, dtype, seed=5)
    g = torch.Generator().manual_seed(6)
    dout = torch.randn(q.shape, generator=g).to(dtype)
    odd = torch.stack([dout, dout], -1)[..., 0]
    strided = lambda x: torch.stack([x, x], -1)[..., 0]
    for inputs in ((q, k, v), (strided(q), k, strided(v))):
        for d in (dout, odd):
            runs = []
            for plain in (True, False):
                x = [t.detach().clone().requires_grad_() if t.is_contiguous() else
                     strided(t.detach().clone()).requires_grad_() for t in inputs]
                params = fai._params(options.get("softmax_scale"), options.get("causal", False),
                                     options.get("window_size", (-1, -1)), options.get("deterministic", False))
                if plain:
                    out, lse = fai._PlainFlashAttnFunc.apply(
                        *x, options.get("softmax_scale"), options.get("causal", False),
                        options.get("window_size", (-1, -1)), options.get("deterministic", False))
                else:
                    out, lse = fai._FlashAttnFunc.apply(*x, params)
                out.backward(d)
                runs.append([out.detach(), lse] + [t.grad for t in x])
            for a, b in zip(*runs):
                assert torch.equal(a, b)


@pytest.mark.skipif(__import__("flashattn")._lib.fast is None, reason="no compiled helper")
def test_plain_calls_run_in_the_compiled_helper_with_the_same_bits(monkeypatch):
    """With python/ext/fast.c the plain path's calls go through it, and give
    what the ctypes steps give, bit for bit; calls it does not take (a
    subclass, a non-contiguous head_dim) and the library's refusals still
    reach the Python path's checks and messages."""
    from flashattn import flash_attn_interface as fai
    helper = fai._fast
    cases = [((1, 1, 1, 8, 8, 128), torch.float32, {}),
             ((2, 5, 7, 4, 2, 64), torch.float32, {"causal": True}),
             ((1, 33, 40, 6, 3, 32), torch.float16, {"window_size": (5, 0), "softmax_scale": 0.3}),
             ((3, 4, 9, 2, 1, 16), torch.bfloat16, {"causal": True})]
    for shape, dtype, options in cases:
        q, k, v = make(shape, dtype, seed=3)
        views = [x.transpose(1, 2).contiguous().transpose(1, 2) for x in (q, k, v)]
        for args in ((q, k, v), views):
            taken = []
            monkeypatch.setattr(fai, "_fast", type("Count", (), {
                "fwd": staticmethod(lambda *a: taken.append(1) or helper.fwd(*a))}))
            got = flash_attn_func(*args, return_attn_probs=True, **options)
            assert taken == [1]
            monkeypatch.setattr(fai, "_fast", None)
            expected = flash_attn_func(*args, return_attn_probs=True, **options)
            assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
    monkeypatch.setattr(fai, "_fast", helper)
    q, k, v = make((1, 4, 4, 8, 3, 16), torch.float32, seed=4)
    with pytest.raises(ValueError, match="heads"):
        flash_attn_func(q, k, v)


def test_params_follow_the_thread_count_and_skip_tensor_options():
    from flashattn import flash_attn_interface as fi
    before = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            assert fi._params(None, True, (-1, -1), False).num_threads == n
    finally:
        torch.set_num_threads(before)
    # an option given as a tensor is read for its value at each call, never kept
    causal = torch.tensor(True)
    assert fi._params(None, causal, (-1, -1), False).causal == 1
    causal.fill_(False)
    assert fi._params(None, causal, (-1, -1), False).causal == 0


# ---- KV cache ---------------------------------------------------------------


@pytest.mark.skipif(__import__("flashattn")._lib.fast is None, reason="no compiled helper")
def test_plain_kvcache_steps_run_in_the_compiled_helper_with_the_same_bits(monkeypatch):
    """flash_attn_with_kvcache's steps without rotary, batch_idx, leftpad,
    packed queries, modifiers or quantised caches go through
    python/ext/fast.c, with what the ctypes path gives (outputs and the
    appended cache rows); the rest, and its error messages, stay there."""
    from flashattn import flash_attn_interface as fai
    helper = fai._fast
    g = torch.Generator().manual_seed(11)
    cases = ((torch.float16, False, torch.tensor([5, 17], dtype=torch.int32), 1),
             (torch.float32, True, torch.tensor([9, 30]), 2),
             (torch.bfloat16, False, 12, 0), (torch.float32, False, None, 0))
    for dtype, paged, lens, new in cases:
        q = torch.randn(2, max(new, 1), 8, 64, generator=g).to(dtype)
        pool = (6, 16, 2, 64) if paged else (2, 40, 2, 64)
        kc, vc = (torch.randn(*pool, generator=g).to(dtype) for _ in range(2))
        k, v = (torch.randn(2, new, 2, 64, generator=g).to(dtype) if new else None
                for _ in range(2))
        table = torch.tensor([[4, 1, 0], [2, 5, 3]], dtype=torch.int32) if paged else None
        results = []
        for fast in (helper, None):
            taken = []
            monkeypatch.setattr(fai, "_fast", fast and type("Count", (), {
                "decode": staticmethod(lambda *a: taken.append(1) or helper.decode(*a))}))
            kc2, vc2 = kc.clone(), vc.clone()
            out, lse = flash_attn_with_kvcache(q, kc2, vc2, k, v, cache_seqlens=lens,
                                               block_table=table, causal=True,
                                               return_softmax_lse=True)
            assert taken == ([1] if fast else [])
            results.append((out, lse, kc2, vc2))
        for a, b in zip(*results):
            assert torch.equal(a, b)
    monkeypatch.setattr(fai, "_fast", helper)
    q, kc, vc = torch.randn(2, 1, 8, 64), torch.randn(2, 9, 2, 64), torch.randn(2, 9, 2, 64)
    with pytest.raises(ValueError, match="one length per batch entry"):
        flash_attn_with_kvcache(q, kc, vc, cache_seqlens=torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="give both k and v"):
        flash_attn_with_kvcache(q, kc, vc, torch.randn(2, 1, 2, 64), None)
    with pytest.raises(ValueError):
        flash_attn_with_kvcache(q, kc, vc, cache_seqlens=torch.tensor([1, 10]))

def kvcache_case(dtype, seq_q=1, seq_new=2, lens=(0, 9, 30), capacity=40, seed=10):
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g).to(dtype)
    b = len(lens)
    return (mk(b, seq_q, 4, 32), mk(b, capacity, 2, 32), mk(b, capacity, 2, 32),
            mk(b, seq_new, 2, 32), mk(b, seq_new, 2, 32), torch.tensor(lens, dtype=torch.int32))


def check_kvcache(q, k_cache, v_cache, lens, out, lse, dtype, **kw):
    """Each sequence against SDPA in float64 over its own valid rows."""
    for b, n in enumerate(lens.tolist()):
        args = (q[b:b + 1], k_cache[b:b + 1, :n], v_cache[b:b + 1, :n])
        if n == 0:
            assert torch.all(out[b] == 0) and torch.all(torch.isneginf(lse[b]))
            continue
        expected = sdpa(*(x.double() for x in args), **kw)
        plain_out = plain(ref.attention, dtype, *args, **kw)[0]
        bound = 1e-5 if dtype == torch.float32 else 2 * max_err(plain_out, expected)
        assert max_err(out[b:b + 1], expected) <= bound
        _, ref_lse = ref.attention(*numpy(*args), **kw)
        assert max_err(lse[b:b + 1], torch.from_numpy(ref_lse)) <= 1e-4


@pytest.mark.skipif(not HAS_DECODE, reason="the C library has no flashattn_decode")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal,window", [(False, (-1, -1)), (True, (-1, -1)), (True, (6, -1))])
def test_kvcache_appends_in_place_and_matches_sdpa(causal, window, dtype):
    q, k_cache, v_cache, k, v, lens = kvcache_case(dtype, seq_q=2)
    expected_k = k_cache.clone()
    for b, n in enumerate(lens.tolist()):
        expected_k[b, n:n + 2] = k[b]
    kw = dict(causal=causal, window_size=window)
    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=lens,
                                       return_softmax_lse=True, **kw)
    assert torch.equal(k_cache, expected_k)
    check_kvcache(q, k_cache, v_cache, lens + 2, out, lse, dtype, **kw)


@pytest.mark.skipif(not HAS_DECODE, reason="the C library has no flashattn_decode")
def test_kvcache_paged_equals_contiguous():
    q, k_cache, v_cache, k, v, lens = kvcache_case(torch.bfloat16, seq_new=3)
    page = 8
    pages_per_seq = 40 // page
    table = torch.randperm(3 * pages_per_seq, generator=torch.Generator().manual_seed(11))
    table = table.reshape(3, pages_per_seq).to(torch.int32)
    pool_k = torch.zeros(3 * pages_per_seq, page, 2, 32, dtype=torch.bfloat16)
    pool_v = torch.zeros_like(pool_k)
    for b in range(3):
        for i in range(pages_per_seq):
            pool_k[table[b, i]] = k_cache[b, i * page:(i + 1) * page]
            pool_v[table[b, i]] = v_cache[b, i * page:(i + 1) * page]
    contiguous = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=lens,
                                         causal=True, num_splits=1)
    paged = flash_attn_with_kvcache(q, pool_k, pool_v, k, v, cache_seqlens=lens,
                                    block_table=table, causal=True, num_splits=1)
    assert torch.equal(paged, contiguous)
    gathered = torch.stack([torch.cat([pool_k[p] for p in row]) for row in table])
    assert torch.equal(gathered, k_cache)


@pytest.mark.skipif(not HAS_DECODE, reason="the C library has no flashattn_decode")
def test_kvcache_int_lengths_and_whole_cache():
    q, k_cache, v_cache, _, _, _ = kvcache_case(torch.float32, seq_q=3)
    whole = flash_attn_with_kvcache(q, k_cache, v_cache, causal=True)
    as_int = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=40, causal=True)
    assert torch.equal(whole, as_int)
    assert max_err(whole, flash_attn_func(q, k_cache, v_cache, causal=True)) <= 1e-5


@pytest.mark.skipif(not HAS_DECODE, reason="the C library has no flashattn_decode")
def test_kvcache_errors():
    q, k_cache, v_cache, k, v, lens = kvcache_case(torch.float16)
    before = k_cache.clone()
    with pytest.raises(ValueError, match="overflows the cache capacity"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v,
                                cache_seqlens=torch.tensor([0, 9, 39], dtype=torch.int32))
    assert torch.equal(k_cache, before)
    with pytest.raises(ValueError, match="in place"):
        flash_attn_with_kvcache(q, k_cache.transpose(1, 3), v_cache, k, v, cache_seqlens=lens)
    with pytest.raises(ValueError, match="integer tensor"):
        flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens.float())
