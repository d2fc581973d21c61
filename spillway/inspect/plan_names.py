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

from collections.abc import Iterable, Mapping

from spillway.errors import UsageError
from spillway.inspect.plan_refs import PlanNode, job_ref, nodes_of, resolve, split_ref
from spillway.inspect.topology import Topology

__all__ = [
    "PlanNode",
    "check_uid_names",
    "job_ref",
    "plan_nodes",
    "resolve_node",
    "shared_name_error",
    "split_ref",
    "vertex_nodes",
]


def plan_nodes(topology: Topology) -> list[PlanNode]:
    """Every operator of the plan, in plan order."""
    return nodes_of(topology.stream_graph, topology.job_graph, topology.vertices)


def resolve_node(topology: Topology, wanted: str, nodes: list[PlanNode] | None = None) -> list[PlanNode]:
    """The plan operators ``wanted`` names (empty: none). ``NAME#REF``/``#REF`` pick one node."""
    return resolve(plan_nodes(topology) if nodes is None else nodes, wanted)


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
