"""FLIP-147 restore checks (docs/format/finished-state.md): what Flink's ``VertexFinishedStateChecker`` would say.

Each job vertex (chain) is classified from its operators' states: FULLY_FINISHED, PARTIALLY_FINISHED
or ALL_RUNNING (an operator missing from the checkpoint counts as running). Flink refuses a restore
when a vertex mixes classifications, when a fully finished vertex has a predecessor that is not fully
finished, or when a partially finished vertex has an all-to-all predecessor that is not fully finished
or a pointwise predecessor that is all running.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from spillway.flink import operator_ids
from spillway.inspect.topology import BoundVertex, JobBinding, Topology, bind_job, bind_variant
from spillway.model.checkpoint import CheckpointMetadata, OperatorState

#: Most assignments of the open operators tried to see whether they all give one verdict.
MAX_ASSIGNMENTS = 2000

FULLY = "FULLY_FINISHED"
PARTIALLY = "PARTIALLY_FINISHED"
RUNNING = "ALL_RUNNING"
#: Not Flink's: a vertex whose operators are not all known while a finished operator is unplaced — it could be
#: any class, so no predecessor check leans on it and the verdict is uncertain.
UNKNOWN = "UNKNOWN"


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
    # Vertices whose chain members were not all identified (see check() for how they are classified).
    uncertain_vertices: list[str] = field(default_factory=list)
    # Stream-graph plans only: edges Flink may or may not chain (the plan does not show chaining strategies,
    # disableChaining / startNewChain, slot sharing groups) between operators of different finished state:
    # chained they make a vertex with mixed state, unchained they do not, so the verdict hangs on them.
    chain_doubts: list[str] = field(default_factory=list)

    #: With chains in doubt: whether every chaining of them the plan allows gives a refusal (None: not tried).
    refusal_holds: bool | None = None
    #: How many assignments of the operators the binding leaves open were checked, each giving this verdict (0:
    #: the binding alone decided it, or they do not all agree). Then the verdict is certain all the same.
    assignments_agree: int = 0

    @property
    def certain(self) -> bool:
        if self.assignments_agree:
            return True
        return not self.unplaced_finished and not self.chain_doubts and UNKNOWN not in self.classification.values()

    @property
    def restorable(self) -> bool:
        """No refusal found (which is only Flink's answer when :attr:`certain`; see :attr:`answer`)."""
        return not self.violations

    @property
    def answer(self) -> bool | None:
        """Flink's answer: False when it refuses, True when it accepts, None when that cannot be known here (a
        refusal that another chaining the plan allows would not give is no answer)."""
        if self.violations:
            return None if self.refusal_holds is False else False
        return True if self.certain else None


def classify(op: OperatorState | None) -> str:
    if op is None:
        return RUNNING
    if op.fully_finished:
        return FULLY
    return PARTIALLY if any(s.finished for s in op.subtasks) else RUNNING


def chain_operators(b: BoundVertex, checkpoint: CheckpointMetadata) -> tuple[list[OperatorState | None], bool]:
    """The chain's known operators as the one binding has them (None: known to hold no state, so running);
    False when not every member is known."""
    if b.operators:
        known = b.known or [True] * len(b.operators)
        return [o for o, k in zip(b.operators, known, strict=False) if k], b.complete
    return [b.head], b.head is not None or b.vertex.vertex_id is not None


def _chain_doubts(topology: Topology, node_class: dict[int, str]) -> list[str]:
    return [text for _, text in _doubted_edges(topology, node_class)]


def _doubted_edges(topology: Topology, node_class: dict[int, str]) -> list[tuple[tuple[int, int], str]]:
    """Edges of a stream-graph plan that Flink may chain or not, joining operators of different finished state.

    What the plan shows is necessary for chaining (FORWARD, same parallelism, a single input, not BATCH), what
    it does not show can only prevent it (chaining strategy, slot sharing group, chaining disabled), and the
    inferred chains assume Flink's defaults. Where both sides have the same classification the boundary does
    not matter; otherwise it decides between "mixed" and an ordinary predecessor check."""
    sg = topology.stream_graph
    if sg is None:
        return []
    doubts: list[tuple[tuple[int, int], str]] = []
    for e in sg.edges:
        src, dst = sg.node(e.source), sg.node(e.target)
        if not e.kind.is_forward or e.exchange_mode.upper() == "BATCH":
            continue
        if src.parallelism != dst.parallelism or len(sg.in_edges(dst.id)) != 1:
            continue
        if dst.chaining_strategy in ("NEVER", "HEAD") or src.chaining_strategy == "NEVER":
            continue  # known not to chain
        a, b = node_class.get(src.id), node_class.get(dst.id)
        if a is not None and b is not None and a != b:
            doubts.append(((e.source, e.target), f"{src.name} ({a}) -> {dst.name} ({b})"))
    return doubts


def check(topology: Topology, checkpoint: CheckpointMetadata, job: JobBinding | None = None) -> Verdict:
    """Flink's FLIP-147 verdict for restoring ``checkpoint`` into the job of ``topology``. When the binding leaves
    operators open, every assignment of them the checkpoint's evidence allows is tried: if all give one answer
    and the same violations, that is Flink's answer, whichever assignment is the job's. ``job``: the binding of
    ``topology`` to ``checkpoint`` when the caller holds it."""
    job = job or bind_job(topology, checkpoint)
    verdict = _check(topology, checkpoint, job.vertices, job.operators)
    if verdict.violations and verdict.chain_doubts and job.operators is not None:
        verdict.refusal_holds = _refused_however_chained(job.view or topology, checkpoint, job.operators)
    if verdict.certain or job.operators is None:
        return verdict
    agreed: Verdict | None = None
    count = 0
    for variant in _assignments(job.operators):
        count += 1
        if count > MAX_ASSIGNMENTS:
            return verdict
        view, vertices, _ = bind_variant(topology, checkpoint, variant)
        one = _check(view, checkpoint, vertices, variant)
        if not one.certain:
            return verdict  # e.g. a chain Flink may cut or not: the assignment is not all that is open
        if agreed is None:
            agreed = one
        elif (one.answer, _rules(one)) != (agreed.answer, _rules(agreed)):
            return verdict
    if agreed is None:
        return verdict
    classification = {
        label: kind if kind != UNKNOWN else agreed.classification.get(label, UNKNOWN)
        for label, kind in verdict.classification.items()
    }
    notes = [
        # the doubts every assignment settled: where the finished operators sit, the classes that hung on it
        *(n for n in verdict.notes if "its class is unknown" not in n and not n.startswith(_UNPLACED_NOTE)),
        f"the binding leaves operators open, and each of the {count} assignments the checkpoint's evidence allows "
        "gives this verdict: it is Flink's whichever is the job's",
    ]
    return replace(
        agreed,
        classification=classification,
        notes=notes,
        uncertain_vertices=verdict.uncertain_vertices,
        assignments_agree=count,
    )


#: Most chain alternatives (2 ** doubted edges) tried to see whether a refusal holds however Flink chained.
MAX_CHAIN_ALTERNATIVES = 64


def _refused_however_chained(
    topology: Topology, checkpoint: CheckpointMetadata, binding: operator_ids.Binding
) -> bool | None:
    """Whether Flink refuses under every chaining of the edges in doubt (each chained or cut): True; False when
    some chaining gives no refusal; None when there are too many to try. A refusal found with the chains assumed
    is not Flink's answer when another chaining the plan allows restores."""
    sg = topology.stream_graph
    if sg is None or topology.source_doc is None:
        return None
    node_class: dict[int, str] = {}
    for b in bind_variant(topology, checkpoint, binding)[1].values():
        if b.complete:
            node_class.update({n: classify(o) for n, o in zip(b.vertex.node_ids, b.operators, strict=False)})
    doubted = [e for e, _ in _doubted_edges(topology, node_class)]
    if not doubted or 2 ** len(doubted) > MAX_CHAIN_ALTERNATIVES:
        return None
    vertex_of = {n: key for key, v in topology.vertices.items() for n in v.node_ids}
    chained = {(e.source, e.target) for e in sg.edges if vertex_of.get(e.source) == vertex_of.get(e.target)}
    for states in itertools.product((True, False), repeat=len(doubted)):
        alternative = set(chained)
        for edge, on in zip(doubted, states, strict=True):
            if on:
                alternative.add(edge)
            else:
                alternative.discard(edge)
        view, vertices, _ = bind_variant(topology, checkpoint, binding, alternative)
        if not _check(view, checkpoint, vertices, binding).violations:
            return False
    return True


_UNPLACED_NOTE = "cannot tell which vertex holds the finished operator(s) "


def _rules(v: Verdict) -> frozenset[tuple[str, str]]:
    return frozenset((x.rule, x.vertex) for x in v.violations)


def _assignments(binding: operator_ids.Binding) -> Iterator[operator_ids.Binding]:
    """The binding with its open operators (unbound or indistinct, with candidates) bound each way their candidates
    allow: every checkpoint id left to one operator, every one left taken. A superset of the assignments the
    structural step found consistent (it also weighed pairs of neighbours), so agreement over it is agreement over
    them."""
    ops = list(binding.operators)
    open_at = [
        i
        for i, b in enumerate(ops)
        if b.method in (operator_ids.UNBOUND, operator_ids.INDISTINCT) and b.candidates and not b.exact
    ]
    if not open_at:
        return
    left = set(binding.unclaimed)
    for values in itertools.product(*(ops[i].candidates for i in open_at)):
        used = [v for v in values if v != "-"]
        if len(used) != len(set(used)) or not left <= set(used):
            continue
        variant = list(ops)
        for i, v in zip(open_at, values, strict=True):
            variant[i] = replace(
                ops[i],
                method=operator_ids.DEDUCED,
                operator_id=None if v == "-" else v,
                in_checkpoint=v != "-",
                exact=v != "-",
                candidates=(),
            )
        yield replace(binding, operators=tuple(variant), unclaimed=())


def _check(
    topology: Topology,
    checkpoint: CheckpointMetadata,
    bound: dict[str, BoundVertex],
    binding: operator_ids.Binding | None,
) -> Verdict:
    exact = {key: b for key, b in bound.items() if b.complete}
    verdict = Verdict({})
    classes: dict[str, str] = {}
    placed: set[str] = set()
    found: dict[str, tuple[list[OperatorState | None], bool]] = {}
    node_class: dict[int, str] = {}
    mixed: set[str] = set()
    for key, b in bound.items():
        if key in exact:
            # Every chain member known; one absent from the checkpoint is running.
            ops: list[OperatorState | None] = list(b.operators)
            found[key] = (ops, True)
            node_class.update({n: classify(o) for n, o in zip(b.vertex.node_ids, ops, strict=False)})
        else:
            found[key] = chain_operators(b, checkpoint)
        placed |= {o.operator_id for o in found[key][0] if o is not None}
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
            _UNPLACED_NOTE
            + ", ".join(verdict.unplaced_finished)
            + " (no operator names before metadata V5, no chained-operator ids in plans): if one now sits in a "
            "chain with running operators, Flink refuses the restore"
        )
    # Twin vertices (same names) keep one entry each in the classification: keyed by label and vertex key.
    twins = {lb for lb, n in Counter(b.vertex.label() for b in bound.values()).items() if n > 1}
    for key, b in bound.items():
        ops, complete = found[key]
        kinds = {classify(o) for o in ops}
        label = b.vertex.label()
        entry = f"{label} (vertex {key})" if label in twins else label
        if not complete:
            verdict.uncertain_vertices.append(entry)
            if verdict.unplaced_finished:
                verdict.notes.append(
                    f"{label}: not every chained operator could be identified, and a finished operator could be "
                    "one of them: its class is unknown"
                )
                classes[key] = UNKNOWN
                verdict.classification[entry] = UNKNOWN
                continue
            else:
                # Flink gives every operator of a finished task a finished state in the checkpoint, and an
                # operator id sits in one vertex only: with every finished operator placed elsewhere, an
                # operator not identified has no state or running state - Flink counts it ALL_RUNNING.
                kinds.add(RUNNING)
                verdict.notes.append(
                    f"{label}: chained operator(s) not found in the checkpoint count as running "
                    "(every finished operator of the checkpoint is placed elsewhere)"
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
            mixed.add(key)
        else:
            classes[key] = kinds.pop() if kinds else RUNNING
        verdict.classification[entry] = classes[key]
    if topology.stream_graph is not None:
        by_node = {
            o.node_id: o.operator_id
            for o in (binding.operators if binding else [])
            if o.exact and o.node_id is not None and o.operator_id is not None
        }
        for b in bound.values():
            for n in b.vertex.node_ids:
                if n in node_class:
                    continue
                if n in by_node:
                    node_class[n] = classify(checkpoint.operator(by_node[n]))
                elif not verdict.unplaced_finished:
                    node_class[n] = RUNNING  # not identified, and no finished operator left to be it
    verdict.chain_doubts = _chain_doubts(topology, node_class)
    if verdict.chain_doubts:
        verdict.notes.append(
            "the stream-graph plan does not show where Flink breaks chains (disableChaining, startNewChain, slot "
            "sharing groups); whether these operators share a vertex decides the verdict: "
            + "; ".join(verdict.chain_doubts)
            + " (give the job-graph plan to be sure)"
        )
    for key, b in bound.items():
        label = b.vertex.label()
        kind = classes[key]
        preds: dict[str, bool] = {}  # predecessor -> any all-to-all edge
        for e in b.vertex.inputs:
            preds[e.upstream] = preds.get(e.upstream, False) or e.all_to_all
        if key in mixed or kind == UNKNOWN:
            continue  # mixed: Flink fails computing this vertex's state first; unknown: nothing to lean on
        for up, all_to_all in preds.items():
            up_kind, up_label = classes[up], bound[up].vertex.label()
            if up in mixed or up_kind == UNKNOWN:
                continue  # likewise: the predecessor's state cannot be computed, or is not known here
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
