"""Groups of settings and the services composed of them.

A ``SettingsGroup`` is one concern's settings (a server's listening address, a store's
storage, how callers are verified): a small pydantic model whose fields are declared with
``setting`` and each read from one environment variable, the group's prefix plus the
field's name in capitals (or the ``env`` it names). A ``ServiceSettings`` is a service's
settings: one field per group, each the typed object the service hands the component that
needs it. A group declares its own prefix (``KAOS_HTTP_``, the ``OTEL_*`` names) or takes the
prefix of the service it is part of, so a group written once (the caller and user identity
of ``kaos_core.settings.auth``) is read under each service's names.

A group checks the invariants between its own settings in ``problems(prefix)`` (naming
the variables under the prefix it is read with), a service those between its groups in
``problems()``; all of them are reported together. Constructing a group or a service never
reads the environment; ``load_settings`` does, through pydantic-settings' environment
source (names, prefixes, empty values as unset), and turns a validation error into a
one-line ``SettingsError`` that names each variable.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from functools import cache
from typing import Any, ClassVar, NoReturn, Self, TypeVar, cast

from pydantic import AliasGenerator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict
from pydantic_settings import SettingsError as SourceError


class SettingsError(Exception):
    """A setting is missing, malformed or contradicts another one."""


def setting(
    description: str, *, env: str | None = None, default_doc: str | None = None, **kwargs: Any
) -> Any:
    """A documented setting of the group it is declared in.

    Its variable is the group's prefix plus ``env`` (default: the field's name in capitals).
    ``description`` is its meaning in the generated tables, where ``{prefix}`` stands for the
    group's prefix; ``default_doc`` words a default derived from another setting. Other
    keyword arguments are ``pydantic.Field``'s (``default``, bounds, ``default_factory``).
    """
    if default_doc is not None:
        kwargs["json_schema_extra"] = {"default_doc": default_doc}
    return Field(description=description, validation_alias=env, **kwargs)


def group(title: str) -> Any:
    """A service's field holding one group; ``title`` heads the group's table in the docs."""
    return Field(title=title)


class SettingsGroup(BaseModel):
    """One concern's settings, each field one variable (see ``setting``).

    ``env_prefix`` is the group's own prefix; ``None`` takes the prefix of the service the
    group is part of. ``problems`` checks the invariants between the group's settings.
    """

    model_config = SettingsConfigDict(
        frozen=True,
        extra="forbid",
        validate_by_name=True,
        validate_by_alias=True,
        alias_generator=AliasGenerator(validation_alias=str.upper),
        case_sensitive=True,
        env_ignore_empty=True,
        env_prefix_target="all",
        # Values arrive as the strings of the variables; a field that holds a list parses
        # its own format (``kaos_core.endpoints``), never JSON.
        enable_decoding=False,
    )
    env_prefix: ClassVar[str | None] = None
    # The table's title when the group is documented on its own.
    title: ClassVar[str] = ""

    def problems(self, prefix: str) -> list[str]:
        """Contradictions between the group's settings, each naming its variables as read
        under ``prefix`` (``env_name(field, prefix)``); none by default."""
        return []

    @classmethod
    def suffix(cls, field: str) -> str:
        """The variable of ``field`` without the prefix."""
        alias = cls.model_fields[field].validation_alias
        return alias if isinstance(alias, str) else field.upper()

    @classmethod
    def env_name(cls, field: str, prefix: str | None = None) -> str:
        """The variable of ``field`` under ``prefix`` (default: the group's own)."""
        return _own_prefix(cls, prefix) + cls.suffix(field)

    @classmethod
    def env_names(cls, prefix: str | None = None) -> list[str]:
        """Every variable of the group, in field order."""
        return [cls.env_name(field, prefix) for field in cls.model_fields]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Self:
        return load_settings(cls, environ, **overrides)


class ServiceSettings(BaseModel):
    """A service's settings: one field per group (declared with ``group``).

    ``env_prefix`` is the prefix of the groups that declare none. ``notes`` adds a sentence,
    by variable, to the documentation of a group shared with other services (what the
    setting means for this one).

    A service is built from its groups, or by keyword from its variables' names: the
    variable without the service's prefix, in lower case (``MemorySettings(token_budget=
    100)`` is ``KAOS_MEMORY_TOKEN_BUDGET=100``), as scripts and tests do. Groups not given
    take their defaults. A setting is read through its group (``settings.tiers.token_budget``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    env_prefix: ClassVar[str] = ""
    notes: ClassVar[Mapping[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _groups_from_variables(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        groups = cls.groups()
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key in groups:
                out[key] = dict(value) if isinstance(value, Mapping) else value
        names = _variables(cls)
        for key, value in data.items():
            if key in groups:
                continue
            if key not in names:
                out[key] = value  # refused as an unknown field
                continue
            name, suffix = names[key]
            bucket = out.setdefault(name, {})
            if not isinstance(bucket, dict):
                raise ValueError(f"{key} given beside its group {name}")
            bucket[suffix] = value
        for name in groups:
            out.setdefault(name, {})
        return out

    @model_validator(mode="after")
    def _no_contradictions(self) -> Self:
        found = [
            problem
            for name in self.groups()
            for problem in getattr(self, name).problems(self.prefix_of(name))
        ]
        found += self.problems()
        if found:
            raise ValueError("; ".join(found))
        return self

    def problems(self) -> list[str]:
        """Contradictions between the service's groups, each naming its variables."""
        return []

    @classmethod
    def groups(cls) -> dict[str, type[SettingsGroup]]:
        """The service's groups by field name, in declaration order."""
        return _groups(cls)

    @classmethod
    def prefix_of(cls, name: str) -> str:
        """The prefix of the variables of group ``name``."""
        own = cls.groups()[name].env_prefix
        return cls.env_prefix if own is None else own

    @classmethod
    def env_name(cls, name: str) -> str:
        """The variable behind a keyword name (see the class docstring)."""
        group_name, suffix = _variables(cls)[name]
        return cls.prefix_of(group_name) + suffix

    @classmethod
    def env_names(cls) -> list[str]:
        """Every variable the service reads, group by group."""
        return [
            variable
            for name, group_cls in cls.groups().items()
            for variable in group_cls.env_names(cls.prefix_of(name))
        ]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Self:
        return load_settings(cls, environ, **overrides)


S = TypeVar("S", bound=SettingsGroup | ServiceSettings)


def load_settings(cls: type[S], environ: Mapping[str, str] | None = None, **overrides: object) -> S:
    """``cls`` (a group, or a service of groups) from ``environ`` (default ``os.environ``)
    and keyword overrides (a group's field names; a service's keyword names).

    Empty variables count as unset, as Kubernetes renders optional values as "".
    """
    env = os.environ if environ is None else environ
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        if issubclass(cls, ServiceSettings):
            data: dict[str, Any] = {
                name: _read(group_cls, env, cls.prefix_of(name))
                for name, group_cls in cls.groups().items()
            }
            # Keyword names: the service files them into their groups (over the variables).
            data.update(given)
            return cls.model_validate(data)
        group_cls = cast(type[SettingsGroup], cls)
        prefix = _own_prefix(group_cls, None)
        data = _read(group_cls, env, prefix)
        data.update({group_cls.suffix(key): value for key, value in given.items()})
        loaded = group_cls.model_validate(data)
    except ValidationError as exc:
        raise SettingsError("invalid settings: " + "; ".join(_describe(cls, exc))) from None
    found = loaded.problems(prefix)
    if found:
        raise SettingsError("invalid settings: " + "; ".join(found))
    return cast(S, loaded)


def exit_on_settings_error(exc: SettingsError) -> NoReturn:
    """Print the one-line message and exit 2, the usual status for a usage error."""
    print(f"error: {exc}", file=sys.stderr)
    raise SystemExit(2)


class _Environ(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping (the process environment,
    or a test's), reading one group's variables under one prefix."""

    def __init__(
        self, group_cls: type[SettingsGroup], environ: Mapping[str, str], prefix: str
    ) -> None:
        self._environ = environ
        # The source reads a model's fields and configuration; a group is a plain model so
        # that constructing one never reads the environment.
        super().__init__(cast(type[BaseSettings], group_cls), env_prefix=prefix)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {name: value for name, value in self._environ.items() if value != ""}


def _read(
    group_cls: type[SettingsGroup], environ: Mapping[str, str], prefix: str
) -> dict[str, Any]:
    """The group's variables that are set, keyed by their names without the prefix."""
    try:
        return dict(_Environ(group_cls, environ, prefix)())
    except SourceError as exc:  # a value the source itself cannot take
        raise SettingsError(f"invalid settings: {exc}") from None


def _own_prefix(group_cls: type[SettingsGroup], prefix: str | None) -> str:
    if prefix is not None:
        return prefix
    return group_cls.env_prefix or ""


def _describe(cls: type[BaseModel], exc: ValidationError) -> list[str]:
    parts: list[str] = []
    for err in exc.errors():
        loc = [str(part) for part in err.get("loc") or ()]
        msg = err.get("msg", "invalid").removeprefix("Value error, ")
        variable = _variable_at(cls, loc)
        if variable is None:
            # Validators of invariants between settings name their variables themselves.
            parts.append(msg)
        elif err.get("type") == "missing":
            parts.append(f"{variable}: {msg}")
        else:
            parts.append(f"{variable}={err.get('input')!r}: {msg}")
    return parts


def _variable_at(cls: type[BaseModel], loc: list[str]) -> str | None:
    """The variable an error's location is in; ``None`` for a model-level error."""
    if issubclass(cls, ServiceSettings):
        groups = cls.groups()
        if len(loc) < 2 or loc[0] not in groups:
            return None
        return _field_variable(groups[loc[0]], loc[1], cls.prefix_of(loc[0]))
    if issubclass(cls, SettingsGroup) and loc:
        return _field_variable(cls, loc[0], _own_prefix(cls, None))
    return None


def _field_variable(group_cls: type[SettingsGroup], key: str, prefix: str) -> str | None:
    """The variable of a field named by its name or by its variable's suffix."""
    for field in group_cls.model_fields:
        suffix = group_cls.suffix(field)
        if key in (field, suffix):
            return prefix + suffix
    return None


@cache
def _groups(cls: type[ServiceSettings]) -> dict[str, type[SettingsGroup]]:
    out: dict[str, type[SettingsGroup]] = {}
    for name, info in cls.model_fields.items():
        annotation = info.annotation
        if not (isinstance(annotation, type) and issubclass(annotation, SettingsGroup)):
            raise TypeError(f"{cls.__name__}.{name}: a service's fields are settings groups")
        out[name] = annotation
    return out


@cache
def _variables(cls: type[ServiceSettings]) -> dict[str, tuple[str, str]]:
    """Keyword name -> (group, variable suffix), for every variable of the service."""
    out: dict[str, tuple[str, str]] = {}
    for name, group_cls in _groups(cls).items():
        prefix = cls.prefix_of(name)
        for field in group_cls.model_fields:
            suffix = group_cls.suffix(field)
            variable = prefix + suffix
            key = variable.removeprefix(cls.env_prefix).lower()
            if key in out:
                raise TypeError(f"{cls.__name__}: {variable} is read twice")
            out[key] = (name, suffix)
    return out
