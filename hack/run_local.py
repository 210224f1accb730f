"""The main job (`make run`): the local stack on embedded defaults and a scripted conversation.

Starts the development model server and a memory service in local mode (SQLite + embedded
Chroma in a temporary data dir) on loopback, then plays a conversation through the memory
contract that shows the tiers at work: the short-term window within a session, a digest
after folding, a long-term fact recalled in a new session, isolation between two
principals, and a forget. Prints a transcript and a summary table, stops everything, and
exits 0 (non-zero when a step does not show what it should).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kaos_core.memory.client import MemoryServiceClient

from tests.support.procs import console_script, free_port, start_service

AGENT = "kaos://agent/demo/assistant"


def say(text: str) -> None:
    print(text, flush=True)


def check(ok: bool, what: str) -> None:
    say(f"   {'✔' if ok else '✘'} {what}")
    if not ok:
        raise SystemExit(f"demo step failed: {what}")


async def conversation(url: str) -> list[tuple[str, str]]:
    summary: list[tuple[str, str]] = []
    async with MemoryServiceClient(url, agent_identity=AGENT, failure_mode="strict") as mem:
        say("\n== 1. Short-term window: alice, session s1 ==")
        turns = [
            ("user", "I live in Lisbon"),
            ("assistant", "Noted, Lisbon it is."),
            ("user", "My favourite language is Python"),
            ("assistant", "Python, great choice."),
        ]
        for role, text in turns:
            say(f"   {role:>9}: {text}")
        await mem.write(turns, session_id="s1", principal="alice")
        r = await mem.recall("session", "where do I live", session_id="s1", principal="alice")
        check(len(r.short_term.window) == 4, "the window replays all four turns of s1")

        say("\n== 2. Folding: the window crosses its budget, old turns fold into a digest ==")
        for i in range(12):
            await mem.write(
                [
                    ("user", f"Filler message number {i} about the weather in the city"),
                    ("assistant", f"Reply {i}: the weather is mild today"),
                ],
                session_id="s1",
                principal="alice",
            )
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            r = await mem.recall("session", "Lisbon", session_id="s1", principal="alice")
            if r.medium_term.version and r.long_term.facts:
                break
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.2)  # waiting for background folding, a demo not a test
        check(bool(r.medium_term.version), f"digest version {r.medium_term.version} written")
        say(f"   digest: {(r.medium_term.summary or '')[:160]}...")
        summary.append(("s1 window turns", str(len(r.short_term.window))))
        summary.append(("s1 digest version", str(r.medium_term.version)))

        say("\n== 3. Long-term: a new session s2 recalls the extracted fact, not the old window ==")
        r2 = await mem.recall("agent", "Lisbon", session_id="s2", principal="alice")
        facts = [f.text for f in r2.long_term.facts]
        say(f"   facts: {facts[:3]}")
        check(any("Lisbon" in f for f in facts), "the Lisbon fact is recalled in s2")
        check(not r2.short_term.window, "s2 has no window of s1")
        summary.append(("alice long-term facts", str(len(facts))))

        say("\n== 4. Isolation: bob sees nothing of alice ==")
        rb = await mem.recall("agent", "Lisbon", session_id="s1", principal="bob")
        check(not rb.long_term.facts and not rb.short_term.window, "bob's recall is empty")
        summary.append(
            ("bob facts / window", f"{len(rb.long_term.facts)} / {len(rb.short_term.window)}")
        )

        say("\n== 5. Forget: alice erases her agent-level memory ==")
        f = await mem.forget("agent", session_id="s1", principal="alice")
        say(f"   forgotten: {f.forgotten.model_dump()}")
        r3 = await mem.recall("agent", "Lisbon", session_id="s2", principal="alice")
        check(not r3.long_term.facts, "no fact of alice remains")
        summary.append(("alice facts after forget", str(len(r3.long_term.facts))))
    return summary


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="kaos-run-") as tmp:
        logs = Path(tmp) / "logs"
        dm_port, mem_port = free_port(), free_port()
        say(
            f"starting kaos-devmodel on 127.0.0.1:{dm_port} and kaos-memory on 127.0.0.1:{mem_port}"
        )
        dm = start_service(
            "devmodel",
            [console_script("kaos-devmodel"), "--port", str(dm_port), "--embedding-dims", "64"],
            port=dm_port,
            log_dir=logs,
            ready_path="/healthz",
        )
        try:
            env = {
                "KAOS_MEMORY_HOST": "127.0.0.1",
                "KAOS_MEMORY_PORT": str(mem_port),
                "KAOS_MEMORY_STORAGE": "local",
                "KAOS_MEMORY_DATA_DIR": str(Path(tmp) / "data"),
                "KAOS_MEMORY_MODEL_BASE_URL": f"{dm.url}/v1",
                "KAOS_MEMORY_SUMMARIZATION_MODEL": "devmodel",
                "KAOS_MEMORY_EMBEDDING_MODEL": "devmodel-embed",
                "KAOS_MEMORY_EMBEDDING_DIMS": "64",
                "KAOS_MEMORY_TOKEN_BUDGET": "200",
            }
            mem = start_service(
                "memory",
                [console_script("kaos-memory")],
                port=mem_port,
                env=env,
                log_dir=logs,
                timeout=120,
            )
            try:
                rows = asyncio.run(conversation(mem.url))
            finally:
                mem.stop()
        finally:
            dm.stop()
    say("\n== What each tier held ==")
    for k, v in rows:
        say(f"   {k:<28} {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
