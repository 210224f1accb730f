"""How long memory is kept (retention, enforced by the sweeper) and how much one principal
or agent may put in it (quotas, checked on every write)."""

from __future__ import annotations

from typing import ClassVar

from kaos_core.settings import SettingsGroup, setting

DAY_SECONDS = 86400.0


class RetentionSettings(SettingsGroup):
    """Ages past which the sweeper erases records (unset: kept until forgotten)."""

    title: ClassVar[str] = "Retention"

    fact_max_age_days: float | None = setting(
        "a long-term fact older than this many days (since Mem0 stored it) is erased by the"
        " next sweep: its vector, its row and its text in Mem0's history, counted in the"
        " erasure audit (actor `retention`) and in `kaos_memory_records_expired_total`",
        env="FACT_MAX_AGE_DAYS",
        default=None,
        default_doc="kept",
        gt=0,
    )
    idle_session_days: float | None = setting(
        "a session nobody wrote to for this many days is erased whole by the next sweep, as"
        " a session-level forget erases it: its window, its digest versions, its facts and"
        " Mem0's context of it, audited (actor `retention`) and counted. Digest versions"
        " per session are bounded by `KAOS_MEMORY_DIGEST_RETENTION` at every new version",
        env="IDLE_SESSION_DAYS",
        default=None,
        default_doc="kept",
        gt=0,
    )

    @property
    def fact_max_age(self) -> float | None:
        """The fact age limit in seconds."""
        return None if self.fact_max_age_days is None else self.fact_max_age_days * DAY_SECONDS

    @property
    def idle_session_age(self) -> float | None:
        """The idle session age limit in seconds."""
        days = self.idle_session_days
        return None if days is None else days * DAY_SECONDS


class QuotaSettings(SettingsGroup):
    """Per principal storage and per agent write rate (unset: unlimited)."""

    title: ClassVar[str] = "Quotas"

    quota_facts: int | None = setting(
        "long-term facts one principal may hold: at or above it, the principal's writes are"
        " answered 403 `quota_exceeded` (extraction of turns already accepted may still add"
        " facts past it)",
        env="QUOTA_FACTS",
        default=None,
        default_doc="unlimited",
        ge=1,
    )
    quota_turns: int | None = setting(
        "turns one principal may have stored (window and folded, all sessions): a write"
        " that would pass it is answered 403 `quota_exceeded` and writes nothing",
        env="QUOTA_TURNS",
        default=None,
        default_doc="unlimited",
        ge=1,
    )
    quota_bytes: int | None = setting(
        "bytes one principal's stored turns may take (their content as stored): a write"
        " that would pass it is answered 403 `quota_exceeded` and writes nothing",
        env="QUOTA_BYTES",
        default=None,
        default_doc="unlimited",
        ge=1,
    )
    quota_writes_per_minute: int | None = setting(
        "writes one agent may make per calendar minute across every replica (writes"
        " without an agent identity share one count); one more is answered 429"
        " `rate_limited` with `Retry-After` (seconds to the next minute) and writes nothing",
        env="QUOTA_WRITES_PER_MINUTE",
        default=None,
        default_doc="unlimited",
        ge=1,
    )
