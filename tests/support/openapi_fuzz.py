"""Schemathesis settings and checks shared by the services' conformance tests.

CI runs the same bounded, derandomized cases every time. A deeper local hunt:
``KAOS_FUZZ_MAX_EXAMPLES=500 KAOS_FUZZ_RANDOM=1 pytest tests/integration/*/test_schemathesis.py``.
"""

from __future__ import annotations

import os

from schemathesis.checks import CheckFunction, not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

MAX_EXAMPLES = int(os.environ.get("KAOS_FUZZ_MAX_EXAMPLES") or 50)
RANDOM = os.environ.get("KAOS_FUZZ_RANDOM", "") not in ("", "0")

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


# Refusals the services give: 400 invalid input, 403 a refused scope or posture, 405
# another method, 413 too large, 415 not JSON (5xx is reported by `not_a_server_error`).
REFUSALS: tuple[int | str, ...] = (400, 403, 405, 413, 415, "5xx")


def fuzz_config(
    mode: str, max_examples: int = MAX_EXAMPLES, refusals: tuple[int | str, ...] = REFUSALS
) -> SchemathesisConfig:
    """Bounded generation, deterministic unless ``KAOS_FUZZ_RANDOM`` (so CI cannot flake);
    ``refusals``: the statuses that reject invalid data."""
    return SchemathesisConfig.from_dict(
        {
            "generation": {
                "mode": mode,
                "max-examples": max_examples,
                "deterministic": not RANDOM,
                "database": "none",
                # HTTP servers ignore headers they do not know, by design: an undeclared
                # header is no invalid request. (This also stops schemathesis adding
                # unknown body fields; the contract tests cover their 400 already.)
                "allow-extra-parameters": False,
            },
            "checks": {"negative_data_rejection": {"expected-statuses": list(refusals)}},
        }
    )
