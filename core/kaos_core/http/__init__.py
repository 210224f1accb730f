"""aiohttp scaffolding shared by every KAOS service."""

from kaos_core.health import Readiness
from kaos_core.http.app import create_base_app, run_service
from kaos_core.http.body import json_response, read_model
from kaos_core.http.keys import HTTP_METRICS_KEY, READINESS_KEY, REGISTRY_KEY

__all__ = [
    "HTTP_METRICS_KEY",
    "READINESS_KEY",
    "REGISTRY_KEY",
    "Readiness",
    "create_base_app",
    "json_response",
    "read_model",
    "run_service",
]
