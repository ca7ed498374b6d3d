/* A program outside the project, built against an installed flashattn (by
 * test_install.sh, through find_package and through pkg-config): one small
 * forward call, and the version three ways. It uses only the public header. */
#include <flashattn.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#ifndef FA_EXPECT_VERSION
#error "build with -DFA_EXPECT_VERSION=\"x.y.z\" (the installed package's version)"
#endif

#define STR_(x) #x
#define STR(x) STR_(x)

int main(void) {
    enum { B = 1, S = 4, H = 2, D = 8, N = B * S * H * D };
    float q[N], k[N], v[N], o[N];
    for (int i = 0; i < N; i++) {
        q[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
        k[i] = (float)((i * 5) % 13) / 13.0f - 0.5f;
        v[i] = (float)((i * 3) % 17) / 17.0f - 0.5f;
        o[i] = NAN; /* so that an element left unwritten shows */
    }
    flashattn_tensor Q = flashattn_tensor_bshd(q, FLASHATTN_F32, B, S, H, D);
    flashattn_tensor K = flashattn_tensor_bshd(k, FLASHATTN_F32, B, S, H, D);
    flashattn_tensor V = flashattn_tensor_bshd(v, FLASHATTN_F32, B, S, H, D);
    flashattn_tensor O = flashattn_tensor_bshd(o, FLASHATTN_F32, B, S, H, D);
    flashattn_params p = flashattn_params_default();
    flashattn_status st = flashattn_fwd(&Q, &K, &V, &O, NULL, &p, NULL, 0);
    if (st != FLASHATTN_OK) {
        fprintf(stderr, "flashattn_fwd: %s (%s)\n", flashattn_strerror(st), flashattn_last_error());
        return 1;
    }
    /* Each output is a convex combination of V's column: finite, within its range. */
    for (int i = 0; i < N; i++) {
        int d = i % D, h = (i / D) % H;
        float lo = INFINITY, hi = -INFINITY;
        for (int s = 0; s < S; s++) {
            float x = v[(s * H + h) * D + d];
            lo = x < lo ? x : lo;
            hi = x > hi ? x : hi;
        }
        if (!isfinite(o[i]) || o[i] < lo - 1e-5f || o[i] > hi + 1e-5f) {
            fprintf(stderr, "o[%d] = %g, outside V's range [%g, %g]\n", i, o[i], lo, hi);
            return 1;
        }
    }
    /* The library's own string, the header it was built against and the
     * package metadata (CMake's ConfigVersion or the .pc) must agree. */
    const char *lib = flashattn_version();
    const char *hdr = STR(FLASHATTN_VERSION_MAJOR) "." STR(FLASHATTN_VERSION_MINOR) "." STR(
        FLASHATTN_VERSION_PATCH);
    if (strcmp(lib, hdr) != 0 || strcmp(lib, FA_EXPECT_VERSION) != 0) {
        fprintf(stderr, "version mismatch: library %s, header %s, package %s\n", lib, hdr,
                FA_EXPECT_VERSION);
        return 1;
    }
    printf("ok: flashattn %s, path %s\n", lib, flashattn_isa());
    return 0;
}
