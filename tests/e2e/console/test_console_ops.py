"""An agent's operations on its console page, in a real browser against real agents.

The researcher of the samples is given an approval gate on its ``shout`` tool, a
schedule, a webhook trigger and a budget (on the cluster's Agent; the local stack's
process runs the same gate). alice starts an A2A task whose scripted model calls
``shout``: the run pauses. The console (the real ``kaos ui``, reaching the agent through
``kubectl port-forward`` and kwok's forwards to the local process) then shows, on the
researcher's page: the paused task with the pending call and its arguments, its
schedule and trigger (the Secret's name, never its value), and the usage and audit trail
exactly as the agent answers ``GET /v1/usage`` and ``GET /v1/audit``. bob sees no paused
task, and a decision posted as bob, one without the CSRF token and one that is neither
approve nor deny each change nothing. alice's Approve resumes the run, which calls the
tool once and finishes; the trail then has the approval (by alice) and the call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kaos_cli.clients.a2a import answer_of, state_of, task_client
from kaos_core.crds import Agent
from kaos_core.wire import PRINCIPAL_HEADER
from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.e2e.console.harness import (
    Console,
    apply,
    attr,
    broken_words,
    browser,
    forward_pods,
    sample_documents,
    shoot,
    store_volume,
    text,
    wait_for,
)
from tests.support.cluster import Cluster
from tests.support.localstack import LocalStack, load_samples
from tests.support.procs import ServiceProcess

STORE = "memory-local"
AGENT = "researcher"
SECRET_VALUE = "hook-secret-not-for-the-page"
APPROVALS = {"rules": [{"mcpServer": "text-tools", "tools": ["shout"]}], "timeoutSeconds": 600}
OPS_SPEC: dict[str, Any] = {
    "approvals": APPROVALS,
    "budgets": {"tokensPerDay": 2_000_000, "tokensPerUserPerDay": 100_000},
    "schedules": [
        {"name": "weekly-digest", "cron": "0 9 * * 1", "timeZone": "Europe/Lisbon",
         "message": "Summarise the week."},
    ],
    "triggers": [
        {"name": "deploys", "secret": {"name": "deploy-hook", "key": "token"},
         "message": "A deploy of {{ repository.name }} finished."},
    ],
}  # fmt: skip
SCRIPT: list[dict[str, Any]] = [
    {"match": r"^Shout the greeting", "tool_call": {"name": "shout",
                                                    "arguments": {"text": "quiet <words>"}}},
    {"after_tool": "shout", "reply": "Done: {result}"},
]  # fmt: skip


@pytest.fixture
def driver() -> Iterator[webdriver.Chrome]:
    chrome = browser()
    try:
        yield chrome
    finally:
        chrome.quit()


@pytest.fixture
def stack(tmp_path: Path, k8s_namespace: str) -> Iterator[LocalStack]:
    """The samples as loopback processes; the researcher with the approval gate."""
    samples = load_samples("local", namespace=k8s_namespace)
    doc = samples.agents[AGENT].model_dump(by_alias=True, exclude_none=True, mode="json")
    doc["spec"]["approvals"] = APPROVALS
    agents = {**samples.agents, AGENT: Agent.model_validate(doc)}
    st = LocalStack(tmp_path / "stack", samples=dataclasses.replace(samples, agents=agents))
    try:
        st.start()
        st.devmodel.set_script(SCRIPT)
        yield st
    finally:
        st.stop()


@pytest.fixture
def deployed(
    k8s_cluster: Cluster, k8s_namespace: str, kaos_operator: ServiceProcess
) -> Iterator[str]:
    """The samples applied (the researcher with its operations) and Ready; every KAOS
    object deleted afterwards, while the operator still runs."""
    ns = k8s_namespace
    pv = f"pv-ops-{uuid.uuid4().hex[:8]}"
    store_volume(k8s_cluster, ns, f"{STORE}-data", pv)
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "deploy-hook",
              "namespace": ns}, "stringData": {"token": SECRET_VALUE}}  # fmt: skip
    docs = sample_documents(ns)
    for d in docs:
        if d["kind"] == "Agent" and d["metadata"]["name"] == AGENT:
            d["spec"].update(OPS_SPEC)
    apply(k8s_cluster, [secret, *docs])

    def ready() -> bool:
        out = k8s_cluster.kubectl("get", "agents.kaos.tools", "-n", ns, "-o", "json").stdout
        phases = {a["metadata"]["name"]: (a.get("status") or {}).get("phase")
                  for a in json.loads(out)["items"]}  # fmt: skip
        return phases.get(AGENT) == "Ready"

    try:
        wait_for(ready, f"Agent {AGENT} Ready", timeout=180)
        yield ns
    finally:
        k8s_cluster.kubectl(
            "delete", "agents.kaos.tools,modelapis.kaos.tools,mcpservers.kaos.tools,"
            "memorystores.kaos.tools", "--all", "-n", ns, "--wait=true", check=False,
            timeout=120,
        )  # fmt: skip
        k8s_cluster.kubectl("delete", "pv", pv, "--wait=false", check=False)


def a2a(url: str, principal: str, use: Any) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with task_client(url, {PRINCIPAL_HEADER: principal}) as tasks:
            found: dict[str, Any] = await use(tasks)
            return found

    return asyncio.run(go())


def agent_json(url: str, path: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(url + path, timeout=30) as resp:
        items: list[dict[str, Any]] = json.loads(resp.read())["items"]
        return items


def post(url: str, form: dict[str, str], origin: str) -> tuple[int, str]:
    """A form post as a page would send it (no browser): the status and the body."""
    request = urllib.request.Request(
        url, data=urllib.parse.urlencode(form).encode(), method="POST",
        headers={"Accept": "text/html", "Origin": origin,
                 "Content-Type": "application/x-www-form-urlencoded"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def table_rows(driver: webdriver.Chrome, css: str) -> list[list[str]]:
    found = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0] + ' tbody tr'))"
        ".map((r) => Array.from(r.cells).map((c) => c.innerText.trim()));",
        css,
    )
    return [list(map(str, r)) for r in found]


def audit_on_page(driver: webdriver.Chrome) -> list[tuple[str, str, str]]:
    """(kind, tool, outcome word) of each audit row, as drawn."""
    return [
        (r[1], r[2].splitlines()[0], r[6].split()[0]) for r in table_rows(driver, ".audit-table")
    ]


def test_agent_page_shows_its_operations_and_decides_approvals(
    k8s_cluster: Cluster, deployed: str, stack: LocalStack, driver: webdriver.Chrome,
    tmp_path: Path,
) -> None:  # fmt: skip
    ns = deployed
    url = stack.agent_url(AGENT)
    forward_pods(k8s_cluster, ns, {AGENT: stack.plan[f"Agent/{AGENT}"].port})
    console = Console(k8s_cluster.env(), "-n", ns, log=tmp_path / "console.log")
    try:
        # alice's run calls the gated tool: it pauses, the tool not called.
        started = a2a(url, "alice", lambda t: t.send("Shout the greeting", session=None,
                                                      wait=False))  # fmt: skip
        task = str(started["id"])
        wait_for(lambda: state_of(a2a(url, "alice", lambda t: t.get(task))) == "INPUT_REQUIRED",
                 "the task paused for approval")  # fmt: skip
        page = f"{console.url}/agents/{ns}/{AGENT}"
        driver.get(f"{page}?principal=alice")

        paused = f'#ops-approvals article[data-task="{task}"]'
        assert driver.find_elements(By.CSS_SELECTOR, paused), driver.page_source
        assert attr(driver, f"{paused} .pending", "data-tool") == "shout"
        arguments = json.loads(text(driver, f"{paused} pre.arguments"))
        assert arguments == {"text": "quiet <words>"}
        assert "user\nalice" in text(driver, f"{paused} dl.paused-facts")
        assert "text-tools: shout" in text(driver, "#ops-approvals .hint")

        # The schedule and its last run as the Agent's status says; the trigger's path
        # and Secret by name, never the secret itself.
        schedule = table_rows(driver, ".schedules-table")
        assert [r[:3] for r in schedule] == [["weekly-digest", "0 9 * * 1 (Europe/Lisbon)",
                                             "Forbid"]], schedule  # fmt: skip
        obj = json.loads(k8s_cluster.kubectl("get", "agent", AGENT, "-n", ns, "-o",
                                             "json").stdout)  # fmt: skip
        said = {s["name"]: s for s in (obj.get("status") or {}).get("schedules") or []}
        assert schedule[0][6] == said.get("weekly-digest", {}).get("lastResult", "none")
        trigger = table_rows(driver, ".triggers-table")
        assert [r[:3] for r in trigger] == [["deploys", "POST /v1/triggers/deploys",
                                            "Secret deploy-hook, key token"]], trigger  # fmt: skip
        assert SECRET_VALUE not in driver.page_source

        # Usage and audit: what the agent answers, drawn as it answers it.
        trail = agent_json(url, "/v1/audit?limit=25")
        assert not [e for e in trail if e["outcome"] == "ok"], trail  # nothing ran yet
        assert audit_on_page(driver) == [(e["kind"], e["name"], e["outcome"]) for e in trail]
        assert "100000 tokens a user a day" in text(driver, "#ops-usage .hint")
        assert broken_words(driver, "section.ops h2, section.ops table, form.decision") == []
        shoot(driver, "agent-ops-paused")
        driver.execute_script("document.getElementById('ops-approvals').scrollIntoView()")
        shoot(driver, "agent-ops-approvals")

        # bob sees no paused task; a decision posted as bob is refused, nothing changes.
        driver.get(f"{page}?principal=bob")
        assert driver.find_elements(By.ID, "paused-empty"), driver.page_source
        driver.get(f"{page}?principal=alice")
        driver.execute_script(
            "document.querySelector(arguments[0] + ' input[name=principal]').value = 'bob'",
            paused,
        )
        driver.find_element(By.CSS_SELECTOR, f"{paused} button.approve").click()
        wait_for(lambda: text(driver, "#error-title") == "Nothing was decided", "the refusal")
        assert "this principal may not decide it" in driver.page_source
        shoot(driver, "agent-ops-refused")
        # Without the CSRF token, and with a decision that is neither: refused too.
        form = {"task": task, "principal": "alice", "decision": "approve"}
        status, _ = post(f"{page}/decide", form, console.origin)
        assert status == 403
        driver.get(f"{page}?principal=alice")
        csrf = str(attr(driver, 'meta[name="kaos-csrf"]', "content"))
        status, body = post(f"{page}/decide", {**form, "decision": "maybe", "csrf": csrf},
                            console.origin)  # fmt: skip
        assert status == 400 and "the decision must be approve or deny" in body
        assert state_of(a2a(url, "alice", lambda t: t.get(task))) == "INPUT_REQUIRED"
        assert agent_json(url, "/v1/audit") == trail  # no decision, no call

        # alice approves: the run resumes, calls the tool once and finishes.
        driver.find_element(By.CSS_SELECTOR, f"{paused} input[name=reason]").send_keys("fine")
        driver.find_element(By.CSS_SELECTOR, f"{paused} button.approve").click()
        wait_for(lambda: attr(driver, "#decided", "data-decision") == "approve", "the decision")
        assert text(driver, "#task-state") in ("WORKING", "COMPLETED")
        shoot(driver, "agent-ops-decided")

        def finished() -> dict[str, Any] | None:
            found = a2a(url, "alice", lambda t: t.get(task))
            return found if state_of(found) == "COMPLETED" else None

        done = wait_for(finished, "the resumed run finished")
        assert answer_of(done) == "Done: QUIET <WORDS>"
        driver.find_element(By.ID, "back").click()
        wait_for(lambda: driver.find_elements(By.ID, "paused-empty"), "no task waits any more")
        trail = agent_json(url, "/v1/audit?limit=25")
        drawn = audit_on_page(driver)
        assert drawn == [(e["kind"], e["name"], e["outcome"]) for e in trail]
        assert ("approval", "shout", "approved") in drawn and drawn[-1] == ("tool", "shout", "ok")
        approval = next(r for r in table_rows(driver, ".audit-table") if r[1] == "approval")
        assert approval[6] == "approved by alice" and approval[3] == "alice"
        usage = agent_json(url, "/v1/usage")
        assert [r[:2] + r[2:6] for r in table_rows(driver, ".usage-table")[:-1]] == [
            [u["day"], u["user"], str(u["inputTokens"]), str(u["outputTokens"]),
             str(u["totalTokens"]), str(u["runs"])]
            for u in sorted(usage, key=lambda u: (u["day"], u["user"]), reverse=True)
        ]  # fmt: skip
        assert any(u["user"] == "alice" and u["totalTokens"] > 0 for u in usage), usage
        driver.execute_script("document.getElementById('ops-usage').scrollIntoView()")
        shoot(driver, "agent-ops-done")

        # A second run, denied with a reason: it finishes without calling the tool.
        second = str(a2a(url, "alice", lambda t: t.send("Shout the greeting", session=None,
                                                         wait=False))["id"])  # fmt: skip
        wait_for(lambda: state_of(a2a(url, "alice", lambda t: t.get(second))) == "INPUT_REQUIRED",
                 "the second task paused")  # fmt: skip
        driver.get(f"{page}?principal=alice")
        denied = f'#ops-approvals article[data-task="{second}"]'
        driver.find_element(By.CSS_SELECTOR, f"{denied} input[name=reason]").send_keys("not now")
        driver.find_element(By.CSS_SELECTOR, f"{denied} button.danger").click()
        wait_for(lambda: attr(driver, "#decided", "data-decision") == "deny", "the denial")
        assert "without the call" in text(driver, "main")

        def second_done() -> dict[str, Any] | None:
            found = a2a(url, "alice", lambda t: t.get(second))
            return found if state_of(found) == "COMPLETED" else None

        assert "denied" in answer_of(wait_for(second_done, "the denied run finished"))
        driver.get(f"{page}?principal=alice")
        drawn = audit_on_page(driver)
        assert drawn[-1] == ("approval", "shout", "denied"), drawn
        assert drawn.count(("tool", "shout", "ok")) == 1, drawn  # the denied call never ran
    finally:
        console.stop()
