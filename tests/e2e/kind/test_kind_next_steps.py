"""What ``make cluster`` prints to type next works as printed, on the suite's cluster (the
same bring-up): the lines run in a shell as they are, without ``-n`` (the kubeconfig's
context names the samples' namespace), against real pods; and ``kaos ui`` serves the
samples. Only on the real node: on kind the suite makes its own kubeconfig."""

from __future__ import annotations

import os
import shlex
import subprocess
import urllib.request

import pytest
from kaos_core.memory.contract import ListResponse

from tests.e2e.console.harness import Console
from tests.e2e.kind.helpers import CHAT_TIMEOUT, SUITE_TIMEOUT, KindDeployment, token
from tests.support.cluster import Binaries
from tests.support.cluster import cli as cluster_cli

pytestmark = [pytest.mark.kind, pytest.mark.timeout(SUITE_TIMEOUT)]

SAMPLES = ("coordinator", "researcher", "memory-local", "devmodel-api", "text-tools")


@pytest.fixture(scope="module")
def printed(kind: KindDeployment) -> list[str]:
    """The lines ``make cluster`` ends with, for the suite's cluster."""
    if kind.provider != "real-node":
        pytest.skip("the next steps are make cluster's, on the real node")
    lines = cluster_cli.next_steps(kind.kubeconfig, Binaries.locate().bin_dir, kind.namespace)
    assert lines[0] == f"export KUBECONFIG={shlex.quote(str(kind.kubeconfig))}"
    return lines


def _run(printed: list[str], command: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``command``, one of the printed lines, after the printed ``export`` lines in a
    shell, with no KUBECONFIG of the suite's own."""
    assert command in printed, (command, printed)
    exports = [line for line in printed if line.startswith("export ")]
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    return subprocess.run(
        ["bash", "-c", "\n".join([*exports, command])], env=env, input=stdin,
        capture_output=True, text=True, timeout=CHAT_TIMEOUT + 60,
    )  # fmt: skip


def test_the_printed_invoke_answers_without_a_namespace(printed: list[str]) -> None:
    done = _run(printed, "kaos agent invoke coordinator hello")

    assert done.returncode == 0, done.stderr
    assert "Echo: hello" in done.stdout, done.stdout


def test_the_printed_chat_answers_each_line(printed: list[str]) -> None:
    mark = token()
    done = _run(printed, "kaos agent chat coordinator", stdin=f"hi {mark}\n")

    assert done.returncode == 0, done.stderr
    assert f"Echo: hi {mark}" in done.stdout, done.stdout


def test_the_printed_memory_list_lists_the_store(printed: list[str]) -> None:
    command = "kaos memory list --store memory-local --level store"
    done = _run(printed, command)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), done.stderr

    # The same as JSON: the store's own answer (the wire contract), not a degraded one.
    as_json = _run([*printed, f"{command} -o json"], f"{command} -o json")
    assert as_json.returncode == 0, as_json.stderr
    listed = ListResponse.model_validate_json(as_json.stdout)
    assert listed.degraded is False


def test_the_printed_ui_serves_the_samples(
    printed: list[str], kind: KindDeployment, tmp_path_factory: pytest.TempPathFactory
) -> None:
    assert "kaos ui" in printed
    namespace = kind.namespace
    # `kaos ui` as printed, with --no-browser and a free port (Console) for the test.
    console = Console(dict(os.environ), log=tmp_path_factory.mktemp("ui") / "kaos-ui.log")
    try:
        with urllib.request.urlopen(f"{console.url}/", timeout=60) as page:
            overview = page.read().decode()
        pages = {}
        for path in (f"agents/{namespace}/coordinator", f"memory/{namespace}/memory-local"):
            with urllib.request.urlopen(f"{console.url}/{path}", timeout=60) as page:
                pages[path] = page.status
    finally:
        console.stop()
    missing = [name for name in SAMPLES if name not in overview]
    assert not missing, overview
    assert set(pages.values()) == {200}, pages
