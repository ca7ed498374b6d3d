/* Checked size arithmetic and rounding. Sizes that come from the user are
 * 64-bit and every product of them that addresses memory goes through the
 * checked forms, which report overflow instead of wrapping. */
#ifndef FA_CORE_SIZE_H
#define FA_CORE_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* *r = a * b, a + b: 1, or 0 on overflow (*r is then unspecified). */
static inline int fa_mul_size(size_t a, size_t b, size_t *r) { return !__builtin_mul_overflow(a, b, r); }
static inline int fa_add_size(size_t a, size_t b, size_t *r) { return !__builtin_add_overflow(a, b, r); }

/* x rounded up to a multiple of a (a > 0); the caller keeps x + a in range. */
/* Keys per f32 chain of sums before it is folded into double totals
 * (driver/softmax.h). */
#define FA_SUM_CHUNK 65536

static inline size_t fa_round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }
static inline int64_t fa_round_up_i64(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

#endif
