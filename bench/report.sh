#!/usr/bin/env bash
# The figures in README's "Performance" section: one run of each table, in
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
run bench --seq 1024,4096 --threads 1 --reps 3 --causal
run bench --seq 1024,4096 --threads 1 --reps 3 --dtype f16
run bench --seq 1024,4096 --threads 1 --reps 3 --dtype bf16
run bench --seq 512,4096 --threads 1 --reps 3 --head-dim 64
run bench --bwd --seq 1024,4096 --threads 1 --reps 3
run bench --decode --kv-len 32768 --reps 5
run bench --decode --kv-len 32768 --batch 8 --page-size 64 --reps 3
uptime
