"""The memory service's quarantine endpoints as the OpenAPI document publishes them (the
prose is ``docs/memory/recall.md``, "Quarantine"; the models ``kaos_core.memory.quarantine``)."""

from __future__ import annotations

from kaos_core.memory.quarantine import (
    MAX_IDS,
    QuarantineChangeRequest,
    QuarantineChangeResponse,
    QuarantineListRequest,
    QuarantineListResponse,
)
from kaos_core.openapi import (
    JSON,
    REQUEST_ID,
    REQUEST_ID_ECHO,
    Operation,
    Reply,
    error_reply,
    principal_header,
)
from kaos_core.openapi.memory_common import (
    ADMIN_CREDENTIAL,
    AGENT_IDENTITY,
    AGENT_TOKEN,
    COMMON_400,
    memory_replies,
)

_403 = (
    "`quarantine_forbidden`: the quarantine is administrative, an agent's call (an "
    "`X-Agent-Identity` or an agent token) is refused on either posture."
)
_NOT_FOUND = error_reply(
    "`unknown_facts`: an id names no quarantined fact of the scope; nothing changed."
)
_HEADERS = [
    AGENT_IDENTITY,
    AGENT_TOKEN,
    ADMIN_CREDENTIAL,
    principal_header("With `level: user`: whose quarantined facts (else the store's)."),
    REQUEST_ID,
]
_SCOPE = (
    "The scope is `level` (`store`, the default: the whole store; `user` with `X-Principal`: "
    "that principal's facts)."
)


def quarantine_operations() -> list[Operation]:
    """``POST /v1/quarantine/list``, ``/release`` and ``/erase``."""
    tags = ["memory"]

    def change(path: str, op: str, summary: str, what: str, verb: str) -> Operation:
        return Operation(
            path,
            "post",
            op,
            summary,
            f"{what} {_SCOPE} All or none: when any id names no quarantined fact of the scope "
            f"(unknown, released, another scope's) nothing changes (404 `unknown_facts`). At "
            f"most {MAX_IDS} distinct ids. Audited before it acts (action `quarantine_{op}`: "
            "the actor, the scope, then `outcome` and `moved.facts`); one that cannot be "
            "recorded is refused with `strict_failure`. Under verified identity the caller "
            f"needs `{verb}` on `memorystores/data` of this store (SubjectAccessReview).",
            tags,
            memory_replies(
                {200: Reply("Done.", {JSON: QuarantineChangeResponse}, (REQUEST_ID_ECHO,))},
                COMMON_400 + ", `unresolved_scope`",
                _403,
                "`strict_failure`: the audit record could not be written (nothing changed), or "
                "the long-term store failed; `internal_error`.",
            )
            | {404: _NOT_FOUND},
            _HEADERS,
            QuarantineChangeRequest,
        )

    return [
        Operation(
            "/v1/quarantine/list",
            "post",
            "quarantine_list",
            "Facts held back from recall as instructions to the agent (administrators)",
            "A fact whose text reads as an instruction to the agent (an imperative addressed "
            "to the assistant, a tool-use directive, a destination to send data or "
            'credentials to, "ignore previous instructions" and its paraphrases) is '
            "quarantined when it is stored: no recall (either purpose) and no `/v1/list` "
            "gives it out. This lists them in listing order with the screening's `reason`. "
            f"{_SCOPE} Pages with `limit` and `next_cursor`. Under verified identity the "
            "caller needs `get` on `memorystores/data`.",
            tags,
            memory_replies(
                {200: Reply("Listed.", {JSON: QuarantineListResponse}, (REQUEST_ID_ECHO,))},
                COMMON_400 + ", `unresolved_scope`, `bad_cursor`",
                _403,
                "`strict_failure`: the long-term store could not be read; `internal_error`.",
            ),
            _HEADERS,
            QuarantineListRequest,
        ),
        change(
            "/v1/quarantine/release",
            "release",
            "Release quarantined facts: recalled from then on (administrators)",
            "A released fact is never screened again (also after an export and import).",
            "update",
        ),
        change(
            "/v1/quarantine/erase",
            "erase",
            "Erase quarantined facts (administrators)",
            "The facts are deleted with their text in Mem0's history.",
            "delete",
        ),
    ]
