"""The samples running on the real node: what ``make cluster`` (``hack/cluster up``) does once
its cluster is up, and what the kind suite's real-node fixture does on its own cluster. One
code path, so the suite proves ``make cluster`` on CI.

1. ``hack/images`` builds the images (instant when nothing changed);
2. each archive goes into the node's containerd unless the node has it already, and is
   tagged ``dev-<the first 12 hex digits of its image ID>`` as ``hack/kind/deploy`` tags the
   images it loads into kind: a rebuilt image gets a new tag, so a second ``make cluster``
   upgrades the chart onto it and the operator rolls the workloads;
3. ``hack/kind/deploy`` (``KAOS_KIND_PROVIDER=real-node``) installs the chart on those tags,
   the development model server and every sample, and waits until each is Ready.

Before all that, the kubeconfig's context gets the samples' namespace as its default, so
``kaos`` and ``kubectl`` need no ``-n``.

Standard library only (with ``ctr``, ``hack/images`` and ``hack/kind/deploy``), like the
rest of this package.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.cluster.binaries import REPO_ROOT
from tests.support.cluster.errors import StepFailed
from tests.support.cluster.handle import Cluster
from tests.support.cluster.steps import run_step

if TYPE_CHECKING:
    from tests.support.realnode import RealNode

IMAGES_SCRIPT = REPO_ROOT / "hack" / "images"
# Where `make cluster` puts the samples (the kind suite passes its own, kaos-e2e).
DEFAULT_NAMESPACE = "kaos-samples"
# One script may take this long: a cold hack/images builds every image. (The kind suite's
# setting, docs/development/e2e.md.)
STEP_TIMEOUT = float(os.environ.get("KAOS_KIND_STEP_TIMEOUT", "3600"))


def image_archives(env: Mapping[str, str]) -> list[tuple[str, Path]]:
    """``hack/images --list``: each image's reference and its archive."""
    proc = subprocess.run(
        [str(IMAGES_SCRIPT), "--list"], env=dict(env), capture_output=True, text=True,
        timeout=60, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise StepFailed(f"hack/images --list exited {proc.returncode}: {proc.stderr.strip()}")
    pairs = [line.split(None, 1) for line in proc.stdout.splitlines() if line.strip()]
    return [(ref, Path(path.strip())) for ref, path in pairs]


def image_id(archive: Path) -> str:
    """The image ID (the digest of its config, as Docker names it) of a docker-archive that
    ``hack/images`` wrote: read from the archive's ``manifest.json``, without unpacking."""
    try:
        with tarfile.open(archive, mode="r:") as tar:
            member = tar.extractfile("manifest.json")
            manifest = json.load(member) if member is not None else None
        config = str(manifest[0]["Config"]) if manifest else ""
    except (OSError, KeyError, IndexError, TypeError, ValueError, tarfile.TarError) as exc:
        raise StepFailed(f"cannot read the image manifest of {archive}: {exc}") from exc
    if not config:
        raise StepFailed(f"{archive} has no manifest.json naming the image's config")
    return config.removeprefix("sha256:").removesuffix(".json").rsplit("/", 1)[-1]


def short_name(ref: str) -> str:
    """``kaos.local/kaos-operator:dev`` -> ``operator``, ``kaos.local/litellm:dev`` ->
    ``litellm``: the names ``hack/kind/deploy`` knows the images by."""
    repository = ref.rsplit(":", 1)[0].rsplit("/", 1)[-1]
    return repository.removeprefix("kaos-")


def import_images(
    node: RealNode, archives: list[tuple[str, Path]], echo: Callable[[str], None]
) -> dict[str, str]:
    """Each image into the node under its ID tag (imported only when the node lacks that
    tag), its plain reference pointed at the same image; returns name -> tag."""
    present = set(_ctr(node, "images", "ls", "-q").split())
    tags = {}
    for ref, archive in archives:
        tag = f"{ref.rsplit(':', 1)[1]}-{image_id(archive)[:12]}"
        pinned = f"{ref.rsplit(':', 1)[0]}:{tag}"
        if pinned in present:
            echo(f"{pinned} is on the node already")
            _ctr(node, "images", "tag", "--force", pinned, ref)
        else:
            started = time.monotonic()
            node.import_archive(archive)
            _ctr(node, "images", "tag", "--force", ref, pinned)
            echo(f"imported {archive} as {pinned} in {time.monotonic() - started:.0f}s")
        tags[short_name(ref)] = tag
    return tags


def _ctr(node: RealNode, *args: str) -> str:
    proc = subprocess.run(node.ctr(*args), capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    if proc.returncode != 0:
        raise StepFailed(f"ctr {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def set_default_namespace(kubeconfig: Path, namespace: str) -> None:
    """Make ``namespace`` the default of the kubeconfig's current context."""
    config = json.loads(kubeconfig.read_text())
    current = config["current-context"]
    for context in config["contexts"]:
        if context["name"] == current:
            context["context"]["namespace"] = namespace
    partial = kubeconfig.with_name(kubeconfig.name + ".partial")
    partial.unlink(missing_ok=True)
    # Owner-only from the start: it holds the admin's client key.
    with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
        out.write(json.dumps(config, indent=2) + "\n")
    partial.replace(kubeconfig)


def deploy_samples(
    node: RealNode,
    cluster: Cluster,
    namespace: str,
    *,
    logs: Path,
    echo: Callable[[str], None],
    env: Mapping[str, str] | None = None,
    timeout: float = STEP_TIMEOUT,
) -> None:
    """What the module doc lists; ``logs`` gets each script's log, ``env`` adds to the
    scripts' environment. Raises ``StepFailed`` (with the failing script's log tail)."""
    step_env = cluster.env({**os.environ, **(env or {})})
    if cluster.helm is not None:
        step_env.setdefault("KAOS_HELM", str(cluster.helm))
    step_env.update({
        "KAOS_KIND_PROVIDER": "real-node",
        "KAOS_REAL_NODE_KUBECONFIG": str(cluster.kubeconfig),
        "KAOS_KIND_NAMESPACE": namespace,
    })  # fmt: skip
    set_default_namespace(cluster.kubeconfig, namespace)
    run_step("hack/images", step_env, logs / "hack-images.log", timeout=timeout, echo=echo,
             argv=[str(IMAGES_SCRIPT)])  # fmt: skip
    tags = import_images(node, image_archives(step_env), echo)
    for name, tag in tags.items():
        step_env[f"KAOS_REAL_NODE_TAG_{name.upper()}"] = tag
    started = time.monotonic()
    run_step("deploy", step_env, logs / "deploy.log", timeout=timeout, echo=echo)
    echo(f"hack/kind/deploy done in {time.monotonic() - started:.0f}s")
