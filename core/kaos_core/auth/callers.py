"""The callers file: which agents may call a service, as the operator computed it.

The operator writes one per MemoryStore (the Agents bound to it) and one per Agent (the
Agents whose ``agentNetwork.access`` lists it) into a ConfigMap mounted at
``names.CALLERS_PATH``; kubelet updates the mounted file when the ConfigMap changes, and
``CallersFile`` re-reads it when its modification time moves, so a grant or a revocation
takes effect without a restart. A verified service account that is not listed is
refused: a token of some other ServiceAccount, or of another namespace's agent, is not
an identity here.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kaos_core.wire import AGENT_IDENTITY_RE

log = logging.getLogger(__name__)


class Caller(BaseModel):
    """One agent allowed to call: its identity and the ServiceAccount it runs as."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    identity: str = Field(pattern=AGENT_IDENTITY_RE.pattern)
    namespace: str = Field(min_length=1, max_length=63)
    service_account: str = Field(alias="serviceAccount", min_length=1, max_length=253)


class Callers(BaseModel):
    model_config = ConfigDict(extra="forbid")

    callers: list[Caller] = Field(default_factory=list)

    def lookup(self, namespace: str, service_account: str) -> Caller | None:
        for caller in self.callers:
            if caller.namespace == namespace and caller.service_account == service_account:
                return caller
        return None

    def to_json(self) -> str:
        """The file's content, stable (sorted) so an unchanged list is an unchanged object."""
        ordered = sorted(self.callers, key=lambda c: (c.identity, c.service_account))
        doc = {"callers": [c.model_dump(by_alias=True) for c in ordered]}
        return json.dumps(doc, indent=2, sort_keys=True) + "\n"


class CallersFile:
    """A callers file on disk, re-read when it changes; unreadable means nobody is allowed.

    Fail closed: a missing, unreadable or invalid file allows no caller (and says so in
    the log once per change), it never falls back to allowing everyone.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._callers = Callers()

    def current(self) -> Callers:
        try:
            stat = os.stat(self.path)
        except OSError:
            if self._stamp != (-1, -1):
                log.warning(
                    "callers file missing: no agent may call", extra={"path": str(self.path)}
                )
                self._stamp, self._callers = (-1, -1), Callers()
            return self._callers
        stamp = (stat.st_mtime_ns, stat.st_ino)
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self._callers = Callers.model_validate_json(self.path.read_bytes())
            except (OSError, ValidationError):
                log.warning(
                    "callers file unreadable: no agent may call", extra={"path": str(self.path)}
                )
                self._callers = Callers()
        return self._callers

    def lookup(self, namespace: str, service_account: str) -> Caller | None:
        return self.current().lookup(namespace, service_account)
