"""The console's health: the tone of every badge, chip and topology box is the one the
CLI gives the same object (``kaos_cli.health``), and the banners reconcile the operator's
conditions with the console's own probe, each saying which check it comes from."""

from __future__ import annotations

import re
from typing import Any

import pytest
from kaos_cli.health import condition_tone, health
from kaos_cli.ui.model import Note, status_notes, summarize, topology
from kaos_cli.ui.render.base import badge, chips
from kaos_cli.ui.render.overview import overview_fragment
from kaos_cli.ui.topology import render_svg


def cond(type_: str, status: str, reason: str = "", message: str = "") -> dict[str, str]:
    return {"type": type_, "status": status, "reason": reason, "message": message}


def agent(name: str, phase: str | None, *conditions: dict[str, str]) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": list(conditions)}
    if phase:
        status["phase"] = phase
    return {
        "kind": "Agent",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"modelAPI": "llm"},
        "status": status,
    }


READY = agent("ready", "Ready", cond("Ready", "True", "Available"))
DEGRADED = agent(
    "degraded",
    "Ready",
    cond("Ready", "True", "Available"),
    cond("MemoryDegraded", "True", "MemoryStoreNotFound", "MemoryStore memory-local is gone"),
)
FAILED = agent(
    "failed",
    "Failed",
    cond("Ready", "False", "OverrideRefused", "MEMORY_ENDPOINT is reserved for the operator"),
)
PENDING = agent("pending", "Pending", cond("Ready", "False", "DeploymentProgressing", "waiting"))
SILENT = agent("silent", None)
EVERY = [READY, DEGRADED, FAILED, PENDING, SILENT]


@pytest.mark.parametrize("obj", EVERY, ids=lambda o: o["metadata"]["name"])
def test_badge_and_box_carry_the_clis_tone(obj: dict[str, Any]) -> None:
    row = summarize("Agent", obj)
    expected = health(obj)
    assert row.health == expected
    drawn = badge(row.health)
    assert f'class="phase tone-{expected.tone}"' in drawn and f">{expected.word}<" in drawn
    svg = render_svg(topology([row], "ns"))
    assert f"tone-{expected.tone}" in svg


def test_each_state_has_the_tone_the_issue_names() -> None:
    tones = {o["metadata"]["name"]: summarize("Agent", o).health for o in EVERY}
    assert (tones["ready"].word, tones["ready"].tone) == ("Ready", "ok")
    assert (tones["degraded"].word, tones["degraded"].tone) == ("Degraded", "warn")
    assert (tones["failed"].word, tones["failed"].tone) == ("Failed", "error")
    assert (tones["pending"].word, tones["pending"].tone) == ("Pending", "progress")
    assert tones["silent"].tone == "unknown"


def test_chips_take_the_condition_polarity() -> None:
    row = summarize("Agent", DEGRADED)
    html = chips(row.conditions)
    memory = re.search(r'<span class="([^"]+)"[^>]*data-condition="MemoryDegraded"', html)
    assert memory and memory.group(1) == "chip tone-warn bad degraded", html
    assert condition_tone("MemoryDegraded", "True") == "warn"
    ready = re.search(r'<span class="([^"]+)"[^>]*data-condition="Ready"', html)
    assert ready and ready.group(1) == "chip tone-ok", html
    failed = chips(summarize("Agent", FAILED).conditions)
    assert 'class="chip tone-error bad"' in failed and "(OverrideRefused)" in failed


def test_the_overview_row_shows_the_health_word() -> None:
    html = overview_fragment([summarize("Agent", o) for o in EVERY], [])
    for word, tone in (("Degraded", "warn"), ("Failed", "error"), ("Pending", "progress")):
        assert re.search(rf'data-health="{word}">.*?<span class="phase tone-{tone}"', html), word


WHAT = "its agent card (/.well-known/agent-card.json on svc/ready)"
CAUSE = "port-forward svc/ready in namespace ns not found"


def test_a_probe_failure_on_a_ready_agent_is_a_warning_naming_the_probe() -> None:
    row = summarize("Agent", READY)
    assert status_notes(row, WHAT, None) == []
    [note] = status_notes(row, WHAT, CAUSE, then="Chat fails until it answers.")
    assert note == Note(
        "warn",
        f"Console probe failed: {WHAT} did not answer ({CAUSE}), though the operator reports "
        "Agent ready Ready. Chat fails until it answers.",
        "probe",
    )


def test_a_degraded_agent_says_so_from_the_operator_and_the_probe_apart() -> None:
    row = summarize("Agent", DEGRADED)
    operator, probe = status_notes(row, WHAT, "")
    assert operator == Note(
        "warn",
        "Operator: Agent degraded is Degraded, MemoryDegraded=True MemoryStoreNotFound: "
        "MemoryStore memory-local is gone",
        "operator",
    )
    assert probe.tone == "warn" and probe.check == "probe"
    assert probe.message.startswith(f"Console probe failed: {WHAT} did not answer, though")


def test_a_failed_agent_leads_with_the_operators_condition() -> None:
    [note] = status_notes(summarize("Agent", FAILED), WHAT, CAUSE)
    assert note.tone == "error" and note.check == "operator"
    assert note.message == (
        "Operator: Agent failed is Failed, Ready=False OverrideRefused: MEMORY_ENDPOINT is "
        f"reserved for the operator. Console probe failed too: {WHAT} did not answer ({CAUSE})"
    )
    [answered] = status_notes(summarize("Agent", FAILED), WHAT, None)
    assert "Console probe" not in answered.message


def test_a_pending_agent_is_progress_and_the_probe_is_expected_to_fail() -> None:
    [note] = status_notes(summarize("Agent", PENDING), WHAT, "")
    assert note.tone == "progress" and note.check == "operator"
    assert note.message == (
        "Operator: Agent pending is Pending, Ready=False DeploymentProgressing: waiting. "
        f"Console probe failed too, as expected until it is Ready: {WHAT} did not answer"
    )


def test_an_object_no_operator_reported_on_says_so() -> None:
    [note] = status_notes(summarize("Agent", SILENT), WHAT, None)
    assert note.tone == "progress"
    assert "has no Ready condition yet" in note.message and "kaos system status" in note.message
