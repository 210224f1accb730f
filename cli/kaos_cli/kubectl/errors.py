"""What went wrong in a kubectl call, read once from its stderr for the CLI and the console.

kubectl reports every failure as text. ``read_failure`` sorts that text into the few
problems a user can act on (no cluster, no such context, no permission, no CRDs, no such
object) and keeps
the facts each front end words in its own way: the CLI as one ``error:`` line with an
exit status, the console as a note on the page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from kaos_cli.tools import first_line

Problem = Literal["unreachable", "no-context", "forbidden", "not-installed", "not-found", "failed"]

_UNREACHABLE = ("connection refused", "no such host", "unable to connect", "i/o timeout")
# The dial error inside klog's quoted message, without the quote or escape that ends it.
_DIAL = re.compile(r"dial tcp [^\s\"]+: [^\"\n\\]+")
# kubectl's own default when no kubeconfig names a cluster: it then dials this address.
_DEFAULT_SERVER = ("localhost:8080", "127.0.0.1:8080")
# "context was not found for specified context: X", "cannot locate context X",
# "context "X" does not exist".
_NO_CONTEXT = re.compile(
    r"context was not found for specified context: (?P<a>\S+)"
    r"|cannot locate context (?P<b>\S+)"
    r'|context "(?P<c>[^"]+)" does not exist'
)
_FORBIDDEN = re.compile(
    r'cannot (?P<verb>[a-z]+) resource "(?P<resource>[^"]+)"'
    r'(?: in API group "(?P<group>[^"]*)")?'
)


@dataclass(frozen=True)
class Failure:
    """One kubectl failure: its problem and the facts that explain it."""

    problem: Problem
    line: str  # the most telling line of stderr
    reason: str = ""  # unreachable: the dial error, else the line
    default_server: bool = False  # unreachable: kubectl's default, no cluster configured
    context: str = ""  # no-context: the context named
    verb: str = ""  # forbidden: what the identity may not do ...
    resource: str = ""  # ... to which resource (``agents.kaos.tools``)


def read_failure(stderr: str) -> Failure:
    """Classify kubectl's stderr (pure)."""
    lowered = stderr.lower()
    line = first_line(stderr)
    no_context = _NO_CONTEXT.search(stderr)
    if no_context:
        name = next(g for g in no_context.groups() if g)
        return Failure("no-context", line, context=name)
    if any(marker in lowered for marker in _UNREACHABLE):
        dial = _DIAL.search(stderr)
        return Failure(
            "unreachable",
            line,
            reason=dial.group(0) if dial else line,
            default_server=any(server in lowered for server in _DEFAULT_SERVER),
        )
    forbidden = _FORBIDDEN.search(stderr)
    if forbidden or "forbidden" in lowered:
        verb = forbidden.group("verb") if forbidden else ""
        resource = forbidden.group("resource") if forbidden else ""
        group = (forbidden.group("group") if forbidden else "") or ""
        full = f"{resource}.{group}" if group else resource
        return Failure("forbidden", line, verb=verb, resource=full)
    if "the server doesn't have a resource type" in lowered:
        return Failure("not-installed", line)
    if "notfound" in lowered.replace(" ", "").replace("(", ""):
        return Failure("not-found", line)
    return Failure("failed", line)
