/*
 * The .npy reader/writer of the CLI (tools/flashattn/npy.c): round trips,
 * the header variants numpy writes, and every kind of bad file we can think
 * of (bad magic, versions, malformed dicts, Fortran order, big-endian,
 * truncation at every byte, trailing bytes, headers that lie about the
 * size, dimensions that overflow). A bad file must be refused with a
 * message, and a failed or discarded write must leave no file behind.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "npy.h"
#include "testutil.h"

static char dir[64];

static void path_in_dir(char *buf, const char *name) { snprintf(buf, 256, "%s/%s", dir, name); }

static int files_in_dir(void) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(p, 1, n, f);
        fclose(f);
    }
}

/* Magic, version, length field and header text as numpy would lay them out
 * (no padding: the reader must not depend on it). */
static size_t make_file(unsigned char *out, int major, const char *dict) {
    size_t len = strlen(dict), pre = major == 1 ? 10 : 12;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (unsigned char)major, out[7] = 0;
    for (size_t i = 0; i < pre - 8; i++) out[8 + i] = (unsigned char)(len >> (8 * i));
    memcpy(out + pre, dict, len);
    return pre + len;
}

static int parse_ok(int major, const char *dict, fa_npy_header *h) {
    unsigned char buf[4096];
    char err[256] = "";
    size_t n = make_file(buf, major, dict);
    int r = fa_npy_parse_header(buf, n, h, err, sizeof err);
    if (r) fprintf(stderr, "  (parse error: %s)\n", err);
    return r == 0;
}

/* Refused, with a message that contains `why`. */
static void expect_bad(int major, const char *dict, const char *why) {
    unsigned char buf[4096];
    char err[256] = "";
    fa_npy_header h;
    size_t n = make_file(buf, major, dict);
    int r = fa_npy_parse_header(buf, n, &h, err, sizeof err);
    TT_CHECK(r == -1 && strstr(err, why), "header %s: got r=%d err '%s', wanted '%s'", dict, r, err, why);
}

static void test_round_trip(void) {
    const int64_t shape[4] = {2, 3, 5, 7};
    float data[210];
    for (int i = 0; i < 210; i++) data[i] = (float)i * 0.25f - 3.0f;
    char err[256];
    char p[256];
    path_in_dir(p, "a.npy");
    TT_CHECK(fa_npy_write(p, "<f4", 4, shape, data, err, sizeof err) == 0, "write: %s", err);
    fa_npy_array a;
    TT_CHECK(fa_npy_read(p, &a, err, sizeof err) == 0, "read back: %s", err);
    TT_CHECK(a.data && strcmp(a.h.descr, "<f4") == 0 && a.h.ndim == 4 && a.h.count == 210 &&
                 a.h.elem_size == 4 && a.h.data_bytes == sizeof data,
             "header read back: %s ndim %d count %lld", a.h.descr, a.h.ndim, (long long)a.h.count);
    for (int i = 0; i < 4; i++) TT_CHECK(a.h.shape[i] == shape[i], "shape[%d] = %lld", i, (long long)a.h.shape[i]);
    TT_CHECK(a.data && memcmp(a.data, data, sizeof data) == 0, "data differs after a round trip");
    TT_CHECK(a.h.data_offset % 64 == 0, "data offset %zu is not 64-byte aligned", a.h.data_offset);
    fa_npy_free(&a);

    /* numpy's own spelling of the header, byte for byte */
    FILE *f = fopen(p, "rb");
    char head[128] = "";
    if (f) {
        TT_CHECK(fread(head, 1, 128, f) == 128, "short file");
        fclose(f);
    }
    static const char want[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 5, 7), }";
    TT_CHECK(memcmp(head, want, sizeof want - 1) == 0 && head[126] == ' ' && head[127] == '\n',
             "header text differs from numpy's");

    /* 16-bit types, 1-D (numpy writes "(5,)"), 0-d and empty arrays */
    const int64_t one[1] = {5}, empty[4] = {1, 0, 2, 8};
    uint16_t h16[5] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000};
    const char *descrs[2] = {"<f2", "<u2"};
    for (int i = 0; i < 2; i++) {
        TT_CHECK(fa_npy_write(p, descrs[i], 1, one, h16, err, sizeof err) == 0, "write %s: %s", descrs[i], err);
        TT_CHECK(fa_npy_read(p, &a, err, sizeof err) == 0, "read %s: %s", descrs[i], err);
        TT_CHECK(a.data && a.h.ndim == 1 && a.h.shape[0] == 5 && strcmp(a.h.descr, descrs[i]) == 0 &&
                     memcmp(a.data, h16, sizeof h16) == 0,
                 "%s 1-D round trip", descrs[i]);
        fa_npy_free(&a);
    }
    TT_CHECK(fa_npy_write(p, "<f4", 0, NULL, data, err, sizeof err) == 0, "0-d write: %s", err);
    TT_CHECK(fa_npy_read(p, &a, err, sizeof err) == 0 && a.h.ndim == 0 && a.h.count == 1 &&
                 memcmp(a.data, data, 4) == 0,
             "0-d round trip: %s", err);
    fa_npy_free(&a);
    TT_CHECK(fa_npy_write(p, "<f4", 4, empty, NULL, err, sizeof err) == 0, "empty write: %s", err);
    TT_CHECK(fa_npy_read(p, &a, err, sizeof err) == 0 && a.h.count == 0 && a.h.data_bytes == 0 &&
                 a.data != NULL,
             "empty round trip: %s", err);
    fa_npy_free(&a);
    unlink(p);
}

static void test_header_variants(void) {
    fa_npy_header h;
    TT_CHECK(parse_ok(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4, 5), }\n", &h) &&
                 h.ndim == 4 && h.shape[3] == 5 && h.count == 120 && h.data_offset == 10 + 66,
             "numpy 1.0 header");
    TT_CHECK(parse_ok(2, "{'descr': '<f2', 'fortran_order': False, 'shape': (7,), }", &h) &&
                 h.ndim == 1 && h.shape[0] == 7 && h.data_bytes == 14 && strcmp(h.descr, "<f2") == 0,
             "2.0 header");
    TT_CHECK(parse_ok(3, "{\"shape\":(1,2,3,4),\"descr\":\"<u2\",\"fortran_order\":False}", &h) &&
                 h.count == 24 && strcmp(h.descr, "<u2") == 0,
             "3.0 header, double quotes, other key order, no spaces, no trailing comma");
    TT_CHECK(parse_ok(1, "{'descr': '=f4', 'fortran_order': False, 'shape': (3L, 4L), }", &h) &&
                 strcmp(h.descr, "<f4") == 0 && h.count == 12,
             "native byte order and Python 2 long dims");
    TT_CHECK(parse_ok(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", &h) && h.ndim == 0 &&
                 h.count == 1,
             "0-d");
    TT_CHECK(parse_ok(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 0, 9223372036854775807), }", &h) &&
                 h.count == 0 && h.data_bytes == 0,
             "an empty array may have one huge dimension");
}

static void test_bad_headers(void) {
    expect_bad(4, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "version 4.0");
    expect_bad(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", "Fortran");
    expect_bad(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", "big-endian");
    expect_bad(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", "not a numeric");
    expect_bad(1, "{'descr': 'float32', 'fortran_order': False, 'shape': (2,), }", "not a simple");
    expect_bad(1, "{'descr': '<f', 'fortran_order': False, 'shape': (2,), }", "not a simple");
    expect_bad(1, "{'descr': '<f99', 'fortran_order': False, 'shape': (2,), }", "not a simple");
    expect_bad(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", "'descr'");
    expect_bad(1, "{'descr': '<f4', 'shape': (2,), }", "needs the keys");
    expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1, }", "unexpected or repeated");
    expect_bad(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "repeated");
    expect_bad(1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", "True or False");
    expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", "tuple");
    expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", "non-negative");
    expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,), }", "malformed");
    expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", "malformed");
    expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,", "tuple");
    expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", "after the dict");
    expect_bad(1, "{'descr: '<f4', 'fortran_order': False, 'shape': (2,), }", "malformed dict");
    expect_bad(1, "'descr': '<f4'", "dict literal");
    expect_bad(1, "", "dict literal");
    expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", "overflows");
    expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", "count overflows");
    expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }", "data size overflows");
    char many[512] = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
    for (int i = 0; i < FA_NPY_MAX_DIMS + 1; i++) strcat(many, "1,");
    strcat(many, "), }");
    expect_bad(1, many, "more than");

    /* the prefix itself */
    unsigned char buf[256];
    char err[256] = "";
    fa_npy_header h;
    size_t n = make_file(buf, 1, "{}");
    buf[0] = 'X';
    TT_CHECK(fa_npy_parse_header(buf, n, &h, err, sizeof err) == -1 && strstr(err, "bad magic"), "bad magic: %s", err);
    n = make_file(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }");
    buf[7] = 1;
    TT_CHECK(fa_npy_parse_header(buf, n, &h, err, sizeof err) == -1 && strstr(err, "1.1"), "version 1.1: %s", err);
    n = make_file(buf, 2, "{}");
    buf[11] = 0x7f; /* header length ~2 GB */
    TT_CHECK(fa_npy_parse_header(buf, n, &h, err, sizeof err) == -1 && strstr(err, "larger than"), "huge header: %s", err);
    n = make_file(buf, 1, "{}");
    buf[8] = 200; /* longer than the bytes there */
    TT_CHECK(fa_npy_parse_header(buf, n, &h, err, sizeof err) == -1 && strstr(err, "truncated"), "short header: %s", err);
}

static void test_bad_files(void) {
    const int64_t shape[4] = {1, 2, 3, 4};
    float data[24] = {0};
    char err[256];
    char p[256], missing[256];
    path_in_dir(p, "t.npy");
    path_in_dir(missing, "missing.npy");
    TT_CHECK(fa_npy_write(p, "<f4", 4, shape, data, err, sizeof err) == 0, "write: %s", err);
    unsigned char full[512];
    FILE *f = fopen(p, "rb");
    size_t total = f ? fread(full, 1, sizeof full, f) : 0;
    if (f) fclose(f);
    TT_CHECK(total == 128 + sizeof data, "file size %zu", total);

    /* every proper prefix of a good file is refused */
    int refused = 0;
    for (size_t len = 0; len < total; len++) {
        fa_npy_array a;
        write_bytes(p, full, len);
        err[0] = '\0';
        if (fa_npy_read(p, &a, err, sizeof err) == -1 && a.data == NULL &&
            (strstr(err, "truncated") || strstr(err, "empty")))
            refused++;
        else
            fprintf(stderr, "  prefix of %zu bytes: '%s'\n", len, err);
    }
    TT_CHECK(refused == (int)total, "%d of %zu truncated files refused", refused, total);

    fa_npy_array a;
    full[total] = 0;
    write_bytes(p, full, total + 1);
    TT_CHECK(fa_npy_read(p, &a, err, sizeof err) == -1 && strstr(err, "unexpected bytes"), "trailing byte: %s", err);

    /* a header that announces far more data than the file has: refused
     * before any allocation of that size is attempted */
    unsigned char buf[256];
    size_t n = make_file(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576, 1024), }");
    write_bytes(p, buf, n);
    TT_CHECK(fa_npy_read(p, &a, err, sizeof err) == -1 && strstr(err, "truncated"), "lying header: %s", err);
    n = make_file(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3037000500, 3037000500), }");
    write_bytes(p, buf, n);
    TT_CHECK(fa_npy_read(p, &a, err, sizeof err) == -1 && strstr(err, "overflow"), "overflowing dims: %s", err);

    TT_CHECK(fa_npy_read(missing, &a, err, sizeof err) == -1 && strstr(err, "cannot open"),
             "missing file: %s", err);
    TT_CHECK(fa_npy_read(dir, &a, err, sizeof err) == -1, "a directory is not a .npy file");
    unlink(p);
}

static void test_staging(void) {
    const int64_t shape[1] = {3};
    const float data[3] = {1, 2, 3};
    char err[256];
    fa_npy_staged st;
    char p[256];
    path_in_dir(p, "o.npy");
    TT_CHECK(files_in_dir() == 0, "directory not empty at start");
    TT_CHECK(fa_npy_stage(p, "<f4", 1, shape, data, &st, err, sizeof err) == 0, "stage: %s", err);
    TT_CHECK(access(p, F_OK) != 0 && files_in_dir() == 1, "staging must not create the target");
    fa_npy_discard(&st);
    fa_npy_discard(&st);
    TT_CHECK(files_in_dir() == 0, "discard must remove the temporary file");

    TT_CHECK(fa_npy_stage(p, "<f4", 1, shape, data, &st, err, sizeof err) == 0, "stage: %s", err);
    TT_CHECK(fa_npy_commit(&st, err, sizeof err) == 0 && access(p, F_OK) == 0 && files_in_dir() == 1,
             "commit: %s", err);
    fa_npy_discard(&st); /* after a commit: must not remove the target */
    TT_CHECK(access(p, F_OK) == 0, "discard after commit removed the file");

    char sub[256];
    snprintf(sub, sizeof sub, "%s/no/such/dir/x.npy", dir);
    TT_CHECK(fa_npy_write(sub, "<f4", 1, shape, data, err, sizeof err) == -1 && strstr(err, "cannot create"),
             "write into a missing directory: %s", err);
    TT_CHECK(fa_npy_write(p, ">f4", 1, shape, data, err, sizeof err) == -1, "writing big-endian is refused");
    const int64_t neg[1] = {-1};
    TT_CHECK(fa_npy_write(p, "<f4", 1, neg, data, err, sizeof err) == -1, "negative dim is refused");
    TT_CHECK(files_in_dir() == 1, "failed writes left files behind");
    unlink(p);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/fa_test_npy_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_header_variants();
    test_bad_headers();
    test_bad_files();
    test_staging();
    TT_CHECK(files_in_dir() == 0, "files left in %s", dir);
    rmdir(dir);
    return tt_finish("test_npy");
}
