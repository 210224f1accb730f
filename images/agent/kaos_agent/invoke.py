"""One run of an agent, from the command line: what a schedule's CronJob pod runs.

``python -m kaos_agent.invoke --url URL --message TEXT [--session ID] [--token-file PATH]
[--timeout SECONDS]`` sends one A2A ``SendMessage`` (protocol 1.0, blocking: the answer
is the finished task) to the agent at ``URL``, in the session ``ID``, presenting the
token in ``PATH`` as ``X-Agent-Token`` exactly as a peer agent delegating to it would
(under the operator: the Agent's own projected token, so the run is self-subjected).
The token is read when the request is sent and never printed.

Exit status, which the Job's outcome (and the schedule's last result) follows:

- 0: the task completed;
- 1: the task ended otherwise (failed, canceled, rejected, or waiting for input);
- 2: bad arguments, or the token file is missing or empty;
- 3: the agent could not be reached, refused the request, or answered no task;
- 4: the deadline (``--timeout``) passed before the task ended.

One JSON line on stdout says what happened (the task's id and state, or why there was
none); the answer's text is not printed (it may quote the conversation).

With the standard ``OTEL_*`` variables set (the operator gives a schedule's pod the
Agent's), the run is a client span ``invoke_agent`` whose context the request carries: the
agent's spans of the run are its children, so a scheduled run is one trace from its start.
The spans are flushed before the process exits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from kaos_core.auth.tokenfile import TokenFile
from kaos_core.http.failures import describe_failure
from kaos_core.settings import SettingsError, exit_on_settings_error
from kaos_core.telemetry import TelemetrySettings, setup_telemetry, tracer
from kaos_core.telemetry import conventions as otel
from kaos_core.wire import A2A_VERSION_HEADER, AGENT_TOKEN_HEADER, SESSION_HEADER
from opentelemetry.propagate import inject
from opentelemetry.trace import SpanKind, StatusCode

A2A_VERSION = "1.0"
COMPLETED = "TASK_STATE_COMPLETED"

EXIT_COMPLETED = 0
EXIT_NOT_COMPLETED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_DEADLINE = 4


@dataclass(frozen=True)
class Outcome:
    """How the run ended: the exit status and the line printed about it."""

    code: int
    report: dict[str, Any]


def send_message_body(message: str, session: str) -> dict[str, Any]:
    """The JSON-RPC request of one blocking ``SendMessage`` in ``session``."""
    return {
        "jsonrpc": "2.0",
        "id": uuid.uuid4().hex,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": uuid.uuid4().hex,
                "role": "ROLE_USER",
                "parts": [{"text": message}],
                "contextId": session,
            },
            "configuration": {"acceptedOutputModes": ["text/plain"]},
        },
    }


def outcome_of(status: int, doc: object) -> Outcome:
    """The outcome an agent's answer (HTTP ``status``, JSON ``doc``) means."""
    if not isinstance(doc, dict) or doc.get("jsonrpc") != "2.0":
        return Outcome(EXIT_UNREACHABLE, {"error": f"answered HTTP {status} without JSON-RPC"})
    if "error" in doc:
        err = doc.get("error") or {}
        report = {"error": "refused", "status": status}
        if isinstance(err, dict):
            report |= {"code": err.get("code"), "message": err.get("message")}
        return Outcome(EXIT_UNREACHABLE, report)
    result = doc.get("result")
    if isinstance(result, dict) and "message" in result:
        # A direct answer without a task: the run is over.
        return Outcome(EXIT_COMPLETED, {"state": COMPLETED})
    task = result.get("task") if isinstance(result, dict) else None
    if not isinstance(task, dict):
        return Outcome(EXIT_UNREACHABLE, {"error": "the answer holds no task"})
    state = str((task.get("status") or {}).get("state") or "")
    report = {"task": task.get("id"), "state": state}
    return Outcome(EXIT_COMPLETED if state == COMPLETED else EXIT_NOT_COMPLETED, report)


async def invoke(
    url: str, message: str, *, session: str, token_file: Path | None, seconds: float
) -> Outcome:
    """Send the message and wait for the task to end, at most ``seconds`` (a client span
    around it: a no-op when tracing is off)."""
    attributes = {
        otel.OPERATION: "invoke_agent",
        otel.CONVERSATION_ID: session,
        "server.address": url,
    }
    with tracer(__name__).start_as_current_span(
        "invoke_agent", kind=SpanKind.CLIENT, attributes=attributes
    ) as span:
        outcome = await _invoke(url, message, session=session, token_file=token_file,
                                seconds=seconds)  # fmt: skip
        span.set_attribute("process.exit.code", outcome.code)
        if outcome.code != EXIT_COMPLETED:
            # The report's own words (an error class, a state), never the answer's text.
            why = outcome.report.get("error") or outcome.report.get("state") or "failed"
            span.set_status(StatusCode.ERROR, str(why))
        return outcome


async def _invoke(
    url: str, message: str, *, session: str, token_file: Path | None, seconds: float
) -> Outcome:
    headers = {SESSION_HEADER: session, A2A_VERSION_HEADER: A2A_VERSION}
    # The run's span, for the agent (nothing when tracing is off).
    inject(headers)
    if token_file is not None:
        token = TokenFile(token_file).read()
        if token is None:
            return Outcome(EXIT_USAGE, {"error": "the token file is missing or empty"})
        headers[AGENT_TOKEN_HEADER] = token
    body = send_message_body(message, session)
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=seconds)) as http,
            http.post(url.rstrip("/") + "/", json=body, headers=headers) as resp,
        ):
            status, text = resp.status, await resp.text()
    except TimeoutError:
        return Outcome(EXIT_DEADLINE, {"error": f"no answer within {seconds:g} seconds"})
    except aiohttp.ClientError as exc:
        return Outcome(EXIT_UNREACHABLE, {"error": describe_failure(exc)})
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        doc = None
    return outcome_of(status, doc)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m kaos_agent.invoke", description="Run an agent once over A2A."
    )
    parser.add_argument("--url", required=True, help="the agent's root URL")
    parser.add_argument("--message", required=True, help="what the agent is told")
    parser.add_argument("--session", default=None, help="the run's session (context id)")
    parser.add_argument("--token-file", type=Path, default=None, help="the agent token to present")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds to wait for the task to end"
    )
    args = parser.parse_args(argv)
    if not args.message.strip():
        parser.error("--message must not be empty")
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    if not args.url.startswith(("http://", "https://")):
        parser.error("--url must be an http:// or https:// URL")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        telemetry = setup_telemetry("kaos-invoke", TelemetrySettings.from_env())
    except SettingsError as exc:
        exit_on_settings_error(exc)
    session = args.session or f"invoke-{uuid.uuid4().hex[:12]}"
    try:
        outcome = asyncio.run(
            invoke(
                args.url,
                args.message,
                session=session,
                token_file=args.token_file,
                seconds=args.timeout,
            )
        )
    finally:
        if telemetry is not None:
            telemetry.shutdown()
    print(json.dumps({"session": session, **outcome.report}, sort_keys=True), flush=True)
    return outcome.code


if __name__ == "__main__":
    sys.exit(main())
