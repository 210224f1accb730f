"""The memory service on a real model: SmolLM2-135M on Ollama writes the digests and is
asked for the facts. What a 135M model answers is not asserted; what KAOS makes of it is:
a digest version after a fold, every extraction counted as done or unusable, and no turn
lost whatever the model answered (read in the database).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import aiohttp
import pytest
from kaos_core.wire import agent_identity

from tests.fixtures.memory import MakeMemory
from tests.support.cluster import wait_until
from tests.support.devmodel import DevModel
from tests.support.ollama import MODEL, Ollama, create_model, serve_ollama, why_ollama_cannot_run
from tests.support.realstack import FOLD_BUDGET, FOLD_LINES

pytestmark = [pytest.mark.realmodel, pytest.mark.postgres, pytest.mark.timeout(900)]

# The store extracts on the compact system prompt, as a store on SmolLM2 should: Mem0's own
# is twice Ollama's default 4,096-token context, which Ollama fills by cutting it from its
# head (never its instructions), for a minute or more a call on two shared cores. A call
# abandoned at its timeout keeps Ollama busy while the retry queues behind it: the store
# gives one four minutes all the same, and the wait covers one retry on top.
MODEL_TIMEOUT = 240.0
FOLD_TIMEOUT = 2 * MODEL_TIMEOUT + 60.0


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ollama]:
    reason = why_ollama_cannot_run()
    if reason is not None:
        pytest.skip(f"real-model tests skipped: {reason}")
    with serve_ollama(tmp_path_factory.mktemp("ollama")) as server:
        create_model(server, MODEL)
        yield server


async def _metrics(url: str) -> dict[str, float]:
    async with aiohttp.ClientSession() as http, http.get(url + "/metrics") as resp:
        text = await resp.text()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(
            ("kaos_memory_extractions_total{", "kaos_memory_unusable_answers_total{")
        ):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def test_a_store_on_the_real_model_digests_and_loses_no_turn(
    memory_factory: MakeMemory, smollm2: Ollama, devmodel: DevModel
) -> None:
    server = memory_factory(
        "external",
        model_base_url=f"{smollm2.url}/v1",
        summarization_model=MODEL,
        # Embeddings stay with the development model: the chat model is under test.
        embedding_base_url=devmodel.base_url,
        token_budget=FOLD_BUDGET,
        idle_flush_seconds=0,
        model_timeout=MODEL_TIMEOUT,
        extraction_system_prompt="compact",
    )
    session, principal = "real-1", "ann"

    async def write() -> None:
        async with server.client(agent=agent_identity("ns", "agent-a")) as mem:
            for role, text in FOLD_LINES:
                await mem.write([(role, text)], session_id=session, principal=principal)

    asyncio.run(write())
    db = server.db  # this test's own database: the one session is all it holds

    def folds_settled() -> list[dict[str, object]] | None:
        folds = db.folds()
        settled = folds and all(f["extraction_status"] != "pending" for f in folds)
        return folds if settled and any(f["digest_version"] is not None for f in folds) else None

    folds = wait_until(folds_settled, timeout=FOLD_TIMEOUT, what="folds digested and extracted")
    # The digest the real model wrote is the session's medium-term memory.
    digests = db.digests()
    assert digests and all(str(d["summary"]).strip() for d in digests), digests
    # Every extraction was counted as done (facts or none) or unusable, none dropped.
    counted = asyncio.run(_metrics(server.url))
    done = counted.get('kaos_memory_extractions_total{outcome="done"}', 0.0)
    unusable = counted.get('kaos_memory_extractions_total{outcome="unusable"}', 0.0)
    assert done + unusable == len(folds), (folds, counted)
    # Whatever the model answered, every turn written is still in the store.
    assert [(t["role"], t["content"]) for t in db.turns()] == FOLD_LINES
