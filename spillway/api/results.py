"""What the calls of an opened checkpoint return: typed results, each with one ``to_json()`` — the versioned
document ``spillway <command> --json`` prints (``spillway.validate/1``, ``spillway.analyze/1``,
``spillway.preflight/2``, ``spillway.report/1``). ``files()`` and ``diff()`` return ``FilesReport`` and
``CheckpointDiff`` (``spillway.files/1``, ``spillway.diff/1``); the writing calls return the ``RescaleResult``
and ``RepairResult`` defined beside the code that writes (``spillway.rescale/1``, ``spillway.repair/1``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spillway.api.options import AnalyzeOptions
    from spillway.flink.operator_ids import Binding
    from spillway.inspect.analyze import Analysis
    from spillway.inspect.finished import Verdict
    from spillway.inspect.preflight import PreflightAnswer
    from spillway.inspect.validate import Report
    from spillway.storage.load import LoadedCheckpoint


@dataclass
class ValidateResult:
    """Every check of ``spillway validate``: ``report.findings`` (rule, file, offset, operator, subtask, channel),
    ``report.unchecked`` (what could not be checked, and why)."""

    loaded: LoadedCheckpoint
    report: Report
    binding: Binding | None = None

    @property
    def sound(self) -> bool:
        """No error found and nothing left unchecked."""
        return not self.report.errors and self.report.complete

    @property
    def rebased(self) -> list[dict[str, Any]]:
        """The path rewrites applied (``rebase`` rules and automatic rebasing), with how many paths each moved."""
        return self.loaded.resolver.rebases()

    def to_json(self) -> dict[str, Any]:
        """The ``spillway.validate/1`` document (docs/validate.md)."""
        from spillway.inspect.reports import validate_json

        return validate_json(self.report, self.loaded.location.shown, self.rebased, self.binding)


@dataclass
class AnalyzeResult:
    """``analysis``: in-flight data channel by channel in replay order, finished states; ``verdict``: would
    Flink's restore-time finished-state checks accept it (with a plan); ``forecast``: the restore forecast at
    the new parallelism asked for; ``binding``: how the plan's operators were bound; ``written``: Parquet files."""

    analysis: Analysis
    options: AnalyzeOptions
    verdict: Verdict | None = None
    forecast: dict[str, Any] | None = None
    binding: Binding | None = None
    written: list[Path] = field(default_factory=list)

    @property
    def damaged(self) -> bool:
        """Channel state that could not be read or framed (each channel's ``problem`` says why)."""
        return any(c.problem for c in self.analysis.channels)

    def to_json(self) -> dict[str, Any]:
        """The ``spillway.analyze/1`` document (docs/analyze.md), with ``forecast`` when one was asked for."""
        from spillway.inspect.reports import analyze_json

        o = self.options
        doc = analyze_json(self.analysis, self.verdict, o.keep_records, o.value_type, self.binding, o.decoded_as())
        if self.forecast is not None:
            doc["forecast"] = self.forecast
        return doc


@dataclass
class PreflightResult:
    """Would Flink restore the checkpoint into the new job? ``restorable``: True / False / None (unknown);
    ``result.reasons`` say why; ``forecast`` when the new job is the checkpoint's job rescaled
    (``forecast_note`` when it could not be made)."""

    result: PreflightAnswer
    checkpoint: str
    plan: str
    forecast: dict[str, Any] | None = None
    forecast_note: str | None = None

    @property
    def restorable(self) -> bool | None:
        return self.result.restorable

    def to_json(self) -> dict[str, Any]:
        """The ``spillway.preflight/2`` document (docs/preflight.md)."""
        from spillway.inspect.preflight import to_doc

        extra: dict[str, Any] = {"checkpoint": self.checkpoint, "plan": self.plan}
        if self.forecast is not None:
            extra["forecast"] = self.forecast
        if self.forecast_note is not None:
            extra["forecast_note"] = self.forecast_note
        return to_doc(self.result, extra)


@dataclass
class ReportResult:
    """One self-contained HTML page about a checkpoint (``spillway report``): ``html`` and the
    ``spillway.report/1`` document embedded in it."""

    document: dict[str, Any]
    html: str

    @property
    def errors(self) -> int:
        """Validate errors of the checkpoint (the page lists them)."""
        count: int = self.document["validate"]["summary"]["error"]
        return count

    def to_json(self) -> dict[str, Any]:
        return self.document


__all__ = ["AnalyzeResult", "PreflightResult", "ReportResult", "ValidateResult"]
