"""README.md's Python quick start, run as written: the first ```python block
after the <!-- quickstart-python --> marker, in a fresh interpreter of the
environment the package is installed in. A README edit that breaks the
snippet fails here rather than for the first user who pastes it."""

import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
MARKER = "<!-- quickstart-python -->"


def quickstart():
    text = README.read_text(encoding="utf-8")
    count = text.count(MARKER)
    assert count == 1, "README.md has %d %r markers, expected exactly 1" % (count, MARKER)
    block = re.search(r"^```python[ \t]*\n(.*?)^```[ \t]*$", text.split(MARKER, 1)[1],
                      re.MULTILINE | re.DOTALL)
    assert block, "no closed ```python block after %r in README.md" % MARKER
    return block.group(1)


def test_python_quickstart_runs_as_written(tmp_path):
    code = quickstart()
    assert "import flashattn" in code, "the Python quick start does not use flashattn"
    # A subprocess, so that the snippet sees only what a user's script
    # would: no pytest, no modules imported by other tests.
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, "the Python quick start failed:\n%s%s" % (run.stdout, run.stderr)
    assert re.search(r"^flashattn \S+ \w+ max \|out - ref\| = \S+$", run.stdout, re.MULTILINE), \
        "unexpected output from the Python quick start:\n" + run.stdout
