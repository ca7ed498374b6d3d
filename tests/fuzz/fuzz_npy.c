/*
 * libFuzzer harness over the CLI's .npy reader (tools/flashattn/npy.c): the
 * fuzzer's bytes are a file. Properties (docs/reliability.md):
 *   - fa_npy_parse_header and fa_npy_read never crash or trip ASan/UBSan,
 *     and either succeed or fail with a message;
 *   - a parsed header is consistent: 0..FA_NPY_MAX_DIMS dimensions, each
 *     >= 0, count their product, data_bytes count * elem_size, the data
 *     offset within the bytes given, a normalised little-endian descr;
 *   - the header does not depend on the bytes after it, and a file cut
 *     anywhere inside it is refused;
 *   - fa_npy_read succeeds exactly when the header parses and the file
 *     holds exactly data_bytes after it, and then returns those bytes; when
 *     it fails, it leaves no data;
 *   - what it read, written back with fa_npy_write, reads back the same.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "npy.h"

static char dir[64], in_path[96], out_path[96];

static void cleanup(void) {
    unlink(in_path);
    unlink(out_path);
    rmdir(dir);
}

/* A message was written, and stays inside its buffer. */
static void check_message(const char *ctx, const char *err, size_t n) {
    if (!err[0] || !memchr(err, '\0', n)) fz_fail(ctx, "a refusal without a terminated message");
}

static int same_header(const fa_npy_header *a, const fa_npy_header *b) {
    if (strcmp(a->descr, b->descr) || a->ndim != b->ndim || a->count != b->count ||
        a->elem_size != b->elem_size || a->data_offset != b->data_offset || a->data_bytes != b->data_bytes)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s", "/tmp/fa_fuzz_npy.XXXXXX");
        if (!mkdtemp(dir)) return 0;
        snprintf(in_path, sizeof in_path, "%s/in.npy", dir);
        snprintf(out_path, sizeof out_path, "%s/out.npy", dir);
        atexit(cleanup);
    }
    const char *ctx = "fa_npy_parse_header / fa_npy_read on the input as a file";
    char err[256];
    fa_npy_header h, again;
    memset(err, 0, sizeof err);
    const int parsed = fa_npy_parse_header(data, size, &h, err, sizeof err) == 0;
    if (!parsed) {
        check_message(ctx, err, sizeof err);
    } else {
        if (h.ndim < 0 || h.ndim > FA_NPY_MAX_DIMS) fz_fail(ctx, "ndim %d", h.ndim);
        int64_t count = 1;
        for (int i = 0; i < h.ndim; i++) {
            if (h.shape[i] < 0) fz_fail(ctx, "shape[%d] = %lld", i, (long long)h.shape[i]);
            if (__builtin_mul_overflow(count, h.shape[i], &count)) fz_fail(ctx, "the element count overflows");
        }
        if (count != h.count || h.data_bytes != (size_t)h.count * h.elem_size || h.elem_size < 1 ||
            h.elem_size > 16 || h.data_offset > size || !memchr(h.descr, '\0', sizeof h.descr) ||
            (h.descr[0] != '<' && h.descr[0] != '|'))
            fz_fail(ctx, "inconsistent header: descr '%.16s' ndim %d count %lld elem %zu offset %zu bytes %zu",
                    h.descr, h.ndim, (long long)h.count, h.elem_size, h.data_offset, h.data_bytes);
        if (fa_npy_parse_header(data, h.data_offset, &again, err, sizeof err) || !same_header(&h, &again))
            fz_fail(ctx, "the header read from its own bytes alone differs");
        memset(err, 0, sizeof err);
        if (fa_npy_parse_header(data, h.data_offset - 1, &again, err, sizeof err) == 0)
            fz_fail(ctx, "the header cut one byte short was accepted");
        check_message(ctx, err, sizeof err);
    }

    FILE *f = fopen(in_path, "wb");
    if (!f) return 0;
    const size_t wrote = fwrite(data, 1, size, f);
    if (fclose(f) != 0 || wrote != size) return 0;
    fa_npy_array a;
    memset(err, 0, sizeof err);
    const int read = fa_npy_read(in_path, &a, err, sizeof err) == 0;
    const int should = parsed && size - h.data_offset == h.data_bytes;
    if (read != should) fz_fail(ctx, "fa_npy_read %s a file whose header %s", read ? "accepted" : "refused",
                                parsed ? "parses" : "does not parse");
    if (!read) {
        check_message(ctx, err, sizeof err);
        if (a.data) fz_fail(ctx, "a failed read left data");
        return 0;
    }
    if (!same_header(&a.h, &h) || memcmp(a.data, data + h.data_offset, h.data_bytes))
        fz_fail(ctx, "fa_npy_read returned other bytes than the file's");
    if (h.data_bytes <= ((size_t)1 << 20)) {
        fa_npy_array b;
        if (fa_npy_write(out_path, h.descr, h.ndim, h.shape, a.data, err, sizeof err) ||
            fa_npy_read(out_path, &b, err, sizeof err))
            fz_fail(ctx, "what was read does not write and read back: %s", err);
        if (strcmp(b.h.descr, h.descr) || b.h.ndim != h.ndim || b.h.count != h.count ||
            memcmp(b.h.shape, h.shape, sizeof(int64_t) * (size_t)h.ndim) || memcmp(b.data, a.data, h.data_bytes))
            fz_fail(ctx, "written and read back, the array differs");
        fa_npy_free(&b);
    }
    fa_npy_free(&a);
    return 0;
}
