#include "plan/fwd_route.h"

#include <string.h>

/* Work units (items x splits) a forward run as decode aims at: enough for
 * 8 threads at 2 each, whatever the thread count of this call. */
#define FA_FWD_DECODE_UNITS 16

int fa_fwd_few_rows(int64_t seq_q, int64_t seq_k, int64_t group) {
    const int64_t rows = seq_q * group;
    return rows <= FA_FWD_DECODE_ROWS ||
           (rows <= FA_FWD_DECODE_ROWS_LONG && seq_k >= FA_FWD_DECODE_KEYS_PER_ROW * rows);
}

int fa_fwd_route_decode(const fa_problem *pb, const flashattn_params *p, const fa_kernels *kern,
                        fa_decode_problem *dp, fa_decode_plan *plan, flashattn_status *status) {
    *status = FLASHATTN_OK;
    if (p->block_m > 0 || p->block_n > 0 || !fa_fwd_few_rows(pb->seq_q, pb->seq_k, pb->group)) return 0;
    if (fa_dropout_on(&pb->dropout)) return 0; /* decode's driver has no dropout */
    if (pb->int8_qk) return 0; /* nor the 8-bit Q K^T */
    memset(dp, 0, sizeof *dp);
    dp->base = *pb; /* every sequence has seq_k keys, none appended */

    flashattn_params q = *p;
    q.num_splits = 0;
    /* The wide path from FA_FWD_WIDE_ROWS rows a kv-head and NR keys, and whatever
     * the rows when the LSE is asked for (see the header). */
    const int wide = pb->lse != NULL ||
                     (pb->seq_q * pb->group >= FA_FWD_WIDE_ROWS && pb->seq_k >= kern->nr);
    *status = fa_plan_decode(dp, &q, kern, FA_FWD_DECODE_UNITS, wide, plan);
    return 1;
}
