"""The cluster as the CLI sees it: the administrator's ``kubectl``, one context, one namespace.

``Kube`` carries ``--context`` and ``-n/--namespace`` to every kubectl call, parses JSON
answers and turns kubectl's failures (read by ``kubectl.errors``) into one ``CliError``
line that says what to do: a missing object names the ``list`` command, an unreachable
cluster names the context.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from kaos_cli.kubectl.errors import read_failure
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError, find_tool, first_line, run

# Completion runs on every Tab: it answers quickly or not at all.
QUICK_TIMEOUT = 5


def context_argv(kubectl: str, context: str | None) -> list[str]:
    """kubectl with ``--context`` when one is chosen (both layers start their calls here)."""
    return [kubectl, *(["--context", context] if context else [])]


@dataclass
class Kube:
    """kubectl bound to a context and a namespace (``None``: the context's own)."""

    context: str | None = None
    namespace: str | None = None
    request_timeout: int = 20
    _kubectl: str | None = field(default=None, repr=False)

    @property
    def kubectl(self) -> str:
        if self._kubectl is None:
            self._kubectl = find_tool("kubectl")
        return self._kubectl

    def argv(self, *args: str, namespaced: bool = True, all_namespaces: bool = False) -> list[str]:
        argv = [*context_argv(self.kubectl, self.context), *args]
        if all_namespaces:
            argv.append("-A")
        elif namespaced and self.namespace:
            argv += ["-n", self.namespace]
        return argv

    def where(self) -> str:
        ns = f"namespace {self.namespace}" if self.namespace else "the context's namespace"
        return f"{ns}{f' of context {self.context}' if self.context else ''}"

    def failed(self, args: Sequence[str], stderr: str) -> CliError:
        failure = read_failure(stderr)
        if failure.problem == "unreachable":
            context = f"context {self.context}" if self.context else "the current context"
            return CliError(
                f"no Kubernetes cluster reachable through {context}: {failure.reason} "
                "(check --context or KUBECONFIG)",
                EXIT_ENVIRONMENT,
            )
        if failure.problem == "not-installed":
            return CliError(
                f"{failure.line}: the KAOS CRDs are not installed; run: kaos system install",
                EXIT_ENVIRONMENT,
            )
        return CliError(f"kubectl {' '.join(args)}: {failure.line}")

    def run(
        self,
        *args: str,
        namespaced: bool = True,
        all_namespaces: bool = False,
        input_text: str | None = None,
        timeout: float = 60,
    ) -> str:
        """kubectl's stdout; ``CliError`` with its message on failure."""
        proc = run(
            [
                *self.argv(*args, namespaced=namespaced, all_namespaces=all_namespaces),
                f"--request-timeout={self.request_timeout}s",
            ],
            timeout=timeout,
            input_text=input_text,
        )
        if proc.returncode != 0:
            raise self.failed(args, proc.stderr)
        return proc.stdout

    def json(self, *args: str, namespaced: bool = True, all_namespaces: bool = False) -> Any:
        out = self.run(*args, "-o", "json", namespaced=namespaced, all_namespaces=all_namespaces)
        try:
            return json.loads(out)
        except json.JSONDecodeError as exc:
            raise CliError(f"kubectl {' '.join(args)} printed no JSON") from exc

    def get(self, resource: str, name: str, *, missing: str | None = None) -> dict[str, Any]:
        """One object; ``CliError`` naming ``missing`` (what to do) when it does not exist."""
        proc = run(
            [*self.argv("get", resource, name, "-o", "json"), "--request-timeout=20s"],
            timeout=60,
        )
        if proc.returncode != 0:
            if read_failure(proc.stderr).problem == "not-found":
                hint = f"; {missing}" if missing else ""
                what = resource.split(".")[0].removesuffix("s")
                raise CliError(f"{what} {name} not found in {self.where()}{hint}")
            raise self.failed(["get", resource, name], proc.stderr)
        document: dict[str, Any] = json.loads(proc.stdout)
        return document

    def find(self, resource: str, name: str) -> dict[str, Any] | None:
        """One object, or ``None`` when it does not exist."""
        proc = run(
            [*self.argv("get", resource, name, "--ignore-not-found", "-o", "json")], timeout=60
        )
        if proc.returncode != 0:
            raise self.failed(["get", resource, name], proc.stderr)
        if not proc.stdout.strip():
            return None
        document: dict[str, Any] = json.loads(proc.stdout)
        return document

    def items(
        self,
        resource: str,
        *,
        all_namespaces: bool = False,
        selector: str | None = None,
        field_selector: str | None = None,
        namespaced: bool = True,
    ) -> list[dict[str, Any]]:
        args = ["get", resource]
        if selector:
            args += ["-l", selector]
        if field_selector:
            args += ["--field-selector", field_selector]
        document = self.json(*args, namespaced=namespaced, all_namespaces=all_namespaces)
        items: list[dict[str, Any]] = document.get("items", [])
        return items

    def apply(self, documents: Iterable[dict[str, Any]]) -> list[str]:
        """Server-side apply; the ``kind/name`` of each object applied."""
        docs = list(documents)
        text = yaml.safe_dump_all(docs, sort_keys=False)
        out = self.run(
            "apply",
            "--server-side",
            "--field-manager=kaos-cli",
            "--force-conflicts",
            "-f",
            "-",
            "-o",
            "name",
            input_text=text,
        )
        return [line.strip() for line in out.splitlines() if line.strip()]

    def delete(self, resource: str, name: str, *, wait: bool) -> bool:
        """Delete one object; False when it did not exist."""
        out = self.run(
            "delete", resource, name, "--ignore-not-found", f"--wait={str(wait).lower()}"
        )
        return bool(out.strip())

    def popen(self, *args: str) -> subprocess.Popen[str]:
        """kubectl with its output going straight to ours (``logs -f``), stderr kept."""
        return subprocess.Popen(
            self.argv(*args), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )

    def quick(self, *args: str, namespaced: bool = True) -> list[str] | None:
        """The words kubectl prints, for shell completion: ``None`` on any failure."""
        try:
            proc = subprocess.run(
                self.argv(*args, namespaced=namespaced),
                capture_output=True,
                text=True,
                timeout=QUICK_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired, CliError):  # completion never fails loudly
            return None
        return proc.stdout.split() if proc.returncode == 0 else None

    def names(self, resource: str) -> list[str]:
        """Object names for shell completion: empty on any failure, quickly."""
        found = self.quick("get", resource, "-o", "name", "--request-timeout=3s")
        return [line.rsplit("/", 1)[-1] for line in found or [] if line]

    def contexts(self) -> list[str]:
        """The kubeconfig's context names, for shell completion: empty on any failure."""
        return self.quick("config", "get-contexts", "-o", "name", namespaced=False) or []

    def current_context(self) -> str:
        """The context this binding talks to: ``--context``, else the kubeconfig's current one."""
        if self.context:
            return self.context
        proc = run([self.kubectl, "config", "current-context"], timeout=QUICK_TIMEOUT * 6)
        return proc.stdout.strip() or "(none)"

    def require_cluster(self, *, timeout: float = 15) -> None:
        """Fail with exit 2 unless the context reaches an API server that is ready."""
        proc = run(
            [
                *context_argv(self.kubectl, self.context),
                "get",
                "--raw",
                "/readyz",
                f"--request-timeout={int(timeout)}s",
            ],
            timeout=timeout + 5,
        )
        if proc.returncode != 0:
            where = os.environ.get("KUBECONFIG") or "~/.kube/config"
            raise CliError(
                f"no Kubernetes cluster reachable (kubeconfig {where}): {first_line(proc.stderr)}",
                EXIT_ENVIRONMENT,
            )
