"""A real model on loopback: Ollama serving SmolLM2-135M answers the OpenAI-compatible API
the agents call, and a model pushed to an in-cluster-style registry pulls back into an
empty Ollama that then answers too (the air-gapped Hosted ModelAPI's path).

The binaries and the model come from ``hack/ollama-build`` (``make services``); without
them the module skips and says what is missing.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.ollama import (
    MODEL,
    Ollama,
    Registry,
    create_model,
    serve_ollama,
    serve_registry,
    why_ollama_cannot_run,
    why_registry_cannot_run,
)

pytestmark = [pytest.mark.realmodel, pytest.mark.timeout(600)]

QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def ollama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ollama]:
    """One Ollama for the module with smollm2:135m created from the cached GGUF."""
    reason = why_ollama_cannot_run()
    if reason is not None:
        pytest.skip(reason)
    with serve_ollama(tmp_path_factory.mktemp("ollama")) as server:
        create_model(server)
        yield server


def post(url: str, body: dict[str, Any], *, timeout: float = 180.0) -> tuple[int, Any]:
    """POST JSON; the status and the decoded JSON body, errors included."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def ask(server: Ollama, model: str = MODEL, **extra: Any) -> tuple[int, Any]:
    return post(
        f"{server.url}/v1/chat/completions",
        {
            "model": model,
            "messages": [{"role": "user", "content": QUESTION}],
            "temperature": 0,
            "seed": 0,
            "max_tokens": 48,
            **extra,
        },
    )


def test_chat_completion_answers_with_usage(ollama: Ollama) -> None:
    status, body = ask(ollama)
    assert status == 200, body
    assert body["model"] == MODEL
    answer = body["choices"][0]["message"]["content"]
    assert "Paris" in answer, answer
    assert body["usage"]["prompt_tokens"] > 0
    assert body["usage"]["completion_tokens"] > 0
    assert body["usage"]["total_tokens"] == (
        body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    )


def test_streamed_answer_arrives_in_several_chunks(ollama: Ollama) -> None:
    """Server-sent events, one per generated piece, ended by ``[DONE]``."""
    request = urllib.request.Request(
        f"{ollama.url}/v1/chat/completions",
        data=json.dumps(
            {
                "model": MODEL,
                "messages": [{"role": "user", "content": QUESTION}],
                "temperature": 0,
                "seed": 0,
                "max_tokens": 48,
                "stream": True,
            }
        ).encode(),
        headers={"Content-Type": "application/json"},
    )
    events: list[str] = []
    with urllib.request.urlopen(request, timeout=180) as answer:
        assert answer.headers.get_content_type() == "text/event-stream"
        for raw in answer:
            line = raw.decode().strip()
            if line.startswith("data: "):
                events.append(line.removeprefix("data: "))
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    pieces = [c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]]
    assert len([p for p in pieces if p]) > 1, pieces
    assert "Paris" in "".join(pieces)


def test_a_request_with_tools_is_refused(ollama: Ollama) -> None:
    """SmolLM2-135M's template has no tool calls: Ollama refuses rather than ignoring them
    (what the agent runtime must expect of this model)."""
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
    status, body = ask(ollama, tools=[tool])
    assert status == 400, body
    assert "does not support tools" in body["error"]["message"]


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    reason = why_registry_cannot_run()
    if reason is not None:
        pytest.skip(reason)
    with serve_registry(tmp_path / "registry") as served:
        yield served


def test_blob_downloads_are_redirected_to_another_host(ollama: Ollama, registry: Registry) -> None:
    """The registry answers a blob GET with a redirect to the file server under another
    host name, which serves the blob's bytes (what lets ``ollama pull`` download it)."""
    target = f"{registry.host}/library/smollm2:135m"
    ollama.cli("cp", MODEL, target)
    ollama.cli("push", "--insecure", target)
    manifest = json.loads(
        urllib.request.urlopen(
            urllib.request.Request(
                f"http://{registry.host}/v2/library/smollm2/manifests/135m",
                headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
            ),
            timeout=30,
        ).read()
    )
    layer = max(manifest["layers"], key=lambda item: item["size"])
    # http.client follows no redirect: the registry's own answer.
    conn = http.client.HTTPConnection(registry.host, timeout=30)
    try:
        conn.request("GET", f"/v2/library/smollm2/blobs/{layer['digest']}")
        redirect = conn.getresponse()
        redirect.read()
    finally:
        conn.close()
    assert redirect.status == 307
    location = urllib.parse.urlsplit(redirect.headers["Location"])
    assert location.hostname == "localhost"
    assert location.port == registry.blobs.port
    with urllib.request.urlopen(redirect.headers["Location"], timeout=60) as blob:
        assert int(blob.headers["Content-Length"]) == layer["size"]


def test_pushed_model_pulls_into_an_empty_ollama_that_answers(
    ollama: Ollama, registry: Registry, tmp_path: Path
) -> None:
    target = f"{registry.host}/library/smollm2:135m"
    ollama.cli("cp", MODEL, target)
    ollama.cli("push", "--insecure", target)
    with serve_ollama(tmp_path / "second") as second:
        assert not any((second.models / "blobs").glob("sha256-*"))
        second.cli("pull", "--insecure", target)
        listed = second.cli("list").stdout
        assert target in listed, listed
        status, body = ask(second, model=target)
    assert status == 200, body
    assert "Paris" in body["choices"][0]["message"]["content"], body
