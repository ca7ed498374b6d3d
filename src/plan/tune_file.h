/*
 * The tuning file: tiles `flashattn tune --save` measured as best, keyed by
 * (CPU model, ISA, head_dim, dtype, causal). The library reads the file
 * FLASHATTN_TUNE_FILE names when a forward call leaves a tile automatic.
 *
 * Format (text, one entry per line, fields separated by one tab):
 *
 *   # flashattn tuning file v1                       <- required first line
 *   # any other line starting with '#' is a comment
 *   <cpu model>  <isa>  <head_dim>  <f32|f16|bf16>  <0|1>  <block_m>  <block_n>  <note>
 *
 * A missing, foreign (no header) or corrupt file is ignored as a whole and
 * leaves one warning, which the library never prints: fa_tune_take_warning
 * hands it to the command-line tool. A file is read once per process per
 * path; changing FLASHATTN_TUNE_FILE makes the next call read the new one.
 */
#ifndef FA_PLAN_TUNE_FILE_H
#define FA_PLAN_TUNE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "flashattn.h"

#define FA_TUNE_HEADER "# flashattn tuning file v1"
#define FA_TUNE_MAX_ENTRIES 256
#define FA_TUNE_MAX_BYTES (1 << 20)

typedef struct fa_tune_key {
    char cpu[96];
    char isa[16];
    int64_t head_dim;
    flashattn_dtype dtype;
    int causal;
} fa_tune_key;

typedef struct fa_tune_entry {
    fa_tune_key key;
    int block_m, block_n;
    char note[128]; /* free text: how it was measured (truncated) */
} fa_tune_entry;

/* The key for this CPU (fa_cpu_model) and the given shape. */
void fa_tune_key_make(fa_tune_key *key, const char *isa, int64_t head_dim, flashattn_dtype dt,
                      int causal);

/* Parse a whole file's text. Returns 1 and the entries (at most max; more
 * is an error), or 0 with the reason in why ("line 3: block_n 'x' is not
 * a number"). Never prints, never allocates. */
int fa_tune_parse(const char *text, size_t len, fa_tune_entry *out, int max, int *n, char *why,
                  size_t why_n);

/* Whether FLASHATTN_TUNE_FILE names a file (set and not empty): planners
 * skip building a key when it does not (that key costs as much as the
 * rest of a short call's planning). */
int fa_tune_file_named(void);

/* Tiles stored for key in the file FLASHATTN_TUNE_FILE names: returns 1
 * and sets *block_m, *block_n; 0 when the variable is unset or empty, the
 * file has no entry for key, or the file is unusable (a warning is then
 * recorded, once per path). Thread-safe. */
int fa_tune_lookup(const fa_tune_key *key, int *block_m, int *block_n);

/* Record a warning about the tuning file (kept until taken; a second one
 * before that is dropped, so callers see the first cause). */
void fa_tune_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Copy the pending warning into buf and clear it: returns 1 if there was
 * one. For the command-line tool, which prints it once. */
int fa_tune_take_warning(char *buf, size_t n);

/* Whether two keys are the same entry's. */
int fa_tune_key_equal(const fa_tune_key *a, const fa_tune_key *b);

/* A whole file (at most FA_TUNE_MAX_BYTES) into a NUL-terminated heap
 * buffer, its length in *len; NULL with the reason in why on failure. */
char *fa_tune_read_file(const char *path, size_t *len, char *why, size_t why_n);

/* (Writing the file is the tuner's: tool/tool.h, fa_tune_save.) */

#endif
