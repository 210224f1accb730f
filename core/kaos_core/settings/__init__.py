"""Settings from the environment: typed, grouped, documented, validated at load.

Each service's settings are one object of small groups (``kaos_core.settings.model``), each
group one concern's variables, declared once with ``setting`` and handed to the component
that needs it: the HTTP limits and tracing of every server, the caller and user identity of
the services that verify them (``kaos_core.settings.auth``), each service's own. Loading
reads only those variables and turns any validation error into one ``SettingsError`` line
that names the variables, so a bad deployment fails at start instead of with a traceback.
The same fields document themselves: the settings tables are generated from them
(``kaos_core.settings.docs``, ``python -m kaos_core.settings``).
"""

from __future__ import annotations

from kaos_core.settings.docs import main, region, replace_region, settings_markdown
from kaos_core.settings.model import (
    ServiceSettings,
    SettingsError,
    SettingsGroup,
    exit_on_settings_error,
    group,
    load_settings,
    setting,
)

__all__ = [
    "ServiceSettings",
    "SettingsError",
    "SettingsGroup",
    "exit_on_settings_error",
    "group",
    "load_settings",
    "main",
    "region",
    "replace_region",
    "setting",
    "settings_markdown",
]
