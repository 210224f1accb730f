"""A stand-in ``kubectl`` for in-process CLI tests (``KAOS_KUBECTL`` points the CLI at it).

It answers each call from rules: the words the call must contain, in order (and a text
what it pipes in must contain), and what to print and exit with (the rule added last wins,
so a test overrides a default). Every call is recorded. A call no rule answers fails, so a
test notices a call it did not expect. ``hold`` keeps the process running after printing
(a port-forward that is up).
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

_PROGRAM = """#!{python}
import json, signal, sys
argv = sys.argv[1:]
with open({calls!r}, "a") as log:
    log.write(json.dumps(argv) + "\\n")
with open({rules!r}) as f:
    rules = json.load(f)

stdin = sys.stdin.read() if "-" in argv else ""

def has(words):
    rest = iter(argv)
    return all(any(word == arg for arg in rest) for word in words)

for rule in reversed(rules):
    if has(rule["words"]) and rule["stdin"] in stdin:
        sys.stdout.write(rule["stdout"])
        sys.stdout.flush()
        sys.stderr.write(rule["stderr"])
        sys.stderr.flush()
        if rule["hold"]:
            signal.pause()
        sys.exit(rule["rc"])
sys.stderr.write("error: the fake kubectl has no answer for: " + " ".join(argv) + "\\n")
sys.exit(1)
"""


class FakeKubectl:
    def __init__(self, directory: Path) -> None:
        self.path = directory / "kubectl"
        self._rules_file = directory / "rules.json"
        self._calls_file = directory / "calls.jsonl"
        self._rules: list[dict[str, Any]] = []
        self._rules_file.write_text("[]")
        self.path.write_text(
            _PROGRAM.format(
                python=sys.executable, calls=str(self._calls_file), rules=str(self._rules_file)
            )
        )
        self.path.chmod(self.path.stat().st_mode | stat.S_IXUSR)

    def on(
        self,
        *words: str,
        stdout: str = "",
        stderr: str = "",
        rc: int = 0,
        json_: Any = None,
        hold: bool = False,
        stdin: str = "",
    ) -> None:
        """Answer calls containing ``words`` (in order), and ``stdin`` in what they pipe
        in, with this output and status."""
        if json_ is not None:
            stdout = json.dumps(json_)
        self._rules.append(
            {
                "words": list(words),
                "stdin": stdin,
                "stdout": stdout,
                "stderr": stderr,
                "rc": rc,
                "hold": hold,
            }
        )
        self._rules_file.write_text(json.dumps(self._rules))

    def calls(self) -> list[list[str]]:
        if not self._calls_file.exists():
            return []
        return [json.loads(line) for line in self._calls_file.read_text().splitlines()]


def kubectl_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeKubectl:
    fake = FakeKubectl(tmp_path)
    monkeypatch.setenv("KAOS_KUBECTL", str(fake.path))
    # The context names no namespace unless a test says so.
    fake.on("config", "view", "--minify", stdout="")
    return fake


def items(*objects: dict[str, Any]) -> dict[str, Any]:
    """A kubectl list document."""
    return {"apiVersion": "v1", "kind": "List", "items": list(objects)}
