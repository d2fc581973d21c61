"""The plan's operators by every name a person sees for them, and the form that picks one when a name is shared.

Where a name is taken (``--uid NAME=UID``, ``-p NAME=N``, ``--operator NAME``) every name spillway shows for a
plan operator is accepted: the stream-graph plan's ``type`` (the operator's name, what the binding table shows)
and ``contents`` (its description, e.g. a window's or SQL's long form), a job-graph plan's chain labels, and
SQL's simplified ``Kind[N]`` (what Flink's UI and logs show for ``[N]:Kind(…)``). A name several plan operators
carry (``Map``, ``KeyedProcess``, ``Sink: Unnamed``) picks none of them: it is refused with the operators listed
and the form that picks one, the plan node added as ``NAME#REF`` or ``#REF`` (REF: the stream node id, e.g.
``#7``; in a job-graph plan the vertex id's first eight digits and the chain position, e.g. ``#cbc357cc.1``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from spillway.errors import UsageError
from spillway.inspect.topology import Topology

__all__ = ["PlanNode", "check_uid_names", "plan_nodes", "resolve_node", "split_ref", "vertex_nodes"]

_SQL = re.compile(r"^\[(?P<n>\d+)\]:(?P<kind>\w+)")
_REF = re.compile(r"^(?:\d+|[0-9a-f]{8}(?:[0-9a-f]{24})?(?:\.\d+)?)$")


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


def plan_nodes(topology: Topology) -> list[PlanNode]:
    """Every operator of the plan, in plan order."""
    out: list[PlanNode] = []
    if topology.stream_graph is not None:
        key_of = {nid: key for key, v in topology.vertices.items() for nid in v.node_ids}
        for n in topology.stream_graph.nodes:
            key = key_of.get(n.id, str(n.id))
            out.append(PlanNode(f"#{n.id}", key, n.name, frozenset(_aliases(n.name, n.description))))
    elif topology.job_graph is not None:
        for jv in topology.job_graph.vertices:
            shown = topology.vertices.get(jv.id)
            for pos, label in enumerate(jv.operators):
                extra = shown.names[pos] if shown is not None and len(shown.names) == len(jv.operators) else None
                out.append(PlanNode(job_ref(jv.id, pos), jv.id, label, frozenset(_aliases(label, extra))))
    else:  # a plan without Flink's graph: the vertices' names only
        for key, v in topology.vertices.items():
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


def resolve_node(topology: Topology, wanted: str, nodes: list[PlanNode] | None = None) -> list[PlanNode]:
    """The plan operators ``wanted`` names (empty: none). ``NAME#REF``/``#REF`` pick one node."""
    nodes = plan_nodes(topology) if nodes is None else nodes
    name, ref = split_ref(wanted)
    if ref is not None:
        return [n for n in nodes if _ref_matches(n, ref) and (not name or name in n.names)]
    return [n for n in nodes if wanted in n.names]


def shared_name_error(wanted: str, hits: Iterable[PlanNode], example: str) -> UsageError:
    """The refusal of a name several plan operators carry: each listed by the form that picks it."""
    listed = ", ".join(f"{n.picked()} (vertex {n.vertex})" for n in hits)
    return UsageError(
        f"{wanted!r} names more than one operator of the plan: {listed}; pick one by its plan node, e.g. {example}"
    )


def vertex_nodes(topology: Topology, wanted: str) -> set[str] | None:
    """Vertex keys of the operators ``wanted`` names (None: it names no operator). Raises a ``UsageError`` when
    it names operators of several vertices."""
    hits = resolve_node(topology, wanted)
    if not hits:
        return None
    keys = {n.vertex for n in hits}
    if len(keys) > 1:
        raise shared_name_error(wanted, hits, f"-p '{hits[-1].picked()}=N'")
    return keys


def check_uid_names(topology: Topology, uids: Mapping[str, str]) -> None:
    """``--uid NAME=UID``: a name several plan operators carry binds none of them silently — refused, with the
    form that picks one. ``NAME#REF`` that matches no plan node is refused too (it was meant for one)."""
    nodes = plan_nodes(topology)
    for key in uids:
        hits = resolve_node(topology, key, nodes)
        _, ref = split_ref(key)
        if len(hits) > 1:
            raise shared_name_error(key, hits, f"--uid '{hits[-1].picked()}={uids[key]}'")
        if ref is not None and not hits:
            known = ", ".join(n.picked() for n in nodes)
            raise UsageError(f"--uid {key!r}: no plan operator is {key}; the plan's operators: {known}")
