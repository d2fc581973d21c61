"""What each repair is asked to do: one options object per repair (``spillway.api`` re-exports them).

The source, its plan and its path rules are not options: they belong to the opened checkpoint
(``spillway.open(path, plan=…, uids=…, rebase=…)``), which every repair takes first.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from spillway.errors import ArgumentError
from spillway.inspect.salvage_options import SalvageOptions

PathLike = str | os.PathLike[str]


def _operators(value: Sequence[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not all(isinstance(o, str) and o for o in value):
        raise ArgumentError("operators", value, "expected a list of operator ids, uids or names")
    return tuple(value)


@dataclass(frozen=True)
class RelocateOptions:
    """Rewrite every path at or below ``old`` to lie below ``new`` (``spillway repair relocate``).

    ``copy_data``: also copy every referenced file to its new place; ``relative``: files that will sit
    directly in ``out`` become relative handles (metadata V3+); ``force``: write even if the source has
    validate errors (each becomes a warning of the report); ``dry_run``: write nothing."""

    out: PathLike
    old: str
    new: str
    copy_data: bool = False
    relative: bool = False
    dry_run: bool = False
    force: bool = False

    def __post_init__(self) -> None:
        for argument, prefix in (("old", self.old), ("new", self.new)):
            if not prefix:
                raise ArgumentError(argument, None, "the path prefix must not be empty")


@dataclass(frozen=True)
class _OperatorsOptions:
    """A repair of chosen operators (ids, uids or names); None: as the repair says."""

    out: PathLike
    operators: Sequence[str] | None = None
    dry_run: bool = False
    force: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "operators", _operators(self.operators))


@dataclass(frozen=True)
class StripOptions(_OperatorsOptions):
    """Drop the channel state of ``operators`` (ids, uids or names; None: every channel), whole logical
    channels at a time (``spillway repair strip-channel-state``). ``salvage``: first export exactly the records
    dropped (``SalvageOptions``, its ``operators`` left None: the strip's choose); the strip is refused when
    that fails. In a dry run the salvage is decoded and counted, not written."""

    salvage: SalvageOptions | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.salvage is not None and self.salvage.operators is not None:
            raise ArgumentError("salvage", None, "its operators are the strip's: leave salvage.operators None")


@dataclass(frozen=True)
class ClearFinishedOptions(_OperatorsOptions):
    """Clear the FLIP-147 finished markers of ``operators``; None: of exactly the vertices Flink's
    restore-time checks would refuse under the checkpoint's plan (``spillway repair clear-finished``).
    ``force``: clear even where Flink would accept the markers, and even if the source has validate errors."""


@dataclass(frozen=True)
class DropOperatorOptions(_OperatorsOptions):
    """Remove ``operators`` (at least one) and the other half of each of their channels
    (``spillway repair drop-operator``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.operators:
            raise ArgumentError("operators", None, "name the operator(s) to drop (ids, uids or names)")
