/* The exact merge of partial attention results, shared by the public
 * flashattn_merge and decode's split-KV, so both round the same way. */
#ifndef FA_MERGE_H
#define FA_MERGE_H

#include "kernels/kernels.h"

/* n partials (each [batch, seq, heads, head_dim], LSE [batch, heads, seq])
 * merged into o and, if not NULL, lse. Shapes already validated. */
typedef struct fa_merge_job {
    int64_t n;
    const flashattn_tensor *parts;
    const float *const *lse_parts;
    const flashattn_tensor *o;
    float *lse;
} fa_merge_job;

/* Rows per unit of work of a merge loop. */
#define FA_MERGE_ROWS 32

/* Rows [t0, t1) in LSE order, t = (b * heads + h) * seq + i. Each row is
 * read from every part before it is written, so o and lse may be a part. */
void fa_merge_rows(const fa_kernels *kern, const fa_merge_job *job, int64_t t0, int64_t t1);

/* Every row, on up to `threads` threads. */
void fa_merge_run(const fa_kernels *kern, const fa_merge_job *job, int threads);

#endif
