"""Mem0's ``get_all`` answer as fact records: the mapping decides the attribution, and a
memory that cannot be one is refused by its position."""

from __future__ import annotations

import pytest
from kaos_core.errors import BadRequest
from kaos_memory.portable.importer import InvalidLine
from kaos_memory.portable.mem0 import Mem0Mapping, fact_records

MEMORY = {
    "id": "m1",
    "memory": "Likes tea",
    "hash": "h",
    "metadata": {"source": "crm", "tags": ["a"]},
    "created_at": "2026-01-01T00:00:00-08:00",
    "updated_at": "2026-01-02T00:00:00-08:00",
    "user_id": "alice",
    "agent_id": "helper",
    "run_id": None,
    "role": "user",
}


def test_the_default_mapping_and_a_template() -> None:
    (fact,) = fact_records({"results": [MEMORY]}, Mem0Mapping())
    assert (fact.principal, fact.agent, fact.session) == ("alice", "helper", "mem0-import")
    assert fact.metadata == {"source": "crm", "tags": "['a']", "role": "user", "mem0_id": "m1"}
    mapping = Mem0Mapping.parse(
        {
            "agent": "kaos://agent/team/{agent_id}",
            "session": "{user_id}-{run_id}",
            "default_session": "old",
            "principal": "",
        }
    )
    (fact,) = fact_records([MEMORY], mapping)
    assert (fact.principal, fact.agent, fact.session) == (None, "kaos://agent/team/helper", "old")


@pytest.mark.parametrize(
    "items",
    [
        {"owner": "{user_id}"},
        {"principal": "{email}"},
        {"agent": "{agent_id"},
        {"default_session": ""},
    ],
)
def test_a_mapping_names_known_attributes_and_ids(items: dict[str, str]) -> None:
    with pytest.raises(BadRequest) as refused:
        Mem0Mapping.parse(items)
    assert refused.value.code == "invalid_mapping"


def test_a_memory_that_is_not_a_fact_is_refused_by_position() -> None:
    with pytest.raises(InvalidLine) as refused:
        list(fact_records({"results": [MEMORY, {**MEMORY, "memory": ""}]}, Mem0Mapping()))
    assert refused.value.message.startswith("result 2: ")
    with pytest.raises(BadRequest):
        list(fact_records({"memories": []}, Mem0Mapping()))
