"""The cluster as the console reaches it: ``kubectl`` with the user's kubeconfig, async.

Every call is a ``kubectl`` subprocess (the same binary, context and identity as the
rest of the CLI), so the console needs no client library and no credential of its own.
``ClusterError.of`` words kubectl's failure (read by ``kubectl.errors``) as the page says
it: the cluster is not reachable, the user lacks a permission (verb and resource), or
another failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from kaos_cli.kubectl.errors import Problem, read_failure
from kaos_cli.kubectl.sync import context_argv


@dataclass
class ClusterError(Exception):
    problem: Problem
    message: str
    verb: str = ""
    resource: str = ""

    def __str__(self) -> str:
        return self.message

    @classmethod
    def of(cls, stderr: str, what: str) -> ClusterError:
        """kubectl's failure of ``what`` in the console's words (pure)."""
        failure = read_failure(stderr)
        if failure.problem == "no-context":
            # The page has one way to show "no cluster here": the unreachable note.
            return cls(
                "unreachable",
                f"the kubeconfig has no context {failure.context} "
                "(list them: kubectl config get-contexts)",
            )
        if failure.problem == "unreachable" and failure.default_server:
            return cls(
                "unreachable",
                "no Kubernetes cluster configured: set KUBECONFIG to your cluster's kubeconfig "
                "or choose a context (kubectl config use-context NAME)",
            )
        if failure.problem == "unreachable":
            return cls(
                "unreachable",
                f"the Kubernetes cluster cannot be reached: {failure.reason} "
                "(check the kubeconfig context, or KUBECONFIG)",
            )
        if failure.problem == "forbidden":
            verb, full = failure.verb, failure.resource
            return cls(
                "forbidden",
                f"permission denied: your identity may not {verb or 'access'} "
                f"{full or what} (ask for RBAC: verb {verb or '?'} on {full or what})",
                verb=verb,
                resource=full,
            )
        if failure.problem == "not-installed":
            return cls("not-installed", "the KAOS CRDs are not installed (kaos system install)")
        if failure.problem == "not-found":
            return cls("not-found", f"{what} not found")
        return cls("failed", f"kubectl {what}: {failure.line}")


async def stop(proc: asyncio.subprocess.Process) -> None:
    """End a kubectl that runs on (a watch, a port-forward), killing it if it lingers."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except TimeoutError:
            proc.kill()
            await proc.wait()


@dataclass
class Cluster:
    """kubectl bound to one kubeconfig context (``None``: the current one)."""

    kubectl: str
    context: str | None = None
    request_timeout: int = 15

    def argv(self, *args: str) -> list[str]:
        return [*context_argv(self.kubectl, self.context), *args]

    async def start(self, *args: str) -> asyncio.subprocess.Process:
        """kubectl running on, its output piped to the caller."""
        return await asyncio.create_subprocess_exec(
            *self.argv(*args),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )

    async def run(self, *args: str) -> str:
        proc = await self.start(*args, f"--request-timeout={self.request_timeout}s")
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.request_timeout + 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise ClusterError("unreachable", "the Kubernetes API did not answer in time") from None
        if proc.returncode != 0:
            raise ClusterError.of(err.decode(errors="replace"), " ".join(args[:3]))
        return out.decode(errors="replace")

    async def json(self, *args: str) -> Any:
        return json.loads(await self.run(*args, "-o", "json"))

    async def items(self, resource: str, namespace: str | None) -> list[dict[str, Any]]:
        where = ["-n", namespace] if namespace else ["-A"]
        document = await self.json("get", resource, *where)
        items: list[dict[str, Any]] = document.get("items") or []
        return items

    async def get(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        document: dict[str, Any] = await self.json("get", resource, name, "-n", namespace)
        return document

    async def watch(self, resources: str, namespace: str | None) -> AsyncIterator[str]:
        """One line per change of any of ``resources`` (``kubectl get -w``), until the
        watch ends; a failure to start raises ``ClusterError``."""
        where = ["-n", namespace] if namespace else ["-A"]
        proc = await self.start("get", resources, *where, "--watch-only", "-o", "name")
        assert proc.stdout is not None and proc.stderr is not None
        try:
            async for raw in proc.stdout:
                yield raw.decode(errors="replace").strip()
            err = await proc.stderr.read()
            if await proc.wait() != 0:
                raise ClusterError.of(err.decode(errors="replace"), f"watch {resources}")
        finally:
            if proc.returncode is None:
                proc.terminate()
                with contextlib.suppress(ProcessLookupError):
                    await proc.wait()
