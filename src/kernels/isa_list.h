/*
 * The kernel paths: the one list that dispatch, the build, the tests and the
 * docs take their names from. One line a path, worst first:
 *
 *   FA_ISA(name, automatic, flags)
 *     name       the path (FLASHATTN_ISA=name, flashattn_isa()); its kernels
 *                are the files of src/kernels/<name>/ (scalar: ref/), its
 *                table fa_kernels_<name>;
 *     automatic  1: the library may pick it on its own (the best such path
 *                the CPU runs); 0: only when FLASHATTN_ISA names it;
 *     flags      the compiler flags of its files (the build reads them here;
 *                a path whose flags the compiler rejects is left out).
 *
 * Include it after defining FA_ISA; it undefines FA_ISA at the end.
 * tests/test_isa_list.sh checks the build, the header's and the Python
 * package's docs against it.
 */
FA_ISA(scalar, 1, "")
FA_ISA(avx2, 1, "-mavx2 -mfma -mf16c")
FA_ISA(avx512, 1, "-mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c")
/* VDPBF16PS ran at half the FP32 FMA rate wherever measured
 * (docs/performance.md), so widening bf16 beats this path: opt-in. */
FA_ISA(avx512bf16, 0, "-mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c -mavx512bf16")
FA_ISA(amx, 1, "-mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c -mamx-tile -mamx-bf16 -mamx-int8")
/* AArch64: Advanced SIMD, in every AArch64 application core. */
FA_ISA(neon, 1, "-march=armv8-a")
/* SVE's GEMM tile and exp2 at the CPU's vector length, NEON elsewhere.
 * Opt-in: where SVE is 128 bits (Neoverse N2, V2) it is the NEON tile,
 * and no run on wider SVE was measured (docs/arm.md). */
FA_ISA(sve, 0, "-march=armv8.2-a+sve")
#undef FA_ISA
