"""One distribution per audience, each bringing only what its audience runs.

Dependency sets are computed from the *installed* distributions' metadata (what the
resolver actually put in this environment, at the versions it chose), walking
``Requires-Dist`` transitively with each requirement's markers evaluated, so a heavy
package pulled in through some intermediate dependency is caught too.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

import pytest
from kaos_core import __version__
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[3]
CORE = "kaos-tools-core"
CLI_DIST = "kaos-tools"
DEVMODEL = "kaos-tools-devmodel"
# Each member directory and the distribution it builds.
MEMBERS = {
    "core": CORE,
    "cli": CLI_DIST,
    "devmodel": DEVMODEL,
    "images/memory": "kaos-tools-memory",
    "images/agent": "kaos-tools-agent",
    "images/operator": "kaos-tools-operator",
}
# What each image installs (its Dockerfile's pip install), by member directory.
IMAGE_MEMBERS = {
    "memory": ["core", "images/memory"],
    # samples/devmodel.yaml runs `kaos-devmodel` from the agent image.
    "agent": ["core", "images/agent", "devmodel"],
    "operator": ["core", "images/operator"],
}


# The markers' variables for this interpreter, as strings.
ENVIRONMENT = {key: str(value) for key, value in default_environment().items()}


def _closure(*roots: str) -> set[str]:
    """Canonical names of every distribution the roots need, transitively."""
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    stack = [(canonicalize_name(root), frozenset[str]()) for root in roots]
    while stack:
        name, wanted = stack.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        names.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            # A requirement whose marker selects it must be installed; one that is
            # missing was never resolved, which the assertions below would hide.
            raise AssertionError(f"{name} is required but not installed") from None
        for line in requires:
            req = Requirement(line)
            if req.marker is not None:
                envs = [{**ENVIRONMENT, "extra": e} for e in (wanted or {""})]
                if not any(req.marker.evaluate(env) for env in envs):
                    continue
            stack.append((canonicalize_name(req.name), frozenset(req.extras)))
    return names


def _image(image: str) -> tuple[str, ...]:
    return tuple(MEMBERS[d] for d in IMAGE_MEMBERS[image])


HEAVY = {"mem0ai", "chromadb", "psycopg", "kubernetes-asyncio", "pydantic-ai-slim", "torch"}
# The command line's own libraries: only kaos-tools brings them.
CLI = {"click", "rich"}
# The user-facing and development distributions, which no service image needs.
TOOLS = {CLI_DIST, DEVMODEL}


@pytest.mark.parametrize(
    ("roots", "forbidden"),
    [
        ((CORE,), HEAVY | CLI | TOOLS),
        ((CLI_DIST,), HEAVY | {DEVMODEL}),
        ((DEVMODEL,), HEAVY | CLI | {CLI_DIST}),
        (_image("memory"), {"pydantic-ai-slim", "kubernetes-asyncio", "torch"} | TOOLS),
        (
            # psycopg is the agent's too: its external A2A task store (imported only then).
            _image("agent"),
            {"mem0ai", "chromadb", "kubernetes-asyncio", "torch"} | {CLI_DIST},
        ),
        (
            _image("operator"),
            {"mem0ai", "chromadb", "pydantic-ai-slim", "pydantic-ai", "torch"} | CLI | TOOLS,
        ),
    ],
    ids=["core", "cli", "devmodel", "memory-image", "agent-image", "operator-image"],
)
def test_each_audience_gets_only_its_dependencies(
    roots: tuple[str, ...], forbidden: set[str]
) -> None:
    closure = _closure(*roots)
    assert not (closure & forbidden), f"{roots} pull in {sorted(closure & forbidden)}"


@pytest.mark.parametrize(
    ("dist", "required"),
    [
        (CORE, {"aiohttp", "pydantic", "prometheus-client"}),
        (CLI_DIST, CLI | {CORE}),
        (DEVMODEL, {CORE}),
        ("kaos-tools-memory", {CORE, "mem0ai", "chromadb", "psycopg", "psycopg-pool", "pgvector"}),
        (
            "kaos-tools-agent",
            {CORE, "pydantic-ai-slim", "mcp", "a2a-sdk", "openai", "psycopg", "psycopg-pool"},
        ),
        ("kaos-tools-operator", {CORE, "kubernetes-asyncio"}),
    ],
)
def test_distribution_brings_what_it_runs_on(dist: str, required: set[str]) -> None:
    closure = _closure(dist)
    assert required <= closure, f"{dist} lacks {sorted(required - closure)}"


def test_no_service_needs_torch() -> None:
    assert "torch" not in _closure(*MEMBERS.values())


def test_every_member_directory_builds_its_distribution_at_the_cores_version() -> None:
    """The workspace releases together: one version, and every member pins the core to it."""
    found = {
        str(p.parent.relative_to(ROOT)) for p in ROOT.glob("**/pyproject.toml") if p.parent != ROOT
    }
    found = {d for d in found if not d.startswith((".venv", "build"))}
    assert found == set(MEMBERS)
    for directory, dist in MEMBERS.items():
        project = tomllib.loads((ROOT / directory / "pyproject.toml").read_text())["project"]
        assert project["name"] == dist
        assert project["version"] == __version__ == md.version(dist)
        if dist != CORE:
            pins = [Requirement(r) for r in project["dependencies"]]
            assert [str(r.specifier) for r in pins if r.name == CORE] == [f"=={__version__}"]


# Imports a member's code makes whose distribution the member does not bring itself:
# kaos_core.auth's token verification (PyJWT) runs only in the services that verify
# tokens, and those bring it (test_auth_extras). kaos_core.memory.receipt's signatures
# (cryptography) run in the memory service, which signs, and the CLI, which verifies.
UNDECLARED = {(CORE, "jwt"), (CORE, "cryptography")}


def test_the_receipt_signers_and_verifiers_bring_cryptography() -> None:
    for dist in (MEMBERS["images/memory"], CLI_DIST):
        assert "cryptography" in _closure(dist), dist


def _imported_modules(package: Path) -> set[str]:
    """Top-level names of every module the package's code imports, at any depth."""
    names: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name.partition(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.partition(".")[0])
    return names - set(sys.stdlib_module_names) - {"__future__"}


@pytest.mark.parametrize("directory", sorted(MEMBERS))
def test_member_brings_every_library_its_code_imports(directory: str) -> None:
    dist = MEMBERS[directory]
    (package,) = (ROOT / directory).glob("kaos_*/__init__.py")
    closure = _closure(dist)
    providers = md.packages_distributions()
    missing = {
        module
        for module in _imported_modules(package.parent)
        if (dist, module) not in UNDECLARED
        and not {canonicalize_name(d) for d in providers.get(module, [])} & closure
    }
    assert not missing, f"{dist} does not bring {sorted(missing)}"


def test_the_makefile_installs_every_member() -> None:
    makefile = (ROOT / "Makefile").read_text()
    listed = re.search(r"^MEMBERS := (.*)$", makefile, flags=re.MULTILINE)
    assert listed is not None
    assert set(listed.group(1).split()) == set(MEMBERS)


@pytest.mark.parametrize("image", sorted(IMAGE_MEMBERS))
def test_image_installs_only_its_members(image: str) -> None:
    """Each Dockerfile copies in and installs the members its image runs, never the CLI
    (nor the development model, but for the agent image)."""
    text = (ROOT / "images" / image / "Dockerfile").read_text()
    # The RUN line as the shell sees it, continuation lines joined.
    installs = re.search(
        r"pip install --quiet --constraint constraints\.txt (.*?) &&", text.replace("\\\n", " ")
    )
    assert installs is not None
    paths = [p.removeprefix("./") for p in installs.group(1).split()]
    assert sorted(paths) == sorted(IMAGE_MEMBERS[image])
    copied = set(re.findall(r"^COPY (\S+) ", text, flags=re.MULTILINE))
    assert "cli" not in copied
    assert ("devmodel" in copied) == ("devmodel" in IMAGE_MEMBERS[image])
