"""A record set's store of the mode the task store's settings name (``TASK_STORE_TYPE``),
not yet started: beside the task store, so it is shared exactly as far as the tasks are.

Each caller passes its three stores; the PostgreSQL one as a function that imports its
module only when called, so psycopg and its pool stay out of an agent on another store
(as for the task store, ``kaos_agent.a2a.stores``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from kaos_agent.settings import TaskStoreSettings

T = TypeVar("T")


def beside_tasks(
    settings: TaskStoreSettings,
    *,
    memory: Callable[[], T],
    local: Callable[[Path], T],
    external: Callable[[str], T],
) -> T:
    """``external(dsn)``, ``local(path)`` or ``memory()``, as ``settings.type`` says."""
    if settings.type == "external":
        assert settings.dsn is not None  # checked by the settings
        return external(settings.dsn.get_secret_value())
    if settings.type == "local":
        assert settings.path is not None  # checked by the settings
        return local(settings.path)
    return memory()
