#include "shape_args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char shape_args_help[] =
    "  --seq N          query and key length (required)\n"
    "  --head-dim D     head dimension (required)\n"
    "  --dtype T        f32 (default), f16 or bf16\n"
    "  --causal         causal mask\n"
    "  --heads H        query heads (default 8); --batch B (default 1)\n"
    "  --threads T      threads (default: OpenMP's)\n"
    "  --block-m M      query rows per tile; --block-n N keys per tile\n";

void shape_args_init(shape_args *s) {
    memset(s, 0, sizeof *s);
    s->heads = 8;
    s->batch = 1;
    s->dtype = FLASHATTN_F32;
}

const char *shape_dtype_name(flashattn_dtype dt) {
    return dt == FLASHATTN_F16 ? "f16" : dt == FLASHATTN_BF16 ? "bf16" : "f32";
}

static int parse_pos(const char *text, int64_t max, int64_t *v) {
    char *end;
    errno = 0;
    long long x = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno || x < 1 || x > max) return 0;
    *v = x;
    return 1;
}

/* "64,96,128" into out[]: 1, or 0 on a bad or too long list, -1 when an
 * entry is 0 or negative (automatic is spelled by leaving the option out). */
static int parse_list(const char *text, int *out, int *n) {
    char buf[256];
    if (strlen(text) >= sizeof buf) return 0;
    snprintf(buf, sizeof buf, "%s", text);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int64_t v;
        if (*n == SHAPE_MAX_BLOCKS) return 0;
        if (!parse_pos(tok, 1 << 30, &v)) {
            char *end;
            const long x = strtol(tok, &end, 10);
            return end != tok && *end == '\0' && x <= 0 ? -1 : 0;
        }
        out[(*n)++] = (int)v;
    }
    return *n > 0;
}

int shape_args_take(shape_args *s, const char *cmd, int argc, char **argv, int *i) {
    const char *a = argv[*i], *val = *i + 1 < argc ? argv[*i + 1] : NULL;
    int64_t *num = strcmp(a, "--seq") == 0        ? &s->seq
                   : strcmp(a, "--head-dim") == 0 ? &s->head_dim
                   : strcmp(a, "--heads") == 0    ? &s->heads
                   : strcmp(a, "--batch") == 0    ? &s->batch
                                                  : NULL;
    int64_t threads;
    if (strcmp(a, "--causal") == 0) {
        s->causal = 1;
        return 1;
    }
    int known = num || strcmp(a, "--dtype") == 0 || strcmp(a, "--threads") == 0 ||
                strcmp(a, "--block-m") == 0 || strcmp(a, "--block-n") == 0;
    if (!known) return 0;
    if (!val) {
        fprintf(stderr, "flashattn %s: %s needs a value\n", cmd, a);
        return -1;
    }
    ++*i;
    if (num) {
        if (parse_pos(val, INT64_C(1) << 40, num)) return 1;
    } else if (strcmp(a, "--dtype") == 0) {
        if (strcmp(val, "f32") == 0) s->dtype = FLASHATTN_F32;
        else if (strcmp(val, "f16") == 0) s->dtype = FLASHATTN_F16;
        else if (strcmp(val, "bf16") == 0) s->dtype = FLASHATTN_BF16;
        else goto bad;
        return 1;
    } else if (strcmp(a, "--threads") == 0) {
        if (parse_pos(val, 4096, &threads)) {
            s->threads = (int)threads;
            return 1;
        }
    } else {
        const int m = strcmp(a, "--block-m") == 0;
        const int r = m ? parse_list(val, s->block_m, &s->n_block_m) : parse_list(val, s->block_n, &s->n_block_n);
        if (r > 0) return 1;
        if (r < 0) {
            fprintf(stderr, "flashattn %s: %s %s: tiles must be >= 1 (leave the option out for automatic tiles)\n",
                    cmd, a, val);
            return -1;
        }
    }
bad:
    fprintf(stderr, "flashattn %s: bad value '%s' for %s\n", cmd, val, a);
    return -1;
}

int shape_args_check(const shape_args *s, const char *cmd) {
    if (s->seq > 0 && s->head_dim > 0) return 0;
    fprintf(stderr, "flashattn %s: --seq and --head-dim are required (see --help)\n", cmd);
    return -1;
}
