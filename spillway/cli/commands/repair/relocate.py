"""Rewrite every path prefix so a checkpoint can move."""

from __future__ import annotations

import spillway.api as api
from spillway.cli.help import command
from spillway.cli.options import Naming, flag, naming, option
from spillway.cli.repair_common import Repair, repair_options

HELP = """Rewrite every path at or below --from so that it lies below --to: file, segment,
incremental shared/private/meta, changelog, channel-state and operator-state handles, file-merging
directories. --from is a path or a URI matched on whole components in any spelling (/data, file:/data
and file:///data are one place); a plain --to keeps the file: spelling Flink wrote. Files relative to
the checkpoint directory are copied into --out. --copy-data also copies every other referenced file to
its new location. --relative turns files that will sit directly in --out into relative handles
(metadata V3+). SRC is never modified; an identity relocation reproduces _metadata byte for byte.
Exit code 0 written, 1 refused (validate errors without --force; or --from matches none of the
checkpoint's absolute paths: nothing to relocate, nothing written), 2 usage, 3 storage unreachable.

Examples:

  spillway repair relocate /old/ckpt/job/chk-7 --out /new/ckpt/job/chk-7 \
      --from file:/old/ckpt --to file:/new/ckpt --copy-data

  spillway repair relocate chk-7 --out chk-7-moved --from file:/data --to s3://bucket/flink --dry-run
"""


@command("relocate", HELP)
@repair_options()
@option(
    "--from",
    "old",
    required=True,
    metavar="PREFIX",
    help="Path prefix to replace: a path or URI, any spelling (/x = file:/x).",
)
@option(
    "--to", "new", required=True, metavar="PREFIX", help="Replacement prefix (a plain path keeps the file: spelling)."
)
@flag("--copy-data", help="Also copy referenced files to their new places.")
@flag("--relative", help="Files directly in --out become relative handles.")
@naming()
def run(repair: Repair, old: str, new: str, copy_data: bool, relative: bool, naming: Naming) -> int:
    def options() -> api.RelocateOptions:
        return api.RelocateOptions(repair.out_dir, old, new, copy_data, relative, repair.dry_run, repair.force)

    return repair.run(naming, options, api.Checkpoint.relocate)


command = run
