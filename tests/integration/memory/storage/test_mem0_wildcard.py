"""Regression pin of Mem0 2.2.1's ``"*"`` wildcard on both vector backends, called directly.

KAOS puts the wildcard only on ``run_id`` (every fact has one) because ``user_id="*"`` is
not the same filter on the two stores: Chroma drops the condition, pgvector turns it into
"the key is present", which silently hides facts written without a principal. If a Mem0
upgrade changes either behaviour, this test says so before tenants notice.
Sync test: Mem0 blocks, and it runs here in the test process, not in the service.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kaos_memory.settings import MemorySettings

from tests.support.devmodel import DevModel
from tests.support.storage import settings_mem0_config

BOTH = ["with principal", "without principal"]


@pytest.mark.parametrize("backend", ["local", "external"])
def test_wildcard_semantics_per_backend(
    backend: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    devmodel: DevModel,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dsn = request.getfixturevalue("pg_dsn") if backend == "external" else None
    settings = MemorySettings(
        storage=backend,  # type: ignore[arg-type]
        data_dir=tmp_path,
        dsn=dsn,
        collection="wildcard_pin",
        model_base_url=devmodel.base_url,
        embedding_dims=devmodel.embedding_dims,
    )
    monkeypatch.setenv("MEM0_TELEMETRY", "False")
    monkeypatch.setenv("MEM0_DIR", str(settings.backend.mem0_dir))
    settings.backend.mem0_dir.mkdir(parents=True)
    from mem0 import Memory

    memory: Any = Memory.from_config(settings_mem0_config(settings))
    try:
        meta = {"kaos_group": "g"}
        memory.add(
            "with principal", user_id="u1", agent_id="a1", run_id="r1", metadata=meta, infer=False
        )
        memory.add("without principal", agent_id="a1", run_id="r2", metadata=meta, infer=False)

        def listed(filters: dict[str, str]) -> list[str]:
            return sorted(
                r["memory"] for r in memory.get_all(filters=filters, top_k=100)["results"]
            )

        def searched(filters: dict[str, str]) -> list[str]:
            found = memory.search("principal", filters=filters, top_k=100, threshold=0.0)
            return sorted(r["memory"] for r in found["results"])

        for view in (listed, searched):
            # What KAOS sends for the store level and for an agent read without principal.
            assert view({"run_id": "*", "kaos_group": "g"}) == BOTH
            assert view({"agent_id": "a1", "kaos_group": "g"}) == BOTH
            user_wildcard = view({"user_id": "*", "kaos_group": "g"})
            if backend == "local":
                assert user_wildcard == BOTH  # Chroma: the condition is dropped
            else:
                assert user_wildcard == ["with principal"]  # pgvector: "user_id" present
    finally:
        pool = getattr(memory.vector_store, "connection_pool", None)
        if pool is not None:
            pool.close()
