"""Does the plan describe this checkpoint? Checked only where the binding is certain.

An operator bound by Flink's own id (a job vertex id, a uid hash, the deterministic stream-graph hash,
or a name stored in the checkpoint) whose parallelism differs from its plan vertex means the plan is
of another job or another version of it: an error. When nothing of the plan binds, the plan may be of
another job, or its uids differ from its names: a warning saying what would make it certain.
"""

from __future__ import annotations

from spillway.inspect.topology import BoundVertex
from spillway.model.checkpoint import Checkpoint, OperatorState


def plan_mismatches(bound: dict[str, BoundVertex], checkpoint: Checkpoint) -> list[tuple[str, str, str]]:
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
                        op.label(),
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
