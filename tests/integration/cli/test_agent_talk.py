"""``kaos agent chat``, ``agent tools`` and ``kaos a2a`` against a real agent runtime
(``kaos-agent``) on loopback whose model is ``kaos-devmodel``, through the real ``kaos``
executable. ``chat`` runs in a pseudo-terminal as a person would use it."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pty
import select
import signal
import subprocess
import termios
import time
from typing import Any

import pytest
import yaml

from tests.fixtures.agent import AgentFactory
from tests.support.devmodel import DevModel
from tests.support.procs import console_script

KAOS = console_script("kaos")


def kaos(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KAOS, *argv], capture_output=True, text=True, timeout=120, check=False)


def kaos_json(*argv: str) -> Any:
    proc = kaos(*argv, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _controlling_terminal() -> None:
    """In the child: a new session whose controlling terminal is the pty (stdin), so the
    terminal's Ctrl-C reaches it as SIGINT, as in a shell. SIGINT's default disposition
    too, as an interactive shell gives its foreground jobs: a suite started in the
    background (``make test &``) inherits it ignored, and Python then keeps it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """A process on a pseudo-terminal: type lines, read until the screen shows a text."""

    def __init__(self, argv: list[str]) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            argv,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            close_fds=True,
            env={**os.environ, "NO_COLOR": "1", "TERM": "dumb"},
            preexec_fn=_controlling_terminal,
        )
        os.close(slave)
        self.screen = ""

    def read_until(self, text: str, within: float = 60) -> str:
        deadline = time.monotonic() + within
        while text not in self.screen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"{text!r} not shown within {within}s; screen: {self.screen!r}"
                )
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # the process closed the terminal
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"{text!r} never shown; screen: {self.screen!r}")
                self.screen += chunk.decode("utf-8", "replace").replace("\r", "")
        return self.screen

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def close(self) -> int:
        try:
            return self.proc.wait(timeout=30)
        finally:
            os.close(self.master)


def test_chat_streams_two_turns_in_one_session_and_memory_replays(
    agent_factory: AgentFactory, devmodel: DevModel
) -> None:
    agent = agent_factory(name="assistant")
    term = Terminal([KAOS, "agent", "chat", "assistant", "--url", agent.url, "--principal", "ada"])
    try:
        screen = term.read_until("you> ")
        assert "chatting with assistant" in screen and "session cli-chat-" in screen
        term.type("my name is Ada")
        term.read_until("assistant> Echo: my name is Ada\n")
        term.read_until("you> ")
        term.type("what did I say")
        term.read_until("assistant> Echo: what did I say\n")
        term.read_until("you> ")
        term.type("/exit")
        assert term.close() == 0
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
            term.proc.wait()
    chats = [r for r in devmodel.requests() if r.get("kind") == "chat" or "messages" in r]
    assert len(chats) >= 2 and all(r["stream"] for r in chats[-2:])
    second = [(m["role"], m["content"]) for m in chats[-1]["messages"] if m["role"] != "system"]
    # The agent replayed the first turn of the session into the second request.
    assert ("user", "my name is Ada") in second
    assert ("assistant", "Echo: my name is Ada") in second
    assert second[-1] == ("user", "what did I say")


def test_a2a_send_get_list_and_cancel(agent_factory: AgentFactory) -> None:
    agent = agent_factory(name="tasker")
    url = ["--url", agent.url]

    sent = kaos_json("a2a", "send", "tasker", "hello tasks", *url, "--session", "s-a2a")
    assert sent["status"]["state"] == "TASK_STATE_COMPLETED"
    assert sent["artifacts"][0]["parts"][0]["text"] == "Echo: hello tasks"

    table = kaos("a2a", "get", "tasker", sent["id"], *url)
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()
    assert header.split() == ["TASK", "SESSION", "STATE", "ANSWER"]
    assert row.split()[:3] == [sent["id"], "s-a2a", "COMPLETED"]

    listed = kaos_json("a2a", "list", "tasker", *url, "--session", "s-a2a")
    assert [t["id"] for t in listed["tasks"]] == [sent["id"]]

    cancel = kaos("a2a", "cancel", "tasker", sent["id"], *url)
    assert cancel.returncode == 1
    assert cancel.stderr.startswith("error: CancelTask refused (-32002)")
    assert "not cancelable" in cancel.stderr and cancel.stderr.count("\n") == 1

    missing = kaos("a2a", "get", "tasker", "no-such-task", *url)
    assert missing.returncode == 1 and "GetTask refused (-32001)" in missing.stderr


def test_tools_lists_what_the_agent_card_advertises(agent_factory: AgentFactory) -> None:
    agent = agent_factory(name="toolful", AGENT_SUB_AGENTS="helper:http://127.0.0.1:9")
    document = kaos_json("agent", "tools", "toolful", "--url", agent.url)
    assert document["from"] == "agent"
    assert {
        "name": "delegate_to_helper",
        "source": "peer:helper",
        "description": "Delegates tasks to the agent helper.",
    } in document["tools"]


@pytest.mark.parametrize("command", ["chat", "tools"])
def test_unreachable_agent_url_is_one_line(command: str) -> None:
    proc = subprocess.run(
        [KAOS, "agent", command, "x", "--url", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=60,
        input="hi\n",
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1].startswith("error: agent at http://127.0.0.1:9 failed")
    assert "Traceback" not in proc.stderr


def test_chat_ctrl_c_at_the_prompt_ends_at_once(agent_factory: AgentFactory) -> None:
    agent = agent_factory(name="assistant")
    term = Terminal([KAOS, "agent", "chat", "assistant", "--url", agent.url])
    try:
        term.read_until("you> ")
        os.write(term.master, b"\x03")
        # The line may reach the terminal in two reads ("interrupted", then its newline).
        assert term.read_until("interrupted\n").endswith("interrupted\n")
        assert term.close() == 130
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
            term.proc.wait()


def rows(text: str) -> list[list[str]]:
    """A table's lines split into cells (the cells here have no spaces)."""
    return [line.split() for line in text.splitlines() if line.strip()]


def test_invoke_through_the_executable_in_every_format(agent_factory: AgentFactory) -> None:
    """``invoke`` keeps working for scripts: the answer alone on stdout, the session to
    continue on stderr; ``-o json|yaml`` print the whole completion."""
    agent = agent_factory(name="scripted")
    url = ["--url", agent.url]

    plain = kaos("agent", "invoke", "scripted", "hello script", *url)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == "Echo: hello script\n"
    assert plain.stderr.startswith("session: cli-") and "Traceback" not in plain.stderr

    for fmt, parse in (("json", json.loads), ("yaml", yaml.safe_load)):
        proc = kaos("agent", "invoke", "scripted", f"as {fmt}", *url, "--session", "s1", "-o", fmt)
        assert proc.returncode == 0, proc.stderr
        assert parse(proc.stdout)["choices"][0]["message"]["content"] == f"Echo: as {fmt}"
        assert proc.stderr == ""


def test_a2a_running_task_is_listed_then_cancelled(
    agent_factory: AgentFactory, devmodel: DevModel
) -> None:
    """A task whose model never answers: ``send --no-wait`` returns it still running, ``get``
    and ``list`` show it WORKING, ``cancel`` ends it CANCELED (exit 0) in every format."""
    agent = agent_factory(name="slow")
    url = ["--url", agent.url]
    done = kaos_json("a2a", "send", "slow", "first", *url, "--session", "s-run")
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    devmodel.set_faults(hang=True)

    sent = kaos("a2a", "send", "slow", "never answered", *url, "--session", "s-run", "--no-wait")
    assert sent.returncode == 0, sent.stderr
    header, row = rows(sent.stdout)
    assert header == ["TASK", "SESSION", "STATE", "ANSWER"]
    task_id, session, state = row[:3]
    assert session == "s-run" and state in ("SUBMITTED", "WORKING")

    deadline = time.monotonic() + 30
    while (got := yaml.safe_load(kaos("a2a", "get", "slow", task_id, *url, "-o", "yaml").stdout))[
        "status"
    ]["state"] != "TASK_STATE_WORKING":
        assert time.monotonic() < deadline, f"task never WORKING: {got}"
    assert got["id"] == task_id and got["contextId"] == "s-run"

    listed = kaos("a2a", "list", "slow", *url, "--session", "s-run")
    assert listed.returncode == 0, listed.stderr
    states = {r[0]: r[2] for r in rows(listed.stdout)[1:]}
    assert states == {done["id"]: "COMPLETED", task_id: "WORKING"}
    as_yaml = yaml.safe_load(kaos("a2a", "list", "slow", *url, "-o", "yaml").stdout)
    assert {t["id"] for t in as_yaml["tasks"]} == {done["id"], task_id}

    cancel = kaos("a2a", "cancel", "slow", task_id, *url)
    assert cancel.returncode == 0, cancel.stderr
    assert rows(cancel.stdout)[1][:3] == [task_id, "s-run", "CANCELED"]
    after = kaos_json("a2a", "get", "slow", task_id, *url)
    assert after["status"]["state"] == "TASK_STATE_CANCELED"


def _bearer_sha256(token: str) -> str:
    return hashlib.sha256(f"Bearer {token}".encode()).hexdigest()


def test_token_reaches_the_endpoint_from_the_flag_the_environment_and_chat(
    devmodel: DevModel,
) -> None:
    """``--token`` (or ``KAOS_TOKEN``) goes out as ``Authorization: Bearer``. The endpoint
    here is the project's OpenAI-compatible model server, which the CLI speaks to exactly
    as to an agent, and which records only a fingerprint of the header it received."""
    url = ["--url", devmodel.url]
    flag = kaos("agent", "invoke", "any", "with a flag", *url, "--token", "tok-flag")
    assert flag.returncode == 0, flag.stderr
    env = subprocess.run(
        [KAOS, "agent", "invoke", "any", "from the environment", *url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "KAOS_TOKEN": "tok-env"},
    )
    assert env.returncode == 0, env.stderr
    without = kaos("agent", "invoke", "any", "without", *url)
    assert without.returncode == 0, without.stderr

    term = Terminal([KAOS, "agent", "chat", "any", *url, "--token", "tok-chat"])
    try:
        term.read_until("you> ")
        term.type("in a chat")
        term.read_until("Echo: in a chat")
        term.type("/exit")
        assert term.close() == 0
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
            term.proc.wait()

    seen = {
        r["messages"][-1]["content"]: r.get("authorization_sha256") for r in devmodel.requests()
    }
    assert seen["with a flag"] == _bearer_sha256("tok-flag")
    assert seen["from the environment"] == _bearer_sha256("tok-env")
    assert seen["without"] is None
    assert seen["in a chat"] == _bearer_sha256("tok-chat")
