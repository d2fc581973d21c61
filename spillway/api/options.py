"""The options of an opened checkpoint's reading calls, as dataclasses (what a command's flags say, in Python's
names); the writing calls' options are defined beside the code that takes them (``spillway.rescale.rescale_options``,
``spillway.repair.repair_options``). Each checks itself when made, so a mistake is an ``ArgumentError`` naming the
argument before any checkpoint is read. The restore forecast's network settings
are Flink's: ``buffer_size`` is ``taskmanager.memory.segment-size`` (one network buffer), the others
``taskmanager.network.memory.*``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spillway.errors import ArgumentError
from spillway.rescale.forecast import BufferSettings
from spillway.rescale.rescale_options import (
    BUFFERS_PER_CHANNEL,
    DEFAULT_BUFFER_SIZE,
    FLOATING_BUFFERS_PER_GATE,
    check_buffers,
    check_key_specs,
    check_parallelism,
)

if TYPE_CHECKING:
    from spillway.inspect.salvage_options import ValueTypes

PathLike = str | os.PathLike[str]


def buffer_settings(
    buffer_size: int = DEFAULT_BUFFER_SIZE,
    buffers_per_channel: int = BUFFERS_PER_CHANNEL,
    floating_buffers_per_gate: int = FLOATING_BUFFERS_PER_GATE,
) -> BufferSettings:
    """Flink's network buffer settings for the restore forecast, checked."""
    check_buffers(buffer_size, buffers_per_channel, floating_buffers_per_gate)
    return BufferSettings(buffer_size, buffers_per_channel, floating_buffers_per_gate)


@dataclass(frozen=True)
class ForecastOptions:
    """A restore forecast at a new parallelism (what ``rescale`` would move, what Flink's own rescaling would
    read, filter and buffer). ``keys``/``key_fns``: the key extractor of each re-routed keyBy vertex."""

    parallelism: Mapping[str, int]
    keys: Mapping[str, str] = field(default_factory=dict)
    key_fns: Mapping[str, str] = field(default_factory=dict)
    buffers: BufferSettings = field(default_factory=BufferSettings)

    def __post_init__(self) -> None:
        if not self.parallelism:
            raise ArgumentError("parallelism", None, "name at least one vertex: {vertex: new parallelism}")
        check_parallelism(self.parallelism)
        check_key_specs(self.keys, self.key_fns)


@dataclass(frozen=True)
class AnalyzeOptions:
    """``keep_records``: the first N records of each channel kept (and shown in ``to_json()`` as ``value_type``
    says); ``parquet``: a directory for ``channels.parquet`` (``records``: and ``records.parquet``, streamed);
    ``forecast``: a restore forecast at a new parallelism (needs the plan). ``value_type`` (``auto``, ``hex`` or
    a value spec) applies to every edge, ``value_types`` (``{"UP->DOWN" or "UP": spec}``, as for salvage) to
    the edges they name; a value spec also decodes the records in ``records.parquet`` (``auto`` and ``hex``
    leave them raw bytes)."""

    keep_records: int = 0
    value_type: str = "auto"
    parquet: PathLike | None = None
    records: bool = False
    forecast: ForecastOptions | None = None
    value_types: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.keep_records < 0:
            raise ArgumentError("keep_records", self.keep_records, "must not be negative")
        check_value_type(self.value_type)
        self.decoded_as()
        if self.records and self.parquet is None:
            raise ArgumentError("records", None, "needs parquet (the directory to write records.parquet in)")

    def decoded_as(self) -> ValueTypes:
        """The value spec of each edge's records: ``value_types`` first, then ``value_type`` unless auto or hex."""
        from spillway.inspect.salvage_options import ValueTypes

        default = None if self.value_type in DISPLAY_MODES else self.value_type
        return ValueTypes(default, tuple(self.value_types.items()))


DISPLAY_MODES = ("auto", "hex")  # value_type words that show values without decoding them with a spec


def check_value_type(spec: str) -> None:
    """How kept values are shown: ``auto``, ``hex`` or a value spec (``tuple(long,string)`` …)."""
    from spillway.formats.values import ValueSpecError, check_display_spec

    try:
        check_display_spec(spec)
    except ValueSpecError as exc:
        raise ArgumentError("value_type", spec, str(exc)) from None


@dataclass(frozen=True)
class PreflightOptions:
    """What a new job's plan does not show: ``parallelism`` changes of its vertices, the max parallelism it sets
    (``{None: N}`` job-wide, ``{vertex: N}``), Flink's ``allow_non_restored_state``, the restoring release
    (``"2.3.0"``); and for the restore forecast the key extractors and network buffers. ``no_max_parallelism``:
    the new job sets no max parallelism (Flink then adopts the checkpoint's); without it or ``max_parallelism``,
    a plan leaves the max parallelism unknown."""

    parallelism: Mapping[str, int] = field(default_factory=dict)
    max_parallelism: Mapping[str | None, int] = field(default_factory=dict)
    allow_non_restored_state: bool = False
    flink_version: str | None = None
    keys: Mapping[str, str] = field(default_factory=dict)
    key_fns: Mapping[str, str] = field(default_factory=dict)
    buffers: BufferSettings = field(default_factory=BufferSettings)
    no_max_parallelism: bool = False

    def __post_init__(self) -> None:
        if self.no_max_parallelism and self.max_parallelism:
            raise ArgumentError("no_max_parallelism", True, "and max_parallelism given: which one?")
        check_parallelism(self.parallelism)
        check_parallelism({k or "": n for k, n in self.max_parallelism.items()}, "max_parallelism")
        self.release()
        check_key_specs(self.keys, self.key_fns)

    def release(self) -> tuple[int, int, int] | None:
        """``flink_version`` as (major, minor, patch)."""
        if self.flink_version is None:
            return None
        parts = self.flink_version.split(".")
        if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts):
            raise ArgumentError("flink_version", self.flink_version, "expected X.Y.Z (e.g. 2.3.0)")
        major, minor, *patch = map(int, parts)
        return major, minor, patch[0] if patch else 0


__all__ = ["AnalyzeOptions", "ForecastOptions", "PreflightOptions", "buffer_settings", "check_value_type"]
