"""Load and audit for the multi-replica tests: many sessions written through many replicas,
then the database checked against the consolidation invariants.

Every user turn is a unique one-line sentence, and the development model extracts exactly
one fact per user line with the line as its text, so the facts Mem0 must hold are known
from the turns alone: each folded user turn, once, tagged with the fold that evicted it.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.memory import MemoryServer
from tests.support.memory import MemoryDb
from tests.support.memory_http import eventually

AGENT = "kaos://agent/load/writer"
COLOURS = ("amber", "blue", "crimson", "denim", "emerald", "fuchsia", "gold", "hazel")


def session_name(index: int) -> str:
    return f"load-{index:03d}"


def user_text(session: str, n: int) -> str:
    return f"In {session} fact {n} says the colour is {COLOURS[n % len(COLOURS)]}"


@dataclass
class LoadResult:
    writes: int = 0
    turns: int = 0
    failures: list[str] = field(default_factory=list)
    answered: set[str] = field(default_factory=set)  # user texts answered 2xx with accepted


async def write_pair(
    http: aiohttp.ClientSession,
    url: str,
    session: str,
    principal: str,
    n: int,
    result: LoadResult,
    *,
    failure_mode: str | None = None,
    agent: str = AGENT,
) -> int:
    text = user_text(session, n)
    body: dict[str, Any] = {
        "turns": [
            {"role": "user", "content": text},
            {"role": "assistant", "content": f"Noted fact {n}."},
        ],
        "infer": True,
    }
    if failure_mode is not None:
        body["failure_mode"] = failure_mode
    hdrs = {"X-Session-Id": session, "X-Principal": principal, "X-Agent-Identity": agent}
    try:
        async with http.post(f"{url}/v1/write", json=body, headers=hdrs) as resp:
            doc = await resp.json(content_type=None)
            status = resp.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        result.failures.append(f"{session}#{n}: {type(exc).__name__}")
        return 0
    if status in (200, 202) and doc.get("accepted") == 2 and not doc.get("degraded"):
        result.writes += 1
        result.turns += 2
        result.answered.add(text)
    else:
        result.failures.append(f"{session}#{n}: HTTP {status} {doc}")
    return status


async def drive(
    urls: Sequence[str],
    *,
    sessions: int,
    pairs_per_session: int,
    start: int = 0,
    concurrent_per_session: int = 2,
    agents_per_session: int = 1,
    pace: float = 0.0,
) -> LoadResult:
    """Every session writes ``pairs_per_session`` user+assistant pairs, all sessions at
    once; a session's writes go round-robin over the replicas, ``concurrent_per_session``
    at a time, so one session is written on several replicas concurrently. With several
    agents per session (one principal's conversation with several agents, as delegation
    makes), a fold holds turns of each: one Mem0 add per agent.
    ``pace`` spaces a session's batches (seconds) to stretch a burst over time."""
    result = LoadResult()
    connector = aiohttp.TCPConnector(limit=256)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:

        async def one_session(si: int) -> None:
            name = session_name(si)
            for base in range(start, start + pairs_per_session, concurrent_per_session):
                batch = range(base, min(base + concurrent_per_session, start + pairs_per_session))
                await asyncio.gather(
                    *(
                        write_pair(
                            http,
                            urls[(si + n) % len(urls)],
                            name,
                            f"user-{si % 7}",
                            n,
                            result,
                            agent=f"{AGENT}-{n % agents_per_session}",
                        )
                        for n in batch
                    )
                )
                if pace:
                    await asyncio.sleep(pace)  # load shape, not synchronisation

        await asyncio.gather(*(one_session(i) for i in range(sessions)))
    return result


async def metric_values(url: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    async with aiohttp.ClientSession() as http, http.get(f"{url}/metrics") as resp:
        text = await resp.text()
    out: dict[tuple[tuple[str, str], ...], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out[tuple(sorted(sample.labels.items()))] = sample.value
    return out


async def idle(server: MemoryServer) -> bool:
    depth = await metric_values(server.url, "kaos_memory_executor_queue_depth")
    running = await metric_values(server.url, "kaos_memory_executor_in_flight")
    return sum(depth.values()) == 0 and sum(running.values()) == 0


async def settle(
    db: MemoryDb, servers: Sequence[MemoryServer], *, trigger: int, within: float
) -> None:
    """Wait until no consolidation is left anywhere: the outbox is empty, no session's
    window is past the fold trigger, and every replica's executor is idle."""

    async def state() -> dict[str, Any]:
        over = db.relational(
            "SELECT key FROM kaos_mem_turns WHERE folded_by IS NULL GROUP BY key"
            " HAVING SUM(tokens) > %s",
            (trigger,),
        )
        idles = [await idle(s) for s in servers]
        return {"outbox": db.outbox_depth(), "over_trigger": len(over), "idle": idles}

    await eventually(
        state,
        lambda s: s["outbox"] == 0 and s["over_trigger"] == 0 and all(s["idle"]),
        within=within,
        what="consolidation settling",
    )


@dataclass
class Audit:
    turns: int
    folded: int
    folds: int
    digests: int
    facts: int
    sessions: int


def audit(db: MemoryDb, *, trigger: int, expect_single_attempt: bool) -> Audit:
    """Check the consolidation invariants from the database alone; the figures."""
    turns = db.relational(
        "SELECT seq, key, role, content, tokens, folded_by FROM kaos_mem_turns ORDER BY seq"
    )
    if db.kek_dir is not None:  # sealed: the texts as the service reads them
        opened = {t["seq"]: t["content"] for t in db.turns()}
        turns = [(s, k, r, opened[s], t, f) for s, k, r, _c, t, f in turns]
    folds = {f["id"]: f for f in db.folds()}
    by_fold: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    unfolded_tokens: Counter[str] = Counter()
    for row in turns:
        seq, key, _role, _content, tokens, folded_by = row
        if folded_by is None:
            unfolded_tokens[key] += tokens
            continue
        assert folded_by in folds, f"turn {seq} names fold {folded_by}, which does not exist"
        assert folds[folded_by]["key"] == key, f"turn {seq} folded into another session"
        by_fold[folded_by].append(row)
    # Every turn is in its window or in exactly one fold (folded_by is single-valued), and
    # each fold covers exactly the turns it recorded.
    for fold_id, fold in folds.items():
        assert len(by_fold[fold_id]) == fold["turns"], f"fold {fold_id} lost or gained turns"
        assert fold["digest_status"] == "done", fold
        assert fold["extraction_status"] == "done", fold
        if expect_single_attempt:
            assert fold["extraction_attempts"] == 1, f"fold {fold_id} extracted twice: {fold}"
    # The window left is within the fold trigger: every fold that was due happened.
    assert all(t <= trigger for t in unfolded_tokens.values()), unfolded_tokens.most_common(3)

    # Digest versions per session: gapless from 1, and folds digest in fold order.
    versions: dict[str, list[int]] = defaultdict(list)
    for d in db.digests():
        versions[d["key"]].append(d["version"])
    for key, vs in versions.items():
        assert vs == list(range(1, len(vs) + 1)), f"{key}: digest versions {vs}"
    per_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for fold in folds.values():
        per_key[fold["key"]].append(fold)
    for key, key_folds in per_key.items():
        digested = [f["digest_version"] for f in sorted(key_folds, key=lambda f: f["id"])]
        assert digested == sorted(digested), f"{key}: folds digested out of order {digested}"
        assert set(digested) == set(versions[key]), f"{key}: a version covers no fold"

    # Long-term: each folded user turn is one fact, tagged with its fold, exactly once.
    expected = Counter(
        (content, str(fid))
        for fid, rows in by_fold.items()
        for (_s, _k, role, content, *_) in rows
        if role == "user"
    )
    facts = db.vector_payloads()
    got = Counter((f["data"], str(f.get("kaos_fold"))) for f in facts)
    duplicated = [k for k, n in got.items() if n > 1]
    assert not duplicated, f"{len(duplicated)} facts stored twice, e.g. {duplicated[:3]}"
    missing = expected - got
    extra = got - expected
    assert not missing, f"{len(missing)} facts missing, e.g. {list(missing)[:3]}"
    assert not extra, f"{len(extra)} unexpected facts, e.g. {list(extra)[:3]}"
    return Audit(
        turns=len(turns),
        folded=sum(len(r) for r in by_fold.values()),
        folds=len(folds),
        digests=sum(len(v) for v in versions.values()),
        facts=len(facts),
        sessions=len({r[1] for r in turns}),
    )
