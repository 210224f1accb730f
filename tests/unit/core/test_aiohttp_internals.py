"""The connection guard's use of aiohttp internals is checked before a server starts: the
installed aiohttp has them, one without them is refused by name, and another minor
version than the verified one is logged."""

from __future__ import annotations

import logging

import aiohttp
import pytest
from aiohttp import web_protocol
from kaos_core.http import server
from kaos_core.http.server import VERIFIED_AIOHTTP, aiohttp_guard, check_aiohttp_internals


def test_the_installed_aiohttp_is_the_verified_one(caplog: pytest.LogCaptureFixture) -> None:
    assert tuple(int(p) for p in aiohttp.__version__.split(".")[:2]) == VERIFIED_AIOHTTP
    with caplog.at_level(logging.WARNING, logger=server.__name__):
        check_aiohttp_internals()
    assert not caplog.records


def test_an_aiohttp_without_the_handler_state_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(web_protocol.RequestHandler, "_request_in_progress")
    with pytest.raises(RuntimeError, match="_request_in_progress") as refused:
        aiohttp_guard(16)
    assert ".".join(map(str, VERIFIED_AIOHTTP)) in str(refused.value)


def test_another_minor_version_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    major, minor = VERIFIED_AIOHTTP
    monkeypatch.setattr(aiohttp, "__version__", f"{major}.{minor + 1}.0")
    with caplog.at_level(logging.WARNING, logger=server.__name__):
        check_aiohttp_internals()
    assert [r.getMessage() for r in caplog.records] == [
        "aiohttp version not verified for the connection guard"
    ]
