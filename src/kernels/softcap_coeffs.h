/* The softcap's rational tanh, shared by every table (see softcap_ref.c):
 * tanh(y) ~ y (1 + P1 u + .. + P4 u^4) / (1 + Q1 u + .. + Q4 u^4), u = y^2,
 * for 0 <= y < FA_TANH_ONE, and 1 from there. */
#ifndef FA_SOFTCAP_COEFFS_H
#define FA_SOFTCAP_COEFFS_H

#define FA_TANH_P1 0x1.120b06p-3f
#define FA_TANH_P2 0x1.ca2bd0p-9f
#define FA_TANH_P3 0x1.59c1f2p-16f
#define FA_TANH_P4 0x1.cad8fep-27f
#define FA_TANH_Q1 0x1.de5acep-2f
#define FA_TANH_Q2 0x1.a7f79ep-6f
#define FA_TANH_Q3 0x1.58853ap-12f
#define FA_TANH_Q4 0x1.a17db4p-21f
#define FA_TANH_ONE 9.0f

#endif
