/*
 * Shared by the fuzz harnesses (tests/fuzz/fuzz_*.c): reading choices out
 * of the fuzzer's bytes, buffers sized to exactly what a descriptor
 * describes (so that AddressSanitizer sees any read past it), and the
 * abort that reports a broken property. docs/reliability.md lists the
 * properties.
 */
#ifndef FA_FUZZ_H
#define FA_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "flashattn.h"

/* The fuzzer's bytes, read front to back; past the end every read is 0,
 * so a short input means the simplest choices. */
typedef struct {
    const uint8_t *p;
    size_t n, at;
} fz_in;

unsigned fz_byte(fz_in *in);
/* A value in 0 .. n - 1 (n >= 1), from one byte when n <= 256, else two. */
unsigned fz_below(fz_in *in, unsigned n);
/* One of the n values of `from`. */
int64_t fz_pick(fz_in *in, const int64_t *from, unsigned n);
#define FZ_PICK(in, ...)                                                                   \
    fz_pick((in), (const int64_t[]){__VA_ARGS__},                                          \
            (unsigned)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* Whether the next choice says yes, about one time in `one_in` (never
 * once the input is used up). */
int fz_chance(fz_in *in, unsigned one_in);

/* Report a broken property (what the call was is in `ctx`) and abort:
 * libFuzzer keeps the input, the corpus replay fails. */
void fz_fail(const char *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* Elements a descriptor reaches: 1 + sum of (size - 1) * stride over its
 * four dimensions; 0 when a size is 0; -1 when a size or stride is
 * negative or the sum overflows int64. */
int64_t fz_extent(const flashattn_tensor *t);

/* Bytes of one element (1 for the 8-bit cache dtypes); 4 for a dtype the
 * library does not know. */
size_t fz_esize(flashattn_dtype dt);

/* A tensor and the memory it points at, allocated by fz_buf_alloc. */
typedef struct {
    flashattn_tensor t;
    unsigned char *mem;
    size_t bytes;
    int covered; /* mem holds every element t describes */
} fz_buf;

/* Largest tensor (elements) a harness allocates; a valid call that would
 * need more is not made. */
#define FZ_MAX_ELEMS (1 << 20)

/* What a descriptor's data points at until fz_buf_alloc gives it memory
 * (NULL is kept: an edit made it so). */
extern char fz_unallocated[1];

/* mem for t as it now is: exactly its extent when that is known and at
 * most FZ_MAX_ELEMS (covered), else 64 bytes (not covered: the library must
 * refuse the descriptor, or the call is not made). Every byte is filled
 * with finite values of t's dtype, N(0, sigma) (an 8-bit cache dtype: the
 * codes of those values at scale 3 / its largest finite value). t.data points at mem
 * unless it is NULL. */
void fz_buf_alloc(fz_buf *x, uint64_t *rng, double sigma);
void fz_buf_free(fz_buf *x);
/* Every byte 0x5a (outputs: what a failed call must leave). */
void fz_buf_sentinel(fz_buf *x);

/* A copy of n bytes, to compare with after a call. */
unsigned char *fz_copy(const void *p, size_t n);
/* One unit in the last place of dt at |x| (0 for f32: the harness then
 * holds f32 results to the unit tests' absolute bounds alone). */
double fz_ulp(flashattn_dtype dt, double x);

#endif
