/* .npy reader and writer: a strict header parser, checked sizes, staged writes. */
#include "npy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

static int fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && n) vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* Bytes before the header text (magic, version, length field) and the
 * header text's length, from the first n bytes. */
static int read_prefix(const unsigned char *buf, size_t n, size_t *prefix, size_t *text_len,
                       char *err, size_t en) {
    if (n == 0) return fail(err, en, "empty file, not a .npy file");
    if (memcmp(buf, magic, n < 6 ? n : 6) != 0) return fail(err, en, "not a .npy file (bad magic)");
    if (n < 8) return fail(err, en, "truncated: the file ends inside the .npy magic and version");
    const unsigned major = buf[6], minor = buf[7];
    if (major == 1 && minor == 0) {
        if (n < 10) return fail(err, en, "truncated: the file ends inside the header length");
        *prefix = 10;
        *text_len = (size_t)buf[8] | (size_t)buf[9] << 8;
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (n < 12) return fail(err, en, "truncated: the file ends inside the header length");
        *prefix = 12;
        *text_len = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 |
                    (size_t)buf[11] << 24;
    } else {
        return fail(err, en, "unsupported .npy format version %u.%u (1.0, 2.0, 3.0 are read)",
                    major, minor);
    }
    if (*text_len > FA_NPY_MAX_HEADER)
        return fail(err, en, "header of %zu bytes is larger than the %d allowed", *text_len,
                    FA_NPY_MAX_HEADER);
    return 0;
}

/* ---- the header dict: a tiny recursive-descent parser over [p, end) ---- */

typedef struct {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int eat(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A quoted Python string without escapes (numpy never writes any). */
static int parse_string(cursor *c, char *out, size_t n) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 0;
    const char q = *c->p++;
    size_t len = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || len + 1 >= n) return 0;
        out[len++] = *c->p++;
    }
    if (c->p >= c->end) return 0;
    c->p++;
    out[len] = '\0';
    return 1;
}

static int parse_word(cursor *c, const char *w) {
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0) return 0;
    c->p += n;
    return 1;
}

/* Non-negative integer, optionally with Python 2's 'L' suffix.
 * Returns 1 ok, 0 syntax error, -1 overflow. */
static int parse_dim(cursor *c, int64_t *v) {
    skip_ws(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return 0;
    int64_t x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (__builtin_mul_overflow(x, 10, &x) || __builtin_add_overflow(x, *c->p - '0', &x))
            return -1;
        c->p++;
    }
    if (c->p < c->end && *c->p == 'L') c->p++;
    *v = x;
    return 1;
}

static int parse_shape(cursor *c, fa_npy_header *h, char *err, size_t en) {
    if (!eat(c, '(')) return fail(err, en, "header: 'shape' must be a tuple of integers");
    h->ndim = 0;
    if (eat(c, ')')) return 0;
    for (;;) {
        int64_t d;
        int r = parse_dim(c, &d);
        if (r < 0) return fail(err, en, "header: a dimension of 'shape' overflows 64 bits");
        if (r == 0) return fail(err, en, "header: 'shape' must be a tuple of non-negative integers");
        if (h->ndim == FA_NPY_MAX_DIMS)
            return fail(err, en, "header: more than %d dimensions", FA_NPY_MAX_DIMS);
        h->shape[h->ndim++] = d;
        int comma = eat(c, ',');
        if (eat(c, ')')) return 0;
        if (!comma) return fail(err, en, "header: malformed 'shape' tuple");
    }
}

/* "<f4" and friends: byte order, kind, size. '=' and '|' are this
 * (little-endian) machine's order; the stored descr is normalised to '<'. */
static int parse_descr(const char *s, char *norm, size_t *elem, char *err, size_t en) {
    const char order = s[0];
    if (order != '<' && order != '>' && order != '=' && order != '|')
        return fail(err, en, "dtype '%s' is not a simple numeric type", s);
    const char kind = s[1];
    if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'b')
        return fail(err, en, "dtype '%s' is not a numeric type", s);
    char *end;
    long size = strtol(s + 2, &end, 10);
    if (s[2] < '1' || s[2] > '9' || *end != '\0' || size > 16)
        return fail(err, en, "dtype '%s' is not a simple numeric type", s);
    if (order == '>' && size > 1)
        return fail(err, en, "dtype '%s' is big-endian; save it as little-endian ('<')", s);
    snprintf(norm, 16, "%c%c%d", size > 1 ? '<' : '|', kind, (int)(size & 31)); /* size is 1..16 */
    *elem = (size_t)size;
    return 0;
}

static int parse_dict(cursor *c, fa_npy_header *h, char *err, size_t en) {
    int have_descr = 0, have_order = 0, have_shape = 0, fortran = 0;
    char descr[16];
    if (!eat(c, '{')) return fail(err, en, "header: not a Python dict literal");
    while (!eat(c, '}')) {
        char key[32];
        if (!parse_string(c, key, sizeof key) || !eat(c, ':'))
            return fail(err, en, "header: malformed dict (expected 'key': value)");
        if (strcmp(key, "descr") == 0 && !have_descr) {
            if (!parse_string(c, descr, sizeof descr))
                return fail(err, en, "header: 'descr' must be a simple dtype string such as '<f4'");
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0 && !have_order) {
            if (parse_word(c, "True")) fortran = 1;
            else if (!parse_word(c, "False"))
                return fail(err, en, "header: 'fortran_order' must be True or False");
            have_order = 1;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            if (parse_shape(c, h, err, en)) return -1;
            have_shape = 1;
        } else {
            return fail(err, en, "header: unexpected or repeated key '%s'", key);
        }
        if (!eat(c, ',')) {
            if (!eat(c, '}')) return fail(err, en, "header: malformed dict (expected ',' or '}')");
            break;
        }
    }
    skip_ws(c);
    if (c->p != c->end) return fail(err, en, "header: unexpected text after the dict");
    if (!have_descr || !have_order || !have_shape)
        return fail(err, en, "header: needs the keys 'descr', 'fortran_order' and 'shape'");
    if (fortran)
        return fail(err, en, "Fortran-order arrays are not supported: save a C-order array "
                             "(numpy.ascontiguousarray)");
    return parse_descr(descr, h->descr, &h->elem_size, err, en);
}

int fa_npy_parse_header(const unsigned char *buf, size_t n, fa_npy_header *h, char *err,
                        size_t en) {
    size_t prefix, text_len;
    memset(h, 0, sizeof *h);
    if (read_prefix(buf, n, &prefix, &text_len, err, en)) return -1;
    if (n < prefix + text_len) return fail(err, en, "truncated: the file ends inside the header");
    cursor c = {(const char *)buf + prefix, (const char *)buf + prefix + text_len};
    if (parse_dict(&c, h, err, en)) return -1;
    int64_t count = 1;
    for (int i = 0; i < h->ndim; i++)
        if (__builtin_mul_overflow(count, h->shape[i], &count))
            return fail(err, en, "shape: the element count overflows 64 bits");
    size_t bytes;
    if ((uint64_t)count > SIZE_MAX || __builtin_mul_overflow((size_t)count, h->elem_size, &bytes) ||
        (uint64_t)bytes > (uint64_t)INT64_MAX)
        return fail(err, en, "shape: the data size overflows 64 bits");
    h->count = count;
    h->data_offset = prefix + text_len;
    h->data_bytes = bytes;
    return 0;
}

/* ---- reading ---- */

int fa_npy_read(const char *path, fa_npy_array *a, char *err, size_t en) {
    memset(a, 0, sizeof *a);
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, en, "cannot open: %s", strerror(errno));
    unsigned char *buf = NULL;
    int rc = -1;
    struct stat sb;
    unsigned char first[12];
    size_t got = fread(first, 1, sizeof first, f), prefix, text_len;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fail(err, en, "not a regular file");
        goto out;
    }
    if (read_prefix(first, got, &prefix, &text_len, err, en)) goto out;
    /* The whole header is at most 12 + FA_NPY_MAX_HEADER bytes. */
    buf = malloc(prefix + text_len);
    if (!buf) {
        fail(err, en, "out of memory");
        goto out;
    }
    if (fseek(f, 0, SEEK_SET) != 0 || fread(buf, 1, prefix + text_len, f) != prefix + text_len) {
        fail(err, en, "truncated: the file ends inside the header");
        goto out;
    }
    if (fa_npy_parse_header(buf, prefix + text_len, &a->h, err, en)) goto out;
    /* Sizes agree before anything is allocated for the data (the header
     * was read in full, so the file holds at least data_offset bytes). */
    const uint64_t have = (uint64_t)sb.st_size - a->h.data_offset;
    if (have < a->h.data_bytes) {
        fail(err, en, "truncated: the header announces %zu data bytes, the file holds %llu",
             a->h.data_bytes, (unsigned long long)have);
        goto out;
    }
    if (have > a->h.data_bytes) {
        fail(err, en, "%llu unexpected bytes after the %zu data bytes the header announces",
             (unsigned long long)(have - a->h.data_bytes), a->h.data_bytes);
        goto out;
    }
    a->data = malloc(a->h.data_bytes ? a->h.data_bytes : 1);
    if (!a->data) {
        fail(err, en, "out of memory for %zu bytes of data", a->h.data_bytes);
        goto out;
    }
    if (fread(a->data, 1, a->h.data_bytes, f) != a->h.data_bytes) {
        fail(err, en, "read error: %s", ferror(f) ? strerror(errno) : "file shrank while reading");
        goto out;
    }
    rc = 0;
out:
    if (rc) {
        free(a->data);
        a->data = NULL;
    }
    free(buf);
    fclose(f);
    return rc;
}

void fa_npy_free(fa_npy_array *a) {
    free(a->data);
    a->data = NULL;
}

/* ---- writing ---- */

/* Version 1.0 header text padded so the data starts on a 64-byte boundary;
 * FA_NPY_MAX_DIMS dimensions of at most 19 digits always fit its u16 length. */
static size_t format_header(char *out, size_t n, const char *descr, int ndim, const int64_t *shape) {
    size_t len = (size_t)snprintf(out, n, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < ndim; i++)
        len += (size_t)snprintf(out + len, n - len, i ? ", %lld" : "%lld", (long long)shape[i]);
    len += (size_t)snprintf(out + len, n - len, ndim == 1 ? ",), }" : "), }");
    while ((10 + len + 1) % 64 != 0) out[len++] = ' ';
    out[len++] = '\n';
    return len;
}

static int write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int fa_npy_stage(const char *path, const char *descr, int ndim, const int64_t *shape,
                 const void *data, fa_npy_staged *st, char *err, size_t en) {
    char norm[16];
    size_t elem, bytes;
    int64_t count = 1;
    memset(st, 0, sizeof *st);
    if (strlen(descr) >= sizeof norm || parse_descr(descr, norm, &elem, err, en)) return -1;
    if (ndim < 0 || ndim > FA_NPY_MAX_DIMS) return fail(err, en, "ndim %d out of range", ndim);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || __builtin_mul_overflow(count, shape[i], &count))
            return fail(err, en, "bad shape for writing");
    if ((uint64_t)count > SIZE_MAX || __builtin_mul_overflow((size_t)count, elem, &bytes))
        return fail(err, en, "data size overflows");

    const char *slash = strrchr(path, '/');
    const int dir_len = slash ? (int)(slash - path) + 1 : 0;
    if (strlen(path) + 40 >= sizeof st->tmp_path) return fail(err, en, "path too long");
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(st->tmp_path, sizeof st->tmp_path, "%.*s.%s.%ld.%d.tmp", dir_len, path,
                 path + dir_len, (long)getpid(), attempt);
        fd = open(st->tmp_path, O_WRONLY | O_CREAT | O_EXCL, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) return fail(err, en, "cannot create a file beside %s: %s", path, strerror(errno));
    snprintf(st->path, sizeof st->path, "%s", path);
    st->active = 1;

    char header[FA_NPY_MAX_DIMS * 24 + 128];
    size_t hl = format_header(header, sizeof header, norm, ndim, shape);
    unsigned char prefix[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 255),
                                (unsigned char)(hl >> 8)};
    int saved = 0;
    if (write_all(fd, prefix, sizeof prefix) || write_all(fd, header, hl) ||
        write_all(fd, data, bytes))
        saved = errno ? errno : EIO;
    /* close reports deferred write errors (NFS, a full disk) */
    if (close(fd) != 0 && !saved) saved = errno ? errno : EIO;
    if (saved) {
        fa_npy_discard(st);
        return fail(err, en, "write error on %s: %s", path, strerror(saved));
    }
    return 0;
}

int fa_npy_commit(fa_npy_staged *st, char *err, size_t en) {
    if (!st->active) return fail(err, en, "nothing staged");
    if (rename(st->tmp_path, st->path) != 0) {
        const int saved = errno;
        fa_npy_discard(st);
        return fail(err, en, "cannot rename into %s: %s", st->path, strerror(saved));
    }
    st->active = 0;
    return 0;
}

void fa_npy_discard(fa_npy_staged *st) {
    if (st->active) unlink(st->tmp_path);
    st->active = 0;
}

int fa_npy_write(const char *path, const char *descr, int ndim, const int64_t *shape,
                 const void *data, char *err, size_t en) {
    fa_npy_staged st;
    if (fa_npy_stage(path, descr, ndim, shape, data, &st, err, en)) return -1;
    return fa_npy_commit(&st, err, en);
}
