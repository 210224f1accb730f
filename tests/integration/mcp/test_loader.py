"""Tool functions from Python source: what becomes a tool, and what stops start-up."""

from __future__ import annotations

import subprocess

import pytest
from kaos_agent.mcp_runtime.loader import ToolSourceError, load_tools

from tests.support.procs import console_script

SOURCE = '''
import math
from os.path import join

def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()

async def area(radius: float) -> float:
    """Area of a circle."""
    return math.pi * radius * radius

def _helper() -> None:
    pass

alias = shout
square = lambda x: x * x

class NotATool:
    pass
'''


def test_public_top_level_functions_become_tools() -> None:
    tools = load_tools(SOURCE)
    assert sorted(tools) == ["area", "shout"]
    assert tools["shout"]("hi") == "HI"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def broken(:\n    pass\n", "does not compile"),
        ("import os\nX = 1\n", "defines no public top-level function"),
        ("", "empty"),
        ("raise RuntimeError('boom')\n", "failed while loading: RuntimeError: boom"),
    ],
)
def test_unusable_source_is_a_clear_error(source: str, message: str) -> None:
    with pytest.raises(ToolSourceError, match=message):
        load_tools(source)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def broken(:\n    pass\n", "does not compile"),
        ("X = 1\n", "defines no public top-level function"),
    ],
)
def test_kaos_mcp_refuses_to_start_with_one_line(source: str, message: str) -> None:
    env = {"MCP_TOOLS_STRING": source, "MCP_PORT": "1", "MCP_HOST": "127.0.0.1", "PATH": ""}
    proc = subprocess.run(
        [console_script("kaos-mcp")], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: MCP_TOOLS_STRING: ")
    assert message in lines[-1]
