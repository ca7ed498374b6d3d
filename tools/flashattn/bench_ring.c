/*
 * `mpirun -np P flashattn bench --ring`: ring attention across P ranks
 * (include/flashattn_mpi.h) against one process on the whole sequence
 * with as many threads as the ranks have together, and how much of the
 * ring's communication its compute hides: each rank's time blocked on
 * transfers (flashattn_ring_stats.wait_seconds) against the same bytes
 * sent around the ring with nothing to compute. Then a model, compute
 * against bytes per step, of the ring sizes and link speeds at which a
 * 1M-token sequence stops hiding them. Only built with MPI.
 */
#define _GNU_SOURCE /* sched_setaffinity */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "flashattn_mpi.h"

typedef struct {
    int64_t seq, heads, heads_kv, d;
    flashattn_dtype dt;
    int causal, bwd, reps, threads, single;
    flashattn_ring_layout layout;
} ring_opts;

static int parse(int argc, char **argv, ring_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        long long x = 0;
        if (!strcmp(a, "--ring")) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (!strcmp(a, "--bwd")) { o->bwd = 1; continue; }
        if (!strcmp(a, "--causal")) { o->causal = 1; continue; }
        if (!strcmp(a, "--no-causal")) { o->causal = 0; continue; }
        if (!strcmp(a, "--no-single")) { o->single = 0; continue; }
        if (!val) {
            fprintf(stderr, "flashattn bench --ring: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--layout") && (!strcmp(val, "zigzag") || !strcmp(val, "contiguous"))) {
            o->layout = !strcmp(val, "zigzag") ? FLASHATTN_RING_ZIGZAG : FLASHATTN_RING_CONTIGUOUS;
            continue;
        }
        if (!strcmp(a, "--dtype") && (!strcmp(val, "f32") || !strcmp(val, "f16") || !strcmp(val, "bf16"))) {
            o->dt = !strcmp(val, "f32") ? FLASHATTN_F32 : !strcmp(val, "f16") ? FLASHATTN_F16 : FLASHATTN_BF16;
            continue;
        }
        if (sscanf(val, "%lld", &x) != 1 || x < 1) {
            fprintf(stderr, "flashattn bench --ring: bad value '%s' for %s\n", val, a);
            return 2;
        }
        if (!strcmp(a, "--seq")) o->seq = x;
        else if (!strcmp(a, "--heads")) o->heads = x;
        else if (!strcmp(a, "--heads-kv")) o->heads_kv = x;
        else if (!strcmp(a, "--head-dim") && x <= FLASHATTN_MAX_HEAD_DIM) o->d = x;
        else if (!strcmp(a, "--reps") && x <= 1000) o->reps = (int)x;
        else if (!strcmp(a, "--threads") && x <= 1024) o->threads = (int)x;
        else {
            fprintf(stderr, "flashattn bench --ring: unknown option or bad value '%s %s'\n", a, val);
            return 2;
        }
    }
    if (!o->heads_kv) o->heads_kv = o->heads;
    if (o->heads % o->heads_kv) {
        fprintf(stderr, "flashattn bench --ring: --heads must be a multiple of --heads-kv\n");
        return 2;
    }
    return 0;
}

static void usage(void) {
    printf("usage: mpirun -np P flashattn bench --ring [--seq N] [--heads H] [--heads-kv HK]\n"
           "           [--head-dim D] [--dtype f32|f16|bf16] [--causal|--no-causal]\n"
           "           [--layout zigzag|contiguous] [--bwd] [--threads T] [--reps R] [--no-single]\n\n"
           "Ring attention over the ranks (T threads each) on one sequence of N rows, against\n"
           "one process (rank 0, P x T threads on every CPU, the other ranks asleep) on the\n"
           "whole of it, unless --no-single.\n"
           "Defaults: seq 65536, heads 2 (kv = heads), head_dim 64, f32, causal, zigzag,\n"
           "the forward (--bwd: the backward, after one forward), 1 thread, 2 reps (medians).\n"
           "hidden: 1 - (time blocked on transfers) / (the same transfers with no compute),\n"
           "per rank. Then the model: per ring step, compute (the measured rate) against\n"
           "bytes over a link, for 1M tokens on 8..64 ranks.\n");
}

static double median(double *x, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && x[j] < x[j - 1]; j--) {
            const double t = x[j];
            x[j] = x[j - 1], x[j - 1] = t;
        }
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* Random N(0,1)-ish values in dtype dt: the bench times, it does not check. */
static void fill(void *p, size_t n, flashattn_dtype dt, uint64_t s) {
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const float x = (float)((double)(s >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
        if (dt == FLASHATTN_F32) {
            ((float *)p)[i] = x;
        } else {
            uint32_t u;
            memcpy(&u, &x, sizeof u);
            /* bf16 by truncation; f16 as +-[0.5, 1) with a random mantissa */
            ((uint16_t *)p)[i] = dt == FLASHATTN_BF16 ? (uint16_t)(u >> 16)
                                                      : (uint16_t)((u & 0x80000000u) >> 16 | 0x3800 | (s >> 54));
        }
    }
}

/* One process's tensors: Q, K, V, O, dO, dQ, dK, dV of `rows` rows, and LSE. */
typedef struct {
    flashattn_tensor q, k, v, o, dout, dq, dk, dv;
    float *lse;
    void *mem;
    size_t bytes;
} set;

static int set_alloc(set *x, const ring_opts *o, int64_t rows, uint64_t seed) {
    const size_t es = flashattn_dtype_size(o->dt);
    const size_t nq = (size_t)(rows * o->heads * o->d), nk = (size_t)(rows * o->heads_kv * o->d);
    x->bytes = (4 * nq + 4 * nk) * es + (size_t)(o->heads * rows) * sizeof(float);
    char *m = x->mem = malloc(x->bytes + 64);
    if (!m) return 0;
    flashattn_tensor *qs[4] = {&x->q, &x->o, &x->dout, &x->dq}, *ks[4] = {&x->k, &x->v, &x->dk, &x->dv};
    for (int i = 0; i < 4; i++, m += nq * es) *qs[i] = flashattn_tensor_bshd(m, o->dt, 1, rows, o->heads, o->d);
    for (int i = 0; i < 4; i++, m += nk * es) *ks[i] = flashattn_tensor_bshd(m, o->dt, 1, rows, o->heads_kv, o->d);
    x->lse = (float *)m;
    fill(x->q.data, nq, o->dt, seed);
    fill(x->k.data, nk, o->dt, seed + 1);
    fill(x->v.data, nk, o->dt, seed + 2);
    fill(x->dout.data, nq, o->dt, seed + 3);
    return 1;
}

/* The ring's transfers alone: what one call sends, step by step, with no compute. */
static double comm_alone(const ring_opts *o, const flashattn_ring *ring, int64_t rows_max, int ranks, int rank) {
    const size_t kv = (size_t)(rows_max * o->heads_kv * 2 * o->d) * flashattn_dtype_size(o->dt);
    const size_t bytes = kv + (o->bwd ? (size_t)(rows_max * o->heads_kv * 2 * o->d) * sizeof(float) : 0);
    char *a = malloc(bytes + 1), *b = malloc(bytes + 1);
    double t = 0.0;
    if (a && b) {
        memset(a, 1, bytes + 1);
        MPI_Barrier(ring->comm);
        const double t0 = MPI_Wtime();
        for (int step = 0; step + 1 < ranks; step++)
            for (size_t at = 0; at < bytes; at += (size_t)1 << 30) {
                const int n = (int)(bytes - at < ((size_t)1 << 30) ? bytes - at : (size_t)1 << 30);
                MPI_Sendrecv(a + at, n, MPI_BYTE, (rank + 1) % ranks, 9, b + at, n, MPI_BYTE,
                             (rank + ranks - 1) % ranks, 9, ring->comm, MPI_STATUS_IGNORE);
            }
        t = MPI_Wtime() - t0;
    }
    free(a), free(b);
    return t;
}

/* A barrier that sleeps: MPI_Barrier spins, and a rank spinning in it
 * would take a core from rank 0's one-process run. */
static void barrier_asleep(MPI_Comm comm) {
    MPI_Request r;
    int done = 0;
    MPI_Ibarrier(comm, &r);
    while (MPI_Test(&r, &done, MPI_STATUS_IGNORE), !done) nanosleep(&(struct timespec){0, 1000000}, NULL);
}

/* The one-process run may use every CPU: mpirun binds each rank to one
 * core, and the threads it starts would share it. Returns the old mask. */
static void widen_affinity(cpu_set_t *old) {
    cpu_set_t all;
    CPU_ZERO(&all);
    sched_getaffinity(0, sizeof *old, old);
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < n && c < CPU_SETSIZE; c++) CPU_SET((int)c, &all);
    sched_setaffinity(0, sizeof all, &all);
}

/* The model's table: a sequence of seq rows on p ranks, per step. */
static void model(const ring_opts *o, double gflops_rank) {
    const double seq = 1048576.0, e = (double)flashattn_dtype_size(o->dt);
    /* per step a rank computes one (S/P) x (S/P) block: half of it under a
     * causal mask on the zigzag layout (every rank's share is even) */
    const double cf = o->causal ? 0.5 : 1.0, fl = o->bwd ? 10.0 : 4.0;
    const double links[3] = {1.25e9, 12.5e9, 50e9};
    printf("\nmodel: seq 1M, this run's heads, head_dim and dtype; compute per ring step at %.1f GFLOP/s a rank\n"
           "(measured above) against the step's transfer over a link; 'hidden' while compute >= transfer.\n",
           gflops_rank);
    printf("| ranks | rows / rank | compute / step | transfer / step at 10 Gb/s, 100 Gb/s, 400 Gb/s |\n"
           "|---|---|---|---|\n");
    for (int p = 8; p <= 64; p *= 2) {
        const double rows = seq / p;
        const double comp = cf * fl * rows * rows * (double)o->d * (double)o->heads / (gflops_rank * 1e9);
        double bytes = rows * (double)o->heads_kv * 2.0 * (double)o->d * e;
        if (o->bwd) bytes += rows * (double)o->heads_kv * 2.0 * (double)o->d * 4.0;
        printf("| %d | %.0f | %.3f s |", p, rows, comp);
        for (int l = 0; l < 3; l++)
            printf(" %.3f s (%s)%s", bytes / links[l], bytes / links[l] <= comp ? "hidden" : "NOT hidden",
                   l < 2 ? "," : " |\n");
    }
    /* compute >= bytes / B  <=>  rows >= bytes-per-row * F / (cf fl d H B) */
    const double per_row = (double)o->heads_kv * 2.0 * (double)o->d * (e + (o->bwd ? 4.0 : 0.0));
    for (int l = 0; l < 3; l++) {
        const double rows_min = per_row * gflops_rank * 1e9 / (cf * fl * (double)o->d * (double)o->heads * links[l]);
        printf("%s %.0f Gb/s: hidden down to %.0f rows a rank (up to %.0f ranks for 1M tokens)", l ? ";" : "link",
               links[l] * 8 / 1e9, rows_min, seq / rows_min);
    }
    printf(".\n");
}

int bench_ring_cmd(int argc, char **argv) {
    ring_opts o = {65536, 2, 0, 64, FLASHATTN_F32, 1, 0, 2, 1, 1, FLASHATTN_RING_ZIGZAG};
    const int rc = parse(argc, argv, &o);
    if (rc == 1) {
        usage();
        return 0;
    }
    if (rc) return 2;
    MPI_Init(&argc, &argv);
    int ranks, rank, status = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    flashattn_ring ring;
    flashattn_ring_stats st;
    flashattn_ring_init(&ring);
    ring.layout = o.layout;
    ring.seq_total = o.seq;
    ring.stats = &st;
    int64_t start[2], len[2], rows_max = 0;
    int runs;
    for (int r = 0; r < ranks; r++) {
        flashattn_ring_rows(o.layout, o.seq, ranks, r, start, len, &runs);
        if (len[0] + len[1] > rows_max) rows_max = len[0] + len[1];
    }
    flashattn_ring_rows(o.layout, o.seq, ranks, rank, start, len, &runs);
    set x;
    int ok = set_alloc(&x, &o, len[0] + len[1], 1000u + (uint64_t)rank), all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (!rank) fprintf(stderr, "flashattn bench --ring: out of memory\n");
        if (ok) free(x.mem);
        MPI_Finalize();
        return 1;
    }
    flashattn_params p;
    flashattn_params_init(&p);
    p.causal = o.causal;
    p.num_threads = o.threads;
    p.deterministic = 1;
    const char *what = o.bwd ? "backward" : "forward";
    if (!rank)
        printf("flashattn bench --ring: %d ranks x %d threads, seq %lld (%s), heads %lld/%lld, head_dim %lld, "
               "%s, %s, %s, %d reps (medians)\n",
               ranks, o.threads, (long long)o.seq, o.layout == FLASHATTN_RING_ZIGZAG ? "zigzag" : "contiguous",
               (long long)o.heads, (long long)o.heads_kv, (long long)o.d,
               o.dt == FLASHATTN_F32 ? "f32" : o.dt == FLASHATTN_F16 ? "f16" : "bf16",
               o.causal ? "causal" : "non-causal", what, o.reps);
    double *sec = calloc((size_t)o.reps + 1, sizeof(double)), wait = 0, comp = 0;
    flashattn_status s = flashattn_ring_fwd(&ring, &x.q, &x.k, &x.v, &x.o, x.lse, &p); /* warm-up, and bwd's O */
    for (int r = 0; r < o.reps && !s; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        s = o.bwd ? flashattn_ring_bwd(&ring, &x.q, &x.k, &x.v, &x.o, &x.dout, x.lse, &x.dq, &x.dk, &x.dv, &p)
                  : flashattn_ring_fwd(&ring, &x.q, &x.k, &x.v, &x.o, x.lse, &p);
        double slowest;
        MPI_Allreduce(&st.seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        sec[r] = slowest;
        wait += st.wait_seconds / o.reps;
        comp += st.compute_seconds / o.reps;
    }
    if (s) {
        fprintf(stderr, "flashattn bench --ring: rank %d: %s\n", rank, flashattn_ring_last_error());
        status = 1;
    }
    const double ring_s = median(sec, o.reps);
    const double comm = comm_alone(&o, &ring, rows_max, ranks, rank);
    const double flops = (o.bwd ? 10.0 : 4.0) * (double)o.seq * (double)o.seq * (double)o.d * (double)o.heads *
                         (o.causal ? 0.5 : 1.0);
    /* one process on the whole sequence, all the ranks' threads */
    double single_s = -1.0;
    size_t single_bytes = 0;
    if (o.single && !s) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (!rank) {
            cpu_set_t old;
            widen_affinity(&old);
            set w;
            flashattn_params pw = p;
            pw.num_threads = o.threads * ranks;
            if (set_alloc(&w, &o, o.seq, 7)) {
                size_t ws = 0;
                flashattn_fwd_workspace_size(&w.q, &w.k, &w.v, &w.o, w.lse, &pw, &ws);
                if (o.bwd) {
                    size_t wb = 0;
                    flashattn_bwd_workspace_size(&w.q, &w.k, &w.v, &w.o, &w.dout, w.lse, &w.dq, &w.dk, &w.dv, &pw, &wb);
                    if (wb > ws) ws = wb;
                }
                void *wsp = malloc(ws + 1);
                flashattn_status e = wsp ? flashattn_fwd(&w.q, &w.k, &w.v, &w.o, w.lse, &pw, wsp, ws)
                                         : FLASHATTN_ERR_OUT_OF_MEMORY;
                for (int r = 0; r < o.reps && !e; r++) {
                    const double t0 = MPI_Wtime();
                    e = o.bwd ? flashattn_bwd(&w.q, &w.k, &w.v, &w.o, &w.dout, w.lse, &w.dq, &w.dk, &w.dv, &pw, wsp, ws)
                              : flashattn_fwd(&w.q, &w.k, &w.v, &w.o, w.lse, &pw, wsp, ws);
                    sec[r] = MPI_Wtime() - t0;
                }
                if (!e) single_s = median(sec, o.reps);
                single_bytes = w.bytes + ws;
                free(wsp);
                free(w.mem);
            }
            sched_setaffinity(0, sizeof old, &old);
        }
        barrier_asleep(MPI_COMM_WORLD);
    }
    /* per rank, gathered on rank 0 */
    double mine[6] = {wait, comp, comm, (double)st.bytes_sent, (double)(x.bytes + (size_t)st.buffer_bytes), 0};
    double *all = rank ? NULL : malloc(sizeof mine * (size_t)ranks);
    MPI_Gather(mine, 6, MPI_DOUBLE, all, 6, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (!rank && all && !s) {
        printf("| run | ms | GFLOP/s | memory per process |\n|---|---|---|---|\n");
        double most = 0;
        for (int r = 0; r < ranks; r++) most = all[6 * r + 4] > most ? all[6 * r + 4] : most;
        printf("| ring, %d ranks | %.1f | %.1f | %.1f MiB (the most of any rank) |\n", ranks, ring_s * 1e3,
               flops / ring_s / 1e9, most / (1 << 20));
        if (single_s > 0)
            printf("| one process, %d threads | %.1f | %.1f | %.1f MiB |\n", o.threads * ranks, single_s * 1e3,
                   flops / single_s / 1e9, (double)single_bytes / (1 << 20));
        if (single_s > 0) printf("ring / one process: %.2fx the time\n", ring_s / single_s);
        printf("\n| rank | compute s | blocked on transfers s | transfers alone s | hidden | sent MiB | memory MiB |\n"
               "|---|---|---|---|---|---|---|\n");
        double gf = 0;
        for (int r = 0; r < ranks; r++) {
            const double *a = all + 6 * r;
            const double hidden = a[2] > 0 ? 1.0 - a[0] / a[2] : 1.0;
            printf("| %d | %.3f | %.4f | %.4f | %.0f%% | %.1f | %.1f |\n", r, a[1], a[0], a[2],
                   100.0 * (hidden < 0 ? 0 : hidden), a[3] / (1 << 20), a[4] / (1 << 20));
            gf += a[1];
        }
        /* the compute rate a rank reached, for the model */
        model(&o, flops / (gf / ranks) / ranks / 1e9);
    }
    free(all);
    free(sec);
    free(x.mem);
    MPI_Finalize();
    return status;
}
