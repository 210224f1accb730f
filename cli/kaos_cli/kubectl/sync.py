"""The cluster as the CLI sees it: the administrator's ``kubectl``, one context, one namespace.

``Kube`` carries ``--context`` and ``-n/--namespace`` to every kubectl call, parses JSON
answers and turns kubectl's failures (read by ``kubectl.errors``) into one ``CliError``
that says what to do: a missing object names its namespace, a close name and the ``list``
command; a missing namespace, context or cluster says so (exit 2 for the last two); an
object the API server refuses lists every reason in the user's field names
(``kubectl.admission``). Server-side apply reports only some of a wrong-typed object's
faults, so such a refusal is completed by a dry-run create, which validates all of it.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from kaos_cli.kubectl.admission import TYPED_PATCH, problems
from kaos_cli.kubectl.errors import read_failure
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError, find_tool, first_line, run

# Completion runs on every Tab: it answers quickly or not at all.
QUICK_TIMEOUT = 5


def context_argv(kubectl: str, context: str | None) -> list[str]:
    """kubectl with ``--context`` when one is chosen (both layers start their calls here)."""
    return [kubectl, *(["--context", context] if context else [])]


def close_names(name: str, candidates: Iterable[str]) -> list[str]:
    """The names a typo of ``name`` most likely meant, best first."""
    return difflib.get_close_matches(name, list(candidates), n=2, cutoff=0.6)


def did_you_mean(what: str, name: str, candidates: Iterable[str]) -> str:
    """``did you mean agent 'helper'?``, or nothing when no name is close."""
    close = close_names(name, candidates)
    if not close:
        return ""
    return "did you mean " + " or ".join(f"{what} '{c}'" for c in close) + "?"


class Refused(CliError):
    """The API server refused an object: every reason, in the user's field names."""

    def __init__(self, kind: str, name: str, reasons: list[str]) -> None:
        self.kind, self.name, self.reasons = kind, name, reasons
        lines = [f"{kind} {name} is invalid (see: kubectl explain {kind.lower()}):"]
        super().__init__("\n".join([*lines, *(f"  {r}" for r in reasons)]))


@dataclass
class Kube:
    """kubectl bound to a context and a namespace (``None``: the context's own)."""

    context: str | None = None
    namespace: str | None = None
    request_timeout: int = 20
    _kubectl: str | None = field(default=None, repr=False)
    _context_namespace: str | None = field(default=None, repr=False)

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

    def namespace_name(self) -> str:
        """The namespace calls go to: ``-n``, else the context's own (``default`` when
        the context names none)."""
        if self.namespace:
            return self.namespace
        if self._context_namespace is None:
            proc = run(
                [
                    *context_argv(self.kubectl, self.context),
                    "config",
                    "view",
                    "--minify",
                    "-o",
                    "jsonpath={..namespace}",
                ],
                timeout=QUICK_TIMEOUT * 6,
            )
            found = proc.stdout.split() if proc.returncode == 0 else []
            self._context_namespace = found[0] if found else "default"
        return self._context_namespace

    def where(self) -> str:
        """The namespace, named, and whose choice it was."""
        named = f"namespace {self.namespace_name()}"
        if self.namespace:
            return f"{named} of context {self.context}" if self.context else named
        whose = f"context {self.context}'s" if self.context else "the context's"
        return f"{named} ({whose} namespace)"

    def failed(self, args: Sequence[str], stderr: str) -> CliError:
        failure = read_failure(stderr)
        if failure.problem == "no-context":
            known = ", ".join(self.contexts()) or "none"
            return CliError(
                f"the kubeconfig has no context {failure.context} (its contexts: {known}); "
                "list them with: kubectl config get-contexts",
                EXIT_ENVIRONMENT,
            )
        if failure.problem == "unreachable" and failure.default_server and not self.configured():
            return CliError(no_cluster_configured(), EXIT_ENVIRONMENT)
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

    def configured(self) -> bool:
        """Whether the kubeconfig names a context to use (``--context`` or a current one)."""
        if self.context:
            return True
        proc = run([self.kubectl, "config", "current-context"], timeout=QUICK_TIMEOUT * 6)
        return proc.returncode == 0 and bool(proc.stdout.strip())

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
        """One object; ``CliError`` naming the namespace, a close name and ``missing``
        (what to do) when it does not exist."""
        proc = run(
            [*self.argv("get", resource, name, "-o", "json"), "--request-timeout=20s"],
            timeout=60,
        )
        if proc.returncode != 0:
            if read_failure(proc.stderr).problem == "not-found":
                self.require_namespace()
                what = resource.split(".")[0].removesuffix("s")
                close = did_you_mean(what, name, self.names(resource))
                if close:
                    hint = f"; {close}" + (f" ({missing})" if missing else "")
                else:
                    hint = f"; {missing}" if missing else ""
                raise CliError(f"{what} {name} not found in {self.where()}{hint}")
            raise self.failed(["get", resource, name], proc.stderr)
        document: dict[str, Any] = json.loads(proc.stdout)
        return document

    def namespace_exists(self) -> bool:
        """Whether the namespace calls go to exists (True when we may not ask)."""
        proc = run(
            [
                *context_argv(self.kubectl, self.context),
                "get",
                "namespace",
                self.namespace_name(),
                "--ignore-not-found",
                "-o",
                "name",
                f"--request-timeout={self.request_timeout}s",
            ],
            timeout=60,
        )
        return proc.returncode != 0 or bool(proc.stdout.strip())

    def require_namespace(self) -> None:
        """``CliError`` when the namespace calls go to does not exist."""
        if not self.namespace_exists():
            raise CliError(f"{self.where()} does not exist; list them with: kubectl get namespaces")

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

    def apply(self, document: dict[str, Any]) -> list[str]:
        """Server-side apply of one object; the ``kind/name`` kubectl printed. A refusal
        raises ``Refused`` with every reason the API server gave."""
        text = yaml.safe_dump(document, sort_keys=False)
        proc = run(
            [
                *self.argv(
                    "apply",
                    "--server-side",
                    "--field-manager=kaos-cli",
                    "--force-conflicts",
                    "-f",
                    "-",
                    "-o",
                    "name",
                ),
                f"--request-timeout={self.request_timeout}s",
            ],
            timeout=60,
            input_text=text,
        )
        if proc.returncode == 0:
            return [line.strip() for line in proc.stdout.splitlines() if line.strip()]
        reasons = problems(proc.stderr, document)
        if reasons and TYPED_PATCH in proc.stderr:
            # Server-side apply stops at the first values of a wrong type or unknown
            # fields it meets (a varying few); a dry-run create validates the whole object.
            reasons = self._validation(document, text) or reasons
        if reasons:
            kind = str(document.get("kind"))
            name = str((document.get("metadata") or {}).get("name"))
            raise Refused(kind, name, reasons)
        raise self.failed(["apply"], proc.stderr)

    def _validation(self, document: dict[str, Any], text: str) -> list[str]:
        """Every reason the API server's validation gives for the object (nothing is
        created); unknown fields come back as warnings."""
        proc = run(
            [
                *self.argv(
                    "create", "--dry-run=server", "--validate=warn", "-f", "-", "-o", "name"
                ),
                f"--request-timeout={self.request_timeout}s",
            ],
            timeout=60,
            input_text=text,
        )
        return problems(proc.stderr, document) if proc.returncode != 0 else []

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
            failure = read_failure(proc.stderr)
            if failure.problem == "no-context" or (
                failure.problem == "unreachable" and failure.default_server
            ):
                raise self.failed(["get", "--raw", "/readyz"], proc.stderr)
            where = os.environ.get("KUBECONFIG") or "~/.kube/config"
            raise CliError(
                f"no Kubernetes cluster reachable (kubeconfig {where}): {first_line(proc.stderr)}",
                EXIT_ENVIRONMENT,
            )


def no_cluster_configured() -> str:
    """What to do when kubectl has no cluster at all (it then dials localhost:8080)."""
    configured = os.environ.get("KUBECONFIG")
    source = f"KUBECONFIG ({configured})" if configured else "~/.kube/config"
    return (
        f"no Kubernetes cluster configured: {source} names no current context; set KUBECONFIG "
        "to your cluster's kubeconfig, or choose one of its contexts: "
        "kubectl config use-context NAME (or pass --context NAME)"
    )
