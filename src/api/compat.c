/*
 * The 0.2 entry points, for binaries built against 0.2's header, whose
 * structs end where 0.2's did: they must not be written past that. Newer
 * callers reach the *_init_size functions through the header's macros.
 */
#define FLASHATTN_ABI_0_2 1
#include <stddef.h>
#include <string.h>

#include "flashattn.h"

/* 0.2's structs: params as struct flashattn_params_0_2 (its fields where
 * today's are, its size what a 0.2 caller's sizeof was), the cache ending
 * at seqlens_i64. */
#define FA_PARAMS_0_2_SIZE sizeof(struct flashattn_params_0_2)
#define FA_KV_CACHE_0_2_SIZE (offsetof(flashattn_kv_cache, seqlens_i64) + sizeof(const int64_t *))

_Static_assert(offsetof(struct flashattn_params_0_2, num_splits) == offsetof(flashattn_params, num_splits),
               "0.2's params fields are where they were");
_Static_assert(sizeof(struct flashattn_params_0_2) <= offsetof(flashattn_params, varlen),
               "0.2's params end before the first later field");

void flashattn_params_init(flashattn_params *p) { flashattn_params_init_size(p, FA_PARAMS_0_2_SIZE); }

struct flashattn_params_0_2 flashattn_params_default(void) {
    struct flashattn_params_0_2 p;
    flashattn_params_init_size((flashattn_params *)(void *)&p, FA_PARAMS_0_2_SIZE);
    return p;
}

void flashattn_kv_cache_init(flashattn_kv_cache *c) { flashattn_kv_cache_init_size(c, FA_KV_CACHE_0_2_SIZE); }
