/* Helpers shared by the C tests: random tensors, error measures, a tiny
 * pass/fail counter whose closing line ctest and CI read. */
#ifndef FA_TESTUTIL_H
#define FA_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>

#include "flashattn.h"
#include "kernels/kernels.h"

/* A tensor plus the storage it owns. */
typedef struct {
    flashattn_tensor t;
    void *mem;
    size_t bytes;
} tt_tensor;

uint64_t tt_rand_u64(uint64_t *state);
double tt_rand_normal(uint64_t *state);

/* Allocate [b, s, h, d] (bshd = 1) or [b, h, s, d] (bshd = 0), plus `pad`
 * extra elements per row (non-contiguous strides when pad > 0). */
tt_tensor tt_alloc(flashattn_dtype dt, int64_t b, int64_t s, int64_t h, int64_t d, int bshd,
                   int64_t pad);
void tt_free(tt_tensor *x);
/* Fill with N(0, sigma) values rounded to the dtype. */
void tt_fill_normal(tt_tensor *x, uint64_t *state, double sigma);
/* Fill every byte with a sentinel pattern; tt_untouched checks it is still there. */
void tt_fill_sentinel(void *p, size_t bytes);
int tt_untouched(const void *p, size_t bytes);

/* Max |a - ref| over all elements of a tensor against a contiguous
 * [b, s, h, d] double array. */
double tt_max_abs_err(const tt_tensor *x, const double *ref);

/* Test accounting. */
extern int tt_passed, tt_failed;
#define TT_CHECK(cond, ...)                                                    \
    do {                                                                       \
        if (cond) {                                                            \
            tt_passed++;                                                       \
        } else {                                                               \
            tt_failed++;                                                       \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);              \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
        }                                                                      \
    } while (0)
/* Prints "N passed, N failed" and returns the exit code. */
int tt_finish(const char *name);

/* Kernel tables this CPU can run, less those that differ from an earlier
 * one only in gemm_bf16 (avx512bf16, amx); returns the count. With
 * FLASHATTN_TEST_ISA=name in the environment, only that path (tt_isas_dot
 * too): an emulated run tests each path once, not every path at each
 * emulated CPU. */
int tt_isas(const fa_kernels *out[], int max);

/* 1 when FLASHATTN_TEST_QUICK is set (and not "0"): the long sweeps of
 * test_forward, test_backward and test_decode run a subset of their cases
 * (one in two or four, the small problems), for runs under an emulator. */
int tt_quick(void);

/* Every table this CPU can run, then test-only tables that take the forward's bf16 dot-product
 * route on CPUs without AVX512_BF16: the scalar table with the portable
 * gemm_bf16 ("scalar+bf16ref"), and, where AVX-512 runs, the AVX-512 table
 * with the AVX512_BF16 tile built on an emulated instruction
 * ("avx512+bf16emul") and with the AMX tile on emulated tile instructions
 * ("avx512+amxemul"). */
int tt_isas_dot(const fa_kernels *out[], int max);

/* Whether a thread of the OpenMP pool still holds gemm_bf16 state of kern
 * (the emulated AMX tile's configuration) after a call into the library:
 * the drivers must end every run with gemm_bf16_done(). 0 for tables
 * that keep none. */
int tt_bf16_state_left(const fa_kernels *kern);

/* Whether a forward of these sizes runs on decode's driver when neither a
 * tile size nor the LSE is asked for (plan/fwd_route.h). */
int tt_fwd_as_decode(int64_t seq_q, int64_t seq_k, int64_t heads_q, int64_t heads_kv);

/* Standard attention computed plainly in f32 (materialised scores, f32
 * softmax), output rounded to out_dtype: the yardstick for f16/bf16 inputs.
 * out is contiguous [b, s, h, d] doubles holding the rounded values. */
void tt_standard_f32(const flashattn_tensor *q, const flashattn_tensor *k,
                     const flashattn_tensor *v, const flashattn_params *p,
                     flashattn_dtype out_dtype, double *out);

/* The forward's pass rule against the FP64 reference ref (n elements of
 * O): 1e-5 for f32 inputs, else twice the error of tt_standard_f32 with
 * its output rounded to dt. */
double tt_fwd_bound(flashattn_dtype dt, const flashattn_tensor *q, const flashattn_tensor *k,
                    const flashattn_tensor *v, const flashattn_params *p, const double *ref, size_t n);

/* A gradient against the backward's pass rule (fa_bwd_pass_bounds): got
 * against the FP64 gradient ref, with the plain f32 backward's gradient
 * plain (n elements, magnitude mag) as the yardstick. Returns whether it
 * passes; *r gets the errors and their bounds for the message. */
typedef struct {
    double max, max_bound, rms, rms_bound;
} tt_grad_errs;
int tt_grad_pass(const flashattn_tensor *got, const double *ref, const double *plain, size_t n, double mag,
                 tt_grad_errs *r);

#endif
