"""The version an upgrade starts from: the KAOS images and chart of the commit before the
newest change to what goes into them.

"The previous commit" taken literally is often the same software (a commit that changes
only docs or tests builds the same images), and an upgrade between identical images proves
nothing. So the previous version is the parent of the newest commit that changed an
image's inputs or the chart (``IMAGE_INPUTS``): the release a user upgrades from when this
checkout is released. ``KAOS_UPGRADE_FROM`` names another commit instead.

Its tree comes out of git (``git archive``) into the cache, and ``hack/images`` builds its
three images from that tree under the tag ``from-<commit>``: archives beside the current
ones, rebuilt only when the previous version changes. Older versions' trees and archives
are removed then.

Standard library only, like the rest of this package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.support.cluster.binaries import REPO_ROOT
from tests.support.cluster.errors import StepFailed
from tests.support.cluster.samples import (
    IMAGES_SCRIPT,
    STEP_TIMEOUT,
    image_archives,
    short_name,
)
from tests.support.cluster.steps import run_step

# What the KAOS images are built from (hack/images key_of) and the chart.
IMAGE_INPUTS = ("Dockerfile.base", "constraints.txt", "core", "images", "devmodel", "charts")
KAOS_IMAGES = ("operator", "memory", "agent")
TAG_PREFIX = "from-"


class NoHistory(Exception):
    """The checkout cannot say what the previous version is (no git, or too little history)."""


@dataclass(frozen=True)
class PreviousVersion:
    commit: str
    # Its whole tree, as git holds it at that commit.
    tree: Path

    @property
    def tag(self) -> str:
        """The tag its images are built and imported under."""
        return f"{TAG_PREFIX}{self.commit[:12]}"

    @property
    def chart(self) -> Path:
        return self.tree / "charts" / "kaos"


def _git(*args: str, repo: Path = REPO_ROOT) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL, check=False)  # fmt: skip
    if proc.returncode != 0:
        raise NoHistory(f"git {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout.strip()


def previous_commit(env: Mapping[str, str] = os.environ, repo: Path = REPO_ROOT) -> str:
    """The commit the upgrade starts from (see the module's doc). Raises ``NoHistory``."""
    if shutil.which("git") is None or not (repo / ".git").exists():
        raise NoHistory(f"{repo} is not a git checkout")
    forced = env.get("KAOS_UPGRADE_FROM", "").strip()
    if forced:
        return _git("rev-parse", "--verify", f"{forced}^{{commit}}", repo=repo)
    newest = _git("log", "-1", "--format=%H", "--", *IMAGE_INPUTS, repo=repo)
    try:
        return _git("rev-parse", "--verify", f"{newest}^", repo=repo)
    except NoHistory:
        shallow = _git("rev-parse", "--is-shallow-repository", repo=repo) == "true"
        raise NoHistory(
            f"the parent of {newest[:12]} (the newest change to the images or the chart) is "
            + ("not in this shallow clone: fetch more history" if shallow else "missing")
            + ", or set KAOS_UPGRADE_FROM"
        ) from None


def export_tree(commit: str, cache: Path, repo: Path = REPO_ROOT) -> Path:
    """``commit``'s tree under ``cache`` (made once; other versions' trees removed)."""
    cache.mkdir(parents=True, exist_ok=True)
    tree = cache / commit
    for old in cache.iterdir():
        if old != tree:
            shutil.rmtree(old, ignore_errors=True)
    if tree.is_dir():
        return tree
    partial = cache / f".{commit}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    archive = partial / "tree.tar"
    _git("archive", "--format=tar", f"--output={archive}", commit, repo=repo)
    with tarfile.open(archive) as tar:
        tar.extractall(partial / "tree", filter="tar")
    (partial / "tree").rename(tree)
    shutil.rmtree(partial)
    return tree


def build_images(
    previous: PreviousVersion,
    env: Mapping[str, str],
    logs: Path,
    echo: Callable[[str], None],
) -> dict[str, tuple[str, Path]]:
    """``hack/images`` (this checkout's) on the previous tree, under its tag: name -> (image
    reference, archive). Archives of other previous versions are removed first."""
    step_env = {**env, "KAOS_IMAGES_SOURCE": str(previous.tree), "KAOS_IMAGES_TAG": previous.tag}
    listed = {
        name: pair
        for pair in image_archives(step_env)
        if (name := short_name(pair[0])) in KAOS_IMAGES
    }
    _remove_other_versions(next(iter(listed.values()))[1].parent, previous.tag)
    run_step("hack/images (previous version)", step_env, logs / "hack-images-previous.log",
             timeout=STEP_TIMEOUT, echo=echo,
             argv=[str(IMAGES_SCRIPT), *KAOS_IMAGES])  # fmt: skip
    missing = [name for name, (_, archive) in listed.items() if not archive.is_file()]
    if missing:
        raise StepFailed(f"hack/images made no archive for {', '.join(missing)}")
    return listed


def _remove_other_versions(images_dir: Path, keep_tag: str) -> None:
    """The archives and keys of earlier previous versions (each version's three archives
    take most of a gigabyte)."""
    for path in images_dir.glob(f"*{TAG_PREFIX}*"):
        if keep_tag not in path.name:
            path.unlink(missing_ok=True)
