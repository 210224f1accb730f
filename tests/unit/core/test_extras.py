"""The per-image extras install only what their image needs.

Dependency sets are computed from the *installed* distributions' metadata (what the
resolver actually put in this environment, at the versions it chose), walking
``Requires-Dist`` transitively with each requirement's markers evaluated, so a heavy
package pulled in through some intermediate dependency is caught too.
"""

from __future__ import annotations

import importlib.metadata as md
import re
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PROJECT = "kaos"


def _closure(root: str, extras: frozenset[str]) -> set[str]:
    """Canonical names of every distribution ``root[extras]`` needs, transitively."""
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    stack = [(canonicalize_name(root), extras)]
    while stack:
        name, wanted = stack.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        names.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            # A requirement whose marker selects it must be installed; one that is
            # missing was never resolved, which the assertions below would hide.
            raise AssertionError(f"{name} is required but not installed") from None
        for line in requires:
            req = Requirement(line)
            if req.marker is not None:
                envs = [{**default_environment(), "extra": e} for e in (wanted or {""})]
                if not any(req.marker.evaluate(env) for env in envs):
                    continue
            stack.append((canonicalize_name(req.name), frozenset(req.extras)))
    return names


HEAVY = {"mem0ai", "chromadb", "psycopg", "kubernetes-asyncio", "pydantic-ai-slim", "torch"}
# The command line's own libraries: only the `cli` extra brings them.
CLI = {"click", "rich"}


@pytest.mark.parametrize(
    ("extra", "forbidden"),
    [
        ("", HEAVY | CLI),
        ("cli", HEAVY),
        ("memory", {"pydantic-ai-slim", "kubernetes-asyncio", "torch"}),
        (
            "agent",
            {"mem0ai", "chromadb", "psycopg", "psycopg-binary", "kubernetes-asyncio", "torch"},
        ),
        ("operator", {"mem0ai", "chromadb", "pydantic-ai-slim", "pydantic-ai", "torch"} | CLI),
    ],
)
def test_extra_brings_only_its_image_dependencies(extra: str, forbidden: set[str]) -> None:
    closure = _closure(PROJECT, frozenset({extra}) if extra else frozenset())
    assert not (closure & forbidden), f"kaos[{extra}] pulls in {sorted(closure & forbidden)}"


@pytest.mark.parametrize(
    ("extra", "required"),
    [
        ("", {"aiohttp", "pydantic", "prometheus-client"}),
        ("memory", {"mem0ai", "chromadb", "psycopg", "psycopg-pool", "pgvector"}),
        ("agent", {"pydantic-ai-slim", "mcp", "a2a-sdk", "openai"}),
        ("operator", {"kubernetes-asyncio"}),
        ("cli", CLI),
    ],
)
def test_extra_brings_what_its_image_runs_on(extra: str, required: set[str]) -> None:
    closure = _closure(PROJECT, frozenset({extra}) if extra else frozenset())
    assert required <= closure, f"kaos[{extra}] lacks {sorted(required - closure)}"


def test_no_extra_needs_torch() -> None:
    everything = _closure(PROJECT, frozenset({"memory", "agent", "operator"}))
    assert "torch" not in everything


def test_no_image_installs_the_cli_extra() -> None:
    """The images install their own extra only; the memory and agent images get click and
    rich through their libraries (chromadb, mcp), never through `kaos[cli]`."""
    root = Path(__file__).resolve().parents[3]
    dockerfiles = [root / "Dockerfile.base", *sorted((root / "images").glob("*/Dockerfile"))]
    assert len(dockerfiles) >= 4
    for dockerfile in dockerfiles:
        installs = re.findall(r"kaos\[([a-z,]+)\]", dockerfile.read_text())
        assert all("cli" not in extras.split(",") for extras in installs), dockerfile
