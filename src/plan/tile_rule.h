/*
 * The automatic tile rule for the forward pass, as a pure function of the
 * problem, the kernel's register tile and the cache sizes, so tests can
 * feed it synthetic caches. The footprint model and the reasoning are in
 * tile_rule.c; fa_plan_fwd (tiles.c) calls it when the user leaves a tile 0.
 */
#ifndef FA_TILE_RULE_H
#define FA_TILE_RULE_H

#include <stdint.h>

typedef struct fa_tile_query {
    int64_t batch, heads_q, seq_q, seq_k, head_dim;
    int64_t head_dim_v;           /* V's and O's; 0: head_dim */
    int elem_bytes;               /* bytes per element of the packed Q, K, V tiles */
    int pv8;                      /* 1: the 8-bit P V route (precision INT8_QK_INT8_PV): K, V
                                   * and P one byte an element, Q's int8 copy beside its f32
                                   * rows (tile_rule.c) */
    int mr, nr;                   /* the kernel's register tile */
    int64_t l1d_bytes, l2_bytes;  /* per core; 0: unknown */
    int threads;
} fa_tile_query;

/* Bytes one thread touches, by piece (accumulators and S are always f32). */
typedef struct fa_tile_footprint {
    int64_t q_tile;   /* block_m x head_dim */
    int64_t k_block;  /* block_n x head_dim, as nr-key panels */
    int64_t v_block;  /* block_n x head_dim_v_pad */
    int64_t s_tile;   /* block_m x block_n scores, then probabilities */
    int64_t o_acc;    /* block_m x head_dim_v_pad */
    int64_t stats;    /* running max and sum per row */
    int64_t tiles;    /* sum of the above: the per-thread set kept in L2 */
    int64_t qk_step;  /* one K panel + one register tile of Q rows: L1 */
    int64_t pv_step;  /* one nr-wide V column slice + one register tile of P rows: L1 */
} fa_tile_footprint;

void fa_tile_footprint_of(const fa_tile_query *q, int block_m, int block_n, fa_tile_footprint *f);

/* The automatic choice: block_n a multiple of q->nr, independent of
 * q->threads; block_m a multiple of q->mr. */
void fa_tile_rule(const fa_tile_query *q, int *block_m, int *block_n);

/* block_m lowered (in steps of mr, never below mr) until every thread has
 * enough work items; used on the rule's choice and on a tuning file's. */
int fa_tile_fit_threads(const fa_tile_query *q, int block_m);

/* Caches the rule assumes when detection found none. */
#define FA_TILE_DEFAULT_L1D ((int64_t)32 << 10)
#define FA_TILE_DEFAULT_L2 ((int64_t)256 << 10)

/* Fewest rows the rule gives a q-block before masks and thread counts
 * have their say (see tile_rule.c); FA_TILE_STREAM_ROWS when a group's
 * K and V are more than FA_TILE_STREAM_L2 times L2. */
#define FA_TILE_MIN_ROWS 96
#define FA_TILE_STREAM_ROWS 192
#define FA_TILE_STREAM_L2 2

/* Fewest keys in a kv-block where the P.V step still fits L1d (see
 * tile_rule.c). */
#define FA_TILE_MIN_KEYS 256

/* Largest tile side the rule gives. */
#define FA_MAX_TILE_RULE 512

#endif
