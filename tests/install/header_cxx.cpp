// Compiled by test_header_cxx.sh as strict C++11: the header must be valid
// C++ and its extern "C" must make these calls link against the C library.
#include <flashattn.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

int main() {
    const int64_t b = 1, s = 4, h = 2, d = 8, n = b * s * h * d;
    std::vector<float> q(n, 0.25f), k(n, -0.5f), v(n), o(n, NAN);
    for (int64_t i = 0; i < n; i++) v[i] = static_cast<float>(i % d);
    flashattn_tensor Q = flashattn_tensor_bshd(q.data(), FLASHATTN_F32, b, s, h, d);
    flashattn_tensor K = flashattn_tensor_bshd(k.data(), FLASHATTN_F32, b, s, h, d);
    flashattn_tensor V = flashattn_tensor_bshd(v.data(), FLASHATTN_F32, b, s, h, d);
    flashattn_tensor O = flashattn_tensor_bshd(o.data(), FLASHATTN_F32, b, s, h, d);
    flashattn_params p = flashattn_params_default();
    size_t ws = 0;
    flashattn_status st = flashattn_fwd_workspace_size(&Q, &K, &V, &O, nullptr, &p, &ws);
    std::vector<unsigned char> work(ws);
    if (st == FLASHATTN_OK) st = flashattn_fwd(&Q, &K, &V, &O, nullptr, &p, work.data(), ws);
    if (st != FLASHATTN_OK) {
        std::fprintf(stderr, "flashattn_fwd: %s (%s)\n", flashattn_strerror(st), flashattn_last_error());
        return 1;
    }
    // Equal scores: every output row is the mean of V's rows, which is V's row.
    for (int64_t i = 0; i < n; i++) {
        if (!(std::fabs(o[i] - v[i]) <= 1e-5f)) {
            std::fprintf(stderr, "o[%lld] = %g, expected %g\n", static_cast<long long>(i), o[i], v[i]);
            return 1;
        }
    }
    // An error through the same path: a status enum and its message.
    st = flashattn_fwd(nullptr, &K, &V, &O, nullptr, &p, nullptr, 0);
    if (st != FLASHATTN_ERR_NULL_POINTER || std::strlen(flashattn_strerror(st)) == 0) {
        std::fprintf(stderr, "flashattn_fwd(NULL q) gave status %d, expected FLASHATTN_ERR_NULL_POINTER\n",
                     static_cast<int>(st));
        return 1;
    }
    std::printf("ok: C++11 against flashattn %s (%s)\n", flashattn_version(), flashattn_isa());
    return 0;
}
