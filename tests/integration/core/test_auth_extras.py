"""The images that verify service-account tokens install the JOSE library; the core does
not need it (``kaos_core.auth.verify`` is only imported by the memory service and the
agent runtime)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.unit.core.test_distributions import CORE, _closure

JOSE = {"pyjwt", "cryptography"}


@pytest.mark.parametrize("dist", ["kaos-tools-memory", "kaos-tools-agent"])
def test_verifying_images_bring_the_jose_library(dist: str) -> None:
    closure = _closure(dist)
    assert frozenset(closure) >= JOSE, f"{dist} lacks {sorted(JOSE - closure)}"


def test_the_core_does_not_bring_the_jose_library() -> None:
    assert not (_closure(CORE) & JOSE)


def test_the_client_side_does_not_import_the_jose_library() -> None:
    # The agent's memory client presents a token; only verification needs PyJWT.
    code = (
        "import sys, kaos_core.auth.callers, kaos_core.auth.tokenfile, kaos_core.memory.client;"
        "sys.exit('jwt' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
