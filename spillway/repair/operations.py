"""The four repairs: each takes an opened checkpoint, its plan and the repair's options
(``spillway.repair.repair_options``), writes a new checkpoint at ``options.out`` (never over anything,
self-checked before the rename) and returns a ``RepairResult``. ``dry_run`` writes nothing.
An opened checkpoint calls them (``spillway.open("chk-42").strip_channel_state(StripOptions(...))``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from spillway import progress
from spillway.errors import Message, Named, UsageError
from spillway.inspect.analyze import analyze
from spillway.inspect.finished import check, classify
from spillway.inspect.operators import operator_ids
from spillway.inspect.topology import JobBinding, Topology, bind_job
from spillway.model.checkpoint import CheckpointMetadata, is_file_backed
from spillway.model.walk import leaf_stream_handles
from spillway.repair.common import Change, RepairError, RepairPlan
from spillway.repair.relocate import relocate as relocate_paths
from spillway.repair.repair_options import ClearFinishedOptions, DropOperatorOptions, RelocateOptions, StripOptions
from spillway.repair.transforms import clear_finished as clear_markers
from spillway.repair.transforms import drop_operators
from spillway.repair.transforms import strip_channel_state as strip_channels
from spillway.repair.workflow import (
    EdgeLoss,
    Loss,
    Outside,
    RepairResult,
    finish,
    moved_rules,
    pin_moved_paths,
    source_damage,
    source_rebases,
)
from spillway.safe_io import real_path
from spillway.storage import fs, remote_copies
from spillway.storage.claim import Claim
from spillway.storage.load import LoadedCheckpoint
from spillway.storage.locate import strip_file_scheme
from spillway.storage.names import is_remote
from spillway.storage.relative import relative_copies
from spillway.storage.rules import PathRule
from spillway.storage.safe_writer import PlannedOutput
from spillway.storage.staged_copies import StagedCopies
from spillway.storage.workspace import Workspace, output_workspace

if TYPE_CHECKING:
    from spillway.inspect.salvage import SalvageReport


def relocate(
    loaded: LoadedCheckpoint, plan: Topology | None, options: RelocateOptions, job: JobBinding | None = None
) -> RepairResult:
    """Rewrite every path starting with ``options.old`` to start with ``options.new``."""
    old, new, copy_data, relative = options.old, options.new, options.copy_data, options.relative
    with output_workspace(loaded, str(options.out)) as io:
        job = _bound(plan, loaded, job)
        damage = source_damage(loaded, plan, options.force, job)
        relative_under = io.final_prefix if relative else None
        if relative and not loaded.checkpoint.features.relative_file_handles:
            raise RepairError("relative file handles need metadata V3 or later (Flink 1.11+)")
        result = relocate_paths(loaded.checkpoint, old, new, relative_under)
        if not result.rewritten and result.untouched:
            # Nothing rewritten while paths remain: the "moved" copy would still point at the old place.
            # A script moving a checkpoint must not go on as if it had moved: refuse (exit 1), write nothing.
            raise RepairError(
                Message(
                    Named("old", old),
                    f": none of the {result.untouched} absolute paths in {loaded.location.shown} lies at "
                    "or below it; nothing to relocate, nothing written (a path or URI names the same place in any "
                    "spelling: /x, file:/x, file:///x)",
                )
            )
        copies = relative_copies(loaded, result.checkpoint)
        local, remote, in_store, inside = (
            _external_copies(loaded, result.checkpoint, old, new, io) if copy_data else ([], [], [], {})
        )
        # Files that land inside the output directory itself (Flink 1.10 and some backends write absolute
        # files into their own chk-N): the safe writer writes them into its temporary directory, so they
        # appear with the checked output or not at all.
        copies.update(inside)
        rp = RepairPlan(PlannedOutput(result.checkpoint, copies))
        for kind, n in sorted(result.rewritten.items()):
            rp.changes.append(Change(f"paths rewritten in {kind}", n, f"{old} -> {new}"))
        if not result.rewritten:
            # Every file is relative to the checkpoint (or inline): the copy stands alone wherever it goes.
            rp.warnings.append(
                Message("no absolute path in the checkpoint: nothing to rewrite for ", Named("old", old))
            )
        if result.made_relative:
            rp.changes.append(Change("file handles made relative", result.made_relative))
        if copies:
            rp.changes.append(Change("relative files copied into the output", len(copies)))
        if result.untouched:
            rp.warnings.append(f"{result.untouched} absolute paths are not below {old!r} and were kept")
        if copy_data:
            moved = len(local) + len(remote) + len(in_store) + len(inside)
            rp.changes.append(Change("referenced files copied to their new location", moved))
        source_rules = source_rebases(loaded, io.rebase)
        if not copy_data or remote or in_store:
            # The data is not at its new place on this machine: check the output against where it is now.
            rp.self_check_rebase = moved_rules(old, new, source_rules)
        elif io.remote_out is not None:
            rp.self_check_rebase = source_rules

        def copy_external(claim: Claim) -> Outside:
            # Local copies are staged under their destination root (claimed: one run per root, a dead run's copies
            # cleared by the next) and only linked into place once the output passed its self-check, which reads
            # them where they are staged. Uploads are undone by put_files itself, or by the undo below.
            staged = _stage_external(local, new, claim)
            try:
                written = fs.put_files(remote)
                try:
                    written += fs.copy_files(in_store)
                except BaseException:
                    fs.delete_files(written)  # the uploads before the failed copy
                    raise
            except BaseException:
                if staged is not None:
                    staged.abandon()
                raise

            def undo() -> None:
                try:
                    fs.delete_files(written)
                finally:
                    if staged is not None:
                        staged.abandon()

            if staged is None:
                return Outside(undo)
            return Outside(undo, [staged.rebase()], lambda: _placed(staged), staged.settle)

        rp.warnings.extend(damage)
        return finish(rp, io, options.dry_run, plan, before=copy_external, job=job)


def strip_channel_state(
    loaded: LoadedCheckpoint, plan: Topology | None, options: StripOptions, job: JobBinding | None = None
) -> RepairResult:
    """Drop whole logical channels (both halves) of ``options.operators`` (all when None), with a loss
    report (``RepairResult.loss``: records and bytes dropped, per edge, every channel)."""
    with output_workspace(loaded, str(options.out)) as io:
        job = _bound(plan, loaded, job)
        damage = source_damage(loaded, plan, options.force, job)
        ids = operator_ids(loaded.checkpoint, _names(options.operators), _plan_names(job))
        if ids is not None and plan is None:
            raise RepairError(
                Message(
                    "stripping some operators needs the job's ",
                    Named("plan"),
                    ": each channel's other half sits on the operator at the other end of the edge, and dropping "
                    "one half only would break record framing on restore",
                )
            )
        salvaged = None
        if options.salvage is None:
            analysis = analyze(loaded, plan, job=job)
        else:
            salvaged = _salvage_first(loaded, plan, job, ids, options)
            assert salvaged.analysis is not None
            analysis = salvaged.analysis
        result = strip_channels(loaded.checkpoint, analysis, ids)
        if salvaged is not None and result.records_dropped != salvaged.records:
            raise RepairError(
                f"the salvage exported {salvaged.records} records but the strip would drop "
                f"{result.records_dropped}: refusing (the exported records would not be those lost)"
            )
        copies = relative_copies(loaded, result.checkpoint)
        rp = RepairPlan(PlannedOutput(result.checkpoint, copies))
        rp.changes.append(Change("channel handles removed", result.handles_removed))
        rp.changes.append(Change("logical channels dropped", len(result.losses)))
        dropped = result.records_dropped
        unknown = (
            Message("unknown: output-side state without ", Named("plan"))
            if plan is None
            else "unknown: output-side state of channels the plan does not bind"
        )
        rp.changes.append(Change("records dropped", dropped, "" if dropped is not None else unknown))
        rp.changes.append(Change("bytes dropped", result.bytes_dropped))
        edges: dict[str, EdgeLoss] = {}
        for loss in result.losses:
            name = f"{loss.upstream} -> {loss.downstream}" + (f" ({loss.edge})" if loss.edge else "")
            e = edges.setdefault(name, EdgeLoss(0, 0))
            e.records = None if e.records is None or loss.records is None else e.records + loss.records
            e.bytes += loss.bytes
        lost = Loss(dropped, result.bytes_dropped, unknown if dropped is None else None, edges, result.losses)
        if options.salvage is not None and salvaged is not None:
            where = "not written (dry run)" if options.dry_run else str(options.salvage.out)
            rp.changes.append(Change("records salvaged before stripping", salvaged.records, where))
        pin_moved_paths(rp, loaded, io)
        rp.warnings.extend(damage)
        report = finish(rp, io, options.dry_run, plan, loss=lost, job=job)
        if salvaged is not None:
            report.salvage = salvaged.to_json()
        return report


def _salvage_first(
    loaded: LoadedCheckpoint, plan: Topology | None, job: JobBinding | None, ids: set[str] | None, options: StripOptions
) -> SalvageReport:
    """Export the records the strip will drop (the same channels: those into or out of ``ids``) before anything
    is written; its analysis is the one the strip then uses, so both see the same channels."""
    from spillway.inspect.salvage import refuse_inside_checkpoint, salvage  # Parquet, only when asked for

    assert options.salvage is not None
    target = Path(options.salvage.out)
    out = Path(strip_file_scheme(str(options.out)) or str(options.out))
    if not is_remote(str(options.out)):
        a, b = real_path(target), real_path(out)
        if a == b or b in a.parents or a in b.parents:
            raise UsageError(
                Message(
                    f"salvage={str(target)!r}: the salvage and the output ", Named("out", str(out)), " must not nest"
                )
            )
    directory = None if options.dry_run or options.salvage.dry_run else target
    if directory is not None:
        refuse_inside_checkpoint(directory, loaded)
    types = options.salvage.types()
    return salvage(loaded, plan, directory, ids, types, options.salvage.jsonl, job)


def clear_finished(
    loaded: LoadedCheckpoint, plan: Topology | None, options: ClearFinishedOptions, job: JobBinding | None = None
) -> RepairResult:
    """Clear FLIP-147 finished markers of ``options.operators``, or, given the new job's ``plan`` and no
    operators, of exactly the vertices Flink's restore-time checks would refuse."""
    force = options.force
    with output_workspace(loaded, str(options.out)) as io:
        damage = source_damage(loaded, None, force)
        cp = loaded.checkpoint
        job = _bound(plan, loaded, job)
        verdict = check(plan, cp, job) if plan is not None else None
        names = _plan_names(job)
        ids = operator_ids(cp, _names(options.operators), names)
        if ids is None:
            if verdict is None:
                raise UsageError(
                    Message(
                        "name the operators to clear (", Named("operators"), ") or give the new job's ", Named("plan")
                    )
                )
            if verdict.restorable:
                raise RepairError(
                    "Flink's finished-state checks would accept this checkpoint for that plan: nothing to clear"
                )
            flagged = {v.vertex for v in verdict.violations}
            ids = {
                o.operator_id
                for o in cp.operators
                if classify(o) != "ALL_RUNNING" and any(o.name and o.name in v for v in flagged)
            }
            if not ids:
                raise RepairError(
                    Message(
                        "cannot tell which operators belong to the refused vertices (metadata before "
                        "V5 stores no names): name them with ",
                        Named("operators"),
                    )
                )
        not_finished = [o.label(names) for o in cp.operators if o.operator_id in ids and classify(o) == "ALL_RUNNING"]
        if not_finished:
            raise RepairError(f"not finished, nothing to clear: {', '.join(not_finished)}")
        if verdict is not None and verdict.restorable and not force:
            raise RepairError(
                Message(
                    "Flink would accept these finished markers for that plan; clearing them makes the "
                    "operators run again from scratch (",
                    Named("force", True),
                    " if that is what you want)",
                )
            )
        new, changed = clear_markers(cp, ids, names)
        rp = RepairPlan(PlannedOutput(new, relative_copies(loaded, new)))
        for c in changed:
            rp.changes.append(Change(c, 1))
        rp.warnings.append("cleared operators restart with no state; cleared sources read their input again")
        pin_moved_paths(rp, loaded, io)
        rp.warnings.extend(damage)
        return finish(rp, io, options.dry_run, plan, job=job)


def drop_operator(
    loaded: LoadedCheckpoint, plan: Topology | None, options: DropOperatorOptions, job: JobBinding | None = None
) -> RepairResult:
    """Remove ``options.operators`` from the checkpoint, with the other half of each of their channels."""
    with output_workspace(loaded, str(options.out)) as io:
        job = _bound(plan, loaded, job)
        damage = source_damage(loaded, plan, options.force, job)
        names = _plan_names(job)
        ids = operator_ids(loaded.checkpoint, _names(options.operators), names)
        assert ids, "DropOperatorOptions names at least one operator"
        has_channels = any(
            s.input_channel_state or s.result_subpartition_state
            for o in loaded.checkpoint.operators
            if o.operator_id in ids
            for s in o.subtasks
        )
        cp = loaded.checkpoint
        rp = RepairPlan(PlannedOutput(cp))
        lost = Loss(0, 0)
        if has_channels:
            if plan is None:
                raise RepairError(
                    Message(
                        "the operator holds channel state: the job's ",
                        Named("plan"),
                        " is needed to drop the other half of each of its channels too",
                    )
                )
            stripped = strip_channels(cp, analyze(loaded, plan, job=job), ids)
            cp = stripped.checkpoint
            rp.changes.append(
                Change(
                    "channels dropped with it",
                    len(stripped.losses),
                    f"{'an unknown number of' if stripped.records_dropped is None else stripped.records_dropped} "
                    f"records, {stripped.bytes_dropped} bytes",
                )
            )
            lost = Loss(stripped.records_dropped, stripped.bytes_dropped)
        new = drop_operators(cp, ids)
        rp.output = PlannedOutput(new, relative_copies(loaded, new))
        for o in loaded.checkpoint.operators:
            if o.operator_id in ids:
                rp.changes.append(Change(f"operator dropped: {o.label(names)}", 1, o.operator_id))
                rp.dropped |= {x for x in (o.name, o.uid, names.get(o.operator_id), o.operator_id) if x}
        pin_moved_paths(rp, loaded, io)
        rp.warnings.extend(damage)
        return finish(rp, io, options.dry_run, plan, loss=lost, job=job)


def _bound(plan: Topology | None, loaded: LoadedCheckpoint, job: JobBinding | None) -> JobBinding | None:
    """The plan bound to the source, once per repair (``job`` when the caller already holds it)."""
    return job if job is not None or plan is None else bind_job(plan, loaded.checkpoint)


def _plan_names(job: JobBinding | None) -> Mapping[str, str]:
    return job.names if job is not None else {}


def _names(operators: Sequence[str] | None) -> list[str] | None:
    return None if operators is None else list(operators)


def _external_copies(
    loaded: LoadedCheckpoint, checkpoint: CheckpointMetadata, old: str, new: str, io: Workspace
) -> tuple[list[tuple[Path, Path]], list[tuple[Path, str]], list[tuple[fs.Location, str]], dict[Path, str]]:
    """(resolved source, new destination) for absolute files: local destinations, remote URIs, remote URIs the
    store copies to itself (source in the same store), and files inside the output directory itself (source ->
    path relative to it, for the safe writer)."""
    local: dict[Path, Path] = {}
    remote: dict[str, Path] = {}
    in_store: dict[str, fs.Location] = {}
    inside: dict[Path, str] = {}
    out_prefix = io.final_prefix.rstrip("/") + "/"
    sources: dict[str, str] = {}  # new path -> the source's path it was rewritten from
    rule = PathRule(old, new)
    for h in leaf_stream_handles(loaded.checkpoint):
        if is_file_backed(h) and not h.relative and (moved := rule.apply(h.file_name)) is not None:
            sources[moved] = h.file_name
    for new_path, original in sources.items():
        resolved = loaded.resolver.resolve_path(original)
        if (source := _in_store_source(resolved.local_text, new_path, io, out_prefix)) is not None:
            in_store[new_path] = source  # copied by the store itself: its bytes never pass through here
            continue
        remote_copies.ensure_local(resolved.local_text)  # a remote checkpoint's file: copied, so fetched
        if resolved.local is None or not resolved.local.is_file():
            raise RepairError(f"{original}: cannot copy, {resolved.problem or 'not found'}")
        if io.remote_out is not None and new_path.startswith(out_prefix):
            inside[resolved.local] = new_path[len(out_prefix) :]
            continue
        if is_remote(new_path):
            remote[new_path] = resolved.local
            continue
        dest = strip_file_scheme(new_path)
        if dest is None:
            raise RepairError(f"{new_path}: not a path spillway can write to")
        target = real_path(dest)
        if io.remote_out is None and io.target in target.parents:
            inside[resolved.local] = target.relative_to(io.target).as_posix()
            continue
        local[resolved.local] = Path(dest)
    remote_pairs = sorted((src, uri) for uri, src in remote.items())
    return sorted(local.items()), remote_pairs, [(src, uri) for uri, src in sorted(in_store.items())], inside


def _in_store_source(local: str | None, new_path: str, io: Workspace, out_prefix: str) -> fs.Location | None:
    """The remote file ``local`` stands for, when the store can copy it to ``new_path`` itself (both on one
    object store, ``new_path`` outside the output directory); None when its bytes must pass through here."""
    uri = None if local is None else remote_copies.uri_of(local)
    size = None if local is None else remote_copies.size_of(local)
    if uri is None or size is None or not is_remote(new_path):
        return None
    if io.remote_out is not None and new_path.startswith(out_prefix):
        return None
    source = fs.locate(uri)
    return source if fs.copies_in_store(source, new_path, size) else None


def _stage_external(pairs: list[tuple[Path, Path]], new: str, claim: Claim) -> StagedCopies | None:
    """Stage a copy of each source for its destination, all confined under the new prefix ``new`` (a
    destination a ``..`` or a symlink would put elsewhere is refused before anything is written)."""
    if not pairs:
        return None
    root = Path(strip_file_scheme(new) or new)
    if any(dest == root for _, dest in pairs):
        root = root.parent  # ``new`` names a file itself
    bar = progress.stage(
        Message("copying data (", Named("copy_data", True), ")"), sum(source.stat().st_size for source, _ in pairs)
    )
    return StagedCopies.stage(pairs, root, claim, bar.advance)


def _placed(staged: StagedCopies) -> None:
    staged.place()


__all__ = ["RepairResult", "clear_finished", "drop_operator", "relocate", "strip_channel_state"]
