"""Who depends on whom: Agents on their ModelAPI, MCP servers, store and peers; stores on
their ModelAPIs. A change to a dependency requeues exactly its dependents."""

from __future__ import annotations

from collections import defaultdict

ObjKey = tuple[str, str, str]  # (kind, namespace, name)


class RefIndex:
    def __init__(self) -> None:
        self._deps: dict[ObjKey, frozenset[ObjKey]] = {}
        self._dependents: defaultdict[ObjKey, set[ObjKey]] = defaultdict(set)

    def set(self, dependent: ObjKey, deps: frozenset[ObjKey]) -> None:
        old = self._deps.get(dependent, frozenset())
        for d in old - deps:
            self._dependents[d].discard(dependent)
            if not self._dependents[d]:
                del self._dependents[d]
        for d in deps - old:
            self._dependents[d].add(dependent)
        self._deps[dependent] = deps

    def remove(self, dependent: ObjKey) -> None:
        self.set(dependent, frozenset())
        self._deps.pop(dependent, None)

    def dependencies(self, dependent: ObjKey) -> frozenset[ObjKey]:
        return self._deps.get(dependent, frozenset())

    def dependents(self, dep: ObjKey) -> frozenset[ObjKey]:
        return frozenset(self._dependents.get(dep, ()))
