"""The images as built: slim, non-root, the right entrypoint, and working where it matters.

The module fixture runs ``hack/images`` (instant when no input changed; a cold build takes
minutes) and then looks inside each image the way a runtime would: its configuration
(``buildah inspect``), its files (``buildah mount``) and processes run in it
(``buildah run``, with runc). Sizes are not asserted here: ``hack/images --report`` prints
them beside their targets.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.ollama import ollama_build
from tests.support.procs import REPO_ROOT

pytestmark = [pytest.mark.images, pytest.mark.timeout(3600)]

HACK_IMAGES = REPO_ROOT / "hack" / "images"
KAOS_IMAGES = {"memory": "kaos-memory", "agent": "kaos-agent", "operator": "kaos-operator"}
# Further commands an image serves: the operator runs `kaos-mcp` for python-string
# MCPServers and samples/devmodel.yaml runs `kaos-devmodel`, both from the agent image.
MORE_COMMANDS = {"agent": ["kaos-mcp", "kaos-devmodel"]}
NONROOT = "65532:65532"
# Whatever installs or compiles: none of it belongs in a final image.
BUILD_TOOL_GLOBS = [
    "opt/*/venv/lib/python3*/site-packages/pip",
    "opt/*/venv/lib/python3*/site-packages/setuptools",
    "opt/*/venv/lib/python3*/site-packages/wheel",
    "opt/*/venv/lib/python3*/site-packages/_distutils_hack",
    "opt/*/venv/lib/python3*/site-packages/pip-*.dist-info",
    "opt/*/venv/lib/python3*/site-packages/setuptools-*.dist-info",
    "opt/*/venv/lib/python3*/site-packages/wheel-*.dist-info",
    "opt/*/venv/bin/pip*",
    "usr/lib/python3*/site-packages/pip",
    "usr/local/lib/python3*/site-packages/pip",
    "usr/lib/python3/dist-packages/pip",
    "usr/lib/python3*/ensurepip",
    "usr/local/lib/python3*/ensurepip",
    "usr/share/python-wheels",
    "usr/bin/gcc*",
    "usr/bin/cc",
    "usr/bin/c++",
    "usr/bin/g++*",
    "usr/bin/clang*",
    "usr/bin/*-linux-gnu-gcc*",
    "usr/bin/make",
    "root/.cache/pip",
    "home/*/.cache/pip",
]


@dataclass(frozen=True)
class Buildah:
    """buildah on hack/images's own store (it never touches the machine's default one)."""

    root: Path
    runroot: Path

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = ["buildah", "--root", str(self.root), "--runroot", str(self.runroot), *args]
        return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=600)

    def config(self, ref: str) -> dict[str, object]:
        data = json.loads(self("inspect", "--type", "image", ref).stdout)
        config: dict[str, object] = data["OCIv1"]["config"]
        return config


@dataclass(frozen=True)
class Built:
    buildah: Buildah
    # ref -> archive, from `hack/images --list`
    archives: dict[str, Path]


@pytest.fixture(scope="module")
def built() -> Built:
    if os.geteuid() != 0:
        pytest.skip("hack/images runs buildah rootful: these checks need root (CI runs as root)")
    if shutil.which("buildah") is None:
        pytest.fail("buildah is missing: `make images` installs it (and builds the images)")
    subprocess.run([str(HACK_IMAGES)], check=True, timeout=3600)
    listing = subprocess.run(
        [str(HACK_IMAGES), "--list"], capture_output=True, text=True, check=True
    ).stdout
    archives = {ref: Path(path) for ref, path in (line.split() for line in listing.splitlines())}
    cache = Path(os.environ.get("KAOS_CACHE_DIR", Path.home() / ".cache" / "kaos"))
    runroot = Path(os.environ.get("KAOS_IMAGES_RUNROOT", "/run/kaos-images"))
    return Built(Buildah(cache / "images" / "storage", runroot), archives)


@pytest.fixture
def container(built: Built) -> Iterator[tuple[Buildah, list[str]]]:
    """Working containers made by a test, removed after it."""
    made: list[str] = []
    yield built.buildah, made
    for name in made:
        built.buildah("rm", name, check=False)


def from_image(container: tuple[Buildah, list[str]], ref: str) -> str:
    buildah, made = container
    name = buildah("from", "--quiet", ref).stdout.strip()
    made.append(name)
    return name


def run_in(
    container: tuple[Buildah, list[str]],
    ref: str,
    *argv: str,
    volumes: tuple[str, ...] = (),
    network: str = "none",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """argv in a fresh container of ref, as the image's own user, without a network (or on
    the host's, for a server on a loopback port)."""
    buildah, _ = container
    name = from_image(container, ref)
    opts = ["--network", network]
    for volume in volumes:
        opts += ["--volume", volume]
    opts += [f"--env={key}={value}" for key, value in (env or {}).items()]
    return buildah("run", *opts, name, "--", *argv, check=False)


def ref_of(image: str) -> str:
    return f"kaos.local/{KAOS_IMAGES.get(image, image)}:dev"


def test_list_names_every_image_with_an_importable_archive(built: Built) -> None:
    assert set(built.archives) == {
        "kaos.local/kaos-memory:dev",
        "kaos.local/kaos-agent:dev",
        "kaos.local/kaos-operator:dev",
        "kaos.local/litellm:dev",
        "kaos.local/pgvector:dev",
        "kaos.local/ollama:dev",
        "kaos.local/registry:dev",
    }
    for ref, archive in built.archives.items():
        # A docker-archive: its manifest names the image, so `ctr images import` tags it.
        out = subprocess.run(
            ["tar", "-xOf", str(archive), "manifest.json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert json.loads(out)[0]["RepoTags"] == [ref], archive


@pytest.mark.parametrize("image", sorted(KAOS_IMAGES))
def test_kaos_image_runs_its_command_as_the_nonroot_uid(
    built: Built, container: tuple[Buildah, list[str]], image: str
) -> None:
    ref = ref_of(image)
    config = built.buildah.config(ref)
    assert config.get("User") == NONROOT
    assert config.get("Entrypoint") == [KAOS_IMAGES[image]]

    ids = run_in(container, ref, "id", "-u")
    assert ids.returncode == 0, ids.stderr
    assert ids.stdout.strip() == "65532"
    # The commands resolve: each console script loads its main() with all its imports.
    commands = [KAOS_IMAGES[image], *MORE_COMMANDS.get(image, [])]
    load = run_in(
        container,
        ref,
        "python",
        "-c",
        "import importlib.metadata as m, shutil, sys\n"
        "scripts = {e.name: e for e in m.entry_points(group='console_scripts')}\n"
        "for name in sys.argv[1:]:\n"
        "    scripts[name].load()\n"
        "    print(shutil.which(name))\n",
        *commands,
    )
    assert load.returncode == 0, load.stderr
    assert load.stdout.split() == [f"/opt/kaos/venv/bin/{c}" for c in commands]


@pytest.mark.parametrize("image", [*sorted(KAOS_IMAGES), "litellm"])
def test_final_image_has_no_build_tools_tests_or_other_images_code(
    built: Built, container: tuple[Buildah, list[str]], image: str
) -> None:
    buildah, _ = container
    name = from_image(container, ref_of(image))
    root = Path(buildah("mount", name).stdout.strip())
    try:
        found = [str(p.relative_to(root)) for g in BUILD_TOOL_GLOBS for p in root.glob(g)]
        assert found == [], f"build tools in {image}: {found}"
        pythonpaths = root.glob("opt/*/venv/lib/python3*/site-packages")
        (site,) = list(pythonpaths)
        present = {p.name for p in site.glob("kaos_*")}
        if image in KAOS_IMAGES:
            # images/prune.py removes the test suites packages ship.
            assert not [p for p in site.glob("*/tests") if p.is_dir()]
            assert present == {"kaos_core", f"kaos_{image}"}
            # The `kaos` CLI needs the `cli` extra, which no image installs.
            assert not (root / "opt/kaos/venv/bin/kaos").exists()
        else:
            assert present == set()
    finally:
        buildah("umount", name, check=False)


def test_memory_image_has_no_kubernetes_client_and_embedded_chroma_works(
    container: tuple[Buildah, list[str]],
) -> None:
    """chromadb declares `kubernetes` for its distributed mode; the image drops it, and the
    embedded PersistentClient the memory service uses still stores and queries."""
    ref = ref_of("memory")
    gone = run_in(container, ref, "python", "-c", "import kubernetes")
    assert gone.returncode != 0
    assert "No module named 'kubernetes'" in gone.stderr
    script = (
        "import tempfile, chromadb\n"
        "client = chromadb.PersistentClient(path=tempfile.mkdtemp(dir='/data'))\n"
        "facts = client.get_or_create_collection('facts', embedding_function=None)\n"
        "facts.add(ids=['a', 'b'], embeddings=[[1.0, 0.0], [0.0, 1.0]],\n"
        "          documents=['likes tea', 'lives in Oslo'])\n"
        "hit = facts.query(query_embeddings=[[0.9, 0.1]], n_results=1)\n"
        "print(hit['documents'][0][0])\n"
    )
    with tempfile.TemporaryDirectory() as data:
        os.chmod(data, 0o777)
        done = run_in(container, ref, "python", "-c", script, volumes=(f"{data}:/data",))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "likes tea"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def serve_and_get(
    container: tuple[Buildah, list[str]],
    ref: str,
    argv: list[str],
    url: str,
    *,
    env: dict[str, str] | None = None,
    volumes: tuple[str, ...] = (),
    log: Path,
) -> object:
    """Run a server from ref on the host network, as the image's user, until url answers
    200 (its JSON body is returned) or 180 s pass or it exits (the last error is returned);
    then stop it."""
    buildah, _ = container
    name = from_image(container, ref)
    opts = ["--network", "host"]
    for volume in volumes:
        opts += ["--volume", volume]
    opts += [f"--env={key}={value}" for key, value in (env or {}).items()]
    full = ["buildah", "--root", str(buildah.root), "--runroot", str(buildah.runroot), "run"]
    with open(log, "w") as out:
        proc = subprocess.Popen([*full, *opts, name, "--", *argv], stdout=out, stderr=out)
    try:
        return poll_json(url, proc, deadline=180)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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


def test_memory_service_serves_in_local_mode_from_the_image(
    container: tuple[Buildah, list[str]],
) -> None:
    """The service itself, as the chart runs it (local store: SQLite and embedded Chroma
    through Mem0), on a volume at /data/memory: ready, with both stores checked."""
    port = free_port()
    env = {
        "KAOS_MEMORY_HOST": "127.0.0.1",
        "KAOS_MEMORY_PORT": str(port),
        # Never called before a write: readiness needs no model.
        "KAOS_MEMORY_EMBEDDING_BASE_URL": "http://127.0.0.1:9/v1",
        "KAOS_MEMORY_EMBEDDING_MODEL": "unused",
        "KAOS_MEMORY_EMBEDDING_DIMS": "8",
    }
    with tempfile.TemporaryDirectory() as data, tempfile.TemporaryDirectory() as logs:
        os.chmod(data, 0o777)
        log = Path(logs) / "memory.log"
        ready = serve_and_get(
            container,
            ref_of("memory"),
            ["kaos-memory"],
            f"http://127.0.0.1:{port}/readyz",
            env=env,
            volumes=(f"{data}:/data/memory",),
            log=log,
        )
        assert ready == {
            "status": "ready",
            "checks": {"conversation_store": "ok", "vector_store": "ok"},
        }, log.read_text()[-3000:]
        assert (Path(data) / "conversation.sqlite3").is_file()


def test_pgvector_image_initialises_like_the_official_one(
    built: Built, container: tuple[Buildah, list[str]]
) -> None:
    """The chart's contract: POSTGRES_* and PGDATA on first start, initdb.d scripts run,
    uid 999, pg_isready on PATH; the vector extension then works."""
    ref = ref_of("pgvector")
    config = built.buildah.config(ref)
    assert config.get("User") == "999:999"
    with tempfile.TemporaryDirectory() as data, tempfile.TemporaryDirectory() as initdb:
        os.chmod(data, 0o777)
        Path(initdb, "01-vector.sql").write_text("CREATE EXTENSION IF NOT EXISTS vector;\n")
        os.chmod(initdb, 0o755)
        script = (
            "export POSTGRES_DB=kaos POSTGRES_USER=kaos POSTGRES_PASSWORD=s3cret "
            "PGDATA=/var/lib/postgresql/data/pgdata\n"
            # The entrypoint initialises, then runs its command: here a version print.
            "docker-entrypoint.sh postgres --version\n"
            "pg_ctl -D $PGDATA -w -o '-c listen_addresses=127.0.0.1' start >/dev/null\n"
            "pg_isready -h 127.0.0.1 -U kaos -d kaos\n"
            "PGPASSWORD=s3cret psql -h 127.0.0.1 -U kaos -d kaos -tA "
            "-c \"SELECT '[1,2]'::vector <-> '[1,3]'::vector\"\n"
            "pg_ctl -D $PGDATA -w stop >/dev/null\n"
        )
        done = run_in(
            container,
            ref,
            "sh",
            "-ec",
            script,
            volumes=(
                f"{data}:/var/lib/postgresql/data",
                f"{initdb}:/docker-entrypoint-initdb.d:ro",
            ),
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "running /docker-entrypoint-initdb.d/01-vector.sql" in done.stdout
    assert "initialised /var/lib/postgresql/data/pgdata (user kaos, database kaos)" in done.stdout
    assert re.search(r"accepting connections", done.stdout)
    assert done.stdout.strip().splitlines()[-1] == "1"


def test_litellm_image_serves_the_proxy_as_the_operator_runs_it(
    built: Built, container: tuple[Buildah, list[str]]
) -> None:
    """`litellm --config <file> --port <port>` (the operator's args) as uid 65532, with the
    config mounted read-only: the proxy lists the configured model."""
    ref = ref_of("litellm")
    config = built.buildah.config(ref)
    assert config.get("User") == NONROOT
    assert config.get("Entrypoint") == ["litellm"]
    port = free_port()
    with tempfile.TemporaryDirectory() as etc, tempfile.TemporaryDirectory() as logs:
        Path(etc, "config.yaml").write_text(
            "model_list:\n"
            "  - model_name: dev\n"
            "    litellm_params:\n"
            "      model: openai/dev\n"
            "      api_base: http://127.0.0.1:9/v1\n"
            "      api_key: none\n"
        )
        os.chmod(etc, 0o755)
        os.chmod(Path(etc, "config.yaml"), 0o644)
        log = Path(logs) / "litellm.log"
        argv = ["litellm", "--config", "/etc/litellm/config.yaml", "--port", str(port)]
        # On the host network, loopback only (the pod binds every address).
        argv += ["--host", "127.0.0.1"]
        models = serve_and_get(
            container,
            ref,
            argv,
            f"http://127.0.0.1:{port}/v1/models",
            volumes=(f"{etc}:/etc/litellm:ro",),
            log=log,
        )
        assert isinstance(models, dict), log.read_text()[-3000:]
        assert [m["id"] for m in models["data"]] == ["dev"]


def test_ollama_image_serves_a_model_as_the_operator_runs_it(
    built: Built, container: tuple[Buildah, list[str]]
) -> None:
    """uid 65532, models under /var/lib/ollama (its own, where the operator mounts a
    volume), and a /bin/sh script that starts `ollama serve`, waits for it, creates
    smollm2:135m from the GGUF and asks it: the binary's libraries are all in the image."""
    ref = ref_of("ollama")
    config = built.buildah.config(ref)
    assert config.get("User") == NONROOT
    assert config.get("Entrypoint") == ["/usr/bin/ollama"]
    assert config.get("Cmd") == ["serve"]
    listed = config.get("Env")
    assert isinstance(listed, list)
    env = dict(str(item).partition("=")[::2] for item in listed)
    assert env["OLLAMA_HOST"] == "0.0.0.0:11434"
    assert env["OLLAMA_MODELS"] == "/var/lib/ollama/models"
    assert env["HOME"] == "/var/lib/ollama"

    build = ollama_build()
    if not build.gguf.is_file():
        pytest.fail(f"{build.gguf} is missing: hack/images runs hack/ollama-build, which makes it")
    version = run_in(container, ref, "ollama", "--version")
    assert f"client version is {build.version}" in version.stdout + version.stderr
    script = (
        "set -e\n"
        'test "$(id -u)" = 65532 && test "$(stat -c %u /var/lib/ollama)" = 65532\n'
        "ollama serve >/tmp/serve.log 2>&1 &\n"
        # A readiness wait, bounded: the server answers within seconds.
        "i=0; until ollama list >/dev/null 2>&1; do\n"
        "  i=$((i + 1)); [ $i -lt 600 ] || { cat /tmp/serve.log; exit 1; }; sleep 0.1\n"
        "done\n"
        "printf 'FROM /models/smollm2.gguf\\nPARAMETER temperature 0\\n' >/tmp/Modelfile\n"
        "ollama create smollm2:135m -f /tmp/Modelfile >/dev/null 2>&1\n"
        "ollama run smollm2:135m 'What is the capital of France?'\n"
        "ls /var/lib/ollama/models/blobs\n"
    )
    # On the host's network for a loopback port of its own (no container network here).
    done = run_in(
        container,
        ref,
        "/bin/sh",
        "-c",
        script,
        network="host",
        env={"OLLAMA_HOST": f"127.0.0.1:{free_port()}"},
        volumes=(f"{build.gguf}:/models/smollm2.gguf:ro",),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Paris" in done.stdout, done.stdout
    assert "sha256-" in done.stdout


def test_registry_image_serves_the_registry_and_busybox_httpd(
    built: Built, container: tuple[Buildah, list[str]]
) -> None:
    """uid 65532, the default configuration (filesystem storage in /var/lib/registry)
    answers the registry API; busybox's sh and httpd (the blob file server) work in it."""
    ref = ref_of("registry")
    config = built.buildah.config(ref)
    assert config.get("User") == NONROOT
    assert config.get("Entrypoint") == ["/usr/bin/registry"]
    assert config.get("Cmd") == ["serve", "/etc/distribution/config.yml"]
    version = run_in(container, ref, "/usr/bin/registry", "--version")
    assert version.returncode == 0, version.stderr
    assert "v3.1.2" in version.stdout

    port = free_port()
    with tempfile.TemporaryDirectory() as logs:
        log = Path(logs) / "registry.log"
        catalog = serve_and_get(
            container,
            ref,
            ["/usr/bin/registry", "serve", "/etc/distribution/config.yml"],
            f"http://127.0.0.1:{port}/v2/_catalog",
            # The configuration's every-address :5000, moved to a free loopback port.
            env={"REGISTRY_HTTP_ADDR": f"127.0.0.1:{port}", "OTEL_TRACES_EXPORTER": "none"},
            log=log,
        )
        assert catalog == {"repositories": []}, log.read_text()[-3000:]

    script = (
        "set -e\n"
        'test "$(id -u)" = 65532 && test "$(stat -c %u /var/lib/registry)" = 65532\n'
        "echo blob >/var/lib/registry/probe\n"
        'busybox httpd -f -p "127.0.0.1:$PORT" -h /var/lib/registry & httpd=$!\n'
        'i=0; until wget -q -O - "http://127.0.0.1:$PORT/probe"; do\n'
        "  i=$((i + 1)); [ $i -lt 100 ] || exit 1; sleep 0.1\n"
        "done\n"
        'kill "$httpd"\n'
    )
    done = run_in(
        container, ref, "/bin/sh", "-c", script, network="host", env={"PORT": str(free_port())}
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "blob"
