"""Slim an image's virtual environment to what its distributions run (in the build stage).

    /opt/kaos/venv/bin/python images/prune.py DIST... [--drop DIST]...

An image installs only its own distributions (kaos-tools-core and the image's member), but
the virtual environment comes with pip, setuptools and wheel, and libraries declare
dependencies for parts of themselves the image never runs. This keeps the distributions
that the named ones require (walked over the installed metadata, markers evaluated), minus
the ones named by --drop and whatever only they needed, and removes everything else with
pip itself last, then the activation scripts, `tests` directories, documents left at the
top of site-packages and the sources of compiled extensions. It exits non-zero when a kept
distribution is missing, so a wrong --drop fails the build instead of the first import in
a cluster, and when a --drop names a distribution that is not installed, so a stale one is
noticed.
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

# pip's vendored copy: this runs before pip is removed, and packaging is not a dependency.
from pip._vendor.packaging.requirements import Requirement

# The build tools: never needed at run time, whatever declares them.
BUILD_TOOLS = {"pip", "setuptools", "wheel"}
STRIPPED_SUFFIXES = (".c", ".h", ".pyx", ".pxd", ".pyi")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed() -> dict[str, metadata.Distribution]:
    return {canonical(d.metadata["Name"]): d for d in metadata.distributions()}


def closure(roots: list[str], dists: dict[str, metadata.Distribution],
            dropped: set[str]) -> set[str]:  # fmt: skip
    """Every installed distribution the roots need, not passing through `dropped`."""
    keep: set[str] = set()
    todo: list[tuple[str, set[str]]] = [(canonical(root), set()) for root in roots]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, wanted = todo.pop()
        if (name, frozenset(wanted)) in seen or name in dropped:
            continue
        seen.add((name, frozenset(wanted)))
        dist = dists.get(name)
        if dist is None:
            sys.exit(f"prune: {name} is required but not installed")
        keep.add(name)
        for line in dist.requires or []:
            req = Requirement(line)
            envs = [{"extra": e} for e in wanted] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                todo.append((canonical(req.name), set(req.extras)))
    return keep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", metavar="DIST", help="the image's distributions")
    parser.add_argument("--drop", action="append", default=[], metavar="DIST")
    args = parser.parse_args()

    dists = installed()
    dropped = {canonical(d) for d in args.drop} | BUILD_TOOLS
    unknown = sorted(dropped - BUILD_TOOLS - set(dists))
    if unknown:
        sys.exit(f"prune: --drop {' '.join(unknown)}: not installed")
    keep = closure(args.roots, dists, dropped)
    remove = sorted(set(dists) - keep)
    print(f"prune: keeping {len(keep)} distributions, removing {' '.join(remove)}")
    # pip uninstalls itself last, after everything else it was asked to remove.
    order = [d for d in remove if d != "pip"] + (["pip"] if "pip" in remove else [])
    subprocess.run(
        [sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", *order], check=True
    )

    site = Path(sysconfig.get_path("purelib"))
    bindir = Path(sysconfig.get_path("scripts"))
    for pattern in ("activate*", "Activate.ps1", "pip*", "wheel"):
        for path in bindir.glob(pattern):
            path.unlink()
    for tests in [*site.glob("*/tests"), *site.glob("*/*/tests"), site / "chromadb" / "test"]:
        if tests.is_dir():
            shutil.rmtree(tests)
    # A project's own documents that a wheel put at the top of site-packages (such as
    # kubernetes_asyncio's changelog): nothing reads them there. Licences stay.
    for document in [*site.glob("*.md"), *site.glob("*.rst"), site / "pyproject.toml"]:
        document.unlink(missing_ok=True)
    # Sources of compiled extensions and typing stubs: read by compilers and type checkers,
    # never by the interpreter.
    for suffix in STRIPPED_SUFFIXES:
        for path in site.rglob(f"*{suffix}"):
            path.unlink()
    shutil.rmtree(Path(sys.prefix) / "share", ignore_errors=True)


if __name__ == "__main__":
    main()
