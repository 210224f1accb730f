"""Schemathesis against real ``kaos-memory`` processes on both backends.

Cases come from the generated document (equal to ``docs/openapi/memory.json``: see
``tests/support/openapi_fuzz``); every answer must be no 5xx and conform to the document in status,
content type, headers and body schema.
"""

from __future__ import annotations

from typing import Any

import schemathesis
from kaos_core.openapi.memory import memory_document

from tests.fixtures.memory import MemoryServer
from tests.support.openapi_fuzz import NEGATIVE_CHECKS, POSITIVE_CHECKS, fuzz_config

positive = schemathesis.openapi.from_dict(memory_document(), config=fuzz_config("positive"))
# Operations without inputs (the probes) have no invalid request to send.
negative = schemathesis.openapi.from_dict(
    memory_document(), config=fuzz_config("negative")
).exclude(method="GET")


@positive.parametrize()
def test_valid_requests_conform(case: schemathesis.Case[Any], memory_service: MemoryServer) -> None:
    case.call_and_validate(base_url=memory_service.url, checks=POSITIVE_CHECKS, timeout=30)


@negative.parametrize()
def test_invalid_requests_are_rejected(
    case: schemathesis.Case[Any], memory_service: MemoryServer
) -> None:
    case.call_and_validate(base_url=memory_service.url, checks=NEGATIVE_CHECKS, timeout=30)
