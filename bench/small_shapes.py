#!/usr/bin/env python3
"""Flash against standard attention over a grid of small shapes.

The issue asks for flash to be faster than standard attention at every
shape the bench can be given; the report's rows check only seq 16 and 32
at d 128, f32. This runs `flashattn bench --json` over every combination
of threads, dtype, head_dim and causal given, each over the seq list
(seq_k = seq_q), and prints one line of speed-ups (standard time / flash
time, both medians of calls alternating in the same rounds) per
combination, a star after each below 1, then how many fell below 1.

    python3 bench/small_shapes.py                 # the default grid (under a minute here)
    python3 bench/small_shapes.py --threads 1 --dtype f16 --head-dim 128
    python3 bench/small_shapes.py --json rows.jsonl   # keep the bench's rows
"""

import argparse
import json
import subprocess
import sys


def csv(kind):
    return lambda s: [kind(x) for x in s.split(",") if x]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flashattn", default="build/flashattn", help="the CLI to run")
    ap.add_argument("--seq", type=csv(int), default=[1, 2, 4, 8, 16, 24, 32, 48, 64, 100, 128, 256])
    ap.add_argument("--threads", type=csv(int), default=[1, 2])
    ap.add_argument("--dtype", type=csv(str), default=["f32", "f16", "bf16"])
    ap.add_argument("--head-dim", type=csv(int), default=[64, 128, 256])
    ap.add_argument("--causal", type=csv(int), default=[0, 1], help="0, 1 or 0,1")
    ap.add_argument("--reps", type=int, default=31, help="rounds per row (medians)")
    ap.add_argument("--json", help="also append every bench row to this file")
    a = ap.parse_args()

    seqs = ",".join(str(s) for s in a.seq)
    below, total, worst = 0, 0, None
    out = open(a.json, "a") if a.json else None
    print("speed-up over standard attention (batch 1, 8 heads); * marks < 1")
    print("threads dtype d causal | " + " ".join(f"{s:>6}" for s in a.seq))
    for t in a.threads:
        for dt in a.dtype:
            for d in a.head_dim:
                for c in a.causal:
                    cmd = [a.flashattn, "bench", "--seq", seqs, "--head-dim", str(d), "--dtype", dt,
                           "--threads", str(t), "--reps", str(a.reps), "--json"]
                    if c:
                        cmd.append("--causal")
                    run = subprocess.run(cmd, capture_output=True, text=True)
                    if run.returncode != 0:
                        sys.exit(f"{' '.join(cmd)} failed:\n{run.stderr}")
                    rows = [json.loads(l) for l in run.stdout.splitlines() if l.startswith("{")]
                    cells = []
                    for r in rows:
                        if out:
                            out.write(json.dumps(r) + "\n")
                        sp = r.get("speedup")
                        if sp is None:
                            cells.append(f"{'n/a':>6}")
                            continue
                        total += 1
                        below += sp < 1.0
                        if worst is None or sp < worst[0]:
                            worst = (sp, t, dt, d, c, r["seq_q"])
                        cells.append(f"{sp:5.2f}{'*' if sp < 1.0 else ' '}")
                    print(f"{t:>7} {dt:>5} {d:>3} {c:>6} | " + " ".join(cells), flush=True)
    if worst:
        print(f"{below} of {total} rows below 1; the lowest {worst[0]:.2f} "
              f"(threads {worst[1]}, {worst[2]}, d {worst[3]}, causal {worst[4]}, seq {worst[5]})")


if __name__ == "__main__":
    main()
