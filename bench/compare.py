#!/usr/bin/env python3
"""Time flashattn against torch's scaled_dot_product_attention on the CPU.

Both run with the same thread count, each in its native layout: flashattn
(batch, seq, heads, dim), SDPA (batch, heads, seq, dim); --layout bshd or
bhsd makes both read the same memory instead (one gets a transposed view,
as SDPA does in models that project to (batch, seq, heads, dim)). Prefill rows time
the forward and the backward on the default shapes (batch 1, heads 8,
head_dim 128, seq 512..4096); --decode times one generation step (seq_q 1)
against a KV cache instead (flash_attn_with_kvcache against SDPA with
enable_gqa). The calls a row compares are timed in turn, one of each per
round, odd rounds in reverse order, and each gets the median of its rounds,
so a ratio compares calls made at the same moments (this machine's speed
drifts by tens of percent within a minute). Writes a markdown table (--md)
and, for prefill, a PNG plot of time against sequence length (--png).
Without torch only flashattn's forward (NumPy) is timed.
--model llama-8b|mistral-7b|bert-base takes a model's attention shape
(heads, kv-heads, head_dim, causal, Mistral's 4096-token sliding window)
and its default lengths; SDPA gets the window as a boolean mask in
prefill (as transformers gives it) and the window's last keys at decode
(what a sliding cache holds), flashattn its window_size.

    OMP_PROC_BIND=spread OMP_PLACES=cores python bench/compare.py --threads 2 --reps 5
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


def alternate(fns, reps):
    """Median ms of each named call; one call of each per round, every
    other round in reverse order, after one warm-up call of each
    (first-touch of buffers, thread-pool start)."""
    names = list(fns)
    for name in names:
        fns[name]()
    times = {name: [] for name in names}
    for r in range(reps):
        for name in (names if r % 2 == 0 else names[::-1]):
            t0 = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - t0)
    return {name: 1e3 * statistics.median(t) for name, t in times.items()}


def backward_call(forward, inputs):
    """One backward pass alone, replayed on a graph built once (retain_graph
    keeps the saved tensors); gradients are dropped between calls so each
    call writes them afresh."""
    inputs = [x.detach().requires_grad_() for x in inputs]
    out = forward(*inputs)
    dout = torch.randn_like(out)

    def call():
        for x in inputs:
            x.grad = None
        out.backward(dout, retain_graph=True)
    return call


def time_torch(args, seq, dtype):
    b, h, d = args.batch, args.heads, args.head_dim
    g = torch.Generator().manual_seed(0)
    hk = args.heads_kv
    bshd = [torch.randn(b, n, heads, d, generator=g, dtype=torch.float32).to(dtype)
            for n, heads in ((seq, h), (args.seq_k or seq, hk), (args.seq_k or seq, hk))]
    bhsd = [x.transpose(1, 2).contiguous() for x in bshd]
    # Both read the same memory when a layout is forced: the other library
    # gets a transposed view (torch models pass SDPA such views of their
    # (batch, seq, heads, dim) projections).
    if args.layout == "bshd":
        bhsd = [x.transpose(1, 2) for x in bshd]
    elif args.layout == "bhsd":
        bshd = [x.transpose(1, 2) for x in bhsd]
    band = None
    if args.window:  # keys j in [i - window + 1, i], as a mask for SDPA
        i = torch.arange(seq).view(-1, 1)
        j = torch.arange(args.seq_k or seq).view(1, -1)
        band = (j <= i) & (j > i - args.window)
    sdpa = lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=band, is_causal=args.causal and band is None, enable_gqa=hk != h)
    window = (args.window - 1, 0) if args.window else (-1, -1)
    ours = lambda q, k, v: flashattn.flash_attn_func(q, k, v, causal=args.causal,
                                                     window_size=window)
    # Same attention before any timing: a fast wrong answer would be no result.
    diff = (ours(*bshd).float() - sdpa(*bhsd).transpose(1, 2).float()).abs().max().item()
    fns = {"fa_fwd": lambda: ours(*bshd), "pt_fwd": lambda: sdpa(*bhsd)}
    if not args.no_bwd:
        fns["pt_bwd"] = backward_call(sdpa, bhsd)
        try:
            fns["fa_bwd"] = backward_call(ours, bshd)
        except NotImplementedError as e:
            print("flashattn backward: %s" % e, file=sys.stderr)
    row = {"fa_bwd": None, "pt_bwd": None, "maxdiff": diff}
    row.update(alternate(fns, args.reps))
    return row


def time_decode(args, kv_len, dtype):
    """One generation step: seq_q 1, a cache of kv_len rows, GQA."""
    b, h, hk, d = args.batch, args.heads, args.heads_kv, args.head_dim
    g = torch.Generator().manual_seed(0)
    q = torch.randn(b, 1, h, d, generator=g).to(dtype)
    kc, vc = (torch.randn(b, kv_len, hk, d, generator=g).to(dtype) for _ in range(2))
    qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, kc, vc))
    window = (-1, -1)
    if args.window and args.window < kv_len:  # a sliding cache holds the window's keys
        kt, vt = kt[:, :, -args.window:], vt[:, :, -args.window:]
        window = (args.window - 1, 0)
    sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt,
                                                                     enable_gqa=hk != h)
    ours = lambda: flashattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=kv_len,
                                                     window_size=window)
    diff = (ours().float() - sdpa().transpose(1, 2).float()).abs().max().item()
    row = {"fa_bwd": None, "pt_bwd": None, "maxdiff": diff}
    row.update(alternate({"fa_fwd": ours, "pt_fwd": sdpa}, args.reps))
    return row


def time_numpy(args, seq, dtype):
    rng = np.random.default_rng(0)
    hk = args.heads_kv
    q, k, v = (rng.standard_normal((args.batch, n, heads, args.head_dim)).astype(dtype)
               for n, heads in ((seq, args.heads), (args.seq_k or seq, hk), (args.seq_k or seq, hk)))
    window = (args.window - 1, 0) if args.window else (-1, -1)
    run = lambda: flashattn.attention(q, k, v, causal=args.causal, window_size=window,
                                      num_threads=args.threads)
    row = {"fa_bwd": None, "pt_fwd": None, "pt_bwd": None, "maxdiff": None}
    row.update(alternate({"fa_fwd": run}, args.reps))
    return row


# Attention shapes of published models (their config.json): query heads,
# kv-heads, head_dim, masks, and the lengths to time.
MODELS = {
    "llama-8b": dict(heads=32, heads_kv=8, head_dim=128, causal=True,
                     prefill="512,1024,2048,4096,8192", decode="4096,32768"),
    "mistral-7b": dict(heads=32, heads_kv=8, head_dim=128, causal=True, window=4096,
                       prefill="512,1024,2048,4096,8192", decode="4096,32768"),
    "bert-base": dict(heads=12, heads_kv=12, head_dim=64, causal=False,
                      prefill="128,256,512", decode=None),
}


def fmt(ms):
    return "n/a" if ms is None else "%.2f" % ms


def ratio(ours, theirs):
    return "n/a" if ours is None or theirs is None else "%.2fx" % (theirs / ours)


def write_table(path, rows, header, decode):
    what = "kv_len" if decode else "seq"
    lines = header + [
        "",
        "| %s | flashattn fwd ms | SDPA fwd ms | fwd speed-up | flashattn bwd ms | "
        "SDPA bwd ms | bwd speed-up | max abs diff |" % what,
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for seq, r in rows:
        lines.append("| %d | %s | %s | %s | %s | %s | %s | %s |" % (
            seq, fmt(r["fa_fwd"]), fmt(r["pt_fwd"]), ratio(r["fa_fwd"], r["pt_fwd"]),
            fmt(r["fa_bwd"]), fmt(r["pt_bwd"]), ratio(r["fa_bwd"], r["pt_bwd"]),
            "n/a" if r["maxdiff"] is None else "%.1e" % r["maxdiff"]))
    text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)
    print(text)


def write_plot(path, rows, title):
    try:
        import matplotlib
    except ImportError:
        print("matplotlib not installed: no plot written", file=sys.stderr)
        return
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
    ap.add_argument("--seq", default=None,
                    help="sequence lengths (prefill, default 512..4096) or cache lengths "
                         "(--decode, default 4096,32768)")
    ap.add_argument("--decode", action="store_true", help="time one decode step instead")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=None, help="default 8 (prefill), 32 (decode)")
    ap.add_argument("--model", choices=sorted(MODELS),
                    help="a model's attention shape and lengths (the options below override)")
    ap.add_argument("--heads-kv", type=int, default=None,
                    help="GQA: default 8 (decode), --heads (prefill)")
    ap.add_argument("--window", type=int, default=0,
                    help="causal sliding window: query i sees keys i - window + 1 .. i")
    ap.add_argument("--seq-k", type=int, default=0,
                    help="prefill: keys of every row (default: each row's seq); the queries "
                         "are --seq, the kv heads --heads-kv; no --causal (flashattn aligns "
                         "a non-square mask bottom-right, SDPA top-left)")
    ap.add_argument("--head-dim", type=int, default=None, help="default 128")
    ap.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default=None,
                    help="default float32 (prefill), float16 (decode)")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--no-bwd", action="store_true", help="forward only")
    ap.add_argument("--layout", choices=["native", "bshd", "bhsd"], default="native",
                    help="prefill inputs: each library's native contiguous layout (flashattn "
                         "(batch, seq, heads, dim), SDPA (batch, heads, seq, dim)), or both "
                         "reading the same memory in one of them")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--md", default="compare.md")
    ap.add_argument("--png", default="compare.png")
    args = ap.parse_args()
    if args.model:
        model = MODELS[args.model]
        if args.decode and not model["decode"]:
            sys.exit("compare.py: %s is an encoder: no decode" % args.model)
        for key in ("heads", "heads_kv", "head_dim", "window"):
            if not getattr(args, key) and key in model:  # (what was not given)
                setattr(args, key, model[key])
        args.causal = args.causal or model["causal"]
        if args.seq is None:
            args.seq = model["decode"] if args.decode else model["prefill"]
    if args.heads is None:
        args.heads = 32 if args.decode else 8
    if args.head_dim is None:
        args.head_dim = 128
    if args.heads_kv is None:
        args.heads_kv = 8 if args.decode else args.heads
    if args.dtype is None:
        args.dtype = "float16" if args.decode else "float32"
    if args.seq is None:
        args.seq = "4096,32768" if args.decode else "512,1024,2048,4096"
    seqs = [int(s) for s in args.seq.split(",")]
    if args.seq_k and (args.decode or args.causal):
        sys.exit("compare.py: --seq-k is for prefill without --causal")

    if torch is not None:
        torch.set_num_threads(args.threads)  # flash_attn_func follows torch's setting
        dtype = getattr(torch, args.dtype)
        timer = time_decode if args.decode else time_torch
        versus = "torch %s" % torch.__version__
    elif args.decode:
        sys.exit("compare.py --decode needs torch")
    else:
        import ml_dtypes
        dtype = ml_dtypes.bfloat16 if args.dtype == "bfloat16" else np.dtype(args.dtype)
        timer, versus = time_numpy, "torch not installed"
    rows = []
    for seq in seqs:
        rows.append((seq, timer(args, seq, dtype)))
        print("%d done" % seq, file=sys.stderr)

    if args.decode:
        shape = "decode: batch %d, seq_q 1, heads %d, heads_kv %d" % (
            args.batch, args.heads, args.heads_kv)
    else:
        shape = "batch %d, heads %d, heads_kv %d" % (args.batch, args.heads, args.heads_kv)
        if args.seq_k:
            shape += ", seq_k %d (seq = seq_q)" % args.seq_k
    if args.window:
        shape += ", window %d" % args.window
    if args.model:
        shape = "%s: %s" % (args.model, shape)
    layout = "" if args.decode or args.layout == "native" else ", both read %s memory" % args.layout
    title = ("%s, head_dim %d, %s%s%s, %d threads; flashattn %s (%s), %s"
             % (shape, args.head_dim, args.dtype, ", causal" if args.causal else "", layout,
                args.threads, flashattn.__version__, flashattn.isa(), versus))
    note = ("median of %d rounds after a warm-up, the calls alternating within each round; "
            "speed-up = SDPA time / flashattn time; max abs diff = flashattn's output "
            "against SDPA's" % args.reps)
    write_table(args.md, rows, ["# flashattn vs torch SDPA (CPU)", "", title, "", note],
                args.decode)
    if not args.decode:
        write_plot(args.png, rows, title)


if __name__ == "__main__":
    main()
