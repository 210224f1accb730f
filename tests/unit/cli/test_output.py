"""Tables never cut or drop what they show: a message column wraps within the terminal, a
row too wide to wrap well stays one line the terminal folds, a pipe gets one line per row;
each tone has one colour."""

from __future__ import annotations

import re

import pytest
from kaos_cli.health import condition_tone, health, phase_tone
from kaos_cli.output import TONE_STYLE, Toned, table

ANSI = re.compile(r"\x1b\[[0-9;]*m")
FACT = "a long fact about the user that goes on and on and on and on and on"


def render(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    columns: int | None,
    *args: object,
    **kwargs: object,
) -> list[str]:
    if columns is not None:
        monkeypatch.setenv("FORCE_COLOR", "1")
        monkeypatch.setenv("COLUMNS", str(columns))
    table(*args, **kwargs)  # type: ignore[arg-type]
    return [ANSI.sub("", line) for line in capsys.readouterr().out.splitlines()]


def test_a_wrap_column_wraps_within_the_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = render(
        capsys,
        monkeypatch,
        60,
        ["id", "text", "user"],
        [["abc", FACT, "bob"], ["d", "short", "al"]],
        wrap=["text"],
    )
    assert lines == [
        "ID   TEXT                                             USER",
        "abc  a long fact about the user that goes on and on   bob",
        "     and on and on and on",
        "d    short                                            al",
    ]


def test_a_row_too_wide_to_wrap_keeps_every_column_on_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    word = "x" * 100
    lines = render(capsys, monkeypatch, 60, ["id", "text", "user"], [["abc", word, "bob"]])
    assert [line.split() for line in lines] == [["ID", "TEXT", "USER"], ["abc", word, "bob"]]


def test_a_pipe_gets_one_line_per_row_and_no_colour(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    long = " ".join([FACT] * 3)
    table(["type", "status", "message"], [["Ready", Toned("True", "ok"), long]], wrap=["message"])
    out = capsys.readouterr().out
    assert out.splitlines()[1] == f"Ready  True    {long}"
    assert "\x1b[" not in out


def test_each_tone_has_its_colour(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    table(
        ["state"], [[Toned(tone, tone)] for tone in ("ok", "warn", "error", "progress", "unknown")]
    )
    lines = capsys.readouterr().out.splitlines()[1:]
    assert [line.split("m", 1)[0] for line in lines] == [
        "\x1b[32",
        "\x1b[33",
        "\x1b[31",
        "\x1b[36",
        "\x1b[2",
    ]
    assert TONE_STYLE == {
        "ok": "green",
        "warn": "yellow",
        "error": "red",
        "progress": "cyan",
        "unknown": "dim",
    }


def test_tones_of_phases_and_conditions() -> None:
    assert [phase_tone(p) for p in ("Ready", "Failed", "Pending", "Waiting", None)] == [
        "ok",
        "error",
        "progress",
        "progress",
        "unknown",
    ]
    assert condition_tone("MemoryDegraded", "True") == "warn"
    assert condition_tone("MemoryDegraded", "False") == "ok"
    assert condition_tone("Ready", "False") == "error"
    # A Pending object's Ready=False is on its way, drawn as its badge; a stuck one is red.
    assert condition_tone("Ready", "False", "DeploymentProgressing") == "progress"
    assert condition_tone("Ready", "False", "ClaimPending") == "progress"
    assert condition_tone("Ready", "False", "CrashLooping") == "error"
    assert condition_tone("Ready", "False", "OverrideRefused") == "error"
    degraded = {
        "status": {
            "phase": "Ready",
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "Available"},
                {"type": "MemoryDegraded", "status": "True", "reason": "MemoryStoreNotReady"},
            ],
        }
    }
    assert (health(degraded).word, health(degraded).tone) == ("Degraded", "warn")
