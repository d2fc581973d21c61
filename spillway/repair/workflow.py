"""The repair workflow every repair shares: open the source (a local working copy of a remote one),
write the output safely with its self-check, publish a remote output, and report what changed.

SRC and the output may be local paths or URIs of any file system pyarrow.fs knows (``s3://…``,
``file:///…``). A remote SRC is opened through a local working directory holding its ``_metadata``; its
other files are fetched only when read (``spillway.storage.remote_copies``); a remote output is written and
self-checked locally, then published (``spillway.storage.fs.publish_dir``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spillway.errors import Message, Named
from spillway.inspect.findings import Finding
from spillway.inspect.output_check import validated_output
from spillway.inspect.reports import binding_json
from spillway.inspect.restore_instructions import operator_parallelism, restore_instructions, restore_lines
from spillway.inspect.rules.files import unsafe_path_refusal
from spillway.inspect.topology import JobBinding, Topology, bind_job
from spillway.inspect.validate import validate
from spillway.repair.common import Change, RepairError, RepairPlan
from spillway.repair.transforms import ChannelLoss
from spillway.storage import fs
from spillway.storage.claim import Claim, claimed
from spillway.storage.load import LoadedCheckpoint, load_checkpoint
from spillway.storage.pinning import pin_found_paths
from spillway.storage.rules import PathRule
from spillway.storage.safe_writer import PlannedOutput, write_checkpoint
from spillway.storage.workspace import Workspace

SCHEMA = "spillway.repair/1"


@dataclass
class EdgeLoss:
    """What one edge lost: its records (None: not known for every channel) and bytes."""

    records: int | None
    bytes: int


@dataclass
class Loss:
    """In-flight data a repair dropped (strip-channel-state; drop-operator with channel state)."""

    records_dropped: int | None  # None: not known (``records_dropped_reason`` says why, where known)
    bytes_dropped: int
    records_dropped_reason: str | None = None
    edges: dict[str, EdgeLoss] | None = None  # strip-channel-state: per edge
    channels: list[ChannelLoss] | None = None  # strip-channel-state: every logical channel dropped

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"records_dropped": self.records_dropped}
        if self.records_dropped_reason is not None:
            doc["records_dropped_reason"] = self.records_dropped_reason
        doc["bytes_dropped"] = self.bytes_dropped
        if self.edges is not None:
            doc["edges"] = {name: {"records": e.records, "bytes": e.bytes} for name, e in self.edges.items()}
        if self.channels is not None:
            doc["channels"] = [vars(c) for c in self.channels]
        return doc


@dataclass
class RepairResult:
    """What a repair did (or, with ``dry_run``, would do); ``to_json()`` is the ``spillway.repair/1`` document."""

    out: str
    dry_run: bool
    changes: list[Change]
    warnings: list[str]
    loss: Loss | None = None
    planned: bool = False  # a plan was given: the report carries its ``binding``
    binding: list[dict[str, Any]] | None = None  # how the plan's operators were bound (binding_json rows)
    restore: dict[str, Any] | None = None  # how to restore the output (restore_instructions); None in a dry run
    salvage: dict[str, Any] | None = None  # strip-channel-state with a salvage: what was exported first

    def restore_lines(self) -> list[str]:
        """``restore`` as the lines the CLI prints (none for a dry run)."""
        return [] if self.restore is None else restore_lines(self.restore)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "out": self.out,
            "dry_run": self.dry_run,
            "changes": [
                {"what": c.what, "count": c.count, "detail": c.detail}
                | ({"reason": c.detail} if c.count is None else {})
                for c in self.changes
            ],
            "warnings": self.warnings,
            **(self.loss.to_json() if self.loss is not None else {}),
            **({"binding": self.binding} if self.planned else {}),
            "restore": self.restore,
            **({"salvage": self.salvage} if self.salvage is not None else {}),
        }

    @property
    def extra(self) -> dict[str, Any]:
        """The document's keys after ``warnings`` (the loss report, ``binding``, ``restore``), as before."""
        doc = self.to_json()
        return {k: v for k, v in doc.items() if k not in {"schema", "out", "dry_run", "changes", "warnings"}}


def source_damage(
    loaded: LoadedCheckpoint, topology: Topology | None, force: bool, job: JobBinding | None = None
) -> list[str]:
    """Validate the source before anything is written. A damaged source is refused (a repair would
    carry the damage along or hide it); with ``force`` the repair goes ahead and each error becomes a
    warning in its report."""
    errors = validate(loaded, topology, job=job).errors
    if not errors:
        return []
    if (unsafe := unsafe_path_refusal(errors)) is not None:
        raise RepairError(unsafe)
    listed = [f"{f.rule}: {f.message}" + (f" ({f.file})" if f.file else "") for f in errors]
    if not force:
        raise RepairError(
            Message(
                f"the source has {len(errors)} validate errors, first: {listed[0]}; a repair would carry the "
                "damage along or hide it (spillway validate shows them all; ",
                Named("force", True),
                " writes anyway and lists them)",
            )
        )
    return [Message("source damage kept (", Named("force", True), f"): {text}") for text in listed]


def source_rebases(loaded: LoadedCheckpoint, user_rules: list[str] | None) -> list[str]:
    """Where the source's files really are (explicit --rebase and automatic rebasing), as rules for
    the output's self-check: the output names the same files, it must resolve them the same way."""
    loaded.resolve_files()
    return [*(user_rules or []), *(f"{r['from']}={r['to']}" for r in loaded.resolver.rebases())]


def pin_moved_paths(rp: RepairPlan, loaded: LoadedCheckpoint, io: Workspace) -> None:
    """Name the files a moved source keeps where they are now (``spillway.storage.pinning``); the output's
    self-check then finds every file with the user's own rules, none that spillway found by itself."""
    pinned = pin_found_paths(rp.output.checkpoint, loaded)
    rp.output.checkpoint = pinned.checkpoint
    for (old, new), n in sorted(pinned.prefixes.items()):
        rp.changes.append(Change("paths named where the files are now (the source was moved)", n, f"{old} -> {new}"))
    rp.self_check_rebase = list(io.rebase)


def moved_rules(old: str, new: str, source_rules: list[str]) -> list[str]:
    """Self-check rules for paths rewritten ``old`` -> ``new`` whose data has not moved (or not to
    this machine): send ``new…`` to wherever the source's ``old…`` really is. Prefixes are compared as
    locations (``/x`` and ``file:/x`` are one place)."""
    moved = PathRule(old, new)
    rules: list[str] = []
    for rule in source_rules:
        src_prefix, _, actual = rule.partition("=")
        if (renamed := moved.apply(src_prefix)) is not None:
            rules.append(f"{renamed}={actual}")
        elif (found := PathRule(src_prefix, actual).apply(old)) is not None:
            rules.append(f"{new}={found}")
    rules.append(f"{new}={old}")
    return rules


def _key(f: Finding) -> tuple[Any, ...]:
    return (f.rule, f.operator, f.subtask, f.channel, f.message)


def _plan_check(rp: RepairPlan, io: Workspace, topology: Topology) -> Callable[[Path], list[str]]:
    """Validate the output under the plan, failing only on errors the repair brought in: errors the
    source already has under that plan (e.g. a new job's plan given to clear-finished) are reported
    as a warning, not blamed on the output."""

    def check(tmp: Path) -> list[str]:
        rules = [f"{rp.output.final_prefix}={tmp}", *rp.self_check_rebase]
        errors = [
            f
            for f in validate(load_checkpoint(tmp, internal=rules), topology).errors
            if not (f.rule == "plan-mismatch" and f.operator in rp.dropped)
        ]
        if not errors:
            return []
        before = {_key(f) for f in validate(io.loaded, topology).errors}
        new = [f for f in errors if _key(f) not in before]
        old = [f for f in errors if _key(f) in before]
        if old:
            rp.warnings.append(
                f"the source already has {len(old)} validate errors under this plan, kept as they were "
                f"(first: {old[0].rule}: {old[0].message}, operator {old[0].operator})"
            )
        return [
            Message(
                f"validate found {len(new)} errors in the output under ",
                Named("plan"),
                f", first: {f.rule}: {f.message} (operator {f.operator}, subtask {f.subtask}, channel {f.channel})",
            )
            for f in new[:1]
        ]

    return check


def _nothing() -> None:
    return None


@dataclass
class Outside:
    """What a repair writes outside its output (``finish``'s ``before``): ``rebase``, self-check rules sending
    paths to where the files are staged; ``place`` runs once the output passed its self-check, just before it
    is published; ``settle`` once it is; ``undo`` on any failure before that."""

    undo: Callable[[], None]
    rebase: list[str] = field(default_factory=list)
    place: Callable[[], None] = _nothing
    settle: Callable[[], None] = _nothing


def finish(
    rp: RepairPlan,
    io: Workspace,
    dry_run: bool,
    topology: Topology | None,
    before: Callable[[Claim], Outside | None] | None = None,
    loss: Loss | None = None,
    job: JobBinding | None = None,
) -> RepairResult:
    """Write (unless ``dry_run``), self-check, publish; return the change report. ``before(claim)`` runs
    once the output is claimed, just before it is written (e.g. staging copies of data files elsewhere) and
    says how to finish or undo that (:class:`Outside`)."""
    if not dry_run:
        if io.remote_out is not None:
            fs.check_target(io.remote_out)  # refuse before doing any work
        # The output is claimed before any data is copied: one run per output, and on any failure (Ctrl-C and
        # SIGTERM included) everything this run made, staged or copied elsewhere, is removed again.
        with claimed(io.target) as claim:
            outside: Outside | None = None
            published = False
            try:
                outside = before(claim) if before is not None else None  # in the try: a Ctrl-C after it undoes it
                if outside is not None:
                    rp.self_check_rebase = [*outside.rebase, *rp.self_check_rebase]
                checked = validated_output(
                    None,
                    rebase=rp.self_check_rebase,
                    extra_check=_plan_check(rp, io, topology) if topology is not None else None,
                )
                placing = outside

                def check_then_place(tmp: Path, planned: PlannedOutput) -> list[Finding]:
                    found = checked(tmp, planned)
                    if placing is not None:
                        placing.place()  # only now does anything reach a final name outside the output
                    return found

                rp.output.final_prefix = rp.output.final_prefix or io.final_prefix
                write_checkpoint(rp.output, io.target, check_then_place, claim=claim)
                if io.remote_out is not None:
                    files = fs.publish_dir(io.target, io.remote_out)
                    published = True
                    rp.changes.append(Change("files published (each read back and compared)", files, io.remote_out))
            except BaseException:
                # Copies made for an output that is not in its place are removed; once it is (a Ctrl-C while
                # the report is made), they are part of it.
                if not published and not (io.remote_out is None and claim.done):
                    claim.remove_journaled()
                    if outside is not None:
                        outside.undo()
                        claim.remove_parents()  # the output's abandon may have come first, when they held copies
                elif outside is not None:
                    outside.settle()
                raise
            if outside is not None:
                outside.settle()
    if topology is not None and job is None:
        job = bind_job(topology, io.loaded.checkpoint)
    binding = binding_json(job.operators) if job is not None else None
    return RepairResult(
        io.shown_out,
        dry_run,
        rp.changes,
        rp.warnings,
        loss,
        planned=topology is not None,
        binding=binding,
        restore=None if dry_run else _restore(rp, io, job.names if job is not None else {}),
    )


def _restore(rp: RepairPlan, io: Workspace, plan_names: Mapping[str, str]) -> dict[str, Any]:
    """How to restore the output: a repair keeps every operator's parallelism (and ids: ``plan_names``, the
    source's, name its operators)."""
    written = rp.output.checkpoint
    path = io.remote_out or str(io.target.absolute())
    sizes = operator_parallelism(((o, o.parallelism) for o in written.operators), plan_names)
    return restore_instructions(path, written.features, sizes)
