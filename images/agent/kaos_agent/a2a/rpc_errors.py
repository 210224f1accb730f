"""The A2A JSON-RPC errors a method raises (``kaos_agent.a2a.server`` writes them), with
the codes of the A2A specification."""

from __future__ import annotations

TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
UNSUPPORTED_OPERATION = -32004
VERSION_NOT_SUPPORTED = -32009


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
