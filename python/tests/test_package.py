"""The package itself: its ctypes structs match the C ones, it works without
torch, and the GIL is free while the library computes."""

import ctypes
import os
import pathlib
import re
import subprocess
import sys
import threading
import time

import numpy as np

import flashattn
from flashattn import _lib


def test_tensor_struct_matches_the_library():
    t = _lib.lib.flashattn_tensor_bhsd(ctypes.c_void_p(0x1000), _lib.BF16, 2, 5, 3, 7)
    fields = (t.data, t.dtype, t.batch, t.seqlen, t.heads, t.head_dim)
    assert fields == (0x1000, _lib.BF16, 2, 5, 3, 7)
    assert (t.stride_batch, t.stride_seq, t.stride_head, t.stride_dim) == (105, 7, 35, 1)


def test_params_struct_matches_the_library():
    p = _lib.new_params()
    assert p.struct_size == ctypes.sizeof(_lib.Params)
    assert (p.scale, p.causal, p.window_left, p.window_right, p.align) == (0.0, 0, -1, -1, 0)
    assert (p.block_m, p.block_n, p.num_threads, p.deterministic, p.reserved_flags) == (0,) * 5


def _header_fields(struct):
    """The field names of `typedef struct <struct> {...}` in the C header."""
    header = (pathlib.Path(__file__).resolve().parents[2] / "include" / "flashattn.h").read_text()
    body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (struct, struct), header, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    names = []
    for decl in body.split(";"):
        decl = re.sub(r"\[[^\]]*\]", "", decl).strip()
        if decl:  # "type a, *b" -> a, b
            first, *rest = decl.split(",")
            names += [re.findall(r"\w+", first)[-1]] + [re.findall(r"\w+", r)[-1] for r in rest]
    return names


def test_structs_mirror_the_header():
    """The ctypes mirrors have the header's fields in the header's order,
    and the library initialises each at the mirror's size (it rejects a
    flashattn_varlen or flashattn_kv_cache of any size but its own).
    flashattn_scores has no init: its fields are all the library reads."""
    for kind, struct in [(_lib.Params, "flashattn_params"), (_lib.Varlen, "flashattn_varlen"),
                         (_lib.KVCache, "flashattn_kv_cache"), (_lib.Scores, "flashattn_scores")]:
        assert [f[0] for f in kind._fields_] == _header_fields(struct), struct
    assert _lib.new_params().varlen is None
    assert _lib.new_params().struct_size == ctypes.sizeof(_lib.Params)
    p = _lib.new_params()   # the modifiers start off
    assert (p.softcap, p.alibi_slopes, p.alibi_batch_stride, p.sinks, p.dsinks, p.bias,
            p.mask) == (0.0, None, 0, None, None, None, None)


def test_version_and_isa():
    assert flashattn.__version__.count(".") == 2
    # the paths of the one list, src/kernels/isa_list.h
    listed = pathlib.Path(__file__).resolve().parents[2] / "src" / "kernels" / "isa_list.h"
    names = re.findall(r"^FA_ISA\(([a-z0-9_]+),", listed.read_text(), re.M)
    assert "scalar" in names and flashattn.isa() in names


def test_imports_and_computes_without_torch():
    script = (
        "import sys; sys.modules['torch'] = None\n"   # makes `import torch` fail
        "import numpy as np, flashattn\n"
        "q = np.ones((1, 2, 1, 4), np.float32)\n"
        "assert np.allclose(flashattn.attention(q, q, q), 1)\n"
        "try:\n"
        "    flashattn.flash_attn_func\n"
        "except ImportError:\n"
        "    print('ok')\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


def test_flashattn_library_chooses_the_library():
    """FLASHATTN_LIBRARY wins over the library installed beside the package
    (`make test-python-asan` relies on it to test the sanitizer build)."""
    script = "import flashattn._lib as l; print(l.lib._name)"
    env = dict(os.environ, FLASHATTN_LIBRARY=_lib.lib._name)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert run.returncode == 0 and run.stdout.strip() == _lib.lib._name, run.stderr
    env["FLASHATTN_LIBRARY"] = "/nonexistent/libflashattn.so"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert run.returncode != 0 and "/nonexistent/libflashattn.so" in run.stderr


def _inputs_for_a_call_of(seconds):
    """q, k, v for which one single-threaded call takes about `seconds` of
    CPU time (the call computes on the calling thread)."""
    rng = np.random.default_rng(0)
    make = lambda n: [rng.standard_normal((1, n, 4, 64)).astype(np.float32) for _ in range(3)]
    n = 256
    for _ in range(3):   # small calls are mostly fixed costs: refine twice
        c0 = time.thread_time()
        flashattn.attention(*make(n), num_threads=1)
        scale = (seconds / max(time.thread_time() - c0, 1e-6)) ** 0.5   # work grows as n^2
        n = int(min(max(n * scale, 256), 16384))
    return make(n)


def test_gil_is_released_during_the_call():
    q, k, v = _inputs_for_a_call_of(0.15)
    started, done = threading.Event(), threading.Event()
    cpu = {}

    def worker():
        started.set()
        c0 = time.thread_time()
        while time.thread_time() - c0 < 0.4:
            flashattn.attention(q, k, v, num_threads=1)
        cpu["worker"] = time.thread_time() - c0
        done.set()

    thread = threading.Thread(target=worker)
    thread.start()
    started.wait()
    c0 = time.thread_time()
    while not done.is_set():    # spins only while the worker does not hold the GIL
        pass
    cpu["main"] = time.thread_time() - c0
    thread.join()
    # CPU time, not wall time, so that other processes on the machine slow
    # both threads alike. Were the GIL held during a call of T seconds, this
    # thread would wait off-CPU and run only a switch interval (5 ms) per
    # call: about 5 / T of the worker's time, 3% for T = 150 ms. Released,
    # both threads compute side by side, about as much each.
    assert cpu["main"] >= 0.3 * cpu["worker"], cpu


def test_concurrent_calls_from_python_threads():
    rng = np.random.default_rng(1)
    inputs = [tuple(rng.standard_normal((1, 40, 2, 16)).astype(np.float32) for _ in range(3))
              for _ in range(4)]
    expected = [flashattn.attention(*x, causal=True) for x in inputs]
    results = [None] * 4

    def work(i):
        for _ in range(5):
            results[i] = flashattn.attention(*inputs[i], causal=True)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(r, e) for r, e in zip(results, expected))


def _qkv(seq, heads=2, d=32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, seq, heads, d)).astype(np.float32) for _ in range(3)]


def test_scratch_workspace_grows_and_never_changes_results(monkeypatch):
    """The package keeps one workspace buffer per thread and grows it when
    the library reports it too small: a call gives the same bits whether
    its buffer was made for it, is left over from a larger call, is grown
    from a smaller one, or is the library's own (SCRATCH_MAX exceeded)."""
    small, large = _qkv(16), _qkv(700, seed=1)
    _lib.release_workspace()
    fresh_large = flashattn.attention(*large, causal=True)
    _lib.release_workspace()
    fresh_small = flashattn.attention(*small)
    grown_large = flashattn.attention(*large, causal=True)  # too small -> grown
    assert len(_lib._scratch.buf) > 0
    reused_small = flashattn.attention(*small)               # larger buffer left over
    monkeypatch.setattr(_lib, "SCRATCH_MAX", 0)
    _lib.release_workspace()
    own_large = flashattn.attention(*large, causal=True)     # the library allocates
    assert getattr(_lib._scratch, "buf", None) is None
    assert np.array_equal(fresh_large, grown_large) and np.array_equal(fresh_large, own_large)
    assert np.array_equal(fresh_small, reused_small)
    monkeypatch.undo()
    flashattn.attention(*small)
    assert _lib._scratch.buf is not None
    flashattn.release_workspace()
    assert _lib._scratch.buf is None


def test_scratch_workspace_is_per_thread():
    """Threads calling at once each use their own buffer."""
    cases = [_qkv(seq, seed=seq) for seq in (40, 300, 90, 500)]
    want = [flashattn.attention(*c) for c in cases]
    got = [None] * len(cases)

    def work(i):
        for _ in range(5):
            got[i] = flashattn.attention(*cases[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(a, b) for a, b in zip(want, got))


def test_shared_params_follow_every_option():
    """_lib.params shares one Params per set of options: each option must
    be part of the key, or a call would run with an earlier call's value."""
    base = dict(scale=None, causal=False, window_size=(-1, -1), align=_lib.ALIGN_BOTTOM_RIGHT,
                num_threads=0, block_m=0, block_n=0, deterministic=False, num_splits=0)
    changes = dict(scale=0.25, causal=True, window_size=(3, 5), align=_lib.ALIGN_TOP_LEFT,
                   num_threads=2, block_m=48, block_n=64, deterministic=True, num_splits=3)
    for _ in range(2):  # the second round is served from the cache
        p = _lib.params(**base)
        assert (p.scale, p.causal, p.window_left, p.window_right, p.block_n) == (0.0, 0, -1, -1, 0)
        for name, value in changes.items():
            p = _lib.params(**dict(base, **{name: value}))
            if name == "window_size":
                assert (p.window_left, p.window_right) == value
            else:
                assert getattr(p, name) == value, name
    # values that are not plain Python numbers are never keys
    p = _lib.params(**dict(base, block_n=np.int64(32)))
    assert p.block_n == 32 and p is not _lib.params(**dict(base, block_n=np.int64(32)))


def test_python_m_flashattn_info_reports_the_library():
    """python -m flashattn info: the library's own report (flashattn_info,
    which the CLI's `flashattn info` prints too) and where it came from."""
    run = subprocess.run([sys.executable, "-m", "flashattn", "info"], capture_output=True,
                         text=True, env=dict(os.environ), timeout=60)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "flashattn       " + flashattn.__version__
    assert lines[1].split()[2] == flashattn.isa()
    assert [x.split()[0] for x in lines] == ["flashattn", "kernel", "available", "int8", "cpu",
                                              "caches", "threads", "library", "package"]
    assert _lib.lib.flashattn_info().decode().splitlines() == lines[:7]
    bad = subprocess.run([sys.executable, "-m", "flashattn", "nonsense"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "usage" in bad.stderr


def test_dir_lists_the_torch_functions_without_importing_torch():
    names = dir(flashattn)
    for n in ("flash_attn_func", "flash_attn_varlen_func", "flash_attn_with_kvcache",
              "scaled_dot_product_attention", "attention", "merge"):
        assert n in names


def test_public_numpy_functions_have_type_hints():
    import inspect
    import typing
    for name in ("attention", "attention_backward", "attention_varlen", "attention_varlen_backward",
                 "attention_with_kvcache", "merge", "unpad_input", "pad_input"):
        fn = getattr(flashattn, name)
        hints = typing.get_type_hints(fn)
        assert set(inspect.signature(fn).parameters) <= set(hints) and "return" in hints, name
