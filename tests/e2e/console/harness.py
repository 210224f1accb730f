"""What the console's browser tests drive: the system chromium, ``kaos ui`` and the stack.

- ``browser()``: Debian's chromium through its chromedriver (Selenium), headless, a
  1280x800 window, with the performance (network) log on so a test can list every
  request the page made.
- ``Console``: the real ``kaos ui`` process with the cluster's kubeconfig, on a free
  loopback port, stopped by its own pid.
- ``deploy_samples``: the sample resources applied to the test namespace (the operator
  makes them Ready; kwok plays the pods), the MemoryStore with a small window budget so a
  few chat turns fold.
- ``broken_words`` and ``css_tone``: what a test asserts of the layout (no word split
  across lines) and of colours (the health tone a computed colour reads as).
- ``forward_pods``: kwok ``PortForward`` objects that send ``kubectl port-forward`` to
  the simulated pods of the agents and the store to the local stack's processes on
  loopback. The console itself reaches them as it would in any cluster: through the API
  server (``kubectl port-forward svc/...``).
"""

from __future__ import annotations

import colorsys
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import yaml
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from tests.support.cluster import Cluster
from tests.support.procs import REPO_ROOT, console_script

CHROMIUM = Path(os.environ.get("KAOS_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("KAOS_CHROMEDRIVER", "/usr/bin/chromedriver"))
WIDTH, HEIGHT = 1280, 800
SAMPLES = REPO_ROOT / "samples"
# A window of 400 tokens that folds past 300 (target: 200): three or four chat turns.
SMALL_WINDOW = {"tokenBudget": 400, "foldTriggerTokens": 300}
T = TypeVar("T")


def artifacts_dir() -> Path:
    """Where screenshots go: ``$KAOS_TEST_ARTIFACTS/console`` or a folder under /tmp."""
    root = Path(os.environ.get("KAOS_TEST_ARTIFACTS", "/tmp/kaos-test-artifacts"))
    path = root / "console"
    path.mkdir(parents=True, exist_ok=True)
    return path


def browser() -> webdriver.Chrome:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        raise RuntimeError(
            f"no {', '.join(missing)}: install Debian's chromium and chromium-driver "
            "(make tools does)"
        )
    options = Options()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        f"--window-size={WIDTH},{HEIGHT}",
        "--no-sandbox",  # root in CI
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    # The window includes the browser's frame: pin the page's viewport to 1280x800.
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
    )
    return driver


def requested_urls(driver: webdriver.Chrome) -> list[str]:
    """Every URL the page asked the network for since the last call (CDP network log)."""
    urls = []
    for entry in driver.get_log("performance"):  # type: ignore[no-untyped-call]
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(str(message["params"]["request"]["url"]))
    return urls


def off_host(urls: list[str], origin: str) -> list[str]:
    """The URLs that go anywhere but ``origin`` (data: URLs stay in the page)."""
    return [u for u in urls if not (u.startswith(origin + "/") or u.startswith("data:"))]


def wait_for(probe: Callable[[], T | None], what: str, timeout: float = 60) -> T:
    """Poll ``probe`` until it returns something truthy, or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            found = probe()
            if found:
                return found
        except WebDriverException as exc:  # the page is mid-update; try again
            last = exc
        time.sleep(0.2)  # poll interval of a deadline wait
    detail = f" (last error: {last})" if last else ""
    raise AssertionError(f"timed out waiting for {what}{detail}")


class Console:
    """``kaos ui --no-browser`` on a free loopback port, with the cluster's kubeconfig."""

    def __init__(self, env: dict[str, str], *args: str, log: Path) -> None:
        self.log_path = log
        self.log = log.open("w")
        self.proc = subprocess.Popen(
            [console_script("kaos"), "ui", "--no-browser", "--port", "0", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=self.log,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self.url = self._announced()
        parts = urlsplit(self.url)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        # Keep reading stdout so the console never blocks on a full pipe.
        self._drain = threading.Thread(target=self._copy, daemon=True)
        self._drain.start()

    def _announced(self, timeout: float = 30) -> str:
        box: list[str] = []

        def read() -> None:
            assert self.proc.stdout is not None
            line = self.proc.stdout.readline()
            box.append(line)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        line = box[0] if box else ""
        if "KAOS console on " not in line:
            self.stop()
            raise RuntimeError(f"kaos ui did not start: {line!r} {self.log_path.read_text()}")
        return line.split("KAOS console on ", 1)[1].split()[0].rstrip("/")

    def _copy(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.log.write(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def sample_documents(namespace: str) -> list[dict[str, Any]]:
    """The samples as ``kubectl apply -n`` would send them, the store's window made small."""
    docs: list[dict[str, Any]] = []
    for name in ("devmodel.yaml", "modelapi.yaml", "mcpserver.yaml", "memorystore-local.yaml",
                 "agents.yaml"):  # fmt: skip
        for doc in yaml.safe_load_all((SAMPLES / name).read_text()):
            if not doc:
                continue
            doc["metadata"]["namespace"] = namespace
            if doc["kind"] == "MemoryStore":
                doc["spec"].setdefault("tiers", {})["shortTerm"] = dict(SMALL_WINDOW)
            docs.append(doc)
    return docs


def apply(cluster: Cluster, docs: list[dict[str, Any]]) -> None:
    text = "\n---\n".join(json.dumps(d) for d in docs)
    cluster.kubectl("apply", "-f", "-", input=text)


def store_volume(cluster: Cluster, namespace: str, claim: str, name: str) -> None:
    """A PersistentVolume pre-bound to the store's claim (kwok has no provisioner)."""
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete",
            "hostPath": {"path": f"/tmp/{name}"},
            "claimRef": {"namespace": namespace, "name": claim},
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pv))


def _owner(pod: dict[str, Any]) -> str:
    """The workload a pod belongs to: its StatefulSet, or its ReplicaSet's Deployment."""
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref["kind"] == "ReplicaSet":
            return str(ref["name"]).rsplit("-", 1)[0]
        return str(ref["name"])
    return ""


def forward_pods(cluster: Cluster, namespace: str, targets: dict[str, int]) -> None:
    """Point every running pod of each workload in ``targets`` at a loopback port."""

    def running() -> dict[str, str] | None:
        out = cluster.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout
        pods = {}
        for pod in json.loads(out)["items"]:
            owner = _owner(pod)
            running = (pod.get("status") or {}).get("phase") == "Running"
            if owner in targets and running and not pod["metadata"].get("deletionTimestamp"):
                pods[pod["metadata"]["name"]] = owner
        return pods if set(pods.values()) == set(targets) else None

    pods = wait_for(running, f"running pods of {', '.join(sorted(targets))}", timeout=120)
    docs = [
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "PortForward",
            "metadata": {"name": pod, "namespace": namespace},
            "spec": {"forwards": [{"target": {"address": "127.0.0.1", "port": targets[owner]}}]},
        }
        for pod, owner in pods.items()
    ]
    apply(cluster, docs)


# Words of an element's text that the layout split across two lines: a word whose range
# has boxes at two heights. Arguments: the CSS selector of the elements to check.
BROKEN_WORDS_JS = """
const broken = [];
for (const root of document.querySelectorAll(arguments[0])) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const words = /\\S+/g;
    let m;
    while ((m = words.exec(node.textContent))) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const tops = new Set(Array.from(range.getClientRects())
        .filter((r) => r.width > 0).map((r) => Math.round(r.top)));
      if (tops.size > 1) broken.push(m[0]);
    }
  }
}
return broken;
"""


def broken_words(driver: webdriver.Chrome, css: str) -> list[str]:
    """The words inside ``css`` that the page broke across lines (none is the goal)."""
    return list(driver.execute_script(BROKEN_WORDS_JS, css))


def rgb(value: str) -> tuple[int, int, int]:
    """``rgb(r, g, b)`` or ``rgba(r, g, b, a)`` as computed by the browser."""
    numbers = value[value.index("(") + 1 : value.index(")")].split(",")
    r, g, b = (int(float(n)) for n in numbers[:3])
    return r, g, b


def tone_of(value: str) -> str:
    """The health tone a computed colour reads as: by hue, grey when unsaturated
    (error red, warn amber, ok green, progress blue, unknown grey)."""
    r, g, b = rgb(value)
    hue, saturation, _ = colorsys.rgb_to_hsv(r / 255, g / 255, b / 255)
    degrees = hue * 360
    if saturation < 0.3:
        return "unknown"
    if degrees < 15 or degrees >= 345:
        return "error"
    if 20 <= degrees < 60:
        return "warn"
    if 90 <= degrees < 170:
        return "ok"
    if 190 <= degrees < 260:
        return "progress"
    return f"hue {degrees:.0f}"


def css_tone(driver: webdriver.Chrome, css: str, prop: str) -> str:
    """The tone of the first ``css`` element's computed ``prop`` (e.g. background-color),
    read in one script: a live region replaced in between cannot leave a stale element."""
    value = driver.execute_script(
        "const el = document.querySelector(arguments[0]);"
        "return el ? getComputedStyle(el).getPropertyValue(arguments[1]) : null;",
        css,
        prop,
    )
    assert value, f"no {css} on the page"
    return tone_of(str(value))


def shoot(driver: webdriver.Chrome, name: str) -> Path:
    path = artifacts_dir() / f"{name}.png"
    assert driver.save_screenshot(str(path))
    size = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    assert size == [WIDTH, HEIGHT], size
    return path


def rows(driver: webdriver.Chrome) -> dict[tuple[str, str], str]:
    return {
        (r.get_attribute("data-kind") or "", r.get_attribute("data-name") or ""): (
            r.get_attribute("data-phase") or ""
        )
        for r in driver.find_elements(By.CSS_SELECTOR, "tr[data-kind]")
    }


def text(driver: webdriver.Chrome, css: str) -> str:
    """The first ``css`` element's rendered text ("" if none), read in one script (a live
    region replaced in between cannot leave a stale element)."""
    found = driver.execute_script(
        "const el = document.querySelector(arguments[0]); return el ? el.innerText : '';", css
    )
    return str(found).strip()


def attr(driver: webdriver.Chrome, css: str, name: str) -> str | None:
    found = driver.execute_script(
        "const el = document.querySelector(arguments[0]);"
        "return el ? el.getAttribute(arguments[1]) : null;",
        css,
        name,
    )
    return None if found is None else str(found)
