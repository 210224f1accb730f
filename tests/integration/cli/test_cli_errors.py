"""The CLI's error paths: a missing tool, an unreachable cluster or service, bad arguments
each end in one ``error:`` line and a meaningful exit status, never a traceback."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from kaos_cli.main import main

from tests.support.procs import free_port

UNREACHABLE_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: nowhere
  cluster: {{server: "https://127.0.0.1:{port}"}}
users:
- name: nobody
  user: {{token: not-a-token}}
contexts:
- name: nowhere
  context: {{cluster: nowhere, user: nobody}}
current-context: nowhere
"""


@pytest.fixture
def no_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kubeconfig whose API server port nobody listens on."""
    path = tmp_path / "kubeconfig"
    path.write_text(UNREACHABLE_KUBECONFIG.format(port=free_port()))
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.setenv("HELM_CACHE_HOME", str(tmp_path / "helm-cache"))
    monkeypatch.setenv("HELM_CONFIG_HOME", str(tmp_path / "helm-config"))
    monkeypatch.setenv("HELM_DATA_HOME", str(tmp_path / "helm-data"))
    return path


def tool_dir(tmp_path: Path, **tools: str | None) -> str:
    """A PATH of exactly these tools (name -> real path), so tests control what exists."""
    directory = tmp_path / "bin"
    directory.mkdir(exist_ok=True)
    for name, real in tools.items():
        if real is not None:
            (directory / name).symlink_to(real)
    return str(directory)


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    return lines[0]


def test_install_without_helm_exits_2_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", tool_dir(tmp_path))
    monkeypatch.setenv("KAOS_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.delenv("KAOS_HELM", raising=False)

    assert main(["system", "install"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "helm not found on PATH" in line
    assert "empty-cache" in line


def test_uninstall_without_helm_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", tool_dir(tmp_path))
    monkeypatch.setenv("KAOS_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.delenv("KAOS_HELM", raising=False)

    assert main(["system", "uninstall"]) == 2
    assert "helm not found" in one_error_line(capsys.readouterr().err)


def test_helm_is_found_in_the_kaos_cache(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    helm_binary: Path,
    no_cluster: Path,
) -> None:
    """Without helm on PATH, ``$KAOS_CACHE_DIR/bin/helm`` (hack/k8s-build) is used: the
    command gets past the helm check and stops at the missing cluster instead."""
    cache = tmp_path / "cache"
    (cache / "bin").mkdir(parents=True)
    (cache / "bin" / "helm").symlink_to(helm_binary)
    monkeypatch.setenv("PATH", tool_dir(tmp_path, kubectl=shutil.which("kubectl")))
    monkeypatch.setenv("KAOS_CACHE_DIR", str(cache))
    monkeypatch.delenv("KAOS_HELM", raising=False)

    assert main(["system", "install"]) == 2
    assert "no Kubernetes cluster reachable" in one_error_line(capsys.readouterr().err)


def test_a_bad_kaos_helm_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KAOS_HELM", str(tmp_path / "no-such-helm"))

    assert main(["system", "install"]) == 2
    assert "is not an executable" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("with_kubectl", [True, False], ids=["kubectl-check", "helm-error"])
def test_install_without_a_cluster_exits_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    helm_binary: Path,
    no_cluster: Path,
    with_kubectl: bool,
) -> None:
    """With kubectl the CLI checks the API server first; without it, helm's own
    "cluster unreachable" is recognised. Either way: one line, exit 2."""
    kubectl = shutil.which("kubectl") if with_kubectl else None
    monkeypatch.setenv("PATH", tool_dir(tmp_path, kubectl=kubectl))
    monkeypatch.setenv("KAOS_HELM", str(helm_binary))
    monkeypatch.setenv("KAOS_CACHE_DIR", str(tmp_path / "empty-cache"))

    assert main(["system", "install", "--pgvector-memory-enabled"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "no Kubernetes cluster reachable" in line


def test_install_with_a_missing_chart_exits_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    helm_binary: Path,
) -> None:
    monkeypatch.setenv("KAOS_HELM", str(helm_binary))

    assert main(["system", "install", "--chart", str(tmp_path / "nope")]) == 2
    assert "does not exist" in one_error_line(capsys.readouterr().err)
    assert main(["system", "install", "--chart", str(tmp_path)]) == 2
    assert "is not a chart" in one_error_line(capsys.readouterr().err)


def test_a_set_without_a_value_is_a_usage_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    helm_binary: Path,
) -> None:
    monkeypatch.setenv("KAOS_HELM", str(helm_binary))
    # No cluster is asked: the usage error comes before any check of the environment.
    monkeypatch.setenv("PATH", tool_dir(tmp_path))
    monkeypatch.setenv("KAOS_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))

    assert main(["system", "install", "--set", "operator.replicas"]) == 2
    assert "expected KEY=VALUE" in one_error_line(capsys.readouterr().err)


def test_memory_against_nothing_fails_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"

    assert main(["memory", "list", "--url", url, "--level", "store"]) == 1
    assert "unreachable or not ready" in one_error_line(capsys.readouterr().err)


def test_memory_rejects_a_malformed_agent_before_sending(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"http://127.0.0.1:{free_port()}"

    status = main(["memory", "list", "--url", url, "--level", "agent", "--agent", "Bad Agent!"])
    assert status == 2
    assert "--agent Bad Agent!" in one_error_line(capsys.readouterr().err)


def test_memory_needs_a_level_and_a_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "list", "--url", "http://127.0.0.1:1"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "--level" in line and line.endswith("(see: kaos memory list --help)")
    assert main(["memory", "list", "--level", "store"]) == 2
    assert "--store NAME, or --url URL" in one_error_line(capsys.readouterr().err)


def test_agent_invoke_against_nothing_fails_with_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"http://127.0.0.1:{free_port()}"

    assert main(["agent", "invoke", "assistant", "hello", "--url", url, "--timeout", "5"]) == 1
    assert f"agent at {url} failed" in one_error_line(capsys.readouterr().err)


def test_agent_list_without_a_cluster_names_the_context_to_check(
    no_cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if shutil.which("kubectl", path=os.environ.get("PATH")) is None:
        pytest.fail("kubectl is not on PATH", pytrace=False)

    assert main(["agent", "list"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("error: no Kubernetes cluster reachable through the current context")
    assert "connection refused" in line and "(check --context or KUBECONFIG)" in line
    assert "memcache.go" not in line

    assert main(["agent", "list", "--context", "nowhere", "-A"]) == 2
    assert "through context nowhere" in one_error_line(capsys.readouterr().err)


def test_a_missing_context_is_exit_2_naming_the_known_ones(
    no_cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's promise: exit 2 means no cluster here; the real kubectl's words."""
    assert main(["modelapi", "list", "--context", "no-such-context"]) == 2
    assert capsys.readouterr().err == (
        "error: the kubeconfig has no context no-such-context (its contexts: nowhere); list "
        "them with: kubectl config get-contexts\n"
    )


def test_no_kubeconfig_at_all_says_no_cluster_is_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a kubeconfig the real kubectl dials its default, localhost:8080; the user
    reads that no cluster is configured and what to do, not the dial error."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["agent", "list"]) == 2
    assert capsys.readouterr().err == (
        f"error: no Kubernetes cluster configured: KUBECONFIG ({tmp_path / 'no-kubeconfig'}) "
        "names no current context; set KUBECONFIG to your cluster's kubeconfig, or choose one "
        "of its contexts: kubectl config use-context NAME (or pass --context NAME)\n"
    )
