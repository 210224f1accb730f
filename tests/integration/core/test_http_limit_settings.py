"""A bad ``KAOS_HTTP_*`` value stops every service like any other bad setting: exit 2 and
one line naming the variable, before anything is opened."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.support.procs import console_script

SERVICES = ["kaos-memory", "kaos-agent", "kaos-operator", "kaos-devmodel", "kaos-mcp"]


@pytest.mark.parametrize("service", SERVICES)
@pytest.mark.parametrize(
    ("variable", "value"),
    [("KAOS_HTTP_IDLE_TIMEOUT", "-1"), ("KAOS_HTTP_MAX_CONNECTIONS", "many")],
)
def test_a_bad_http_limit_exits_2_naming_the_variable(
    service: str, variable: str, value: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAOS_")}
    env[variable] = value
    done = subprocess.run(
        [console_script(service)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and variable in lines[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr
