"""Every ctypes prototype the package declares matches include/flashattn.h:
argument count, each argument's kind and the return type. ctypes cannot see
a missing argument (the library then reads a garbage register), so only a
comparison with the header catches one."""

import ctypes
import pathlib
import re

import numpy as np
import pytest

import flashattn
from flashattn import _lib

HEADER = pathlib.Path(__file__).resolve().parents[2] / "include" / "flashattn.h"

_P = ctypes.POINTER
# C type (const dropped, spaces removed) -> the ctypes type the binding must use.
CTYPES = {
    "void": None,
    "void*": ctypes.c_void_p,
    "int": ctypes.c_int,
    "int64_t": ctypes.c_int64,
    "size_t": ctypes.c_size_t,
    "size_t*": _P(ctypes.c_size_t),
    "float*": _P(ctypes.c_float),
    "float**": _P(_P(ctypes.c_float)),
    "uint8_t*": _P(ctypes.c_uint8),
    "char*": ctypes.c_char_p,
    "flashattn_status": ctypes.c_int,  # enums are ints in C's ABI
    "flashattn_dtype": ctypes.c_int,
    "flashattn_scale_kind": ctypes.c_int,
    "flashattn_tensor": _lib.Tensor,
    "flashattn_tensor*": _P(_lib.Tensor),
    "flashattn_params*": _P(_lib.Params),
    "flashattn_kv_cache*": _P(_lib.KVCache),
    "flashattn_varlen*": _P(_lib.Varlen),
}


def _without_abi_0_2(text):
    """The header as a build without FLASHATTN_ABI_0_2 sees it: the 0.2
    compatibility declarations (same names, other signatures) dropped.
    Only conditionals on that macro are evaluated; the others keep every
    branch (none of them holds a declaration)."""
    keep, stack = [], []  # stack: (is_abi_0_2, branch kept)
    for line in text.splitlines():
        directive = re.match(r"\s*#\s*(ifndef|ifdef|if|else|elif|endif)\b(.*)", line)
        if directive:
            word, rest = directive.groups()
            if word in ("ifndef", "ifdef", "if"):
                abi = "FLASHATTN_ABI_0_2" in rest
                assert not abi or word != "if", "an #if on FLASHATTN_ABI_0_2: write #ifdef"
                stack.append((abi, word == "ifndef" if abi else True))
            elif word in ("else", "elif"):
                abi, kept = stack.pop()
                assert not (abi and word == "elif")
                stack.append((abi, not kept if abi else True))
            else:
                stack.pop()
            continue
        if all(kept for _, kept in stack):
            keep.append(line)
    assert not stack, "unbalanced conditionals in the header"
    return "\n".join(keep)


def _normal(c_type):
    """'const flashattn_tensor *' -> 'flashattn_tensor*'; 'struct x' -> 'x'."""
    c_type = re.sub(r"\b(const|struct|enum)\b", " ", c_type)
    return re.sub(r"\s+", "", c_type)


def header_functions(text=None):
    """{name: (return type, [argument types])} of every FLASHATTN_API
    function the header declares, types as _normal gives them."""
    text = _without_abi_0_2(HEADER.read_text() if text is None else text)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    found = {}
    for ret, name, args in re.findall(r"FLASHATTN_API\s+([^;{()]*?)\b(\w+)\s*\(([^()]*)\)\s*;",
                                      text):
        assert name not in found, "%s is declared twice" % name
        types = []
        for arg in [a.strip() for a in args.split(",")]:
            if arg == "void":
                continue
            # the parameter's name, when given, is the last of two or more
            # identifiers ("size_t n", "float *x"; not "size_t", "float *")
            tokens = re.findall(r"\w+|\*", re.sub(r"\b(const|struct|enum)\b", " ", arg))
            assert tokens, "cannot read argument %r of %s" % (arg, name)
            if tokens[-1] != "*" and sum(t != "*" for t in tokens) > 1:
                tokens.pop()
            types.append("".join(tokens))
        found[name] = (_normal(ret), types)
    return found


def _as_ctypes(c_type, where):
    assert c_type in CTYPES, "%s: C type %s has no ctypes equivalent in this test" % (where, c_type)
    return CTYPES[c_type]


def test_the_parser_reads_the_header():
    functions = header_functions()
    # the 0.2 compatibility entry points are not this header's
    assert "flashattn_params_default" not in functions
    assert "flashattn_params_init" not in functions
    assert functions["flashattn_merge"] == (
        "flashattn_status",
        ["int64_t", "flashattn_tensor*", "float**", "flashattn_tensor*", "float*",
         "flashattn_params*"])
    assert functions["flashattn_last_error"] == ("char*", [])
    # the 0.2 block is read when a test header defines it the other way round
    compat = header_functions("#ifdef FLASHATTN_ABI_0_2\nFLASHATTN_API int a(int x);\n#else\n"
                              "FLASHATTN_API void b(size_t n, float *);\n#endif\n")
    assert compat == {"b": ("void", ["size_t", "float*"])}


@pytest.mark.parametrize("name", sorted(_lib.PROTOTYPES))
def test_prototype_matches_the_header(name):
    functions = header_functions()
    assert name in functions, "%s is not a function of include/flashattn.h" % name
    ret, args = functions[name]
    _, restype, argtypes = _lib.PROTOTYPES[name]
    expected = [_as_ctypes(a, name) for a in args]
    assert len(argtypes) == len(expected), \
        "%s: the binding declares %d arguments, the header %d" % (name, len(argtypes), len(args))
    for i, (got, want, c_type) in enumerate(zip(argtypes, expected, args)):
        assert got is want, "%s argument %d (%s): %s, want %s" % (name, i, c_type, got, want)
    assert restype is _as_ctypes(ret, name), "%s returns %s, the binding %s" % (name, ret, restype)


@pytest.mark.parametrize("name", sorted(_lib.PROTOTYPES))
def test_the_library_has_the_prototypes_set(name):
    _, restype, argtypes = _lib.PROTOTYPES[name]
    fn = getattr(_lib.lib, name)
    assert fn.argtypes == argtypes and fn.restype is restype


@pytest.mark.parametrize("fn,name", [
    (_lib.fwd_at, "flashattn_fwd"),
    (_lib.fwd_workspace_size_at, "flashattn_fwd_workspace_size"),
    (_lib.bwd_at, "flashattn_bwd"),
    (_lib.bwd_workspace_size_at, "flashattn_bwd_workspace_size"),
    (_lib.decode_at, "flashattn_decode"),
    (_lib.decode_workspace_size_at, "flashattn_decode_workspace_size"),
])
def test_by_address_prototypes_follow_the_table(fn, name):
    """The void * versions take exactly the header's arguments, pointers as
    addresses, the rest (workspace_bytes) as the header's integer type."""
    ret, args = header_functions()[name]
    want = [ctypes.c_void_p if a.endswith("*") else _as_ctypes(a, name) for a in args]
    assert list(fn.argtypes) == want and fn.restype is _as_ctypes(ret, name)


_BY_ADDRESS = ["fwd_at", "fwd_workspace_size_at", "bwd_at", "bwd_workspace_size_at",
               "decode_at", "decode_workspace_size_at"]


def test_calls_by_address_read_no_stale_stack(monkeypatch):
    """Each by-address call runs right after a call that leaves all-ones in
    the stack slots ctypes is about to fill. An argument the prototype left
    undeclared is passed as a 32-bit int into a 64-bit slot, and then
    arrives with those ones in its upper half (a clean stack hides it:
    libffi leaves the half untouched). The decode's workspace_bytes once
    did, and the library wrote past the scratch buffer left by a tiny
    forward: under the sanitizer build that aborts, without it the results
    differ or the process crashes. With every argument declared, the
    results are those of undisturbed calls."""
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 40, 4, 32)).astype(np.float32)
    k = rng.standard_normal((2, 40, 2, 32)).astype(np.float32)
    v = rng.standard_normal((2, 40, 2, 32)).astype(np.float32)
    dout = rng.standard_normal(q.shape).astype(np.float32)
    lens = np.array([30, 7], np.int32)
    tiny = np.ones((1, 1, 1, 1), np.float32)

    def calls():
        """Every by-address entry point, each after a tiny forward has left
        a scratch buffer too small for it."""
        results = []
        for step in range(3):
            _lib.release_workspace()
            flashattn.attention(tiny, tiny, tiny)
            if step == 0:
                results += flashattn.attention(q, k, v, causal=True, return_lse=True)
            elif step == 1:
                out, lse = flashattn.attention(q, k, v, return_lse=True)
                results += flashattn.attention_backward(dout, q, k, v, out, lse)
            else:
                results += flashattn.attention_with_kvcache(
                    q[:, :3], k.copy(), v.copy(), k[:, :2], v[:, :2], cache_seqlens=lens,
                    num_splits=4, return_lse=True)
        return results

    expected = calls()
    for name in _BY_ADDRESS:
        real = getattr(_lib, name)
        dirty = {}

        def dirtied(*args, real=real, dirty=dirty):
            n = len(args)  # the slots of this call: as many as it passes
            if n not in dirty:
                dirty[n] = ctypes.CFUNCTYPE(ctypes.c_char_p, *[ctypes.c_uint64] * n)(
                    ("flashattn_version", _lib.lib))  # takes none: the rest is ignored
            dirty[n](*[2**64 - 1] * n)
            return real(*args)
        monkeypatch.setattr(_lib, name, dirtied)
    got = calls()
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert np.array_equal(a, b)
