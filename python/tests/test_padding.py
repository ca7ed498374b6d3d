"""flashattn.unpad_input and pad_input on NumPy arrays (torch tensors:
test_torch_varlen.py): round trips, and a padded batch through
attention_varlen equal to each sequence alone."""

import numpy as np
import pytest

import flashattn
from flashattn import _lib
from test_varlen import check_forward


def mask_of(lengths, seqlen):
    return np.arange(seqlen)[None, :] < np.array(lengths)[:, None]


def test_unpad_then_pad_round_trips():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 7, 3, 5)).astype(np.float32)
    mask = mask_of([7, 0, 3, 1], 7)
    mask[2, 1] = False                     # a hole: masks need not be prefixes
    packed, indices, cu, max_seqlen, used = flashattn.unpad_input(x, mask)
    assert packed.shape == (mask.sum(), 3, 5)
    assert indices.dtype == np.int64 and cu.dtype == np.int32 and used.dtype == np.int32
    assert cu.tolist() == [0, 7, 7, 9, 10] and max_seqlen == 7 and used.tolist() == [7, 0, 2, 1]
    assert np.array_equal(packed, x[mask])
    back = flashattn.pad_input(packed, indices, 4, 7)
    assert np.array_equal(back, np.where(mask[..., None, None], x, 0))


def test_unused_mask_gives_seqused():
    """As FlashAttention-2's: tokens under unused_mask are packed too, but
    not counted in seqused (allocated room past each sequence's keys)."""
    x = np.arange(2 * 5, dtype=np.float32).reshape(2, 5, 1)
    used, room = mask_of([2, 3], 5), mask_of([4, 3], 5) & ~mask_of([2, 3], 5)
    packed, indices, cu, max_seqlen, seqused = flashattn.unpad_input(x, used, room)
    assert cu.tolist() == [0, 4, 7] and seqused.tolist() == [2, 3] and max_seqlen == 4
    assert packed[:, 0].tolist() == [0, 1, 2, 3, 5, 6, 7]


def test_empty_batch():
    packed, indices, cu, max_seqlen, used = flashattn.unpad_input(
        np.zeros((0, 4, 2)), np.zeros((0, 4), bool))
    assert packed.shape == (0, 2) and cu.tolist() == [0] and max_seqlen == 0
    assert flashattn.pad_input(packed, indices, 0, 4).shape == (0, 4, 2)


def test_bad_mask_shape():
    with pytest.raises(ValueError, match="attention_mask must be"):
        flashattn.unpad_input(np.zeros((2, 4, 3)), np.ones((2, 3), bool))


@pytest.mark.skipif(not _lib.has("flashattn_varlen_init_size"), reason="no varlen in the library")
def test_a_padded_batch_through_attention_varlen():
    rng = np.random.default_rng(1)
    lengths = [9, 1, 0, 6]
    q, k, v = (rng.standard_normal((4, 9, 2, 16)).astype(np.float32) for _ in range(3))
    mask = mask_of(lengths, 9)
    (qp, idx, cu, max_seqlen, _), kp, vp = (flashattn.unpad_input(q, mask),
                                             flashattn.unpad_input(k, mask)[0],
                                             flashattn.unpad_input(v, mask)[0])
    o = flashattn.attention_varlen(qp, kp, vp, cu, cu, max_seqlen, max_seqlen, causal=True)
    check_forward(o, None, qp, kp, vp, cu, cu, causal=True)
    padded = flashattn.pad_input(o, idx, 4, 9)
    assert padded.shape == q.shape and np.all(padded[~mask] == 0)
