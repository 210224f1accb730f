"""The stack: the plan's processes started in order and stopped in reverse, and the
transcript of what differs from a cluster."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Literal

import psycopg
from kaos_core.auth import names as auth_names
from kaos_core.crds import MemoryStore
from kaos_core.memory.client import MemoryServiceClient
from kaos_core.wire import agent_identity
from kaos_operator.desired import security
from kaos_operator.desired.memorystore import DSN_ENV
from kaos_operator.settings import OperatorSettings, Posture
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.support.devissuer import DevIssuer
from tests.support.devmodel import DevModel
from tests.support.localstack.database import Database
from tests.support.localstack.environment import runtime_variables
from tests.support.localstack.errors import StackError
from tests.support.localstack.overlay import OVERLAY, user_provider_root
from tests.support.localstack.plan import EMBEDDINGS, check_overlays, plan_stack
from tests.support.localstack.samples import NAMESPACE, Samples, Storage, load_samples
from tests.support.localstack.spec import ProcessSpec
from tests.support.memory import MemoryDb
from tests.support.oidc import Provider
from tests.support.procs import ServiceProcess, start_service


class LocalStack:
    """Starts the plan's processes in order and stops them in reverse; a context manager.

    ``dsn``: the database of an external store (tests pass one from their fixtures);
    without it an external stack creates and later drops a fresh one (``Database``).
    """

    def __init__(
        self,
        root: Path,
        *,
        storage: Storage = "local",
        dsn: str | None = None,
        samples: Samples | None = None,
        log: Callable[[str], None] | None = None,
        secure: bool = False,
        users: bool = False,
    ) -> None:
        self.root = root
        self.storage: Storage = storage
        self.samples = samples or load_samples(storage)
        self._dsn = dsn
        self._database: Database | None = None
        self._log = log or (lambda _line: None)
        # The operator's defaults (images only name what a pod would run; posture: open).
        settings = OperatorSettings.from_env({})
        self.images = settings.images
        self.posture = settings.posture
        # Secured: security on, tokens from a local issuer (see the package's docstring).
        self.issuer = DevIssuer(root / "secured" / "issuer") if secure else None
        if users and not secure:
            raise StackError("verified users need the secured posture (secure=True)")
        # Verified users: a real OIDC provider, started first (its issuer is in the posture).
        self.provider = Provider(user_provider_root(root / "secured")) if users else None
        self._user_tokens: dict[str, str] = {}
        if self.issuer is not None:
            self.posture = Posture(
                security_enabled=True,
                token_verification="jwks",
                service_account_issuer=self.issuer.url,
            )
        self.plan: dict[str, ProcessSpec] = {}
        self.procs: dict[str, ServiceProcess] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> LocalStack:
        try:
            dsn = self._dsn
            if self.storage == "external" and dsn is None:
                self._database = Database.create()
                dsn = self._database.dsn
            if self.provider is not None:
                self._log(f"   starting {'OIDC provider (users)':<28} Ory Hydra on loopback")
                self.provider.start()
                self.posture = self.posture.model_copy(
                    update={
                        "user_issuer": self.provider.issuer,
                        "user_audience": auth_names.DEFAULT_USER_AUDIENCE,
                    }
                )
            self.plan = plan_stack(
                self.samples,
                data_root=self.root / "data",
                dsn=dsn,
                images=self.images,
                posture=self.posture,
                secure_dir=None if self.issuer is None else self.root / "secured",
            )
            self._replan()
            # A variant's overlay too is one OVERLAY explains.
            check_overlays(self.plan)
            if self.issuer is not None:
                self._log(f"   starting {'service-account issuer':<28} local on {self.issuer.url}")
                self.issuer.start()
                self._write_secured_files()
            for key, spec in self.plan.items():
                self._log(f"   starting {spec.key:<28} {spec.program} on {spec.url}")
                blank = dict.fromkeys(runtime_variables(spec.program), "")
                self.procs[key] = start_service(
                    key.replace("/", "-").lower(),
                    spec.argv,
                    port=spec.port,
                    env={**blank, **spec.env},
                    log_dir=self.root / "logs",
                    ready_path=spec.ready_path,
                    timeout=spec.timeout,
                )
                self._started(key)
        except BaseException:
            self.stop()
            raise
        return self

    def _replan(self) -> None:
        """A variant's edits of the plan before anything starts (``realstack``)."""

    def _started(self, key: str) -> None:
        """A variant's work once the process of ``key`` answers (``realstack``)."""

    def stop(self) -> dict[str, int | None]:
        """Stop every process (newest first); their exit codes by key."""
        codes: dict[str, int | None] = {}
        for key in reversed(list(self.procs)):
            proc = self.procs[key]
            try:
                codes[key] = proc.stop(timeout=30)
            except (OSError, subprocess.SubprocessError):
                # A process that cannot be stopped must not keep the others running.
                proc.kill()
                codes[key] = None
        self.procs.clear()
        if self.issuer is not None:
            self.issuer.stop()
        if self.provider is not None:
            self.provider.stop()
        if self._database is not None:
            with contextlib.suppress(Exception):
                self._database.drop()
            self._database = None
        return codes

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- access ------------------------------------------------------------------------------

    @property
    def store(self) -> MemoryStore:
        return self.samples.store

    @property
    def store_key(self) -> str:
        return f"MemoryStore/{self.store.name}"

    def url(self, key: str) -> str:
        return self.plan[key].url

    def agent_url(self, name: str) -> str:
        return self.url(f"Agent/{name}")

    @property
    def memory_url(self) -> str:
        return self.url(self.store_key)

    @property
    def devmodel(self) -> DevModel:
        return DevModel(url=self.url("devmodel"))

    @property
    def embedding_devmodel(self) -> DevModel:
        """The store's embedding endpoint (the devmodel itself when the roles share it)."""
        return DevModel(url=self.url(EMBEDDINGS if EMBEDDINGS in self.plan else "devmodel"))

    def identity(self, agent: str) -> str:
        return agent_identity(self.samples.agents[agent].namespace, agent)

    def memory_client(
        self, agent: str | None = None, *, timeout: float = 10.0
    ) -> MemoryServiceClient:
        """A client of the store as ``agent`` would call it (None: an administrator);
        secured, it presents the agent's memory token as the agent does."""
        return MemoryServiceClient(
            self.memory_url,
            timeout=timeout,
            agent_identity=None if agent is None else self.identity(agent),
            token_file=None if agent is None else self.token_file(agent, "memory"),
        )

    def user_token(self, principal: str | None) -> str | None:
        """A user's access token from the stack's OIDC provider (None: no verified users),
        obtained once per user the way a gateway would."""
        if self.provider is None or principal is None:
            return None
        if principal not in self._user_tokens:
            tokens = self.provider.token(principal, audience=auth_names.DEFAULT_USER_AUDIENCE)
            self._user_tokens[principal] = tokens.access_token
        return self._user_tokens[principal]

    def token_file(self, agent: str, audience: Literal["memory", "agent"]) -> Path | None:
        """The file an agent reads its token for ``audience`` from (None: not secured)."""
        variable = (
            auth_names.AGENT_MEMORY_TOKEN_FILE
            if audience == "memory"
            else auth_names.AGENT_PEER_TOKEN_FILE
        )
        value = self.plan[f"Agent/{agent}"].overlay.get(variable)
        return None if value is None else Path(value)

    def _write_secured_files(self) -> None:
        """The callers files, and each agent's tokens minted by the local issuer."""
        assert self.issuer is not None
        for key, spec in self.plan.items():
            for path, content in spec.files.items():
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                Path(path).write_text(content)
            if not key.startswith("Agent/"):
                continue
            agent = self.samples.agents[key.split("/", 1)[1]]
            for variable, audience in (
                (auth_names.AGENT_MEMORY_TOKEN_FILE, auth_names.MEMORY_AUDIENCE),
                (auth_names.AGENT_PEER_TOKEN_FILE, auth_names.AGENT_AUDIENCE),
                (auth_names.AGENT_MCP_TOKEN_FILE, auth_names.MCP_AUDIENCE),
            ):
                self.issuer.write_token(
                    Path(spec.overlay[variable]),
                    agent.namespace,
                    security.agent_service_account(agent.name),
                    audience,
                )

    @property
    def memory_db(self) -> MemoryDb:
        spec = self.plan[self.store_key]
        return MemoryDb(
            backend=self.store.spec.storage.type,
            data_dir=Path(spec.env["KAOS_MEMORY_DATA_DIR"]),
            dsn=spec.env.get(DSN_ENV),
            collection=self.store.spec.collection,
        )

    # -- the transcript of the setup ---------------------------------------------------------

    def describe(self) -> Iterator[str]:
        """What runs, from which resource, and everything that differs from a cluster."""
        s = self.samples
        yield f"resources (samples/, validated with kaos_core.crds, namespace {NAMESPACE}):"
        yield f"   ModelAPI/{s.model_api.name}, " + ", ".join(
            ([f"ModelAPI/{s.embedding_api.name}"] if s.embedding_api else [])
            + [f"MCPServer/{n}" for n in s.mcp_servers]
            + [f"MemoryStore/{s.store.name} ({s.store.spec.storage.type})"]
        )
        yield "   " + ", ".join(
            f"Agent/{n} (peers: {', '.join(a.spec.agent_network.access) or 'none'})"
            for n, a in s.agents.items()
        )
        for patch in s.patches:
            yield f"   edited: {patch}"
        yield "loopback instead of service DNS:"
        for spec in self.plan.values():
            yield f"   {spec.key:<28} {spec.cluster_url:<44} -> {spec.url}"
        for spec in self.plan.values():
            yield f"{spec.key}: {spec.program}, env = {spec.desired_by}"
            for note in spec.notes:
                yield f"   {note}"
            if not spec.desired:
                continue
            diff = [
                (k, spec.cluster.get(k, "(unset)"), v)
                for k, v in spec.desired.items()
                if spec.cluster.get(k) != v
            ]
            same = len(spec.desired) - len(diff)
            yield f"   {len(spec.desired)} variables; {same} as in the pod, loopback context:"
            for k, pod, local in diff:
                if local.startswith(pod):  # a list the local process extends
                    yield f"      {k:<34} the pod's + {_short(local[len(pod) :].lstrip(','))}"
                else:
                    yield f"      {k:<34} {_short(pod)} -> {_short(local)}"
            for k in sorted(set(spec.cluster) - set(spec.desired) - set(spec.overlay)):
                yield f"      {k:<34} {_short(spec.cluster[k])} -> (not set locally)"
            said: set[str] = set()
            for k, v in spec.overlay.items():
                pod = spec.cluster.get(k, "(unset)")
                local = _short(_redact(k, v) or "(unset)")
                yield f"   overlay: {_short(k, 34):<34} {_short(pod)} -> {local}"
                if OVERLAY[k] not in said:  # each reason once per process
                    said.add(OVERLAY[k])
                    yield f"            ({OVERLAY[k]})"


def _short(value: str, width: int = 40) -> str:
    value = value.replace("\n", "\\n")
    return value if len(value) <= width else value[: width - 1] + "…"


def _redact(key: str, value: str) -> str:
    if key != DSN_ENV:
        return value
    # No password is printed, should the developer's DSN carry one.
    try:
        params = conninfo_to_dict(value)
    except psycopg.ProgrammingError:
        return "(unparsable DSN)"
    if "password" in params:
        params["password"] = "***"
        return make_conninfo(**{k: str(v) for k, v in params.items()})
    return value
