"""The images, built once for the package: ``hack/images`` (instant when no input changed;
a cold build takes minutes), then each test looks inside them (``harness``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.images.harness import HACK_IMAGES, Buildah, Built, Containers
from tests.support.cluster.host import cache_dir


@pytest.fixture(scope="package")
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
    cache = cache_dir()
    runroot = Path(os.environ.get("KAOS_IMAGES_RUNROOT", "/run/kaos-images"))
    return Built(Buildah(cache / "images" / "storage", runroot), archives)


@pytest.fixture
def containers(built: Built) -> Iterator[Containers]:
    """Working containers made by a test, removed after it."""
    made = Containers(built.buildah, [])
    yield made
    for name in made.made:
        built.buildah("rm", name, check=False)
