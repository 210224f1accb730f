"""The administrator's Kubernetes identity, as a bearer credential for admin calls.

A secured memory service admits a call without an agent only with a Kubernetes credential
it can have the API server review (``kaos_memory.admin``). ``kaos memory`` presents the one
the kubeconfig context already uses, with no extra step: a ``token`` or ``tokenFile``, the
token an ``exec`` credential plugin prints (the ``client.authentication.k8s.io``
ExecCredential protocol: OIDC logins, cloud IAM), or an ``auth-provider``'s cached token.

A context that authenticates with a client certificate has nothing to present: the
certificate proves the user to the API server during the TLS handshake only, and cannot be
forwarded. That is not an error by itself (a memory service under the trusted-header
posture needs no credential); ``problem`` says why there is none and what to do, and the
CLI shows it when the service answers 401. The credential is never printed or logged.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kaos_cli.kubectl.sync import Kube
from kaos_cli.tools import CliError, first_line

EXEC_TIMEOUT = 60.0
_USE_TOKEN = (
    "use a context whose user has a token (an OIDC or exec-plugin login, or a ServiceAccount"
    " token from `kubectl create token`) with --context, or set one with"
    " `kubectl config set-credentials`"
)


@dataclass(frozen=True)
class KubeCredential:
    """A bearer token from the kubeconfig, or why there is none."""

    token: str | None = None
    problem: str | None = None

    def __repr__(self) -> str:  # never the token
        return f"KubeCredential(token={'<set>' if self.token else None}, problem={self.problem!r})"


def _context_user(kube: Kube) -> tuple[str, dict[str, Any]]:
    """The current (or ``--context``) context's user entry, from the raw kubeconfig."""
    raw = kube.run("config", "view", "--raw", "--minify", "-o", "json", namespaced=False)
    document = json.loads(raw)
    users = document.get("users") or []
    if not users:
        return "", {}
    entry = users[0]
    return str(entry.get("name") or ""), dict(entry.get("user") or {})


def _exec_token(spec: dict[str, Any], user: str) -> KubeCredential:
    command = spec.get("command")
    if not isinstance(command, str) or not command:
        return KubeCredential(problem=f"user {user}: the exec plugin names no command")
    env = dict(os.environ)
    for item in spec.get("env") or []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            env[item["name"]] = str(item.get("value") or "")
    api_version = spec.get("apiVersion") or "client.authentication.k8s.io/v1"
    env["KUBERNETES_EXEC_INFO"] = json.dumps(
        {"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    )
    try:
        proc = subprocess.run(
            [command, *[str(a) for a in spec.get("args") or []]],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=EXEC_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        hint = spec.get("installHint")
        reason = f"{type(exc).__name__}" + (f" ({hint})" if hint else "")
        return KubeCredential(problem=f"user {user}: the exec plugin {command} failed: {reason}")
    if proc.returncode != 0:
        return KubeCredential(
            problem=f"user {user}: the exec plugin {command} failed: {first_line(proc.stderr)}"
        )
    try:
        status = json.loads(proc.stdout).get("status") or {}
    except (ValueError, AttributeError):
        return KubeCredential(problem=f"user {user}: the exec plugin printed no ExecCredential")
    token = status.get("token")
    if isinstance(token, str) and token:
        return KubeCredential(token=token)
    if status.get("clientCertificateData"):
        return KubeCredential(problem=_certificate_problem(user, "its exec plugin"))
    return KubeCredential(problem=f"user {user}: the exec plugin returned no token")


def _certificate_problem(user: str, how: str) -> str:
    return (
        f"the kubeconfig user {user} authenticates with a client certificate ({how}), which"
        " proves you to the API server only and cannot be presented to the memory service;"
        f" {_USE_TOKEN}"
    )


def kube_credential(kube: Kube) -> KubeCredential:
    """The bearer credential of ``kube``'s context (never raises: ``problem`` instead)."""
    try:
        name, user = _context_user(kube)
    except (CliError, ValueError) as exc:
        return KubeCredential(problem=f"no kubeconfig credential: {exc}")
    if not user:
        return KubeCredential(problem=f"the kubeconfig context has no user; {_USE_TOKEN}")
    token = user.get("token")
    if isinstance(token, str) and token:
        return KubeCredential(token=token.strip())
    token_file = user.get("tokenFile")
    if isinstance(token_file, str) and token_file:
        try:
            return KubeCredential(token=Path(token_file).read_text(encoding="utf-8").strip())
        except OSError as exc:
            return KubeCredential(problem=f"user {name}: cannot read its tokenFile: {exc}")
    if isinstance(user.get("exec"), dict):
        return _exec_token(user["exec"], name)
    provider = user.get("auth-provider")
    if isinstance(provider, dict):
        config = provider.get("config") or {}
        for key in ("id-token", "access-token"):
            if isinstance(config.get(key), str) and config[key]:
                return KubeCredential(token=config[key])
        return KubeCredential(
            problem=f"user {name}: the {provider.get('name')} auth-provider has no cached"
            " token (run any kubectl command to log in first)"
        )
    if user.get("client-certificate") or user.get("client-certificate-data"):
        return KubeCredential(problem=_certificate_problem(name, "client-certificate"))
    if user.get("username"):
        return KubeCredential(
            problem=f"user {name}: basic authentication cannot be presented; {_USE_TOKEN}"
        )
    return KubeCredential(problem=f"the kubeconfig user {name} has no credential; {_USE_TOKEN}")
