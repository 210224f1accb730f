"""The CLI's unit tests: a stand-in ``kubectl`` (``tests.unit.cli.fakes``) and a plain
output stream unless a test asks for a terminal's colours and width."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.cli.fakes import FakeKubectl, kubectl_fixture


@pytest.fixture
def kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeKubectl:
    return kubectl_fixture(tmp_path, monkeypatch)


@pytest.fixture(autouse=True)
def _plain_output(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
