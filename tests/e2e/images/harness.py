"""Looking inside the images as a runtime would: buildah on hack/images's own store.

An image's configuration (``buildah inspect``), its files (``buildah mount``) and processes
run in it (``buildah run``, with runc), as the image's own user, without a network or on
the host's for a server on a loopback port.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.procs import REPO_ROOT

HACK_IMAGES = REPO_ROOT / "hack" / "images"
KAOS_IMAGES = {"memory": "kaos-memory", "agent": "kaos-agent", "operator": "kaos-operator"}
NONROOT = "65532:65532"
SITE_PACKAGES = "opt/*/venv/lib/python3*/site-packages"


@dataclass(frozen=True)
class Buildah:
    """buildah on hack/images's own store (it never touches the machine's default one)."""

    root: Path
    runroot: Path

    def argv(self, *args: str) -> list[str]:
        return ["buildah", "--root", str(self.root), "--runroot", str(self.runroot), *args]

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args), capture_output=True, text=True, check=check, timeout=600
        )

    def config(self, ref: str) -> dict[str, object]:
        data = json.loads(self("inspect", "--type", "image", ref).stdout)
        config: dict[str, object] = data["OCIv1"]["config"]
        return config


@dataclass(frozen=True)
class Built:
    buildah: Buildah
    # ref -> archive, from `hack/images --list`
    archives: dict[str, Path]


@dataclass(frozen=True)
class Containers:
    """Working containers made by one test, removed after it."""

    buildah: Buildah
    made: list[str]

    def new(self, ref: str) -> str:
        name = self.buildah("from", "--quiet", ref).stdout.strip()
        self.made.append(name)
        return name

    @contextmanager
    def mounted(self, ref: str) -> Iterator[Path]:
        """The root of a fresh container's file system, unmounted after."""
        name = self.new(ref)
        root = Path(self.buildah("mount", name).stdout.strip())
        try:
            yield root
        finally:
            self.buildah("umount", name, check=False)

    def run(
        self,
        ref: str,
        *argv: str,
        volumes: tuple[str, ...] = (),
        network: str = "none",
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """argv in a fresh container of ref, as the image's own user."""
        name = self.new(ref)
        return self.buildah(
            "run", *_run_options(network, volumes, env), name, "--", *argv, check=False
        )

    @contextmanager
    def serving(
        self,
        ref: str,
        argv: list[str],
        url: str,
        *,
        log: Path,
        env: dict[str, str] | None = None,
        volumes: tuple[str, ...] = (),
    ) -> Iterator[object]:
        """A server from ref on the host network, as the image's user, until url answers
        200 (its JSON body is yielded) or 180 s pass or it exits (the last error is
        yielded); stopped after."""
        name = self.new(ref)
        command = self.buildah.argv("run", *_run_options("host", volumes, env), name, "--", *argv)
        with open(log, "w") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=out)
        try:
            yield poll_json(url, proc, deadline=180)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def serve_and_get(
        self,
        ref: str,
        argv: list[str],
        url: str,
        *,
        log: Path,
        env: dict[str, str] | None = None,
        volumes: tuple[str, ...] = (),
    ) -> object:
        """The first answer of a server (``serving``), which is then stopped."""
        with self.serving(ref, argv, url, log=log, env=env, volumes=volumes) as answer:
            return answer


def _run_options(network: str, volumes: tuple[str, ...], env: dict[str, str] | None) -> list[str]:
    opts = ["--network", network]
    for volume in volumes:
        opts += ["--volume", volume]
    return opts + [f"--env={key}={value}" for key, value in (env or {}).items()]


def ref_of(image: str) -> str:
    return f"kaos.local/{KAOS_IMAGES.get(image, image)}:dev"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def poll_json(url: str, proc: subprocess.Popen[bytes], *, deadline: float) -> object:
    """The first 200 body of url, or the last error when deadline seconds pass."""
    end = time.monotonic() + deadline
    last: object = None
    while time.monotonic() < end and proc.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return json.loads(answer.read())
        except (OSError, ValueError) as exc:
            last = repr(exc)
        time.sleep(0.5)
    return last


def post_json(url: str, body: object, headers: dict[str, str]) -> tuple[int, object]:
    """POST a JSON body; the status and the decoded JSON answer (errors included)."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **headers},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")
