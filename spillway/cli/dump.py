"""``spillway dump``: everything in ``_metadata``, for people (table/tree) or machines (--json)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from spillway.api import DumpView, dump_checkpoint
from spillway.cli.binding import show_binding
from spillway.cli.common import EXIT_FINDINGS, EXIT_OK, UsageError, emit_json, guarded, human_bytes, out
from spillway.cli.options import PlanNaming, bundled
from spillway.cli.wide import print_wide

if TYPE_CHECKING:
    from spillway.api.dump import DumpResult, OperatorTree

HELP = """Decode a checkpoint's _metadata (format V2-V7) and show every operator, subtask and handle.

PATH is a job's checkpoint directory (the newest chk-N is picked; newer ones whose _metadata does not
decode are reported and passed over), a chk-N directory or a _metadata file, local or a URI (s3://…).
Absolute paths Flink wrote that no longer exist are rebased onto PATH automatically.
Before Flink 2.0 a checkpoint stores operator ids only: with --plan (and --uid/--uid-map) the operators
the plan binds exactly are shown with the plan's names (--json: "plan_name"; "name" stays what Flink stored).
Exit code 0, 1 when a chk-N of the job directory is damaged, 2 on usage errors, 3 when the storage
cannot be reached or read.

Examples:

  spillway dump /checkpoints/7f3c.../chk-42

  spillway dump /checkpoints/7f3c... --operator slow --subtask 1

  spillway dump chk-42/_metadata --json | jq '.operators[].operator_id'

  spillway dump chk-42 --plan plan.json --uid-map uids.json --json | jq '.operators[] | {operator_id, plan_name}'
"""


@bundled
def command(
    path: Annotated[str, typer.Argument(help="job checkpoint dir, chk-N dir or _metadata file")],
    json_out: Annotated[
        bool, typer.Option("--json", help="Emit the full decode as JSON (schema spillway.dump/1).")
    ] = False,
    operator: Annotated[str | None, typer.Option("--operator", help="Only this operator (id, uid or name).")] = None,
    subtask: Annotated[int | None, typer.Option("--subtask", help="Only this subtask index.")] = None,
    tree: Annotated[bool, typer.Option("--tree", help="Show every handle as a tree.")] = False,
    naming: PlanNaming = PlanNaming(),
) -> None:
    def run() -> int:
        # parse -> one API call -> render (the API reads the plan before any checkpoint)
        result = dump_checkpoint(path, DumpView(operator, subtask), **naming.plan_keywords())
        code = EXIT_FINDINGS if result.damaged else EXIT_OK
        if subtask is not None:
            top = result.top_parallelism
            if subtask < 0 or subtask >= top:
                raise UsageError(
                    f"--subtask {subtask}: "
                    + (f"the parallelism is {top} (subtasks 0..{top - 1})" if top else "no operator has subtasks")
                )
        if json_out:
            emit_json(result.json_head(), ("operators", result.operator_docs()))
            return code
        result.survey()
        show_binding(result.binding)
        show(result, tree or operator is not None or subtask is not None)
        return code

    raise typer.Exit(guarded(run, json_out))


def show(result: DumpResult, as_tree: bool) -> None:
    loaded = result.loaded
    cp = result.checkpoint
    if loaded.location.note:
        out.print(f"[dim]{escape(loaded.location.note)}[/]", soft_wrap=True)
    summary = result.summary()
    table = Table(title=escape(loaded.location.shown), title_justify="left", expand=False)
    right: tuple[str, ...] = ("par/max", "keyed", "operator st.", "channel", "files")
    for col in ("operator (uid)", "operator id", "par/max", "finished", "keyed", "operator st.", "channel", "files"):
        table.add_column(col, no_wrap=True, justify="right" if col in right else "left")
    for s in summary.operators:
        o = s.operator
        table.add_row(
            _operator_cell(o.name, o.plan_name, o.uid),
            o.operator_id,
            f"{o.parallelism}/{o.max_parallelism}",
            s.finished_label(cp.features),
            human_bytes(s.keyed_bytes) if s.keyed_bytes else "-",
            human_bytes(s.operator_bytes) if s.operator_bytes else "-",
            f"{human_bytes(s.channel_bytes)} ({s.channels} ch)" if s.channels else "-",
            str(len(s.files)) if s.files else "-",
        )
    print_wide(table)
    if as_tree:
        for t in result.trees():
            print_wide(operator_tree(t))
    kind = cp.properties.checkpoint_type.get("name", "?") if cp.properties else None
    parts = [
        f"format V{cp.format_version} ({cp.features.releases})",
        f"checkpoint {cp.checkpoint_id}",
        f"{len(summary.operators)} operators",
        f"keyed {human_bytes(summary.total('keyed_bytes'))}",
        f"operator {human_bytes(summary.total('operator_bytes'))}",
        f"channel {human_bytes(summary.total('channel_bytes'))} in {summary.total('channels')} channels",
        f"{len(summary.files)} files",
    ]
    if kind:
        parts.append(f"type {kind}")
    if cp.properties_note:
        parts.append(f"properties kept raw ({cp.properties_note})")
    out.print(escape(" · ".join(parts)))
    for r in result.rebases():
        out.print(
            f"[dim]rebased {r['paths']} paths: {escape(str(r['from']))} -> {escape(str(r['to']))}[/]", soft_wrap=True
        )
    missing = result.missing_files
    if missing:
        out.print(f"[yellow]{missing} referenced files are not reachable here[/] (run `spillway validate` for details)")


def _operator_cell(name: str | None, plan_name: str | None, uid: str | None) -> str:
    if name is None and plan_name:  # the checkpoint stores no name: say where this one comes from
        return f"{escape(plan_name)} [dim](plan)[/]"
    return escape(name or "-") + (f" [dim]({escape(uid)})[/]" if uid else "")


def _handle_label(doc: dict[str, Any]) -> str:
    keys = [
        k
        for k in doc
        if doc[k] is not None  # not recorded in this format version: --json shows null
        and k
        not in (
            "type",
            "delegate",
            "channels",
            "shared_state",
            "private_state",
            "meta_state_handle",
            "materialized",
            "non_materialized",
            "handles_and_offsets",
            "states",
            "offsets",
        )
    ]
    fields = ", ".join(f"{k}={doc[k]}" for k in keys)
    if "offsets" in doc:
        offs = doc["offsets"]
        fields += f", offsets={offs if len(offs) <= 4 else str(offs[:4])[:-1] + f', … {len(offs)} total]'}"
    return f"[bold]{escape(str(doc['type']))}[/] {escape(fields)}"


def _add_doc(node: Tree, doc: Any, label: str | None = None) -> None:
    if doc is None:
        return
    child = node.add((f"{escape(label)}: " if label else "") + _handle_label(doc))
    for key in ("delegate", "meta_state_handle"):
        if doc.get(key):
            _add_doc(child, doc[key], key)
    for key in ("shared_state", "private_state"):
        for item in doc.get(key, []):
            _add_doc(child, item["handle"], f"{key.split('_')[0]} {item['local_path']}")
    for key in ("materialized", "non_materialized"):
        for item in doc.get(key, []):
            _add_doc(child, item, key)
    for item in doc.get("handles_and_offsets", []):
        _add_doc(child, item["handle"], f"@{item['offset']}")
    for name, st in doc.get("states", {}).items():
        child.add(escape(f"state {name}: {st['distribution_mode']} offsets={st['offsets']}"))
    for ch in doc.get("channels", []):
        _add_doc(child, ch)


def operator_tree(t: OperatorTree) -> Tree:
    doc = t.doc
    root = Tree(f"[bold cyan]{escape(t.label)}[/] {escape(t.operator_id)}")
    if doc["coordinator_state"]:
        _add_doc(root, doc["coordinator_state"], "coordinator")
    if t.fully_finished:
        root.add("[yellow]fully finished[/] (no subtask state)")
    for s in doc["subtasks"]:
        node = root.add(f"subtask {s['index']}" + (" [yellow]finished[/]" if s["finished"] else ""))
        for kind in (
            "managed_operator_state",
            "raw_operator_state",
            "managed_keyed_state",
            "raw_keyed_state",
            "input_channel_state",
            "result_subpartition_state",
        ):
            for h in s[kind]:
                _add_doc(node, h, kind)
    return root


__all__ = ["HELP", "command"]
