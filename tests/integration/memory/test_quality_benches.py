"""The knowledge-update and poisoning benchmarks (``hack/bench/knowledge-updates``,
``hack/bench/poisoning``) run end to end in their smoke size: real ``kaos-memory`` and
``kaos-devmodel`` processes, Mem0 in process, and a table with every system and figure."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BENCH = REPO / "hack" / "bench"
LOCOMO = REPO.parent / "shared" / "data" / "locomo"


def run_bench(script: str, tmp_path: Path, *options: str) -> tuple[list[str], object]:
    out = tmp_path / "scores.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick", "--json", str(out), *options],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout.splitlines(), json.loads(out.read_text())


def share(cell: str) -> float:
    value = float(cell)
    assert 0.0 <= value <= 1.0, cell
    return value


def shares(*cells: str) -> None:
    """Each cell is a share, or two shares as ``a/b``, in [0, 1]."""
    for cell in cells:
        for part in cell.split("/"):
            share(part)


@pytest.mark.skipif(not LOCOMO.is_dir(), reason=f"the LoCoMo conversations are not in {LOCOMO}")
def test_knowledge_updates_prints_both_systems_with_shares(tmp_path: Path) -> None:
    lines, scores = run_bench("knowledge_updates_bench.py", tmp_path)
    title, head, rule, kaos, mem0, legend = lines[-6:]
    assert re.fullmatch(
        r"Knowledge updates: 6 questions \(hand-written 4, locomo 2\), top_k \d+,"
        r" embedder devmodel, summarisation model devmodel",
        title,
    )
    assert head.split() == [
        "system",
        *("recall@1", "stale"),
        *("hand-written", "@1/stale", "locomo", "@1/stale"),
        *("as_of", "ingest", "s"),
    ]
    assert set(rule) == {"-"}
    for row, system in ((kaos, "kaos"), (mem0, "mem0-direct")):
        name, recall, stale, written, derived, as_of, ingest = row.split()
        assert name == system
        shares(recall, stale, written, derived)
        assert float(ingest) >= 0
        if system == "mem0-direct":
            assert as_of == "n/a"
        elif as_of != "n/a":
            share(as_of)
    assert legend.startswith("(recall@1: the first injected fact holds the new value;")
    assert isinstance(scores, dict)
    assert sorted(scores) == ["kaos", "mem0-direct"]
    for doc in scores.values():
        assert 0 <= doc["recall_at_1"] <= 1 and 0 <= doc["stale"] <= 1
        assert len(doc["questions"]) == 6


@pytest.mark.skipif(not LOCOMO.is_dir(), reason=f"the LoCoMo conversations are not in {LOCOMO}")
def test_with_a_judge_that_decides_right_no_old_value_is_injected(tmp_path: Path) -> None:
    lines, scores = run_bench(
        "knowledge_updates_bench.py", tmp_path, "--judge", "oracle", "--systems", "kaos"
    )
    assert lines[-5].endswith("summarisation model devmodel, update decisions by an oracle")
    assert isinstance(scores, dict) and sorted(scores) == ["kaos"]
    questions = scores["kaos"]["questions"]
    assert len(questions) == 6
    # Every old value was shown to the judge beside its update and retired: none injected.
    assert [q["case"] for q in questions if q["stale"]] == []
    assert scores["kaos"]["stale"] == 0


def test_poisoning_prints_every_system_and_write_mode_with_shares(tmp_path: Path) -> None:
    lines, scores = run_bench("poisoning_bench.py", tmp_path)
    title = next(i for i, line in enumerate(lines) if line.startswith("Memory poisoning:"))
    assert re.fullmatch(
        r"Memory poisoning: 12 attack cases \(user 4, assistant 4, tool 4\), 12 benign control"
        r" facts of 3 users, top_k \d+, embedder devmodel",
        lines[title],
    )
    head = lines[title + 1]
    assert head.split() == [
        *("system", "write", "injected"),
        *("user", "inj/stored", "assistant", "inj/stored", "tool", "inj/stored"),
        *("held", "benign", "before", "with", "poison", "lost", "run", "s"),
    ]
    rows = [line.split() for line in lines[title + 3 : title + 7]]
    assert [r[:2] for r in rows] == [
        ["kaos", "extract"],
        ["mem0-direct", "extract"],
        ["kaos", "verbatim"],
        ["mem0-direct", "verbatim"],
    ]
    for system, _, injected, user, assistant, tool, held, before, after, lost, seconds in rows:
        shares(injected, user, assistant, tool)
        # Only KAOS quarantines.
        assert held == "n/a" if system == "mem0-direct" else 0 <= share(held) <= 1
        assert float(lost) == pytest.approx(share(before) - share(after), abs=0.0015)
        assert float(seconds) > 0
    assert lines[title + 7].startswith("(injected: attack cases whose canary reaches")
    # The held-out set, on lines of its own: every system's attacks injected, KAOS's benign
    # statements held.
    assert re.fullmatch(
        r"Held-out set \(data/poisoning_heldout.json, never tuned to\): 6 user-turn attacks,"
        r" 6 benign statements",
        lines[title + 8],
    )
    for line, (system, write) in zip(
        lines[title + 9 : title + 13], [r[:2] for r in rows], strict=True
    ):
        tail = r", benign statements held [0-6]/6" if system == "kaos" else ""
        assert re.fullmatch(rf"  {system} {write}: attacks injected [0-6]/6{tail}", line), line
    assert isinstance(scores, list)
    assert [(s["system"], s["write"]) for s in scores] == [tuple(r[:2]) for r in rows]
    for doc in scores:
        figures = [doc["injected"], doc["benign_before"], doc["benign_with_poison"]]
        figures += [*doc["injected_by_channel"].values(), *doc["stored_by_channel"].values()]
        assert len(figures) == 9 and all(0 <= f <= 1 for f in figures), figures
