"""The console in a real browser (Debian's headless chromium) against the test cluster.

The console opens on an empty namespace and says what to type; the test types it (the
real ``kaos samples deploy``), and the operator makes the samples Ready (kwok plays their
pods). The local stack runs the same resources as processes on loopback, and kwok
``PortForward`` objects send the API server's port-forwards to those processes. The
console (the real ``kaos ui``) knows none of that: it reads the cluster with the
kubeconfig and reaches agents and the memory service with ``kubectl port-forward``.

Colours, banners against badges, error pages and the chat form's layout have their own
module (``test_console_health``). Screenshots of every page (1280x800) are saved under
``$KAOS_TEST_ARTIFACTS/console``.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kaos_core.crds import MemoryStore
from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.e2e.console.harness import (
    SAMPLES,
    SMALL_WINDOW,
    Console,
    attr,
    browser,
    css_tone,
    forward_pods,
    off_host,
    requested_urls,
    rows,
    shoot,
    store_volume,
    text,
    wait_for,
)
from tests.support.cluster import Cluster
from tests.support.localstack import LocalStack, load_samples
from tests.support.procs import ServiceProcess, console_script

KAOS = console_script("kaos")
STORE = "memory-local"
# About 150 tokens an answer: with the small window two or three of them fold.
TRAM = " ".join(
    f"Stop {i}: the yellow tram climbs past tiled houses towards the castle." for i in range(8)
)
SCRIPT: list[dict[str, Any]] = [{"match": r"^Tell me about the tram", "reply": TRAM}]


@pytest.fixture
def driver() -> Iterator[webdriver.Chrome]:
    chrome = browser()
    try:
        yield chrome
    finally:
        chrome.quit()


@pytest.fixture
def stack(tmp_path: Path, k8s_namespace: str) -> Iterator[LocalStack]:
    """The samples as loopback processes, named in the test's namespace, with the same
    small window as the MemoryStore applied to the cluster."""
    samples = load_samples("local", namespace=k8s_namespace)
    doc = yaml.safe_load((SAMPLES / "memorystore-local.yaml").read_text())
    doc["metadata"]["namespace"] = k8s_namespace
    doc["spec"].setdefault("tiers", {})["shortTerm"] = dict(SMALL_WINDOW)
    samples = dataclasses.replace(samples, store=MemoryStore.model_validate(doc))
    st = LocalStack(tmp_path / "stack", samples=samples)
    try:
        st.start()
        st.devmodel.set_script(SCRIPT)
        yield st
    finally:
        st.stop()


@pytest.fixture
def empty(k8s_cluster: Cluster, k8s_namespace: str, kaos_operator: ServiceProcess) -> Iterator[str]:
    """An empty namespace with the operator and a volume for the store's claim (kwok has
    no provisioner); every KAOS object the test deploys deleted afterwards."""
    pv = f"pv-console-{uuid.uuid4().hex[:8]}"
    store_volume(k8s_cluster, k8s_namespace, f"{STORE}-data", pv)
    yield k8s_namespace
    k8s_cluster.kubectl(
        "delete", "agents.kaos.tools,modelapis.kaos.tools,mcpservers.kaos.tools,"
        "memorystores.kaos.tools", "--all", "-n", k8s_namespace, "--wait=true",
        check=False, timeout=120,
    )  # fmt: skip
    k8s_cluster.kubectl("delete", "pv", pv, "--wait=false", check=False)


def say(driver: webdriver.Chrome, message: str) -> str:
    """Send one chat message from the agent page; the streamed answer once it is done."""
    before = len(driver.find_elements(By.CSS_SELECTOR, "#transcript .msg.agent"))
    box = driver.find_element(By.ID, "message")
    box.clear()
    box.send_keys(message)
    driver.find_element(By.ID, "send").click()

    def answered() -> str | None:
        if attr(driver, "#chat", "data-state") == "error":
            raise AssertionError(text(driver, "#transcript .msg.error"))
        answers = driver.find_elements(By.CSS_SELECTOR, "#transcript .msg.agent")
        if len(answers) > before and attr(driver, "#chat", "data-state") == "done":
            return answers[-1].find_element(By.CSS_SELECTOR, ".text").text
        return None

    return wait_for(answered, f"the answer to {message!r}", timeout=90)


def deploy_as_shown(k8s_cluster: Cluster, commands: list[str]) -> None:
    """Run the empty state's commands as a user would type them; each must succeed."""
    for line in commands:
        argv = shlex.split(line)
        assert argv[0] == "kaos", line
        done = subprocess.run(
            [KAOS, *argv[1:]], env=k8s_cluster.env(), capture_output=True, text=True,
            timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (line, done.stdout, done.stderr)


def test_console_overview_chat_memory_and_degraded(
    k8s_cluster: Cluster, empty: str, stack: LocalStack, driver: webdriver.Chrome, tmp_path: Path
) -> None:
    ns = empty
    console = Console(k8s_cluster.env(), "-n", ns, log=tmp_path / "console.log")
    try:
        base = console.url
        # An empty namespace: the page says what to type, whole commands, in order; the
        # live dot is green (the stream is open and the cluster answers).
        driver.get(base + "/")
        loaded = driver.execute_script("return performance.timeOrigin")
        commands = text(driver, "#empty-commands").splitlines()
        assert commands == [
            f"kaos samples deploy devmodel -n {ns}",
            f"kaos samples deploy modelapi -n {ns}",
            f"kaos samples deploy mcpserver -n {ns}",
            f"kaos samples deploy memorystore-local -n {ns}",
            f"kaos samples deploy agents -n {ns} --wait",
        ]
        wait_for(lambda: attr(driver, "#live", "data-connected") == "true", "the live stream")
        assert css_tone(driver, "#live", "color") == "ok"
        shoot(driver, "overview-empty")
        deploy_as_shown(k8s_cluster, commands)
        # The store's window made small (as the local stack's is): a few chat turns fold.
        k8s_cluster.kubectl(
            "patch", "memorystore", STORE, "-n", ns, "--type=merge",
            "-p", json.dumps({"spec": {"tiers": {"shortTerm": SMALL_WINDOW}}}),
        )  # fmt: skip

        # Overview: every sample with its phase, updated live as the operator works.
        samples = {
            ("Agent", "coordinator"),
            ("Agent", "researcher"),
            ("ModelAPI", "devmodel-api"),
            ("MCPServer", "text-tools"),
            ("MemoryStore", STORE),
        }
        wait_for(
            lambda: all(rows(driver).get(key) == "Ready" for key in samples),
            "every sample Ready on the overview",
            timeout=120,
        )
        assert driver.execute_script("return performance.timeOrigin") == loaded, "no reload"
        nodes = {
            n.get_attribute("data-node")
            for n in driver.find_elements(By.CSS_SELECTOR, "svg.topology [data-node]")
        }
        assert {f"{kind}/{name}" for kind, name in samples} <= nodes
        assert driver.find_elements(By.CSS_SELECTOR, "svg.topology .edge-delegates")
        shoot(driver, "overview")

        # Before anything answers on the Services, the console's own probe fails on a
        # Ready agent: a warning that names the probe, beside the green badge, no error.
        driver.get(f"{base}/agents/{ns}/coordinator")
        assert text(driver, "#health") == "Ready"
        assert css_tone(driver, "#health .phase", "background-color") == "ok"
        probe = text(driver, '.problem[data-check="probe"]')
        assert probe.startswith(
            "Console probe failed: its agent card (/.well-known/agent-card.json on "
            "svc/coordinator) did not answer"
        ), driver.page_source
        assert "though the operator reports Agent coordinator Ready." in probe
        assert css_tone(driver, '.problem[data-check="probe"]', "color") == "warn"
        assert not driver.find_elements(By.CSS_SELECTOR, ".problem.tone-error")
        shoot(driver, "agent-probe-failed")

        # The agents and the store answer on their Services (kwok forwards to loopback).
        forward_pods(
            k8s_cluster,
            ns,
            {
                "coordinator": stack.plan["Agent/coordinator"].port,
                "researcher": stack.plan["Agent/researcher"].port,
                STORE: stack.plan[f"MemoryStore/{STORE}"].port,
            },
        )

        # Agent page: the tools from the running agent's card, then a streamed chat turn.
        session, principal = f"s-{uuid.uuid4().hex[:10]}", "alice"
        agent = f"{base}/agents/{ns}/coordinator?session={session}&principal={principal}"
        driver.get(agent)
        tools = text(driver, ".tools-table")
        assert "delegate_to_researcher" in tools, tools
        assert "as the running agent advertises them" in text(driver, "section.tools")
        assert driver.find_element(By.ID, "session").get_attribute("value") == session
        assert driver.find_element(By.ID, "principal").get_attribute("value") == principal
        assert say(driver, "I live in Lisbon.") == "Echo: I live in Lisbon."
        shoot(driver, "agent-chat")

        scope = f"level=session&session={session}&principal={principal}"
        inspector = f"{base}/memory/{ns}/{STORE}?{scope}"

        def window_turns() -> int:
            driver.get(inspector)
            return int(attr(driver, "#window-tokens", "data-turns") or -1)

        # The memory write after the answer is the agent's; the window shows it once done.
        wait_for(lambda: window_turns() == 2, "two turns in the window")
        tokens_before = int(attr(driver, "#window-tokens", "data-tokens") or 0)
        assert "400-token budget" in text(driver, "#window-tokens")

        driver.get(agent)
        answer = say(driver, "Tell me about the tram, part 1")
        assert answer == TRAM
        assert int(attr(driver, "#chat", "data-pieces") or 0) > 1, "the answer came in pieces"
        wait_for(lambda: window_turns() == 4, "the window grown to four turns")
        assert int(attr(driver, "#window-tokens", "data-tokens") or 0) > tokens_before

        # More turns than the window holds: a fold writes digest version 1, then 2.
        def digest_version() -> int | None:
            driver.get(inspector)
            found = attr(driver, "#digest-current", "data-version")
            return int(found) if found else None

        driver.get(agent)
        say(driver, "Tell me about the tram, part 2")
        first = wait_for(digest_version, "a first digest version", timeout=120)
        driver.get(agent)
        say(driver, "Tell me about the tram, part 3")
        say(driver, "Tell me about the tram, part 4")
        wait_for(lambda: (digest_version() or 0) > first, "a new digest version", timeout=120)
        assert driver.find_elements(By.CSS_SELECTOR, "#digest-diff ins")
        assert "User said: I live in Lisbon." in text(driver, "blockquote.digest")

        # Facts extracted from the conversation, with their attribution.
        def lisbon_fact() -> bool:
            driver.get(inspector)
            return "I live in Lisbon." in text(driver, ".facts-table")

        wait_for(lisbon_fact, "the extracted fact", timeout=120)
        fact_row = next(
            r
            for r in driver.find_elements(By.CSS_SELECTOR, ".facts-table tbody tr")
            if "I live in Lisbon." in r.text
        )
        assert principal in fact_row.text and session in fact_row.text
        assert "coordinator" in fact_row.text
        # Its provenance: the user said it; the tooltip names the turns and the model.
        source = fact_row.find_element(By.CSS_SELECTOR, "td .source")
        assert source.text == "user", fact_row.text
        tip = source.get_attribute("title") or ""
        assert tip.startswith("turns ") and "extracted by " in tip, tip
        # The agent level, as `kaos memory list --level agent --agent coordinator`: the
        # console reads as that agent; another agent of the store remembers none of it.
        driver.get(f"{base}/memory/{ns}/{STORE}?level=agent&agent=coordinator"
                   f"&principal={principal}")  # fmt: skip
        assert driver.find_element(By.ID, "level").get_attribute("value") == "agent"
        assert "I live in Lisbon." in text(driver, ".facts-table")
        driver.get(f"{base}/memory/{ns}/{STORE}?level=agent&agent=researcher"
                   f"&principal={principal}")  # fmt: skip
        assert driver.find_elements(By.ID, "facts-empty"), driver.page_source
        shoot(driver, "memory-agent-level")
        wait_for(lisbon_fact, "the fact at the session level again")
        shoot(driver, "memory-inspector")
        driver.execute_script("document.getElementById('tier-facts').scrollIntoView()")
        shoot(driver, "memory-facts")
        driver.get(f"{base}/memory/{ns}/{STORE}?level=session&session={session}"
                   f"&principal={principal}&q=Lisbon")  # fmt: skip
        assert "by relevance" in text(driver, "#facts-count")
        assert "I live in Lisbon." in text(driver, ".facts-table")

        # Forget the session: a confirmation says what goes, then the counts, then nothing.
        driver.get(inspector)
        driver.find_element(By.ID, "forget-link").click()
        erases = text(driver, "#erases")
        assert f"session {session}" in erases and f"principal {principal}" in erases
        shoot(driver, "forget-confirm")
        driver.find_element(By.ID, "confirm-forget").click()
        # The click posts the form: the counts are on the page that answers it, once the
        # browser has loaded it (reading at once can still see the confirmation page).
        erased = wait_for(
            lambda: driver.find_elements(By.CSS_SELECTOR, ".forgotten-table tbody tr"),
            "the erased counts",
        )
        cells = [[c.text for c in r.find_elements(By.TAG_NAME, "td")] for r in erased]
        counts = {tier: int(n) for tier, n in cells}
        assert counts["short term (window turns)"] > 0 and counts["long term (facts)"] > 0, counts
        shoot(driver, "forgotten")
        driver.get(inspector)
        assert attr(driver, "#window-tokens", "data-turns") == "0"
        assert driver.find_elements(By.ID, "digest-none")
        assert driver.find_elements(By.ID, "facts-empty")

        # The memory service goes down while the store stays Ready: the inspector's banner
        # names the failed check (the console's probe) in amber beside the green badge.
        stack.procs[f"MemoryStore/{STORE}"].stop()
        driver.get(inspector)
        down = text(driver, '.problem[data-check="probe"]')
        assert down.startswith(
            f"Console probe failed: its memory service (/readyz on svc/{STORE}) did not answer"
        ), driver.page_source
        assert f"though the operator reports MemoryStore {STORE} Ready." in down
        assert "agents go on without memory (degraded)" in down
        assert css_tone(driver, '.problem[data-check="probe"]', "color") == "warn"
        assert text(driver, "#health") == "Ready"
        assert css_tone(driver, "#health .phase", "background-color") == "ok"
        assert not driver.find_elements(By.ID, "tier-window")
        shoot(driver, "memory-down")

        # A deleted MemoryStore: the agents' MemoryDegraded shows up live on the overview.
        driver.get(base + "/")
        loaded = driver.execute_script("return performance.timeOrigin")
        k8s_cluster.kubectl("delete", "memorystore", STORE, "-n", ns, "--wait=false")
        degraded = (
            'tr[data-kind="Agent"][data-name="coordinator"] '
            '.chip.degraded[data-condition="MemoryDegraded"]'
        )
        wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, degraded), "MemoryDegraded")
        assert driver.execute_script("return performance.timeOrigin") == loaded, "no reload"
        assert css_tone(driver, degraded, "background-color") == "warn"
        badge = 'tr[data-kind="Agent"][data-name="coordinator"] .phase'
        wait_for(lambda: text(driver, badge) == "Degraded", "the Degraded badge")
        assert css_tone(driver, badge, "background-color") == "warn"
        node = 'svg.topology [data-node="Agent/coordinator"] rect'
        assert css_tone(driver, node, "stroke") == "warn"
        shoot(driver, "overview-degraded")
        # The deleted store's inspector is a 404 page, not a "degraded" one.
        driver.get(inspector)
        assert text(driver, "#not-found") == f"No MemoryStore {STORE} in namespace {ns}"
        assert "degraded" not in driver.page_source

        # Every request any page made went to the console on 127.0.0.1, nowhere else.
        urls = requested_urls(driver)
        assert urls and off_host(urls, console.origin) == [], off_host(urls, console.origin)
        assert console.origin.startswith("http://127.0.0.1:")
    finally:
        console.stop()


def test_console_says_why_it_cannot_list(
    k8s_cluster: Cluster, kaos_crds: Path, driver: webdriver.Chrome, tmp_path: Path
) -> None:
    """Missing RBAC names the verb and the resource; an unreachable cluster says so."""
    workdir = k8s_cluster.workdir
    scheduler = (workdir / "scheduler.kubeconfig") if workdir else None
    if scheduler is None or not scheduler.exists():
        pytest.skip("a reused cluster without the scheduler's kubeconfig")
    console = Console({**k8s_cluster.env(), "KUBECONFIG": str(scheduler)}, log=tmp_path / "c1.log")
    try:
        driver.get(console.url + "/")
        problem = text(driver, ".problem-forbidden")
        assert "may not list agents.kaos.tools" in problem, driver.page_source
        shoot(driver, "overview-forbidden")
    finally:
        console.stop()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    kubeconfig = tmp_path / "nowhere.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "nowhere",
        "clusters": [{"name": "nowhere", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
        "users": [{"name": "nobody", "user": {"token": "not-a-secret"}}],
        "contexts": [{"name": "nowhere", "context": {"cluster": "nowhere", "user": "nobody"}}],
    }))  # fmt: skip
    console = Console({**k8s_cluster.env(), "KUBECONFIG": str(kubeconfig)}, log=tmp_path / "c2.log")
    try:
        driver.get(console.url + "/")
        problem = text(driver, ".problem-unreachable")
        assert "cannot be reached" in problem and f"127.0.0.1:{port}" in problem, problem
        # The console's own stream is open, yet the dot is red: it shows the cluster.
        wait_for(lambda: attr(driver, "#live", "data-connected") == "true", "the live stream")
        assert attr(driver, "#live", "title") == "the cluster cannot be reached"
        assert css_tone(driver, "#live", "color") == "error"
        assert not driver.find_elements(By.ID, "empty"), "no empty state for a cluster not seen"
        shoot(driver, "overview-unreachable")
        # A page that needs the cluster is an error page with the way back.
        driver.get(console.url + "/agents/default/coordinator")
        assert text(driver, "#error-title") == "The cluster cannot be reached"
        assert f"127.0.0.1:{port}" in text(driver, ".problem-unreachable")
        driver.find_element(By.ID, "back").click()
        wait_for(lambda: driver.find_elements(By.ID, "overview"), "the overview again")
    finally:
        console.stop()


def test_binding_another_address_is_refused(tmp_path: Path) -> None:
    for address in ("0.0.0.0", "192.0.2.2", "::"):
        proc = subprocess.run(
            [KAOS, "ui", "--no-browser", "--address", address, "--port", "0"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert proc.returncode == 2, proc
        assert proc.stderr.startswith(f"error: refusing to bind {address}: the console acts")
        assert "--allow-remote" in proc.stderr and "Traceback" not in proc.stderr
