"""One reconciler per kind: resolve dependencies, apply desired objects, write status."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kaos_operator.controller import Controller, Reconciler


def build_reconcilers(ctl: Controller) -> dict[str, Reconciler]:
    from kaos_operator.reconcilers.agent import AgentReconciler
    from kaos_operator.reconcilers.mcpserver import MCPServerReconciler
    from kaos_operator.reconcilers.memorystore import MemoryStoreReconciler
    from kaos_operator.reconcilers.modelapi import ModelAPIReconciler

    return {
        "Agent": AgentReconciler(ctl),
        "ModelAPI": ModelAPIReconciler(ctl),
        "MCPServer": MCPServerReconciler(ctl),
        "MemoryStore": MemoryStoreReconciler(ctl),
    }
