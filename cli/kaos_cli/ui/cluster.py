"""The cluster as the console reaches it: ``kubectl`` with the user's kubeconfig, async.

Every call is a ``kubectl`` subprocess (the same binary, context and identity as the
rest of the CLI), so the console needs no client library and no credential of its own.
``ClusterError.of`` turns kubectl's stderr into what the page says: the cluster is not
reachable, the user lacks a permission (verb and resource), or another failure.
``Forwards`` keeps one ``kubectl port-forward`` per Service for the console's lifetime.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from kaos_cli.portforward import free_port
from kaos_cli.tools import first_line

Problem = Literal["unreachable", "forbidden", "not-installed", "not-found", "failed"]

_UNREACHABLE = ("connection refused", "no such host", "unable to connect", "i/o timeout")
_DIAL = re.compile(r"dial tcp [^\s\"]+: [^\"\n\\]+")
_FORBIDDEN = re.compile(
    r'cannot (?P<verb>[a-z]+) resource "(?P<resource>[^"]+)"'
    r'(?: in API group "(?P<group>[^"]*)")?'
)


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
        """Classify kubectl's failure of ``what`` (pure)."""
        lowered = stderr.lower()
        line = first_line(stderr) or "kubectl failed"
        if any(marker in lowered for marker in _UNREACHABLE):
            dial = _DIAL.search(stderr)
            reason = dial.group(0) if dial else line
            return cls(
                "unreachable",
                f"the Kubernetes cluster cannot be reached: {reason} "
                "(check the kubeconfig context, or KUBECONFIG)",
            )
        forbidden = _FORBIDDEN.search(stderr)
        if forbidden or "forbidden" in lowered:
            verb = forbidden.group("verb") if forbidden else ""
            resource = forbidden.group("resource") if forbidden else ""
            group = (forbidden.group("group") if forbidden else "") or ""
            full = f"{resource}.{group}" if group else resource
            return cls(
                "forbidden",
                f"permission denied: your identity may not {verb or 'access'} "
                f"{full or what} (ask for RBAC: verb {verb or '?'} on {full or what})",
                verb=verb,
                resource=full,
            )
        if "the server doesn't have a resource type" in lowered:
            return cls("not-installed", "the KAOS CRDs are not installed (kaos system install)")
        if "notfound" in lowered.replace(" ", "").replace("(", ""):
            return cls("not-found", f"{what} not found")
        return cls("failed", f"kubectl {what}: {line}")


@dataclass
class Cluster:
    """kubectl bound to one kubeconfig context (``None``: the current one)."""

    kubectl: str
    context: str | None = None
    request_timeout: int = 15

    def argv(self, *args: str) -> list[str]:
        return [self.kubectl, *(["--context", self.context] if self.context else []), *args]

    async def run(self, *args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            *self.argv(*args, f"--request-timeout={self.request_timeout}s"),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
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
        proc = await asyncio.create_subprocess_exec(
            *self.argv("get", resources, *where, "--watch-only", "-o", "name"),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
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


@dataclass
class _Forward:
    proc: asyncio.subprocess.Process
    url: str
    drains: tuple[asyncio.Task[None], ...] = ()


@dataclass
class Forwards:
    """``kubectl port-forward svc/<name>`` per (namespace, service, port), started on first
    use and restarted when it died (the pod behind it changed)."""

    cluster: Cluster
    ready_timeout: float = 20
    _live: dict[tuple[str, str, int], _Forward] = field(default_factory=dict)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def url(self, namespace: str, service: str, port: int) -> str:
        key = (namespace, service, port)
        async with self._lock:
            live = self._live.get(key)
            if live is not None and live.proc.returncode is None:
                return live.url
            forward = await self._start(namespace, service, port)
            self._live[key] = forward
            return forward.url

    async def drop(self, namespace: str, service: str, port: int) -> None:
        """Forget a forward that failed a request (its pod went away)."""
        async with self._lock:
            live = self._live.pop((namespace, service, port), None)
        if live is not None:
            await _stop(live.proc)

    async def _start(self, namespace: str, service: str, port: int) -> _Forward:
        local = free_port()
        proc = await asyncio.create_subprocess_exec(
            *self.cluster.argv(
                "port-forward", "--address", "127.0.0.1", "-n", namespace,
                f"svc/{service}", f"{local}:{port}",
            ),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None

        async def announced() -> bool:
            assert proc.stdout is not None
            async for line in proc.stdout:
                if b"Forwarding from" in line:
                    return True
            return False

        try:
            ok = await asyncio.wait_for(announced(), self.ready_timeout)
        except TimeoutError:
            ok = False
        if not ok:
            await _stop(proc)
            err = (await proc.stderr.read()).decode(errors="replace")
            raise ClusterError.of(err or "port-forward not ready", f"port-forward svc/{service}")
        # Keep draining both pipes so kubectl never blocks on a full one.
        drains = (
            asyncio.create_task(_drain(proc.stdout)),
            asyncio.create_task(_drain(proc.stderr)),
        )
        return _Forward(proc, f"http://127.0.0.1:{local}", drains)

    async def close(self) -> None:
        async with self._lock:
            live, self._live = list(self._live.values()), {}
        for forward in live:
            await _stop(forward.proc)


async def _drain(stream: asyncio.StreamReader) -> None:
    with contextlib.suppress(Exception):
        async for _ in stream:
            pass


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except TimeoutError:
            proc.kill()
            await proc.wait()
