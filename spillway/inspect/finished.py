"""FLIP-147 restore checks (docs/format/finished-state.md): what Flink's ``VertexFinishedStateChecker`` would say.

Each job vertex (chain) is classified from its operators' states: FULLY_FINISHED, PARTIALLY_FINISHED
or ALL_RUNNING (an operator missing from the checkpoint counts as running). Flink refuses a restore
when a vertex mixes classifications, when a fully finished vertex has a predecessor that is not fully
finished, or when a partially finished vertex has an all-to-all predecessor that is not fully finished
or a pointwise predecessor that is all running.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spillway.inspect.topology import BoundVertex, Topology, bind, exact_chains
from spillway.model.checkpoint import Checkpoint, OperatorState

FULLY = "FULLY_FINISHED"
PARTIALLY = "PARTIALLY_FINISHED"
RUNNING = "ALL_RUNNING"


@dataclass
class Violation:
    rule: str  # "mixed", "fully-finished-predecessor", "all-to-all-predecessor", "pointwise-predecessor"
    vertex: str
    message: str


@dataclass
class Verdict:
    classification: dict[str, str]  # vertex label -> classification
    violations: list[Violation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Finished operators that could not be placed in any vertex: the verdict may miss a refusal.
    unplaced_finished: list[str] = field(default_factory=list)
    # Vertices whose chain members were not all identified: their classification is from the ones found.
    uncertain_vertices: list[str] = field(default_factory=list)

    @property
    def certain(self) -> bool:
        return not self.unplaced_finished

    @property
    def restorable(self) -> bool:
        return not self.violations


def classify(op: OperatorState | None) -> str:
    if op is None:
        return RUNNING
    if op.fully_finished:
        return FULLY
    return PARTIALLY if any(s.finished for s in op.subtasks) else RUNNING


def chain_operators(b: BoundVertex, checkpoint: Checkpoint) -> tuple[list[OperatorState | None], bool]:
    """The chain's operators as found in the checkpoint; False when only some could be identified."""
    names = b.vertex.names
    found: list[OperatorState | None] = []
    by_name = {o.name: o for o in checkpoint.operators if o.name}
    complete = True
    for i, name in enumerate(names):
        if i == 0 and b.head is not None:
            found.append(b.head)
        elif i == len(names) - 1 and b.tail is not None:
            found.append(b.tail)
        elif name in by_name:
            found.append(by_name[name])
        else:
            complete = False
    if not names:
        found = [b.head]
    elif b.head is None and b.vertex.vertex_id is not None:
        found[0:0] = [None]  # the head holds no state at all: "not in the checkpoint" = running
    return found, complete


def check(topology: Topology, checkpoint: Checkpoint) -> Verdict:
    bound = bind(topology, checkpoint)
    exact = exact_chains(topology, checkpoint)
    verdict = Verdict({})
    classes: dict[str, str] = {}
    placed: set[str] = set()
    for key, b in bound.items():
        if key in exact:
            # Every chain member known by Flink's own id; one absent from the checkpoint is running.
            ops: list[OperatorState | None] = [checkpoint.operator(i) for i in exact[key]]
            complete = True
        else:
            ops, complete = chain_operators(b, checkpoint)
        placed |= {o.operator_id for o in ops if o is not None}
        kinds = {classify(o) for o in ops}
        label = b.vertex.label()
        if not complete:
            verdict.uncertain_vertices.append(label)
            verdict.notes.append(
                f"{label}: not every chained operator could be identified (metadata before V5 "
                "stores no names); classified from the ones found"
            )
        if len(kinds) > 1:
            verdict.violations.append(
                Violation(
                    "mixed",
                    label,
                    f"Can not restore vertex {label} which contain mixed operator finished state: {sorted(kinds)}",
                )
            )
            classes[key] = sorted(kinds)[0]
        else:
            classes[key] = kinds.pop() if kinds else RUNNING
        verdict.classification[label] = classes[key]
    whole_plan_exact = len(exact) == len(bound)
    for op in checkpoint.operators:
        if op.operator_id not in placed and classify(op) != RUNNING:
            if whole_plan_exact:
                # Every operator of the new job is known exactly: this one is not in it. Flink's check
                # looks at the new job's operators only (its state needs --allowNonRestoredState).
                verdict.notes.append(f"{op.label()} ({classify(op)}) is not in the plan: Flink does not check it")
            else:
                verdict.unplaced_finished.append(f"{op.label()} ({classify(op)})")
    if verdict.unplaced_finished:
        verdict.notes.append(
            "cannot tell which vertex holds the finished operator(s) "
            + ", ".join(verdict.unplaced_finished)
            + " (no operator names before metadata V5, no chained-operator ids in plans): if one now sits in a "
            "chain with running operators, Flink refuses the restore"
        )
    for key, b in bound.items():
        label = b.vertex.label()
        kind = classes[key]
        preds: dict[str, bool] = {}  # predecessor -> any all-to-all edge
        for e in b.vertex.inputs:
            preds[e.upstream] = preds.get(e.upstream, False) or e.all_to_all
        for up, all_to_all in preds.items():
            up_kind, up_label = classes[up], bound[up].vertex.label()
            if kind == FULLY and up_kind != FULLY:
                verdict.violations.append(
                    Violation(
                        "fully-finished-predecessor",
                        label,
                        f"fully finished vertex {label} has predecessor {up_label} that is {up_kind}",
                    )
                )
            elif kind == PARTIALLY and all_to_all and up_kind != FULLY:
                verdict.violations.append(
                    Violation(
                        "all-to-all-predecessor",
                        label,
                        f"partially finished vertex {label} is fed by {up_label} ({up_kind}) over an all-to-all edge",
                    )
                )
            elif kind == PARTIALLY and not all_to_all and up_kind == RUNNING:
                verdict.violations.append(
                    Violation(
                        "pointwise-predecessor",
                        label,
                        f"partially finished vertex {label} is fed by all-running {up_label} over a pointwise edge",
                    )
                )
    return verdict
