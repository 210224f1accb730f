"""Schemathesis against a real ``kaos-agent`` process whose model is ``kaos-devmodel``.

Cases come from the generated document (equal to ``docs/openapi/agent.json``: see
``tests/support/openapi_fuzz``); every answer must be no 5xx and conform to the document in status,
content type, headers and body schema (for a stream, each event).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from kaos_agent.openapi import agent_document
from kaos_agent.triggers.http import ROUTE as TRIGGER_ROUTE

from tests.fixtures.agent import AgentFactory
from tests.support.openapi_fuzz import NEGATIVE_CHECKS, POSITIVE_CHECKS, REFUSALS, fuzz_config
from tests.support.procs import ServiceProcess

positive = schemathesis.openapi.from_dict(agent_document(), config=fuzz_config("positive"))
# Operations without inputs (the probes, the model list, the card) have no invalid request.
negative = (
    schemathesis.openapi.from_dict(agent_document(), config=fuzz_config("negative"))
    .exclude(method="GET")
    .exclude(path=TRIGGER_ROUTE)
)
# A webhook delivery is refused first for a trigger the Agent does not have (404), then
# for its signature (401), before its other inputs are looked at: both are rejections.
trigger_negative = schemathesis.openapi.from_dict(
    agent_document(), config=fuzz_config("negative", refusals=(*REFUSALS, 401, 404))
).include(path=TRIGGER_ROUTE)

# A2A answers every request, a malformed one included, with HTTP 200 and a JSON-RPC
# error object (JSON-RPC 2.0 over HTTP, as the A2A specification binds it): an invalid
# request there is rejected in the body, not by a 4xx, so only the rejection check is
# left out for it.
A2A_NEGATIVE_CHECKS = [c for c in NEGATIVE_CHECKS if c.__name__ != "negative_data_rejection"]


@pytest.fixture(scope="module")
def agent(module_agent_factory: AgentFactory) -> Iterator[ServiceProcess]:
    yield module_agent_factory("fuzzed")


@positive.parametrize()
def test_valid_requests_conform(case: schemathesis.Case[Any], agent: ServiceProcess) -> None:
    case.call_and_validate(base_url=agent.url, checks=POSITIVE_CHECKS, timeout=60)


@negative.parametrize()
def test_invalid_requests_are_rejected(case: schemathesis.Case[Any], agent: ServiceProcess) -> None:
    checks = A2A_NEGATIVE_CHECKS if case.operation.path == "/" else NEGATIVE_CHECKS
    case.call_and_validate(base_url=agent.url, checks=checks, timeout=60)


@trigger_negative.parametrize()
def test_invalid_deliveries_are_rejected(
    case: schemathesis.Case[Any], agent: ServiceProcess
) -> None:
    case.call_and_validate(base_url=agent.url, checks=NEGATIVE_CHECKS, timeout=60)
