/*
 * The rows of a GEMM operand (a q-block's queries, a work item's keys,
 * dQ^T's head_dim rows) cut into register-tile strips of at most mr rows:
 * as few strips as that allows, of even size (16 rows at mr 6 as 6 + 5 +
 * 5, not 6 + 6 + 4). A short last strip costs nearly a whole one: its few
 * FMA chains wait on the FMA latency instead of filling the ports
 * (docs/performance.md, "Strips of even size"). Each row's arithmetic is the same
 * whichever strip holds it (kernels.h), so the cut changes no bits.
 */
#ifndef FA_DRIVER_STRIPS_H
#define FA_DRIVER_STRIPS_H

typedef struct {
    int count; /* strips */
    int base;  /* rows of a strip; the first `extra` strips have one more */
    int extra;
} fa_strips;

static inline fa_strips fa_strips_cut(int rows, int mr) {
    fa_strips c = {0, 0, 0};
    if (rows <= 0) return c;
    c.count = (rows + mr - 1) / mr;
    c.base = rows / c.count;
    c.extra = rows % c.count;
    return c;
}

static inline int fa_strip_rows(const fa_strips *c, int s) { return c->base + (s < c->extra); }

/* The first row of strip s. */
static inline int fa_strip_row0(const fa_strips *c, int s) {
    return s * c->base + (s < c->extra ? s : c->extra);
}

#endif
