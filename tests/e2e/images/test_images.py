"""The images as built: slim, non-root, the right entrypoint, and working where it matters.

The package fixture runs ``hack/images`` (``conftest``); the tests look inside each image
the way a runtime would (``harness``). Sizes are not asserted here: ``hack/images
--report`` prints them beside their targets. What each KAOS image holds is checked in
``test_image_contents``, the memory image's embedded store in ``test_memory_image``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.e2e.images.harness import (
    KAOS_IMAGES,
    NONROOT,
    SITE_PACKAGES,
    Built,
    Containers,
    free_port,
    ref_of,
)
from tests.support.ollama import ollama_build

pytestmark = [pytest.mark.images, pytest.mark.timeout(3600)]

# Further commands an image serves: the operator runs `kaos-mcp` for python-string
# MCPServers and samples/devmodel.yaml runs `kaos-devmodel`, both from the agent image.
MORE_COMMANDS = {"agent": ["kaos-mcp", "kaos-devmodel"]}
# Whatever installs or compiles: none of it belongs in a final image.
BUILD_TOOL_GLOBS = [
    f"{SITE_PACKAGES}/pip",
    f"{SITE_PACKAGES}/setuptools",
    f"{SITE_PACKAGES}/wheel",
    f"{SITE_PACKAGES}/_distutils_hack",
    f"{SITE_PACKAGES}/pip-*.dist-info",
    f"{SITE_PACKAGES}/setuptools-*.dist-info",
    f"{SITE_PACKAGES}/wheel-*.dist-info",
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
    built: Built, containers: Containers, image: str
) -> None:
    ref = ref_of(image)
    config = built.buildah.config(ref)
    assert config.get("User") == NONROOT
    assert config.get("Entrypoint") == [KAOS_IMAGES[image]]

    ids = containers.run(ref, "id", "-u")
    assert ids.returncode == 0, ids.stderr
    assert ids.stdout.strip() == "65532"
    # The commands resolve: each console script loads its main() with all its imports.
    commands = [KAOS_IMAGES[image], *MORE_COMMANDS.get(image, [])]
    load = containers.run(
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
def test_final_image_has_no_build_tools_or_tests(containers: Containers, image: str) -> None:
    with containers.mounted(ref_of(image)) as root:
        found = [str(p.relative_to(root)) for g in BUILD_TOOL_GLOBS for p in root.glob(g)]
        assert found == [], f"build tools in {image}: {found}"
        (site,) = list(root.glob(SITE_PACKAGES))
        if image in KAOS_IMAGES:
            # images/prune.py removes the test suites packages ship.
            assert not [p for p in site.glob("*/tests") if p.is_dir()]
        else:
            assert not list(site.glob("kaos_*"))


def test_pgvector_image_initialises_like_the_official_one(
    built: Built, containers: Containers
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
        done = containers.run(
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
    built: Built, containers: Containers
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
        models = containers.serve_and_get(
            ref,
            argv,
            f"http://127.0.0.1:{port}/v1/models",
            volumes=(f"{etc}:/etc/litellm:ro",),
            log=log,
        )
        assert isinstance(models, dict), log.read_text()[-3000:]
        assert [m["id"] for m in models["data"]] == ["dev"]


def test_ollama_image_serves_a_model_as_the_operator_runs_it(
    built: Built, containers: Containers
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
    version = containers.run(ref, "ollama", "--version")
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
    done = containers.run(
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
    built: Built, containers: Containers
) -> None:
    """uid 65532, the default configuration (filesystem storage in /var/lib/registry)
    answers the registry API; busybox's sh and httpd (the blob file server) work in it."""
    ref = ref_of("registry")
    config = built.buildah.config(ref)
    assert config.get("User") == NONROOT
    assert config.get("Entrypoint") == ["/usr/bin/registry"]
    assert config.get("Cmd") == ["serve", "/etc/distribution/config.yml"]
    version = containers.run(ref, "/usr/bin/registry", "--version")
    assert version.returncode == 0, version.stderr
    assert "v3.1.2" in version.stdout

    port = free_port()
    with tempfile.TemporaryDirectory() as logs:
        log = Path(logs) / "registry.log"
        catalog = containers.serve_and_get(
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
    done = containers.run(
        ref, "/bin/sh", "-c", script, network="host", env={"PORT": str(free_port())}
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "blob"
