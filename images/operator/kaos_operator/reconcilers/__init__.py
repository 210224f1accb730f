"""One reconciler per kind, all on the template in ``base``; they see only the context."""

from __future__ import annotations

from typing import Any

from kaos_operator.capabilities import CapabilityReader, read_capabilities
from kaos_operator.context import ReconcileContext, WorkloadReader
from kaos_operator.receipt_key import ReceiptKeyReader
from kaos_operator.reconcilers.agent import AgentReconciler
from kaos_operator.reconcilers.base import Outcome, Reconciler
from kaos_operator.reconcilers.mcpserver import MCPServerReconciler
from kaos_operator.reconcilers.memorystore import MemoryStoreReconciler
from kaos_operator.reconcilers.modelapi import ModelAPIReconciler
from kaos_operator.status import Clock, utc_now
from kaos_operator.tools import ToolLister, list_tool_names


def build_reconcilers(
    ctx: ReconcileContext,
    *,
    clock: Clock = utc_now,
    tool_lister: ToolLister = list_tool_names,
    capability_reader: CapabilityReader = read_capabilities,
    workload_reader: WorkloadReader | None = None,
    receipt_key_reader: ReceiptKeyReader | None = None,
) -> dict[str, Reconciler[Any]]:
    """A reconciler of every kind, keyed by kind; ``clock`` stamps condition transitions,
    ``tool_lister`` reads an MCP server's tools (``kaos_operator.tools``),
    ``capability_reader`` a ModelAPI's models' capabilities (``kaos_operator.capabilities``),
    ``workload_reader`` pods and Events while a Deployment is not available
    (``kaos_operator.workload``; without it the status says only "progressing"),
    ``receipt_key_reader`` a MemoryStore's receipt key (``kaos_operator.receipt_key``;
    without it the status has none)."""
    built: list[Reconciler[Any]] = [
        AgentReconciler(ctx, clock=clock, workload_reader=workload_reader),
        ModelAPIReconciler(
            ctx,
            clock=clock,
            capability_reader=capability_reader,
            workload_reader=workload_reader,
        ),
        MCPServerReconciler(
            ctx, clock=clock, tool_lister=tool_lister, workload_reader=workload_reader
        ),
        MemoryStoreReconciler(
            ctx,
            clock=clock,
            workload_reader=workload_reader,
            receipt_key_reader=receipt_key_reader,
        ),
    ]
    return {r.kind: r for r in built}


__all__ = ["Outcome", "Reconciler", "build_reconcilers"]
