"""The test harness's own service starter: a service is ready only when its own process
answers on its port, and no two services are planned on one port."""

from __future__ import annotations

import sys

import pytest

from tests.support.procs import free_port, start_service


def test_free_port_never_hands_out_a_port_twice() -> None:
    # Enough picks that the OS, left alone, would repeat some.
    ports = [free_port() for _ in range(3000)]
    assert len(set(ports)) == len(ports)


def _http_server(port: int) -> list[str]:
    return [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]


def test_a_service_whose_port_another_holds_is_not_taken_for_ready(tmp_path) -> None:
    port = free_port()
    first = start_service("first", _http_server(port), port=port, log_dir=tmp_path, ready_path="/")
    try:
        # The port answers 200 all along, but from the first process: the second one cannot
        # bind, exits, and that is what start_service reports.
        with pytest.raises(RuntimeError, match="second failed to start: process exited"):
            start_service("second", _http_server(port), port=port, log_dir=tmp_path, ready_path="/")
        assert first.alive()
    finally:
        first.stop()
