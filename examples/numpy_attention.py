"""flashattn from NumPy: one causal GQA call, a packed batch of sequences
of different lengths, and a gradient, each checked against a plain NumPy
softmax(q k^T / sqrt(d)) v in float64.

    python examples/numpy_attention.py
"""

import numpy as np

import flashattn


def reference(q, k, v, causal):
    """(seq, heads, dim) attention in float64, key heads repeated for GQA."""
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1).astype(np.float64), np.repeat(v, group, axis=1).astype(np.float64)
    s = np.einsum("ihd,jhd->hij", q.astype(np.float64), k) / np.sqrt(q.shape[2])
    if causal:  # bottom-right: query i sees keys j <= i + seq_k - seq_q
        i, j = np.indices(s.shape[1:])
        s = np.where(j <= i + k.shape[0] - q.shape[0], s, -np.inf)
    p = np.exp(s - s.max(axis=2, keepdims=True))
    return np.einsum("hij,jhd->ihd", p / p.sum(axis=2, keepdims=True), v)


rng = np.random.default_rng(0)

# 1. A batch of two, 8 query heads on 2 key/value heads, causal.
q = rng.standard_normal((2, 128, 8, 64), dtype=np.float32)
k = rng.standard_normal((2, 160, 2, 64), dtype=np.float32)
v = rng.standard_normal((2, 160, 2, 64), dtype=np.float32)
out = flashattn.attention(q, k, v, causal=True)
err = max(np.abs(out[b] - reference(q[b], k[b], v[b], True)).max() for b in range(2))
print("dense causal GQA   out %s, max |error| %.1e" % (out.shape, err))
assert err < 1e-5

# 2. Three sequences of 5, 40 and 17 tokens packed one after another.
lens = np.array([5, 40, 17])
cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
qp = rng.standard_normal((lens.sum(), 4, 32), dtype=np.float32)
kp = rng.standard_normal((lens.sum(), 4, 32), dtype=np.float32)
vp = rng.standard_normal((lens.sum(), 4, 32), dtype=np.float32)
outp = flashattn.attention_varlen(qp, kp, vp, cu, cu, causal=True)
err = max(np.abs(outp[a:b] - reference(qp[a:b], kp[a:b], vp[a:b], True)).max()
          for a, b in zip(cu[:-1], cu[1:]))
print("packed varlen      out %s, max |error| %.1e" % (outp.shape, err))
assert err < 1e-5

# 3. The backward: dq, dk, dv of sum(out * dout), against a finite difference.
out, lse = flashattn.attention(q[:1], k[:1], v[:1], causal=True, return_lse=True)
dout = rng.standard_normal(out.shape, dtype=np.float32)
dq, dk, dv = flashattn.attention_backward(dout, q[:1], k[:1], v[:1], out, lse, causal=True)
h, idx = 1e-2, (0, 70, 3, 5)
qa, qb = q[:1].copy(), q[:1].copy()
qa[idx] += h
qb[idx] -= h
fd = ((flashattn.attention(qa, k[:1], v[:1], causal=True).astype(np.float64) * dout).sum() -
      (flashattn.attention(qb, k[:1], v[:1], causal=True).astype(np.float64) * dout).sum()) / (2 * h)
print("backward           dq%s = %.5f, finite difference %.5f" % (idx, dq[idx], fd))
assert abs(dq[idx] - fd) < 1e-2 * max(1.0, abs(fd))
print("ok")
