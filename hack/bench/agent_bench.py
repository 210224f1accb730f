"""What the agent runtime costs a turn: the same turns sent to the model directly and through
``kaos-agent``, side by side, so every row has the direct call as its floor.

One development model (``kaos-devmodel``: it answers at once, so what is measured is the
runtime, not a model) serves five agents, all started at the beginning: memory off, memory
local, memory remote (a ``kaos-memory`` in local storage mode, recall at agent level before
the run and a write after it, before the answer as by default), the same with the write after
the answer (an Agent's ``writeAfterAnswer``) and tools on (memory off, one ``kaos-mcp`` tool
offered).
Rows:

- fresh: a new ``X-Session-Id`` every turn, one client; direct and agent requests alternate
  (the order flips every turn) so both see the same machine; a warm-up is discarded.
- first chunk: the same with ``stream: true``, timed to the first chunk with content.
- client history N: memory off, the client sends its own history of N messages.
- c8: 8 clients on fresh sessions, direct then agent; turns/s and CPU per turn.
- replay: one session for ``--turns`` turns; the agent replays its window to the model.
  Before every agent turn the development model's request log is cleared, and afterwards the
  request the agent sent is read from it and sent again directly: the direct call carries
  exactly the history the agent replayed, and its length is known. The local agent's token
  budget holds the whole session; the memory service keeps its default window and folds.

CPU is the agent process's own counters (``/proc/<pid>/stat``) over a row, per turn: the
agent is idle while the model answers directly. Growth per message is a least-squares slope
of the agent's overhead over the direct call against the history length: per replayed turn,
and over the client-history rows' p50s.
Run: ``hack/bench/agent [--turns N] [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import cpu_seconds, devmodel, memory_service, metrics, percentile  # noqa: E402
from kaos_agent.mcp_runtime.settings import McpSettings  # noqa: E402

from tests.fixtures.agent import agent_env  # noqa: E402
from tests.support.devmodel import DevModel  # noqa: E402
from tests.support.procs import ServiceProcess, console_script, free_port, start_service  # noqa: E402

INSTRUCTIONS = "You are a helpful assistant."
PRINCIPAL = {"X-Principal": "bench-user"}
TOOLS = '''
def forecast(city: str) -> str:
    """Weather forecast for a city."""
    return f"sunny in {city}"
'''
AGENTS = {
    "off": "memory off",
    "local": "memory local",
    "remote": "memory remote",
    "after": "remote, write after",
    "tools": "tools on",
}
HISTORY_SIZES = (0, 150, 300, 600)
CLIENTS = 8
Body = dict[str, Any]


def rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1024


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ``ys`` against ``xs``; NaN when ``xs`` do not vary."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    return sxy / sxx if sxx else math.nan


def question(i: int) -> Body:
    text = f"turn {i}: what should I pack for a weekend hike in the hills near town?"
    return {"role": "user", "content": text}


def history(n: int) -> list[Body]:
    """``n`` messages of an earlier conversation, user and assistant in turn."""
    asked = [question(i // 2) for i in range(n)]
    return [
        m if i % 2 == 0 else {"role": "assistant", "content": "Echo: " + m["content"]}
        for i, m in enumerate(asked)
    ]


def bodies(messages: list[Body], stream: bool = False) -> tuple[Body, Body]:
    """The request to the model directly (with the agent's instructions) and to the agent."""
    agent = {"model": "devmodel", "messages": messages, "stream": stream}
    system = {"role": "system", "content": INSTRUCTIONS}
    return {**agent, "messages": [system, *messages]}, agent


@dataclass
class Row:
    """One row: latencies in seconds of both sides, their wall time, the agent's CPU."""

    name: str
    direct: list[float] = field(default_factory=list)
    agent: list[float] = field(default_factory=list)
    direct_wall: float = 0.0
    agent_wall: float = 0.0
    agent_cpu: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)

    def figures(self) -> dict[str, Any]:
        d50, d99 = (percentile(self.direct, q) * 1000 for q in (0.5, 0.99))
        a50, a95, a99 = (percentile(self.agent, q) * 1000 for q in (0.5, 0.95, 0.99))
        turns = len(self.agent)
        return {
            "row": self.name,
            "turns": turns,
            "direct_p50_ms": d50,
            "direct_p99_ms": d99,
            "agent_p50_ms": a50,
            "agent_p95_ms": a95,
            "agent_p99_ms": a99,
            "overhead_p50_ms": a50 - d50,
            "overhead_p99_ms": a99 - d99,
            "ratio_p50": a50 / d50,
            "ratio_p99": a99 / d99,
            "direct_turns_s": len(self.direct) / self.direct_wall,
            "agent_turns_s": turns / self.agent_wall,
            "agent_cpu_ms_turn": self.agent_cpu / turns * 1000,
            **self.extra,
        }


@dataclass
class Bench:
    http: aiohttp.ClientSession
    model: ServiceProcess
    agents: dict[str, ServiceProcess]
    # The process beside an agent whose CPU is shown too: the memory service, the MCP server.
    helpers: dict[str, int]
    warmup: int

    @property
    def direct_url(self) -> str:
        return f"{self.model.url}/v1/chat/completions"

    def agent_url(self, agent: str) -> str:
        return f"{self.agents[agent].url}/v1/chat/completions"

    async def post(self, url: str, body: Body, headers: dict[str, str]) -> tuple[float, float]:
        """Seconds until the whole answer was read (twice: what is measured, and the turn)."""
        started = time.perf_counter()
        async with self.http.post(url, json=body, headers=headers) as resp:
            text = await resp.read()
            if resp.status != 200:
                raise RuntimeError(f"{url}: HTTP {resp.status}: {text[:300]!r}")
        took = time.perf_counter() - started
        return took, took

    async def first_chunk(
        self, url: str, body: Body, headers: dict[str, str]
    ) -> tuple[float, float]:
        """Seconds until the first streamed chunk whose delta has content, and until the end."""
        started = time.perf_counter()
        first = math.nan
        async with self.http.post(url, json=body, headers=headers) as resp:
            if resp.status != 200:
                raise RuntimeError(f"{url}: HTTP {resp.status}: {await resp.text()}")
            async for raw in resp.content:
                line = raw.strip()
                if math.isnan(first) and line.startswith(b"data: {"):
                    choices = json.loads(line[6:]).get("choices") or [{}]
                    if choices[0].get("delta", {}).get("content"):
                        first = time.perf_counter() - started
        return first, time.perf_counter() - started

    def cpu(self, agent: str) -> tuple[float, float]:
        """CPU seconds so far of the agent and of the service beside it (none: 0)."""
        helper = self.helpers.get(agent)
        return cpu_seconds(self.agents[agent].proc.pid), cpu_seconds(helper) if helper else 0.0

    def charge(self, row: Row, agent: str, before: tuple[float, float]) -> None:
        """The row's CPU: what the agent (and the service beside it) spent since ``before``."""
        after = self.cpu(agent)
        row.agent_cpu = after[0] - before[0]
        if agent in self.helpers:
            row.extra["helper_cpu_ms_turn"] = (after[1] - before[1]) / len(row.agent) * 1000

    def session(self, name: str) -> dict[str, str]:
        return {**PRINCIPAL, "X-Session-Id": f"{name}-{uuid.uuid4().hex}"}

    async def fresh(self, name: str, agent: str, turns: int, **kw: Any) -> Row:
        """``turns`` single-client turns, each in a new session, direct and agent alternating."""
        stream, past = bool(kw.get("stream")), history(kw.get("history", 0))
        call = self.first_chunk if stream else self.post
        row, before = Row(name), self.cpu(agent)
        for i in range(self.warmup + turns):
            if i == self.warmup:
                before = self.cpu(agent)
            direct, body = bodies([*past, question(i)], stream)
            hdrs = self.session(name)
            sides = [
                (row.direct, self.direct_url, direct),
                (row.agent, self.agent_url(agent), body),
            ]
            for out, url, doc in sides if i % 2 else reversed(sides):
                measured, total = await call(url, doc, hdrs)
                if i >= self.warmup:
                    out.append(measured)
                    if out is row.agent:
                        row.agent_wall += total
                    else:
                        row.direct_wall += total
        self.charge(row, agent, before)
        return row

    async def concurrent(self, name: str, agent: str, turns: int) -> Row:
        """``turns`` fresh turns from ``CLIENTS`` clients, direct first, then the agent."""
        row = Row(name)

        async def side(to_agent: bool, out: list[float]) -> float:
            turn = iter(range(turns))

            async def client() -> None:
                for i in turn:
                    body = bodies([question(i)])[to_agent]
                    url = self.agent_url(agent) if to_agent else self.direct_url
                    out.append((await self.post(url, body, self.session(name)))[0])

            started = time.perf_counter()
            await asyncio.gather(*(client() for _ in range(CLIENTS)))
            return time.perf_counter() - started

        model_cpu = cpu_seconds(self.model.proc.pid)
        row.direct_wall = await side(False, row.direct)
        model_cpu = cpu_seconds(self.model.proc.pid) - model_cpu
        row.extra["model_cpu_ms_turn"] = model_cpu / turns * 1000
        before = self.cpu(agent)
        row.agent_wall = await side(True, row.agent)
        self.charge(row, agent, before)
        return row

    async def replay(self, name: str, agent: str, turns: int) -> tuple[Row, float, float]:
        """One session for ``turns`` turns; the row, and the slopes in ms per replayed message
        of the agent's overhead and of the direct call itself."""
        row, before, hdrs, replayed = Row(name), self.cpu(agent), self.session(name), []
        for i in range(turns):
            async with self.http.post(f"{self.model.url}/control/reset", json={}) as resp:
                assert resp.status == 200, await resp.text()
            body = bodies([question(i)])[1]
            row.agent.append((await self.post(self.agent_url(agent), body, hdrs))[0])
            async with self.http.get(f"{self.model.url}/control/requests") as resp:
                sent = [r for r in (await resp.json())["requests"] if r["kind"] == "echo"][-1]
            messages = [{"role": m["role"], "content": m["content"]} for m in sent["messages"]]
            replayed.append(sum(m["role"] in ("user", "assistant") for m in messages) - 1.0)
            direct = {"model": "devmodel", "messages": messages}
            row.direct.append((await self.post(self.direct_url, direct, hdrs))[0])
        row.direct_wall, row.agent_wall = sum(row.direct), sum(row.agent)
        self.charge(row, agent, before)
        row.extra["replayed_max"] = max(replayed)
        over = [(a - d) * 1000 for a, d in zip(row.agent, row.direct, strict=True)]
        return row, slope(replayed, over), slope(replayed, [d * 1000 for d in row.direct])


async def memory_time(http: aiohttp.ClientSession, url: str) -> dict[str, float]:
    """The memory service's own request time so far, summed and counted per route."""
    samples = await metrics(http, url)
    out: dict[str, float] = {}
    for route in ("recall", "write"):
        for part in ("sum", "count"):
            prefix = f"kaos_memory_http_request_duration_seconds_{part}{{"
            out[f"{route}_{part}"] = sum(
                v for k, v in samples.items() if k.startswith(prefix) and f'"/v1/{route}"' in k
            )
    return out


async def measure(bench: Bench, turns: int, c8_turns: int) -> dict[str, Any]:
    """Every row, in the table's order: the remote replay last, as it leaves the memory
    service folding in the background."""
    rows: list[Row] = []
    lines: dict[str, float] = {}
    for agent in bench.agents:
        await bench.post(bench.agent_url(agent), bodies([question(-1)])[1], PRINCIPAL)
        lines[f"idle_rss_mib_{agent}"] = rss_mib(bench.agents[agent].proc.pid)
    memory_url = bench.agents["remote"].env["MEMORY_ENDPOINT"]
    remotes = ("remote", "after")
    for agent, label in AGENTS.items():
        before = await memory_time(bench.http, memory_url)
        rows.append(await bench.fresh(f"fresh, {label}", agent, turns))
        after = await memory_time(bench.http, memory_url)
        for route in ("recall", "write") if agent in remotes else ():
            count = after[f"{route}_count"] - before[f"{route}_count"]
            spent = after[f"{route}_sum"] - before[f"{route}_sum"]
            rows[-1].extra[f"memory_{route}_mean_ms"] = spent / count * 1000 if count else math.nan
    rows.append(await bench.fresh("first chunk, memory off", "off", turns, stream=True))
    for n in HISTORY_SIZES:
        rows.append(await bench.fresh(f"client history {n}", "off", turns // 2, history=n))
    for agent, label in AGENTS.items():
        rows.append(await bench.concurrent(f"c8, {label}", agent, c8_turns))
    for agent in ("local", "remote"):
        row, grows, direct = await bench.replay(f"replay, {AGENTS[agent]}", agent, turns)
        rows.append(row)
        lines[f"{agent}_growth_ms_msg"], lines[f"{agent}_direct_ms_msg"] = grows, direct
    figures = {r.name: r.figures() for r in rows}
    xs = [float(n) for n in HISTORY_SIZES]
    sent = [figures[f"client history {n}"] for n in HISTORY_SIZES]
    lines["client_growth_ms_msg"] = slope(xs, [h["overhead_p50_ms"] for h in sent])
    lines["client_direct_ms_msg"] = slope(xs, [h["direct_p50_ms"] for h in sent])
    for agent in bench.agents:
        lines[f"after_rss_mib_{agent}"] = rss_mib(bench.agents[agent].proc.pid)
    return {"rows": figures, "lines": lines}


def start_all(model: ServiceProcess, root: Path, started: list[ServiceProcess]) -> None:
    """The memory service, the tool server and the five agents (in ``AGENTS``' order), each
    added to ``started`` once it answers."""
    memory_env = {
        "KAOS_MEMORY_STORAGE": "local",
        "KAOS_MEMORY_DATA_DIR": str(root / "memory"),
        "KAOS_MEMORY_COLLECTION": "kaos_bench_agent",
        "KAOS_MEMORY_MODEL_BASE_URL": f"{model.url}/v1",
        "KAOS_MEMORY_EMBEDDING_DIMS": "64",
    }
    started.append(memory_service("agent-bench", memory_env, root))
    port = free_port()
    tools_env = {**dict.fromkeys(McpSettings.env_names(), ""), "MCP_TOOLS_STRING": TOOLS}
    tools_env.update(MCP_HOST="127.0.0.1", MCP_PORT=str(port))
    mcp = [console_script("kaos-mcp")]
    started.append(start_service("mcp", mcp, port=port, env=tools_env, log_dir=root))
    remote = {
        "MEMORY_TYPE": "remote",
        "MEMORY_ENDPOINT": started[0].url,
        "AGENT_IDENTITY": "kaos://agent/bench/remote",
        "MEMORY_MAX_READ_SCOPE": "agent",
    }
    configs = {
        "off": {"MEMORY_TYPE": "none"},
        # Large enough for the whole replayed session: its growth is what is measured.
        "local": {"MEMORY_TYPE": "local", "MEMORY_TOKEN_BUDGET": "1000000"},
        "remote": remote,
        "after": {
            **remote,
            "AGENT_IDENTITY": "kaos://agent/bench/after",
            "MEMORY_WRITE_AFTER_ANSWER": "true",
        },
        "tools": {"MEMORY_TYPE": "none", "MCP_SERVERS": f"tools:{started[1].url}"},
    }
    for name, extra in configs.items():
        port = free_port()
        env = agent_env(DevModel(url=model.url), port, f"bench-{name}", **extra)
        env["AGENT_INSTRUCTIONS"] = INSTRUCTIONS
        agent = [console_script("kaos-agent")]
        started.append(start_service(f"agent-{name}", agent, port=port, env=env, log_dir=root))


def run(turns: int, c8_turns: int, warmup: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="kaos-bench-agent-"))
    started: list[ServiceProcess] = []
    try:
        with devmodel(64) as model:
            try:
                start_all(model, root, started)
                agents = dict(zip(AGENTS, started[2:], strict=True))
                memory_pid, tools_pid = started[0].proc.pid, started[1].proc.pid
                helpers = {"remote": memory_pid, "after": memory_pid, "tools": tools_pid}

                async def main() -> dict[str, Any]:
                    timeout = aiohttp.ClientTimeout(total=120)
                    async with aiohttp.ClientSession(timeout=timeout) as http:
                        bench = Bench(http, model, agents, helpers, warmup)
                        return await measure(bench, turns, c8_turns)

                return asyncio.run(main())
            finally:
                for svc in reversed(started):
                    svc.stop(timeout=30)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def print_report(doc: dict[str, Any]) -> None:
    rows, lines = doc["rows"], doc["lines"]
    head = (
        f"{'row':<28}{'turns':>6}{'dir p50':>9}{'ag p50':>9}{'ag p95':>9}{'ag p99':>9}"
        f"{'+p50':>8}{'+p99':>8}{'x p50':>7}{'x p99':>7}{'dir t/s':>8}{'ag t/s':>7}{'cpu/t':>7}"
    )
    print("the same turns to the model directly (dir) and through kaos-agent (ag)")
    print(head)
    print("-" * len(head))
    for r in rows.values():
        print(
            f"{r['row']:<28}{r['turns']:>6}{r['direct_p50_ms']:>9.2f}{r['agent_p50_ms']:>9.2f}"
            f"{r['agent_p95_ms']:>9.2f}{r['agent_p99_ms']:>9.2f}{r['overhead_p50_ms']:>8.2f}"
            f"{r['overhead_p99_ms']:>8.2f}{r['ratio_p50']:>7.2f}{r['ratio_p99']:>7.2f}"
            f"{r['direct_turns_s']:>8.0f}{r['agent_turns_s']:>7.0f}{r['agent_cpu_ms_turn']:>7.2f}"
        )
    print(
        "(ms; +p50/+p99 = agent - direct; x = agent / direct; t/s = turns per second, of one"
        " client or of all 8 (c8); cpu/t = CPU ms of the agent process per turn; first chunk:"
        " time to the first chunk with content; replay: one session, the direct call carries"
        " the history the agent replayed)"
    )
    base, ttfc, c8 = (
        rows["fresh, memory off"],
        rows["first chunk, memory off"],
        rows["c8, memory off"],
    )
    remote, tools = rows["fresh, memory remote"], rows["fresh, tools on"]
    print()
    print(
        f"overhead, fresh session, memory off, no tools: p50 +{base['overhead_p50_ms']:.2f} ms"
        f" (x{base['ratio_p50']:.2f}), p99 +{base['overhead_p99_ms']:.2f} ms"
        f" (x{base['ratio_p99']:.2f})"
    )
    print(
        f"first chunk: agent p50 {ttfc['agent_p50_ms']:.2f} ms over the model's"
        f" {ttfc['direct_p50_ms']:.2f} ms (x{ttfc['ratio_p50']:.2f})"
    )
    print(
        f"8 clients, memory off: agent {c8['agent_turns_s']:.0f} turns/s (direct"
        f" {c8['direct_turns_s']:.0f}), agent CPU {c8['agent_cpu_ms_turn']:.2f} ms/turn (the"
        f" model's {c8['model_cpu_ms_turn']:.2f} ms/turn)"
    )
    for what, key, upto in (
        ("replayed from local memory", "local", rows["replay, memory local"]["replayed_max"]),
        ("replayed from remote memory", "remote", rows["replay, memory remote"]["replayed_max"]),
        ("sent by the client", "client", HISTORY_SIZES[-1]),
    ):
        print(
            f"growth per message, {what} (0 to {upto:.0f}): {lines[f'{key}_growth_ms_msg']:+.4f}"
            f" ms/message over the direct call (which grows {lines[f'{key}_direct_ms_msg']:+.4f})"
        )
    for row, write in (
        (remote, "before the answer, the default"),
        (rows["fresh, remote, write after"], "after the answer (writeAfterAnswer)"),
    ):
        print(
            f"remote memory, write {write}: overhead p50 +{row['overhead_p50_ms']:.2f} ms"
            f" (x{row['ratio_p50']:.2f}); the memory service's own mean time per turn: recall"
            f" {row['memory_recall_mean_ms']:.2f} ms (before the model call) + write"
            f" {row['memory_write_mean_ms']:.2f} ms (after it), its CPU"
            f" {row['helper_cpu_ms_turn']:.2f} ms/turn"
        )
    print(
        f"tools on, fresh session: overhead p50 +{tools['overhead_p50_ms']:.2f} ms"
        f" (x{tools['ratio_p50']:.2f}); the MCP server's CPU {tools['helper_cpu_ms_turn']:.2f}"
        " ms/turn"
    )
    idle = ", ".join(f"{a} {lines[f'idle_rss_mib_{a}']:.1f}" for a in AGENTS)
    after = ", ".join(f"{a} {lines[f'after_rss_mib_{a}']:.1f}" for a in AGENTS)
    print(f"resident memory (VmRSS, MiB) of an idle agent after one turn: {idle}")
    print(f"  and after the run: {after}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300, help="measured turns per row")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 20 turns per row")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    turns = 20 if args.quick else args.turns
    if turns < 20:
        parser.error("--turns must be at least 20")
    doc = run(turns, 4 * turns, 3 if args.quick else 20)
    print_report(doc)
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
