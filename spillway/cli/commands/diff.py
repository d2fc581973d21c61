"""Compare two checkpoints."""

from __future__ import annotations

from typing import Any

from click import argument
from rich.markup import escape

from spillway import api
from spillway.cli.common import ExitStatus, emit_json, human_bytes
from spillway.cli.help import command as spillway_command
from spillway.cli.options import PlanNaming, flag, plan_naming
from spillway.cli.render import out, print_table

HELP = """Compare two checkpoints: operators added, removed and renamed (matched by operator id; names and
uids where the format stores them), parallelism and max parallelism, finished flags, keyed, operator
and channel state bytes and in-flight bytes per operator, the files each references (added, removed,
shared) and the format version. Before Flink 2.0 a checkpoint stores operator ids only: with --plan (and
--uid/--uid-map) the operators the plan binds exactly in each checkpoint are shown with the plan's names
(--json: "plan_name"). Like diff: exit code 0 when identical, 1 when different, 2 on usage
errors.

Examples:

  spillway diff /checkpoints/7f3c.../chk-41 /checkpoints/7f3c.../chk-42

  spillway diff chk-42 chk-42-rescaled --json | jq '.operators.changed'
"""


@spillway_command("diff", HELP)
@argument("a", help="first checkpoint: job checkpoint dir, chk-N dir or _metadata file")
@argument("b", help="second checkpoint (compared against A)")
@flag("--json", "json_out", help="Emit JSON (schema spillway.diff/1).")
@plan_naming()
def command(a: str, b: str, json_out: bool, naming: PlanNaming) -> int:
    d = api.diff(a, b, **naming.plan_keywords())
    if json_out:
        emit_json(d.to_json())
    else:
        show(d)
    return ExitStatus.OK if d.identical else ExitStatus.FINDINGS


def _value(v: Any, field: str) -> str:
    if v is None:
        return "-"
    if isinstance(v, list):
        return "[" + ", ".join(map(str, v)) + "]"
    if field.endswith("_bytes") and isinstance(v, int):
        return f"{v} ({human_bytes(v)})" if v >= 1024 else str(v)
    return str(v)


def show(d: api.CheckpointDiff) -> None:
    for label, loaded in (("A", d.a), ("B", d.b)):
        cp = loaded.checkpoint
        out.print(
            f"{label}: {escape(loaded.location.shown)} (checkpoint {cp.checkpoint_id}, "
            f"format V{cp.format_version}, {len(cp.operators)} operators)",
            soft_wrap=True,
        )
    if d.identical:
        out.print("[bold green]identical[/]")
        return
    for name, (va, vb) in d.checkpoint.items():
        out.print(escape(f"{name.replace('_', ' ')}: {va} -> {vb}"))
    rows = []
    for sign, what, docs in (("[red]-[/]", "removed", d.removed), ("[green]+[/]", "added", d.added)):
        for doc in docs:
            label = doc["uid"] or doc["name"] or doc["plan_name"] or "-"
            rows.append((sign, escape(label), doc["operator_id"], what, "", ""))
    for c in d.changed:
        for i, (field, (va, vb)) in enumerate(c.changes.items()):
            rows.append(
                (
                    "" if i else "[yellow]~[/]",
                    "" if i else escape(c.label),
                    "" if i else c.operator_id,
                    field + (" (renamed)" if field in ("name", "uid") and c.renamed else ""),
                    escape(_value(va, field)),
                    escape(_value(vb, field)),
                )
            )
    if rows:
        print_table(("", "operator", "id", "what", "A", "B"), rows, show_edge=False, pad_edge=False)
    out.print(
        f"operators: {len(d.added)} added, {len(d.removed)} removed, {len(d.changed)} changed, {d.unchanged} unchanged"
    )
    if d.files_added or d.files_removed:
        files: list[tuple[str, ...]] = []
        for sign, keys in (("[red]-[/]", d.files_removed), ("[green]+[/]", d.files_added)):
            for k in keys:
                f = d.files.files[k]
                kinds = ", ".join(k.replace("_state", "").replace("_", " ") for k in sorted(f.kinds))
                files.append((sign, escape(f.display()), "-" if f.size is None else str(f.size), escape(kinds)))
        print_table(("", "file", "size>", "state~"), files, show_edge=False, pad_edge=False)

    def size(keys: list[str]) -> str:
        return human_bytes(sum(d.files.files[k].size or 0 for k in keys))

    out.print(
        f"files: {len(d.files_removed)} removed ({size(d.files_removed)}), {len(d.files_added)} added "
        f"({size(d.files_added)}), {len(d.files_shared)} shared ({size(d.files_shared)})"
    )
    out.print("[bold yellow]different[/]")
