"""Latency and fault injection, for reliability tests of whatever calls the model.

A fault applies to a request when its route (``chat``, ``embeddings``, ``models``) or the
kind of chat request (``extraction``, ``digest``, ``supersede``) is listed in ``routes``. In
that order: ``hang`` holds the request until the faults change, a reset, shutdown or the
client going away; ``delay`` waits that many seconds; ``error_rate`` fails that share of
requests with ``status``. Which requests fail is decided by a random number generator
seeded from the settings, so a sequence of requests fails the same way on every run.

``answer`` spoils the chat answers of those routes, as a small real model does: ``not_json``
answers a sentence of prose (no braces: Mem0 cannot find JSON in it), ``empty`` an empty
string, ``cut_off`` the first half of the real answer with ``finish_reason: length``,
``verbose`` the real answer repeated ``VERBOSE_REPEATS`` times. ``answer_times`` spoils only
that many answers (counted from the last change of faults), then the model answers well
again, so a test can show a retry recovering.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace
from typing import Literal

from aiohttp import web
from kaos_core.errors import KaosError
from pydantic import BaseModel, ConfigDict, Field

from kaos_devmodel.chat import Answer

FaultRoute = Literal["chat", "embeddings", "models", "extraction", "digest", "supersede"]
DEFAULT_ROUTES: tuple[FaultRoute, ...] = ("chat", "embeddings")
AnswerFault = Literal["none", "not_json", "empty", "cut_off", "verbose"]

NOT_JSON = "Sure! The user shared a few details about themselves, which I will remember."
VERBOSE_REPEATS = 50

# How often a hung request looks whether its client went away; aiohttp does not cancel
# handlers on disconnect, so without this a hung request would outlive its client.
_DISCONNECT_POLL_SECONDS = 0.2


class FaultConfig(BaseModel):
    """The faults in force; also the body of ``POST /control/faults`` (replaces them all)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    delay: float = Field(default=0.0, ge=0.0, le=3600.0)
    error_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    status: int = Field(default=500, ge=400, le=599)
    hang: bool = False
    answer: AnswerFault = "none"
    answer_times: int | None = Field(default=None, ge=1)
    routes: list[FaultRoute] = Field(default_factory=lambda: list(DEFAULT_ROUTES))

    def applies_to(self, route: str, kind: str | None) -> bool:
        return route in self.routes or (kind is not None and kind in self.routes)


class InjectedFault(KaosError):
    """The error a request was chosen to fail with."""

    code = "injected_fault"

    def __init__(self, status: int) -> None:
        super().__init__(f"fault injected by kaos-devmodel (HTTP {status})")
        self.status = status


class ClientGone(KaosError):
    """The client of a hung request disconnected; there is nobody left to answer.

    Raised like any domain error so the middleware ends the request in one place; the
    status (nginx's "client closed request") only shows in the request metrics.
    """

    status = 499
    code = "client_closed_request"


class FaultInjector:
    """The faults in force plus the seeded generator that picks the failing requests."""

    def __init__(self, config: FaultConfig, seed: int) -> None:
        self._seed = seed
        self._rng = random.Random(seed)
        self._config = config
        self._release = asyncio.Event()
        self._spoiled = 0

    @property
    def config(self) -> FaultConfig:
        return self._config

    def replace(self, config: FaultConfig, *, reseed: bool = False) -> None:
        """Put ``config`` in force and release every request hung under the old one."""
        self._config = config
        self._spoiled = 0
        if reseed:
            self._rng = random.Random(self._seed)
        self.release_all()

    def release_all(self) -> None:
        self._release.set()
        self._release = asyncio.Event()

    async def hold(self, request: web.Request, route: str, kind: str | None) -> int | None:
        """Apply hang and delay; the status to fail with, or None to answer.

        The faults in force when the request arrived decide, even if they change while it
        waits. Raises ``ClientGone`` when the client of a hung request disconnected.
        """
        cfg = self._config
        if not cfg.applies_to(route, kind):
            return None
        if cfg.hang:
            await self._hang(request)
        if cfg.delay > 0:
            await asyncio.sleep(cfg.delay)
        if cfg.error_rate > 0.0 and self._rng.random() < cfg.error_rate:
            return cfg.status
        return None

    async def _hang(self, request: web.Request) -> None:
        release = self._release
        while not release.is_set():
            transport = request.transport
            if transport is None or transport.is_closing():
                raise ClientGone("the client closed the connection")
            try:
                await asyncio.wait_for(release.wait(), _DISCONNECT_POLL_SECONDS)
            except TimeoutError:
                continue

    def spoil(self, route: str, kind: str | None, answer: Answer) -> tuple[Answer, bool]:
        """``answer`` as the answer fault in force spoils it, and whether it was cut off
        (the completion's ``finish_reason`` is then ``length``)."""
        cfg = self._config
        if cfg.answer == "none" or not cfg.applies_to(route, kind):
            return answer, False
        if cfg.answer_times is not None and self._spoiled >= cfg.answer_times:
            return answer, False
        self._spoiled += 1
        text = answer.content or ""
        if cfg.answer == "not_json":
            content = NOT_JSON
        elif cfg.answer == "empty":
            content = ""
        elif cfg.answer == "cut_off":
            content = text[: len(text) // 2]
        else:
            content = "\n".join([text] * VERBOSE_REPEATS)
        return replace(answer, content=content, tool_calls=()), cfg.answer == "cut_off"
