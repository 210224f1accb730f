"""Retention's selection of facts past their age, on a backend's listing order: compared
as times (offsets included), read only a day past the cutoff, never another group's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from kaos_memory.storage.mem0.backend import VectorBackend
from kaos_memory.storage.mem0.expiry import created_before
from kaos_memory.storage.mem0.terms import GROUP_KEY, RUN_ID_KEY, WILDCARD, Filters, Position, Row

FILTERS = {GROUP_KEY: "g", RUN_ID_KEY: WILDCARD}
CUTOFF = "2026-03-01T00:00:00.000000+00:00"


class Listing:
    """A backend's ``page``: rows in ``(created_at, id)`` text order; counts rows read."""

    def __init__(self, facts: list[tuple[str, str, str]]) -> None:
        self.rows: list[Row] = sorted(
            ((fid, {"created_at": at, GROUP_KEY: grp}) for fid, at, grp in facts),
            key=lambda r: (str((r[1] or {}).get("created_at")), r[0]),
        )
        self.read = 0

    def page(self, filters: Filters, limit: int, after: Position | None) -> Sequence[Row]:
        def position(row: Row) -> tuple[str, str]:
            return str((row[1] or {}).get("created_at")), row[0]

        rest = [r for r in self.rows if after is None or position(r) > after][:limit]
        self.read += len(rest)
        return rest


def select(listing: Listing, limit: int = 100) -> list[str]:
    return created_before(cast(VectorBackend, listing), FILTERS, CUTOFF, limit)


def test_older_facts_are_selected_oldest_first_and_younger_kept() -> None:
    listing = Listing(
        [
            ("young", "2026-03-01T00:00:00.000001+00:00", "g"),
            ("old", "2026-02-27T10:00:00+00:00", "g"),
            ("older", "2026-01-01T00:00:00+00:00", "g"),
        ]
    )
    assert select(listing) == ["older", "old"]


def test_times_are_compared_with_their_offsets() -> None:
    # 23:30 at -07:00 is 06:30 UTC the next day: after the cutoff, though its text sorts first.
    listing = Listing(
        [
            ("pacific-young", "2026-02-28T23:30:00-07:00", "g"),
            ("pacific-old", "2026-02-28T15:00:00-07:00", "g"),
        ]
    )
    assert select(listing) == ["pacific-old"]


def test_another_groups_facts_and_unreadable_times_are_never_selected() -> None:
    listing = Listing(
        [
            ("other", "2026-01-01T00:00:00+00:00", "h"),
            ("no-time", "", "g"),
            ("garbled", "yesterday", "g"),
            ("mine", "2026-01-02T00:00:00+00:00", "g"),
        ]
    )
    assert select(listing) == ["mine"]


def test_the_scan_stops_a_day_past_the_cutoff() -> None:
    young = [(f"y{i}", f"2026-03-{3 + i % 20:02d}T00:00:00+00:00", "g") for i in range(2000)]
    listing = Listing([("old", "2026-01-01T00:00:00+00:00", "g"), *young])
    assert select(listing) == ["old"]
    assert listing.read <= 501, "read past the day after the cutoff"


def test_at_most_limit_ids() -> None:
    listing = Listing(
        [(f"f{i:03}", f"2026-01-01T00:00:{i % 60:02d}+00:00", "g") for i in range(50)]
    )
    assert len(select(listing, limit=7)) == 7
