"""``python -m kaos_core.openapi [--check] DIR``: write or check the memory service's
OpenAPI document (``hack/gen-docs`` runs it)."""

from __future__ import annotations

import sys

from kaos_core.openapi import write_or_check
from kaos_core.openapi.memory import memory_document

sys.exit(write_or_check(sys.argv[1:], "memory.json", memory_document()))
