/*
 * AMX-BF16 GEMM tile: gemm_bf16's contract (kernels.h) on TDPBF16PS, for
 * m <= 16 rows and n in {16, 32}. No alignment needed.
 *
 * Tiles (palette 1), loaded from the operands where they lie:
 *   tmm0, tmm1  C, columns 0-15 and 16-31: m rows of 16 f32
 *   tmm2        A, 16 pairs of k: m rows of 64 bytes, row stride 2 lda bytes
 *   tmm3, tmm4  B, the same 16 pairs: 16 rows of 16 pairs, stride 4 ldb bytes
 *   tmm5-7      A and B again for the last kp % 16 pairs
 * A and B are already in the layouts TDPBF16PS reads (rows of bf16 pairs;
 * B's row p holds pair p of each column), so nothing is repacked. One
 * TDPBF16PS does m x 16 x 32 multiply-adds (6144 for m = 12), where
 * VDPBF16PS does 32 (their measured rates: docs/performance.md).
 *
 * The configuration depends only on m and kp % 16, which are the same for
 * almost every call of a work item (full strips of mr rows, whole chunks of
 * pairs), so it is loaded only when they change and kept until
 * gemm_bf16_done() releases the tiles at the end of the item: a configure
 * and a release in every call cost about twice the call itself. A
 * thread-local key records what this thread has
 * loaded; done() releases the tiles and clears it, so the calling thread
 * may run other AMX code between items (a user's oneDNN, say): no
 * configuration is assumed across them and none is left behind.
 *
 * Arithmetic: per output element, pairs in increasing order, bf16 inputs
 * read as zero when subnormal, sums flushed to zero, round to nearest even,
 * whatever MXCSR says. The SDM's pseudo-code adds a pair's even product
 * first, VDPBF16PS's the odd one; the hardware may do either (the SDM
 * does not promise an order), so tests hold this kernel to the any-order
 * bound. Without accumulation the scale alpha is applied once, after the
 * sum, as on the other tiles.
 *
 * gemm_i8 and gemm_u8 (below) run on the same tiles with TDPBUSD.
 *
 * Built twice: for the library with -mamx-tile -mamx-bf16 -mamx-int8, and for the
 * tests with FA_AMX_EMULATE, where the tile instructions are C functions
 * on eight emulated tiles following the contract's order, so that the
 * configuration, strides, remainders and epilogue are tested bit for bit
 * on CPUs without AMX.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/amx/amx.h"
#include "kernels/avx512/avx512.h"

#ifdef FA_AMX_EMULATE
#include <math.h>

#include "core/dtype.h"

#define FA_GEMM_BF16_AMX fa_gemm_bf16_amx_emulated

typedef struct {
    int rows, colsb;
    uint8_t data[16][64];
} emu_tile;
static _Thread_local emu_tile emu[8];

static float emu_flush(float x) {
    const uint32_t u = fa_f32_bits(x);
    return (u & 0x7f800000u) ? x : fa_bits_f32(u & 0x80000000u);
}

static void emu_config(const fa_tile_config *cfg) {
    for (int t = 0; t < 8; t++) emu[t].rows = cfg->rows[t], emu[t].colsb = cfg->colsb[t];
}

static void emu_zero(int t) { memset(emu[t].data, 0, sizeof emu[t].data); }

static void emu_load(int t, const void *base, int64_t stride) {
    emu_zero(t);
    for (int r = 0; r < emu[t].rows; r++)
        memcpy(emu[t].data[r], (const char *)base + r * stride, (size_t)emu[t].colsb);
}

static void emu_store(int t, void *base, int64_t stride) {
    for (int r = 0; r < emu[t].rows; r++)
        memcpy((char *)base + r * stride, emu[t].data[r], (size_t)emu[t].colsb);
}

/* The contract's order (kernels.h): a pair's odd product first. */
static void emu_dp(int c, int a, int b) {
    for (int m = 0; m < emu[c].rows; m++)
        for (int n = 0; n < emu[c].colsb / 4; n++) {
            float t;
            memcpy(&t, &emu[c].data[m][4 * n], 4);
            for (int k = 0; k < emu[a].colsb / 4; k++) {
                uint16_t ap[2], bp[2];
                memcpy(ap, &emu[a].data[m][4 * k], 4);
                memcpy(bp, &emu[b].data[k][4 * n], 4);
                t = emu_flush(fmaf(emu_flush(fa_bf16_to_f32(ap[1])), emu_flush(fa_bf16_to_f32(bp[1])), t));
                t = emu_flush(fmaf(emu_flush(fa_bf16_to_f32(ap[0])), emu_flush(fa_bf16_to_f32(bp[0])), t));
            }
            memcpy(&emu[c].data[m][4 * n], &t, 4);
        }
}

/* TDPBUSD: u8 A against int8 B, exact int32 sums (gemm_i8's tile). */
static void emu_dpbusd(int c, int a, int b) {
    for (int m = 0; m < emu[c].rows; m++)
        for (int n = 0; n < emu[c].colsb / 4; n++) {
            int32_t t;
            memcpy(&t, &emu[c].data[m][4 * n], 4);
            for (int k = 0; k < emu[a].colsb / 4; k++)
                for (int x = 0; x < 4; x++)
                    t += (int32_t)emu[a].data[m][4 * k + x] * (int32_t)(int8_t)emu[b].data[k][4 * n + x];
            memcpy(&emu[c].data[m][4 * n], &t, 4);
        }
}

/* Release returns the tiles to their initial state, configuration
 * included: a call that wrongly skipped configuring would then load
 * nothing and fail the tests. */
static void emu_release(void) {
    for (int t = 0; t < 8; t++) emu[t].rows = emu[t].colsb = 0;
}

#define FA_GEMM_BF16_AMX_DONE fa_gemm_bf16_amx_emulated_done
#define TILE_CONFIG(cfg) emu_config(cfg)
#define TILE_RELEASE() emu_release()
#define TILE_ZERO(t) emu_zero(t)
#define TILE_LOAD(t, base, stride) emu_load(t, base, stride)
#define TILE_STORE(t, base, stride) emu_store(t, base, stride)
#define TILE_DP(c, a, b) emu_dp(c, a, b)
#define TILE_DPBUSD(c, a, b) emu_dpbusd(c, a, b)
#define FA_GEMM_I8_AMX fa_gemm_i8_amx_emulated
#define FA_GEMM_U8_AMX fa_gemm_u8_amx_emulated
#else
#define FA_GEMM_BF16_AMX fa_gemm_bf16_amx
#define FA_GEMM_BF16_AMX_DONE fa_gemm_bf16_amx_done
#define TILE_CONFIG(cfg) _tile_loadconfig(cfg)
#define TILE_RELEASE() _tile_release()
#define TILE_ZERO(t) _tile_zero(t)
#define TILE_LOAD(t, base, stride) _tile_loadd(t, base, stride)
#define TILE_STORE(t, base, stride) _tile_stored(t, base, stride)
#define TILE_DP(c, a, b) _tile_dpbf16ps(c, a, b)
#define TILE_DPBUSD(c, a, b) _tile_dpbusd(c, a, b)
#define FA_GEMM_I8_AMX fa_gemm_i8_amx_tiles
#define FA_GEMM_U8_AMX fa_gemm_u8_amx_tiles
#endif

/* The (m, kp % 16) whose configuration this thread has loaded, as
 * m * 16 + kp % 16; -1: none (tiles released or never used). */
static _Thread_local int loaded = -1;

void FA_GEMM_BF16_AMX_DONE(void) {
    if (loaded >= 0) {
        TILE_RELEASE();
        loaded = -1;
    }
}

#ifdef FA_AMX_EMULATE
/* Tests: whether this thread still holds a configuration. */
int fa_gemm_bf16_amx_emulated_loaded(void) { return loaded >= 0; }
#endif

/* The tiles for m rows and a last chunk of `rest` 4-byte groups (pairs
 * of bf16 or quads of int8: the same shapes), loaded only when they
 * change: gemm_bf16 and gemm_i8 share them. */
static void configure(int m, int rest) {
    if (m * 16 + rest == loaded) return;
    fa_tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t <= 2; t++) cfg.rows[t] = (uint8_t)m, cfg.colsb[t] = 64; /* C0, C1, A */
    cfg.rows[3] = cfg.rows[4] = 16, cfg.colsb[3] = cfg.colsb[4] = 64;
    if (rest) {
        cfg.rows[5] = (uint8_t)m, cfg.colsb[5] = (uint16_t)(4 * rest);
        cfg.rows[6] = cfg.rows[7] = (uint8_t)rest, cfg.colsb[6] = cfg.colsb[7] = 64;
    }
    TILE_CONFIG(&cfg);
    loaded = m * 16 + rest;
}

void FA_GEMM_BF16_AMX(int m, int n, int64_t kp, const uint16_t *a, int64_t lda, const uint32_t *b,
                      int64_t ldb, float *c, int64_t ldc, int accumulate, float alpha) {
    FA_KERNEL_CONTRACT(m >= 0 && m <= FA_AVX512_MR && n >= 0 && n <= FA_AVX512_NR &&
                       n % FA_COL_ALIGN == 0 && kp >= 0 && (!accumulate || alpha == 1.0f));
    if (m <= 0 || (n != 16 && n != 32)) return;
    const int two = n == 32;
    const int64_t full = kp / 16, rest = kp % 16;
    const int64_t sa = lda * 2, sb = ldb * 4, sc = ldc * 4;

    configure(m, (int)rest);

    if (accumulate) {
        TILE_LOAD(0, c, sc);
        if (two) TILE_LOAD(1, c + 16, sc);
    } else {
        TILE_ZERO(0);
        if (two) TILE_ZERO(1);
    }
    /* Pairs [16 ch, 16 ch + 16) (fewer in the last) on tiles A, B0, B1:
     * a macro, as tile numbers must be literals. */
#define CHUNK(A, B0, B1, ch)                                                                      \
    do {                                                                                          \
        const uint32_t *bp = b + (ch) * 16 * ldb;                                                 \
        TILE_LOAD(A, a + (ch) * 32, sa);                                                          \
        TILE_LOAD(B0, bp, sb);                                                                    \
        TILE_DP(0, A, B0);                                                                        \
        if (two) {                                                                                \
            TILE_LOAD(B1, bp + 16, sb);                                                           \
            TILE_DP(1, A, B1);                                                                    \
        }                                                                                         \
    } while (0)
    for (int64_t ch = 0; ch < full; ch++) CHUNK(2, 3, 4, ch);
    if (rest) CHUNK(5, 6, 7, full);
#undef CHUNK
    TILE_STORE(0, c, sc);
    if (two) TILE_STORE(1, c + 16, sc);

    if (!accumulate && alpha != 1.0f) {
        const __m512 al = _mm512_set1_ps(alpha);
        for (int i = 0; i < m; i++) {
            float *row = c + i * ldc;
            _mm512_storeu_ps(row, _mm512_mul_ps(al, _mm512_loadu_ps(row)));
            if (two) _mm512_storeu_ps(row + 16, _mm512_mul_ps(al, _mm512_loadu_ps(row + 16)));
        }
    }
}

/* The 8-bit tiles' shared part (gemm_i8's and gemm_u8's): acc[i][j] = the
 * exact int32 sum over k4 quads of A's u8 row i times B's int8 column j,
 * 16 quads a TDPBUSD, for m rows and 16 or (two) 32 columns. */
static void dpbusd_sums(int m, int two, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                        int64_t ldb, int32_t acc[][32]) {
    const int64_t full = k4 / 16, rest = k4 % 16, sb = ldb * 4;
    configure(m, (int)rest);
    TILE_ZERO(0);
    if (two) TILE_ZERO(1);
#define CHUNK(A, B0, B1, ch)                                                                      \
    do {                                                                                          \
        const int8_t *bp = b + (ch) * 16 * sb;                                                    \
        TILE_LOAD(A, a + (ch) * 64, lda);                                                         \
        TILE_LOAD(B0, bp, sb);                                                                    \
        TILE_DPBUSD(0, A, B0);                                                                    \
        if (two) {                                                                                \
            TILE_LOAD(B1, bp + 64, sb);                                                           \
            TILE_DPBUSD(1, A, B1);                                                                \
        }                                                                                         \
    } while (0)
    for (int64_t ch = 0; ch < full; ch++) CHUNK(2, 3, 4, ch);
    if (rest) CHUNK(5, 6, 7, full);
#undef CHUNK
    TILE_STORE(0, acc, 32 * sizeof(int32_t));
    if (two) TILE_STORE(1, &acc[0][16], 32 * sizeof(int32_t));
}

/* gemm_i8 (kernels.h) on AMX-INT8's TDPBUSD: the same tiles as above, A's
 * u8 rows (16 quads a chunk) against B's int8 panel rows, exact int32
 * sums stored to a buffer, then the AVX-512 epilogue: 128 bsum off, the
 * conversion and the scales, each rounded once, so the portable kernel's
 * bits. One TDPBUSD does m x 16 x 64 multiply-adds. */
void FA_GEMM_I8_AMX(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                    int64_t ldb, const int32_t *bsum, const float *bscale, const float *ascale,
                    const float *add, float *c, int64_t ldc) {
    FA_KERNEL_CONTRACT(m >= 0 && m <= FA_AVX512_MR && (n == 0 || n == 16 || n == 32) && k4 >= 0 &&
                       k4 <= FLASHATTN_MAX_HEAD_DIM);
    if (m <= 0 || (n != 16 && n != 32)) return;
    int32_t acc[FA_AVX512_MR][32];
    dpbusd_sums(m, n == 32, k4, a, lda, b, ldb, acc);
    for (int j = 0; j < n; j += 16) {
        const __m512i off = _mm512_slli_epi32(_mm512_loadu_si512((const void *)(bsum + j)), 7);
        const __m512 bs = _mm512_loadu_ps(bscale + j);
        for (int i = 0; i < m; i++) {
            const __m512i dot = _mm512_sub_epi32(_mm512_loadu_si512((const void *)&acc[i][j]), off);
            const __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(dot), bs);
            _mm512_storeu_ps(c + i * ldc + j, _mm512_fmadd_ps(u, _mm512_set1_ps(ascale[i]), _mm512_set1_ps(add[i])));
        }
    }
}

/* gemm_u8 (kernels.h) on TDPBUSD: gemm_i8's tiles with P's u8 rows as A
 * (no offset to take off, 16 quads of keys a chunk) against V's int8
 * panel rows, then the epilogue into C, overwriting or accumulating. */
void FA_GEMM_U8_AMX(int m, int n, int64_t k4, const uint8_t *a, int64_t lda, const int8_t *b,
                    int64_t ldb, const float *bscale, const float *ascale, float *c, int64_t ldc,
                    int accumulate) {
    FA_KERNEL_CONTRACT(m >= 0 && m <= FA_AVX512_MR && (n == 0 || n == 16 || n == 32) && k4 >= 0 &&
                       4 * k4 <= 65536);
    if (m <= 0 || (n != 16 && n != 32)) return;
    int32_t acc[FA_AVX512_MR][32];
    dpbusd_sums(m, n == 32, k4, a, lda, b, ldb, acc);
    for (int j = 0; j < n; j += 16) {
        const __m512 bs = _mm512_loadu_ps(bscale + j);
        for (int i = 0; i < m; i++) {
            const __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512((const void *)&acc[i][j])), bs);
            const __m512 old = accumulate ? _mm512_loadu_ps(c + i * ldc + j) : _mm512_setzero_ps();
            _mm512_storeu_ps(c + i * ldc + j, _mm512_fmadd_ps(u, _mm512_set1_ps(ascale[i]), old));
        }
    }
}
