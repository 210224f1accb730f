"""A real model in the loop on loopback: Ollama serving SmolLM2-135M, and an OCI registry
Ollama pushes models to and pulls them from, as the Hosted ModelAPI does in a cluster.

The binaries and the GGUF are the ones ``hack/ollama-build`` builds and caches (``make
services`` runs it); ``why_ollama_cannot_run`` names what is missing so tests skip with
the reason. Each server is a tracked process in its own process group with its log in a
file (shown when it fails to start), on a free loopback port, with its state in a
directory of the test's, and is stopped when its block ends.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.procs import REPO_ROOT, ServiceProcess, free_port, start_service

BUILD_SCRIPT = REPO_ROOT / "hack" / "ollama-build"
# Debian's busybox-static (make services installs it): `busybox httpd`, the blob file server,
# as in the registry image. It answers Range requests, which Ollama sends to download a blob
# in parts (Python's http.server ignores them).
BUSYBOX = Path("/bin/busybox")
# The model of the Hosted-mode example.
MODEL = "smollm2:135m"


@dataclass(frozen=True)
class OllamaBuild:
    """Where ``hack/ollama-build`` puts its parts (they may not be there yet)."""

    ollama: Path
    version: str
    registry: Path
    gguf: Path


def ollama_build() -> OllamaBuild:
    out = subprocess.run(
        [str(BUILD_SCRIPT), "--print-env"], check=True, capture_output=True, text=True
    ).stdout
    env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return OllamaBuild(
        ollama=Path(env["KAOS_OLLAMA_BIN"]),
        version=env["KAOS_OLLAMA_VERSION"],
        registry=Path(env["KAOS_REGISTRY_BIN"]),
        gguf=Path(env["KAOS_SMOLLM2_GGUF"]),
    )


def why_ollama_cannot_run() -> str | None:
    """None when Ollama and the GGUF are built; else why not (a skip reason naming the
    missing parts and how to build them)."""
    build = ollama_build()
    missing = [str(build.ollama)] if not os.access(build.ollama, os.X_OK) else []
    missing += [str(build.gguf)] if not build.gguf.is_file() else []
    if missing:
        return f"missing {', '.join(missing)}: run hack/ollama-build (or make services)"
    return None


def why_registry_cannot_run() -> str | None:
    """None when the registry and its blob file server (busybox httpd) are there; else
    why not."""
    build = ollama_build()
    if not os.access(build.registry, os.X_OK):
        return f"missing {build.registry}: run hack/ollama-build (or make services)"
    if not os.access(BUSYBOX, os.X_OK):
        return f"missing {BUSYBOX}: apt-get install busybox-static (or make services)"
    return None


@dataclass
class Ollama:
    """An ``ollama serve`` on loopback, and its CLI pointed at it."""

    proc: ServiceProcess
    binary: Path
    models: Path
    home: Path

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.proc.port}"

    @property
    def url(self) -> str:
        return self.proc.url

    def env(self) -> dict[str, str]:
        """What the CLI (and the server) read: which server, where models and keys live."""
        return {"OLLAMA_HOST": self.host, "OLLAMA_MODELS": str(self.models), "HOME": str(self.home)}

    def cli(self, *args: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        """``ollama ARGS`` against this server; raises with the output (and the server's
        log) when it fails."""
        done = subprocess.run(
            [str(self.binary), *args],
            env={**os.environ, **self.env()},
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"ollama {' '.join(args)} exited with {done.returncode}:\n"
                f"{done.stdout}{done.stderr}\n--- server log tail ---\n{self.proc.log_tail()}"
            )
        return done


@contextmanager
def serve_ollama(
    state: Path, *, build: OllamaBuild | None = None, env: Mapping[str, str] | None = None
) -> Iterator[Ollama]:
    """``ollama serve`` on a free loopback port with its models and HOME (its key) under
    ``state`` (empty, or a previous server's); ready once its API answers."""
    build = build or ollama_build()
    models, home = state / "models", state / "home"
    models.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server_env = {
        "OLLAMA_HOST": f"127.0.0.1:{port}",
        "OLLAMA_MODELS": str(models),
        "HOME": str(home),
        # Unloading after a test is the process ending, not a timer.
        "OLLAMA_KEEP_ALIVE": "-1",
        **(env or {}),
    }
    proc = start_service(
        "ollama",
        [str(build.ollama), "serve"],
        port=port,
        env=server_env,
        log_dir=state,
        ready_path="/api/version",
        timeout=60.0,
    )
    try:
        yield Ollama(proc=proc, binary=build.ollama, models=models, home=home)
    finally:
        proc.stop()


def create_model(server: Ollama, name: str = MODEL, gguf: Path | None = None) -> None:
    """``ollama create NAME`` from a Modelfile ``FROM <gguf>`` (the CLI uploads the file to
    the server, which detects SmolLM2's ChatML template from the GGUF; under a second)."""
    gguf = gguf or ollama_build().gguf
    with tempfile.TemporaryDirectory() as tmp:
        modelfile = Path(tmp) / "Modelfile"
        modelfile.write_text(f"FROM {gguf}\n")
        server.cli("create", name, "-f", str(modelfile))


@dataclass
class Registry:
    """CNCF Distribution on loopback, with its blob downloads redirected to a file server."""

    proc: ServiceProcess
    blobs: ServiceProcess
    storage: Path

    @property
    def host(self) -> str:
        """How Ollama addresses it: model names are ``HOST/namespace/model:tag``."""
        return f"127.0.0.1:{self.proc.port}"


def registry_config(*, port: int, storage: Path, blobs_url: str) -> dict[str, object]:
    """Filesystem storage; blob GETs answered by a 307 to ``blobs_url`` + the blob's path
    in the storage directory (the ``redirect`` storage middleware).

    Why the redirect: Ollama pulls a blob by following the registry's redirect only to a
    host other than the registry's own; answered in place, or redirected to the same host,
    it fails with "http: no Location header in response". So ``blobs_url`` must name the
    file server by another host name than the registry's (here ``localhost`` against
    ``127.0.0.1``; in a cluster, a second Service)."""
    return {
        "version": 0.1,
        "log": {"level": "info", "fields": {"service": "registry"}},
        "storage": {
            "filesystem": {"rootdirectory": str(storage)},
            "delete": {"enabled": True},
        },
        "middleware": {"storage": [{"name": "redirect", "options": {"baseurl": blobs_url}}]},
        "http": {"addr": f"127.0.0.1:{port}"},
    }


@contextmanager
def serve_registry(state: Path, *, build: OllamaBuild | None = None) -> Iterator[Registry]:
    """The registry on a free loopback port with its storage under ``state``, and a static
    file server over that storage that its blob redirects point to; ready once ``/v2/``
    and the file server answer."""
    build = build or ollama_build()
    storage = state / "storage"
    storage.mkdir(parents=True, exist_ok=True)
    blobs_port, port = free_port(), free_port()
    config = state / "registry.yml"
    # JSON is YAML: the registry reads it as its configuration.
    config.write_text(
        json.dumps(
            registry_config(port=port, storage=storage, blobs_url=f"http://localhost:{blobs_port}/")
        )
    )
    # What the file server's readiness is checked by (the registry ignores other files).
    (storage / "healthz").write_text("ok\n")
    with ExitStack() as stack:
        # -f: in the foreground (a tracked process); -v: each request in its log.
        httpd = [str(BUSYBOX), "httpd", "-f", "-v", "-h", str(storage)]
        blobs = start_service(
            "registry-blobs",
            [*httpd, "-p", f"127.0.0.1:{blobs_port}"],
            port=blobs_port,
            log_dir=state,
            ready_path="/healthz",
            timeout=30.0,
        )
        stack.callback(blobs.stop)
        proc = start_service(
            "registry",
            [str(build.registry), "serve", str(config)],
            port=port,
            # No trace exporter: nothing collects the registry's spans here.
            env={"OTEL_TRACES_EXPORTER": "none"},
            log_dir=state,
            ready_path="/v2/",
            timeout=30.0,
        )
        stack.callback(proc.stop)
        yield Registry(proc=proc, blobs=blobs, storage=storage)
