/*
 * The micro-kernel contract. Every ISA provides one fa_kernels table; the
 * portable C table (kernels/ref) defines what each entry must compute, and
 * tests/test_kernels.c checks every SIMD table against it.
 *
 * GEMM register tile (the CPU's "Cube"):
 *
 *      C[m x n]  (=, or +=)  A[m x k] . B[k x n]
 *
 *          k ->                 n ->  (n <= NR, n % FA_COL_ALIGN == 0)
 *   A  m [a a a a ...]   B   k [b b b b b b b b]    C  m [c c c c c c c c]
 *   (m <= MR rows,           (rows of n floats,        (rows of n floats,
 *    row stride lda,          row stride ldb,           row stride ldc)
 *    element stride 1)        element stride 1)
 *
 *   - A is read one element at a time (broadcast), B one row of n at a time,
 *     so the same kernel computes Q.K^T (B = K packed as [d][NR] panels) and
 *     P.V (B = packed V rows).
 *   - accumulate == 0: C is overwritten and never read (it may hold garbage).
 *   - k may be 0 (C = 0, or unchanged when accumulating).
 *   - No alignment is required; the driver keeps B and C 64-byte aligned
 *     and ldb, ldc multiples of FA_COL_ALIGN, which is what the fast paths want.
 *   - For each element of C the sum runs over k in increasing order with one
 *     fused multiply-add per term, so a row's result does not depend on m or
 *     on which row of the tile it occupies.
 *
 * Row ("Vector") kernels work on float rows of any length n >= 0, any alignment.
 * exp2 is used throughout: the driver folds log2(e) into the softmax scale.
 */
#ifndef FA_KERNELS_H
#define FA_KERNELS_H

#include <assert.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/tensor.h"
#include "flashattn.h"

/* A store_stream built from an ISA's plain store and its streaming loop
 * `body` (whole line-byte chunks at a line-aligned dst): the row is cut
 * into a head stored plainly up to the first line boundary, the chunks,
 * and the rest stored plainly. A dst not aligned to its element size
 * streams nothing. */
typedef void (*fa_store_fn)(void *dst, flashattn_dtype dt, const float *src, int64_t n, float mul);
static inline void fa_store_stream_with(fa_store_fn plain, fa_store_fn body, int64_t line,
                                        void *dst, flashattn_dtype dt, const float *src,
                                        int64_t n, float mul) {
    const int64_t es = fa_dtype_bytes(dt), at = (int64_t)((uintptr_t)dst % (uintptr_t)line);
    int64_t head = at % es ? n : (line - at) % line / es;
    if (head > n) head = n;
    const int64_t chunks = (n - head) / (line / es) * (line / es);
    char *d = (char *)dst + head * es;
    plain(dst, dt, src, head, mul);
    body(d, dt, src + head, chunks, mul);
    plain(d + chunks * es, dt, src + head + chunks, n - head - chunks, mul);
}

/* Whether the CPU has a feature a table entry may use beyond its table's
 * (AVX512_VNNI, AVX-VNNI, AMX-INT8): probe() asked once, kept in *flag
 * (0: not yet asked; a relaxed atomic, as every thread finds the same). */
static inline int fa_cpu_once(atomic_int *flag, int (*probe)(void)) {
    int has = atomic_load_explicit(flag, memory_order_relaxed);
    if (!has) atomic_store_explicit(flag, has = probe() ? 1 : -1, memory_order_relaxed);
    return has > 0;
}

/* Every kernel entry opens by asserting its contract (the shapes below) in
 * Debug and sanitizer builds; Release builds (NDEBUG) compile it out. */
#define FA_KERNEL_CONTRACT(cond) assert(cond)

/* No table's mr exceeds it (drivers size per-strip arrays by it;
 * tests/test_kernels.c checks). */
#define FA_MAX_MR 16

/* Widths the driver pads to: n of every GEMM call is a multiple of it. */
#define FA_COL_ALIGN 16

/* exp2_sum's grouping grain: see exp2_sum below. */
#define FA_EXP2_SUM_GRAIN 32

/* Every entry of every table is a function: where a path has nothing to
 * do (a fence, the end of a bf16 run) the entry is a no-op, and where it
 * lacks an instruction (bf16 dot products) it holds the portable
 * definition, so callers never test for NULL. */
typedef struct fa_kernels {
    const char *isa;            /* its name in kernels/isa_list.h */
    int (*cpu_supported)(void); /* whether this CPU (and OS) run the table */
    int mr;                     /* max rows of a GEMM call */
    int nr;                     /* max columns of a GEMM call (multiple of FA_COL_ALIGN) */
    /* 1: gemm_bf16 runs on a bf16 dot-product instruction, and bf16 inputs
     * take the dot-product route (plan/tiles.c); 0: gemm_bf16 is the
     * portable definition and bf16 inputs are widened to f32 instead. */
    int bf16_dot;

    void (*gemm)(int m, int n, int64_t k, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float *c, int64_t ldc, int accumulate);

    /* max(x[0..n)); -INFINITY for n == 0. NaNs need not propagate. */
    float (*row_max)(const float *x, int64_t n);

    /* 1 when no x[i], i < n, is a NaN or an infinity, else 0 (1 for
     * n == 0): the drivers' test for the careful rerun (driver/careful.h),
     * after every item. */
    int (*all_finite)(const float *x, int64_t n);

    /* x[i] = exp2(x[i] - m) for i < n, returns the sum of the new x[i].
     * Contract: m is finite, x[i] <= m or x[i] = -INFINITY (which gives 0).
     * Relative error of each term at most 4 ulp of float. The backward
     * passes x[i] = S - LSE with m = 0, which rounding can put a few ulp
     * above 0: that must stay accurate too (tests/test_backward.c checks).
     * Trailing -INFINITY elements are exact no-ops at the grain: when
     * x[n'..n) are all -INFINITY and n' is a multiple of FA_EXP2_SUM_GRAIN,
     * the sum and x[0..n') are bit for bit those of exp2_sum(x, n', m)
     * (so the grouping of the sum over x[0..n') may depend on n' only
     * through whole grains). Leading ones likewise: when x[0..c) are all
     * -INFINITY and c is a multiple of FA_EXP2_SUM_GRAIN, the sum and
     * x[c..n) are those of exp2_sum(x + c, n - c, m) (each lane's partial
     * sum meets the same terms in the same order). The forward relies on
     * both to leave out masked columns without changing a result
     * (tests/test_kernels.c checks). */
    float (*exp2_sum)(float *x, int64_t n, float m);

    /* Softcap of a row: x[i] = cap * tanh(x[i] / cap), and, when dcap is
     * not NULL, dcap[i] = 1 - tanh^2 (the derivative), for i < n; cap > 0.
     * Relative error of tanh at most 8 ulp, of 1 - tanh^2 at most 16 + 4y
     * ulp at y = |x| / cap (y's own rounding moves the exact value by 2y
     * ulp); +-inf gives +-cap and 0, NaN gives NaN. */
    void (*softcap_row)(float *x, int64_t n, float cap, float *dcap);

    /* ALiBi's term on a row: x[i] -= slope * |a - i| for i < n, with a - i
     * and the product each rounded to float as written (no FMA), so every
     * table gives the same bits; a is integral, n <= 2^24 (i exact). */
    void (*alibi_row)(float *x, int64_t n, float a, float slope);

    /* x[i] *= a */
    void (*scale)(float *x, int64_t n, float a);

    /* Column scales: x[r * ld + c] *= s[c] for r < rows, c < n (ld >= n),
     * one rounding each, so every table gives the same bits. skip_zero:
     * an x that is +-0 becomes +0 whatever s[c] is, so a weight of 0
     * stays 0 under a NaN or infinite scale (decode's per-token V scales
     * on P: flashattn.h's rule for quantised caches). */
    void (*scale_cols)(float *x, int64_t ld, int rows, int64_t n, const float *s, int skip_zero);

    /* dst[i] = (float)src[i] * mul, src in any dtype (the 8-bit cache
     * dtypes too: core/dtype.h's exact widening). */
    void (*load)(float *dst, const void *src, flashattn_dtype dt, int64_t n, float mul);

    /* dst[i] = round_to_dtype(src[i] * mul), round to nearest even; dt
     * f32, f16 or bf16 (8-bit cache rows are written by core/quant.h). */
    void (*store)(void *dst, flashattn_dtype dt, const float *src, int64_t n, float mul);

    /* store's bytes, bit for bit, but the whole cache lines of dst it
     * covers may be written around the caches (non-temporal stores): for
     * outputs far larger than the caches that the call does not read
     * again (the backward's dK and dV), where a plain store first reads
     * each line in (twice the memory traffic) and evicts the inputs. The
     * rest of the row (unaligned ends, a dst not aligned to its element
     * size) is stored as store does. Such writes are ordered only by
     * store_fence, which whoever calls this calls before the thread's
     * results are used (the drivers: at the end of every work item). */
    void (*store_stream)(void *dst, flashattn_dtype dt, const float *src, int64_t n, float mul);

    /* Orders this thread's store_stream writes before its later stores (a
     * no-op where store_stream never writes around the caches). */
    void (*store_fence)(void);

    /* C[m x n] = A[m x k] . B^T, B given as n rows of k elements of dtype
     * bt (row stride ldb elements): decode's S = Q K^T straight from the
     * cache's K rows, with no [k][nr] panel to pack and no f32 copy (every
     * dtype, the 8-bit cache ones too, widens to f32 exactly, so the
     * result is the f32 call's on the widened rows, bit for bit). Any m, n >= 0, k >= 0 (C = 0), any strides
     * and alignment; C is overwritten, never read. The order of each sum
     * over k is the kernel's own (SIMD lanes, then a reduction), so results
     * agree with the portable kernel to rounding, not bit for bit; but an
     * element depends only on its row of A and its row of B, never on m, n
     * or its place in C.
     * pf (bytes, 0 = none) is a prefetch hint, for gemm_nt and gemm_rows
     * alike: while the kernel reads a row of B it may prefetch the bytes
     * pf further on (decode passes the distance to the same row of its next
     * piece of the cache, so the memory stream keeps going while the FMAs
     * work). Those bytes are never read, need not be valid memory, and
     * results never depend on pf. */
    void (*gemm_nt)(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                    flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int64_t pf);

    /* C[m x n] (=, +=) A[m x k] . B[k x n], B given as k rows of n elements
     * of dtype bt (row stride ldb elements): decode's acc += P V straight
     * from the cache's V rows. Any m, n, k >= 0, any strides and alignment.
     * Each element of C is gemm's FMA chain over k in increasing order
     * (from +0, or from C when accumulating) on the widened elements, so it
     * is bit-identical to the portable gemm on an f32 copy of B, whatever
     * m, n, k or its place in C; and a sum split over consecutive calls
     * (the later ones accumulating) equals the sum in one call. pf: as for
     * gemm_nt. */
    void (*gemm_rows)(int m, int n, int64_t k, const float *a, int64_t lda, const void *b,
                      flashattn_dtype bt, int64_t ldb, float *c, int64_t ldc, int accumulate,
                      int64_t pf);

    /* dst[c * ldd + r] = (float)src_r[c] for r < rows, c < cols, where row
     * r of src starts lds elements of dtype dt after row r - 1: the
     * transposing copy that packs K rows into [head_dim][nr] panels. Any
     * rows, cols >= 0, strides and alignment; nothing else is written. A
     * widening copy is exact (signalling f16 NaNs come out quiet, payload
     * kept), so every table writes the same bits. */
    void (*transpose)(float *dst, int64_t ldd, const void *src, int64_t lds,
                      flashattn_dtype dt, int rows, int64_t cols);

    /* BF16 dot-product GEMM tile, AVX512_BF16's VDPBF16PS or AMX's
     * TDPBF16PS; in tables whose CPU lacks both, the portable definition
     * (there bf16 inputs are widened to f32 when packing and run on gemm,
     * which is faster than emulating it, so only tests call it):
     *
     *      C[m x n]  =  alpha * A[m x 2kp] . B[2kp x n],  or  C += A . B
     *
     *   A: m rows of 2kp bf16, row stride lda bf16 elements (even), so
     *      that elements (2p, 2p + 1) of a row form one 32-bit pair;
     *   B: kp rows of n pairs, row stride ldb pairs: pair j of row p holds
     *      (B[2p][j], B[2p + 1][j]), the element 2p in the low half;
     *   m <= MR, n <= NR and a multiple of FA_COL_ALIGN, kp >= 0.
     * Each element of C is, with t starting at +0 (at C when accumulating)
     * and for p = 0, 1, ...:
     *      t = ftz(fma(daz(A[2p+1]), daz(B[2p+1]), t));
     *      t = ftz(fma(daz(A[2p]),   daz(B[2p]),   t));
     * (the instruction as Intel's SDM states it: the odd product first,
     * RNE, bf16 subnormal inputs read as zero of the same sign, subnormal
     * sums flushed to zero of the same sign), then c = alpha * t, or c = t
     * when accumulating (alpha must then be 1): a sum split over calls at
     * pair boundaries, the later ones accumulating, is the one-call sum
     * bit for bit, as for gemm. The portable fa_gemm_bf16_ref is that
     * definition; tests compare every kernel with it. */
    void (*gemm_bf16)(int m, int n, int64_t kp, const uint16_t *a, int64_t lda,
                      const uint32_t *b, int64_t ldb, float *c, int64_t ldc, int accumulate,
                      float alpha);

    /* The 8-bit score tile of params.precision FLASHATTN_PRECISION_INT8_QK
     * (SageAttention's Q K^T on VNNI; driver/int8_qk.h quantises):
     *
     *      C[i][j] = fmaf((float)dot(i, j) * bscale[j], ascale[i], add[i])
     *      dot(i, j) = sum over t < 4 k4 of (A[i][t] - 128) * B[t][j]
     *
     *   A: m rows of 4 k4 bytes, row stride lda bytes, each byte q + 128
     *      for a q in [-127, 127] (so never 0: u8 for VNNI's VPDPBUSD);
     *   B: k4 rows of n groups of 4 int8 in [-127, 127], group (p, j) =
     *      B[4p .. 4p + 3][j] at b + 4 (p ldb + j): an nr-key panel has
     *      ldb = nr; bsum[j] = sum over t of B[t][j] (the packer's, so
     *      that VNNI can take A as given and subtract 128 bsum[j]);
     *   m <= MR, n <= NR and a multiple of FA_COL_ALIGN, k4 >= 0 and
     *      4 k4 <= 4 FLASHATTN_MAX_HEAD_DIM (the int32 sums cannot wrap).
     * The integer sum is exact, its conversion to float rounds to nearest
     * even, and each product is rounded as written, so every table gives
     * the same bits (tests/test_kernels.c checks). C is overwritten. A
     * gemm_i8 may keep state between calls as gemm_bf16 does (AMX: the
     * same tiles), which gemm_bf16_done ends. */
    void (*gemm_i8)(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                    int64_t ldb, const int32_t *bsum, const float *bscale, const float *ascale,
                    const float *add, float *c, int64_t ldc);
    /* The 8-bit P V tile of FLASHATTN_PRECISION_INT8_QK_INT8_PV (VNNI's
     * u8 x int8 dot product; driver/int8_qk.h quantises):
     *
     *      C[i][j] = fmaf((float)dot(i, j) * bscale[j], ascale[i],
     *                     accumulate ? C[i][j] : 0)
     *      dot(i, j) = sum over t < 4 k4 of A[i][t] * B[t][j]
     *
     *   A: m rows of 4 k4 bytes, any u8 (P's weights), row stride lda;
     *   B: as gemm_i8's, k4 rows of n groups of 4 int8 in [-127, 127]
     *      (V's channels as columns, keys down the rows);
     *   m <= MR, n <= NR and a multiple of FA_COL_ALIGN, k4 >= 0 and
     *      4 k4 <= 65536 (the int32 sums cannot wrap).
     * Exact sums and one rounding per written operation, so the same bits
     * from every table (tests/test_kernels.c checks). It may keep state
     * between calls as gemm_i8 does (AMX: the same tiles), which
     * gemm_bf16_done ends. */
    void (*gemm_u8)(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                    int64_t ldb, const float *bscale, const float *ascale, float *c, int64_t ldc,
                    int accumulate);
    /* The 8-bit options' quantisation (core/quant.h's rules, the same bits
     * from every table; driver/int8_qk.c and fwd_block.c call them):
     *   quant_u8      P's row of a kv-block as gemm_u8's A (fa_u8_row);
     *   quant_i8_row  x[i] -= sub[i] in place when sub is not NULL, then
     *                 fa_i8_row(x, n, q, scale): Q's rows, K's rows less
     *                 their chunk's mean;
     *   amax_acc      amax[i] = max(amax[i], bits of |x[i]|) (fa_amax_bits'
     *                 order: NaN and infinity above every finite value);
     *   quant_i8_with q[i] = 0 where inv[i] == 0, else round(x[i] * inv[i])
     *                 to nearest even, clamped to [-127, 127]: V's rows by
     *                 their channels' factors (fa_i8_put, for inv finite). */
    void (*quant_u8)(const float *p, int64_t n, uint8_t *q, int64_t n4, float *scale);
    void (*quant_i8_row)(float *x, const float *sub, int64_t n, int8_t *q, float *scale);
    void (*amax_acc)(const float *x, int64_t n, uint32_t *amax);
    void (*quant_i8_with)(const float *x, const float *inv, int64_t n, int8_t *q);
    /* Which instruction gemm_i8 runs on this CPU, for `flashattn info`: a
     * static string. Without an 8-bit dot product (VNNI, AMX-INT8) the
     * 8-bit path is no faster than the exact one (docs/precision.md). */
    const char *(*gemm_i8_way)(void);

    /* Ends a run of gemm_bf16 (and gemm_i8) calls on the calling thread: a gemm_bf16 may
     * keep state from one call to the next (AMX: the tile configuration,
     * loaded once for a run of calls of one shape instead of once a call),
     * and this frees it, so that nothing is left behind for other code on
     * the thread (a user's own AMX code, say); a no-op when gemm_bf16
     * keeps none. Whoever calls gemm_bf16 calls this before the thread leaves
     * the library: the drivers at the end of every work item. Results
     * never depend on where runs begin or end. */
    void (*gemm_bf16_done)(void);
    /* Dropout of n elements of row `row` from column j0 (any j0 >= 0):
     * x[t] = keep(j0 + t) ? x[t] * scale : 0, keep as core/philox.h
     * defines it for key, row and offset. Every table gives the same
     * bits (one rounding of x * scale), whatever n, j0 or SIMD width. */
    void (*dropout_row)(float *x, int64_t n, const uint32_t key[2], uint32_t row, uint64_t offset,
                        int64_t j0, uint32_t threshold, float scale);
    /* The dropout factors of a block, transposed, as the backward's S^T
     * tiles hold them: z[r * ld + c] = keep(row0 + c, j0 + r) ? scale : 0
     * for r < n keys and c < m rows (any j0 >= 0, rows below 2^32); the
     * same keep as dropout_row, the same bits from every table. */
    void (*dropout_cols)(float *z, int64_t ld, int64_t n, int64_t m, const uint32_t key[2], uint32_t row0,
                         uint64_t offset, int64_t j0, uint32_t threshold, float scale);
    /* 1 only in the non-finite rerun's table (driver/careful.h): its
     * products leave out terms with a zero factor, and the drivers' own
     * elementwise products (dS = P * dP, D = rowsum(dO * O)) must do the
     * same. 0 in every ISA's table. */
    int careful;
} fa_kernels;

/* The tables, one a path of kernels/isa_list.h, each defined by its
 * path's files. A path's table exists only when the compiler could build
 * it (dispatch/isa.h lists those); dispatch also asks its cpu_supported. */
#define FA_ISA(name, automatic, flags) extern const fa_kernels fa_kernels_##name;
#include "kernels/isa_list.h"

#endif /* FA_KERNELS_H */
