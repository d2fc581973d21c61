"""Does the plan describe this checkpoint? Checked only where the binding is certain.

An operator bound by Flink's own id (a job vertex id, a uid hash, the deterministic stream-graph hash,
or a name stored in the checkpoint) whose parallelism differs from its plan vertex means the plan is
of another job or another version of it: an error. When nothing of the plan binds, the plan may be of
another job, or its uids differ from its names: a warning saying what would make it certain.

A name is not part of Flink's operator id (neither of the uid's hash nor of the generated hash): an operator bound
by the id Flink computes from the plan, whose plan name differs from the name the checkpoint stores (metadata V5+),
is the same operator renamed — Flink restores it by its id. A warning (``plan-renamed``), not a mismatch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from spillway.flink.deduction import compatible
from spillway.inspect.topology import (
    BoundVertex,
    JobBinding,
    Topology,
    bind_job,
    stores_stateless,
)
from spillway.model.checkpoint import CheckpointMetadata, OperatorState


def plan_mismatches(
    bound: dict[str, BoundVertex], checkpoint: CheckpointMetadata, plan_names: Mapping[str, str] | None = None
) -> list[tuple[str, str, str]]:
    """(rule, operator label, message) for every certain mismatch, and one warning if nothing binds."""
    found: list[tuple[str, str, str]] = []
    any_bound = False
    for b in bound.values():
        v = b.vertex
        exact: dict[str, OperatorState] = {o.operator_id: o for o in b.members}
        if v.vertex_id is not None and b.head is not None and b.head.operator_id == v.vertex_id:
            exact[b.head.operator_id] = b.head
        any_bound = any_bound or bool(exact)
        for op in exact.values():
            if op.parallelism != v.parallelism:
                found.append(
                    (
                        "plan-mismatch",
                        op.label(plan_names),
                        f"parallelism {op.parallelism} in the checkpoint, {v.parallelism} in the plan "
                        f"(vertex {v.label()!r}): the plan does not describe this checkpoint",
                    )
                )
    stateful = [o for o in checkpoint.operators if any(s.has_state() for s in o.subtasks)]
    vertex_ids = [b.vertex.vertex_id for b in bound.values() if b.vertex.vertex_id]
    # Old releases (1.10, 1.12) leave stateless operators out of _metadata: then every chain head may be
    # absent from a sound checkpoint, and only a checkpoint that does store stateless operators is certain.
    stores_stateless = len(stateful) < len(checkpoint.operators)
    if vertex_ids and stateful and stores_stateless and not any(checkpoint.operator(i) for i in vertex_ids):
        # A job-graph plan names its chains by Flink's own ids: none of them here is certain.
        found.append(
            (
                "plan-mismatch",
                "-",
                "none of the plan's job vertex ids is an operator of this checkpoint: the plan is of another job",
            )
        )
    elif not any_bound and stateful and bound:
        found.append(
            (
                "plan-unbound",
                "-",
                "no operator of the plan is in this checkpoint by Flink's own ids: the plan may be of another "
                "job, or its operators' uids differ from their names (give them: --uid NAME=UID)",
            )
        )
    return found


#: Binding methods by Flink's own id or stored name: certain enough to contradict the plan.
DIRECT = frozenset({"stored-name", "uid-hash", "deterministic-hash", "hash-input"})
#: Those whose id Flink computes from the plan (a uid's hash, the generated hash): no name goes into them.
BY_FLINKS_ID = frozenset({"uid-hash", "deterministic-hash", "hash-input"})


def _renamed(name: str, operator_id: str | None, method: str, stored: str, stored_uid: str | None) -> str:
    uid = f" (uid {stored_uid!r}, as the checkpoint stores it)" if stored_uid and method == "uid-hash" else ""
    return (
        f"{name!r} is {operator_id} by {method}{uid}, which the checkpoint stores with the name {stored!r}: "
        "the same operator renamed; Flink restores state by operator id, not by name"
    )


def state_mismatches(
    topology: Topology, checkpoint: CheckpointMetadata, job: JobBinding | None = None
) -> list[tuple[str, str, str]]:
    """Certain contradictions between the plan and the state of operators bound by Flink's own ids (not by
    deduction, which only ever picks what fits): keyed state behind no keyed edge, a source reader's state on an
    operator that is not a source, input channel state on a gate the operator does not have; on metadata V5+
    (every operator stored with its name) a plan operator the checkpoint does not have. And, as a warning, a
    plan no assignment of the remaining operators fits."""
    job = job or bind_job(topology, checkpoint)  # ``job``: the binding, when the caller holds it
    binding, plan_names = job.operators, job.names
    graph = topology.stream_graph
    if binding is None:
        return []
    found: list[tuple[str, str, str]] = []
    facts = job.facts  # the evidence the binding used, not read again
    for b in binding.operators:
        if graph is None or b.node_id is None or not b.exact or b.method not in DIRECT:
            continue
        f = facts.get(b.operator_id or "")
        if f is None:
            continue
        node = graph.node(b.node_id)
        why = compatible(graph, node, replace(f, name=None), forward_keyed=True)
        if why is None and f.name is not None and f.name != node.name:
            if b.method in BY_FLINKS_ID:
                found.append(("plan-renamed", b.name, _renamed(b.name, b.operator_id, b.method, f.name, f.uid)))
                continue
            why = f"the checkpoint stores the name {f.name!r}"
        if why is not None:
            found.append(
                (
                    "plan-mismatch",
                    b.name,
                    f"{b.name!r} is {b.operator_id} by {b.method}, but {why}: the plan does not describe this "
                    "checkpoint",
                )
            )
    # Keyed state lives on an operator whose input is keyed: a vertex fed only by other edges (or by none) cannot
    # hold it. Checked per vertex, so job-graph plans are covered too (FORWARD admitted: reinterpretAsKeyedStream).
    seen = {m[1] for m in found if m[0] == "plan-mismatch"}
    for bv in job.vertices.values():
        keyed_input = any(e.partitioner.is_keyed or e.partitioner.is_forward for e in bv.vertex.inputs)
        for op in bv.members:
            if keyed_input or op.label(plan_names) in seen:
                continue
            if any(s.managed_keyed_state or s.raw_keyed_state for s in op.subtasks):
                inputs = ", ".join(sorted({e.ship_strategy for e in bv.vertex.inputs})) or "none"
                found.append(
                    (
                        "plan-mismatch",
                        op.label(plan_names),
                        f"{op.label(plan_names)} holds keyed state, but the plan feeds its vertex "
                        f"{bv.vertex.label()!r} by no keyed edge (inputs: {inputs}): the plan does not describe this "
                        "checkpoint",
                    )
                )
    if checkpoint.format_version >= 5 and stores_stateless(checkpoint):
        names = {o.name for o in checkpoint.operators if o.name}
        for b in binding.operators:
            if not b.exact and b.name not in names and names:
                found.append(
                    (
                        "plan-mismatch",
                        b.name,
                        f"the plan has {b.name!r} and the checkpoint, which stores every operator with its name "
                        "(metadata V5+), does not: the plan is of another job",
                    )
                )
    if binding.solutions == 0:
        found.append(("plan-unbound", "-", next((n for n in binding.notes if n.startswith("no assignment")), "")))
    return found
