"""Typed application keys shared by the base app and its middleware."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CollectorRegistry

from kaos_core.health import Readiness
from kaos_core.http.limits import HttpLimits
from kaos_core.metrics import HttpMetrics

REGISTRY_KEY = web.AppKey("kaos_registry", CollectorRegistry)
HTTP_METRICS_KEY = web.AppKey("kaos_http_metrics", HttpMetrics)
READINESS_KEY = web.AppKey("kaos_readiness", Readiness)
SERVICE_NAME_KEY = web.AppKey("kaos_service_name", str)
MAX_BODY_KEY = web.AppKey("kaos_max_body_bytes", int)
BODY_TIMEOUT_KEY = web.AppKey("kaos_body_timeout", float)
LIMITS_KEY = web.AppKey("kaos_http_limits", HttpLimits)
REQUEST_ID_KEY = web.RequestKey("kaos_request_id", str)
