"""FLASHATTN_REQUIRE_TORCH set (non-empty): torch and transformers must
import, so that the tests of the torch front end run rather than skip
(CI installs both; `make test` elsewhere leaves them optional)."""

import importlib
import os

import pytest

# Nothing is downloaded while the tests run (the transformers tests build
# their models from configs).
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def pytest_configure(config):
    if not os.environ.get("FLASHATTN_REQUIRE_TORCH"):
        return
    for name in ("torch", "transformers"):
        try:
            importlib.import_module(name)
        except ImportError as e:
            raise pytest.UsageError("FLASHATTN_REQUIRE_TORCH is set but %s does not import: %s"
                                    % (name, e))
