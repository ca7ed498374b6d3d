/*
 * Documented hardware profiles for `flashattn plan` (data/hw_profiles.tsv:
 * the format and the source of every figure are in the file itself).
 */
#ifndef FA_CLI_HW_PROFILES_H
#define FA_CLI_HW_PROFILES_H

#include <stddef.h>

#include "flashattn.h"

#define HW_MAX_PROFILES 64
#define HW_PROFILES_MAX_BYTES (1 << 20)

typedef struct {
    char name[32], kind[8];
    int cores;
    double tile_kib, acc_kib;       /* per core; acc_kib 0: S/P and O share the tile buffer */
    char tile_buffer[80], acc_buffer[80];
    double tflops[FLASHATTN_DTYPE_COUNT]; /* indexed by flashattn_dtype; 0: not supported */
    double mem_gbs;
    char source[1024];
} hw_profile;

/* Parse the file's text: the number of profiles, or -1 with the reason in
 * why ("line 7: bad cores field"). */
int hw_profiles_parse(const char *text, size_t len, hw_profile *out, int max, char *why, size_t why_n);

/* Where the file is: $FLASHATTN_HW_PROFILES, then data/hw_profiles.tsv
 * beside the executable or one level up (a build directory inside the
 * source tree), then <prefix>/share/flashattn/ relative to the executable,
 * then the source tree this binary was built from. 0 and the path, or -1. */
int hw_profiles_find(char *path, size_t n);

/* Read and parse a file: the count, or -1 with why. */
int hw_profiles_load(const char *path, hw_profile *out, int max, char *why, size_t why_n);

/* The profile named name (case-insensitive), or NULL. */
const hw_profile *hw_profiles_get(const hw_profile *p, int n, const char *name);

#endif
