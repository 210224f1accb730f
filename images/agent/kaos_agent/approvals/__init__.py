"""Approval gates: tool calls that wait for a human's decision before they run.

``gate`` wraps the toolsets the Agent's rules name (pydantic-ai's ``ApprovalRequiredToolset``:
a gated call raises ``ApprovalRequired`` before anything runs, and the run ends with
``DeferredToolRequests``). ``pending`` is the paused task's shape: ``input-required``, the
pending calls in its status message (a DataPart) and in its metadata under
``kaos.dev/approval``, its history checkpointed in the task store. ``desk`` takes the
decisions (an A2A ``SendMessage`` to the paused task, or the timeout) and resumes the run
on whichever replica decided, with ``DeferredToolResults``.
"""
