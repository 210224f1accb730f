"""The settings variables a program reads, so the shell's can be blanked, and those a
running process really has."""

from __future__ import annotations

from pathlib import Path

from kaos_agent.mcp_runtime.settings import McpSettings
from kaos_agent.settings import AgentSettings
from kaos_core.telemetry import TelemetrySettings
from kaos_devmodel import DevModelSettings
from kaos_memory.settings import MemorySettings

from tests.support.procs import ServiceProcess


def runtime_variables(program: str) -> set[str]:
    """Every variable the program reads as a setting (so the shell's can be blanked),
    the tracing ones (``OTEL_*``, read by every KAOS program) included."""
    own = _own_variables(program)
    if not own:
        return own
    return own | {TelemetrySettings.env_name(f) for f in TelemetrySettings.model_fields}


def _own_variables(program: str) -> set[str]:
    if program == "kaos-agent":
        return set(AgentSettings.env_names())
    if program == "kaos-mcp":
        return set(McpSettings.env_names())
    if program == "kaos-memory":
        names = set(MemorySettings.env_names())
        return names | {"KAOS_MEMORY_LOCAL_COLLECTION", "KAOS_MEMORY_EXTERNAL_COLLECTION"}
    if program == "kaos-devmodel":
        return {DevModelSettings.env_name(f) for f in DevModelSettings.model_fields}
    return set()


def process_settings_env(pid: int, program: str) -> dict[str, str]:
    """The non-empty settings variables a running process actually has (Linux /proc)."""
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    names = runtime_variables(program)
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.decode(errors="replace").partition("=")
        if sep and name in names and value:
            out[name] = value
    return out


def environ_of(proc: ServiceProcess) -> dict[str, str]:
    """The settings variables the running process really has (see ``process_settings_env``)."""
    program = Path(proc.proc.args[0] if isinstance(proc.proc.args, list) else "").name
    return process_settings_env(proc.proc.pid, program)
