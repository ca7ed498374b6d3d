/*
 * Every point runs on the same inputs and one workspace sized for the
 * largest point, first touched by a warm-up run, so the points differ only
 * in their tiles. The repetitions are rounds over all points, and each
 * point keeps its best round: on a shared machine a burst of other work
 * then slows one round of every point rather than every round of a few.
 * The minimum over many noisy points is biased low (the fastest point is
 * partly the luckiest), so the sweep only screens: the three fastest and
 * the automatic choice are then timed afresh, in alternating rounds, and
 * their times come from those rounds alone.
 * Beside wall time, each point records the process's CPU time divided by
 * the threads: time the threads were preempted does not count there (time
 * they spun waiting for each other does), so it is the steadier figure
 * when the machine is busy; the two agree on a quiet one.
 *
 * The error column needs an FP64 reference, which costs O(seq^2 d) per
 * head in double precision: it is computed on a few blocks of rows (first,
 * middle, last) instead of all of them. With bottom-right alignment a view
 * of rows [i0, i0 + r) over the first i0 + r keys (causal) or all keys
 * sees exactly the keys the full problem's rows see.
 */
#include "tune_sweep.h"

#include <math.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "reference/attn_f64.h"
#include "reference/attn_std_f32.h"
#include "reference/random.h"
#include "timing.h"

#define SAMPLE_ROWS 16
#define SAMPLE_BLOCKS 3

typedef struct {
    int64_t i0, r;
    double *ref; /* [batch, r, heads, head_dim] */
} sample;

static flashattn_tensor alloc_bshd(const shape_args *s, flashattn_dtype dt) {
    size_t n = (size_t)(s->batch * s->seq * s->heads * s->head_dim) * flashattn_dtype_size(dt);
    return flashattn_tensor_bshd(malloc(n), dt, s->batch, s->seq, s->heads, s->head_dim);
}

/* Rows [i0, i0 + r) of t, and its first `len` rows when r is 0. */
static flashattn_tensor rows(const flashattn_tensor *t, int64_t i0, int64_t len) {
    flashattn_tensor v = *t;
    const size_t es = flashattn_dtype_size(t->dtype);
    v.data = (char *)t->data + (size_t)(i0 * t->stride_seq) * es;
    v.seqlen = len;
    return v;
}

/* FP64 references of the sampled rows; *plain_err gets the error of plain
 * f32 standard attention (O rounded to out_dtype) on the same rows. */
static int make_samples(const shape_args *s, const flashattn_tensor *q, const flashattn_tensor *k,
                        const flashattn_tensor *v, const flashattn_params *p, flashattn_dtype out_dtype,
                        sample *sm, double *plain_err) {
    const int64_t r = s->seq < SAMPLE_ROWS ? s->seq : SAMPLE_ROWS;
    const int64_t starts[SAMPLE_BLOCKS] = {0, (s->seq - r) / 2, s->seq - r};
    const size_t count = (size_t)(s->batch * r * s->heads * s->head_dim);
    double *plain = malloc(count * sizeof(double));
    int n = 0;
    *plain_err = 0.0;
    for (int i = 0; i < SAMPLE_BLOCKS && plain; i++) {
        if (n > 0 && starts[i] < sm[n - 1].i0 + sm[n - 1].r) continue; /* overlaps: short seq */
        const int64_t keys = s->causal ? starts[i] + r : s->seq;
        flashattn_tensor qv = rows(q, starts[i], r), kv = rows(k, 0, keys), vv = rows(v, 0, keys);
        sm[n].i0 = starts[i], sm[n].r = r;
        sm[n].ref = malloc(count * sizeof(double));
        if (!sm[n].ref || fa_reference_fwd_f64(&qv, &kv, &vv, p, sm[n].ref, NULL) != FLASHATTN_OK ||
            fa_reference_std_f32(&qv, &kv, &vv, p, out_dtype, plain) != FLASHATTN_OK)
            break;
        for (size_t j = 0; j < count; j++) {
            const double e = fabs(plain[j] - sm[n].ref[j]);
            if (!(e <= *plain_err)) *plain_err = e;
        }
        n++;
    }
    const int ok = plain && (n == SAMPLE_BLOCKS || (n > 0 && sm[n - 1].i0 + r >= s->seq));
    free(plain);
    return ok ? n : -1;
}

static double sample_err(const shape_args *s, const flashattn_tensor *o, const sample *sm, int n) {
    double m = 0.0;
    for (int i = 0; i < n; i++) {
        const double *ref = sm[i].ref;
        for (int64_t b = 0; b < s->batch; b++)
            for (int64_t t = 0; t < sm[i].r; t++)
                for (int64_t h = 0; h < s->heads; h++)
                    for (int64_t c = 0; c < s->head_dim; c++) {
                        double e = fabs(fa_tensor_get(o, b, sm[i].i0 + t, h, c) - *ref++);
                        if (!(e <= m)) m = e; /* NaN sticks */
                    }
    }
    return m;
}

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One timed run of point t; 0, or -1 when the forward call failed. */
static int time_once(const flashattn_tensor *q, const flashattn_tensor *k,
                     const flashattn_tensor *v, const flashattn_tensor *o, flashattn_params *p,
                     void *ws, size_t ws_bytes, tune_point *t) {
    p->block_m = t->block_m, p->block_n = t->block_n;
    const double w0 = fa_cli_seconds(), c0 = cpu_seconds();
    if (flashattn_fwd(q, k, v, o, NULL, p, ws, ws_bytes) != FLASHATTN_OK) return -1;
    const double ms = 1e3 * (fa_cli_seconds() - w0), cpu = 1e3 * (cpu_seconds() - c0) / p->num_threads;
    if (t->ms < 0 || ms < t->ms) t->ms = ms;
    if (t->cpu_ms < 0 || cpu < t->cpu_ms) t->cpu_ms = cpu;
    return 0;
}

/* Mark the three fastest points and the automatic one for confirmation. */
static void pick_contenders(tune_point *pts, int n) {
    for (int k = 0; k < 3; k++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (pts[i].ms >= 0 && !pts[i].confirmed && (best < 0 || pts[i].ms < pts[best].ms)) best = i;
        if (best >= 0) pts[best].confirmed = 1;
    }
    for (int i = 0; i < n; i++) {
        pts[i].confirmed |= pts[i].is_auto && pts[i].ms >= 0;
        if (pts[i].confirmed) pts[i].ms = pts[i].cpu_ms = -1.0;
    }
}

int tune_sweep(const shape_args *s, flashattn_dtype out_dtype, double sigma, int reps, int confirm,
               tune_point *pts, int n, tune_info *info) {
    uint64_t seed = 0x7117e5;
    int rc = -1, ns = 0;
    sample sm[SAMPLE_BLOCKS];
    void *ws = NULL;
    size_t ws_max = 0;
    flashattn_tensor q = alloc_bshd(s, s->dtype), k = alloc_bshd(s, s->dtype),
                     v = alloc_bshd(s, s->dtype), o = alloc_bshd(s, out_dtype);
    flashattn_params p = flashattn_params_default();
    p.causal = s->causal;
    p.num_threads = s->threads;
    memset(sm, 0, sizeof sm);
    if (!q.data || !k.data || !v.data || !o.data) goto done;
    fa_fill_normal(&q, &seed, sigma);
    fa_fill_normal(&k, &seed, sigma);
    fa_fill_normal(&v, &seed, 1.0);
    const double n_d = (double)s->seq;
    info->flops = 4.0 * (double)(s->batch * s->heads * s->head_dim) *
                  (s->causal ? n_d * (n_d + 1.0) / 2.0 : n_d * n_d);
    if ((ns = make_samples(s, &q, &k, &v, &p, out_dtype, sm, &info->plain_err)) < 0) goto done;
    info->sampled_rows = 0;
    for (int i = 0; i < ns; i++) info->sampled_rows += (int)sm[i].r;

    for (int i = 0; i < n; i++) {
        p.block_m = pts[i].block_m, p.block_n = pts[i].block_n;
        pts[i].ms = pts[i].cpu_ms = -1.0;
        pts[i].status = flashattn_fwd_workspace_size(&q, &k, &v, &o, NULL, &p, &pts[i].workspace);
        if (pts[i].status) snprintf(pts[i].why, sizeof pts[i].why, "%s", flashattn_last_error());
        else if (pts[i].workspace > ws_max) ws_max = pts[i].workspace;
    }
    if (!(ws = malloc(ws_max ? ws_max : 1))) goto done;
    for (int round = 0, warm = 0; round < reps + confirm; round++) {
        if (round == reps && confirm > 0) pick_contenders(pts, n);
        for (int i = 0; i < n; i++) {
            if (pts[i].status || (round >= reps && !pts[i].confirmed)) continue;
            if (!warm++) {
                tune_point w = pts[i];
                time_once(&q, &k, &v, &o, &p, ws, ws_max, &w);
            }
            if (time_once(&q, &k, &v, &o, &p, ws, ws_max, &pts[i])) {
                pts[i].status = FLASHATTN_ERR_UNSUPPORTED;
                pts[i].ms = -1.0;
                snprintf(pts[i].why, sizeof pts[i].why, "%s", flashattn_last_error());
            } else if (round == reps - 1) {
                pts[i].max_err = sample_err(s, &o, sm, ns);
            }
        }
    }
    rc = 0;
done:
    if (rc) fprintf(stderr, "flashattn tune: not enough memory for this shape\n");
    for (int i = 0; i < SAMPLE_BLOCKS; i++) free(sm[i].ref);
    free(ws), free(q.data), free(k.data), free(v.data), free(o.data);
    return rc;
}
