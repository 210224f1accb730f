"""The whole KAOS stack as processes on loopback, configured by the operator's own functions.

``make run`` (``hack/run_local.py``) plays its conversation against this stack and
``tests/e2e/local`` asserts on it. The sample custom resources under ``samples/`` are
loaded and validated with the CRD models (``kaos_core.crds``); every process is started
with exactly the environment the operator's pure desired-state functions produce for
its resource (``agent_env``, ``memory_store_env``, ``mcp_env``), never a hand-written
list. What differs from the pods the operator would create, and only this:

- Addresses. The contexts those functions take carry loopback URLs, free ports and a
  temporary data dir where a pod has service DNS names, container ports and a volume
  mount (``AgentContext.listen_host``/``listen_port``/``public_url``,
  ``MemoryStoreContext.listen_host``/``listen_port``/``data_dir``, ``mcp_env(host=,
  port=, extra_allowed_hosts=)``): arguments of the functions, not edits of their output.
- The overlay (``OVERLAY``): variables a pod gets from somewhere other than the function.
  ``KAOS_MEMORY_DSN`` of an external store, which a pod reads from the store's
  connection Secret (``secretKeyRef``) and a local process gets as the DSN of a fresh
  database on ``hack/postgres``; with ``secure=True`` the pod paths of the projected
  tokens and the callers files, and the in-cluster API server (see below).
- Secured (``secure=True``, ``make run --secure``): the posture has security on, so every
  process also gets the security variables the Deployment builders add
  (``security.agent_security_env``, ``security.memory_security_env``). What kubelet and the
  API server do for a pod is done by a local service-account issuer
  (``tests.support.devissuer``): it serves its discovery document and keys on loopback
  and mints each agent's tokens (memory and agent audiences, the claims kube-apiserver
  gives a projected token) into files; the callers ConfigMaps the operator would write
  are written to files. The services verify with their real ``jwks`` verifier.
- Verified users (``users=True``, needs ``secure``): the posture also names a user issuer,
  a real OIDC provider (Ory Hydra, ``tests.support.oidc``) on loopback with users alice
  and bob; the agents and the memory service verify users' tokens against it (its CA
  overlaid, where a cluster's provider has a public one), and ``chat`` sends a user's
  token (``Authorization: Bearer``) instead of ``X-Principal``. Who may talk to an agent
  (``AGENT_RBAC``, on in a cluster with users) is overlaid off: it asks the API server,
  and there is none here.
- The ModelAPI. LiteLLM is not started: the ModelAPI's endpoint is the development model
  server it proxies, started with the command of ``samples/devmodel.yaml``'s Deployment
  (``--host``/``--port`` moved to loopback).
- External storage with the flag: the agents' ``memoryStore`` is rebound from the local
  sample store to the external one (``Samples.patches`` lists it), as a user would edit
  ``samples/agents.yaml``; the store runs one process where the cluster runs its replicas.
- Per-role model bindings: the store's embedding role is rebound to a second ModelAPI,
  ``<sample ModelAPI>-embeddings`` (a copy of the sample's, so a cluster would run a second
  LiteLLM in front of the same backend), served here by a second development model
  process (``Samples.patches`` lists it): summarisation (digest, extraction) and
  embeddings reach two endpoints, as with local embeddings next to a hosted LLM.

``LocalStack.describe()`` prints all of it, so a reader sees what differs from a cluster.
Variables the developer's shell exports for these runtimes are blanked (empty counts as
unset) so nothing leaks into a process beside what is listed.
"""

from tests.support.localstack.conversation import (
    DELEGATED_MESSAGE,
    SCRIPT,
    STORY,
    WORD_COUNT_TEXT,
    Reply,
    chat,
    model_request,
)
from tests.support.localstack.database import Database
from tests.support.localstack.environment import environ_of, process_settings_env, runtime_variables
from tests.support.localstack.errors import StackError
from tests.support.localstack.overlay import OVERLAY, issuer_ca_file, user_provider_root
from tests.support.localstack.plan import EMBEDDINGS, plan_stack
from tests.support.localstack.samples import (
    NAMESPACE,
    SAMPLES_DIR,
    STORE_SAMPLES,
    Samples,
    Storage,
    load_samples,
)
from tests.support.localstack.spec import LOOPBACK, ProcessSpec
from tests.support.localstack.stack import LocalStack

__all__ = [
    "DELEGATED_MESSAGE",
    "EMBEDDINGS",
    "LOOPBACK",
    "NAMESPACE",
    "OVERLAY",
    "SAMPLES_DIR",
    "SCRIPT",
    "STORE_SAMPLES",
    "STORY",
    "WORD_COUNT_TEXT",
    "Database",
    "LocalStack",
    "ProcessSpec",
    "Reply",
    "Samples",
    "StackError",
    "Storage",
    "chat",
    "environ_of",
    "issuer_ca_file",
    "load_samples",
    "model_request",
    "plan_stack",
    "process_settings_env",
    "runtime_variables",
    "user_provider_root",
]
