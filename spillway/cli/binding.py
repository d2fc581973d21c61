"""How ``--plan`` operators were bound to the checkpoint, for people: one line when all is exact,
a table of the rest otherwise."""

from __future__ import annotations

from collections import Counter

from rich.markup import escape
from rich.table import Table

from spillway.cli.output import out
from spillway.cli.wide import print_wide
from spillway.flink.operator_ids import Binding


def show_binding(binding: Binding | None) -> None:
    if binding is None:
        return
    ops = binding.operators
    exact = [b for b in ops if b.exact]
    methods = Counter(b.method for b in ops)
    summary = ", ".join(f"{n} by {m}" for m, n in sorted(methods.items()))
    out.print(f"[dim]plan operators bound {len(exact)}/{len(ops)} exactly ({escape(summary)})[/]")
    rest = [b for b in ops if not b.exact and (b.in_checkpoint or b.method == "unbound")]
    if not rest:
        return
    table = Table(title="not bound by Flink's own ids", title_justify="left")
    for col in ("operator", "bound by", "operator id", "what would make it certain"):
        prose = col == "what would make it certain"
        table.add_column(col, no_wrap=not prose, overflow="fold" if prose else "ellipsis")
    for b in rest:
        table.add_row(escape(b.name), escape(b.method), escape(b.operator_id or "-"), escape(b.reason))
    print_wide(table)
