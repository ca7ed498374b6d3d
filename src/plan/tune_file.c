#include "plan/tune_file.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "plan/cpu_model.h"
#include "plan/tiles.h"

#define FIELDS 8

void fa_tune_key_make(fa_tune_key *key, const char *isa, int64_t head_dim, flashattn_dtype dt,
                      int causal) {
    memset(key, 0, sizeof *key);
    fa_cpu_model(key->cpu, sizeof key->cpu);
    snprintf(key->isa, sizeof key->isa, "%s", isa);
    key->head_dim = head_dim;
    key->dtype = dt;
    key->causal = causal;
}

int fa_tune_key_equal(const fa_tune_key *a, const fa_tune_key *b) {
    return strcmp(a->cpu, b->cpu) == 0 && strcmp(a->isa, b->isa) == 0 &&
           a->head_dim == b->head_dim && a->dtype == b->dtype && a->causal == b->causal;
}

/* ---- parsing ----------------------------------------------------------- */

static int parse_int(const char *s, size_t len, int64_t lo, int64_t hi, int64_t *v) {
    int64_t x = 0;
    if (len == 0 || len > 18) return 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        x = x * 10 + (s[i] - '0');
    }
    if (x < lo || x > hi) return 0;
    *v = x;
    return 1;
}

static int copy_field(char *dst, size_t cap, const char *s, size_t len) {
    if (len == 0 || len >= cap) return 0;
    memcpy(dst, s, len);
    dst[len] = '\0';
    return 1;
}

/* One entry line: fields f[i] of length fl[i]; 0 with why on a bad field. */
static int parse_entry(const char **f, const size_t *fl, fa_tune_entry *e, char *why, size_t n,
                       int line) {
    int64_t d, c, bm, bn;
    int dt = -1;
    for (int i = 0; i < FLASHATTN_DTYPE_COUNT; i++)
        if (fl[3] == strlen(fa_dtype_name(i)) && memcmp(f[3], fa_dtype_name(i), fl[3]) == 0) dt = i;
    const char *bad = !copy_field(e->key.cpu, sizeof e->key.cpu, f[0], fl[0])   ? "cpu model"
                      : !copy_field(e->key.isa, sizeof e->key.isa, f[1], fl[1]) ? "isa"
                      : !parse_int(f[2], fl[2], 1, FLASHATTN_MAX_HEAD_DIM, &d)  ? "head_dim"
                      : dt < 0                                                  ? "dtype"
                      : !parse_int(f[4], fl[4], 0, 1, &c)                       ? "causal"
                      : !parse_int(f[5], fl[5], 1, FA_MAX_BLOCK, &bm)           ? "block_m"
                      : !parse_int(f[6], fl[6], 1, FA_MAX_BLOCK, &bn)           ? "block_n"
                                                                                : NULL;
    if (bad) {
        snprintf(why, n, "line %d: bad %s field", line, bad);
        return 0;
    }
    const size_t nl = fl[7] < sizeof e->note ? fl[7] : sizeof e->note - 1;
    memcpy(e->note, f[7], nl);
    e->note[nl] = '\0';
    e->key.head_dim = d;
    e->key.dtype = (flashattn_dtype)dt;
    e->key.causal = (int)c;
    e->block_m = (int)bm, e->block_n = (int)bn;
    return 1;
}

int fa_tune_parse(const char *text, size_t len, fa_tune_entry *out, int max, int *n, char *why,
                  size_t why_n) {
    const size_t hl = strlen(FA_TUNE_HEADER);
    *n = 0;
    if (len < hl || memcmp(text, FA_TUNE_HEADER, hl) != 0 || (len > hl && text[hl] != '\n')) {
        snprintf(why, why_n, "not a flashattn tuning file (first line is not '%s')", FA_TUNE_HEADER);
        return 0;
    }
    int line = 2;
    for (size_t pos = hl + (len > hl); pos < len; line++) {
        const char *eol = memchr(text + pos, '\n', len - pos);
        const size_t end = eol ? (size_t)(eol - text) : len;
        const char *s = text + pos;
        const size_t sl = end - pos;
        pos = end + 1;
        if (sl == 0 || s[0] == '#') continue;
        const char *f[FIELDS];
        size_t fl[FIELDS];
        int nf = 0;
        for (size_t a = 0; nf < FIELDS + 1;) {
            const char *tab = memchr(s + a, '\t', sl - a);
            const size_t b = tab ? (size_t)(tab - s) : sl;
            if (nf < FIELDS) f[nf] = s + a, fl[nf] = b - a;
            nf++;
            if (!tab) break;
            a = b + 1;
        }
        if (nf != FIELDS) {
            snprintf(why, why_n, "line %d: %d tab-separated fields, expected %d", line, nf, FIELDS);
            return 0;
        }
        if (memchr(s, '\0', sl)) {
            snprintf(why, why_n, "line %d: contains a NUL byte", line);
            return 0;
        }
        if (*n == max) {
            snprintf(why, why_n, "more than %d entries", max);
            return 0;
        }
        if (!parse_entry(f, fl, &out[*n], why, why_n, line)) return 0;
        ++*n;
    }
    return 1;
}

/* ---- the process's copy of the file --------------------------------- */

static struct {
    pthread_mutex_t lock;
    char path[4096];    /* the path the table was read from; "" before any */
    fa_tune_entry entries[FA_TUNE_MAX_ENTRIES];
    int n;
    char warning[512];
} tune = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void warn_locked(const char *fmt, va_list ap) {
    if (!tune.warning[0]) vsnprintf(tune.warning, sizeof tune.warning, fmt, ap);
}

void fa_tune_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&tune.lock);
    warn_locked(fmt, ap);
    pthread_mutex_unlock(&tune.lock);
    va_end(ap);
}

static void warn_in_lock(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn_in_lock(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    warn_locked(fmt, ap);
    va_end(ap);
}

int fa_tune_take_warning(char *buf, size_t n) {
    pthread_mutex_lock(&tune.lock);
    const int had = tune.warning[0] != '\0';
    if (had && n) snprintf(buf, n, "%s", tune.warning);
    tune.warning[0] = '\0';
    pthread_mutex_unlock(&tune.lock);
    return had;
}

char *fa_tune_read_file(const char *path, size_t *len, char *why, size_t why_n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, why_n, "cannot open it (%s)", strerror(errno));
        return NULL;
    }
    char *buf = malloc(FA_TUNE_MAX_BYTES + 1);
    size_t got = buf ? fread(buf, 1, FA_TUNE_MAX_BYTES + 1, f) : 0;
    const int err = ferror(f);
    fclose(f);
    if (!buf || err || got > FA_TUNE_MAX_BYTES) {
        snprintf(why, why_n, "%s", !buf ? "out of memory" : err ? "read error" : "larger than 1 MiB");
        free(buf);
        return NULL;
    }
    buf[got] = '\0';
    *len = got;
    return buf;
}

/* Read path into the table (lock held); an unusable file leaves it empty. */
static void load_locked(const char *path) {
    char why[256];
    size_t len = 0;
    snprintf(tune.path, sizeof tune.path, "%s", path);
    tune.n = 0;
    char *text = fa_tune_read_file(path, &len, why, sizeof why);
    if (!text || !fa_tune_parse(text, len, tune.entries, FA_TUNE_MAX_ENTRIES, &tune.n, why, sizeof why)) {
        tune.n = 0;
        warn_in_lock("tuning file %s ignored: %s", path, why);
    }
    free(text);
}

int fa_tune_file_named(void) {
    const char *path = getenv("FLASHATTN_TUNE_FILE");
    return path && path[0];
}

int fa_tune_lookup(const fa_tune_key *key, int *block_m, int *block_n) {
    const char *path = getenv("FLASHATTN_TUNE_FILE");
    if (!path || !path[0]) return 0;
    int found = 0;
    pthread_mutex_lock(&tune.lock);
    if (strlen(path) >= sizeof tune.path) {
        warn_in_lock("tuning file ignored: FLASHATTN_TUNE_FILE is longer than %zu bytes",
                     sizeof tune.path - 1);
    } else {
        const int fresh = strcmp(path, tune.path) != 0;
        int cpu_seen = 0;
        if (fresh) load_locked(path);
        for (int i = 0; i < tune.n && !found; i++) {
            cpu_seen |= strcmp(tune.entries[i].key.cpu, key->cpu) == 0;
            if (fa_tune_key_equal(&tune.entries[i].key, key)) {
                *block_m = tune.entries[i].block_m;
                *block_n = tune.entries[i].block_n;
                found = 1;
            }
        }
        /* A file measured on other machines only is as good as none: say
         * so, once (a missing shape on this machine is no news). */
        if (fresh && tune.n > 0 && !cpu_seen)
            warn_in_lock("tuning file %s ignored: no entry for this CPU (%s)", path, key->cpu);
    }
    pthread_mutex_unlock(&tune.lock);
    return found;
}
