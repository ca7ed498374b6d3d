/*
 * The analytic model behind `flashattn plan`: one forward pass, counted.
 *
 * On-chip footprint of one core's work item (bytes):
 *   Q tile       block_m x head_dim x tile_bytes
 *   K, V tiles   kv_buffers x block_n x (head_dim + head_dim_pad) x tile_bytes
 *   S/P tile     block_m x block_n x 4          (f32 scores, then probabilities)
 *   O acc        block_m x head_dim_pad x 4     (f32 accumulator)
 *   stats        2 x block_m x 4                (running max and sum per row)
 * With kv_buffers 1, tile_bytes 4 and head_dim_pad rounded to 16 this is
 * plan/tile_rule.c's per-thread footprint, the one the CPU rule fits to L2.
 *
 * Off-chip bytes (memory outside the on-chip buffers), per pass:
 *   standard  every (batch, query head) reads Q and K, writes S, reads S
 *             and writes P (softmax), reads P and V, writes O, with S and P
 *             stored in the input dtype and never masked away:
 *                 2 (seq_q + seq_k) head_dim x in_bytes + 4 seq_q seq_k x in_bytes
 *   flash     Q read and O written once; each q-block reads the K and V
 *             rows it can see (up to its causal diagonal, rounded up to
 *             whole kv-blocks) in kv_stream_bytes per element; with
 *             pack_kv, K and V are first read once in the input dtype and
 *             written back packed (the CPU path packs to f32 panels).
 * FLOPs: 4 x batch x heads x visible (query, key) pairs x head_dim, the
 * FlashAttention convention (both tile products; exp and scaling not
 * counted); the same for both methods.
 * Roofline time: max(FLOPs / peak, bytes / bandwidth).
 */
#ifndef FA_CLI_PLAN_MODEL_H
#define FA_CLI_PLAN_MODEL_H

#include <stdint.h>

typedef struct {
    int64_t batch, heads, heads_kv, seq_q, seq_k, head_dim, head_dim_pad;
    int causal;          /* bottom-right aligned, as flashattn_fwd's default */
    int in_bytes;        /* Q, K, V, O elements in memory */
    int tile_bytes;      /* Q, K, V tile elements on chip */
    int kv_stream_bytes; /* K, V elements as the q-blocks re-read them */
    int pack_kv;         /* K, V repacked once before the pass */
    int kv_buffers;      /* K/V tiles resident at once (2: double-buffered) */
    int block_m, block_n;
} plan_input;

typedef struct {
    int64_t q_tile, kv_tiles, s_tile, o_acc, stats; /* on-chip bytes per core */
    double visible_pairs, flops;
    double bytes_standard, bytes_flash;
} plan_counts;

void plan_count(const plan_input *in, plan_counts *out);

/* max(flops / peak_flops, bytes / bytes_per_s), in seconds. */
double plan_roofline(double flops, double bytes, double peak_flops, double bytes_per_s);

#endif
