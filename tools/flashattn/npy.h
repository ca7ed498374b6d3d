/*
 * NumPy .npy files (format versions 1.0, 2.0 and 3.0), C order only.
 *
 *   "\x93NUMPY" major minor  header_len (u16 LE in 1.0, u32 LE in 2.0/3.0)
 *   "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" padded
 *   with spaces to a multiple of 64 bytes, ending in '\n'; then the data.
 *
 * The reader trusts nothing: the header is parsed strictly, every size is
 * checked for overflow, and the file must hold exactly the bytes the header
 * announces before any data buffer is allocated. Errors come back as a
 * message in the caller's buffer; nothing here prints or exits.
 */
#ifndef FA_NPY_H
#define FA_NPY_H

#include <stddef.h>
#include <stdint.h>

#define FA_NPY_MAX_DIMS 32
/* Header text larger than this is refused (numpy refuses above 10000 too). */
#define FA_NPY_MAX_HEADER 65536

typedef struct fa_npy_header {
    char descr[16];    /* as written, e.g. "<f4" */
    int ndim;
    int64_t shape[FA_NPY_MAX_DIMS];
    int64_t count;     /* product of shape (1 for a 0-d array) */
    size_t elem_size;  /* from descr */
    size_t data_offset; /* bytes before the data */
    size_t data_bytes;
} fa_npy_header;

typedef struct fa_npy_array {
    fa_npy_header h;
    void *data; /* data_bytes bytes (at least 1 allocated) */
} fa_npy_array;

/* Parse the magic, version and header from the first n bytes of a file
 * (n may be more than the header). Returns 0, or -1 with a message in err.
 * Fortran-order arrays, big-endian and non-numeric descrs are refused. */
int fa_npy_parse_header(const unsigned char *buf, size_t n, fa_npy_header *h, char *err,
                        size_t err_len);

/* Read a whole file. Returns 0, or -1 with a message (a->data is then NULL). */
int fa_npy_read(const char *path, fa_npy_array *a, char *err, size_t err_len);
void fa_npy_free(fa_npy_array *a);

/*
 * Writing goes through a temporary file beside the target, renamed into
 * place by fa_npy_commit: a failed run never leaves a partial or a new file
 * at the target path, and several outputs can be staged, then committed
 * together once all of them have been written.
 */
typedef struct fa_npy_staged {
    char tmp_path[4096];
    char path[4096];
    int active;
} fa_npy_staged;

int fa_npy_stage(const char *path, const char *descr, int ndim, const int64_t *shape,
                 const void *data, fa_npy_staged *st, char *err, size_t err_len);
int fa_npy_commit(fa_npy_staged *st, char *err, size_t err_len);
/* Remove the temporary file, if any; safe to call twice. */
void fa_npy_discard(fa_npy_staged *st);

/* stage + commit. */
int fa_npy_write(const char *path, const char *descr, int ndim, const int64_t *shape,
                 const void *data, char *err, size_t err_len);

#endif
