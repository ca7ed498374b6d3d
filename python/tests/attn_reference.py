"""Standard (materialised) attention and its gradients in NumPy, written once
and run two ways:
  - in float64: the reference the tests judge against;
  - in float32 with every sum accumulated term by term ("plain"), as a naive
    C loop would: its error sets the bound of the pass rules, as the plain
    f32 implementations in tests/ do for the C library.
Layout (batch, seq, heads, dim); LSE (batch, heads, seq).

The score modifiers follow include/flashattn.h's formulas, in its order,
on the scaled logit s of query i and key j:
  softcap > 0    s = softcap * tanh(s / softcap)
  alibi_slopes   s -= slope[b, h] * |i + off - j| (off as the causal diagonal)
  bias           s += bias[b, h, i, j] (broadcast)
  mask           hidden where mask[b, h, i, j] is False, as causal/window
  sinks          exp(sinks[h]) joins every row's denominator, no value."""

import numpy as np


def visible(seq_q, seq_k, causal=False, window_size=(-1, -1), align="bottom-right"):
    """Boolean (seq_q, seq_k): which keys each query sees."""
    off = seq_k - seq_q if align == "bottom-right" else 0
    i = np.arange(seq_q)[:, None] + off
    j = np.arange(seq_k)[None, :]
    left, right = window_size
    if causal:
        right = 0
    mask = np.ones((seq_q, seq_k), bool)
    if left >= 0:
        mask &= j >= i - left
    if right >= 0:
        mask &= j <= i + right
    return mask


def _dot_exact(a, b):
    return np.einsum("...t,...t->...", a, b)


def _dot_plain(a, b):
    """Sum over the last axis of a * b (broadcast), one term at a time."""
    shape = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    acc = np.zeros(shape, np.result_type(a, b))
    for t in range(a.shape[-1]):
        acc += a[..., t] * b[..., t]
    return acc


class _Attention:
    """Scores, probabilities and output of one problem, in (batch, heads, ...)
    order, with k and v repeated over each kv head's group of query heads."""

    def __init__(self, q, k, v, causal, softmax_scale, window_size, align, dtype, plain,
                 softcap=0.0, alibi_slopes=None, sinks=None, bias=None, mask=None):
        self.dtype, self.dot = dtype, (_dot_plain if plain else _dot_exact)
        self.heads_kv, self.group = k.shape[2], q.shape[2] // k.shape[2]
        heads = lambda x: np.asarray(x).astype(dtype).transpose(0, 2, 1, 3)  # (b, h, s, d)
        self.q = heads(q)
        self.k = np.repeat(heads(k), self.group, axis=1)
        self.v = np.repeat(heads(v), self.group, axis=1)
        self.scale = dtype(1.0 / np.sqrt(q.shape[3]) if softmax_scale is None else softmax_scale)
        s = self.matmul_t(self.q, self.k) * self.scale
        seq_q, seq_k = q.shape[1], k.shape[1]
        self.dcap = None  # d(softcap(s))/ds
        if softcap:
            cap = dtype(softcap)
            t = np.tanh(s / cap)
            s, self.dcap = cap * t, 1 - t * t
        if alibi_slopes is not None:
            slopes = np.asarray(alibi_slopes).astype(dtype)
            slopes = slopes.reshape((-1, q.shape[2], 1, 1))  # (1 or batch, heads, 1, 1)
            off = seq_k - seq_q if align == "bottom-right" else 0
            dist = np.abs(np.arange(seq_q)[:, None] + off - np.arange(seq_k)[None, :])
            s = s - slopes * dist.astype(dtype)
        if bias is not None:
            s = s + np.broadcast_to(np.asarray(bias).astype(dtype), s.shape)
        see = visible(seq_q, seq_k, causal, window_size, align)
        if mask is not None:
            see = see & np.broadcast_to(np.asarray(mask) != 0, s.shape)
        s = np.where(see, s, -np.inf)
        self.sink = None if sinks is None else \
            np.asarray(sinks).astype(dtype).reshape((1, -1, 1, 1))
        m = s.max(axis=-1, keepdims=True, initial=-np.inf)
        if self.sink is not None:
            m = np.maximum(m, self.sink)
        # A row with no visible key has m = -inf; -inf - -inf would be NaN.
        m = np.where(np.isfinite(m), m, 0).astype(dtype)
        p = np.exp(s - m)
        total = self.dot(p, np.ones_like(p))[..., None]
        if self.sink is not None:
            total = total + np.exp(self.sink - m)
        self.p = p / np.where(total > 0, total, 1)
        with np.errstate(divide="ignore"):
            self.lse = (m + np.log(total))[..., 0]
        self.o = self.matmul(self.p, self.v)

    def matmul_t(self, a, b):
        """a (.., i, t) times b (.., j, t) transposed: (.., i, j)."""
        return self.dot(a[..., :, None, :], b[..., None, :, :])

    def matmul(self, a, b):
        """a (.., i, t) times b (.., t, d): (.., i, d)."""
        return self.matmul_t(a, np.swapaxes(b, -1, -2))

    def fold(self, g):
        """Sum (b, heads_q, s, d) over each group of query heads, one at a time."""
        g = g.reshape(g.shape[0], self.heads_kv, self.group, *g.shape[2:])
        acc = g[:, :, 0].copy()
        for h in range(1, self.group):
            acc += g[:, :, h]
        return acc


def _bshd(x):
    return x.transpose(0, 2, 1, 3)


def attention(q, k, v, causal=False, softmax_scale=None, window_size=(-1, -1),
              align="bottom-right", dtype=np.float64, plain=False, **modifiers):
    """O (batch, seq_q, heads, dim) and LSE (batch, heads, seq_q) in `dtype`.
    Rows that see no key: O = 0, LSE = -inf (the sink's logit with sinks).
    modifiers: softcap, alibi_slopes, sinks, bias, mask (module docstring)."""
    a = _Attention(q, k, v, causal, softmax_scale, window_size, align, dtype, plain, **modifiers)
    return _bshd(a.o), a.lse


def attention_backward(dout, q, k, v, causal=False, softmax_scale=None, window_size=(-1, -1),
                       align="bottom-right", dtype=np.float64, plain=False, out=None,
                       **modifiers):
    """dq, dk, dv for upstream gradient dout, by the textbook formulas:
        dV = P^T dO,  dP = dO V^T,  D = rowsum(dO * O),  dS = P * (dP - D),
        dQ = scale dS' K,  dK = scale dS'^T Q,
    dS' = dS times softcap's derivative (dS without softcap), dk and dv
    summed over each kv head's group of query heads. out, when given, is
    the O used for D (as the backward's contract says); else O is
    recomputed. With sinks, also dsinks (heads,): the sink is a key of
    value 0, so its dS is P_sink * (0 - D), P_sink = exp(sink - LSE),
    summed over the batch and the rows."""
    a = _Attention(q, k, v, causal, softmax_scale, window_size, align, dtype, plain, **modifiers)
    do = _bshd(np.asarray(dout).astype(dtype))
    o = a.o if out is None else _bshd(np.asarray(out).astype(dtype))
    pt = np.swapaxes(a.p, -1, -2)
    dv = a.matmul(pt, do)
    dp = a.matmul_t(do, a.v)
    d = a.dot(do, o)
    ds = a.p * (dp - d[..., None])
    if a.dcap is not None:
        ds = ds * a.dcap
    dq = a.matmul(ds, a.k) * a.scale
    dk = a.matmul(np.swapaxes(ds, -1, -2), a.q) * a.scale
    grads = (_bshd(dq), _bshd(a.fold(dk)), _bshd(a.fold(dv)))
    if a.sink is None:
        return grads
    p_sink = np.exp(a.sink[..., 0] - a.lse)  # (batch, heads, seq_q)
    return grads + (-(p_sink * d).sum(axis=(0, 2)),)


# ---- packed sequences, rotary ----------------------------------------------

def sequences(cu_seqlens_q, cu_seqlens_k, seqused_k=None):
    """(query slice, key slice) of each packed sequence: the keys past
    seqused_k[b], when given, are not part of it."""
    out = []
    for b in range(len(cu_seqlens_q) - 1):
        k0 = int(cu_seqlens_k[b])
        n = int(cu_seqlens_k[b + 1]) - k0 if seqused_k is None else int(seqused_k[b])
        out.append((slice(int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1])), slice(k0, k0 + n)))
    return out


def _sequence_options(kw, b, qs, ks):
    """The options of packed sequence b: its row of per-sequence ALiBi
    slopes (batch, heads), its [b, :, :seq_q, :seq_k] block of a bias or
    mask (batch|1, heads|1, max_seq_q|1, max_seq_k|1)."""
    kw = dict(kw)
    if kw.get("alibi_slopes") is not None and np.ndim(kw["alibi_slopes"]) == 2:
        kw["alibi_slopes"] = kw["alibi_slopes"][b]
    for name in ("bias", "mask"):
        if kw.get(name) is not None:
            x = np.asarray(kw[name])
            x = x.reshape((1,) * (4 - x.ndim) + x.shape)
            x = x[b:b + 1] if x.shape[0] > 1 else x
            x = x[:, :, :qs.stop - qs.start] if x.shape[2] > 1 else x
            kw[name] = x[..., :ks.stop - ks.start] if x.shape[3] > 1 else x
    return kw


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k=None, dtype=np.float64,
                     plain=False, **kw):
    """attention() on each packed sequence alone: O (total_q, heads, dim),
    LSE (heads, total_q) in `dtype`."""
    o = np.zeros(q.shape[:2] + v.shape[2:], dtype)
    lse = np.full((q.shape[1], q.shape[0]), -np.inf, dtype)
    for b, (qs, ks) in enumerate(sequences(cu_seqlens_q, cu_seqlens_k, seqused_k)):
        if qs.stop > qs.start:
            ob, lb = attention(q[None, qs], k[None, ks], v[None, ks], dtype=dtype, plain=plain,
                               **_sequence_options(kw, b, qs, ks))
            o[qs], lse[:, qs] = ob[0], lb[0]
    return o, lse


def attention_varlen_backward(dout, q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k=None,
                              dtype=np.float64, plain=False, out=None, **kw):
    """attention_backward() on each packed sequence alone: dq (total_q, ..),
    dk, dv (total_k, ..), zero on keys no sequence uses; with sinks also
    dsinks, summed over the sequences."""
    dq = np.zeros(q.shape, dtype)
    dk, dv = np.zeros(k.shape, dtype), np.zeros(v.shape, dtype)
    dsinks = None if kw.get("sinks") is None else np.zeros(q.shape[1], dtype)
    for b, (qs, ks) in enumerate(sequences(cu_seqlens_q, cu_seqlens_k, seqused_k)):
        if qs.stop > qs.start:
            o = None if out is None else out[None, qs]
            g = attention_backward(dout[None, qs], q[None, qs], k[None, ks], v[None, ks],
                                   dtype=dtype, plain=plain, out=o,
                                   **_sequence_options(kw, b, qs, ks))
            dq[qs], dk[ks], dv[ks] = g[0][0], g[1][0], g[2][0]
            if dsinks is not None:
                dsinks += g[3]
    return (dq, dk, dv) if dsinks is None else (dq, dk, dv, dsinks)


def rotary(x, cos, sin, positions, interleaved):
    """Rotary embedding of rows x (n, heads, dim) in float64, row r at
    positions[r]: each pair (x1, x2) of the first 2 * cos.shape[1] elements
    becomes (x1 c - x2 s, x1 s + x2 c), with c, s = cos[p, t], sin[p, t];
    the pair t is (2t, 2t + 1) when interleaved, else (t, t + half)."""
    x = np.array(x, np.float64)
    half = cos.shape[1]
    c = np.asarray(cos, np.float64)[positions][:, None, :]
    s = np.asarray(sin, np.float64)[positions][:, None, :]
    a = np.arange(half) * 2 if interleaved else np.arange(half)
    b = a + 1 if interleaved else a + half
    x1, x2 = x[..., a].copy(), x[..., b].copy()
    x[..., a] = x1 * c - x2 * s
    x[..., b] = x1 * s + x2 * c
    return x
