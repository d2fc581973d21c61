"""Rescale a checkpoint offline: plan, move channel state (Spark or in-process), redistribute keyed and
operator state, assemble the metadata, self-check, and rename into place (``write_checkpoint``)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spillway.errors import Message, Named, SpillwayError, message_of
from spillway.flink.features import FormatFeatures
from spillway.inspect.channels import ChannelKey
from spillway.inspect.findings import Finding
from spillway.inspect.output_check import validated_output
from spillway.inspect.reports import binding_json
from spillway.inspect.rules.files import unsafe_path_refusal
from spillway.inspect.topology import JobBinding, Topology, bind_job
from spillway.inspect.validate import Report, validate
from spillway.model.checkpoint import CheckpointMetadata, OperatorState, RelativeFileHandle, SubtaskState
from spillway.rescale.assemble import StateRescaler, assemble
from spillway.rescale.channel_writer import background_fsync
from spillway.rescale.execute import MoveResult, run_local
from spillway.rescale.forecast import BufferSettings, forecast
from spillway.rescale.plan import LostChannel, RescalePlan, RescaleRefused, build_plan
from spillway.rescale.rescale_options import DEFAULT_BUFFER_SIZE, RESCALE_SCHEMA, RescaleOptions
from spillway.rescale.source_keys import check_output_keys, refuse_wrong_extractors
from spillway.rescale.state_files import NewStateFile
from spillway.rescale.verify import check_totals, self_check
from spillway.storage import remote_copies
from spillway.storage.blobs import DelegateBlobs
from spillway.storage.guard import Guard, plain_parts
from spillway.storage.load import LoadedCheckpoint
from spillway.storage.pinning import pin_found_paths
from spillway.storage.relative import relative_names
from spillway.storage.safe_writer import PlannedOutput, WriteError, write_checkpoint

if TYPE_CHECKING:
    from spillway.inspect.preflight import PreflightAnswer


def _where(f: Finding) -> str:
    return f"{f.rule}: {f.message}" + (
        f" ({f.file}" + (f" @ {f.offset}" if f.offset is not None else "") + ")" if f.file else ""
    )


@dataclass
class SourceDamage:
    """A source with validate errors that ``force=True`` asks to rescale anyway. Only damaged channel
    state on edges being moved can be left out (those logical channels are dropped, and listed); any
    other error would be carried into the output or break the rescale, so it is still refused."""

    errors: list[Finding]
    damage: dict[ChannelKey, list[Finding]]
    counted: dict[tuple[ChannelKey, ...], int] = field(default_factory=dict)  # records of clean channels

    @classmethod
    def of(cls, report: Report) -> SourceDamage:
        return cls(report.errors, report.damage, report.counted)

    def reasons(self) -> dict[ChannelKey, list[str]]:
        return {k: [_where(f) for f in fs] for k, fs in self.damage.items()}

    def not_covered(self, lost_keys: set[ChannelKey]) -> list[Finding]:
        """Errors that leaving out the channels of ``lost_keys`` does not remove."""
        touched: dict[int, set[ChannelKey]] = {}
        for key, findings in self.damage.items():
            for f in findings:
                touched.setdefault(id(f), set()).add(key)
        return [f for f in self.errors if not touched.get(id(f)) or not touched[id(f)] <= lost_keys]


def refuse_damaged(errors: list[Finding], force: bool) -> None:
    if not errors:
        return
    first = errors[0]
    raise RescaleRefused(
        Message(f"the source has {len(errors)} validate errors")
        + (
            Message(
                " that ",
                Named("force", True),
                " cannot leave out (it drops only damaged channel state on the edges being moved)",
            )
            if force
            else ""
        )
        + f", first: {_where(first)}"
        + (f" (operator {first.operator})" if first.operator else "")
        + "; rescaling it would move damaged data (spillway validate shows them all"
        + (
            ""
            if force
            else Message("; ", Named("force", True), " leaves out the damaged logical channels and lists what is lost")
        )
        + ")"
    )


@dataclass(frozen=True)
class Moved:
    """What a rescale moved: in-flight records, new channel files, watermarks kept, what was dropped (by kind)."""

    records: int
    channel_files: int
    markers_kept: int
    dropped: dict[str, int]


@dataclass(frozen=True)
class VertexChange:
    """A vertex whose parallelism the rescale changes."""

    vertex: str
    old_parallelism: int
    new_parallelism: int


@dataclass(frozen=True)
class EdgeRoute:
    """How the in-flight records of one edge go to their new channels."""

    edge: str
    rule: str  # hash, balanced, keep, global, broadcast, custom
    key: str | None  # the key extractor (hash edges), or
    key_fn: str | None  # the key function (module:function)


@dataclass
class RescaleResult:
    """What a rescale wrote (or, with ``dry_run``, would write). ``to_json()`` is ``spillway.rescale/1``."""

    plan: RescalePlan
    move: MoveResult | None = None
    notes: list[str] = field(default_factory=list)
    out: Path | str | None = None
    plan_file: str | None = None  # the rescaled job's plan, written beside _metadata
    binding: list[dict[str, Any]] | None = None  # how the plan's operators were bound (binding_json rows)
    external_files: list[str] = field(default_factory=list)  # files the output reads outside itself
    # seconds: plan, spark_start (0 in-process), move (route + write + channel self-check on the
    # executors), state_and_metadata, final_check (fsync, re-read, validate, rename), total
    timings: dict[str, float] = field(default_factory=dict)
    forecast: dict[str, Any] | None = None  # dry run: what would move, and what Flink's own rescaling would do
    restore: dict[str, Any] | None = None  # written: how to restore it (restore_instructions); None in a dry run
    dry_run: bool = False

    @property
    def source_channels(self) -> int:
        """Old logical channels read."""
        return len(self.plan.sources)

    @property
    def lost_channels(self) -> list[LostChannel]:
        """The damaged logical channels left out (``force``): the restored job never sees their records."""
        return list(self.plan.lost)

    @property
    def moved(self) -> Moved | None:
        """What was moved; None for a dry run, which moves nothing (its ``forecast`` says what would move)."""
        if self.move is None:
            return None
        dropped: dict[str, int] = {}
        kept = records = 0
        for r in self.move.sources:
            records += r.records
            kept += r.kept_markers
            for k, n in r.dropped.items():
                dropped[k] = dropped.get(k, 0) + n
        return Moved(records, len(self.move.files), kept, dropped)

    @property
    def vertices(self) -> list[VertexChange]:
        return [VertexChange(v.label, v.old_p, v.new_p) for v in self.plan.vertices.values() if v.rescaled]

    @property
    def edges(self) -> list[EdgeRoute]:
        return [EdgeRoute(e.label, e.rule, e.key, e.key_fn) for e in self.plan.edges]

    @property
    def lost_bytes(self) -> int:
        """Bytes of the lost channels, as their handles state them."""
        return sum(lost.stated_bytes for lost in self.plan.lost)

    @property
    def lost_records(self) -> int:
        """Records of the lost channels where counted (``lost_uncounted_bytes``: the bytes of the others)."""
        return sum(lost.records or 0 for lost in self.plan.lost)

    @property
    def lost_uncounted_bytes(self) -> int:
        return sum(lost.stated_bytes for lost in self.plan.lost if lost.records is None)

    def restore_lines(self) -> list[str]:
        """How to restore the new checkpoint, as the CLI prints it (nothing in a dry run)."""
        from spillway.inspect.restore_instructions import restore_lines

        return [] if self.restore is None else restore_lines(self.restore)

    def to_json(self) -> dict[str, Any]:
        """The ``spillway.rescale/1`` document."""
        moved = self.moved
        return {
            "schema": RESCALE_SCHEMA,
            "lost_channels": [vars(lost) for lost in self.plan.lost],
            "lost_bytes": self.lost_bytes,
            "lost_records": self.lost_records,
            "lost_uncounted_bytes": self.lost_uncounted_bytes,
            "out": str(self.out) if self.out else None,
            "vertices": [vars(v) for v in self.vertices],
            "edges": [vars(e) for e in self.edges],
            "source_channels": len(self.plan.sources),
            # What was moved; null in a dry run, which moves nothing (its ``forecast`` says what would move).
            "records_moved": moved.records if moved else None,
            "channel_files": moved.channel_files if moved else None,
            "markers_kept": moved.markers_kept if moved else None,
            "dropped": moved.dropped if moved else None,
            "notes": self.notes,
            "plan_file": self.plan_file,
            "binding": self.binding,
            "external_files": self.external_files,
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
            "forecast": self.forecast,
            "restore": self.restore,
            "dry_run": self.dry_run,
        }


PLAN_FILE = "rescaled-plan.json"


def _after_write(report: RescaleResult, topology: Topology, out: Path, final_prefix: str) -> None:
    """A loud note when the written output still reads files outside itself (its plan file, beside its
    _metadata, was written with it: :func:`_write_plan_file`)."""
    from spillway.model.checkpoint import is_file_backed
    from spillway.model.walk import leaf_stream_handles
    from spillway.storage.load import load_checkpoint

    written = load_checkpoint(out, internal=[f"{final_prefix}={out}"]).checkpoint
    outside = sorted(
        {
            h.file_name
            for h in leaf_stream_handles(written, coordinator=True)
            if is_file_backed(h) and not h.relative and not h.file_name.startswith(final_prefix)
        }
    )
    report.external_files = outside
    if outside:
        report.notes.append(
            Message(
                f"WARNING: the new checkpoint still reads {len(outside)} files outside itself (e.g. {outside[0]}): "
                "keep them where they are, or move everything with spillway repair relocate and ",
                Named("copy_data", True),
            )
        )


def rescaled_topology(topology: Topology, plan: RescalePlan) -> Topology:
    """The plan of the rescaled job: the plan file written beside the output, read back (its binding to the
    output is computed afresh, from the output's own evidence)."""
    chains = plan.view or topology  # its vertex keys are the bound chains', as the plan's vertices
    return chains.rescaled({k: vp.new_p for k, vp in plan.vertices.items()}, "rescaled plan").with_uids(topology.uids)


def _state_rescaler(
    blobs: DelegateBlobs,
    new_files: list[NewStateFile],
    notes: list[str],
    plan_names: Mapping[str, str],
    features: FormatFeatures,
) -> StateRescaler:
    def rescale_state(op: OperatorState, new_p: int) -> list[SubtaskState]:
        if not any(
            s.managed_keyed_state or s.raw_keyed_state or s.managed_operator_state or s.raw_operator_state
            for s in op.subtasks
        ):
            return []
        from spillway.rescale.state import RescaleRefused as StateRefused
        from spillway.rescale.state import rescale_operator_state_and_keyed

        try:
            res = rescale_operator_state_and_keyed(op, new_p, blobs, op.label(plan_names), features)
        except StateRefused as exc:
            raise RescaleRefused(Message(f"operator {op.label(plan_names)}: ", message_of(exc))) from None
        new_files.extend(res.files)
        notes.extend(f"{op.label(plan_names)}: {n}" for n in res.notes)
        return res.subtasks

    return rescale_state


def _write_plan_file(guard: Guard, report: RescaleResult, topology: Topology, out: Path) -> None:
    """Beside the new checkpoint's _metadata, written with it: the plan of the rescaled job (so ``validate
    --plan`` works on the output)."""
    import json

    if topology.source_doc is None:
        return
    new_p = {k: v.new_p for k, v in report.plan.vertices.items() if v.rescaled}
    chains = report.plan.view or topology  # its vertex keys are the bound chains', as the plan's vertices
    guard.write_file((PLAN_FILE,), [(json.dumps(chains.with_parallelism(new_p), indent=2) + "\n").encode()])
    report.plan_file = str(out / PLAN_FILE)


def _write_state_file(guard: Guard, nf: NewStateFile, blobs: DelegateBlobs) -> None:
    def pieces() -> Iterator[bytes]:
        for piece in nf.pieces:
            if isinstance(piece, bytes | bytearray):
                yield bytes(piece)
                continue
            handle, offset, length = piece
            blob = blobs.get(handle)
            if blob is None:
                raise RescaleRefused(f"state file of {handle} is not readable")
            yield blob.read_at(offset, length)

    guard.write_file(plain_parts(nf.relative_path), pieces())


def rescale(
    loaded: LoadedCheckpoint,
    topology: Topology,
    parallelism: dict[str, int],
    out: Path,
    keys: dict[str, str] | None = None,
    key_fns: dict[str, str] | None = None,
    buffer_size: int = DEFAULT_BUFFER_SIZE,
    master: str | None = "local[*]",
    rebase: list[str] | None = None,
    dry_run: bool = False,
    buffers: BufferSettings | None = None,
    damage: SourceDamage | None = None,
    job: JobBinding | None = None,
) -> RescaleResult:
    """``master`` None runs the in-process backend (no Spark). A dry run reads the old channels and
    forecasts (``spillway.rescale.forecast``; ``buffers``: Flink's network buffer settings); it writes nothing.
    ``damage`` (``force=True``): the source's validate errors; the damaged logical channels being moved are
    left out and listed in the plan's ``lost``; any other error is refused."""
    started = time.perf_counter()
    plan = build_plan(
        loaded.checkpoint,
        topology,
        loaded.resolver,
        parallelism,
        keys,
        key_fns,
        buffer_size,
        damage.reasons() if damage is not None else None,
        damage.counted if damage is not None else None,
        job,
    )
    if damage is not None:
        refuse_damaged(damage.not_covered(plan.lost_keys), force=True)
    report = RescaleResult(plan, out=out, notes=list(plan.notes), dry_run=dry_run)  # the plan's notes first
    timings = report.timings
    timings["plan"] = time.perf_counter() - started
    if not plan.rescaled():
        raise RescaleRefused(
            Message("nothing to do: each vertex in ", Named("parallelism"), " already runs at that parallelism")
        )
    refuse_wrong_extractors(plan)  # the source says whether keys/key_fns give the job's key: before writing
    timings["key_check"] = time.perf_counter() - started - timings["plan"]
    if dry_run:
        t0 = time.perf_counter()
        report.forecast = forecast(plan, buffers)
        timings["forecast"] = time.perf_counter() - t0
        return report
    blobs = DelegateBlobs(loaded.resolver)
    output = PlannedOutput(loaded.checkpoint)

    def produce(tmp: Path) -> CheckpointMetadata:
        t0 = time.perf_counter()
        timings["spark_start"] = 0.0
        if master is None:
            with background_fsync() as synced:  # flushes overlap the rest of the writing and the self-check
                move = run_local(plan, str(tmp), synced)
                problems = self_check(tmp, plan, move)
        else:
            import importlib.util

            if importlib.util.find_spec("pyspark") is None:
                raise RescaleRefused(
                    Message(
                        Named("master", master),
                        " needs pyspark, which is not installed: pip install 'spillway[spark]' "
                        "(or run in this process with ",
                        Named("master", "inprocess"),
                        ")",
                    )
                )
            from spillway.rescale.spark_job import run_spark

            move, problems, per_edge = run_spark(plan, str(tmp), master, timings)
            problems += check_totals(plan, move, per_edge)
        timings["move"] = time.perf_counter() - t0 - timings["spark_start"]
        t_keys = time.perf_counter()
        key_problems, _ = check_output_keys(tmp, plan, move.files)  # independent of the router's key function
        problems += key_problems
        timings["output_key_check"] = time.perf_counter() - t_keys
        if problems:
            raise WriteError(Message("self-check: ", Message.joined("; ", problems[:5])))
        t1 = time.perf_counter()
        report.move = move
        new_files: list[NewStateFile] = []
        cp = assemble(
            loaded.checkpoint,
            plan,
            move.files,
            _state_rescaler(blobs, new_files, report.notes, plan.plan_names, loaded.checkpoint.features),
        )
        pinned = pin_found_paths(cp, loaded)  # a moved source's files are named where they are now
        cp = pinned.checkpoint
        report.notes.extend(pinned.notes())
        guard = Guard(tmp, shown=out, sync=False)  # the writer syncs the whole output before its check
        try:
            for nf in new_files:
                _write_state_file(guard, nf, blobs)
            _write_plan_file(guard, report, topology, out)
        finally:
            guard.close()
        timings["state_and_metadata"] = time.perf_counter() - t1
        produced = {f.name for f in move.files} | {nf.relative_path for nf in new_files}
        for name in sorted(relative_names(cp) - produced):
            resolved = loaded.resolver.resolve(RelativeFileHandle(name, 0))
            remote_copies.ensure_local(None if resolved is None else resolved.local_text)
            if resolved is None or resolved.local is None or not resolved.local.is_file():
                raise RescaleRefused(f"{name}: referenced relative file is missing in the source checkpoint")
            output.copies[resolved.local] = name
        return cp

    try:
        write_checkpoint(output, out, validated_output(rescaled_topology(topology, plan), rebase), produce=produce)
    finally:
        blobs.close()
    timings["total"] = time.perf_counter() - started
    timings["final_check"] = timings["total"] - sum(
        timings.get(k, 0.0)
        for k in ("plan", "key_check", "spark_start", "move", "output_key_check", "state_and_metadata")
    )
    return report


def rescale_checkpoint(
    loaded: LoadedCheckpoint, topology: Topology, options: RescaleOptions, job: JobBinding | None = None
) -> RescaleResult:
    """Rescale the opened checkpoint ``loaded`` (local, or the working copy of a remote one) of the job
    ``topology`` as ``options`` say, and write the result to ``options.out`` (path or URI; must not exist).
    A remote output is written and self-checked locally, then published (each object read back and
    compared, ``_metadata`` last). A source with validate errors is refused; with ``options.force`` its
    damaged logical channels on the edges being moved are left out (``RescaleResult.plan.lost``) and any
    other error is still refused. A ``dry_run`` writes nothing (the report's ``out`` is then None
    without an ``out``). ``job``: ``topology`` bound to ``loaded``, when the caller holds it."""
    from spillway.storage import fs
    from spillway.storage.workspace import output_workspace

    out, master, dry_run, force = options.out, options.master, options.dry_run, options.force
    # A dry run writes nothing: without an output, the workspace gets a target no checkpoint can be inside.
    with output_workspace(loaded, os.devnull if out is None else str(out)) as ws:
        if master is not None and not dry_run:
            _prestart_spark(master)  # the JVM starts while the source is validated and planned
        job = job or bind_job(topology, loaded.checkpoint)  # once: validate, the plan and the report share it
        checked = validate(loaded, topology, job=job)
        if (unsafe := unsafe_path_refusal(checked.errors)) is not None:
            raise RescaleRefused(unsafe)
        damage = SourceDamage.of(checked) if checked.errors and force else None
        if not force:
            refuse_damaged(checked.errors, force=False)
        loaded.resolve_files()
        # The output names the files where they are (pinned): its self-check finds them with the user's rules only.
        rules = list(ws.rebase)
        if ws.remote_out is not None and not dry_run:
            fs.check_target(ws.remote_out)
        if options.on_start is not None and not dry_run:
            options.on_start(str(loaded.location.checkpoint_dir))
        report = rescale(
            loaded,
            topology,
            dict(options.parallelism),
            ws.target,
            keys=dict(options.keys),
            key_fns=dict(options.key_fns),
            buffer_size=options.buffer_size,
            master=master,
            rebase=rules,
            dry_run=dry_run,
            buffers=BufferSettings(options.buffer_size, options.buffers_per_channel, options.floating_buffers_per_gate),
            damage=damage,
            job=job,
        )
        if not dry_run:
            _after_write(report, topology, ws.target, ws.final_prefix)
        if ws.remote_out is not None and not dry_run:
            fs.publish_dir(ws.target, ws.remote_out)
        report.out = None if out is None else ws.shown_out
        report.binding = binding_json(job.operators)
        if not dry_run:
            from spillway.inspect.restore_instructions import operator_parallelism, restore_instructions

            report.restore = restore_instructions(
                ws.remote_out or str(ws.target.absolute()),
                loaded.checkpoint.features,
                operator_parallelism(
                    ((o, v.new_p) for v in report.plan.vertices.values() for o in v.operators), report.plan.plan_names
                ),
            )
    return report


def _prestart_spark(master: str) -> None:
    import importlib.util

    if importlib.util.find_spec("pyspark") is not None:  # else produce() refuses with the install hint
        from spillway.rescale.spark_job import prestart

        prestart(master)


def forecast_rescale(
    loaded: LoadedCheckpoint,
    topology: Topology,
    parallelism: dict[str, int],
    keys: dict[str, str] | None = None,
    key_fns: dict[str, str] | None = None,
    buffers: BufferSettings | None = None,
) -> dict[str, Any]:
    """The restore forecast of rescaling ``loaded`` to ``parallelism`` (``analyze -p``, ``Checkpoint.analyze``):
    planned and key-checked as ``rescale --dry-run`` does; reads the channel state, writes nothing."""
    loaded.resolve_files()
    plan = build_plan(loaded.checkpoint, topology, loaded.resolver, parallelism, keys, key_fns)
    if not plan.rescaled():
        raise RescaleRefused("nothing to forecast: every vertex named keeps its current parallelism")
    refuse_wrong_extractors(plan)
    return forecast(plan, buffers)


def restore_forecast(
    loaded: LoadedCheckpoint,
    topology: Topology,
    answer: PreflightAnswer,
    keys: Mapping[str, str],
    key_fns: Mapping[str, str],
    buffers: BufferSettings,
) -> tuple[dict[str, Any] | None, Message | None]:
    """Preflight's restore forecast: when the new job (``topology``) is the checkpoint's job rescaled and the
    restore is not refused, the forecast (its warnings added to ``answer.reasons``), else None; and why no
    forecast could be made (a missing key extractor, …) instead of failing the answer."""
    from spillway.inspect.preflight import checkpoint_parallelism_plan, forecast_reasons

    rescaled = checkpoint_parallelism_plan(topology, answer) if answer.restorable is not False else None
    if rescaled is None:
        return None, None
    try:
        found = forecast_rescale(loaded, rescaled[0], rescaled[1], dict(keys), dict(key_fns), buffers)
    except SpillwayError as exc:
        return None, Message("no restore forecast: ", message_of(exc))
    answer.reasons += forecast_reasons(found)
    return found, None
