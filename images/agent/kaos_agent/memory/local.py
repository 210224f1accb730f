"""Pod-local short-term memory: a window of recent turns per session, bounded by tokens.

The window is keyed by principal and session, so a session id guessed by another
principal reads nothing. Tokens are estimated as the memory service estimates them
(``kaos_core.tokens``); the oldest turns leave first. The number of sessions held is
bounded too (least recently used leave first) so a pod that serves many short
conversations does not grow without limit.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import Sequence

from kaos_core.memory.contract import Turn, WriteOrigin
from kaos_core.tokens import turn_tokens

from kaos_agent.context import RunDeps
from kaos_agent.memory.base import Recalled
from kaos_agent.memory.turns import messages_from_turns

MAX_SESSIONS = 10_000


class LocalMemory:
    def __init__(self, token_budget: int, *, max_sessions: int = MAX_SESSIONS) -> None:
        self.token_budget = token_budget
        self.max_sessions = max_sessions
        self._windows: OrderedDict[tuple[str, str], deque[Turn]] = OrderedDict()
        self._lock = asyncio.Lock()

    @staticmethod
    def _key(deps: RunDeps) -> tuple[str, str]:
        return (deps.principal or "", deps.session_id)

    def window(self, deps: RunDeps) -> list[Turn]:
        return list(self._windows.get(self._key(deps), ()))

    async def recall(self, deps: RunDeps, query: str) -> Recalled:
        turns = [(t.role, t.content) for t in self.window(deps)]
        return Recalled(history=messages_from_turns(turns))

    async def remember(
        self, deps: RunDeps, turns: Sequence[Turn], origin: WriteOrigin = "conversation"
    ) -> None:
        # The pod-local window has no long-term tier for an origin to matter to.
        if not turns:
            return
        async with self._lock:
            key = self._key(deps)
            window = self._windows.pop(key, None) or deque()
            window.extend(turns)
            total = sum(turn_tokens(t.content) for t in window)
            # Keep at least the newest turn even when it alone is over the budget.
            while len(window) > 1 and total > self.token_budget:
                total -= turn_tokens(window.popleft().content)
            # A window must not start with a tool or assistant turn cut from its question.
            while len(window) > 1 and window[0].role != "user":
                window.popleft()
            self._windows[key] = window
            while len(self._windows) > self.max_sessions:
                self._windows.popitem(last=False)

    async def close(self) -> None:
        self._windows.clear()
