#!/usr/bin/env bash
# The figures in docs/performance.md ("Report run" sections): one run of each table, in
# sequence (never two benchmarks at once), on a quiet machine.
# usage: bench/report.sh [path/to/flashattn] > report.txt
set -u
FA=${1:-build/flashattn}
run() { echo; echo "\$ flashattn $*"; "$FA" "$@" 2>&1; }
uptime
run info
run peak
run bench --seq 16,32,512,1024,2048,4096 --threads 1 --reps 5
run bench --seq 16,32,512,1024,2048,4096 --threads 2 --reps 5
# The ratio rows (causal / non-causal, f16 or bf16 / f32) get 5 rounds,
# and are still the noisiest lines here: f16 / f32 read 0.78-1.10 over
# five runs of 3-5 rounds on 2026-11-30, against 1.03 in two of 11 rounds
# and 1.01-1.07 in 9-61 alternating calls in one process.
run bench --seq 1024,4096 --threads 1 --reps 5 --causal
run bench --seq 1024,4096 --threads 1 --reps 5 --dtype f16
run bench --seq 1024,4096 --threads 1 --reps 5 --dtype bf16
run bench --seq 512,4096 --threads 1 --reps 3 --head-dim 64
run bench --bwd --seq 1024,4096 --threads 1 --reps 3
run bench --decode --kv-len 32768 --reps 5
run bench --decode --kv-len 32768 --batch 8 --page-size 64 --reps 3
uptime
