"""A run's usage on its A2A task: ``kaos.dev/usage`` in the ended task's metadata (input,
output and total tokens, and the finish reason: ``length`` when a limit ended the run).

Outside ``kaos_agent.usage`` (whose ledgers reuse the A2A store's helpers), so the A2A
server can use it without a cycle."""

from __future__ import annotations

from collections.abc import Callable

from a2a.types import a2a_pb2 as pb

from kaos_agent.runner import RunOutcome

# As ``kaos_agent.a2a.tasks.Transition``: a change to a stored task, True when it applied.
Transition = Callable[[pb.Task], bool]

METADATA_KEY = "kaos.dev/usage"


def with_usage(change: Transition, outcome: RunOutcome) -> Transition:
    """``change``, then the run's usage in the task's metadata when ``change`` applied."""

    def apply(task: pb.Task) -> bool:
        if not change(task):
            return False
        usage = outcome.usage
        task.metadata.update(
            {
                METADATA_KEY: {
                    "inputTokens": usage.input_tokens,
                    "outputTokens": usage.output_tokens,
                    "totalTokens": usage.total_tokens,
                    "finishReason": outcome.finish_reason,
                }
            }
        )
        return True

    return apply
