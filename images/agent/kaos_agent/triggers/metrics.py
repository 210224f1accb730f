"""``kaos_agent_triggers_total{trigger, outcome}``: every delivery, counted once.

A delivery to a trigger that does not exist is counted under ``UNKNOWN`` (its name is the
caller's: a label per name would let anyone grow the series without end).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

UNKNOWN = "_unknown"
# Outcomes: ``started`` (202), or the refusal's error code (``invalid_signature``, ...).
STARTED = "started"


def triggers_counter(registry: CollectorRegistry) -> Counter:
    return Counter(
        "triggers",
        "Webhook trigger deliveries, by trigger and outcome (started, or the refusal's code).",
        ["trigger", "outcome"],
        namespace="kaos_agent",
        registry=registry,
    )
