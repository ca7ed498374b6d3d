/*
 * Standard attention, as the source documents define it, for `flashattn
 * bench` and the tests (not part of the shipped library):
 *
 *   S = Q K^T * scale      materialised, seq_q x seq_k floats per head
 *   P = softmax(S)         one more pass over S, in place
 *   O = P V                a third pass over S
 *
 * Each phase finishes for every head of a pass before the next starts, so
 * S makes its round trip through memory exactly as in the documents.
 *
 * Built from the library's own parts (the fa_kernels GEMM register tile,
 * row_max, exp2_sum, load/store; K and V packed by the forward driver's
 * pack functions), so that a timing comparison with flashattn_fwd isolates
 * what fusion buys. Made as fast as those parts allow:
 *   - OpenMP over (head, row block) in every phase;
 *   - under causal or window masks, tiles no row of a row block can see are
 *     neither computed nor read (S is still allocated in full);
 *   - the 1/rowsum of the softmax is applied to O's rows (d per row) rather
 *     than to P (seq_k per row), which saves a read-write pass over S.
 * Same semantics and descriptors as flashattn_fwd (dtypes, strides, GQA,
 * causal/window with either alignment); no LSE output.
 *
 * Extra memory: S for every head of a pass (as many heads as fit
 * FA_STD_PASS_BYTES, at least one), the packed K/V of their kv-heads, and
 * per-thread tiles; fa_standard_workspace_size() reports the total.
 */
#ifndef FA_BASELINE_STANDARD_H
#define FA_BASELINE_STANDARD_H

#include <stddef.h>

#include "flashattn.h"
#include "kernels/kernels.h"

/* Short heads share a pass (fewer barriers: at seq 16 they dominate);
 * from seq ~1024 on, each head gets a pass of its own, so the reported
 * memory is one head's S, as in the source documents' tables. */
#define FA_STD_PASS_BYTES ((size_t)4 << 20)

/* Workspace bytes fa_standard_fwd needs for this problem with kernel table
 * kern and p->num_threads threads (0: the OpenMP default). */
flashattn_status fa_standard_workspace_size(const flashattn_tensor *q, const flashattn_tensor *k,
                                            const flashattn_tensor *v, const flashattn_tensor *o,
                                            const flashattn_params *p, const fa_kernels *kern,
                                            size_t *workspace_bytes);

/* O = standard attention. workspace NULL: allocated and freed here. */
flashattn_status fa_standard_fwd(const flashattn_tensor *q, const flashattn_tensor *k,
                                 const flashattn_tensor *v, const flashattn_tensor *o,
                                 const flashattn_params *p, const fa_kernels *kern,
                                 void *workspace, size_t workspace_bytes);

/*
 * The same three phases on cblas_sgemm (built when CMake finds a CBLAS:
 * FA_HAVE_CBLAS), one head at a time with the BLAS's own threads, the
 * softmax on kern's row kernels with OpenMP. f32 tensors only, and row
 * strides (stride_seq) of at least head_dim, as BLAS needs. Masks are
 * applied to a full S: a plain GEMM cannot skip the hidden tiles.
 * Without a CBLAS these return FLASHATTN_ERR_UNSUPPORTED.
 */
flashattn_status fa_standard_cblas_workspace_size(const flashattn_tensor *q,
                                                  const flashattn_tensor *k,
                                                  const flashattn_tensor *v,
                                                  const flashattn_tensor *o,
                                                  const flashattn_params *p, size_t *workspace_bytes);
flashattn_status fa_standard_cblas_fwd(const flashattn_tensor *q, const flashattn_tensor *k,
                                       const flashattn_tensor *v, const flashattn_tensor *o,
                                       const flashattn_params *p, const fa_kernels *kern,
                                       void *workspace, size_t workspace_bytes);

/* Which BLAS the CBLAS baseline runs on ("OpenBLAS 0.3.21 ...", "CBLAS
 * (not OpenBLAS)"), or NULL when the build has none. */
const char *fa_standard_cblas_name(void);

#endif
