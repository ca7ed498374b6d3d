/*
 * Which driver runs a forward pass. With few query rows per kv-head
 * (seq_q x group), the forward driver's packing of K and V (a pass over
 * them that writes an f32 copy, then reads it back) costs more than the
 * attention itself: at seq_q 1 against 4096 keys it was nearly all of the
 * time. Decode's driver reads K and V where they lie, GQA-packed, with
 * the keys split across threads, so such a forward runs as a decode
 * against a full cache (no append, every length seq_k).
 */
#ifndef FA_PLAN_FWD_ROUTE_H
#define FA_PLAN_FWD_ROUTE_H

#include "plan/tiles_decode.h"

/* Query rows per kv-head (seq_q x group) up to which the forward runs as
 * decode; and up to FA_FWD_DECODE_ROWS_LONG when there are at least
 * FA_FWD_DECODE_KEYS_PER_ROW keys a row. Decode's wide path widens K and V
 * piece by piece inside the item, while the forward driver packs them in
 * a pass of their own before any q-block: for one or two q-blocks that
 * pass is most of the time (docs/performance.md has the measurements). */
#define FA_FWD_DECODE_ROWS 64
#define FA_FWD_DECODE_ROWS_LONG 256
#define FA_FWD_DECODE_KEYS_PER_ROW 8

/* Rows per kv-head from which a forward run as decode takes decode's
 * wide path (K and V widened piece by piece into the GEMM's panels) in
 * place of its few-row kernels (gemm_nt, gemm_rows on the rows as they
 * lie), and only with at least one whole tile width (NR) of keys: with
 * fewer, the wide tile runs half-width columns after widening a partial
 * piece, and the few-row kernels win. Decode's own calls switch at 20
 * rows whatever the keys (plan/tiles_decode.c). */
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
 * another order, which large scores carry into dV past the tests' bound.
 * So below FA_FWD_WIDE_ROWS, o may differ in rounding between calls with
 * and without lse. The split count depends on the sizes only, never on the thread count, so results stay
 * bit-identical whatever the threads (as the forward promises). */
int fa_fwd_route_decode(const fa_problem *pb, const flashattn_params *p, const fa_kernels *kern,
                        fa_decode_problem *dp, fa_decode_plan *plan, flashattn_status *status);

#endif
