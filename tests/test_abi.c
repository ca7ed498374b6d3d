/*
 * Binaries built against 0.2's header keep working: its entry points
 * (flashattn_params_init, flashattn_params_default, flashattn_kv_cache_init)
 * write only 0.2's fields, never past a 0.2 caller's struct, and a call
 * with such a struct runs with every later option at its default. Newer
 * callers' *_init_size writes exactly the size they pass.
 */
#define FLASHATTN_ABI_0_2 1
#include <stddef.h>
#include <string.h>

#include "testutil.h"

#define CANARY 0x5a

int main(void) {
    /* a 0.2 caller's params, with bytes after it that must not change */
    struct {
        struct flashattn_params_0_2 p;
        unsigned char after[64];
    } old;
    memset(&old, CANARY, sizeof old);
    flashattn_params_init((flashattn_params *)(void *)&old.p);
    int intact = 1;
    for (size_t i = 0; i < sizeof old.after; i++) intact &= old.after[i] == CANARY;
    TT_CHECK(intact, "flashattn_params_init wrote past a 0.2 struct");
    TT_CHECK(old.p.struct_size == sizeof old.p && old.p.window_left == -1 && old.p.causal == 0,
             "flashattn_params_init: struct_size %zu, window_left %lld", old.p.struct_size,
             (long long)old.p.window_left);
    memset(&old, CANARY, sizeof old);
    old.p = flashattn_params_default();
    TT_CHECK(old.p.struct_size == sizeof old.p && old.p.window_right == -1,
             "flashattn_params_default: struct_size %zu", old.p.struct_size);

    /* and it runs: causal attention through the 0.2 struct */
    float q[4 * 8], o[4 * 8];
    for (int i = 0; i < 32; i++) q[i] = (float)(i % 7) * 0.1f;
    const flashattn_tensor t = flashattn_tensor_bshd(q, FLASHATTN_F32, 1, 4, 1, 8);
    flashattn_tensor to = flashattn_tensor_bshd(o, FLASHATTN_F32, 1, 4, 1, 8);
    old.p.causal = 1;
    TT_CHECK(flashattn_fwd(&t, &t, &t, &to, NULL, (const flashattn_params *)(const void *)&old.p, NULL, 0) ==
                 FLASHATTN_OK, "a 0.2 params struct is refused: %s", flashattn_last_error());
    for (int c = 0; c < 8; c++) TT_CHECK(o[c] == q[c], "row 0 must be v's row 0 under causal");

    /* a 0.2 caller's cache struct */
    struct {
        unsigned char cache[offsetof(flashattn_kv_cache, seqlens_i64) + sizeof(const int64_t *)];
        unsigned char after[64];
    } oc;
    memset(&oc, CANARY, sizeof oc);
    flashattn_kv_cache_init((flashattn_kv_cache *)(void *)oc.cache);
    intact = 1;
    for (size_t i = 0; i < sizeof oc.after; i++) intact &= oc.after[i] == CANARY;
    TT_CHECK(intact, "flashattn_kv_cache_init wrote past a 0.2 struct");

    /* today's callers: exactly the size given */
    struct {
        flashattn_params p;
        unsigned char after[64];
    } now;
    memset(&now, CANARY, sizeof now);
    flashattn_params_init_size(&now.p, sizeof now.p);
    intact = 1;
    for (size_t i = 0; i < sizeof now.after; i++) intact &= now.after[i] == CANARY;
    TT_CHECK(intact && now.p.struct_size == sizeof now.p && now.p.varlen == NULL && now.p.mask == NULL,
             "flashattn_params_init_size");
    return tt_finish("test_abi");
}
