"""How ``--plan`` operators were bound to the checkpoint, for people: one line when all is exact,
a table of the rest otherwise."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from rich.markup import escape

from spillway import api
from spillway.cli.render import out, print_paragraph, print_table

# How an operator was found, in a reader's words (--json keeps the method's name: "binding[].method").
HOW = {
    "flink-id": "by Flink's own id, from the job's jar",
    "stored-name": "by the name stored in the checkpoint",
    "uid-hash": "by the id Flink makes from its uid",
    "deterministic-hash": "by the id Flink makes from the job's shape (no uid)",
    "hash-input": "as an input that went into another operator's id",
    "vertex-id": "by the job vertex id in the plan",
    "deduced": "as the only fit for what the checkpoint holds",
    "indistinct": "not told apart (holds no state)",
    "elimination": "guessed: the one operator and id left",
    "unbound": "not found",
}


def how_found(method: str) -> str:
    return HOW.get(method, method)


def show_binding(binding: api.Binding | None) -> None:
    if binding is not None:  # without a plan there is nothing to show, and nothing to load for it
        show_binding_doc(api.binding_json(binding))


def show_binding_doc(rows: list[dict[str, Any]] | None) -> None:
    """The ``binding`` rows of a JSON report (validate, analyze, rescale, repair), for people."""
    if not rows:
        return
    exact = [b for b in rows if b["exact"]]
    methods = Counter(b["method"] for b in rows)
    summary = "; ".join(f"{n} {how_found(m)}" for m, n in sorted(methods.items()))
    print_paragraph(
        f"[dim]plan operators found in the checkpoint for certain: {len(exact)} of {len(rows)} ({escape(summary)})[/]"
    )
    rest = [b for b in rows if not b["exact"] and (b["in_checkpoint"] or b["method"] == "unbound")]
    if not rest:
        return
    shared = {n for n, k in Counter(b["operator"] for b in rows).items() if k > 1}
    # a name several operators carry is shown with the form that picks this one (what --uid/-p take)
    print_table(
        ("operator", "found~", "operator id", "what would make it certain~"),
        [
            (
                escape(b["operator"] + (b.get("plan_node") or "" if b["operator"] in shared else "")),
                escape(how_found(b["method"])),
                escape(b["operator_id"] or "-"),
                escape(b["reason"]),
            )
            for b in rest
        ],
        "not bound by Flink's own ids",
    )
    template = api.uid_map_template(rows)
    if template:
        out.print(
            "[dim]a uid map to fill in with the uids of those that have one, then pass it as --uid-map FILE "
            "(empty entries are ignored):[/]"
        )
        out.print(escape(json.dumps(template, indent=2)), soft_wrap=True)
