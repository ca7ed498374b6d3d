/*
 * Which driver runs a forward pass. With few query rows per kv-head
 * (seq_q x group), the forward driver's packing of K and V (a pass over
 * them that writes an f32 copy, then reads it back) costs more than the
 * attention itself: at seq_q 1 against 4096 keys it was nearly all of the
 * time. Decode's driver reads K and V where they lie, GQA-packed, with
 * the keys split across threads, so such a forward runs as a decode
 * against a full cache (no append, every length seq_k).
 */
#ifndef FA_FWD_ROUTE_H
#define FA_FWD_ROUTE_H

#include "plan/tiles_decode.h"

/* Query rows per kv-head (seq_q x group) up to which the forward runs as
 * decode; and up to FA_FWD_DECODE_ROWS_LONG when there are at least
 * FA_FWD_DECODE_KEYS_PER_ROW keys a row. 8 heads, d 128, f32, one thread,
 * medians of alternating calls (decode / forward driver):
 *   seq_q 1, 4, 16, 32 against 4096 keys   0.19, 0.22, 0.48, 0.57 (2 threads alike)
 *   seq_q 64, 128, 256, 384 against 4096   0.68, 0.78, 0.87, 0.92 (384 on 2 threads: 1.02)
 *   seq_q = seq_k = 16, 32, 64, 128, 256   0.83, 0.93, 0.96, 1.04, 1.09
 *   seq_q 64, 128 against 512 / 1024      0.90 / 0.74, 0.89 / 0.86
 *   seq_q 256 against 512 / 1024          1.01 / 1.05
 *   32/8 heads (group 4), seq_q 8, 16, 32, 64 against 4096   0.43, 0.60, 0.78, 0.91
 * Decode's wide path widens K and V piece by piece inside the item, while
 * the forward driver packs them in a pass of their own before any
 * q-block: for one or two q-blocks that pass is most of the difference. */
#define FA_FWD_DECODE_ROWS 64
#define FA_FWD_DECODE_ROWS_LONG 256
#define FA_FWD_DECODE_KEYS_PER_ROW 8

/* Rows per kv-head from which a forward run as decode takes decode's
 * wide path (K and V widened piece by piece into the GEMM's panels) in
 * place of its few-row kernels (gemm_nt, gemm_rows on the rows as they
 * lie); decode's own calls switch at 20 rows. 8 heads, d 128, 4096 keys,
 * medians of 21-31 alternating calls in one process, wide / few-row:
 *   f32, 1 thread    seq_q 8: 0.99-1.12, 12: 0.84-0.92, 16: 0.86-0.92, 20-23: 0.60-0.68
 *   f32, 2 threads   seq_q 8: 1.07, 12: 1.00, 20: 0.68
 *   f16, 1 thread    seq_q 8: 1.36, 12: 1.14, 16: 0.86, 20: 0.83
 *   32/8 heads, f32  seq_q 3 (12 rows): 0.96 / 0.96, 4 (16 rows): 0.80 / 0.85 (1 / 2 threads)
 * and only with at least one whole tile width (NR) of keys: with fewer,
 * the wide tile runs half-width columns after widening a partial piece,
 * and the few-row kernels win. 16 rows (seq_q = 16, 8 heads), f16, one
 * thread, medians of 41 alternating calls, speed-up over standard
 * attention (its time / ours) of wide / few-row:
 *   d 128, seq_k 8, 16, 24: 0.66 / 0.92, 0.95 / 1.04, 0.98 / 0.99;
 *   seq_k 32, 64, 1024:    1.10 / 0.99, 1.09 / 0.94, 1.11 / 0.96;
 *   d 64, 256 at seq_k 8:  0.82 / 1.06, 0.58 / 1.04 (f32 alike: 16 keys 1.01 / 1.04).
 * (From 20 rows decode's own rule takes the wide path whatever the keys.) */
#define FA_FWD_WIDE_ROWS 16

/* Whether sizes meet the rule above (group = heads_q / heads_kv). */
int fa_fwd_few_rows(int64_t seq_q, int64_t seq_k, int64_t group);

/* When pb (a validated forward problem with params p) runs as decode:
 * fills dp and plan and returns 1 (*status: the planning's); 0: the
 * forward driver runs it. User tiles (block_m, block_n) keep the
 * forward's driver. A call that asks for the LSE takes decode's wide path
 * whatever the rows: the LSE is the backward's input, and the backward
 * recomputes S = Q K^T as the GEMM tile sums it (the forward driver's,
 * and the wide path's), where the few-row kernel (gemm_nt) sums in
 * another order; with scores of ~100 that difference showed in dV (5e-5
 * against a 2.6e-5 bound in test_backward). So below FA_FWD_WIDE_ROWS, o
 * may differ in rounding between calls with and without lse. (Taking
 * the wide path at seq_q 1 x 4096 keys, 8 heads: 13.6-14.8 ms on the
 * forward driver -> 3.3-3.7 ms; without the LSE, 2.5.) The split count depends
 * on the sizes only, never on the thread count, so results stay
 * bit-identical whatever the threads (as the forward promises). */
int fa_fwd_route_decode(const fa_problem *pb, const flashattn_params *p, const fa_kernels *kern,
                        fa_decode_problem *dp, fa_decode_plan *plan, flashattn_status *status);

#endif
