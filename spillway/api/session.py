"""``spillway.open``: one checkpoint, opened once with its plan, uid map and path rules.

The object carries the one binding of the plan's operators to the checkpoint (deduced from the checkpoint's
evidence on first use, then shared by every call on it), so ``validate``, ``analyze``, ``rescale`` and the
repairs all see the same operators — as the CLI does, which calls these same methods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spillway.api.results import AnalyzeResult, PreflightResult, ReportResult, ValidateResult
from spillway.errors import ArgumentError, UsageError
from spillway.inspect.job_plans import PathLike, read_plan

if TYPE_CHECKING:
    from spillway.api.options import AnalyzeOptions, PreflightOptions
    from spillway.flink.operator_ids import Binding
    from spillway.inspect.diff import CheckpointDiff
    from spillway.inspect.files import FilesReport
    from spillway.inspect.finished import Verdict
    from spillway.inspect.preflight import Settings
    from spillway.inspect.salvage import SalvageReport
    from spillway.inspect.salvage_options import SalvageOptions
    from spillway.inspect.topology import JobBinding, Topology
    from spillway.inspect.validate import Progress
    from spillway.model.checkpoint import CheckpointMetadata
    from spillway.repair.repair_options import ClearFinishedOptions, DropOperatorOptions, RelocateOptions, StripOptions
    from spillway.repair.workflow import RepairResult
    from spillway.rescale.rescale import RescaleResult
    from spillway.rescale.rescale_options import RescaleOptions
    from spillway.storage.job_jar import JobJar
    from spillway.storage.load import LoadedCheckpoint
    from spillway.storage.locate import RebaseRules


def open(
    path: PathLike,
    *,
    plan: Topology | JobJar | PathLike | None = None,
    uids: Mapping[str, str] | None = None,
    uid_map: PathLike | None = None,
    rebase: RebaseRules = None,
) -> Checkpoint:
    """Locate (job dir → newest chk-N, chk-N dir, ``_metadata``; local or a pyarrow.fs URI) and decode one
    checkpoint. ``plan``: the job's plan (either flavour: ``getExecutionPlan()``/``flink info`` or the REST
    job graph); ``uids``: ``{operator name: uid}`` the plan cannot show, ``uid_map``: the same as a JSON file
    (``uids`` win); ``rebase``: ``{old_prefix: new_prefix}`` path rewrites. The plan is read before the
    checkpoint, so a bad plan fails before any storage is touched."""
    from spillway.storage.load import load_checkpoint
    from spillway.storage.locate import rebase_rules

    topology = read_plan(plan, uids=uids, uid_map=uid_map)
    rules = rebase_rules(rebase)
    return Checkpoint(load_checkpoint(path, rules), topology, str(path))


@dataclass
class Checkpoint:
    """An opened checkpoint and (optionally) the plan of the job that wrote it. ``source``: the path as given."""

    loaded: LoadedCheckpoint
    plan: Topology | None = None
    source: str = ""

    def __post_init__(self) -> None:
        self.source = self.source or str(self.loaded.location.checkpoint_dir)

    @property
    def model(self) -> CheckpointMetadata:
        """The decoded ``_metadata`` (``spillway.model.checkpoint.CheckpointMetadata``)."""
        return self.loaded.checkpoint

    @property
    def shown(self) -> str:
        """Where the checkpoint is, as a user would write it (a path or a URI)."""
        return self.loaded.location.shown

    @property
    def note(self) -> str | None:
        """How the path was resolved (e.g. which chk-N of a job directory), if that needs saying."""
        return self.loaded.location.note

    @cached_property
    def job_binding(self) -> JobBinding | None:
        """The plan bound to the checkpoint (vertices, chains, operators, names); None without a plan. Computed
        once per opened checkpoint and passed to whatever shows or uses it: nothing is written into ``model``."""
        if self.plan is None:
            return None
        from spillway.inspect.topology import bind_job

        return bind_job(self.plan, self.model)

    @property
    def binding(self) -> Binding | None:
        """How each plan operator was bound (method, operator id, why); None without a plan."""
        jb = self.job_binding
        return None if jb is None else jb.operators

    @property
    def plan_names(self) -> Mapping[str, str]:
        """Operator id -> the plan's name, for the operators bound exactly that the checkpoint stores no name for."""
        jb = self.job_binding
        return {} if jb is None else jb.names

    def binding_json(self) -> list[dict[str, Any]] | None:
        """The ``binding`` rows every JSON report carries."""
        from spillway.inspect.reports import binding_json

        return binding_json(self.binding)

    def validate(self, progress: Progress | None = None, buffer_size: int | None = None) -> ValidateResult:
        """Every check of ``spillway validate``: sound when no error is found and nothing left unchecked.
        ``progress(what, n)``: ``n < 0`` starts stage ``what`` of ``-n`` units, ``n >= 0`` is its position
        (default: ``spillway.progress.stages()``, silent without a listener). ``buffer_size``: Flink's
        network buffer size (``taskmanager.memory.segment-size``, default 32 KiB), for what Flink would do with
        a damaged record."""
        from spillway.inspect.validate import validate
        from spillway.progress import stages
        from spillway.rescale.rescale_options import (  # the bounds alone: a plain validate loads no planning machinery
            BUFFERS_PER_CHANNEL,
            DEFAULT_BUFFER_SIZE,
            FLOATING_BUFFERS_PER_GATE,
            check_buffers,
        )

        size = DEFAULT_BUFFER_SIZE if buffer_size is None else buffer_size
        check_buffers(size, BUFFERS_PER_CHANNEL, FLOATING_BUFFERS_PER_GATE)
        binding = self.binding  # bound before the checks, as the CLI shows the binding first
        report = validate(self.loaded, self.plan, progress or stages(), job=self.job_binding, buffer_size=size)
        return ValidateResult(self.loaded, report, binding)

    def verdict(self) -> Verdict | None:
        """Would Flink's restore-time finished-state checks accept this checkpoint for the plan? None without one."""
        from spillway.inspect.finished import check

        return None if self.plan is None else check(self.plan, self.model, self.job_binding)

    def analyze(self, options: AnalyzeOptions | None = None) -> AnalyzeResult:
        """``spillway analyze``: in-flight data per channel in replay order, finished states; with a plan also
        Flink's restore verdict and the binding; ``options.forecast`` adds the restore forecast."""
        from spillway.api.options import AnalyzeOptions
        from spillway.inspect.analyze import analyze

        options = options or AnalyzeOptions()
        forecast = None
        if options.forecast is not None:
            if self.plan is None:
                raise ArgumentError("forecast", None, "needs the plan (spillway.open(..., plan=...))")
            from spillway.rescale.rescale import forecast_rescale

            f = options.forecast
            forecast = forecast_rescale(
                self.loaded, self.plan, dict(f.parallelism), dict(f.keys), dict(f.key_fns), f.buffers
            )
        written: list[Path] = []
        if options.parquet is not None:
            from spillway.inspect.parquet_out import analyze_to_parquet

            analysis, written = analyze_to_parquet(
                self.loaded,
                self.plan,
                Path(options.parquet),
                options.records,
                keep_records=options.keep_records,
                job=self.job_binding,
                value_types=options.decoded_as(),
            )
        else:
            from spillway.inspect.salvage_options import check_edge_names

            analysis = analyze(self.loaded, self.plan, keep_records=options.keep_records, job=self.job_binding)
            check_edge_names(options.decoded_as(), analysis)
        return AnalyzeResult(analysis, options, self.verdict(), forecast, self.binding, written)

    def files(self) -> FilesReport:
        """Every file the checkpoint depends on (``spillway files``); ``.to_json()`` is ``spillway.files/1``."""
        from spillway.inspect.files import collect_files

        return collect_files([(self.source, self.loaded)], [self.plan_names])

    def diff(self, other: Checkpoint) -> CheckpointDiff:
        """What differs from ``other`` (``spillway diff``): ``.identical``, ``.to_json()`` is ``spillway.diff/1``."""
        from spillway.inspect.diff import diff_checkpoints

        names = (self.plan_names, other.plan_names)
        return diff_checkpoints(self.loaded, other.loaded, self.source, other.source, names)

    def preflight(
        self,
        new_plan: Topology | JobJar | PathLike,
        options: PreflightOptions | None = None,
        *,
        source: str | None = None,
    ) -> PreflightResult:
        """Would Flink restore this checkpoint into the job of ``new_plan`` (``spillway preflight``)? When the new
        job is this one rescaled, also the restore forecast. ``new_plan``: a plan file, a running job's
        ``http://HOST:PORT/jobs/JOB_ID`` or a ``Topology`` (``spillway.api.read_plan(path, uids=...)`` gives it the
        uids it cannot show); ``source``: where it came from, for ``to_json()`` (default: ``new_plan`` itself)."""
        from spillway.api.options import PreflightOptions
        from spillway.inspect.preflight import check
        from spillway.rescale.rescale import restore_forecast

        options = options or PreflightOptions()
        topology = new_job_plan(new_plan, options)
        result = check(topology, self.model, _settings(options, self.source), self.loaded)
        forecast, note = restore_forecast(self.loaded, topology, result, options.keys, options.key_fns, options.buffers)
        return PreflightResult(result, self.source, plan_source(new_plan, source), forecast, note)

    def report(
        self,
        new_plan: Topology | JobJar | PathLike | None = None,
        options: PreflightOptions | None = None,
        *,
        source: str | None = None,
    ) -> ReportResult:
        """One self-contained HTML page about the checkpoint (``spillway report``); with ``new_plan`` also
        preflight's answer for that job (without the restore forecast), as for :meth:`preflight`."""
        from spillway import __version__
        from spillway.api.options import PreflightOptions
        from spillway.inspect.html_report import render_html, report_document

        new_job = None
        if new_plan is not None:
            options = options or PreflightOptions()
            new_job = (new_job_plan(new_plan, options), _settings(options, self.source), plan_source(new_plan, source))
        doc = report_document(self.loaded, self.plan, self.source, new_job, self.job_binding)
        return ReportResult(doc, render_html(doc, generator=f"spillway {__version__}"))

    def salvage(self, options: SalvageOptions, dropped_by: PreflightResult | None = None) -> SalvageReport:
        """``spillway salvage``: the in-flight records ``options`` chooses exported into Parquet, for a job to replay
        (docs/salvage.md); ``dropped_by``: instead exactly those the restore :meth:`preflight` answered about drops
        (the halves of channels held by operators the new job lacks, …). ``SalvageError`` (nothing written) when a
        chosen channel cannot be read into records or a record does not fit its spec."""
        from spillway.inspect.operators import operator_ids
        from spillway.inspect.salvage import refuse_inside_checkpoint, salvage

        if dropped_by is not None and options.operators is not None:
            raise ArgumentError("operators", None, "and dropped_by given: the restore's loss chooses the records")
        ids = operator_ids(self.model, list(options.operators) if options.operators else None, self.plan_names)
        halves = None if dropped_by is None else {(x.operator, x.side) for x in dropped_by.result.loss.in_flight}
        out = None if options.dry_run else Path(options.out)
        if out is not None:
            refuse_inside_checkpoint(out, self.loaded)
        return salvage(
            self.loaded, self.plan, out, ids, options.types(), options.jsonl, self.job_binding, halves=halves
        )

    # --- writing: rescale and the repairs (options in, a typed result out; the source is never modified) ---
    def rescale(self, options: RescaleOptions) -> RescaleResult:
        """``spillway rescale``: a new checkpoint in which the vertices of ``options.parallelism`` run at their
        new parallelism, every in-flight record already on the channel Flink routes it to (needs the plan)."""
        from spillway.rescale.rescale import rescale_checkpoint

        if self.plan is None:
            raise UsageError("rescale needs the job's plan: spillway.open(path, plan=...)")
        return rescale_checkpoint(self.loaded, self.plan, options, self.job_binding)  # the one binding

    def relocate(self, options: RelocateOptions) -> RepairResult:
        """``spillway repair relocate``: every path at or below ``options.old`` moved below ``options.new``."""
        from spillway.repair.operations import relocate

        return relocate(self.loaded, self.plan, options, self.job_binding)

    def strip_channel_state(self, options: StripOptions) -> RepairResult:
        """``spillway repair strip-channel-state``: the channel state of ``options.operators`` (all without) dropped,
        whole logical channels at a time; ``.loss`` says what."""
        from spillway.repair.operations import strip_channel_state

        return strip_channel_state(self.loaded, self.plan, options, self.job_binding)

    def clear_finished(self, options: ClearFinishedOptions) -> RepairResult:
        """``spillway repair clear-finished``: FLIP-147 finished markers cleared."""
        from spillway.repair.operations import clear_finished

        return clear_finished(self.loaded, self.plan, options, self.job_binding)

    def drop_operator(self, options: DropOperatorOptions) -> RepairResult:
        """``spillway repair drop-operator``: the state of ``options.operators`` removed, with the other half of
        their channels."""
        from spillway.repair.operations import drop_operator

        return drop_operator(self.loaded, self.plan, options, self.job_binding)


def plan_source(plan: object, source: str | None = None) -> str:
    """Where a new job's plan came from, for ``to_json()``: ``source``, else a file or URL as given, a jar's path
    ("" for a Topology)."""
    from spillway.inspect.topology import Topology
    from spillway.storage.job_jar import JobJar

    if source is not None:
        return source
    return "" if isinstance(plan, Topology) else str(plan.path if isinstance(plan, JobJar) else plan)


def new_job_plan(new_plan: Topology | JobJar | PathLike, options: PreflightOptions) -> Topology:
    """The new job's plan with ``options.parallelism`` applied (a vertex it does not name is a ``PlanError``)."""
    from spillway.inspect.preflight import with_parallelism

    topology = read_plan(new_plan)
    assert topology is not None
    return with_parallelism(topology, dict(options.parallelism)) if options.parallelism else topology


def _settings(options: PreflightOptions, checkpoint: str) -> Settings:
    from spillway.inspect.preflight import Settings

    return Settings(
        options.allow_non_restored_state,
        dict(options.max_parallelism),
        options.release(),
        checkpoint,
        options.no_max_parallelism,
    )
