"""The operators of a parsed plan by every name a person sees for them, and the form that picks one.

Every name spillway shows for a plan operator names it: the stream-graph plan's ``type`` (the operator's name,
what the binding table shows) and ``contents`` (its description, e.g. a window's or SQL's long form), a job-graph
plan's chain labels, and SQL's simplified ``Kind[N]`` (what Flink's UI and logs show for ``[N]:Kind(…)``). The
form ``NAME#REF`` or ``#REF`` picks one plan node (REF: the stream node id, e.g. ``#7``; in a job-graph plan the
vertex id's first eight digits and the chain position, e.g. ``#cbc357cc.1``). This reads the parsed plan only
(:mod:`spillway.flink.stream_graph`) and each vertex's names, so the binding can key a user's uids by plan node
and :mod:`spillway.inspect.plan_names` can refuse a shared name, without either depending on the other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from spillway.flink.stream_graph import JobGraphPlan, StreamGraph

__all__ = ["PlanNode", "job_ref", "nodes_of", "resolve", "split_ref"]

_SQL = re.compile(r"^\[(?P<n>\d+)\]:(?P<kind>\w+)")
_REF = re.compile(r"^(?:\d+|[0-9a-f]{8}(?:[0-9a-f]{24})?(?:\.\d+)?)$")


class ShownVertex(Protocol):
    """What a plan's vertex shows: its operators' names, head first, and (stream-graph plans) their node ids."""

    @property
    def names(self) -> tuple[str, ...]: ...

    @property
    def node_ids(self) -> tuple[int, ...]: ...


@dataclass(frozen=True, slots=True)
class PlanNode:
    """One plan operator: ``ref`` picks it (``#7``), ``vertex`` is its vertex key in ``topology.vertices``,
    ``names`` every name it is shown by, ``name`` the one the binding table shows."""

    ref: str
    vertex: str
    name: str
    names: frozenset[str]

    def picked(self) -> str:
        return f"{self.name}#{self.ref[1:]}"


def _aliases(*labels: str | None) -> set[str]:
    out: set[str] = set()
    for label in labels:
        if not label:
            continue
        out.add(label)
        m = _SQL.match(label)
        if m:
            out.add(f"{m.group('kind')}[{m.group('n')}]")
    return out


def job_ref(vertex_id: str, position: int) -> str:
    """The plan node form of a job-graph plan's chained operator."""
    return f"#{vertex_id[:8]}.{position}"


def nodes_of(
    stream_graph: StreamGraph | None, job_graph: JobGraphPlan | None, vertices: Mapping[str, ShownVertex]
) -> list[PlanNode]:
    """Every operator of the plan, in plan order: of Flink's stream graph or job-graph plan when the plan has one,
    else of its vertices' names."""
    out: list[PlanNode] = []
    if stream_graph is not None:
        key_of = {nid: key for key, v in vertices.items() for nid in v.node_ids}
        for n in stream_graph.nodes:
            key = key_of.get(n.id, str(n.id))
            out.append(PlanNode(f"#{n.id}", key, n.name, frozenset(_aliases(n.name, n.description))))
    elif job_graph is not None:
        for jv in job_graph.vertices:
            shown = vertices.get(jv.id)
            for pos, label in enumerate(jv.operators):
                extra = shown.names[pos] if shown is not None and len(shown.names) == len(jv.operators) else None
                out.append(PlanNode(job_ref(jv.id, pos), jv.id, label, frozenset(_aliases(label, extra))))
    else:  # a plan without Flink's graph: the vertices' names only
        for key, v in vertices.items():
            for pos, name in enumerate(v.names):
                out.append(PlanNode(f"#{key}.{pos}", key, name, frozenset(_aliases(name))))
    return out


def split_ref(text: str) -> tuple[str, str | None]:
    """``NAME#REF`` / ``#REF`` -> (NAME, "#REF"); anything else -> (text, None) (a ``#`` in a name stays)."""
    name, sep, ref = text.rpartition("#")
    if sep and _REF.match(ref.lower()):
        return name, "#" + ref.lower()
    return text, None


def _ref_matches(node: PlanNode, ref: str) -> bool:
    if node.ref == ref:
        return True
    # a job-graph node may be named by the full vertex id, and a chain head by the vertex id alone
    vertex, _, pos = node.ref[1:].partition(".")
    want, _, want_pos = ref[1:].partition(".")
    return len(want) == 32 and want[:8] == vertex and (want_pos or "0") == pos


def resolve(nodes: list[PlanNode], wanted: str) -> list[PlanNode]:
    """The plan operators ``wanted`` names (empty: none). ``NAME#REF``/``#REF`` pick one node."""
    name, ref = split_ref(wanted)
    if ref is not None:
        return [n for n in nodes if _ref_matches(n, ref) and (not name or name in n.names)]
    return [n for n in nodes if wanted in n.names]
