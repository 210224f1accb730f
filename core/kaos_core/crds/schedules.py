"""An Agent's schedules: messages it is sent on a cron schedule, by Kubernetes CronJobs.

The operator makes one CronJob per schedule; each run is a Job whose pod sends the
message to the agent over A2A with the agent's own identity (a self-subjected run).
The schema checks the shape of a schedule (five cron fields, a time zone's name, unique
names); this model also checks each cron field's range and that the time zone exists,
so a schedule the CronJob controller could not run is refused with a clear message.
"""

from __future__ import annotations

import re
import zoneinfo
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator

from kaos_core.crds.common import (
    DNS_LABEL,
    NAME_MAX,
    CRDModel,
    cel,
    unique_names,
    unique_names_rule,
)

# Schedules one Agent may have.
SCHEDULES_MAX = 20
MESSAGE_MAX = 10_000
CRON_MAX = 128
TIME_ZONE_MAX = 64

# Kubernetes' (robfig/cron's) standard descriptors.
CRON_MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
# One cron field: comma-separated items, each ``*`` or a value or a range, with a step.
_ITEM = r"(\*|[0-9A-Za-z]+(-[0-9A-Za-z]+)?)(/[0-9]+)?"
_FIELD = rf"{_ITEM}(,{_ITEM})*"
# The whole expression, in RE2 as the API server's CEL evaluates it.
CRON_PATTERN = (
    rf"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|{_FIELD}( +{_FIELD}){{4}})$"
)
TIME_ZONE_PATTERN = r"^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+)*$"
CRON_MESSAGE = (
    "cron must be five fields (minute hour day-of-month month day-of-week, e.g. '0 9 * * 1-5')"
    " or one of " + ", ".join(CRON_MACROS)
)

ConcurrencyPolicy = Literal["Forbid", "Allow", "Replace"]
# status.schedules[].lastResult: the outcome of the latest finished run.
ScheduleResult = Literal["succeeded", "failed", "none"]

# Each cron field's name, bounds and the names it accepts (robfig/cron's).
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day-of-month", 1, 31, {}),
    ("month", 1, 12, {m: i + 1 for i, m in enumerate(_MONTHS)}),
    ("day-of-week", 0, 6, {d: i for i, d in enumerate(_DAYS)}),
)


def _value(text: str, field: str, low: int, high: int, names: dict[str, int]) -> int:
    value = names.get(text.lower())
    if value is None:
        if not text.isdigit():
            raise ValueError(f"cron {field} field: {text!r} is not a number or a name")
        value = int(text)
    if not low <= value <= high:
        raise ValueError(f"cron {field} field: {value} is outside {low}-{high}")
    return value


def check_cron(expression: str) -> str:
    """``expression`` when the CronJob controller can parse it; ``ValueError`` saying
    which field is wrong and how otherwise."""
    text = expression
    if text in CRON_MACROS:
        return text
    if not re.fullmatch(CRON_PATTERN, text):
        raise ValueError(CRON_MESSAGE)
    for part, (field, low, high, names) in zip(text.split(), _FIELDS, strict=True):
        for item in part.split(","):
            span, _, step = item.partition("/")
            if step and int(step) < 1:
                raise ValueError(f"cron {field} field: a step must be at least 1")
            if span == "*":
                continue
            first, _, last = span.partition("-")
            start = _value(first, field, low, high, names)
            if last and _value(last, field, low, high, names) < start:
                raise ValueError(f"cron {field} field: the range {span} runs backwards")
    return text


def check_time_zone(name: str) -> str:
    """``name`` when it is a time zone of the IANA database; ``ValueError`` otherwise."""
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"timeZone {name!r} is not a time zone of the IANA database (e.g. Europe/Paris, UTC)"
        ) from None
    return name


class AgentSchedule(CRDModel):
    """A message the agent is sent on a cron schedule, by a CronJob the operator owns."""

    model_config = ConfigDict(
        json_schema_extra=cel(("self.cron.matches(r'" + CRON_PATTERN + "')", CRON_MESSAGE))
    )

    name: str = Field(
        min_length=1,
        max_length=NAME_MAX,
        pattern=DNS_LABEL,
        description="The schedule's name, unique in the Agent; its runs' session is"
        " schedule-<name>.",
    )
    cron: str = Field(
        min_length=1,
        max_length=CRON_MAX,
        description="When it runs, as a CronJob's schedule: five fields (minute hour"
        " day-of-month month day-of-week) or a descriptor such as @hourly.",
    )
    time_zone: str | None = Field(
        default=None,
        max_length=TIME_ZONE_MAX,
        pattern=TIME_ZONE_PATTERN,
        description="The IANA time zone the cron is read in (e.g. Europe/Paris); default:"
        " the kube-controller-manager's.",
    )
    message: str = Field(
        min_length=1,
        max_length=MESSAGE_MAX,
        description="The message the agent is sent on each run, as if a user had sent it.",
    )
    concurrency_policy: ConcurrencyPolicy = Field(
        default="Forbid",
        description="A run due while the previous one still runs: Forbid skips it, Allow"
        " runs both, Replace stops the previous one.",
    )
    suspend: bool = Field(default=False, description="Start no new runs while true.")

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        return check_cron(value)

    @field_validator("time_zone")
    @classmethod
    def _time_zone(cls, value: str | None) -> str | None:
        return None if value is None else check_time_zone(value)


Schedules = Annotated[list[AgentSchedule], unique_names("schedule")]


def schedules_field() -> Any:
    """``spec.schedules``: at most ``SCHEDULES_MAX``, names unique (CEL)."""
    return Field(
        default_factory=list,
        max_length=SCHEDULES_MAX,
        json_schema_extra=cel(unique_names_rule("schedule")),
        description="Messages the agent is sent on a cron schedule (at most 20), each run by"
        " a CronJob the operator owns, as the agent's own identity.",
    )


class ScheduleStatus(CRDModel):
    """What the CronJob of one schedule and its latest Job say."""

    name: str = Field(description="The schedule's name.")
    last_schedule_time: str | None = Field(
        default=None, description="When a run was last started (the CronJob's status)."
    )
    last_successful_time: str | None = Field(
        default=None, description="When a run last completed (the CronJob's status)."
    )
    last_result: ScheduleResult = Field(
        default="none",
        description="The latest finished run: succeeded, failed, or none yet.",
    )
