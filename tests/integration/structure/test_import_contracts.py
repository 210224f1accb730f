"""The import contracts in ``.importlinter`` hold, and they do catch what they forbid.

``lint-imports`` (import-linter) reads the packages from the interpreter's path, so a
package copied into a temporary directory on ``PYTHONPATH`` with one import added shadows
the installed one: the same contracts then have to fail on it, naming the import.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import kaos_core
import kaos_operator
import pytest

REPO = Path(__file__).resolve().parents[3]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(*contracts: str, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(path), env.get("PYTHONPATH", "")])
    args = [str(LINT_IMPORTS), "--no-cache", "--no-logo"]
    for contract in contracts:
        args += ["--contract", contract]
    return subprocess.run(
        args, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def copy_with_import(tmp_path: Path, package: Path, module: str, line: str) -> Path:
    """A copy of ``package`` under ``tmp_path`` whose ``module`` file also has ``line``."""
    target = tmp_path / package.name
    shutil.copytree(package, target, ignore=shutil.ignore_patterns("__pycache__"))
    path = target / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    return tmp_path


def test_every_contract_holds() -> None:
    result = lint_imports()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("package", "module", "line", "contract", "named"),
    [
        # A desired-object builder reaching up into the controller.
        (
            kaos_operator,
            "desired/common.py",
            "import kaos_operator.controller",
            "operator-layers",
            "kaos_operator.desired.common -> kaos_operator.controller",
        ),
        # The Kubernetes layer importing the watch that already imports it: a cycle.
        (
            kaos_operator,
            "kube.py",
            "import kaos_operator.watch",
            "acyclic",
            "No cycles are allowed in kaos_operator",
        ),
        # The core, installed in every image, importing the CLI.
        (
            kaos_core,
            "tokens.py",
            "import kaos_cli",
            "distributions",
            "kaos_core.tokens -> kaos_cli",
        ),
        # The core importing a library only the CLI installs.
        (kaos_core, "tokens.py", "import click", "core-libraries", "kaos_core.tokens -> click"),
    ],
    ids=["upward", "cycle", "core-on-cli", "core-on-click"],
)
def test_a_forbidden_import_breaks_its_contract(
    tmp_path: Path, package: object, module: str, line: str, contract: str, named: str
) -> None:
    root = Path(package.__file__).parent  # type: ignore[attr-defined]
    result = lint_imports(contract, path=copy_with_import(tmp_path, root, module, line))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "BROKEN" in result.stdout
    assert named in result.stdout, result.stdout
