/*
 * flashattn run: attention on the user's .npy tensors. Everything is read
 * and validated, and the result computed, before any output is staged;
 * outputs go to temporary files renamed into place only when all of them
 * are written, so a failed run leaves no output file (and leaves an
 * existing one as it was).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "flashattn.h"
#include "npy.h"

typedef struct {
    const char *q, *k, *v, *o, *lse;
    int bhsd, bf16;
    flashattn_params p;
} run_opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: flashattn run -q Q.npy -k K.npy -v V.npy -o O.npy [--lse LSE.npy]\n"
            "                     [--causal] [--window L,R] [--scale S] [--layout bshd|bhsd]\n"
            "                     [--align bottom-right|top-left] [--threads N] [--bf16]\n\n"
            "Q, K, V: 4-D C-order arrays, [batch, seq, heads, head_dim] (--layout bshd, the\n"
            "default) or [batch, heads, seq, head_dim] (bhsd); dtype '<f4' or '<f2', or bf16\n"
            "stored as '<u2' with --bf16. K and V may have fewer heads than Q (GQA/MQA).\n"
            "O is written in Q's layout and dtype; LSE as '<f4' [batch, heads, seq_q].\n\n"
            "  --causal        each query sees keys up to its diagonal\n"
            "  --window L,R    sliding window: L keys left, R right of the diagonal (-1: no bound)\n"
            "  --scale S       softmax scale (default 1/sqrt(head_dim))\n"
            "  --align A       diagonal alignment when seq_q != seq_k (default bottom-right)\n"
            "  --threads N     threads (default: OpenMP's)\n");
}

static int parse_i64(const char *s, int64_t *v) {
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || errno) return 0;
    *v = x;
    return 1;
}

/* Returns 0, or 2 (usage error) after printing why. */
static int parse_args(int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    flashattn_params_init(&o->p);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        const char **path = strcmp(a, "-q") == 0     ? &o->q
                            : strcmp(a, "-k") == 0   ? &o->k
                            : strcmp(a, "-v") == 0   ? &o->v
                            : strcmp(a, "-o") == 0   ? &o->o
                            : strcmp(a, "--lse") == 0 ? &o->lse
                                                     : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 1;
        } else if (strcmp(a, "--causal") == 0) {
            o->p.causal = 1;
        } else if (strcmp(a, "--bf16") == 0) {
            o->bf16 = 1;
        } else if (!val) {
            fprintf(stderr, "flashattn run: unknown or incomplete option '%s'\n", a);
            return 2;
        } else if (path) {
            *path = val, i++;
        } else if (strcmp(a, "--window") == 0) {
            char l[32], r[32];
            const char *comma = strchr(val, ',');
            int64_t wl, wr;
            if (!comma || comma - val >= (long)sizeof l || strlen(comma + 1) >= sizeof r) goto bad;
            snprintf(l, sizeof l, "%.*s", (int)(comma - val), val);
            snprintf(r, sizeof r, "%s", comma + 1);
            if (!parse_i64(l, &wl) || !parse_i64(r, &wr) || wl < -1 || wr < -1) goto bad;
            o->p.window_left = wl, o->p.window_right = wr, i++;
        } else if (strcmp(a, "--scale") == 0) {
            char *end;
            float s = strtof(val, &end);
            if (end == val || *end != '\0' || !isfinite(s)) goto bad;
            o->p.scale = s, i++;
        } else if (strcmp(a, "--layout") == 0) {
            if (strcmp(val, "bshd") != 0 && strcmp(val, "bhsd") != 0) goto bad;
            o->bhsd = strcmp(val, "bhsd") == 0, i++;
        } else if (strcmp(a, "--align") == 0) {
            if (strcmp(val, "bottom-right") == 0) o->p.align = FLASHATTN_ALIGN_BOTTOM_RIGHT;
            else if (strcmp(val, "top-left") == 0) o->p.align = FLASHATTN_ALIGN_TOP_LEFT;
            else goto bad;
            i++;
        } else if (strcmp(a, "--threads") == 0) {
            int64_t t;
            if (!parse_i64(val, &t) || t < 0 || t > 1 << 16) goto bad;
            o->p.num_threads = (int)t, i++;
        } else {
            fprintf(stderr, "flashattn run: unknown option '%s'\n", a);
            return 2;
        }
        continue;
    bad:
        fprintf(stderr, "flashattn run: bad value '%s' for %s (see flashattn run --help)\n", val, a);
        return 2;
    }
    if (!o->q || !o->k || !o->v || !o->o) {
        fprintf(stderr, "flashattn run: -q, -k, -v and -o are required (see flashattn run --help)\n");
        return 2;
    }
    return 0;
}

/* The tensor an array describes, after checking what the library cannot:
 * rank and dtype. Returns 0, or 1 after printing why. */
static int as_tensor(const fa_npy_array *a, const char *path, const run_opts *o,
                     flashattn_tensor *t) {
    if (a->h.ndim != 4) {
        fprintf(stderr, "flashattn run: %s: a 4-D array is needed (%s), it has %d dimensions\n",
                path, o->bhsd ? "batch, heads, seq, head_dim" : "batch, seq, heads, head_dim",
                a->h.ndim);
        return 1;
    }
    flashattn_dtype dt;
    if (strcmp(a->h.descr, "<u2") == 0 && o->bf16) {
        dt = FLASHATTN_BF16;
    } else if (o->bf16) {
        fprintf(stderr, "flashattn run: %s: --bf16 needs bfloat16 bits stored as '<u2', not '%s'\n",
                path, a->h.descr);
        return 1;
    } else if (strcmp(a->h.descr, "<f4") == 0) {
        dt = FLASHATTN_F32;
    } else if (strcmp(a->h.descr, "<f2") == 0) {
        dt = FLASHATTN_F16;
    } else {
        fprintf(stderr, "flashattn run: %s: dtype '%s' is not supported: use '<f4', '<f2'%s\n", path,
                a->h.descr,
                strcmp(a->h.descr, "<u2") == 0 ? ", or --bf16 if these are bfloat16 bits"
                                               : ", or bfloat16 bits as '<u2' with --bf16");
        return 1;
    }
    const int64_t *s = a->h.shape;
    *t = o->bhsd ? flashattn_tensor_bhsd(a->data, dt, s[0], s[2], s[1], s[3])
                 : flashattn_tensor_bshd(a->data, dt, s[0], s[1], s[2], s[3]);
    return 0;
}

static int compute(const run_opts *o, fa_npy_array in[3]) {
    const char *paths[3] = {o->q, o->k, o->v};
    flashattn_tensor t[3];
    char err[512];
    for (int i = 0; i < 3; i++) {
        if (fa_npy_read(paths[i], &in[i], err, sizeof err)) {
            fprintf(stderr, "flashattn run: %s: %s\n", paths[i], err);
            return 1;
        }
        if (as_tensor(&in[i], paths[i], o, &t[i])) return 1;
    }
    if (strcmp(in[1].h.descr, in[0].h.descr) || strcmp(in[2].h.descr, in[0].h.descr)) {
        fprintf(stderr, "flashattn run: Q, K and V must have one dtype (they are %s, %s, %s)\n",
                in[0].h.descr, in[1].h.descr, in[2].h.descr);
        return 1;
    }
    /* O has Q's shape, layout and dtype; the library checks it against V. */
    const fa_npy_header *qh = &in[0].h;
    void *obuf = malloc(qh->data_bytes ? qh->data_bytes : 1);
    const int64_t lse_shape[3] = {t[0].batch, t[0].heads, t[0].seqlen};
    const size_t lse_n = (size_t)(lse_shape[0] * lse_shape[1] * lse_shape[2]);
    float *lse = o->lse ? malloc((lse_n ? lse_n : 1) * sizeof(float)) : NULL;
    int rc = 1;
    if (!obuf || (o->lse && !lse)) {
        fprintf(stderr, "flashattn run: out of memory for the output\n");
        goto out;
    }
    flashattn_tensor ot = t[0];
    ot.data = obuf;
    flashattn_status s = flashattn_fwd(&t[0], &t[1], &t[2], &ot, lse, &o->p, NULL, 0);
    if (s != FLASHATTN_OK) {
        fprintf(stderr, "flashattn run: %s: %s\n", flashattn_strerror(s), flashattn_last_error());
        goto out;
    }
    fa_npy_staged so, sl;
    if (fa_npy_stage(o->o, qh->descr, 4, qh->shape, obuf, &so, err, sizeof err)) {
        fprintf(stderr, "flashattn run: %s\n", err);
        goto out;
    }
    if (o->lse && fa_npy_stage(o->lse, "<f4", 3, lse_shape, lse, &sl, err, sizeof err)) {
        fprintf(stderr, "flashattn run: %s\n", err);
        fa_npy_discard(&so);
        goto out;
    }
    if (fa_npy_commit(&so, err, sizeof err) || (o->lse && fa_npy_commit(&sl, err, sizeof err))) {
        fprintf(stderr, "flashattn run: %s\n", err);
        if (o->lse) fa_npy_discard(&sl);
        goto out;
    }
    rc = 0;
out:
    free(obuf);
    free(lse);
    return rc;
}

int cmd_run(int argc, char **argv) {
    run_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    fa_npy_array in[3];
    memset(in, 0, sizeof in);
    rc = compute(&o, in);
    for (int i = 0; i < 3; i++) fa_npy_free(&in[i]);
    return rc;
}
