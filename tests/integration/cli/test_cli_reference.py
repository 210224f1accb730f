"""The CLI as a reference: ``--help`` of the root and every group names every command,
so does the generated reference (the docs site's table), completion scripts load in bash,
and ``kaos`` without its extra says what to install. Through the real executable, but for
each command's own help, read from the same command tree in-process."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner
from kaos_cli.app import cli
from kaos_cli.reference import render

from tests.support.procs import console_script
from tests.support.shells import zsh_complete

KAOS = console_script("kaos")
GROUPS = {
    "agent": {
        *("list", "get", "describe", "logs", "delete", "deploy", "invoke", "chat", "tools"),
        *("grant", "revoke", "who-can"),
        "audit",
        *("approvals", "approve", "deny"),
    },
    "modelapi": {"list", "get", "describe", "logs", "delete", "deploy"},
    "mcp": {"list", "get", "describe", "logs", "delete", "deploy"},
    "memorystore": {"list", "get", "describe", "logs", "delete", "deploy"},
    "a2a": {"send", "get", "cancel", "list"},
    "samples": {"list", "deploy", "delete"},
    "system": {"install", "uninstall", "status"},
    "memory": {
        *("recall", "list", "forget", "audit", "export", "import", "migrate"),
        *("verify-receipt", "quarantine"),
    },
}


def kaos(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KAOS, *argv], capture_output=True, text=True, timeout=60, env=env, check=False
    )


def listed_commands(help_text: str) -> set[str]:
    section = help_text.split("Commands:", 1)[1]
    return {m.group(1) for m in re.finditer(r"^  ([a-z0-9][-a-z0-9]*)\s", section, re.M)}


def test_root_help_lists_every_group() -> None:
    proc = kaos("--help")
    assert proc.returncode == 0, proc.stderr
    assert "-n/--namespace" in proc.stdout and "--context" in proc.stdout
    assert listed_commands(proc.stdout) == {*GROUPS, "completion", "ui", "usage"}


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_group_help_lists_its_commands_with_options(group: str) -> None:
    proc = kaos(group, "--help")
    assert proc.returncode == 0, proc.stderr
    assert listed_commands(proc.stdout) == GROUPS[group]
    # Each command's help from the same command tree in this process (the executable's
    # start, already shown above, would be most of the time of a few dozen of them).
    runner = CliRunner()
    for command in GROUPS[group]:
        sub = runner.invoke(cli, [group, command, "-h"])
        assert sub.exit_code == 0, sub.output
        for option in ("-n, --namespace", "--context", "-o, --output [table|json|yaml]"):
            assert option in sub.output, f"kaos {group} {command} lacks {option}"


def test_generated_reference_names_every_command() -> None:
    # The docs site shows this table (hack/docs_hooks.py), generated when it is built.
    current = render()
    for group, commands in GROUPS.items():
        for command in commands:
            assert f"`kaos {group} {command}" in current


def test_usage_errors_are_one_line_naming_the_help() -> None:
    proc = kaos("agent", "list", "--output", "xml")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")
    assert "(see: kaos agent list --help)" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_script_is_printed(shell: str) -> None:
    proc = kaos("completion", shell)
    assert proc.returncode == 0, proc.stderr
    assert "_KAOS_COMPLETE" in proc.stdout


def test_bash_completion_loads_and_completes_commands() -> None:
    script = (
        f'eval "$({KAOS} completion bash)" && complete -p kaos && '
        "COMP_WORDS=(kaos ag); COMP_CWORD=1; _kaos_completion kaos && "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    proc = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PATH": f"{os.path.dirname(KAOS)}:{os.environ['PATH']}"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "complete -o nosort -F _kaos_completion kaos" in proc.stdout
    assert "agent" in proc.stdout.splitlines()


def test_zsh_completion_loads_and_completes_commands_and_options() -> None:
    proc = zsh_complete("kaos", "ag")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "registered: _kaos_completion"
    assert any(line.startswith("agent:Agents") for line in lines[1:]), proc.stdout
    options = zsh_complete("kaos", "agent", "list", "--o").stdout.splitlines()
    assert "--output:output format" in options


def test_without_its_libraries_kaos_names_what_to_install() -> None:
    """A copy of the CLI without click says what to install instead of an ImportError."""
    code = (
        "import sys; sys.modules['click'] = None\n"
        "from kaos_cli.main import main\n"
        "sys.exit(main(['agent', 'list']))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        "error: the kaos command line is missing its library click: pip install kaos-tools\n"
    )
