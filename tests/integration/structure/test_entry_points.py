"""Every executable answers ``--help`` without starting anything, and a configuration
mistake with one line and status 2, never a traceback.

Each executable runs as the console script a user types, with a ``sitecustomize`` on its
path that records, through an audit hook, every socket the process creates, binds or
connects and, at exit, every module it imported. ``--help`` must show its help, exit 0,
touch no socket and import nothing beyond the standard library and its own entry module
(no web server, no Kubernetes client, no model or Mem0 library). How long it took is
recorded as a test property, not asserted: a loaded machine must not fail the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.procs import console_script, free_port

PROBE = """
import atexit, json, os, sys

_events = []


def _hook(event, args):
    if event == "socket.__new__":
        _events.append([event, None])
    elif event in ("socket.bind", "socket.connect"):
        address = args[1]
        _events.append([event, list(address) if isinstance(address, tuple) else repr(address)])


sys.addaudithook(_hook)


@atexit.register
def _dump():
    with open(os.environ["KAOS_PROBE_OUT"], "w") as f:
        json.dump({"modules": sorted(sys.modules), "sockets": _events}, f)
"""


@dataclass(frozen=True)
class Executable:
    name: str
    # Its entry module: all of its own package that ``--help`` may import (with the
    # packages the module is in).
    entry: str
    # Words its help must carry: what it does and where its settings are described.
    help_words: tuple[str, ...]
    # Variables its help names that its settings do not read (the log level it reads itself).
    extra_variables: frozenset[str] = frozenset()


EXECUTABLES = [
    Executable(
        "kaos-operator",
        "kaos_operator.__main__",
        ("usage: kaos-operator", "reconcile Agents", "KUBECONFIG", "SETTINGS.md"),
    ),
    Executable(
        "kaos-memory",
        "kaos_memory.__main__",
        ("usage: kaos-memory", "memory service", "KAOS_MEMORY_STORAGE", "SETTINGS.md"),
    ),
    Executable(
        "kaos-agent",
        "kaos_agent.__main__",
        ("usage: kaos-agent", "reasoning loop", "MODEL_API_URL", "README.md"),
        frozenset({"KAOS_LOG_LEVEL"}),
    ),
    Executable(
        "kaos-mcp",
        "kaos_agent.mcp_runtime.__main__",
        ("usage: kaos-mcp", "Model Context Protocol", "MCP_TOOLS_STRING", "README.md"),
        frozenset({"KAOS_LOG_LEVEL"}),
    ),
    Executable(
        "kaos-devmodel",
        "kaos_devmodel.__main__",
        ("usage: kaos-devmodel", "--port", "KAOS_DEVMODEL_SCRIPT", "devmodel.md"),
    ),
]


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    modules: set[str]
    sockets: list[list[Any]]
    seconds: float

    def ports_bound(self) -> list[Any]:
        """Addresses bound to a port of their own: what a server listens on. (A bind to
        port 0 of ::1 is urllib3 probing for IPv6 when it is imported, not a server.)"""
        return [a for e, a in self.sockets if e == "socket.bind" and not (a and a[1] == 0)]

    def connections(self) -> list[Any]:
        return [a for e, a in self.sockets if e == "socket.connect"]


@pytest.fixture
def probe_dir(tmp_path: Path) -> Path:
    path = tmp_path / "probe"
    path.mkdir()
    (path / "sitecustomize.py").write_text(PROBE)
    return path


def run(argv: list[str], probe_dir: Path, env: dict[str, str] | None = None) -> Run:
    """``argv`` under the probe, with a clean environment (plus ``env``)."""
    out = probe_dir / "report.json"
    out.unlink(missing_ok=True)
    full = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(probe_dir),  # no ~/.kube/config
        "PYTHONPATH": str(probe_dir),
        "KAOS_PROBE_OUT": str(out),
        **(env or {}),
    }
    started = time.monotonic()
    proc = subprocess.run(argv, env=full, capture_output=True, text=True, timeout=120, check=False)
    seconds = time.monotonic() - started
    report: dict[str, Any] = json.loads(out.read_text())
    return Run(
        proc.returncode,
        proc.stdout,
        proc.stderr,
        set(report["modules"]),
        report["sockets"],
        seconds,
    )


@pytest.fixture
def startup_modules(probe_dir: Path) -> set[str]:
    """What the interpreter imports before any program runs (site, .pth hooks)."""
    return run([sys.executable, "-c", "pass"], probe_dir).modules


def test_the_probe_sees_sockets_and_imports(probe_dir: Path) -> None:
    # The probe itself must be able to fail the checks below.
    port = free_port()
    code = f"import socket, json; s = socket.socket(); s.bind(('127.0.0.1', {port})); s.close()"
    seen = run([sys.executable, "-c", code], probe_dir)
    assert seen.code == 0
    assert seen.sockets == [["socket.__new__", None], ["socket.bind", ["127.0.0.1", port]]]
    assert seen.ports_bound() == [["127.0.0.1", port]]
    assert "json" in seen.modules


@pytest.mark.parametrize("exe", EXECUTABLES, ids=lambda e: e.name)
def test_help_prints_help_and_starts_nothing(
    exe: Executable,
    probe_dir: Path,
    startup_modules: set[str],
    record_property: Any,
) -> None:
    port = str(free_port())
    env = {v: port for v in ("KAOS_OPERATOR_PORT", "KAOS_MEMORY_PORT", "AGENT_PORT", "MCP_PORT")}
    result = run([console_script(exe.name), "--help"], probe_dir, env)
    record_property("seconds", round(result.seconds, 3))

    assert result.code == 0, result.stderr
    assert result.stderr == ""
    for words in exe.help_words:
        assert words in result.stdout
    assert result.sockets == []
    parts = exe.entry.split(".")
    entry_and_packages = {".".join(parts[: i + 1]) for i in range(len(parts))}
    foreign = {
        name
        for name in result.modules - startup_modules - entry_and_packages
        if name.split(".")[0] not in sys.stdlib_module_names
    }
    assert not foreign, f"{exe.name} --help imported {sorted(foreign)}"


@pytest.mark.parametrize("exe", EXECUTABLES, ids=lambda e: e.name)
def test_the_variables_the_help_names_exist(exe: Executable, probe_dir: Path) -> None:
    """A variable named in the help is one the executable reads (the help cannot go stale)."""
    import re

    from kaos_agent.mcp_runtime.settings import McpSettings
    from kaos_agent.settings import AgentSettings
    from kaos_devmodel.settings import DevModelSettings
    from kaos_memory.settings import MemorySettings
    from kaos_operator.settings import OperatorSettings

    settings: dict[str, Any] = {
        "kaos-operator": OperatorSettings,
        "kaos-memory": MemorySettings,
        "kaos-agent": AgentSettings,
        "kaos-mcp": McpSettings,
        "kaos-devmodel": DevModelSettings,
    }
    known = set(settings[exe.name].env_names()) | exe.extra_variables
    # Words that look like a variable of this executable (its prefixes), not a flag's
    # placeholder such as EMBEDDING_DIMS.
    prefixes = {name.split("_")[0] for name in known}
    text = run([console_script(exe.name), "--help"], probe_dir).stdout
    words = set(re.findall(r"\b[A-Z][A-Z0-9_]*[A-Z0-9]\b", text))
    named = {w for w in words if w.split("_")[0] in prefixes and ("_" in w or w in known)}
    assert named
    assert named <= known


@pytest.mark.parametrize(
    ("exe", "variable", "env"),
    [
        ("kaos-operator", "KAOS_OPERATOR_PORT", {}),
        ("kaos-memory", "KAOS_MEMORY_PORT", {}),
        ("kaos-agent", "AGENT_PORT", {"MODEL_API_URL": "http://x", "MODEL_NAME": "m"}),
        ("kaos-mcp", "MCP_PORT", {"MCP_TOOLS_STRING": "def f() -> int:\n    return 1\n"}),
        ("kaos-devmodel", "KAOS_DEVMODEL_PORT", {}),
    ],
)
def test_an_invalid_value_is_one_line_and_status_2(
    exe: str, variable: str, env: dict[str, str], probe_dir: Path
) -> None:
    result = run([console_script(exe)], probe_dir, {**env, variable: "eighty"})

    assert result.code == 2
    assert result.stderr.startswith(f"error: invalid settings: {variable}='eighty': ")
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
    assert result.ports_bound() == []


def test_a_wrong_argument_is_a_usage_error(probe_dir: Path) -> None:
    result = run([console_script("kaos-operator"), "--watch", "default"], probe_dir)

    assert result.code == 2
    assert result.stderr.splitlines() == [
        "usage: kaos-operator [-h]",
        "kaos-operator: error: unrecognized arguments: --watch default",
    ]
    assert result.sockets == []


def test_the_operator_without_a_cluster_says_what_to_set(probe_dir: Path) -> None:
    """No KUBECONFIG, not in a pod, no ~/.kube/config: one line naming both ways out."""
    result = run([console_script("kaos-operator")], probe_dir)

    assert result.code == 2
    assert result.stderr == (
        "error: no cluster to connect to: not running in a pod (KUBERNETES_SERVICE_HOST is "
        f"not set) and no kubeconfig ({probe_dir}/.kube/config does not exist); set "
        "KUBECONFIG to a kubeconfig file, or run the operator in the cluster\n"
    )
    # Nothing started: no port was opened, no API server dialled.
    assert result.ports_bound() == []
    assert result.connections() == []


def test_the_operator_with_a_missing_kubeconfig_names_it(probe_dir: Path) -> None:
    missing = probe_dir / "nowhere.kubeconfig"
    result = run([console_script("kaos-operator")], probe_dir, {"KUBECONFIG": str(missing)})

    assert result.code == 2
    assert result.stderr == (
        f"error: KUBECONFIG names {missing}, which does not exist; set KUBECONFIG to a "
        "kubeconfig file, or run the operator in the cluster\n"
    )


def test_the_operator_with_a_broken_kubeconfig_names_it(probe_dir: Path) -> None:
    broken = probe_dir / "broken.kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\n")
    result = run([console_script("kaos-operator")], probe_dir, {"KUBECONFIG": str(broken)})

    assert result.code == 2
    assert result.stderr == (
        f"error: cannot use the kubeconfig {broken}: Invalid kube-config file. Expected key "
        f"current-context in {broken}; fix it, or point KUBECONFIG at another one\n"
    )


def test_memory_with_an_unusable_data_dir_says_so(probe_dir: Path) -> None:
    blocker = probe_dir / "a-file"
    blocker.write_text("")
    data_dir = blocker / "memory"
    result = run(
        [console_script("kaos-memory")], probe_dir, {"KAOS_MEMORY_DATA_DIR": str(data_dir)}
    )

    assert result.code == 2
    assert result.stderr == (
        f"error: KAOS_MEMORY_DATA_DIR={data_dir}: cannot be created (Not a directory); point "
        "it at a writable directory (in a cluster the operator mounts the store's volume "
        "there)\n"
    )
    assert result.ports_bound() == []


def test_kaos_help_loads_no_command_group(probe_dir: Path, record_property: Any) -> None:
    """``kaos --help`` lists every command from the app's table: it opens no socket and
    imports none of the command groups, nor the libraries behind them (the A2A SDK,
    aiohttp, the Kubernetes client, the resource models), which take most of a second."""
    from kaos_cli.app import LAZY_COMMANDS

    result = run([console_script("kaos"), "--help"], probe_dir)
    record_property("seconds", round(result.seconds, 3))

    assert result.code == 0, result.stderr
    assert result.stderr == ""
    listed = {line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines() if line}
    assert set(LAZY_COMMANDS) <= listed
    assert result.sockets == []
    heavy = {"a2a", "aiohttp", "kubernetes", "pydantic", "httpx", "kaos_core"}
    groups = {module for module, _, _ in LAZY_COMMANDS.values()}
    loaded = {m for m in result.modules if m.split(".")[0] in heavy} | (result.modules & groups)
    assert not loaded, f"kaos --help imported {sorted(loaded)}"


def test_naming_a_command_loads_its_group(probe_dir: Path) -> None:
    # The other side of the lazy table: a command's own help comes from its group.
    result = run([console_script("kaos"), "memory", "--help"], probe_dir)

    assert result.code == 0, result.stderr
    assert "kaos_cli.commands.memory" in result.modules
    assert "kaos_cli.commands.agent" not in result.modules
    assert "Usage: kaos memory [OPTIONS] COMMAND" in result.stdout


def test_listing_agents_loads_none_of_the_talking_commands(probe_dir: Path) -> None:
    """``kaos agent list`` (and the other resource commands, and deploy) import neither the
    A2A SDK nor aiohttp: only the commands that reach a running agent need them, and those
    load when named (``AGENT_COMMANDS``)."""
    from kaos_cli.commands.agent import AGENT_COMMANDS

    listed = run([console_script("kaos"), "agent", "list", "--help"], probe_dir)
    assert listed.code == 0, listed.stderr
    assert "Usage: kaos agent list" in listed.stdout
    talking = {module for module, _, _ in AGENT_COMMANDS.values()}
    loaded = {m for m in listed.modules if m.split(".")[0] in {"a2a", "aiohttp"}}
    assert not loaded | (listed.modules & talking), sorted(loaded | (listed.modules & talking))

    invoked = run([console_script("kaos"), "agent", "invoke", "--help"], probe_dir)
    assert invoked.code == 0, invoked.stderr
    assert "kaos_cli.commands.agent_talk" in invoked.modules
    assert "kaos_cli.commands.agent_audit" not in invoked.modules
