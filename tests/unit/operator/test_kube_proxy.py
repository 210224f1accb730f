"""The API client's proxy comes from the environment once, at start: the client does not
trust the environment per request (aiohttp would then read ~/.netrc on every request, in
the event loop's default executor, behind any slow name lookup there)."""

from __future__ import annotations

import pytest
from kaos_operator.kube import environment_proxy


def test_the_api_servers_proxy_is_read_from_the_environment_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert environment_proxy("https://10.96.0.1:443") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    assert environment_proxy("https://10.96.0.1:443") == "http://proxy.corp:3128"
    monkeypatch.setenv("NO_PROXY", "10.96.0.1,.svc")
    assert environment_proxy("https://10.96.0.1:443") is None
    assert environment_proxy("https://kubernetes.default.svc") is None
    assert environment_proxy("https://api.example.com:6443") == "http://proxy.corp:3128"
