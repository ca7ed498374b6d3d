"""The Python examples (examples/*.py) run as written and pass their own
checks; the C one is a ctest (example_decode_paged). The transformers
example is skipped (with the reason) where torch or transformers is not
installed."""

import importlib.util
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def run(script):
    done = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("ok"), done.stdout


def test_numpy_example():
    run("numpy_attention.py")


@pytest.mark.skipif(importlib.util.find_spec("torch") is None or
                    importlib.util.find_spec("transformers") is None,
                    reason="torch and transformers are not installed (optional)")
def test_transformers_example():
    run("transformers_generate.py")
