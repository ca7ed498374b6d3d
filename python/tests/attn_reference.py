"""Standard (materialised) attention in NumPy: the float64 reference the tests
judge against, and plain float32 attention, whose error sets the bound for
16-bit inputs (as tests/test_forward.c does for the C library)."""

import numpy as np


def visible(seq_q, seq_k, causal=False, window_size=(-1, -1), align="bottom-right"):
    """Boolean (seq_q, seq_k): which keys each query sees."""
    off = seq_k - seq_q if align == "bottom-right" else 0
    i = np.arange(seq_q)[:, None] + off
    j = np.arange(seq_k)[None, :]
    left, right = window_size
    if causal:
        right = 0 if right < 0 else min(right, 0)
    mask = np.ones((seq_q, seq_k), bool)
    if left >= 0:
        mask &= j >= i - left
    if right >= 0:
        mask &= j <= i + right
    return mask


def attention(q, k, v, causal=False, softmax_scale=None, window_size=(-1, -1),
              align="bottom-right", dtype=np.float64):
    """O (batch, seq_q, heads, dim) and LSE (batch, heads, seq_q), computed in
    `dtype` from q, k, v (any float arrays, (batch, seq, heads, dim)).
    Rows that see no key: O = 0, LSE = -inf."""
    q, k, v = (np.asarray(x).astype(dtype) for x in (q, k, v))
    group = q.shape[2] // k.shape[2]
    k, v = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
    scale = dtype(1.0 / np.sqrt(q.shape[3]) if softmax_scale is None else softmax_scale)
    s = np.einsum("bihd,bjhd->bhij", q, k) * scale
    mask = visible(q.shape[1], k.shape[1], causal, window_size, align)
    s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True, initial=-np.inf)
    # A row with no visible key has m = -inf; -inf - -inf would be NaN.
    m_safe = np.where(np.isfinite(m), m, 0)
    p = np.exp(s - m_safe)
    total = p.sum(axis=-1, keepdims=True)
    o = np.einsum("bhij,bjhd->bihd", p / np.where(total > 0, total, 1), v)
    with np.errstate(divide="ignore"):
        lse = (m_safe + np.log(total))[..., 0]
    return o.astype(dtype), lse.astype(dtype)
