"""Schemathesis settings and checks shared by the services' conformance tests."""

from __future__ import annotations

from schemathesis.checks import CheckFunction, not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

MAX_EXAMPLES = 50

# Valid requests: no 5xx, and the answer is one the document gives for the operation.
# Schema-valid data can still be refused (a level whose owner header is missing, a
# posture, a session bound to another principal: rules across several inputs that a
# schema cannot state), so `positive_data_acceptance` is not asked for.
POSITIVE_CHECKS: list[CheckFunction] = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
# Invalid requests must be refused with a documented 4xx carrying the error model, so
# every conformance check applies to them too, plus the rejection itself.
NEGATIVE_CHECKS: list[CheckFunction] = [*POSITIVE_CHECKS, negative_data_rejection]


def fuzz_config(mode: str, max_examples: int = MAX_EXAMPLES) -> SchemathesisConfig:
    """Bounded, deterministic generation (the same cases every run, so CI cannot flake)."""
    return SchemathesisConfig.from_dict(
        {
            "generation": {
                "mode": mode,
                "max-examples": max_examples,
                "deterministic": True,
                "database": "none",
                # HTTP servers ignore headers they do not know, by design: an undeclared
                # header is no invalid request. (This also stops schemathesis adding
                # unknown body fields; the contract tests cover their 400 already.)
                "allow-extra-parameters": False,
            },
        }
    )
