"""Tool functions from Python source (``runtime: python-string``).

Every public top-level function the source defines becomes a tool: not the ones it
imports, not names starting with ``_``, not lambdas. The docstring is the description
and the type hints the schema (the ``mcp`` SDK derives both). Source that does not
compile, fails while running its top level, or defines no tool is a ``ToolSourceError``
whose message is one line fit for a start-up failure.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

SOURCE_MODULE = "kaos_mcp_tools"


class ToolSourceError(Exception):
    """The tool source cannot be served."""


def load_tools(
    source: str, *, filename: str = "<MCP_TOOLS_STRING>"
) -> dict[str, Callable[..., Any]]:
    if not source.strip():
        raise ToolSourceError("the tool source is empty")
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as exc:
        raise ToolSourceError(
            f"the tool source does not compile: {exc.msg} (line {exc.lineno})"
        ) from None
    namespace: dict[str, Any] = {"__name__": SOURCE_MODULE, "__builtins__": __builtins__}
    try:
        exec(code, namespace)
    except Exception as exc:  # noqa: BLE001  (the source's own error, reported in one line)
        raise ToolSourceError(
            f"the tool source failed while loading: {type(exc).__name__}: {exc}"
        ) from None
    tools: dict[str, Callable[..., Any]] = {
        name: value
        for name, value in namespace.items()
        if not name.startswith("_")
        and inspect.isfunction(value)
        and value.__module__ == SOURCE_MODULE
        and value.__name__ == name
    }
    if not tools:
        raise ToolSourceError("the tool source defines no public top-level function")
    return tools
