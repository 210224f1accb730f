"""Every service refuses a bad setting at start: non-zero exit, one line naming the variable."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.support.procs import console_script

CASES = [
    ("kaos-devmodel", {"KAOS_DEVMODEL_PORT": "abc"}, "KAOS_DEVMODEL_PORT"),
]


@pytest.mark.parametrize(("script", "env", "variable"), CASES, ids=[c[2] for c in CASES])
def test_bad_setting_exits_with_one_line_naming_the_variable(
    script: str, env: dict[str, str], variable: str, tmp_path: os.PathLike[str]
) -> None:
    proc = subprocess.run(
        [console_script(script)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert variable in lines[0]
    assert repr(env[variable]) in lines[0]
