"""The A2A run recorder on a real pydantic-ai run (the model a function, as at the model
boundary): it checkpoints each model response and each tool result before the run goes
on, and a checkpoint refused (another replica claimed the task) stops the run."""

from __future__ import annotations

import pytest
from kaos_agent.a2a.checkpoint import LeaseLost, Recorder, decode
from kaos_agent.context import RunDeps
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
        return ModelResponse(parts=[TextPart("done")])
    return ModelResponse(parts=[ToolCallPart("step", {}, tool_call_id="c1")])


def agent() -> Agent[RunDeps, str]:
    made = Agent(FunctionModel(model), deps_type=RunDeps)

    @made.tool_plain
    async def step() -> str:
        return "stepped"

    return made


async def test_each_response_and_tool_result_is_checkpointed_in_order() -> None:
    saved: list[bytes] = []

    async def save(data: bytes) -> bool:
        saved.append(data)
        return True

    recorder = Recorder(save)
    recorder.begin("facts")
    result = await agent().run("go", deps=RunDeps(session_id="s"), capabilities=[recorder])
    assert result.output == "done"
    points = [decode(data) for data in saved]
    # The call, its result (kept while the run goes on), the final answer.
    assert len(points) == 3 and all(p.facts == "facts" for p in points)
    first = points[0].history[-1]
    assert isinstance(first, ModelRequest) and first.parts[0].outcome == "interrupted"  # type: ignore[union-attr]
    second = points[1].history[-1]
    assert isinstance(second, ModelRequest) and second.parts[0].content == "stepped"  # type: ignore[union-attr]
    assert isinstance(points[2].history[-1], ModelResponse)


async def test_a_refused_checkpoint_stops_the_run() -> None:
    async def save(data: bytes) -> bool:
        return False

    with pytest.raises(LeaseLost):
        await agent().run("go", deps=RunDeps(session_id="s"), capabilities=[Recorder(save)])
