"""``python -m kaos_agent.invoke``, what a schedule's CronJob pod runs, against a real
agent process on loopback verifying agent identity with a local issuer's tokens: the
CronJob's own arguments, the callers file the operator writes for the Agent, the
Agent's own token (a self-subjected run), the exit status of each way a run ends, and,
with the CronJob's tracing variables, one trace in a real Jaeger from the run's start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kaos_core.auth import names as auth
from kaos_core.crds import Telemetry
from kaos_operator.desired import AgentContext, desired_agent_objects
from kaos_operator.desired.security import agent_service_account

from tests.fixtures.agent import AgentFactory
from tests.support.devissuer import DevIssuer
from tests.support.devmodel import DevModel
from tests.support.jaeger import CLIENT, SERVER, Jaeger, Span, eventually
from tests.support.operator_objects import IMAGES, SECURED, agent, by_kind
from tests.support.procs import REPO_ROOT, free_port

NS = "ns"
SCHEDULE = {"name": "morning", "cron": "0 9 * * *", "message": "good morning, report in"}


@pytest.fixture
def issuer(tmp_path: Path) -> Iterator[DevIssuer]:
    dev = DevIssuer(tmp_path / "issuer").start()
    try:
        yield dev
    finally:
        dev.stop()


def operator_objects(
    schedules: list[dict[str, Any]], telemetry: Telemetry | None = None
) -> dict[str, dict[str, Any]]:
    ctx = AgentContext(
        images=IMAGES,
        posture=SECURED,
        model_api_url="http://llm:4000",
        model_name="m",
        telemetry=telemetry or Telemetry(),
    )
    objects = desired_agent_objects(agent("a1", NS, schedules=schedules), ctx)
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in objects} | by_kind(objects)


def secured_agent(
    agent_factory: AgentFactory, issuer: DevIssuer, tmp_path: Path, callers: str
) -> str:
    """Agent a1 verifying agent tokens against ``issuer``, with ``callers`` as its file."""
    path = tmp_path / "callers.json"
    path.write_text(callers)
    svc = agent_factory(
        "a1",
        AGENT_IDENTITY=f"kaos://agent/{NS}/a1",
        AGENT_AUTH_MODE="jwks",
        AGENT_AUTH_ISSUER=issuer.url,
        AGENT_AUTH_CA_FILE=str(issuer.ca_file),
        AGENT_CALLERS_FILE=str(path),
    )
    return svc.url


def invoke(
    args: list[str], timeout: float = 90, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "kaos_agent.invoke", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    report = json.loads(lines[-1]) if lines else {}
    return done.returncode, report


def cronjob_args(url: str, token_file: Path) -> list[str]:
    """The CronJob's own arguments, its Service URL and pod token path swapped for the
    loopback agent and the test's token file."""
    cj = operator_objects([SCHEDULE])["CronJob/a1-morning"]
    args = list(cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"])
    args[args.index("--url") + 1] = url
    assert args[args.index("--token-file") + 1] == auth.AGENT_TOKEN_PATH
    args[args.index("--token-file") + 1] = str(token_file)
    return args


def callers_of(objects: dict[str, dict[str, Any]]) -> str:
    return str(objects["ConfigMap"]["data"][auth.CALLERS_FILE])


def test_a_scheduled_run_with_the_agents_own_token_completes(
    agent_factory: AgentFactory, issuer: DevIssuer, devmodel: DevModel, tmp_path: Path
) -> None:
    callers = callers_of(operator_objects([SCHEDULE]))
    url = secured_agent(agent_factory, issuer, tmp_path, callers)
    own = issuer.write_token(
        tmp_path / "own" / "token", NS, agent_service_account("a1"), auth.AGENT_AUDIENCE
    )

    code, report = invoke(cronjob_args(url, own))

    assert code == 0, report
    assert report["state"] == "TASK_STATE_COMPLETED" and report["task"]
    assert report["session"] == "schedule-morning"
    # The run reached the model with the schedule's message.
    sent = json.dumps(devmodel.requests())
    assert "good morning, report in" in sent


def test_without_schedules_the_agent_refuses_its_own_token(
    agent_factory: AgentFactory, issuer: DevIssuer, devmodel: DevModel, tmp_path: Path
) -> None:
    # The callers file of the same Agent without schedules does not list it.
    url = secured_agent(agent_factory, issuer, tmp_path, callers_of(operator_objects([])))
    own = issuer.write_token(tmp_path / "own", NS, "a1", auth.AGENT_AUDIENCE)

    code, report = invoke(cronjob_args(url, own))

    assert code == 3, report
    assert report["error"] == "refused" and report["status"] == 403
    assert devmodel.stats().get("chat", 0) == 0


def test_other_identities_and_no_token_start_nothing(
    agent_factory: AgentFactory, issuer: DevIssuer, devmodel: DevModel, tmp_path: Path
) -> None:
    url = secured_agent(agent_factory, issuer, tmp_path, callers_of(operator_objects([SCHEDULE])))
    # Another ServiceAccount of the namespace, and the agent's own for the memory's audience.
    stranger = issuer.write_token(tmp_path / "stranger", NS, "other", auth.AGENT_AUDIENCE)
    memory = issuer.write_token(tmp_path / "memory", NS, "a1", auth.MEMORY_AUDIENCE)
    assert invoke(cronjob_args(url, stranger))[1]["status"] == 403
    code, report = invoke(cronjob_args(url, memory))
    assert (code, report["status"]) == (3, 401)
    # A token file that is not there: nothing is sent.
    code, report = invoke(cronjob_args(url, tmp_path / "missing"))
    assert code == 2 and "token file" in report["error"]
    assert devmodel.stats().get("chat", 0) == 0


def test_exit_status_follows_how_the_run_ends(
    agent_factory: AgentFactory, devmodel: DevModel
) -> None:
    url = agent_factory("plain").url
    base = ["--url", url, "--session", "schedule-s", "--message", "hello"]
    code, report = invoke(base)
    assert (code, report["state"]) == (0, "TASK_STATE_COMPLETED")

    devmodel.set_faults(error_rate=1.0, routes=["chat"])
    code, report = invoke(base)
    assert code == 1 and report["state"] == "TASK_STATE_FAILED", report

    devmodel.set_faults(hang=True, routes=["chat"])
    code, report = invoke([*base, "--timeout", "2"])
    assert code == 4 and "no answer within 2 seconds" in report["error"]

    code, report = invoke(["--url", f"http://127.0.0.1:{free_port()}", "--message", "hi"])
    assert code == 3 and report["error"] == "could not connect"


def test_a_traced_run_is_one_trace_from_its_start(
    agent_factory: AgentFactory, devmodel: DevModel, jaeger: Jaeger
) -> None:
    since = datetime.now(UTC)
    telemetry = Telemetry(endpoint=jaeger.otlp_endpoint)
    cronjob = operator_objects([SCHEDULE], telemetry)["CronJob/a1-morning"]
    (main,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    run_env = {e["name"]: e["value"] for e in main["env"]}
    agent_name = f"a1-{uuid.uuid4().hex[:8]}"
    url = agent_factory(
        "a1", OTEL_EXPORTER_OTLP_ENDPOINT=jaeger.otlp_endpoint, OTEL_SERVICE_NAME=agent_name
    ).url

    code, report = invoke(["--url", url, "--session", "schedule-morning", "--message", "hi"],
                          env=run_env)  # fmt: skip
    assert code == 0, report

    def run_span() -> Span | None:
        found = [s for s in jaeger.query.spans("a1-morning", since=since) if s.kind == CLIENT]
        return found[0] if len(found) == 1 else None

    run = eventually(run_span, "the run's client span, once")
    assert run.name == "invoke_agent" and run.parent_id == ""
    assert run.attr("gen_ai.conversation.id") == "schedule-morning"
    assert run.attr("process.exit.code") == 0
    assert run.resource["kaos.resource.name"] == "a1"

    def agent_side() -> list[Span] | None:
        spans = [s for s in jaeger.query.trace(run.trace_id) if s.service == agent_name]
        return spans or None

    served = eventually(agent_side, "the agent's spans in the run's trace")
    (server,) = [s for s in served if s.kind == SERVER and s.parent_id == run.span_id]
    assert server.attr("http.response.status_code") == 200


@pytest.mark.parametrize(
    "args",
    [
        ["--url", "http://x"],
        ["--url", "http://x", "--message", "  "],
        ["--url", "ftp://x", "--message", "hi"],
        ["--url", "http://x", "--message", "hi", "--timeout", "0"],
    ],
)
def test_bad_arguments_exit_2(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kaos_agent.invoke", *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 2 and done.stderr
