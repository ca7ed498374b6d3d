#include "plan_model.h"

/* Keys query row i sees with bottom-right alignment: [0, end(i)). */
static int64_t visible_end(const plan_input *in, int64_t i) {
    if (!in->causal) return in->seq_k;
    int64_t end = i + in->seq_k - in->seq_q + 1;
    return end < 0 ? 0 : end > in->seq_k ? in->seq_k : end;
}

void plan_count(const plan_input *in, plan_counts *out) {
    const int64_t bm = in->block_m, bn = in->block_n, d = in->head_dim, dp = in->head_dim_pad;
    const double heads = (double)(in->batch * in->heads), kv_heads = (double)(in->batch * in->heads_kv);
    out->q_tile = bm * d * in->tile_bytes;
    out->kv_tiles = (int64_t)in->kv_buffers * bn * (d + dp) * in->tile_bytes;
    out->s_tile = bm * bn * 4;
    out->o_acc = bm * dp * 4;
    out->stats = 2 * bm * 4;

    double pairs = 0.0, streamed = 0.0;
    for (int64_t i = 0; i < in->seq_q; i++) pairs += (double)visible_end(in, i);
    for (int64_t i0 = 0; i0 < in->seq_q; i0 += bm) {
        const int64_t last = i0 + bm < in->seq_q ? i0 + bm - 1 : in->seq_q - 1;
        int64_t keys = (visible_end(in, last) + bn - 1) / bn * bn;
        streamed += (double)(keys < in->seq_k ? keys : in->seq_k);
    }
    out->visible_pairs = heads * pairs;
    out->flops = 4.0 * out->visible_pairs * (double)d;

    const double sq = (double)in->seq_q, sk = (double)in->seq_k, dd = (double)d;
    out->bytes_standard = heads * (2.0 * (sq + sk) * dd * in->in_bytes + 4.0 * sq * sk * in->in_bytes);
    out->bytes_flash = heads * (2.0 * sq * dd * in->in_bytes +
                                streamed * (double)(d + dp) * in->kv_stream_bytes);
    if (in->pack_kv)
        out->bytes_flash += kv_heads * sk * (2.0 * dd * in->in_bytes + (double)(d + dp) * in->kv_stream_bytes);
}

double plan_roofline(double flops, double bytes, double peak_flops, double bytes_per_s) {
    const double tc = flops / peak_flops, tm = bytes / bytes_per_s;
    return tc > tm ? tc : tm;
}
