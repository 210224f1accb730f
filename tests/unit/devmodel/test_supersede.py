"""The development model's deterministic answer to the supersession prompt."""

from __future__ import annotations

import json

import pytest
from kaos_devmodel.supersede import attribute, replaces, supersede_answer


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("Big news: we moved to Porto last month.", "I live in Lisbon, close to the river."),
        ("My car is a Civic.", "My car is a Corolla."),
        ("I started a new job at Globex this week.", "I work at Initech."),
        ("We renamed our dog Pepper.", "Our dog is called Biscuit."),
    ],
)
def test_a_change_of_the_same_attribute_replaces(new: str, old: str) -> None:
    assert replaces(new, old)


@pytest.mark.parametrize(
    ("new", "old"),
    [
        # Another attribute.
        ("We moved to Porto last month.", "I work at Initech."),
        # The same attribute, but no change and a different opening: added detail.
        ("I love the food trucks in Austin where I live.", "Home for me is Austin, Texas."),
        # The same text.
        ("I drive a Corolla.", "I drive a Corolla."),
        # No attribute at all.
        ("Now I like jazz.", "I like rock music."),
    ],
)
def test_anything_else_is_kept(new: str, old: str) -> None:
    assert not replaces(new, old)


def test_a_tie_names_no_attribute() -> None:
    assert attribute("my dog rides in my car") is None
    assert attribute("I drive to the gym") is None


def test_the_answer_names_only_pairs_shown_together() -> None:
    prompt = "\n".join(
        [
            "## New facts",
            "N1: We moved to Porto last month.",
            "  near E1: I live in Lisbon.",
            "  near E2: I work at Initech.",
            "N2: I accepted the offer from Globex.",
            "  near E2: I work at Initech.",
        ]
    )
    assert json.loads(supersede_answer(prompt)) == {
        "retire": [{"existing": "E1", "by": "N1"}, {"existing": "E2", "by": "N2"}]
    }
    assert json.loads(supersede_answer("nothing to see")) == {"retire": []}
