#include "hw_profiles.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define FIELDS 12
#define FILE_NAME "hw_profiles.tsv"

static int copy_text(char *dst, size_t cap, const char *s, size_t len) {
    if (len == 0 || len >= cap) return 0;
    memcpy(dst, s, len);
    dst[len] = '\0';
    return 1;
}

/* A number in [lo, hi] filling the whole field. */
static int number(const char *s, size_t len, double lo, double hi, double *v) {
    char buf[64], *end;
    if (!copy_text(buf, sizeof buf, s, len)) return 0;
    errno = 0;
    *v = strtod(buf, &end);
    return end != buf && *end == '\0' && !errno && *v >= lo && *v <= hi;
}

/* Fill p from one line's fields; the name of the first bad field, or NULL. */
static const char *parse_line(const char **f, const size_t *fl, hw_profile *p) {
    double cores;
    memset(p, 0, sizeof *p);
    if (!copy_text(p->name, sizeof p->name, f[0], fl[0])) return "name";
    if (!copy_text(p->kind, sizeof p->kind, f[1], fl[1]) ||
        (strcmp(p->kind, "npu") != 0 && strcmp(p->kind, "gpu") != 0))
        return "kind (npu or gpu)";
    if (!number(f[2], fl[2], 1, 1e6, &cores) || cores != (int)cores) return "cores";
    p->cores = (int)cores;
    if (!number(f[3], fl[3], 1e-3, 1e9, &p->tile_kib)) return "tile_kib";
    if (!copy_text(p->tile_buffer, sizeof p->tile_buffer, f[4], fl[4])) return "tile_buffer";
    if (!number(f[5], fl[5], 0, 1e9, &p->acc_kib)) return "acc_kib";
    if (!copy_text(p->acc_buffer, sizeof p->acc_buffer, f[6], fl[6])) return "acc_buffer";
    if (!number(f[7], fl[7], 0, 1e9, &p->tflops[FLASHATTN_F16])) return "f16";
    if (!number(f[8], fl[8], 0, 1e9, &p->tflops[FLASHATTN_BF16])) return "bf16";
    if (!number(f[9], fl[9], 0, 1e9, &p->tflops[FLASHATTN_F32])) return "f32";
    if (p->tflops[FLASHATTN_F16] <= 0 && p->tflops[FLASHATTN_BF16] <= 0 && p->tflops[FLASHATTN_F32] <= 0)
        return "f16/bf16/f32 (all 0)";
    if (!number(f[10], fl[10], 1e-3, 1e9, &p->mem_gbs)) return "mem_gbs";
    if (!copy_text(p->source, sizeof p->source, f[11], fl[11])) return "source";
    return NULL;
}

int hw_profiles_parse(const char *text, size_t len, hw_profile *out, int max, char *why, size_t why_n) {
    int n = 0, line = 1;
    for (size_t pos = 0; pos < len; line++) {
        const char *eol = memchr(text + pos, '\n', len - pos);
        const size_t end = eol ? (size_t)(eol - text) : len;
        const char *s = text + pos;
        const size_t sl = end - pos;
        pos = end + 1;
        if (sl == 0 || s[0] == '#' || (sl > 5 && memcmp(s, "name\t", 5) == 0)) continue;
        const char *f[FIELDS];
        size_t fl[FIELDS];
        int nf = 0;
        for (size_t a = 0;;) {
            const char *tab = memchr(s + a, '\t', sl - a);
            const size_t b = tab ? (size_t)(tab - s) : sl;
            if (nf < FIELDS) f[nf] = s + a, fl[nf] = b - a;
            nf++;
            if (!tab) break;
            a = b + 1;
        }
        if (nf != FIELDS) {
            snprintf(why, why_n, "line %d: %d tab-separated fields, expected %d", line, nf, FIELDS);
            return -1;
        }
        if (n == max) {
            snprintf(why, why_n, "more than %d profiles", max);
            return -1;
        }
        const char *bad = parse_line(f, fl, &out[n]);
        if (bad) {
            snprintf(why, why_n, "line %d: bad %s field", line, bad);
            return -1;
        }
        if (strcasecmp(out[n].name, "cpu") == 0 || hw_profiles_get(out, n, out[n].name)) {
            snprintf(why, why_n, "line %d: profile '%s' is reserved or defined twice", line, out[n].name);
            return -1;
        }
        n++;
    }
    if (n == 0) snprintf(why, why_n, "no profiles in the file");
    return n ? n : -1;
}

const hw_profile *hw_profiles_get(const hw_profile *p, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcasecmp(p[i].name, name) == 0) return &p[i];
    return NULL;
}

static int readable(const char *path) { return access(path, R_OK) == 0; }

int hw_profiles_find(char *path, size_t n) {
    const char *env = getenv("FLASHATTN_HW_PROFILES");
    if (env && env[0]) {
        snprintf(path, n, "%s", env);
        return 0;
    }
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        static const char *const rel[] = {"data/", "../data/", "../share/flashattn/"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            snprintf(path, n, "%s/%s" FILE_NAME, exe, rel[i]);
            if (readable(path)) return 0;
        }
    }
#ifdef FA_SOURCE_DATA_DIR
    snprintf(path, n, "%s/" FILE_NAME, FA_SOURCE_DATA_DIR);
    if (readable(path)) return 0;
#endif
    return -1;
}

int hw_profiles_load(const char *path, hw_profile *out, int max, char *why, size_t why_n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, why_n, "%s: %s", path, strerror(errno));
        return -1;
    }
    char *text = malloc(HW_PROFILES_MAX_BYTES + 1);
    size_t len = text ? fread(text, 1, HW_PROFILES_MAX_BYTES + 1, f) : 0;
    fclose(f);
    int n = -1;
    if (!text) snprintf(why, why_n, "out of memory");
    else if (len > HW_PROFILES_MAX_BYTES) snprintf(why, why_n, "%s: larger than 1 MiB", path);
    else if (memchr(text, '\0', len)) snprintf(why, why_n, "%s: contains a NUL byte", path);
    else n = hw_profiles_parse(text, len, out, max, why, why_n);
    free(text);
    return n;
}
