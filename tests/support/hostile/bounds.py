"""How far a fuzzing run goes: examples, randomness and the time a service gets.

Bounded by default (CI runs the same derandomized examples every time); a deeper local
hunt: ``KAOS_FUZZ_MAX_EXAMPLES=500 KAOS_FUZZ_RANDOM=1 pytest
tests/integration/*/test_fuzz_edge.py``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
RANDOM = os.environ.get("KAOS_FUZZ_RANDOM", "") not in ("", "0")
_MAX_EXAMPLES = os.environ.get("KAOS_FUZZ_MAX_EXAMPLES", "")
# The body timeout the services under test run with (``KAOS_HTTP_BODY_TIMEOUT``): a body
# shorter than its Content-Length must be answered (408) or dropped within it.
BODY_TIMEOUT = 2.0
# No answer within this many seconds is a hang.
DEADLINE = float(os.environ.get("KAOS_FUZZ_DEADLINE") or 8.0)
# Slack on top of the body timeout for a stalled body's answer.
STALL_SLACK = 3.0
SERVICE_ENV = {"KAOS_HTTP_BODY_TIMEOUT": f"{BODY_TIMEOUT:g}"}


def max_examples(default: int) -> int:
    """``KAOS_FUZZ_MAX_EXAMPLES`` when set, else the module's modest default."""
    return int(_MAX_EXAMPLES) if _MAX_EXAMPLES else default


def fuzz_settings(default_examples: int) -> settings:
    """Bounded, derandomized unless ``KAOS_FUZZ_RANDOM`` (never in CI), no example database.

    CI does not shrink: a failure is reported with the example as generated, before the
    test's timeout could cut the report off; locally a failure shrinks to a minimal one.
    """
    phases = [Phase.explicit, Phase.generate]
    if not _CI:
        phases.append(Phase.shrink)
    return settings(
        max_examples=max_examples(default_examples),
        deadline=None,
        derandomize=_CI or not RANDOM,
        database=None,
        phases=phases,
        print_blob=False,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
            HealthCheck.function_scoped_fixture,
        ],
    )
