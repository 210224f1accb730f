"""Recording stand-ins for the docker, kind, kubectl and helm CLIs, to run the hack/kind
scripts where no Docker engine or cluster exists.

The scripts are the thing under test; the tools they drive are not (the kind suite runs
them for real). Each stand-in appends its argv, working directory, KUBECONFIG and, for
``-f -``, its stdin to a JSON-lines log, and answers the few queries the scripts make
(``docker image inspect``, ``kind get clusters``, ...) the way the real tool would.
``FAKE_FAIL`` makes every call whose argv starts with one of its ``;``-separated words
fail, to drive the scripts' error paths.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.procs import REPO_ROOT

TOOLS = ("docker", "kind", "kubectl", "helm")

_SHIM = """\
import hashlib, json, os, sys

tool = os.path.basename(sys.argv[0])
args = sys.argv[1:]
stdin = None
if "-f" in args and args[args.index("-f") + 1 : args.index("-f") + 2] == ["-"]:
    stdin = sys.stdin.read()
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps({"tool": tool, "argv": args, "cwd": os.getcwd(), "stdin": stdin,
                          "kubeconfig": os.environ.get("KUBECONFIG"),
                          "buildkit": os.environ.get("DOCKER_BUILDKIT")}) + "\\n")
call = " ".join([tool, *args])
for prefix in filter(None, os.environ.get("FAKE_FAIL", "").split(";")):
    if call.startswith(prefix):
        sys.stderr.write(f"{tool}: injected failure of {prefix!r}\\n")
        sys.exit(1)
if tool == "docker" and args[:1] == ["info"]:
    print("29.0.0")
elif tool == "docker" and args[:2] == ["image", "inspect"]:
    print("sha256:" + hashlib.sha256(args[-1].encode()).hexdigest())
elif tool == "docker" and args[:1] == ["version"]:
    print("linux/amd64")
elif tool == "kind" and args[:2] == ["get", "clusters"]:
    for name in filter(None, os.environ.get("FAKE_KIND_CLUSTERS", "").split(",")):
        print(name)
elif tool == "kind" and args[:2] == ["get", "kubeconfig"]:
    print("apiVersion: v1\\nkind: Config\\nclusters: []\\ncontexts: []\\nusers: []")
elif tool == "kind" and args[:1] == ["version"]:
    print("kind v0.33.0 go1.26.8 linux/amd64")
elif tool == "kubectl" and args[:2] == ["get", "namespace"]:
    sys.stderr.write(f'Error from server (NotFound): namespaces "{args[2]}" not found\\n')
    sys.exit(1)
"""


def image_id(ref: str) -> str:
    """The ID the stand-in ``docker image inspect`` answers for ``ref``."""
    return "sha256:" + hashlib.sha256(ref.encode()).hexdigest()


@dataclass(frozen=True)
class Call:
    tool: str
    argv: list[str]
    cwd: str
    stdin: str | None
    kubeconfig: str | None
    buildkit: str | None


@dataclass(frozen=True)
class Run:
    """One script run: its exit status, output and the tool calls it made, in order."""

    status: int
    stdout: str
    stderr: str
    calls: list[Call]
    cache_dir: Path

    def of(self, tool: str, *prefix: str) -> list[Call]:
        """The calls of ``tool`` whose argv starts with ``prefix``."""
        n = len(prefix)
        return [c for c in self.calls if c.tool == tool and tuple(c.argv[:n]) == prefix]

    def index(self, tool: str, *prefix: str) -> int:
        """Position of the first such call in the run."""
        for i, c in enumerate(self.calls):
            if c.tool == tool and tuple(c.argv[: len(prefix)]) == prefix:
                return i
        raise AssertionError(f"no call {tool} {' '.join(prefix)} in {self.calls}")


def install(bin_dir: Path) -> None:
    """Put the four stand-ins into ``bin_dir``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "recorder.py"
    shim.write_text(f"#!{sys.executable}\n{_SHIM}")
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    for tool in TOOLS:
        (bin_dir / tool).symlink_to(shim)


def run_script(
    script: str,
    tmp: Path,
    *,
    clusters: Sequence[str] = ("kaos-e2e",),
    fail: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
) -> Run:
    """Run ``hack/kind/<script>`` with only the stand-ins and the base system on PATH, in a
    scrubbed environment (no KAOS_* of the caller, a private HOME and cache)."""
    bin_dir = tmp / "bin"
    if not bin_dir.exists():
        install(bin_dir)
    log = tmp / "calls.jsonl"
    log.unlink(missing_ok=True)
    log.touch()
    cache_dir = tmp / "cache"
    env = {
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "HOME": str(tmp / "home"),
        "KAOS_CACHE_DIR": str(cache_dir),
        "FAKE_LOG": str(log),
        "FAKE_KIND_CLUSTERS": ",".join(clusters),
        "FAKE_FAIL": ";".join(fail),
        **(extra_env or {}),
    }
    proc = subprocess.run(
        [str(REPO_ROOT / "hack" / "kind" / script)],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    calls = [Call(**_fields(json.loads(line))) for line in log.read_text().splitlines()]
    return Run(proc.returncode, proc.stdout, proc.stderr, calls, cache_dir)


def _fields(record: dict[str, Any]) -> dict[str, Any]:
    return {k: record.get(k) for k in Call.__dataclass_fields__}
