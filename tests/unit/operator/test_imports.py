"""The operator package imports one way: its module graph has no cycle.

Built from the source with ``ast`` (every ``import``/``from`` of a ``kaos_operator``
module, including ones under ``if TYPE_CHECKING`` or inside functions, since a lazy
import that hides a cycle is exactly what this guards against).
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import kaos_operator

PACKAGE = Path(kaos_operator.__file__).parent


def module_name(path: Path) -> str:
    parts = ["kaos_operator", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                # ``from pkg import mod`` imports the submodule when there is one.
                targets = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
                targets = targets or [base]
            for target in targets:
                # The deepest module named by the import, and not the package importing it.
                while target not in modules and "." in target:
                    target = target.rpartition(".")[0]
                if target in modules and target != name:
                    deps.add(target)
        graph[name] = deps
    return graph


def test_every_module_is_in_the_graph() -> None:
    graph = import_graph()
    assert {"kaos_operator.controller", "kaos_operator.reconcilers.base"} <= graph.keys()
    assert "kaos_operator.context" in graph["kaos_operator.reconcilers.base"]


def test_the_operator_package_has_no_import_cycle() -> None:
    try:
        order = list(TopologicalSorter(import_graph()).static_order())
    except CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None
    assert order.index("kaos_operator.reconcilers") < order.index("kaos_operator.controller")


def test_reconcilers_do_not_import_the_controller() -> None:
    graph = import_graph()
    for name, deps in graph.items():
        if name.startswith("kaos_operator.reconcilers"):
            assert "kaos_operator.controller" not in deps, name
            assert "kaos_operator.app" not in deps, name
