/* The AVX2 8-bit tiles of vnni_avx2.c built with VPDPBUSD emulated in
 * AVX2 (kernels/avx2/i8_avx2.h), so that their loops, offsets and
 * epilogues are tested bit for bit on CPUs without AVX-VNNI. */
#define FA_AVXVNNI_EMULATE
#include "kernels/avx2/vnni_avx2.c"
