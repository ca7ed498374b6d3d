"""flashattn.merge: attention over disjoint key sets, merged, is attention
over their union (pass rules as in test_numpy_forward.py)."""

import numpy as np
import pytest

import flashattn
from flashattn import _lib
from test_numpy_forward import BF16, check, make

pytestmark = pytest.mark.skipif(not _lib.has("flashattn_merge"),
                                reason="the C library has no flashattn_merge")


@pytest.mark.parametrize("cuts", [[0, 50], [0, 17, 50], [0, 1, 2, 30, 49, 50]])
def test_parts_merge_into_the_whole(cuts):
    q, k, v = make((2, 12, 50, 4, 2, 32), np.float32, seed=1)
    parts = [flashattn.attention(q, k[:, a:b], v[:, a:b], return_lse=True)
             for a, b in zip(cuts, cuts[1:])]
    o, lse = flashattn.merge([p[0] for p in parts], [p[1] for p in parts])
    check(q, k, v, o, lse)


def test_parts_that_a_row_cannot_see_contribute_nothing():
    q, k, v = make((1, 6, 30, 2, 2, 16), np.float32, seed=2)
    whole = flashattn.attention(q, k, v, return_lse=True)
    # Bottom-right causal over 3 keys: rows 0..2 see none of them (LSE -inf);
    # their O, poisoned with NaN here, must not be read.
    o_empty, lse_empty = flashattn.attention(q, k[:, :3], v[:, :3], causal=True,
                                             return_lse=True)
    assert np.all(np.isneginf(lse_empty[:, :, :3])) and np.all(np.isfinite(lse_empty[:, :, 3:]))
    o_empty[:, :3] = np.nan
    lse_empty[:, :, 3:] = -np.inf
    o, lse = flashattn.merge([whole[0], o_empty], [whole[1], lse_empty])
    check(q, k, v, o, lse)
    nothing = np.full_like(lse, -np.inf)
    o, lse = flashattn.merge([o_empty, o_empty], [nothing, nothing])
    assert np.all(o == 0) and np.all(np.isneginf(lse))


def test_merge_in_place_and_output_dtype():
    q, k, v = make((1, 8, 40, 2, 1, 16), np.float32, seed=3)
    a = flashattn.attention(q, k[:, :25], v[:, :25], return_lse=True)
    b = flashattn.attention(q, k[:, 25:], v[:, 25:], return_lse=True)
    o, lse = flashattn.merge([a[0], b[0]], [a[1], b[1]], out=a[0])
    assert o is a[0]
    check(q, k, v, o, lse)
    o16, _ = flashattn.merge([a[0], b[0]], [a[1], b[1]], dtype=BF16)
    assert o16.dtype == BF16


def test_merge_errors():
    q, k, v = make((1, 4, 10, 2, 2, 8), np.float32)
    o, lse = flashattn.attention(q, k, v, return_lse=True)
    with pytest.raises(ValueError, match="one lse per partial output"):
        flashattn.merge([o, o], [lse])
    with pytest.raises(ValueError, match="lse must have shape"):
        flashattn.merge([o], [lse[:, :1]])
    with pytest.raises(ValueError):
        flashattn.merge([o, o[:, :3]], [lse, lse])
