"""``python -m kaos_agent.invoke``, what a schedule's CronJob pod runs, against a real
agent process on loopback verifying agent identity with a local issuer's tokens: the
CronJob's own arguments, the callers file the operator writes for the Agent, the
Agent's own token (a self-subjected run), and the exit status of each way a run ends."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kaos_core.auth import names as auth
from kaos_operator.desired import AgentContext, desired_agent_objects
from kaos_operator.desired.security import agent_service_account

from tests.fixtures.agent import AgentFactory
from tests.support.devissuer import DevIssuer
from tests.support.devmodel import DevModel
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


def operator_objects(schedules: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    ctx = AgentContext(
        images=IMAGES, posture=SECURED, model_api_url="http://llm:4000", model_name="m"
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


def invoke(args: list[str], timeout: float = 90) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "kaos_agent.invoke", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
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
