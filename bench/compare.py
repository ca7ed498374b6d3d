#!/usr/bin/env python3
"""Time flashattn against torch's scaled_dot_product_attention on the CPU.

Both run with the same thread count, forward and backward, on the bench's
default shapes (batch 1, heads 8, head_dim 128, seq 512..4096), each in its
native layout: flashattn (batch, seq, heads, dim), SDPA (batch, heads, seq, dim).
Writes a markdown table (--md) and a PNG plot of time against sequence length
(--png). Without torch only flashattn's forward (NumPy) is timed.

    python bench/compare.py --threads 2 --reps 5
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

import flashattn

try:
    import torch
except ImportError:
    torch = None


def median_ms(fn, reps):
    fn()  # warm up: first-touch of buffers, OpenMP thread start
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def backward_ms(forward, inputs, reps):
    """Median time of one backward pass alone: the forward graph is built
    once and its backward replayed (retain_graph keeps the saved tensors)."""
    inputs = [x.detach().requires_grad_() for x in inputs]
    out = forward(*inputs)
    dout = torch.randn_like(out)
    return median_ms(lambda: out.backward(dout, retain_graph=True), reps)


def time_torch(args, seq, dtype):
    b, h, d = args.batch, args.heads, args.head_dim
    g = torch.Generator().manual_seed(0)
    bshd = [torch.randn(b, seq, h, d, generator=g, dtype=torch.float32).to(dtype)
            for _ in range(3)]
    bhsd = [x.transpose(1, 2).contiguous() for x in bshd]
    sdpa = lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=args.causal)
    ours = lambda q, k, v: flashattn.flash_attn_func(q, k, v, causal=args.causal)
    row = {"fa_fwd": median_ms(lambda: ours(*bshd), args.reps),
           "pt_fwd": median_ms(lambda: sdpa(*bhsd), args.reps),
           "pt_bwd": backward_ms(sdpa, bhsd, args.reps)}
    try:
        row["fa_bwd"] = backward_ms(ours, bshd, args.reps)
    except NotImplementedError as e:
        print("flashattn backward: %s" % e, file=sys.stderr)
        row["fa_bwd"] = None
    return row


def time_numpy(args, seq, dtype):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((args.batch, seq, args.heads, args.head_dim))
               .astype(dtype) for _ in range(3))
    run = lambda: flashattn.attention(q, k, v, causal=args.causal, num_threads=args.threads)
    return {"fa_fwd": median_ms(run, args.reps), "pt_fwd": None, "fa_bwd": None, "pt_bwd": None}


def fmt(ms):
    return "n/a" if ms is None else "%.2f" % ms


def ratio(ours, theirs):
    return "n/a" if ours is None or theirs is None else "%.2fx" % (theirs / ours)


def write_table(path, rows, header):
    lines = header + [
        "",
        "| seq | flashattn fwd ms | SDPA fwd ms | fwd speed-up | flashattn bwd ms | "
        "SDPA bwd ms | bwd speed-up |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for seq, r in rows:
        lines.append("| %d | %s | %s | %s | %s | %s | %s |" % (
            seq, fmt(r["fa_fwd"]), fmt(r["pt_fwd"]), ratio(r["fa_fwd"], r["pt_fwd"]),
            fmt(r["fa_bwd"]), fmt(r["pt_bwd"]), ratio(r["fa_bwd"], r["pt_bwd"])))
    text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)
    print(text)


def write_plot(path, rows, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    seqs = [s for s, _ in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label, style, color in [("fa_fwd", "flashattn forward", "o-", "C0"),
                                     ("pt_fwd", "torch SDPA forward", "s-", "C1"),
                                     ("fa_bwd", "flashattn backward", "o:", "C0"),
                                     ("pt_bwd", "torch SDPA backward", "s:", "C1")]:
        pts = [(s, r[key]) for s, r in rows if r[key] is not None]
        if pts:
            ax.plot(*zip(*pts), style, color=color, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(seqs, [str(s) for s in seqs])
    ax.set_xlabel("sequence length")
    ax.set_ylabel("time per call (ms, median)")
    ax.set_title(title.replace("; ", "\n"), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seq", default="512,1024,2048,4096")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float32")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--md", default="compare.md")
    ap.add_argument("--png", default="compare.png")
    args = ap.parse_args()
    seqs = [int(s) for s in args.seq.split(",")]

    if torch is not None:
        torch.set_num_threads(args.threads)  # flash_attn_func follows torch's setting
        dtype = getattr(torch, args.dtype)
        timer, versus = time_torch, "torch %s" % torch.__version__
    else:
        import ml_dtypes
        dtype = ml_dtypes.bfloat16 if args.dtype == "bfloat16" else np.dtype(args.dtype)
        timer, versus = time_numpy, "torch not installed"
    rows = []
    for seq in seqs:
        rows.append((seq, timer(args, seq, dtype)))
        print("seq %d done" % seq, file=sys.stderr)

    title = ("batch %d, heads %d, head_dim %d, %s%s, %d threads; flashattn %s (%s), %s"
             % (args.batch, args.heads, args.head_dim, args.dtype,
                ", causal" if args.causal else "", args.threads, flashattn.__version__,
                flashattn.isa(), versus))
    note = "median of %d runs after a warm-up; speed-up = SDPA time / flashattn time" % args.reps
    write_table(args.md, rows, ["# flashattn vs torch SDPA (CPU)", "", title, "", note])
    write_plot(args.png, rows, title)


if __name__ == "__main__":
    main()
