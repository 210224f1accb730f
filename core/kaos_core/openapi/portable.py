"""The memory service's ``POST /v1/export`` and ``POST /v1/import`` as the
OpenAPI document publishes them (the prose is ``docs/memory/export-format.md``).

Their bodies are the format's own models (``kaos_core.memory.portable``); the records of
a file are not repeated here: each line is described by the format's published JSON
Schema (``FORMAT_SCHEMA_ID``).
"""

from __future__ import annotations

from kaos_core.memory.portable import SCHEMA_ID, ExportRequest, ImportResponse
from kaos_core.openapi import (
    JSON,
    REQUEST_ID,
    REQUEST_ID_ECHO,
    Operation,
    Query,
    Reply,
    Schema,
    error_reply,
)
from kaos_core.openapi.memory_common import (
    ADMIN_CREDENTIAL,
    AGENT_IDENTITY,
    AGENT_TOKEN,
    memory_replies,
)

NDJSON = "application/x-ndjson"
FORMAT_SCHEMA_ID = SCHEMA_ID
FORMAT_SCHEMA_FILE = "docs/memory/kaos-memory-export.schema.json"


JSON_LINES: Schema = {
    "type": "string",
    "description": (
        "JSON Lines (UTF-8, one object per line): the `header` line first, then `turn`, "
        "`digest` and `fact` records. Every line validates against the format's JSON Schema "
        f"`{FORMAT_SCHEMA_ID}` (`{FORMAT_SCHEMA_FILE}`); unknown fields are refused."
    ),
}

MEM0_DUMP: Schema = {
    "type": "object",
    "description": (
        "Mem0's `get_all` answer (a bare list of its results is taken too). Each result "
        "becomes a fact: `memory` its text, the attribution mapped from its ids (the query "
        "parameters), its `metadata` and any key Mem0 does not define kept in the fact's "
        "metadata, with its `id` as `mem0_id`."
    ),
    "required": ["results"],
    "properties": {
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "memory", "created_at"],
                "properties": {
                    "id": {"type": "string", "minLength": 1, "maxLength": 1024},
                    "memory": {"type": "string", "minLength": 1},
                    "user_id": {"type": ["string", "null"]},
                    "agent_id": {"type": ["string", "null"]},
                    "run_id": {"type": ["string", "null"]},
                    "metadata": {"type": ["object", "null"]},
                    "created_at": {"type": "string", "minLength": 1, "maxLength": 64},
                    "updated_at": {"type": ["string", "null"]},
                },
            },
        }
    },
}

# A mapping template over a Mem0 memory's ids (``kaos_memory.portable.mem0``).
TEMPLATE: Schema = {"type": "string"}


_PORTABLE_403 = (
    "`portable_forbidden`: export and import are administrative, an agent's call (an "
    "`X-Agent-Identity` or an agent token) is refused on either posture."
)
_PORTABLE_HEADERS = [AGENT_IDENTITY, AGENT_TOKEN, ADMIN_CREDENTIAL, REQUEST_ID]
_MEM0_MAPPING = (
    "With `source=mem0`: a template over a Mem0 memory's `{user_id}`, `{agent_id}`, "
    "`{run_id}` and `{id}` for the fact's "
)


def portable_operations() -> list[Operation]:
    """``POST /v1/export`` and ``POST /v1/import`` (``docs/memory/export-format.md``)."""
    tags = ["memory"]
    importing = memory_replies(
        {
            200: Reply(
                "Imported (or every record was already stored).",
                {JSON: ImportResponse},
                (REQUEST_ID_ECHO,),
            )
        },
        "`invalid_line` (a line that is not a record of the format, the header not first, "
        "a fact for a store without a long-term tier, two principals in one session: the "
        "message starts `line N:`, or `result N:` in a Mem0 dump, also for a mapped "
        "principal or session no header could name or an agent with a non-printable "
        "character), `malformed_json` (a "
        "Mem0 dump that is not JSON), `invalid_mem0_dump` (no `results` list), "
        "`invalid_mapping` (an unknown attribute, or a template naming anything but Mem0's "
        "ids), `invalid_query` (`source` neither `kaos` nor `mem0`), `bad_identity_header`. "
        "Nothing was written.",
        _PORTABLE_403,
        "`strict_failure`: the audit record could not be written (nothing moved), or a store "
        "failed midway; what was written stays, and importing the "
        "same file again completes it (records already stored are skipped). "
        "`internal_error`: an unexpected failure.",
    )
    importing[409] = error_reply(
        "`session_bound`: the file's session is, in this store, one stored before sessions "
        "were each principal's own that several principals wrote to (closed to writes). "
        "Checked before anything is written: nothing was."
    )
    importing[413] = error_reply(
        "`payload_too_large`: the file is over 8 GiB (a Mem0 dump over 256 MiB); nothing "
        "was written."
    )
    importing[415] = error_reply(
        "`unsupported_media_type`: the body is not `application/x-ndjson` (also "
        "`application/jsonl` or `text/plain`) nor a Mem0 dump as `application/json`; "
        "`unsupported_encoding`: a `Content-Encoding` was sent."
    )
    return [
        Operation(
            "/v1/export",
            "post",
            "export",
            "Stream a principal's, an agent's or the whole store's memory (administrators)",
            "The answer is a file of the portable format `kaos-memory-export` (JSON Lines, "
            "`docs/memory/export-format.md`): a header, then each session's turns and "
            "digest versions, then the facts, streamed (chunked) as the stores' pages are "
            "read. Text and attribution, never vectors. A store that fails once the answer "
            "has begun ends the stream without its last chunk (a broken transfer, never a "
            "complete-looking file). Under verified identity the caller needs `get` on "
            "`memorystores/data` of this store (SubjectAccessReview). Audited: listed by "
            "`/v1/audit` as action `export` (actor, scope, outcome, records per kind; never "
            "content).",
            tags,
            memory_replies(
                {
                    200: Reply(
                        "The file, streamed.",
                        {NDJSON: JSON_LINES},
                        (REQUEST_ID_ECHO,),
                    )
                },
                "`malformed_json` (not JSON, or not an object), `invalid_body` (unknown field, "
                "wrong type, out of range), `invalid_scope` (`store` names nobody, `user` names "
                "a `principal`, `agent` an `agent`), `bad_identity_header` (a malformed or "
                "repeated identity header)",
                _PORTABLE_403,
                "`strict_failure`: the audit record could not be written, or the store could not "
                "be read before the answer began; "
                "`internal_error`: an unexpected failure.",
            ),
            _PORTABLE_HEADERS,
            ExportRequest,
            body_examples={
                "principal": {"level": "user", "principal": "alice"},
                "store": {"level": "store"},
            },
        ),
        Operation(
            "/v1/import",
            "post",
            "import",
            "Import a file of the portable format, or a Mem0 dump (administrators)",
            "Idempotent: a record the store already holds is skipped, so importing a file "
            "twice stores it once. Every line is checked before anything is written (the "
            "body is spooled to disk, never held in memory); then turns and digest "
            "versions go through the conversation store and facts through the long-term "
            "store, always embedded by this store's embedder (`reembedded` says the file's "
            "model differs). Under verified identity the caller needs `create` on "
            "`memorystores/data` of this store. Audited, like export (action `import`).",
            tags,
            importing,
            _PORTABLE_HEADERS,
            raw_body={
                NDJSON: JSON_LINES,
                "text/plain": JSON_LINES,
                JSON: MEM0_DUMP,
            },
            query=[
                Query(
                    "source",
                    "`kaos` (default): the body is a file of the portable format; `mem0`: "
                    "Mem0's `get_all` answer (`application/json`).",
                    {"type": "string", "enum": ["kaos", "mem0"], "default": "kaos"},
                ),
                Query(
                    "principal",
                    _MEM0_MAPPING + "principal (default `{user_id}`; empty: never set).",
                    TEMPLATE,
                ),
                Query(
                    "agent",
                    _MEM0_MAPPING + "agent (default `{agent_id}`, e.g. "
                    "`kaos://agent/<namespace>/{agent_id}`; empty: never set).",
                    TEMPLATE,
                ),
                Query(
                    "session",
                    _MEM0_MAPPING + "session (default `{run_id}`).",
                    TEMPLATE,
                ),
                Query(
                    "default_session",
                    "With `source=mem0`: the session of a memory the session template "
                    "leaves unset (default `mem0-import`; not empty).",
                    TEMPLATE,
                ),
            ],
        ),
    ]
