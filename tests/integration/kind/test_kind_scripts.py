"""The hack/kind scripts, run here against recording stand-ins of docker, kind, kubectl
and helm (tests/integration/kind/recorder.py): what they build, load, install and apply, and
that they are shellcheck-clean. The real run is the kind suite (tests/e2e/kind)."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kaos_core.crds import Agent, MemoryStore

from tests.fixtures.helm import CHART_DIR, SAMPLES_DIR, Helm, find_object
from tests.integration.kind.recorder import Run, image_id, run_script
from tests.support.kind import KIND_SCRIPTS, MANIFESTS
from tests.support.procs import REPO_ROOT
from tests.unit.chart.test_samples import MODELS, crd_schemas, unknown_fields

CLUSTER = "kaos-e2e"
NAMESPACE = "kaos-e2e"
REGISTRY = "kaos.local"
BASE = f"{REGISTRY}/kaos-base:dev"
IMAGES = ("memory", "agent", "operator")


def pinned(name: str) -> str:
    """The tag deploy gives an image: dev-<first 12 hex digits of its ID>."""
    ref = f"{REGISTRY}/kaos-{name}:dev"
    return f"{ref}-{image_id(ref).removeprefix('sha256:')[:12]}"


def tag_of(ref: str) -> str:
    return ref.rsplit(":", 1)[1]


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


# ------------------------------------------------------------------------- shellcheck


def shell_files() -> list[Path]:
    return sorted(p for p in KIND_SCRIPTS.iterdir() if p.is_file())


def shellcheck() -> str:
    found = shutil.which("shellcheck")
    if found is None:
        # Under CI (as tests/fixtures/postgres.py reads it) a missing linter is a failure.
        if os.environ.get("CI", "").strip().lower() not in {"", "0", "false", "no"}:
            pytest.fail("shellcheck is not installed; CI must lint hack/ (.ci/run installs it)")
        pytest.skip("shellcheck is not installed (apt-get install shellcheck)")
    return found


@pytest.mark.parametrize(
    "script",
    [*shell_files(), REPO_ROOT / "hack" / "k8s-build"],
    ids=lambda p: str(p.relative_to(REPO_ROOT)),
)
def test_script_passes_shellcheck(script: Path) -> None:
    proc = subprocess.run(
        [shellcheck(), "--external-sources", str(script)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("script", shell_files(), ids=lambda p: p.name)
def test_hack_kind_holds_only_shell(script: Path) -> None:
    """So `shellcheck hack/kind/*` lints the whole directory; data lives in MANIFESTS."""
    text = script.read_text()
    if script.suffix == ".sh":
        assert text.startswith("# shellcheck shell=bash")
        assert not os.access(script, os.X_OK), "a sourced library is not run"
    else:
        assert text.startswith("#!/usr/bin/env bash\n")
        assert "\nset -euo pipefail\n" in text
        assert os.access(script, os.X_OK)


@pytest.mark.parametrize("script", ["up", "build-images", "deploy", "down"])
def test_scripts_refuse_arguments_with_their_usage(script: str) -> None:
    proc = subprocess.run(
        [str(KIND_SCRIPTS / script), "--bogus"], capture_output=True, text=True, timeout=30
    )

    assert proc.returncode == 2
    assert f"hack/kind/{script}" in proc.stderr


# --------------------------------------------------------------------- build-images


def test_build_images_builds_the_foundation_dockerfiles(tmp_path: Path) -> None:
    run = run_script("build-images", tmp_path)

    assert run.status == 0, run.stderr
    builds = run.of("docker", "build")
    images = [
        ["-f", f"images/{name}/Dockerfile", "--build-arg", f"BASE={BASE}",
         "-t", f"{REGISTRY}/kaos-{name}:dev"]
        for name in IMAGES
    ]  # fmt: skip
    assert [c.argv for c in builds] == [
        ["build", "-f", "Dockerfile.base", "-t", BASE, "."],
        *(["build", *flags, "."] for flags in images),
    ]
    # The context is the repository root, with BuildKit (the Dockerfiles' syntax line).
    assert {c.cwd for c in builds} == {str(REPO_ROOT)}
    assert {c.buildkit for c in builds} == {"1"}


def test_every_image_dockerfile_is_built_from_the_base() -> None:
    """The image Dockerfiles in the repository are exactly the three built, and each takes
    its FROM from the BASE build argument, so the base just built is the one used."""
    found = sorted(p.parent.name for p in (REPO_ROOT / "images").glob("*/Dockerfile"))
    assert found == sorted(IMAGES)
    for name in IMAGES:
        text = (REPO_ROOT / "images" / name / "Dockerfile").read_text()
        assert re.search(r"^ARG BASE=", text, re.M)
        assert re.search(r"^FROM \$\{BASE\}$", text, re.M)
    assert (REPO_ROOT / "Dockerfile.base").is_file()


def test_build_images_stops_when_the_engine_is_down(tmp_path: Path) -> None:
    run = run_script("build-images", tmp_path, fail=["docker info"])

    assert run.status == 1
    assert "the Docker engine is not reachable" in run.stderr
    assert not run.of("docker", "build")


# --------------------------------------------------------------------------- deploy


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Run:
    run = run_script("deploy", tmp_path_factory.mktemp("deploy"))
    assert run.status == 0, run.stderr
    return run


def helm_sets(run: Run) -> list[str]:
    (install,) = run.of("helm", "upgrade")
    argv = install.argv
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == "--set"]


def applied(run: Run) -> list[dict[str, Any]]:
    (apply,) = run.of("kubectl", "apply")
    assert apply.stdin is not None
    return docs(apply.stdin)


def test_deploy_loads_the_built_images_under_their_id_tags(deployed: Run) -> None:
    refs = [pinned(name) for name in IMAGES]

    assert [c.argv for c in deployed.of("docker", "tag")] == [
        ["tag", f"{REGISTRY}/kaos-{name}:dev", pinned(name)] for name in IMAGES
    ]
    assert [c.argv for c in deployed.of("kind", "load")] == [
        ["load", "docker-image", "--name", CLUSTER, *refs]
    ]


def test_deploy_installs_the_chart_with_the_kind_values(deployed: Run) -> None:
    (install,) = deployed.of("helm", "upgrade")

    assert install.argv[:8] == [
        "upgrade", "--install", "kaos", str(CHART_DIR),
        "--namespace", "kaos-system", "--create-namespace",
        "--values",
    ]  # fmt: skip
    assert install.argv[8] == str(MANIFESTS / "values.yaml")
    assert helm_sets(deployed) == [
        f"images.operator.tag={tag_of(pinned('operator'))}",
        f"images.memory.tag={tag_of(pinned('memory'))}",
        f"images.agent.tag={tag_of(pinned('agent'))}",
        f"images.mcp.tag={tag_of(pinned('agent'))}",
        f"devPgvector.connectionSecret.extraNamespaces={{{NAMESPACE}}}",
    ]
    assert install.argv[-3:] == ["--wait", "--timeout", "15m"]
    # The samples namespace exists before the chart copies the connection Secret into it.
    assert deployed.index("kubectl", "create", "namespace", NAMESPACE) < deployed.index(
        "helm", "upgrade"
    )


def test_deploy_talks_to_the_kind_cluster_only(deployed: Run) -> None:
    """Every kubectl and helm call uses the kubeconfig kind gave for this cluster, never
    the user's current context."""
    kubeconfig = str(deployed.cache_dir / "kind" / CLUSTER / "kubeconfig")
    calls = deployed.of("kubectl") + deployed.of("helm")

    assert calls
    assert {c.kubeconfig for c in calls} == {kubeconfig}
    assert ["get", "kubeconfig", "--name", CLUSTER] in [c.argv for c in deployed.of("kind")]
    assert Path(kubeconfig).read_text().startswith("apiVersion: v1")


def test_deploy_applies_the_devmodel_with_the_built_agent_image(deployed: Run) -> None:
    objects = applied(deployed)
    sample = docs((SAMPLES_DIR / "devmodel.yaml").read_text())
    expected = copy.deepcopy(find_object(sample, "Deployment", "devmodel"))
    expected["spec"]["template"]["spec"]["containers"][0]["image"] = pinned("agent")

    # The sample itself but for the image: the agent image just built, which carries
    # kaos-devmodel (kaos-tools-devmodel).
    assert find_object(objects, "Deployment", "devmodel") == expected
    assert find_object(objects, "Service", "devmodel") == find_object(sample, "Service", "devmodel")
    assert expected["spec"]["template"]["spec"]["containers"][0]["command"][0] == "kaos-devmodel"


def test_deploy_applies_every_sample_and_the_suite_agent(deployed: Run) -> None:
    objects = applied(deployed)
    devmodel = docs((SAMPLES_DIR / "devmodel.yaml").read_text())
    others = [
        doc
        for path in sorted(SAMPLES_DIR.glob("*.yaml"))
        if path.name != "devmodel.yaml"
        for doc in docs(path.read_text())
    ]
    suite = [
        doc for path in sorted(MANIFESTS.glob("agent-*.yaml")) for doc in docs(path.read_text())
    ]

    assert [o["kind"] for o in objects[: len(devmodel)]] == ["Deployment", "Service"]
    assert objects[len(devmodel) :] == others + suite
    (apply,) = deployed.of("kubectl", "apply")
    assert apply.argv == [
        "apply", "--server-side", "--force-conflicts", "--field-manager=kaos-kind",
        "-n", NAMESPACE, "-f", "-",
    ]  # fmt: skip


def test_applied_resources_match_their_crds_and_each_other(deployed: Run) -> None:
    objects = applied(deployed)
    schemas = crd_schemas()
    by_kind: dict[str, set[str]] = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], set()).add(obj["metadata"]["name"])
        if obj["kind"] in MODELS:
            schema = schemas[obj["kind"]]["properties"]["spec"]
            assert unknown_fields(obj["spec"], schema, "spec") == [], obj["metadata"]["name"]
            MODELS[obj["kind"]].model_validate(obj)

    # What the suite's tests use exists, and every reference resolves.
    assert {"coordinator", "researcher", "archivist"} <= by_kind["Agent"]
    assert {"memory-local", "memory-pgvector"} == by_kind["MemoryStore"]
    for obj in objects:
        if obj["kind"] == "Agent":
            agent = Agent.model_validate(obj)
            assert agent.spec.model_api in by_kind["ModelAPI"]
            assert agent.spec.config.memory.memory_store in by_kind["MemoryStore"]
            assert set(agent.spec.mcp_servers) <= by_kind["MCPServer"]
            assert set(agent.spec.agent_network.access) <= by_kind["Agent"]
        if obj["kind"] == "MemoryStore":
            store = MemoryStore.model_validate(obj)
            assert store.spec.models.embedding.model_api in by_kind["ModelAPI"]
    archivist = Agent.model_validate(find_object(objects, "Agent", "archivist"))
    assert archivist.spec.config.memory.memory_store == "memory-pgvector"


def test_deploy_waits_for_the_devmodel_and_every_kind(deployed: Run) -> None:
    assert [c.argv for c in deployed.of("kubectl", "-n", NAMESPACE, "rollout")] == [
        ["-n", NAMESPACE, "rollout", "status", "deployment/devmodel", "--timeout=15m"]
    ]
    waits = [c.argv for c in deployed.of("kubectl", "-n", NAMESPACE, "wait")]
    assert waits == [
        ["-n", NAMESPACE, "wait", "--for=condition=Ready", f"{resource}.kaos.tools", "--all",
         "--timeout=15m"]
        for resource in ("modelapis", "mcpservers", "memorystores", "agents")
    ]  # fmt: skip
    assert deployed.index("kubectl", "apply") < deployed.index("kubectl", "-n", NAMESPACE, "wait")


def test_kind_values_render_with_the_deploy_settings(deployed: Run, helm: Helm) -> None:
    """`helm template` with exactly what deploy passes: the schema accepts it, and the
    operator deploys the images deploy loaded."""
    argv = ["template", "kaos", str(CHART_DIR), "--namespace", "kaos-system"]
    argv += ["--values", str(MANIFESTS / "values.yaml")]
    for assignment in helm_sets(deployed):
        argv += ["--set", assignment]
    objects = docs(helm.run(*argv).stdout)

    env = find_object(objects, "ConfigMap", "kaos-operator")["data"]
    assert env["KAOS_IMAGE_OPERATOR"] == pinned("operator")
    assert env["KAOS_IMAGE_MEMORY"] == pinned("memory")
    assert env["KAOS_IMAGE_AGENT"] == pinned("agent")
    assert env["KAOS_IMAGE_MCP"] == pinned("agent")
    assert env["KAOS_IMAGE_PULL_POLICY"] == "IfNotPresent"
    operator = find_object(objects, "Deployment", "kaos-operator")
    assert operator["spec"]["template"]["spec"]["containers"][0]["image"] == pinned("operator")
    # The external store's Secret, where samples/memorystore-external.yaml looks for it.
    secrets = [
        o["metadata"]["namespace"]
        for o in objects
        if o["kind"] == "Secret" and o["metadata"]["name"] == "kaos-pgvector-connection"
    ]
    assert sorted(secrets) == sorted(["kaos-system", NAMESPACE])
    find_object(objects, "Deployment", "kaos-pgvector")


def test_deploy_loads_through_an_archive_when_kind_load_fails(tmp_path: Path) -> None:
    """Docker's containerd image store breaks `kind load docker-image` (kind#3795)."""
    run = run_script("deploy", tmp_path, fail=["kind load docker-image"])

    assert run.status == 0, run.stderr
    archive = str(tmp_path / "cache" / "kind" / CLUSTER / "images.tar")
    refs = [pinned(name) for name in IMAGES]
    assert [c.argv for c in run.of("docker", "image", "save")] == [
        ["image", "save", "--platform", "linux/amd64", "-o", archive, *refs]
    ]
    assert [c.argv for c in run.of("kind", "load", "image-archive")] == [
        ["load", "image-archive", "--name", CLUSTER, archive]
    ]


def test_deploy_without_built_images_says_to_build_them(tmp_path: Path) -> None:
    run = run_script("deploy", tmp_path, fail=["docker image inspect"])

    assert run.status == 1
    assert "run hack/kind/build-images first" in run.stderr
    assert not run.of("helm")


def test_deploy_without_the_cluster_says_to_create_it(tmp_path: Path) -> None:
    run = run_script("deploy", tmp_path, clusters=())

    assert run.status == 1
    assert f"no kind cluster {CLUSTER}: run hack/kind/up first" in run.stderr
    assert not run.of("helm") and not run.of("kind", "load")


def test_deploy_says_which_tool_is_missing(tmp_path: Path) -> None:
    run = run_script("deploy", tmp_path, extra_env={"KAOS_HELM": str(tmp_path / "nohelm")})

    assert run.status == 1
    assert f"KAOS_HELM={tmp_path / 'nohelm'} is not an executable" in run.stderr


def test_deploy_fails_with_diagnostics_when_a_resource_is_not_ready(tmp_path: Path) -> None:
    run = run_script("deploy", tmp_path, fail=[f"kubectl -n {NAMESPACE} wait"])

    assert run.status == 1
    assert "modelapis in kaos-e2e did not become Ready" in run.stderr
    assert run.of("kubectl", "get", "pods", "-A")
    assert run.of("kubectl", "get", "events", "-A")


# ------------------------------------------------------------------------ up / down


def test_up_creates_the_cluster_from_the_config(tmp_path: Path) -> None:
    run = run_script("up", tmp_path, clusters=())

    kubeconfig = tmp_path / "cache" / "kind" / CLUSTER / "kubeconfig"
    assert run.status == 0, run.stderr
    assert [c.argv for c in run.of("kind", "create")] == [
        [
            "create", "cluster", "--name", CLUSTER,
            "--config", str(MANIFESTS / "cluster.yaml"), "--wait", "5m",
            "--kubeconfig", str(kubeconfig),
        ]
    ]  # fmt: skip
    assert run.stdout.splitlines()[-1] == f"export KUBECONFIG={kubeconfig}"
    assert kubeconfig.is_file()


def test_up_uses_the_node_image_asked_for_and_reuses_a_cluster(tmp_path: Path) -> None:
    image = "kindest/node:v1.36.0"
    created = run_script("up", tmp_path, clusters=(), extra_env={"KAOS_KIND_NODE_IMAGE": image})
    reused = run_script("up", tmp_path)

    (create,) = created.of("kind", "create")
    assert create.argv[create.argv.index("--image") + 1] == image
    assert reused.status == 0 and not reused.of("kind", "create")
    assert "exists; reusing it" in reused.stderr


@pytest.mark.parametrize("script", ["up", "deploy", "down"])
def test_without_docker_engine_the_scripts_say_so_and_touch_nothing(
    script: str, tmp_path: Path
) -> None:
    run = run_script(script, tmp_path, fail=["docker info"])

    assert run.status == 1
    assert "the Docker engine is not reachable" in run.stderr
    assert [c.tool for c in run.calls] == ["docker"]


def test_down_deletes_the_cluster_and_its_kubeconfig(tmp_path: Path) -> None:
    up = run_script("up", tmp_path, extra_env={"KAOS_KIND_CLUSTER": "mine"}, clusters=())
    down = run_script("down", tmp_path, extra_env={"KAOS_KIND_CLUSTER": "mine"}, clusters=["mine"])
    again = run_script("down", tmp_path, extra_env={"KAOS_KIND_CLUSTER": "mine"}, clusters=())

    assert up.status == down.status == again.status == 0
    assert [c.argv for c in down.of("kind", "delete")] == [["delete", "cluster", "--name", "mine"]]
    assert not (tmp_path / "cache" / "kind" / "mine").exists()
    assert not again.of("kind", "delete")
    assert "nothing to delete" in again.stderr


# ------------------------------------------------------------------- configuration


def test_cluster_config_is_one_kind_node() -> None:
    config = yaml.safe_load((MANIFESTS / "cluster.yaml").read_text())

    assert config == {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "nodes": [{"role": "control-plane"}],
    }


def test_kind_values_point_at_the_images_build_images_makes() -> None:
    values = yaml.safe_load((MANIFESTS / "values.yaml").read_text())
    chart_values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())

    assert values["images"]["registry"] == REGISTRY
    assert values["devPgvector"]["enabled"] is True
    # The chart's repositories are the names build-images gives, under that registry.
    for name in ("operator", "memory", "agent"):
        assert chart_values["images"][name]["repository"] == f"kaos-{name}"
    assert chart_values["images"]["mcp"]["repository"] == "kaos-agent"


def test_k8s_build_offers_kind_as_an_opt_in_target() -> None:
    script = REPO_ROOT / "hack" / "k8s-build"
    usage = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=30)
    printed = subprocess.run(
        [str(script), "--print-env"], capture_output=True, text=True, timeout=30
    )

    assert usage.returncode == 0
    assert "hack/k8s-build kind" in usage.stdout
    assert re.search(r"^KIND_VERSION=v0\.\d+\.\d+$", script.read_text(), re.M)
    # Opt-in: the environment the test run evaluates does not point at kind.
    assert "KIND" not in printed.stdout
