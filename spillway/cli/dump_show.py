"""``spillway dump`` for people: tables and trees (rich), loaded only when a run prints text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.tree import Tree

from spillway.cli.common import human_bytes
from spillway.cli.render import out, print_items, print_rebased, print_wide, table

if TYPE_CHECKING:
    from rich.table import Table

    from spillway.api import DumpResult, OperatorTree


_UNSAFE_SHOWN = 5  # unsafe paths listed by name; validate lists every one


def show(result: DumpResult, as_tree: bool) -> None:
    loaded = result.loaded
    cp = result.checkpoint
    if loaded.location.note:
        out.print(f"[dim]{escape(loaded.location.note)}[/]", soft_wrap=True)
    summary = result.summary()
    columns = ("operator (uid)", "operator id", "par/max>", "finished", "keyed>", "operator st.>", "channel>", "files>")
    rows = [
        (
            _operator_cell(s.operator, result.plan_names),
            s.operator.operator_id,
            f"{s.operator.parallelism}/{s.operator.max_parallelism}",
            s.finished_label(cp.features),
            human_bytes(s.keyed_bytes) if s.keyed_bytes else "-",
            human_bytes(s.operator_bytes) if s.operator_bytes else "-",
            f"{human_bytes(s.channel_bytes)} ({s.channels} ch)" if s.channels else "-",
            str(len(s.files)) if s.files else "-",
        )
        for s in summary.operators
    ]
    print_wide(table(columns, rows, escape(loaded.location.shown), expand=False), narrow=_narrow(result))
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
    print_items([escape(p) for p in parts])
    print_rebased(result.rebases())
    unsafe = result.unsafe_paths
    if unsafe:
        out.print(
            f"[bold red]{len(unsafe)} unsafe paths in _metadata[/] (never resolved; no command writes from this "
            "checkpoint, run `spillway validate` for where they are):",
            soft_wrap=True,
        )
        for u in unsafe[:_UNSAFE_SHOWN]:
            out.print(f"  [bold red]{u['rule']}[/] {escape(u['path'])}: {escape(u['reason'])}", soft_wrap=True)
        if len(unsafe) > _UNSAFE_SHOWN:
            out.print(f"  … and {len(unsafe) - _UNSAFE_SHOWN} more")
    missing = result.missing_files
    if missing:
        out.print(f"[yellow]{missing} referenced files are not reachable here[/] (run `spillway validate` for details)")


def _narrow(result: DumpResult) -> Table:
    """The operators for a narrow terminal: name above id, the state sizes one kind a line."""
    rows = []
    for s in result.summary().operators:
        o = s.operator
        sizes = [
            f"{kind} {human_bytes(n)}" for kind, n in (("keyed", s.keyed_bytes), ("operator", s.operator_bytes)) if n
        ]
        if s.channels:
            sizes.append(f"channel {human_bytes(s.channel_bytes)} ({s.channels} ch)")
        if s.files:
            sizes.append(f"{len(s.files)} file" + ("s" if len(s.files) > 1 else ""))
        rows.append(
            (
                _operator_cell(o, result.plan_names) + "\n" + o.operator_id,
                f"{o.parallelism}/{o.max_parallelism}",
                s.finished_label(result.checkpoint.features),
                "\n".join(sizes) or "-",
            )
        )
    return table(("operator (uid) / id", "par/max>", "finished~", "state and files~"), rows, expand=False)


def _operator_cell(o: Any, plan_names: Mapping[str, str]) -> str:
    plan_name = plan_names.get(o.operator_id)
    if o.name is None and plan_name:  # the checkpoint stores no name: say where this one comes from
        return f"{escape(plan_name)} [dim](plan)[/]"
    return escape(o.name or "-") + (f" [dim]({escape(o.uid)})[/]" if o.uid else "")


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
            "path_problem",
        )
    ]
    fields = ", ".join(f"{k}={_printable(doc[k])}" for k in keys)
    if "offsets" in doc:
        offs = doc["offsets"]
        fields += f", offsets={offs if len(offs) <= 4 else str(offs[:4])[:-1] + f', … {len(offs)} total]'}"
    label = f"[bold]{escape(str(doc['type']))}[/] {escape(fields)}"
    problem = doc.get("path_problem")
    if problem:
        label += f" [bold red]{escape(problem['rule'])}: {escape(problem['reason'])}[/]"
    return label


def _printable(value: object) -> str:
    """A value for a terminal: a path holding a NUL or another control character shown escaped."""
    text = str(value)
    return text if text.isprintable() else repr(text)[1:-1]


def _add_doc(node: Tree, doc: Any, label: str | None = None) -> None:
    if doc is None:
        return
    child = node.add((f"{escape(label)}: " if label else "") + _handle_label(doc))
    for key in ("delegate", "meta_state_handle"):
        if doc.get(key):
            _add_doc(child, doc[key], key)
    for key in ("shared_state", "private_state"):
        for item in doc.get(key, []):
            mark = f" ({item['path_problem']['rule']})" if item.get("path_problem") else ""
            _add_doc(child, item["handle"], f"{key.split('_')[0]} {_printable(item['local_path'])}{mark}")
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
        for kind in t.kinds:
            for h in s[kind]:
                _add_doc(node, h, kind)
    return root


__all__ = ["operator_tree", "show"]
