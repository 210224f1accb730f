"""Reaching an Agent's or a MemoryStore's Service for one command, and saying why not.

``forwarded`` port-forwards to the object's Service while the block runs. When kubectl
cannot forward, or a request through the forward gets no answer, the error names the
object, its Service and port, the namespace, the pod behind it with its state, the cause
(kubectl's, in plain words) and what to look at next, instead of a client error on a
local port the user never chose.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kaos_cli.commands.describe import object_state
from kaos_cli.kinds import Kind
from kaos_cli.kubectl.forward import ForwardFailed, Unreachable, port_forward, service_target
from kaos_cli.kubectl.sync import Kube
from kaos_cli.tools import CliError

# kubectl's words for a forwarded connection the pod would not take, and ours.
_REFUSED = re.compile(r"connection refused|connect: connection reset", re.IGNORECASE)
_GONE = re.compile(r"pod (?:does not exist|not found)|is not running|container not running")
_TIMED_OUT = re.compile(r"timed? ?out|deadline exceeded", re.IGNORECASE)
# "error forwarding port 8000 to pod <pod or sandbox>, uid : <why>"
_FORWARDING = re.compile(r"error forwarding port \d+ to pod [^,]*, uid ?: (?P<why>.+)$")


def plain_cause(kubectl_cause: str | None, client_cause: str, port: int) -> str:
    """Why the request through the forward got no answer, as a user can act on it."""
    said = kubectl_cause or ""
    if _REFUSED.search(said):
        return f"nothing accepts connections on port {port} in the pod (not started, or crashed)"
    if _GONE.search(said):
        return "the pod went away or is not running"
    if _TIMED_OUT.search(said):
        return "the pod did not answer in time"
    if said:
        said = said.split(": ", 1)[1] if said.startswith("an error occurred forwarding") else said
        forwarding = _FORWARDING.search(said)
        return forwarding.group("why") if forwarding else said
    return client_cause or "no answer"


def pods_behind(kube: Kube, kind: Kind, name: str) -> str:
    """The object's pods and their state, as one phrase."""
    try:
        pods = kube.items("pods", selector=kind.selector(name))
    except CliError:
        return "its pods could not be listed"
    if not pods:
        return "no pod backs it"
    return ", ".join(f"pod {p['metadata']['name']} ({object_state(p)})" for p in pods[:3])


def _next(kind: Kind, name: str) -> str:
    return f"see: kaos {kind.cli} describe {name}, kaos {kind.cli} logs {name}"


@contextmanager
def forwarded(kube: Kube, kind: Kind, obj: dict[str, Any], default_port: int) -> Iterator[str]:
    """A local URL forwarded to ``obj``'s Service while the block runs."""
    name = obj["metadata"]["name"]
    endpoint = (obj.get("status") or {}).get("endpoint")
    service, port = service_target(endpoint, name, default_port)
    target = f"svc/{service} port {port} in namespace {kube.namespace_name()}"
    try:
        with port_forward(kube.kubectl, kube.namespace, service, port, context=kube.context) as url:
            yield url
    except ForwardFailed as exc:
        raise CliError(
            f"cannot forward to {kind.cli} {name} ({target}): {exc.reason}; "
            f"{pods_behind(kube, kind, name)}; {_next(kind, name)}"
        ) from exc
    except Unreachable as exc:
        cause = plain_cause(exc.forward_cause, exc.cause, port)
        raise CliError(
            f"{kind.cli} {name} did not answer through {target}: {cause}; "
            f"{pods_behind(kube, kind, name)}; {_next(kind, name)}"
        ) from exc
