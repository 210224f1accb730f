"""Each KAOS image holds its own distributions and nothing of the CLI, the console or
another image: the installed distributions as the image's Python lists them, and the files
on its disk."""

from __future__ import annotations

import json

import pytest

from tests.e2e.images.harness import KAOS_IMAGES, SITE_PACKAGES, Containers, ref_of

pytestmark = [pytest.mark.images, pytest.mark.timeout(3600)]

# The workspace's distributions each image installs (its Dockerfile).
OWN = {
    "memory": {"kaos-tools-core", "kaos-tools-memory"},
    # samples/devmodel.yaml runs `kaos-devmodel` from the agent image.
    "agent": {"kaos-tools-core", "kaos-tools-agent", "kaos-tools-devmodel"},
    "operator": {"kaos-tools-core", "kaos-tools-operator"},
}
WORKSPACE = {
    "kaos",
    "kaos-tools",
    "kaos-tools-core",
    "kaos-tools-devmodel",
    "kaos-tools-memory",
    "kaos-tools-agent",
    "kaos-tools-operator",
}
# The command line's, the console's and the development model's code: their packages, and
# where they lived inside the core before they had their own.
TOOL_MODULES = {"kaos_cli", "kaos_core/cli", "kaos_devmodel", "kaos_core/devmodel"}
# The command line's own libraries. The agent image's libraries bring them (uvicorn's
# command line and fastmcp's logging, both imported when it serves), so only the memory
# and operator images are held to their absence.
CLI_LIBRARIES = {"click", "rich"}
ALLOWED = {
    "memory": set[str](),
    "agent": {"kaos_devmodel", *CLI_LIBRARIES},
    "operator": set[str](),
}
COMMANDS = {
    "memory": {"kaos-memory"},
    "agent": {"kaos-agent", "kaos-mcp", "kaos-devmodel"},
    "operator": {"kaos-operator"},
}
LIST_DISTRIBUTIONS = (
    "import importlib.metadata as m, json, re\n"
    "print(json.dumps(sorted(re.sub(r'[-_.]+', '-', d.metadata['Name']).lower()\n"
    "                        for d in m.distributions())))\n"
)


@pytest.mark.parametrize("image", sorted(KAOS_IMAGES))
def test_image_installs_only_its_own_distributions(containers: Containers, image: str) -> None:
    listed = containers.run(ref_of(image), "python", "-c", LIST_DISTRIBUTIONS)
    assert listed.returncode == 0, listed.stderr
    installed = set(json.loads(listed.stdout))
    assert installed & WORKSPACE == OWN[image]
    libraries = (installed & CLI_LIBRARIES) - ALLOWED[image]
    assert not libraries, f"{image} installs {sorted(libraries)}"


@pytest.mark.parametrize("image", sorted(KAOS_IMAGES))
def test_image_files_hold_no_cli_console_or_devmodel_code(
    containers: Containers, image: str
) -> None:
    with containers.mounted(ref_of(image)) as root:
        (site,) = list(root.glob(SITE_PACKAGES))
        present = {
            name
            for name in TOOL_MODULES | CLI_LIBRARIES
            if (site / name).is_dir() or (site / f"{name}.py").is_file()
        }
        assert present <= ALLOWED[image], f"{image} holds {sorted(present - ALLOWED[image])}"
        # Nothing of it anywhere else either, e.g. a copy outside site-packages.
        strays = [
            str(p.relative_to(root))
            for p in root.glob("opt/**/kaos_cli")
            if p.is_dir() or p.suffix == ".py"
        ]
        assert strays == []
        # Each image's package directories are the workspace's own, and nothing else is.
        packages = {p.name for p in site.glob("kaos_*") if p.suffix != ".dist-info"}
        expected = {f"kaos_{d.removeprefix('kaos-tools-')}" for d in OWN[image]}
        assert packages == expected
        commands = {p.name for p in (root / "opt/kaos/venv/bin").glob("kaos*")}
        assert commands == COMMANDS[image]
