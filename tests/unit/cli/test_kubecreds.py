"""The kubeconfig's bearer credential for admin calls (``kaos_cli.kubectl.credential``), read
with the real ``kubectl config view`` from kubeconfigs written here; exec plugins are
real executables speaking the ExecCredential protocol."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml
from kaos_cli.kubectl.credential import kube_credential
from kaos_cli.kubectl.sync import Kube


def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, users: dict[str, Any]) -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": name, "user": user} for name, user in users.items()],
        "contexts": [{"name": name, "context": {"cluster": "c", "user": name}} for name in users],
        "current-context": next(iter(users)),
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("KUBECONFIG", str(path))


def plugin(tmp_path: Path, status: dict[str, Any], *, exit_code: int = 0) -> str:
    """An exec plugin that insists on the protocol's input and prints ``status``."""
    script = tmp_path / "plugin"
    doc = json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                      "status": status})  # fmt: skip
    script.write_text(
        "#!/bin/sh\n"
        '[ "$PLUGIN_FLAVOUR" = "mint" ] || { echo "env not passed" >&2; exit 3; }\n'
        'case "$KUBERNETES_EXEC_INFO" in *ExecCredential*) ;;\n'
        '  *) echo "no info" >&2; exit 4;; esac\n'
        f"[ {exit_code} -eq 0 ] || {{ echo 'login expired, run sso login' >&2;"
        f" exit {exit_code}; }}\n"
        f"echo '{doc}'\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def exec_user(command: str) -> dict[str, Any]:
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": command,
            "args": ["get-token"],
            "env": [{"name": "PLUGIN_FLAVOUR", "value": "mint"}],
            "interactiveMode": "Never",
        }
    }


def test_a_static_token_and_a_token_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    kubeconfig(tmp_path, monkeypatch, {"static": {"token": "abc.def.ghi"},
                                       "filed": {"tokenFile": str(token_file)}})  # fmt: skip
    credential = kube_credential(Kube())
    assert credential.token == "abc.def.ghi" and credential.problem is None
    assert "abc.def.ghi" not in repr(credential)
    assert kube_credential(Kube(context="filed")).token == "from-file"


def test_an_exec_plugin_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    command = plugin(tmp_path, {"token": "minted-by-plugin"})
    kubeconfig(tmp_path, monkeypatch, {"sso": exec_user(command)})
    assert kube_credential(Kube()).token == "minted-by-plugin"


def test_an_exec_plugin_that_fails_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    command = plugin(tmp_path, {"token": "never"}, exit_code=1)
    kubeconfig(tmp_path, monkeypatch, {"sso": exec_user(command)})
    credential = kube_credential(Kube())
    assert credential.token is None
    assert credential.problem is not None and "login expired, run sso login" in credential.problem


def test_an_auth_provider_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    oidc = {
        "auth-provider": {
            "name": "oidc",
            "config": {"id-token": "oidc-id-token", "idp-issuer-url": "https://idp"},
        }
    }
    kubeconfig(tmp_path, monkeypatch, {"oidc": oidc})  # fmt: skip
    assert kube_credential(Kube()).token == "oidc-id-token"


@pytest.mark.parametrize("how", ["client-certificate-data", "exec"])
def test_a_client_certificate_cannot_be_presented(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    if how == "exec":
        user = exec_user(plugin(tmp_path, {"clientCertificateData": "x", "clientKeyData": "y"}))
    else:
        user = {"client-certificate-data": "eA==", "client-key-data": "eA=="}
    kubeconfig(tmp_path, monkeypatch, {"admin": user})
    credential = kube_credential(Kube())
    assert credential.token is None and credential.problem is not None
    assert "client certificate" in credential.problem
    assert "cannot be presented to the memory service" in credential.problem
    assert "use a context whose user has a token" in credential.problem


def test_no_kubeconfig_at_all_is_a_problem_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    credential = kube_credential(Kube())
    assert credential.token is None and credential.problem
