"""What the encryption tests share: a Secret-style KEK directory, one owner's memory written
through every tier, and reading it back through the API only."""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from kaos_memory.crypto.kek import new_kek_version

from tests.fixtures.memory import MemoryServer
from tests.support.memory_http import (
    AGENT_A,
    call,
    eventually,
    headers,
    list_all,
    seed_facts,
)
from tests.support.pg_instance import PG_BIN

# Small windows: every write folds, so digests and facts follow within a few turns.
SETTINGS = {
    "token_budget": 200,
    "max_read_scope": "user",
    "idle_flush_seconds": 0,
    "sweep_interval": 0.5,
}


def make_kek(root: Path, version: str = "v1") -> Path:
    """A KEK directory as a mounted Secret holds it: one version, current."""
    root.mkdir(parents=True, exist_ok=True)
    (root / version).write_text(new_kek_version())
    (root / "current").write_text(version)
    return root


def rotate_kek(root: Path, version: str) -> None:
    """Add a version and make it current (what rotating the Secret does)."""
    (root / version).write_text(new_kek_version())
    (root / "current").write_text(version)


@dataclass(frozen=True)
class Owner:
    """One principal's memory: its markers in the window, in folded turns (digest and
    facts) and the identity it writes with."""

    principal: str
    session: str
    folded: tuple[str, ...]
    window: str

    @property
    def ident(self) -> dict[str, str]:
        return headers(agent=AGENT_A, principal=self.principal, session=self.session)

    @property
    def markers(self) -> list[str]:
        return [*self.folded, self.window]


def owner(name: str) -> Owner:
    tag = uuid.uuid4().hex[:8]
    return Owner(
        principal=f"{name}-{tag}",
        session=f"s-{name}-{tag}",
        folded=(f"mk{name}x{tag}one", f"mk{name}x{tag}two"),
        window=f"mk{name}x{tag}win",
    )


async def write_memory(server: MemoryServer, who: Owner) -> None:
    """Write ``who``'s turns and wait until its facts are extracted and a digest exists."""
    await seed_facts(server.url, who.ident, list(who.folded), infer=True)
    status, doc, _ = await call(
        server.url,
        "/v1/write",
        {"turns": [{"role": "user", "content": f"and then {who.window}"}], "infer": True},
        hdrs=who.ident,
    )
    assert status in (200, 202), doc

    await eventually(
        lambda: readable(server, who),
        lambda seen: seen == who.markers,
        within=90,
        what=f"{who.principal}'s memory in the window and digest",
    )
    await eventually(
        lambda: fact_text(server, who),
        lambda text: all(m in text for m in who.folded),
        within=90,
        what=f"{who.principal}'s facts extracted",
    )


async def fact_text(server: MemoryServer, who: Owner) -> str:
    return json.dumps(await list_all(server.url, who.ident, "user"))


async def recall_text(server: MemoryServer, who: Owner) -> str:
    """Everything a session-level recall and a user-level listing give ``who``."""
    status, doc, _ = await call(
        server.url,
        "/v1/recall",
        {"level": "session", "query": " ".join(who.markers)},
        hdrs=who.ident,
    )
    assert status == 200, doc
    assert doc["degraded"] is False, doc
    facts = await list_all(server.url, who.ident, "user")
    return json.dumps(doc) + json.dumps(facts)


async def readable(server: MemoryServer, who: Owner) -> list[str]:
    """The markers of ``who`` the API gives back."""
    text = await recall_text(server, who)
    return [m for m in who.markers if m in text]


def fact_rows(server: MemoryServer, who: Owner) -> list[dict[str, object]]:
    """The vector store's rows of ``who``'s facts, as stored (read past the service)."""
    return [p for p in server.db.vector_payloads() if p.get("user_id") == who.principal]


def pg_tool(tool: str, *args: str) -> None:
    """Run one of PostgreSQL's client programs (``pg_dump``, ``pg_restore``, ...)."""
    done = subprocess.run(
        [str(PG_BIN / tool), *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{tool}: {done.stdout}{done.stderr}"


def files_with(root: Path, markers: list[str]) -> dict[str, list[str]]:
    """Every file under ``root`` whose bytes hold one of ``markers``."""
    hits: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        found = [m for m in markers if m.encode() in data]
        if found:
            hits[str(path.relative_to(root))] = found
    return hits
