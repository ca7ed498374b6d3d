"""Bad input becomes a Python exception carrying the C library's message, and
nothing is written to the outputs."""

import numpy as np
import pytest

import flashattn
from flashattn import _lib


def qkv(b=1, sq=4, sk=6, hq=2, hk=2, d=8, dtype=np.float32):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((b, sq, hq, d)).astype(dtype),
            rng.standard_normal((b, sk, hk, d)).astype(dtype),
            rng.standard_normal((b, sk, hk, d)).astype(dtype))


@pytest.mark.parametrize("mutate,message", [
    (lambda q, k, v: (q, k[:, :, :, :4], v), "same head_dim"),
    (lambda q, k, v: (q, k, v[:, :5]), "k and v must have the same seqlen"),
    (lambda q, k, v: (q[:1], k, np.concatenate([v, v])), "same batch"),
    (lambda q, k, v: (np.concatenate([q, q[:, :, :1]], 2), k, v), "not a multiple of heads_kv"),
    (lambda q, k, v: (q.astype(np.float16), k, v), "same dtype"),
])
def test_bad_shapes_raise_value_error_with_library_message(mutate, message):
    q, k, v = mutate(*qkv())
    with pytest.raises(ValueError, match=message) as info:
        flashattn.attention(q, k, v)
    assert isinstance(info.value, flashattn.Error) and info.value.status is not None


def test_head_dim_above_the_maximum():
    q, k, v = qkv(d=577)
    with pytest.raises(ValueError, match="head_dim is 577"):
        flashattn.attention(q, k, v)


@pytest.mark.parametrize("kwargs,message", [
    (dict(window_size=(-2, 0)), "window_left/right must be >= -1"),
    (dict(num_threads=-1), "num_threads must be >= 0"),
    (dict(block_m=-4), "block_m/block_n must be >= 0"),
    (dict(softmax_scale=float("inf")), "scale must be finite"),
])
def test_bad_params_raise_value_error_from_the_library(kwargs, message):
    with pytest.raises(ValueError, match=message):
        flashattn.attention(*qkv(), **kwargs)


@pytest.mark.parametrize("kwargs,message", [
    (dict(align="middle"), "align must be"),
    (dict(window_size=5), "window_size must be a pair"),
    (dict(window_size=(1.5, 0)), "window_size must hold integers"),
    (dict(softmax_scale=0.0), "softmax_scale must be nonzero"),
    (dict(softmax_scale="big"), "softmax_scale must be a number"),
    (dict(num_threads=2.5), "num_threads must be an integer"),
])
def test_bad_python_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        flashattn.attention(*qkv(), **kwargs)


def test_wrong_rank_and_dtype():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="must have 4 dimensions"):
        flashattn.attention(q[0], k, v)
    with pytest.raises(ValueError, match="dtype int32 is not supported"):
        flashattn.attention(q.astype(np.int32), k, v)


def test_extent_overflow_is_caught_before_any_read():
    q, k, v = qkv()
    # Strides that address far beyond any memory: the library must refuse
    # them from arithmetic alone, before touching the data.
    huge = np.lib.stride_tricks.as_strided(k, shape=(1, 6, 2, 8),
                                           strides=(4, 2**61, 4 * 8, 4))
    with pytest.raises(ValueError, match="overflow"):
        flashattn.attention(q, huge, v)


def test_nothing_is_written_on_error():
    q, k, v = qkv()
    out = np.full((1, 4, 2, 8), 7.0, np.float32)
    with pytest.raises(ValueError):
        flashattn.attention(q, k[:, :, :, :4], v, out=out)
    assert np.all(out == 7.0)


@pytest.mark.parametrize("make_out,message", [
    (lambda: np.empty((1, 4, 2, 8), np.float16), "out must have shape"),
    (lambda: np.empty((1, 4, 2, 9), np.float32), "out must have shape"),
    (lambda: np.empty((1, 4, 2, 16), np.float32)[..., ::2], "strides cannot be given"),
    (lambda: [0.0], "out must be a numpy.ndarray"),
])
def test_bad_out(make_out, message):
    with pytest.raises(ValueError, match=message):
        flashattn.attention(*qkv(), out=make_out())


def test_read_only_out():
    out = np.empty((1, 4, 2, 8), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        flashattn.attention(*qkv(), out=out)


def test_aliasing_out_rows_are_refused():
    # A zero batch stride would make two batches write the same rows.
    out = np.lib.stride_tricks.as_strided(np.empty((1, 4, 2, 8), np.float32),
                                          shape=(2, 4, 2, 8), strides=(0, 64, 32, 4))
    with pytest.raises(ValueError, match="overlap"):
        flashattn.attention(*qkv(b=2), out=out)


@pytest.mark.parametrize("status,cls", [
    (_lib.ERR_BAD_SHAPE, ValueError),
    (_lib.ERR_BAD_STRIDE, ValueError),
    (_lib.ERR_OVERFLOW, ValueError),
    (_lib.ERR_OUT_OF_MEMORY, MemoryError),
    (_lib.ERR_UNSUPPORTED, RuntimeError),
    (99, RuntimeError),
])
def test_status_to_exception_mapping(status, cls):
    with pytest.raises(cls, match="what:") as info:
        _lib.check(status, "what")
    assert info.value.status == status and isinstance(info.value, flashattn.Error)
    _lib.check(_lib.OK, "what")


# Arguments the front end converts itself: a value it cannot use is a
# ValueError naming the argument, never a KeyError or TypeError from inside
# the conversion, nor a value silently changed.
@pytest.mark.parametrize("dtype,shown", [
    (np.int32, "int32"), (np.float64, "float64"), (object, "object"), ("foo", "'foo'"),
    ("complex64", "complex64"),
])
def test_merge_refuses_an_output_dtype_it_cannot_write(dtype, shown):
    out, lse = flashattn.attention(*qkv(), return_lse=True)
    with pytest.raises(ValueError, match="dtype %s is not supported" % shown):
        flashattn.merge([out], [lse], dtype=dtype)
    assert flashattn.merge([out], [lse], dtype="float16")[0].dtype == np.float16


@pytest.mark.parametrize("kwargs,message", [
    (dict(alibi_slopes=object()), "alibi_slopes must hold real numbers"),
    (dict(alibi_slopes=np.ones(2, np.complex64)), "alibi_slopes must hold real numbers"),
    (dict(sinks={}), "sinks must hold real numbers"),
    (dict(sinks=np.array(["a", "b"])), "sinks must hold real numbers"),
])
def test_modifier_vectors_must_be_real(kwargs, message):
    with pytest.raises(ValueError, match=message):
        flashattn.attention(*qkv(), **kwargs)


@pytest.mark.parametrize("kwargs,message", [
    (dict(cache_seqlens=2.5), "cache_seqlens must be an integer"),
    (dict(cache_seqlens=object()), "cache_seqlens must be an integer"),
    (dict(cache_seqlens=2, rotary_cos=object(), rotary_sin=np.ones((8, 4), np.float32)),
     "rotary_cos must hold real numbers"),
    (dict(cache_seqlens=2, rotary_cos=np.ones((8, 4), np.float32),
          rotary_sin=np.ones((8, 4), np.complex64)), "rotary_sin must hold real numbers"),
])
def test_decode_arguments_converted_by_the_front_end(kwargs, message):
    q, k, v = qkv()
    with pytest.raises(ValueError, match=message):
        flashattn.attention_with_kvcache(q, k, v, **kwargs)
