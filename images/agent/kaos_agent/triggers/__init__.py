"""Webhook triggers: a signed HTTP delivery starts one A2A task of the agent
(``kaos_agent.triggers.http``), its message a template over the payload."""

from __future__ import annotations

from kaos_agent.triggers.http import setup_triggers

__all__ = ["setup_triggers"]
