"""Why the stack cannot be planned or started."""

from __future__ import annotations


class StackError(RuntimeError):
    """The stack cannot be planned or started; the message says what to do."""
