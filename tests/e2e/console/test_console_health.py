"""The console tells the cluster's story in the CLI's colours, and never against itself.

The samples are applied to the real API server and their status is written as the
operator would write it (no operator runs, so nothing overwrites it): a Ready ModelAPI, a
coordinator Ready but MemoryDegraded, a researcher Failed (OverrideRefused), an MCP
server on its way (Pending), a Ready MemoryStore. No Service exists, so every probe the
console makes of an agent or the store fails. A real chromium (1280x800) then checks the
computed colours of badges, chips, banners and topology boxes against
``kaos_cli.health`` (what the CLI shows for the same object), that each banner names the
check it comes from, the 404 pages and the chat form's layout.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kaos_cli.health import health
from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.e2e.console.harness import (
    Console,
    apply,
    attr,
    broken_words,
    browser,
    css_tone,
    sample_documents,
    shoot,
    text,
    tone_of,
    wait_for,
)
from tests.support.cluster import Cluster

NOW = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(type_: str, status: str, reason: str, message: str = "") -> dict[str, str]:
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": NOW}  # fmt: skip


READY = cond("Ready", "True", "Available")
DEGRADED = cond(
    "MemoryDegraded",
    "True",
    "MemoryStoreNotReady",
    "MemoryStore memory-local is not Ready: memory is degraded",
)
REFUSED = cond("Ready", "False", "OverrideRefused", "MEMORY_ENDPOINT is reserved for the operator")
PROGRESSING = cond("Ready", "False", "DeploymentProgressing", "waiting for pods")
# What the operator would write: (resource, name) -> status.
STATUSES: dict[tuple[str, str], dict[str, Any]] = {
    ("modelapis.kaos.tools", "devmodel-api"): {"phase": "Ready", "conditions": [READY]},
    ("mcpservers.kaos.tools", "text-tools"): {"phase": "Pending", "conditions": [PROGRESSING]},
    ("memorystores.kaos.tools", "memory-local"): {"phase": "Ready", "conditions": [READY]},
    ("agents.kaos.tools", "coordinator"): {"phase": "Ready", "conditions": [READY, DEGRADED]},
    ("agents.kaos.tools", "researcher"): {"phase": "Failed", "conditions": [REFUSED]},
}
TONES = {"devmodel-api": "ok", "text-tools": "progress", "memory-local": "ok",
         "coordinator": "warn", "researcher": "error"}  # fmt: skip


@pytest.fixture
def painted(k8s_cluster: Cluster, kaos_crds: Path, k8s_namespace: str) -> Iterator[str]:
    """The samples' KAOS objects in the namespace with the statuses above."""
    ns = k8s_namespace
    apply(k8s_cluster, [d for d in sample_documents(ns) if d["apiVersion"].startswith("kaos.")])
    for (resource, name), status in STATUSES.items():
        k8s_cluster.kubectl(
            "patch", resource, name, "-n", ns, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": status}),
        )  # fmt: skip
    yield ns


@pytest.fixture
def console(k8s_cluster: Cluster, painted: str, tmp_path: Path) -> Iterator[Console]:
    started = Console(k8s_cluster.env(), "-n", painted, log=tmp_path / "console.log")
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def driver() -> Iterator[webdriver.Chrome]:
    chrome = browser()
    try:
        yield chrome
    finally:
        chrome.quit()


def cli_tone(k8s_cluster: Cluster, ns: str, resource: str, name: str) -> str:
    """The tone the CLI gives the object as the API server has it now."""
    obj = json.loads(k8s_cluster.kubectl("get", resource, name, "-n", ns, "-o", "json").stdout)
    return health(obj).tone


def banners(driver: webdriver.Chrome) -> list[tuple[str, str, str]]:
    """Every banner: (its check, the tone its colour reads as, its text)."""
    return [
        (b.get_attribute("data-check") or "", tone_of(b.value_of_css_property("color")), b.text)
        for b in driver.find_elements(By.CSS_SELECTOR, ".problem")
    ]


def status_of(url: str) -> int:
    request = urllib.request.Request(url, headers={"Accept": "text/html"})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_colours_mean_what_they_mean_in_the_cli(
    k8s_cluster: Cluster, painted: str, console: Console, driver: webdriver.Chrome
) -> None:
    ns = painted
    driver.get(console.url + "/")
    for (resource, name), _ in STATUSES.items():
        badge = f'tr[data-name="{name}"] .phase'
        assert css_tone(driver, badge, "background-color") == TONES[name], name
        assert cli_tone(k8s_cluster, ns, resource, name) == TONES[name], name
    words = {name: text(driver, f'tr[data-name="{name}"] .phase') for _, name in STATUSES}
    assert words == {"devmodel-api": "Ready", "text-tools": "Pending", "memory-local": "Ready",
                     "coordinator": "Degraded", "researcher": "Failed"}  # fmt: skip
    chip = 'tr[data-name="coordinator"] .chip[data-condition="MemoryDegraded"]'
    assert css_tone(driver, chip, "background-color") == "warn"
    assert css_tone(driver, 'tr[data-name="researcher"] .chip[data-condition="Ready"]',
                    "color") == "error"  # fmt: skip
    nodes = {"ModelAPI/devmodel-api": "ok", "MCPServer/text-tools": "progress",
             "MemoryStore/memory-local": "ok", "Agent/coordinator": "warn",
             "Agent/researcher": "error"}  # fmt: skip
    for node, tone in nodes.items():
        assert css_tone(driver, f'svg.topology [data-node="{node}"] rect', "stroke") == tone, node
    wait_for(lambda: attr(driver, "#live", "data-connected") == "true", "the live stream")
    assert css_tone(driver, "#live", "color") == "ok"
    shoot(driver, "overview-health")


def test_banners_name_the_failed_check_and_agree_with_the_badge(
    painted: str, console: Console, driver: webdriver.Chrome
) -> None:
    ns = painted
    # Degraded, and the probe fails (no Service): two amber banners, each naming its check.
    driver.get(f"{console.url}/agents/{ns}/coordinator")
    assert text(driver, "#health") == "Degraded"
    assert css_tone(driver, "#health .phase", "background-color") == "warn"
    operator, probe = banners(driver)
    assert operator == (
        "operator", "warn",
        "Operator: Agent coordinator is Degraded, MemoryDegraded=True MemoryStoreNotReady: "
        "MemoryStore memory-local is not Ready: memory is degraded",
    )  # fmt: skip
    assert probe[:2] == ("probe", "warn")
    assert probe[2].startswith(
        "Console probe failed: its agent card (/.well-known/agent-card.json on svc/coordinator)"
        " did not answer ("
    ), probe
    assert probe[2].endswith(
        "though the operator reports Agent coordinator Ready. Chat fails until it answers."
    )
    # At 1280 px the chat form, the facts and the tools table split no word, and each
    # label sits on one line with its field.
    assert broken_words(driver, "#chat-form, dl.facts, .tools-table") == []
    split = driver.execute_script(
        "return Array.from(document.querySelectorAll('#chat-form label.field'))"
        ".filter((l) => l.getBoundingClientRect().height >"
        " l.querySelector('input').getBoundingClientRect().height + 4)"
        ".map((l) => l.textContent.trim());"
    )
    assert split == []
    shoot(driver, "agent-degraded")

    # Failed: one red banner, the operator's condition first, the probe what follows.
    driver.get(f"{console.url}/agents/{ns}/researcher")
    assert text(driver, "#health") == "Failed"
    assert css_tone(driver, "#health .phase", "background-color") == "error"
    [(check, tone, said)] = banners(driver)
    assert (check, tone) == ("operator", "error")
    assert said.startswith(
        "Operator: Agent researcher is Failed, Ready=False OverrideRefused: MEMORY_ENDPOINT is "
        "reserved for the operator. Console probe failed too: its agent card"
    ), said
    shoot(driver, "agent-failed")

    # A Ready store its probe cannot reach: green badge, an amber banner naming the probe.
    driver.get(f"{console.url}/memory/{ns}/memory-local")
    assert css_tone(driver, "#health .phase", "background-color") == "ok"
    [(check, tone, said)] = banners(driver)
    assert (check, tone) == ("probe", "warn")
    assert (
        said.startswith(
            "Console probe failed: its memory service (/readyz on svc/memory-local) did not answer"
        )
        and "though the operator reports MemoryStore memory-local Ready." in said
    )
    # The inspector's levels are the CLI's, the agent level offering the store's agents.
    levels = [o.get_attribute("value") for o in driver.find_elements(By.CSS_SELECTOR,
                                                                     "#level option")]  # fmt: skip
    assert levels == ["session", "agent", "user", "store"]
    agents = [o.get_attribute("value") for o in driver.find_elements(By.CSS_SELECTOR,
                                                                     "#agents option")]  # fmt: skip
    assert agents == ["coordinator", "researcher"]
    shoot(driver, "memory-probe-failed")


def test_unknown_names_are_404_pages_with_the_way_back(
    painted: str, console: Console, driver: webdriver.Chrome
) -> None:
    ns = painted
    agent = f"{console.url}/agents/{ns}/reseacher"
    assert status_of(agent) == 404
    driver.get(agent)
    assert text(driver, "#not-found") == f"No Agent reseacher in namespace {ns}"
    assert text(driver, "#did-you-mean") == "Did you mean researcher?"
    assert text(driver, "#known") == f"The Agents in namespace {ns}: coordinator, researcher."
    shoot(driver, "agent-not-found")
    driver.find_element(By.CSS_SELECTOR, "#did-you-mean a").click()
    wait_for(lambda: text(driver, "h1").startswith("Agent researcher"), "the suggested agent")

    store = f"{console.url}/memory/{ns}/memory-locl"
    assert status_of(store) == 404
    driver.get(store)
    assert text(driver, "#not-found") == f"No MemoryStore memory-locl in namespace {ns}"
    assert text(driver, "#did-you-mean") == "Did you mean memory-local?"
    assert "degraded" not in text(driver, "main")
    driver.find_element(By.ID, "back").click()
    wait_for(lambda: driver.find_elements(By.ID, "overview"), "the overview")

    nowhere = f"{console.url}/agent/{ns}/coordinator"
    assert status_of(nowhere) == 404
    driver.get(nowhere)
    assert text(driver, ".problem") == f"the console has no page at /agent/{ns}/coordinator"
    assert driver.find_element(By.ID, "back").get_attribute("href") == console.url + "/"
