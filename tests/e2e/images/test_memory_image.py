"""The memory image without what Chroma declares but the embedded store never runs.

images/memory/Dockerfile drops Chroma's distributed-mode Kubernetes client, its default
embedding function's runtime (onnxruntime, tokenizers, huggingface_hub), its server and
command line (uvicorn, typer, rich, click) and a package builder. These tests prove each is
gone and that everything the service does with Chroma still works without them: an
embedded add and query, Mem0's Chroma store, and the service itself storing a fact and
recalling it, with the development model (served from the agent image) as its model.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import pytest

from tests.e2e.images.harness import Containers, free_port, post_json, ref_of

pytestmark = [pytest.mark.images, pytest.mark.timeout(3600)]

DROPPED = [
    "kubernetes",
    "onnxruntime",
    "tokenizers",
    "huggingface_hub",
    "uvicorn",
    "typer",
    "rich",
    "click",
    "build",
]
IMPORTABLE = (
    "import importlib.util, json, sys\n"
    "print(json.dumps([m for m in sys.argv[1:] if importlib.util.find_spec(m)]))\n"
)
# An embedded collection as KAOS's Mem0 makes it (no embedding function: every vector is
# handed in), then Mem0's own Chroma store (on a path of its own: Chroma keeps one client
# per path and settings).
EMBEDDED = """
import tempfile, chromadb
from mem0.vector_stores.chroma import ChromaDB
client = chromadb.PersistentClient(path=tempfile.mkdtemp(dir='/data'))
facts = client.get_or_create_collection('facts', embedding_function=None)
facts.add(ids=['a', 'b'], embeddings=[[1.0, 0.0], [0.0, 1.0]],
          documents=['likes tea', 'lives in Oslo'])
hit = facts.query(query_embeddings=[[0.9, 0.1]], n_results=1)
print(hit['documents'][0][0])
store = ChromaDB('mem0', path=tempfile.mkdtemp(dir='/data'))
store.insert(vectors=[[1.0, 0.0], [0.0, 1.0]], payloads=[{'data': 'tea'}, {'data': 'Oslo'}],
             ids=['c', 'd'])
print(store.search(query='', vectors=[0.1, 0.9], top_k=1)[0].payload['data'])
"""
DIMS = 64
AGENT = "kaos://agent/team/alpha"
PRINCIPAL = "ana"


def test_memory_image_holds_none_of_what_chroma_never_runs(containers: Containers) -> None:
    found = containers.run(ref_of("memory"), "python", "-c", IMPORTABLE, *DROPPED)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout) == []


def test_embedded_chroma_and_mem0s_store_work_without_them(containers: Containers) -> None:
    with tempfile.TemporaryDirectory() as data:
        os.chmod(data, 0o777)
        done = containers.run(
            ref_of("memory"), "python", "-c", EMBEDDED, volumes=(f"{data}:/data",)
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-2:] == ["likes tea", "Oslo"]


def memory_env(port: int, model_port: int) -> dict[str, str]:
    return {
        "KAOS_MEMORY_HOST": "127.0.0.1",
        "KAOS_MEMORY_PORT": str(port),
        "KAOS_MEMORY_MODEL_BASE_URL": f"http://127.0.0.1:{model_port}/v1",
        "KAOS_MEMORY_SUMMARIZATION_MODEL": "dev-summarizer",
        "KAOS_MEMORY_EMBEDDING_MODEL": "dev-embedder",
        "KAOS_MEMORY_EMBEDDING_DIMS": str(DIMS),
        # A tiny window: every write folds, so its turns reach the long-term store.
        "KAOS_MEMORY_TOKEN_BUDGET": "16",
    }


def test_memory_service_serves_in_local_mode_from_the_image(containers: Containers) -> None:
    """The service itself, as the chart runs it (local store: SQLite and embedded Chroma
    through Mem0), on a volume at /data/memory: ready, with both stores checked."""
    port = free_port()
    # Never called before a write: readiness needs no model.
    env = memory_env(port, model_port=9)
    with tempfile.TemporaryDirectory() as data, tempfile.TemporaryDirectory() as logs:
        os.chmod(data, 0o777)
        log = Path(logs) / "memory.log"
        ready = containers.serve_and_get(
            ref_of("memory"),
            ["kaos-memory"],
            f"http://127.0.0.1:{port}/readyz",
            env=env,
            volumes=(f"{data}:/data/memory",),
            log=log,
        )
        assert ready == {
            "status": "ready",
            "checks": {"conversation_store": "ok", "vector_store": "ok"},
        }, log.read_text()[-3000:]
        assert (Path(data) / "conversation.sqlite3").is_file()


def recalled_facts(url: str) -> list[str]:
    # An administrator's recall (no agent identity) of everything the principal told.
    status, answer = post_json(
        f"{url}/v1/recall",
        {"level": "user", "query": "where does ana live?", "include": ["long_term"]},
        {"X-Principal": PRINCIPAL},
    )
    assert status == 200, answer
    assert isinstance(answer, dict)
    return [fact["text"] for fact in answer["long_term"]["facts"]]


def test_memory_service_stores_and_recalls_a_fact_from_the_image(
    containers: Containers,
) -> None:
    """A write whose turns fold into the long-term store (Mem0 extracting the fact with
    the development model and storing its vector in embedded Chroma), then a recall that
    finds it: the whole local path, in the image as shipped."""
    model_port, port = free_port(), free_port()
    model_argv = ["kaos-devmodel", "--host", "127.0.0.1", "--port", str(model_port)]
    model_argv += ["--embedding-dims", str(DIMS)]
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data, tempfile.TemporaryDirectory() as logs:
        os.chmod(data, 0o777)
        log = Path(logs) / "memory.log"
        with (
            containers.serving(
                ref_of("agent"),
                model_argv,
                f"http://127.0.0.1:{model_port}/v1/models",
                log=Path(logs) / "devmodel.log",
            ) as models,
            containers.serving(
                ref_of("memory"),
                ["kaos-memory"],
                f"{url}/readyz",
                env=memory_env(port, model_port),
                volumes=(f"{data}:/data/memory",),
                log=log,
            ) as ready,
        ):
            assert isinstance(models, dict), (Path(logs) / "devmodel.log").read_text()[-3000:]
            assert isinstance(ready, dict), log.read_text()[-3000:]
            headers = {"X-Agent-Identity": AGENT, "X-Principal": PRINCIPAL, "X-Session-Id": "s1"}
            for line in ("I live in Lisbon", "My favourite dish is bacalhau"):
                turns = [
                    {"role": "user", "content": line},
                    {"role": "assistant", "content": "Noted."},
                ]
                status, answer = post_json(f"{url}/v1/write", {"turns": turns}, headers)
                assert status in (200, 202), answer
            # Extraction runs in the background: poll the recall, with a deadline.
            deadline = time.monotonic() + 120
            facts = recalled_facts(url)
            while "I live in Lisbon" not in facts and time.monotonic() < deadline:
                time.sleep(0.5)
                facts = recalled_facts(url)
            assert "I live in Lisbon" in facts, log.read_text()[-3000:]
