"""``spillway repair relocate``: rewrite every path prefix so a checkpoint can move."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from spillway.cli.common import UsageError, guarded
from spillway.cli.dump import RebaseOpt
from spillway.cli.repair_common import (
    DryRunOpt,
    JsonOpt,
    OutOpt,
    PlanOpt,
    RepairIO,
    SrcArg,
    finish,
    moved_rules,
    open_repair,
    source_rebases,
    storage_guarded,
)
from spillway.model.checkpoint import FileHandle, SegmentFileHandle
from spillway.model.walk import transform_stream_handles
from spillway.repair.common import Change, RepairError, RepairPlan
from spillway.repair.relocate import relocate
from spillway.storage import fs
from spillway.storage.locate import strip_file_scheme
from spillway.storage.relative import relative_copies
from spillway.storage.safe_writer import PlannedOutput

HELP = """Rewrite every path that starts with --from so that it starts with --to: file, segment,
incremental shared/private/meta, changelog, channel-state and operator-state handles, file-merging
directories. Files relative to the checkpoint directory are copied into --out. --copy-data also
copies every other referenced file to its new location. --relative turns files that will sit
directly in --out into relative handles (metadata V3+). SRC is never modified; an identity
relocation reproduces _metadata byte for byte.

Examples:

  spillway repair relocate /old/ckpt/job/chk-7 --out /new/ckpt/job/chk-7 \
      --from file:/old/ckpt --to file:/new/ckpt --copy-data

  spillway repair relocate chk-7 --out chk-7-moved --from file:/data --to s3://bucket/flink --dry-run
"""


def command(
    src: SrcArg,
    out_dir: OutOpt,
    old: Annotated[str, typer.Option("--from", help="Path prefix to replace (as written in _metadata).")],
    new: Annotated[str, typer.Option("--to", help="Replacement prefix.")],
    copy_data: Annotated[
        bool, typer.Option("--copy-data", help="Also copy referenced files to their new places.")
    ] = False,
    relative: Annotated[
        bool, typer.Option("--relative", help="Files directly in --out become relative handles.")
    ] = False,
    dry_run: DryRunOpt = False,
    json_out: JsonOpt = False,
    plan: PlanOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    def run() -> int:
        if not old or not new:
            raise UsageError("--from and --to must not be empty")
        with open_repair(src, out_dir, rebase) as io:
            return repair(io)

    def repair(io: RepairIO) -> int:
        loaded = io.loaded
        relative_under = io.final_prefix if relative else None
        if relative and loaded.checkpoint.format_version < 3:
            raise RepairError("relative file handles need metadata V3 or later (Flink 1.11+)")
        result = relocate(loaded.checkpoint, old, new, relative_under)
        copies = relative_copies(loaded, result.checkpoint)
        rp = RepairPlan(PlannedOutput(result.checkpoint, copies))
        for kind, n in sorted(result.rewritten.items()):
            rp.changes.append(Change(f"paths rewritten in {kind}", n, f"{old} -> {new}"))
        if not result.rewritten:
            rp.warnings.append(f"no path starts with {old!r}: nothing was rewritten")
        if result.made_relative:
            rp.changes.append(Change("file handles made relative", result.made_relative))
        if copies:
            rp.changes.append(Change("relative files copied into the output", len(copies)))
        if result.untouched:
            rp.warnings.append(f"{result.untouched} absolute paths do not start with {old!r} and were kept")
        local, remote = _external_copies(loaded, result.checkpoint, old, new) if copy_data else ([], [])
        if copy_data:
            rp.changes.append(Change("referenced files copied to their new location", len(local) + len(remote)))
        source_rules = source_rebases(loaded, io.rebase)
        if not copy_data or remote:
            # The data is not at its new place on this machine: check the output against where it is now.
            rp.self_check_rebase = moved_rules(old, new, source_rules)
        elif io.remote_out is not None:
            rp.self_check_rebase = source_rules

        def copy_external() -> Callable[[], None] | None:
            _copy_external(local)
            written = fs.put_files(remote)
            return lambda: fs.delete_files(written)

        return finish(rp, io, dry_run, json_out, plan, before=copy_external)

    raise typer.Exit(guarded(storage_guarded(run)))


def _external_copies(loaded, checkpoint, old: str, new: str) -> tuple[list[tuple[Path, Path]], list[tuple[Path, str]]]:
    """(resolved source, new destination) for absolute files: local destinations and remote URIs."""
    local: dict[Path, Path] = {}
    remote: dict[str, Path] = {}
    sources = {}

    def collect(h: object) -> object:
        if isinstance(h, FileHandle | SegmentFileHandle) and h.path.startswith(new):
            original = old + h.path[len(new) :]
            sources[h.path] = original
        return h

    transform_stream_handles(checkpoint, collect)
    for new_path, original in sources.items():
        resolved = loaded.resolver.resolve_path(original)
        if resolved.local is None or not resolved.local.is_file():
            raise RepairError(f"{original}: cannot copy, {resolved.problem or 'not found'}")
        if fs.is_remote(new_path):
            remote[new_path] = resolved.local
            continue
        dest = strip_file_scheme(new_path)
        if dest is None:
            raise RepairError(f"{new_path}: not a path spillway can write to")
        local[resolved.local] = Path(dest)
    return sorted(local.items()), sorted((src, uri) for uri, src in remote.items())


def _copy_external(pairs: list[tuple[Path, Path]]) -> None:
    for source, dest in pairs:
        if dest.exists():
            if dest.stat().st_size == source.stat().st_size:
                continue
            raise RepairError(f"{dest}: exists with different content; not overwritten")
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".spillway-partial")
        shutil.copyfile(source, tmp)
        os.replace(tmp, dest)


__all__ = ["HELP", "command"]
