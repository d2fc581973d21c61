"""Will Flink restore this checkpoint into this job? Flink's restore-time checks, answered offline.

Each check is one Flink refuses a restore on (docs/format/restore-checks.md, per release line): state of an
operator the new job lacks (``Checkpoints.loadAndValidateCheckpoint``), max parallelism changed or below the new
parallelism (``Checkpoints`` / ``StateAssignmentOperation``), channel state of an exchange that is now chained or
pointwise and rescaled (``StateAssignmentOperation``, FLINK-38267), and the FLIP-147 finished-state rules
(``VertexFinishedStateChecker``, :mod:`spillway.inspect.finished`). Where the plan cannot tell which checkpoint
operator a plan operator is, the checks that depend on it answer "unknown", never "restorable".

Everything this module needs from the plan-to-checkpoint binding comes through :func:`place_operators`, the one
adapter over :mod:`spillway.inspect.topology` (so the binding can be replaced in one place).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from spillway.flink import operator_ids
from spillway.inspect.restore_checks import (
    FAILS,
    LOSS,
    NOTE,
    OK,
    PASSED,
    REFUSED,
    UNKNOWN,
    WARNING,
    FlinkDoes,
    NewVertex,
    Placement,
    PreflightLoss,
    Reason,
    Settings,
    Verdict,
    binding_notes,
    channel_facts,
    channel_state,
    files,
    finished_state,
    keyed_exchange,
    known_bugs,
    mapping,
    max_parallelism,
    vertex_table,
)
from spillway.inspect.topology import JobBinding, Topology, bind_job, operator_binding
from spillway.model.checkpoint import CheckpointMetadata
from spillway.storage.load import LoadedCheckpoint

__all__ = [
    "FAILS",
    "LOSS",
    "NOTE",
    "OK",
    "REFUSED",
    "SCHEMA",
    "UNKNOWN",
    "WARNING",
    "FlinkDoes",
    "PreflightAnswer",
    "PreflightLoss",
    "PreflightVerdict",
    "Reason",
    "Settings",
    "Verdict",
    "check",
]

# /2: verdicts "fails" and "loss", each reason's "flink_does", the answer's "verdict" and "loss" section
SCHEMA = "spillway.preflight/2"


class PreflightVerdict(str, Enum):
    """The whole answer: Flink restores (yes), refuses or fails (no), restores but drops data, or unknown."""

    YES = "yes"
    NO = "no"
    RESTORES_WITH_LOSS = "restores-with-loss"
    UNKNOWN = "unknown"


@dataclass
class PreflightAnswer:
    reasons: list[Reason]
    vertices: list[dict[str, Any]]  # the new job's vertices and what of the checkpoint each gets
    loss: PreflightLoss = field(default_factory=PreflightLoss)

    @property
    def restorable(self) -> bool | None:
        """Whether Flink restores and the job keeps running (data dropped or not: see ``answer``)."""
        verdicts = {r.verdict for r in self.reasons}
        if REFUSED in verdicts or FAILS in verdicts:
            return False
        return None if UNKNOWN in verdicts else True

    @property
    def answer(self) -> PreflightVerdict:
        restorable = self.restorable
        if restorable is False:
            return PreflightVerdict.NO
        if restorable is None:
            return PreflightVerdict.UNKNOWN
        return (
            PreflightVerdict.RESTORES_WITH_LOSS
            if any(r.verdict == LOSS for r in self.reasons)
            else PreflightVerdict.YES
        )


# ------------------------------------------------------------------------------------------------- the adapter


def place_operators(topology: Topology, checkpoint: CheckpointMetadata, job: JobBinding | None = None) -> Placement:
    """Where each checkpoint operator sits in the new job, as far as Flink's own ids tell.

    The only use of the plan-to-checkpoint binding (:func:`spillway.inspect.topology.operator_binding`): a plan
    operator whose Flink id is computed (uid hash, generated hash, vertex id, stored name) is placed, or known
    to be absent from the checkpoint; any other is listed in ``unknown`` (or ``guessed``)."""
    vertices: dict[str, NewVertex] = {}
    node_vertex: dict[int, tuple[str, int]] = {}
    for key, v in topology.vertices.items():
        vertices[key] = NewVertex(
            key,
            v.label(),
            v.parallelism,
            max(len(v.names), len(v.node_ids), 1),
            [(e.upstream, e.gate, e.ship_strategy) for e in v.inputs],
            [(e.downstream, i, e.ship_strategy) for i, e in enumerate(v.outputs)],
            # the job's own graph (--job) knows the max parallelism it sets; a plan JSON does not
            max_parallelism=v.max_parallelism,
            max_parallelism_known=topology.max_parallelism_known,
        )
        for pos, node in enumerate(v.node_ids):
            node_vertex[node] = (key, pos)
        vertices[key].leaves = _chain_leaves(topology, key)
    where: dict[str, tuple[str, int]] = {}
    unknown: list[str] = []
    guessed: list[str] = []
    assumed: dict[str, str] = {}
    binding = job.operators if job is not None else operator_binding(topology, checkpoint)
    for b in binding.operators if binding is not None else ():
        if b.node_id is not None and b.node_id in node_vertex:
            spot: tuple[str, int] | None = node_vertex[b.node_id]
        elif b.vertex_id is not None and b.position is not None and b.vertex_id.lower() in vertices:
            spot = (b.vertex_id.lower(), b.position)
        else:
            spot = None
        if b.operator_id is None or spot is None:
            unknown.append(f"{b.name!r}: {b.reason}")
        elif topology.job_graph is not None and spot[1] == 0 and spot[0] != b.operator_id.lower():
            # a job-graph plan's vertex id is its head operator's id: Flink's own word for the new job
            unknown.append(
                f"{b.name!r}: bound to {b.operator_id} ({b.reason}), but the job-graph plan says the head of its "
                f"vertex has id {spot[0]}: the uid given is not the new job's"
            )
        elif b.method == "elimination":
            guessed.append(f"{b.name!r}: {b.reason}")
        elif b.in_checkpoint:
            where[b.operator_id] = spot
            confirmed = topology.job_graph is not None and spot[1] == 0  # a head's id is its vertex's id
            if _by_name_only(b, topology) and not confirmed:
                assumed[b.operator_id] = b.name
    if binding is None:
        unknown.append("the plan could not be bound to the checkpoint at all")
    old = {key: op.parallelism for op in checkpoint.operators for key, _ in [where.get(op.operator_id, ("", 0))] if key}
    return Placement(vertices, where, unknown, guessed, old, assumed)


def _by_name_only(b: operator_ids.BoundOperator, topology: Topology) -> bool:
    """Bound by a name match, not by an id of the new job: the checkpoint's stored name (2.x), or a uid guessed
    from the name. Ids the new job names (a job-graph vertex id, a generated id computed from the new plan, a uid
    given or read from the job's jar) are not assumptions."""
    if b.method == operator_ids.STORED_NAME:
        return True
    return b.method == operator_ids.UID_HASH and topology.uids.get(b.name) != b.uid


def _chain_leaves(topology: Topology, key: str) -> list[int] | None:
    """Positions (head = 0, plan order) of the chain's operators that chain to nothing further."""
    v = topology.vertices[key]
    if topology.job_graph is not None and v.vertex_id is not None:
        try:
            parents = topology.job_graph.vertex(v.vertex_id).parents
        except (KeyError, LookupError, ValueError):
            return None
        return [i for i in range(len(parents)) if i not in set(parents)]
    if topology.stream_graph is not None and v.node_ids:
        inside = set(v.node_ids)
        feeding = {e.source for e in topology.stream_graph.edges if e.source in inside and e.target in inside}
        return [i for i, n in enumerate(v.node_ids) if n not in feeding]
    return None


def check(
    topology: Topology,
    checkpoint: CheckpointMetadata,
    settings: Settings | None = None,
    loaded: LoadedCheckpoint | None = None,
) -> PreflightAnswer:
    """``loaded`` (the same checkpoint with its files) lets the checks that depend on channel-state bytes read them
    (where a dropped operator's in-flight data cuts a record); without it they answer unknown."""
    settings = settings or Settings()
    # The new job's plan: only Flink's own ids bind it to the checkpoint (no deduction that assumes the job that
    # wrote the checkpoint, no chains from the checkpoint's evidence).
    topology = topology.as_new_job()
    job = bind_job(topology, checkpoint)  # once: placement, the FLIP-147 verdict and the files check share it
    place = place_operators(topology, checkpoint, job)
    facts = channel_facts(loaded) if loaded is not None else None
    loss = PreflightLoss()
    reasons: list[Reason] = binding_notes(place)
    for name, found in (
        ("operator-mapping", mapping(place, checkpoint, settings, facts, loss)),
        ("max-parallelism", max_parallelism(place, checkpoint, settings)),
        ("channel-state", channel_state(place, checkpoint, settings, facts, loss)),
        ("keyed-exchange", keyed_exchange(place, checkpoint)),
        ("finished-state", finished_state(topology, checkpoint, job)),
    ):
        reasons += found or [Reason(name, OK, PASSED[name])]
    if loaded is not None:
        reasons += files(loaded, place, settings, job.names) or [Reason("files", OK, PASSED["files"])]
    reasons += known_bugs(checkpoint, settings)
    return PreflightAnswer(reasons, vertex_table(place, checkpoint), loss)


def to_doc(result: PreflightAnswer, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "verdict": result.answer.value,
        "restorable": result.restorable,
        "loss": result.loss.to_doc(),
        "reasons": [r.to_doc() for r in result.reasons],
        "vertices": result.vertices,
    }
    doc |= extra or {}
    return doc


# ------------------------------------------------------------------------------------------------- plan changes


def find_vertex(topology: Topology, name: str) -> str:
    """A vertex of the plan by key (job-vertex id / stream node id of the head), any name the plan shows for one of
    its operators, or given uid; a name operators of several vertices carry is refused (``NAME#NODE`` picks one)."""
    from spillway.inspect.plan_names import vertex_nodes
    from spillway.inspect.topology import PlanError

    uid_names = {uid: n for n, uid in topology.uids.items()}
    hits = [key for key, v in topology.vertices.items() if name in (key, v.vertex_id)]
    if not hits:
        # any name the plan shows for an operator (its name, description, SQL's Kind[N], NAME#REF), or a given uid
        by_name = vertex_nodes(topology, name)
        if by_name is None and name in uid_names:
            by_name = vertex_nodes(topology, uid_names[name])
        hits = sorted(by_name or ())
    if len(hits) == 1:
        return hits[0]
    known = ", ".join(sorted(v.label() for v in topology.vertices.values()))
    raise PlanError(
        f"no vertex {name!r} in the plan (vertex id, operator name, NAME#NODE or given uid); vertices: {known}"
    )


def with_parallelism(topology: Topology, parallelism: dict[str, int]) -> Topology:
    """The plan with the named vertices' parallelism changed (``-p VERTEX=N``), same flavour and uids."""
    return topology.rescaled({find_vertex(topology, k): n for k, n in parallelism.items()}, "plan")


def checkpoint_parallelism_plan(topology: Topology, result: PreflightAnswer) -> tuple[Topology, dict[str, int]] | None:
    """The plan at the checkpoint's parallelism and the new parallelism per vertex key, when the new job is the
    checkpoint's job rescaled (every vertex with operators in the checkpoint has one old parallelism); else None."""
    old: dict[str, int] = {}
    new: dict[str, int] = {}
    for row in result.vertices:
        if row["checkpoint_parallelism"] is None:
            if row["operators"]:
                return None
            continue
        if row["checkpoint_parallelism"] != row["parallelism"]:
            old[row["key"]] = row["checkpoint_parallelism"]
            new[row["key"]] = row["parallelism"]
    if not new:
        return None
    return topology.rescaled(old, "plan"), new


def forecast_reasons(forecast: dict[str, Any]) -> list[Reason]:
    """What the restore forecast (``spillway.rescale.forecast``) says the recovery will need, as reasons: gates
    recovering more buffers than they get (the stalls of FLINK-22946 / FLINK-39519), and the bytes Flink's
    restore-time filtering reads, which an offline ``spillway rescale`` first avoids."""
    flink = forecast.get("flink", {})
    out: list[Reason] = []
    if flink.get("over_budget"):
        out.append(
            Reason(
                "recovery",
                WARNING,
                f"{flink['over_budget']} gate(s) recover more network buffers than the gate gets "
                "(see the forecast): risk of a stalled or spilling recovery",
                flink_issue="FLINK-22946",
            )
        )
    if flink.get("bytes_filtered"):
        out.append(
            Reason(
                "recovery",
                NOTE,
                f"Flink will read {flink['bytes_read']} bytes of channel state over {flink['virtual_channels']} "
                f"virtual channels and pass {flink['bytes_filtered']} of them through its record filter (records "
                "of old subtasks that now feed several new ones); a `spillway rescale` first writes the channel "
                "state at the new parallelism: Flink then restores it as-is, without virtual channels or filtering",
            )
        )
    return out
