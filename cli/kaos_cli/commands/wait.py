"""``--wait``: follow KAOS objects until they are Ready, and stop as soon as one cannot be.

Each change of phase or reason is printed (on a terminal above a spinner). The wait ends
early, with what to fix, when an object's current status says it will not become Ready by
itself: it Failed, its Ready reason is one of ``health.STUCK_REASONS`` (a refused override,
an invalid spec), or an object its spec names is still missing after ``MISSING_GRACE``
seconds (it may be on its way: applied in the same breath, or by someone else); a missing
name comes with the existing names it was likely meant to be. Otherwise it ends at
``timeout`` with what is still missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.text import Text

from kaos_cli.health import SPEC_REFUSED, health
from kaos_cli.kinds import BY_KIND, Kind
from kaos_cli.kubectl.sync import Kube, did_you_mean
from kaos_cli.objects import condition, explain, status
from kaos_cli.output import console, info
from kaos_cli.references import Reference, current, missing
from kaos_cli.tools import CliError

POLL_SECONDS = 1.0
# How long a referenced object may be missing before the wait gives up on it.
MISSING_GRACE = 10.0

Clock = Callable[[], float]
Sleep = Callable[[float], None]


def progress_line(kind: Kind, name: str, obj: dict[str, Any]) -> str:
    phase = status(obj).get("phase") or "Pending"
    why = explain(obj) if phase != "Ready" else ""
    return f"{kind.cli}/{name}: {phase}{' - ' + why if why else ''}"


def is_ready(obj: dict[str, Any]) -> bool:
    return status(obj).get("phase") == "Ready" and current(obj)


def failed(kind: Kind, name: str, obj: dict[str, Any]) -> CliError | None:
    """The error for an object whose current status says it cannot become Ready."""
    if not current(obj):
        return None
    verdict = health(obj)
    if verdict.tone != "error":
        return None
    ready = condition(obj, "Ready") or {}
    message = str(ready.get("message") or status(obj).get("message") or "")
    why = ": ".join(p for p in (verdict.reason, message) if p)
    if verdict.reason in SPEC_REFUSED:  # the spec asks for what cannot be
        todo = f"fix its spec and deploy again (see: kaos {kind.cli} describe {name})"
    else:  # an image, a crash: the pod's side
        todo = (
            f"it will not become Ready by itself (see: kaos {kind.cli} describe {name}, "
            f"kaos {kind.cli} logs {name})"
        )
    return CliError(f"{kind.cli} {name} failed{': ' + why if why else ''}; {todo}")


def unresolved(kube: Kube, kind: Kind, name: str, refs: list[Reference]) -> CliError | None:
    """The error for references that still do not exist, with close names; ``None`` when
    they exist by now (the operator has not caught up yet)."""
    pieces, fields = [], []
    for ref in refs:
        target = BY_KIND[ref.kind]
        existing = kube.names(target.resource)
        if ref.name in existing:
            continue
        close = did_you_mean(target.cli, ref.name, existing)
        pieces.append(
            f"{target.cli} '{ref.name}' does not exist in namespace {kube.namespace_name()}"
            + (f" ({close})" if close else "")
        )
        fields.append(ref.field)
    if not pieces:
        return None
    return CliError(
        f"{kind.cli} {name} cannot become Ready: {'; '.join(pieces)}; fix "
        f"{' and '.join(dict.fromkeys(fields))} and deploy again "
        f"(see: kaos {kind.cli} describe {name})"
    )


def wait_ready(
    kube: Kube,
    targets: list[tuple[Kind, str]],
    timeout: float,
    *,
    clock: Clock = time.monotonic,
    sleep: Sleep = time.sleep,
) -> int:
    """Poll until every target is Ready, printing each change of phase or reason."""
    start = clock()
    last: dict[tuple[str, str], str] = {}
    missing_since: dict[tuple[str, str], float] = {}
    pending = list(targets)
    spinner = console(stderr=True)
    with spinner.status("waiting", spinner="dots") if spinner.is_terminal else _Null() as live:
        while pending:
            still = []
            for kind, name in pending:
                obj = kube.find(kind.resource, name) or {}
                line = progress_line(kind, name, obj)
                if last.get((kind.cli, name)) != line:
                    # On a terminal the spinner owns the last line: print above it.
                    if live is not None:
                        spinner.print(line, markup=False, highlight=False)
                    else:
                        info(line)
                    last[(kind.cli, name)] = line
                if live is not None:
                    live.update(Text(line))
                if is_ready(obj):
                    continue
                stuck = failed(kind, name, obj)
                if stuck is not None:
                    raise stuck
                refs = missing(obj) if current(obj) else []
                if refs:
                    since = missing_since.setdefault((kind.cli, name), clock())
                    if clock() - since >= MISSING_GRACE:
                        gone = unresolved(kube, kind, name, refs)
                        if gone is not None:
                            raise gone
                else:
                    missing_since.pop((kind.cli, name), None)
                still.append((kind, name, line))
            if not still:
                return 0
            if clock() - start > timeout:
                kind, name, line = still[0]
                state = line.split(": ", 1)[1]
                raise CliError(
                    f"{kind.cli} {name} not Ready after {timeout:g}s: {state} "
                    f"(see: kaos {kind.cli} describe {name})"
                )
            pending = [(k, n) for k, n, _ in still]
            sleep(POLL_SECONDS)
    return 0


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
