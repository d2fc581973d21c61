"""What ``salvage`` is asked to do (``Checkpoint.salvage``, ``repair strip-channel-state`` with a salvage), checked
when made: a bad value spec or a misused option is an ``ArgumentError`` before any checkpoint is read. Kept apart
from ``salvage`` itself so that checking options loads no Parquet writer."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spillway.errors import ArgumentError, UsageError
from spillway.formats.values import ValueSpecError, parse_value_spec

if TYPE_CHECKING:
    from spillway.inspect.analyze import Analysis

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class ValueTypes:
    """Which value spec decodes which edge's records: ``by_edge`` keys are ``UP->DOWN`` or ``UP`` (the records
    leaving that operator), matched against the operator's name as reports show it or its id; ``default`` for
    every other edge (None: raw bytes only)."""

    default: str | None = None
    by_edge: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.default is not None:
            _check_spec(self.default, "value_type", None)
        for key, spec in self.by_edge:
            left, _, right = key.partition("->")
            if not left.strip() or ("->" in key and not right.strip()):
                raise ArgumentError("value_types", None, "expected UPSTREAM or UPSTREAM->DOWNSTREAM", key)
            _check_spec(spec, "value_types", key)

    def for_edge(self, up: Mapping[str, Any], down: Mapping[str, Any]) -> str | None:
        """The spec of the records on the edge ``up`` -> ``down`` (``{"operator": name, "operator_id": id}``)."""
        key = self.edge_key(up, down)
        return self.default if key is None else dict(self.by_edge)[key]

    def edge_key(self, up: Mapping[str, Any], down: Mapping[str, Any]) -> str | None:
        """The first ``by_edge`` key naming the edge ``up`` -> ``down``; None when none does."""
        ups = {up["operator"], up["operator_id"]} - {None}
        downs = {down["operator"], down["operator_id"]} - {None}
        for key, _ in self.by_edge:
            left, arrow, right = (k.strip() for k in key.partition("->"))
            if left in ups and (not arrow or right in downs):
                return key
        return None

    def unused(self, ends: list[tuple[set[str], set[str]]]) -> list[str]:
        """Keys that matched none of the edges ``ends`` (each: upstream names/ids, downstream names/ids)."""
        out = []
        for key, _ in self.by_edge:
            left, arrow, right = (k.strip() for k in key.partition("->"))
            if not any(left in ups and (not arrow or right in downs) for ups, downs in ends):
                out.append(key)
        return out


def _check_spec(spec: str, argument: str, key: str | None) -> None:
    try:
        parse_value_spec(spec)
    except ValueSpecError as exc:
        raise ArgumentError(argument, spec, str(exc), key) from None


@dataclass(frozen=True)
class SalvageOptions:
    """Export in-flight records into the new or empty directory ``out``: of the channels into or out of
    ``operators`` (ids, uids or names; None: every channel), decoded with ``value_type`` (every edge) or
    ``value_types`` (``{"UP->DOWN" or "UP": spec}``, before ``value_type``); without either, the raw bytes
    only. ``jsonl``: every record in ``records.jsonl`` too; ``dry_run``: decode and count, write nothing.
    Inside ``StripOptions(salvage=...)`` the strip's operators choose the channels (``operators`` stays None)."""

    out: PathLike
    operators: Sequence[str] | None = None
    value_type: str | None = None
    value_types: Mapping[str, str] = field(default_factory=dict)
    jsonl: bool = False
    dry_run: bool = False

    def __post_init__(self) -> None:
        if not str(self.out):
            raise ArgumentError("out", None, "name the directory to export into")
        if self.operators is not None and (
            isinstance(self.operators, str) or not all(isinstance(o, str) and o for o in self.operators)
        ):
            raise ArgumentError("operators", self.operators, "expected a list of operator ids, uids or names")
        self.types()

    def types(self) -> ValueTypes:
        return ValueTypes(self.value_type, tuple(self.value_types.items()))


def value_type_args(values: Sequence[str]) -> tuple[str | None, dict[str, str]]:
    """Command-line ``--value-type`` values, ``SPEC`` (every edge) or ``EDGE=SPEC`` (a spec has no ``=``), as
    ``(value_type, value_types)``."""
    default: str | None = None
    by_edge: dict[str, str] = {}
    for v in values:
        edge, eq, spec = v.partition("=")
        if not eq:
            if default is not None:
                raise ArgumentError("value_type", v, f"given twice ({default!r} and {v!r}); EDGE=SPEC for one edge")
            default = v
        else:
            by_edge[edge.strip()] = spec
    return default, by_edge


def check_edge_names(value_types: ValueTypes | None, analysis: Analysis) -> None:
    """Refuse a value spec for an edge that none of the channels in flight is on: a misspelled name would
    otherwise leave its records undecoded without a word."""
    if value_types is None:
        return
    ends = [(_names(c.upstream), _names(c.downstream)) for c in analysis.channels]
    unused = value_types.unused(ends)
    if unused:
        shown = sorted({f"{c.upstream['operator']}->{c.downstream['operator']}" for c in analysis.channels})
        raise UsageError(
            f"value spec for {', '.join(unused)}: no edge with data in flight is called so "
            f"(edges: {', '.join(shown) or 'none'})"
        )


def _names(end: Mapping[str, Any]) -> set[str]:
    return {end["operator"], end["operator_id"]} - {None}
