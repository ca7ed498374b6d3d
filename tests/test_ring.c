/*
 * Ring attention over MPI (include/flashattn_mpi.h), run under mpiexec
 * with 1, 2 and 4 ranks. Every rank builds the same whole tensors (one
 * seed), runs the ring on its shard, and the shards' results are gathered
 * (each row is written by exactly one rank, the rest are 0: a bitwise OR
 * over the ranks assembles them). Checked: O and LSE against the FP64
 * reference under the forward's rule, the gradients under the backward's
 * (tt_grad_pass), and O against flashattn_fwd's on the whole sequence;
 * both layouts, causal or not, GQA/MQA, f32/f16/bf16, uneven and empty
 * shards, slices within a shard; runs repeat bit for bit on 1 and 2
 * threads a rank; one rank alone gives flashattn_fwd's bits; and bad input on one
 * rank makes every rank return the same status with nothing written.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flashattn_mpi.h"
#include "mpi/ring.h"
#include "reference/attn_bwd_f64.h"
#include "reference/attn_bwd_std_f32.h"
#include "reference/attn_f64.h"
#include "reference/compare.h"
#include "testutil.h"

static int ranks, rank;

typedef struct {
    flashattn_ring_layout layout;
    int64_t seq, batch, hq, hkv, d;
    int causal;
    flashattn_dtype dt;
    int uneven;    /* contiguous only: shards of unequal rows, some empty */
    float softcap;
} rcase;

/* This rank's runs of rows (start, len, shard row) under the case's split. */
static int runs_of(const rcase *c, int r, ring_run run[2]) {
    if (!c->uneven) {
        int n;
        ring_layout_runs(c->layout, c->seq, ranks, r, run, &n);
        return n;
    }
    /* weights (r + 1) % 3: 1, 2, 0, 1, ... (an empty shard from 4 ranks) */
    int64_t wsum = 0, before = 0;
    for (int i = 0; i < ranks; i++) wsum += (i + 1) % 3;
    for (int i = 0; i < r; i++) before += (i + 1) % 3;
    const int64_t a = c->seq * before / wsum, b = r == ranks - 1 ? c->seq : c->seq * (before + (r + 1) % 3) / wsum;
    run[0] = (ring_run){a, b - a, 0};
    return 1;
}

static int64_t rows_of(const rcase *c, int r) {
    ring_run run[2];
    const int n = runs_of(c, r, run);
    return run[0].len + (n > 1 ? run[1].len : 0);
}

static void to_shard(const rcase *c, const flashattn_tensor *whole, const flashattn_tensor *shard) {
    ring_run run[2];
    const int n = runs_of(c, rank, run);
    for (int i = 0; i < n; i++) ring_copy_rows(whole, run[i].start, shard, run[i].row, run[i].len);
}

/* shard's rows into whole (zero elsewhere), then every rank's: whole on every rank. */
static void gather(const rcase *c, const flashattn_tensor *shard, tt_tensor *whole) {
    ring_run run[2];
    const int n = runs_of(c, rank, run);
    memset(whole->mem, 0, whole->bytes);
    for (int i = 0; i < n; i++) ring_copy_rows(shard, run[i].row, &whole->t, run[i].start, run[i].len);
    MPI_Allreduce(MPI_IN_PLACE, whole->mem, (int)whole->bytes, MPI_BYTE, MPI_BOR, MPI_COMM_WORLD);
}

static void gather_lse(const rcase *c, const float *shard, float *whole) {
    ring_run run[2];
    const int n = runs_of(c, rank, run);
    const int64_t rows = rows_of(c, rank), bh = c->batch * c->hq;
    memset(whole, 0, sizeof(float) * (size_t)(bh * c->seq));
    for (int64_t x = 0; x < bh; x++)
        for (int i = 0; i < n; i++)
            memcpy(whole + x * c->seq + run[i].start, shard + x * rows + run[i].row, sizeof(float) * (size_t)run[i].len);
    MPI_Allreduce(MPI_IN_PLACE, whole, (int)(sizeof(float) * (size_t)(bh * c->seq)), MPI_BYTE, MPI_BOR,
                  MPI_COMM_WORLD);
}

static flashattn_ring ring_of(const rcase *c, flashattn_ring_stats *st) {
    flashattn_ring r;
    flashattn_ring_init(&r);
    r.layout = c->layout;
    r.seq_total = c->uneven ? 0 : c->seq;
    r.stats = st;
    return r;
}

static flashattn_params params_of(const rcase *c) {
    flashattn_params p;
    flashattn_params_init(&p);
    p.causal = c->causal;
    p.softcap = c->softcap;
    return p;
}

static void describe(const rcase *c, char *buf, size_t n) {
    static const char *dtn[] = {"f32", "f16", "bf16"};
    snprintf(buf, n, "%d ranks, %s%s, seq %lld, batch %lld, heads %lld/%lld, d %lld, %s, %s%s", ranks,
             c->layout == FLASHATTN_RING_ZIGZAG ? "zigzag" : "contiguous", c->uneven ? " (uneven)" : "",
             (long long)c->seq, (long long)c->batch, (long long)c->hq, (long long)c->hkv, (long long)c->d,
             c->causal ? "causal" : "non-causal", dtn[c->dt], c->softcap > 0 ? ", softcap" : "");
}

typedef struct {
    tt_tensor q, k, v, o, dq, dk, dv, dout;
    float *lse;
} shard_set;

static shard_set shards_alloc(const rcase *c) {
    shard_set s;
    const int64_t rows = rows_of(c, rank);
    s.q = tt_alloc(c->dt, c->batch, rows, c->hq, c->d, 1, 0);
    s.o = tt_alloc(c->dt, c->batch, rows, c->hq, c->d, 1, 0);
    s.dout = tt_alloc(c->dt, c->batch, rows, c->hq, c->d, 1, 0);
    s.dq = tt_alloc(c->dt, c->batch, rows, c->hq, c->d, 1, 0);
    s.k = tt_alloc(c->dt, c->batch, rows, c->hkv, c->d, 1, 0);
    s.v = tt_alloc(c->dt, c->batch, rows, c->hkv, c->d, 1, 0);
    s.dk = tt_alloc(c->dt, c->batch, rows, c->hkv, c->d, 1, 0);
    s.dv = tt_alloc(c->dt, c->batch, rows, c->hkv, c->d, 1, 0);
    s.lse = malloc(sizeof(float) * (size_t)(c->batch * c->hq * rows + 1));
    return s;
}

static void shards_free(shard_set *s) {
    tt_tensor *all[] = {&s->q, &s->k, &s->v, &s->o, &s->dq, &s->dk, &s->dv, &s->dout};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tt_free(all[i]);
    free(s->lse);
}

static int same_bytes(const tt_tensor *a, const tt_tensor *b) { return a->bytes == b->bytes && !memcmp(a->mem, b->mem, a->bytes); }

static void run_case(const rcase *c) {
    char desc[200];
    describe(c, desc, sizeof desc);
    uint64_t seed = 0x5eed0000u + (uint64_t)c->seq * 31u + (uint64_t)c->d;
    tt_tensor q = tt_alloc(c->dt, c->batch, c->seq, c->hq, c->d, 1, 0);
    tt_tensor k = tt_alloc(c->dt, c->batch, c->seq, c->hkv, c->d, 1, 0);
    tt_tensor v = tt_alloc(c->dt, c->batch, c->seq, c->hkv, c->d, 1, 0);
    tt_tensor dout = tt_alloc(c->dt, c->batch, c->seq, c->hq, c->d, 1, 0);
    tt_fill_normal(&q, &seed, 1.0);
    tt_fill_normal(&k, &seed, 1.0);
    tt_fill_normal(&v, &seed, 1.0);
    tt_fill_normal(&dout, &seed, 1.0);
    const flashattn_params p = params_of(c);
    shard_set s = shards_alloc(c);
    to_shard(c, &q.t, &s.q.t);
    to_shard(c, &k.t, &s.k.t);
    to_shard(c, &v.t, &s.v.t);
    to_shard(c, &dout.t, &s.dout.t);

    flashattn_ring_stats st;
    flashattn_ring ring = ring_of(c, &st);
    flashattn_status e = flashattn_ring_fwd(&ring, &s.q.t, &s.k.t, &s.v.t, &s.o.t, s.lse, &p);
    TT_CHECK(e == FLASHATTN_OK, "ring fwd: %s (%s): %s", flashattn_strerror(e), flashattn_ring_last_error(), desc);
    TT_CHECK(e || st.steps == ranks, "stats.steps %d: %s", st.steps, desc);

    /* the whole results, on every rank */
    const size_t no = (size_t)(c->batch * c->seq * c->hq * c->d), nk = (size_t)(c->batch * c->seq * c->hkv * c->d);
    const size_t nl = (size_t)(c->batch * c->hq * c->seq);
    tt_tensor o = tt_alloc(c->dt, c->batch, c->seq, c->hq, c->d, 1, 0);
    float *lse = malloc(sizeof(float) * (nl + 1));
    gather(c, &s.o.t, &o);
    gather_lse(c, s.lse, lse);

    double *o_ref = malloc(sizeof(double) * (no + 1)), *lse_ref = malloc(sizeof(double) * (nl + 1));
    fa_reference_fwd_f64(&q.t, &k.t, &v.t, &p, o_ref, lse_ref);
    const double bound = tt_fwd_bound(c->dt, &q.t, &k.t, &v.t, &p, o_ref, no);
    const double err = tt_max_abs_err(&o, o_ref);
    int inf_ok;
    const double lerr = fa_lse_err(lse, lse_ref, nl, &inf_ok);
    TT_CHECK(err <= bound, "ring O err %.3g > bound %.3g: %s", err, bound, desc);
    TT_CHECK(lerr <= 1e-5 && inf_ok, "ring LSE err %.3g: %s", lerr, desc);

    /* the single-process call on the whole sequence */
    tt_tensor o1 = tt_alloc(c->dt, c->batch, c->seq, c->hq, c->d, 1, 0);
    float *lse1 = malloc(sizeof(float) * (nl + 1));
    e = flashattn_fwd(&q.t, &k.t, &v.t, &o1.t, lse1, &p, NULL, 0);
    TT_CHECK(e == FLASHATTN_OK, "flashattn_fwd: %s", flashattn_last_error());
    TT_CHECK(tt_max_abs_err(&o1, o_ref) <= bound, "single-process O off the reference: %s", desc);
    double diff = 0.0;
    for (int64_t b = 0; b < c->batch; b++)
        for (int64_t i = 0; i < c->seq; i++)
            for (int64_t h = 0; h < c->hq; h++)
                for (int64_t x = 0; x < c->d; x++) {
                    const double dd = fabs(fa_tensor_get(&o.t, b, i, h, x) - fa_tensor_get(&o1.t, b, i, h, x));
                    if (!(dd <= diff)) diff = dd;
                }
    TT_CHECK(diff <= bound, "ring O differs from flashattn_fwd's by %.3g > %.3g: %s", diff, bound, desc);
    /* One rank with one slice runs flashattn_fwd's one call, merged with
     * nothing: the same bits. */
    if (ranks == 1 && c->seq <= 256 && c->layout == FLASHATTN_RING_CONTIGUOUS)
        TT_CHECK(same_bytes(&o, &o1) && !memcmp(lse, lse1, sizeof(float) * nl),
                 "one rank is not flashattn_fwd bit for bit: %s", desc);

    /* the same call again, on 1 and 2 threads a rank: the same bits */
    tt_tensor o_again = tt_alloc(c->dt, c->batch, rows_of(c, rank), c->hq, c->d, 1, 0);
    for (int th = 1; th <= 2; th++) {
        flashattn_params pt = p;
        pt.num_threads = th;
        e = flashattn_ring_fwd(&ring, &s.q.t, &s.k.t, &s.v.t, &o_again.t, NULL, &pt);
        TT_CHECK(e == FLASHATTN_OK && same_bytes(&o_again, &s.o), "ring fwd rerun on %d threads differs: %s", th,
                 desc);
    }
    tt_free(&o_again);

    /* backward, deterministic, from the ring forward's O and LSE */
    flashattn_params pb = p;
    pb.deterministic = 1;
    e = flashattn_ring_bwd(&ring, &s.q.t, &s.k.t, &s.v.t, &s.o.t, &s.dout.t, s.lse, &s.dq.t, &s.dk.t, &s.dv.t, &pb);
    TT_CHECK(e == FLASHATTN_OK, "ring bwd: %s (%s): %s", flashattn_strerror(e), flashattn_ring_last_error(), desc);
    tt_tensor dq = tt_alloc(c->dt, c->batch, c->seq, c->hq, c->d, 1, 0);
    tt_tensor dk = tt_alloc(c->dt, c->batch, c->seq, c->hkv, c->d, 1, 0);
    tt_tensor dv = tt_alloc(c->dt, c->batch, c->seq, c->hkv, c->d, 1, 0);
    gather(c, &s.dq.t, &dq);
    gather(c, &s.dk.t, &dk);
    gather(c, &s.dv.t, &dv);
    double *ref[3], *plain[3], terms[3];
    const size_t cnt[3] = {no, nk, nk};
    for (int x = 0; x < 3; x++) {
        ref[x] = calloc(cnt[x] + 1, sizeof(double));
        plain[x] = calloc(cnt[x] + 1, sizeof(double));
    }
    fa_reference_bwd_f64(&q.t, &k.t, &v.t, &dout.t, &p, ref[0], ref[1], ref[2]);
    fa_reference_bwd_std_f32(&q.t, &k.t, &v.t, &o1.t, &dout.t, lse1, &p, c->dt, plain[0], plain[1], plain[2], terms);
    const flashattn_tensor *got[3] = {&dq.t, &dk.t, &dv.t};
    static const char *gname[3] = {"dq", "dk", "dv"};
    for (int x = 0; x < 3; x++) {
        tt_grad_errs ge;
        TT_CHECK(tt_grad_pass(got[x], ref[x], plain[x], cnt[x], terms[x], &ge),
                 "ring %s max err %.3g (bound %.3g), rms %.3g (bound %.3g): %s", gname[x], ge.max, ge.max_bound,
                 ge.rms, ge.rms_bound, desc);
    }
    shard_set s2 = shards_alloc(c);
    flashattn_params pb2 = pb;
    pb2.num_threads = 2;
    e = flashattn_ring_bwd(&ring, &s.q.t, &s.k.t, &s.v.t, &s.o.t, &s.dout.t, s.lse, &s2.dq.t, &s2.dk.t, &s2.dv.t,
                           &pb2);
    TT_CHECK(e == FLASHATTN_OK && same_bytes(&s2.dq, &s.dq) && same_bytes(&s2.dk, &s.dk) &&
                 same_bytes(&s2.dv, &s.dv),
             "deterministic ring bwd rerun on 2 threads differs: %s", desc);
    shards_free(&s2);

    for (int x = 0; x < 3; x++) free(ref[x]), free(plain[x]);
    tt_free(&dq), tt_free(&dk), tt_free(&dv);
    free(o_ref), free(lse_ref), free(lse), free(lse1);
    tt_free(&o), tt_free(&o1);
    shards_free(&s);
    tt_free(&q), tt_free(&k), tt_free(&v), tt_free(&dout);
}

/* A status every rank must agree on, with this rank's outputs untouched. */
static void expect_all(flashattn_status got, flashattn_status want, const tt_tensor *out, const char *what) {
    int mine = (int)got, lo, hi;
    MPI_Allreduce(&mine, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    TT_CHECK(got == want && lo == hi, "%s: got %s (ranks %d..%d), want %s; %s", what, flashattn_strerror(got), lo, hi,
             flashattn_strerror(want), flashattn_ring_last_error());
    TT_CHECK(tt_untouched(out->mem, out->bytes), "%s: output written", what);
}

static void check_errors(void) {
    const rcase c = {FLASHATTN_RING_CONTIGUOUS, 64 * ranks, 1, 4, 2, 32, 0, FLASHATTN_F32, 0, 0.0f};
    shard_set s = shards_alloc(&c);
    tt_tensor *in[] = {&s.q, &s.k, &s.v, &s.dout};
    uint64_t seed = 7;
    for (int i = 0; i < 4; i++) tt_fill_normal(in[i], &seed, 1.0);
    flashattn_ring ring = ring_of(&c, NULL);
    flashattn_params p = params_of(&c);
    flashattn_status e;

    tt_fill_sentinel(s.o.mem, s.o.bytes);
    /* the last rank alone has a NULL q: every rank fails */
    e = flashattn_ring_fwd(&ring, rank == ranks - 1 ? NULL : &s.q.t, &s.k.t, &s.v.t, &s.o.t, s.lse, &p);
    expect_all(e, FLASHATTN_ERR_NULL_POINTER, &s.o, "NULL q on the last rank");
    if (ranks > 1) {
        /* the last rank alone has other heads (a shape every check of its own passes) */
        flashattn_tensor q2 = s.q.t, o2 = s.o.t;
        if (rank == ranks - 1) q2.heads = o2.heads = 2;
        e = flashattn_ring_fwd(&ring, &q2, &s.k.t, &s.v.t, &o2, NULL, &p);
        expect_all(e, FLASHATTN_ERR_BAD_SHAPE, &s.o, "heads differ on the last rank");
        flashattn_params pc = p;
        pc.causal = rank == 0;
        e = flashattn_ring_fwd(&ring, &s.q.t, &s.k.t, &s.v.t, &s.o.t, NULL, &pc);
        expect_all(e, FLASHATTN_ERR_BAD_SHAPE, &s.o, "causal on rank 0 only");
    }
    flashattn_params pw = p;
    pw.window_left = 16;
    e = flashattn_ring_fwd(&ring, &s.q.t, &s.k.t, &s.v.t, &s.o.t, NULL, &pw);
    expect_all(e, FLASHATTN_ERR_UNSUPPORTED, &s.o, "a sliding window");
    flashattn_ring bad = ring;
    bad.seq_total = c.seq + 1;
    e = flashattn_ring_fwd(&bad, &s.q.t, &s.k.t, &s.v.t, &s.o.t, NULL, &p);
    expect_all(e, FLASHATTN_ERR_BAD_SHAPE, &s.o, "seq_total not the ranks' rows");
    bad = ring;
    bad.layout = FLASHATTN_RING_ZIGZAG;
    bad.seq_total = c.seq + 2 * ranks; /* every rank then holds 2 rows more than it has */
    e = flashattn_ring_fwd(&bad, &s.q.t, &s.k.t, &s.v.t, &s.o.t, NULL, &p);
    expect_all(e, FLASHATTN_ERR_BAD_SHAPE, &s.o, "zigzag rows that are not the layout's");
    bad = ring;
    bad.layout = (flashattn_ring_layout)7;
    e = flashattn_ring_fwd(&bad, &s.q.t, &s.k.t, &s.v.t, &s.o.t, NULL, &p);
    expect_all(e, FLASHATTN_ERR_BAD_PARAM, &s.o, "an unknown layout");

    /* backward: no LSE on one rank */
    e = flashattn_ring_fwd(&ring, &s.q.t, &s.k.t, &s.v.t, &s.o.t, s.lse, &p);
    TT_CHECK(e == FLASHATTN_OK, "fwd for the backward's errors: %s", flashattn_ring_last_error());
    tt_fill_sentinel(s.dq.mem, s.dq.bytes);
    e = flashattn_ring_bwd(&ring, &s.q.t, &s.k.t, &s.v.t, &s.o.t, &s.dout.t, rank == 0 ? NULL : s.lse, &s.dq.t,
                           &s.dk.t, &s.dv.t, &p);
    expect_all(e, FLASHATTN_ERR_NULL_POINTER, &s.dq, "no LSE on rank 0 (backward)");

    /* size 0: a sequence of no rows at all, or no batch: OK everywhere, nothing to do */
    static const rcase empty[2] = {{FLASHATTN_RING_ZIGZAG, 0, 1, 2, 1, 16, 1, FLASHATTN_F32, 0, 0.0f},
                                   {FLASHATTN_RING_CONTIGUOUS, 0, 0, 2, 1, 16, 0, FLASHATTN_F32, 0, 0.0f}};
    for (int x = 0; x < 2; x++) {
        rcase z = empty[x];
        if (z.batch == 0) z.seq = 8 * ranks; /* rows, but no batch entry */
        shard_set e0 = shards_alloc(&z);
        const flashattn_ring rz = ring_of(&z, NULL);
        const flashattn_params pz = params_of(&z);
        e = flashattn_ring_fwd(&rz, &e0.q.t, &e0.k.t, &e0.v.t, &e0.o.t, e0.lse, &pz);
        if (!e)
            e = flashattn_ring_bwd(&rz, &e0.q.t, &e0.k.t, &e0.v.t, &e0.o.t, &e0.dout.t, e0.lse, &e0.dq.t, &e0.dk.t,
                                   &e0.dv.t, &pz);
        TT_CHECK(e == FLASHATTN_OK, "%s: %s (%s)", x ? "batch 0" : "a sequence of 0 rows", flashattn_strerror(e),
                 flashattn_ring_last_error());
        shards_free(&e0);
    }

    /* the rows rule and the shard helpers */
    int64_t st[2], len[2];
    int runs;
    TT_CHECK(flashattn_ring_rows(FLASHATTN_RING_ZIGZAG, 10, 2, 1, st, len, &runs) == FLASHATTN_OK && runs == 2 &&
                 st[0] == 3 && len[0] == 3 && st[1] == 6 && len[1] == 2,
             "zigzag rows of 10 on rank 1 of 2: %lld+%lld, %lld+%lld", (long long)st[0], (long long)len[0],
             (long long)st[1], (long long)len[1]);
    TT_CHECK(flashattn_ring_rows(FLASHATTN_RING_CONTIGUOUS, 10, 3, 0, st, len, &runs) == FLASHATTN_OK && runs == 1 &&
                 st[0] == 0 && len[0] == 4,
             "contiguous rows of 10 on rank 0 of 3");
    TT_CHECK(flashattn_ring_rows(FLASHATTN_RING_ZIGZAG, INT64_MAX, 1 << 30, (1 << 30) - 1, st, len, &runs) ==
                     FLASHATTN_OK &&
                 st[0] + len[0] == st[1] && st[1] + len[1] <= INT64_MAX - 0,
             "zigzag rows near INT64_MAX");
    TT_CHECK(flashattn_ring_rows(FLASHATTN_RING_ZIGZAG, 10, 2, 2, st, len, &runs) == FLASHATTN_ERR_BAD_PARAM,
             "rank out of range");
    TT_CHECK(flashattn_ring_rows(FLASHATTN_RING_ZIGZAG, -1, 2, 0, st, len, &runs) == FLASHATTN_ERR_BAD_SHAPE,
             "negative seq_total");
    tt_tensor whole = tt_alloc(FLASHATTN_F32, 1, c.seq, c.hq, c.d, 1, 0);
    TT_CHECK(flashattn_ring_shard(&ring, &whole.t, &s.k.t) == FLASHATTN_ERR_BAD_SHAPE, "shard of other heads");
    tt_free(&whole);
    shards_free(&s);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    static const rcase cases[] = {
        {FLASHATTN_RING_CONTIGUOUS, 200, 1, 4, 2, 32, 0, FLASHATTN_F32, 0, 0.0f},
        {FLASHATTN_RING_CONTIGUOUS, 601, 2, 2, 1, 64, 1, FLASHATTN_F32, 0, 0.0f},
        {FLASHATTN_RING_ZIGZAG, 1100, 1, 2, 2, 32, 1, FLASHATTN_F32, 0, 0.0f},
        {FLASHATTN_RING_ZIGZAG, 250, 1, 4, 1, 64, 1, FLASHATTN_BF16, 0, 0.0f},
        {FLASHATTN_RING_CONTIGUOUS, 300, 1, 2, 2, 48, 1, FLASHATTN_F16, 1, 0.0f},
        {FLASHATTN_RING_ZIGZAG, 130, 2, 2, 2, 32, 0, FLASHATTN_F32, 0, 20.0f},
        {FLASHATTN_RING_ZIGZAG, 5, 1, 2, 1, 16, 1, FLASHATTN_F32, 0, 0.0f},
        {FLASHATTN_RING_CONTIGUOUS, 96, 1, 2, 2, 32, 1, FLASHATTN_F32, 1, 0.0f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i]);
    check_errors();
    /* every rank's verdict, so that a failure anywhere fails every rank */
    int failed = tt_failed, any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (any && !tt_failed) tt_failed = 1;
    int rc = rank == 0 ? tt_finish("test_ring") : (tt_failed != 0);
    MPI_Finalize();
    return rc;
}
