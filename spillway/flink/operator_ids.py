"""Flink's operator ids, computed the way Flink computes them, and binding plan operators to checkpoint ids.

Before checkpoint metadata V5 (Flink < 2.0) ``_metadata`` knows operators only by their 16-byte OperatorID.
Flink derives that id from the job (``StreamGraphHasherV2``):

* with a uid: MurmurHash3 x64-128 (seed 0) of the uid's UTF-8 bytes — :func:`uid_hash`;
* without: a hash of the node's breadth-first position in the stream graph, its chainable outputs and its
  inputs' ids — :func:`deterministic_ids`.

:func:`bind` uses these rules (plus names stored by V5+, job-vertex ids, and elimination) to say which checkpoint
operator each plan operator is, and how sure that is. The facts, with the release each was read from:
``docs/format/operator-ids.md``. This module sits at the bottom layer: plain data in, plain data out.
"""

from __future__ import annotations

import functools
import itertools
import re
import struct
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import mmh3

from spillway.flink import deduction
from spillway.flink.chaining import (
    RELEASE_RULES,
    ChainRules,
    chain_predicate,
    hasher_rules,
    infer_chains,
    release_for_format_version,
    vertex_operator_order,
)
from spillway.flink.stream_graph import (
    JobGraphPlan,
    JobVertexPlan,
    StreamEdge,
    StreamGraph,
    StreamNode,
    labels_of,
    parse_job_graph_plan,
    parse_stream_plan,
)

__all__ = [
    "DETERMINISTIC_HASH",
    "ELIMINATION",
    "EXACT_METHODS",
    "METHODS",
    "RELEASE_RULES",
    "STORED_NAME",
    "UID_HASH",
    "UNBOUND",
    "VERTEX_ID",
    "Binding",
    "BoundOperator",
    "ChainRules",
    "JobGraphPlan",
    "StreamEdge",
    "StreamGraph",
    "StreamNode",
    "bind",
    "chained_edges_from_job_graph",
    "deterministic_ids",
    "hasher_rules",
    "infer_chains",
    "node_ref",
    "parse_job_graph_plan",
    "parse_stream_plan",
    "uid_candidates",
    "uid_hash",
    "vertex_operator_order",
]

STORED_NAME = "stored-name"
UID_HASH = "uid-hash"
DETERMINISTIC_HASH = "deterministic-hash"
VERTEX_ID = "vertex-id"
#: Flink's own id, taken from the job's graph as Flink built it from the job's jar (nothing computed here).
FLINK_ID = "flink-id"
ELIMINATION = "elimination"
UNBOUND = "unbound"
METHODS = (
    FLINK_ID,
    STORED_NAME,
    UID_HASH,
    DETERMINISTIC_HASH,
    "hash-input",
    VERTEX_ID,
    "deduced",
    "indistinct",
    ELIMINATION,
    UNBOUND,
)
#: Methods whose id is Flink's own (stored, or computed by Flink's rule): exact when the id is in the checkpoint.
EXACT_METHODS = frozenset(
    {FLINK_ID, STORED_NAME, UID_HASH, DETERMINISTIC_HASH, VERTEX_ID, deduction.HASH_INPUT, deduction.DEDUCED}
)
HASH_INPUT = deduction.HASH_INPUT
DEDUCED = deduction.DEDUCED
INDISTINCT = deduction.INDISTINCT
OperatorFacts = deduction.OperatorFacts

_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_FORWARD_KEYED = "keyed state behind a FORWARD edge was admitted (reinterpretAsKeyedStream)"


# --------------------------------------------------------------------------------------------------- hashing


def uid_hash(uid: str) -> str:
    """Operator id of an operator with ``uid`` (``StreamGraphHasherV2.generateUserSpecifiedHash``): Guava
    ``murmur3_128(0)`` over the UTF-8 bytes; the 16 digest bytes (h1 then h2, little-endian) are the id."""
    return mmh3.hash_bytes(uid.encode("utf-8"), 0).hex()


def _node_hash(position: int, chained_outputs: int, inputs: Sequence[bytes]) -> bytes:
    # Guava Hasher.putInt writes 4 little-endian bytes; the node's position is put once, and once more per
    # chainable out-edge. Then, per in-edge in order: hash[j] = (byte) (hash[j] * 37 ^ input[j]).
    digest = bytearray(mmh3.hash_bytes(struct.pack("<i", position) * (1 + chained_outputs), 0))
    for other in inputs:
        for j in range(16):
            digest[j] = ((digest[j] * 37) ^ other[j]) & 0xFF
    return bytes(digest)


@dataclass(frozen=True, slots=True)
class _Traversal:
    ids: dict[int, bytes | None]  # None: user-specified id that is not known
    positions: dict[int, int]
    unhashed: tuple[int, ...]


def _traverse(
    graph: StreamGraph,
    rules: ChainRules,
    fixed: Mapping[int, bytes | None],
    chained_edges: Collection[tuple[int, int]] | None = None,
    out_order: Mapping[int, Sequence[StreamEdge]] | None = None,
) -> _Traversal:
    """``StreamGraphHasherV2.traverseStreamGraphAndGenerateHashes``. ``fixed`` holds the nodes with a
    user-specified id (uid): their id (``None`` if the uid is not known) is taken as is, whether their inputs
    are hashed yet or not — as Flink does. Every other node gets the deterministic hash. ``out_order``: node ->
    its out-edges in the order Flink visits them, where it differs from the graph's (a plan does not print it)."""
    order = out_order or {}
    chainable = chain_predicate(graph, rules, chained_edges)
    ids: dict[int, bytes | None] = {}
    positions: dict[int, int] = {}
    sources = graph.source_ids()
    queue: deque[int] = deque(sources)
    visited: set[int] = set(sources)
    while queue:
        nid = queue.popleft()
        done = True
        if nid in fixed:
            positions[nid] = len(ids)
            ids[nid] = fixed[nid]
        elif all(e.source in ids for e in graph.in_edges(nid)):
            position = len(ids)
            inputs = [i for i in (ids[e.source] for e in graph.in_edges(nid)) if i is not None]
            n_chained = sum(1 for e in graph.out_edges(nid) if chainable(e))
            positions[nid] = position
            # an input with an unknown (user-specified) id makes this id unknown too
            known = len(inputs) == len(graph.in_edges(nid))
            ids[nid] = _node_hash(position, n_chained, inputs) if known else None
        else:
            done = False  # revisited once another input is hashed
        if done:
            for e in order.get(nid, graph.out_edges(nid)):
                if e.target not in visited:
                    visited.add(e.target)
                    queue.append(e.target)
        else:
            visited.discard(nid)
    return _Traversal(ids, positions, tuple(n.id for n in graph.nodes if n.id not in ids))


def _rules(release: str | None, format_version: int | None = None) -> ChainRules:
    if release is not None:
        return hasher_rules(release)
    if format_version is not None:
        return hasher_rules(release_for_format_version(format_version))
    return RELEASE_RULES[-1]


def deterministic_ids(
    graph: StreamGraph,
    release: str,
    uids: Mapping[int, str] | None = None,
    *,
    chained_edges: Collection[tuple[int, int]] | None = None,
) -> dict[int, str]:
    """Flink's operator id of every stream node: :func:`uid_hash` for nodes in ``uids`` (node id -> uid; the
    nodes' own :attr:`StreamNode.uid` count too), ``StreamGraphHasherV2``'s deterministic hash otherwise.

    ``chained_edges`` ((source, target) pairs) replaces the release's chaining rules when the actual chains are
    known. Raises ``ValueError`` if a node cannot be reached from a source (Flink would not hash it either), or
    if two uids give the same id (Flink refuses the job).
    """
    given = {n.id: n.uid for n in graph.nodes if n.uid is not None}
    given.update(uids or {})
    fixed: dict[int, bytes | None] = {nid: bytes.fromhex(uid_hash(uid)) for nid, uid in given.items()}
    seen: dict[bytes | None, int] = {}
    for nid, h in fixed.items():
        if h in seen:
            raise ValueError(f"nodes {seen[h]} and {nid} have the same uid hash (Flink: 'Hash collision')")
        seen[h] = nid
    t = _traverse(graph, _rules(release), fixed, chained_edges)
    if t.unhashed:
        raise ValueError(f"stream nodes not reachable from a source: {sorted(t.unhashed)}")
    return {nid: h.hex() for nid, h in t.ids.items() if h is not None}


# ------------------------------------------------------------------------------------------------ uid guesses

_SINK_V2 = re.compile(r"^(?P<sink>.+): (?P<part>Writer|Committer|Global Committer)$")
_SINK_V1_112 = re.compile(r"^Sink (?P<part>Writer|Committer|Global Committer): (?P<sink>.+)$")
_SINK_V1_114 = re.compile(r"^Sink (?P<sink>.+?)(?: (?P<part>Writer|Committer|Global Committer))?$")


def uid_candidates(name: str) -> list[tuple[str, str]]:
    """Plausible uids for an operator called ``name``, most likely first, each with how it was derived. A guess
    is only ever used when its hash is found in the checkpoint.

    * the name itself (``.name(x).uid(x)`` is common);
    * without Flink's prefixes ``Source: `` / ``Sink: `` (legacy sources and SinkFunction sinks);
    * sink operators, from the sink's own uid (guessed = the sink's name), as Flink derives them:
      Sink V2 / FLIP-191 (1.15+) ``NAME: Writer`` has the sink's uid, ``NAME: Committer`` has
      ``Sink Committer: UID``, ``NAME: Global Committer`` has ``Sink UID Global Committer``;
      Sink V1 in 1.12–1.13 ``Sink Writer: NAME`` has the sink's uid, ``Sink Committer: NAME`` /
      ``Sink Global Committer: NAME`` have ``Sink Committer: UID`` / ``Sink Global Committer: UID``;
      Sink V1 in 1.14 ``Sink NAME Writer`` / ``Sink NAME`` have the sink's uid, ``Sink NAME Committer`` /
      ``Sink NAME Global Committer`` have ``Sink UID Committer`` / ``Sink UID Global Committer``.
    """
    out: list[tuple[str, str]] = []

    def add(uid: str, how: str) -> None:
        if uid and all(uid != u for u, _ in out):
            out.append((uid, how))

    add(name, "name")
    for prefix in ("Source: ", "Sink: "):
        if name.startswith(prefix):
            add(name[len(prefix) :], "name without prefix")
    sink_names: list[str] = []
    m = _SINK_V2.match(name)
    if m:
        sink, part = m.group("sink"), m.group("part")
        sink_names = [sink]
        if part == "Writer":
            add(sink, "Sink V2 writer: the sink's uid")
        elif part == "Committer":
            add(f"Sink Committer: {sink}", "Sink V2 committer: 'Sink Committer: UID'")
        else:
            add(f"Sink {sink} Global Committer", "Sink V2 global committer: 'Sink UID Global Committer'")
    m = _SINK_V1_112.match(name)
    if m:
        sink, part = m.group("sink"), m.group("part")
        sink_names.append(sink)
        if part == "Writer":
            add(sink, "Sink V1 (1.12-1.13) writer: the sink's uid")
    m = _SINK_V1_114.match(name)
    if m and not name.startswith("Sink: ") and not _SINK_V1_112.match(name):
        sink, part = m.group("sink"), m.group("part")
        sink_names.append(sink)
        if part in (None, "Writer"):
            add(sink, "Sink V1 (1.14) writer: the sink's uid")
    return out


# --------------------------------------------------------------------------------------- job graph alignment


#: Placements tried, and job vertices (one search level each), before alignment gives up: a job that large is
#: matched by its ids, not by search.
_ALIGN_BUDGET = 200_000
_ALIGN_MAX_VERTICES = 300


def _match_vertex(graph: StreamGraph, vertex: JobVertexPlan, taken: set[int]) -> list[list[int]]:
    """All ways to map ``vertex``'s chain tree onto stream nodes (by label, along edges)."""
    kids: dict[int, list[int]] = {i: [] for i in range(len(vertex.operators))}
    for i, p in enumerate(vertex.parents):
        if p is not None:
            kids[p].append(i)

    def fits(node: StreamNode, label: str) -> bool:
        return node.id not in taken and label in set(labels_of(node))

    def assign(i: int, nid: int, acc: dict[int, int]) -> list[dict[int, int]]:
        acc = {**acc, i: nid}
        results = [acc]
        for k in kids[i]:
            nxt: list[dict[int, int]] = []
            for partial in results:
                used = set(partial.values())
                for e in graph.out_edges(partial[i]):
                    t = graph.node(e.target)
                    if t.id not in used and fits(t, vertex.operators[k]):
                        nxt.extend(assign(k, t.id, partial))
            results = nxt
        return results

    if not vertex.operators:
        return []
    found = []
    for n in graph.nodes:
        if fits(n, vertex.operators[0]):
            for m in assign(0, n.id, {}):
                found.append([m[i] for i in range(len(vertex.operators))])
    return found


def _align(graph: StreamGraph, job: JobGraphPlan) -> dict[str, list[int]] | None:
    """vertex id -> stream node ids (in the vertex's operator order), when exactly one placement of every vertex
    fits the graph; else ``None``. Labels alone do not decide a job of default names (three ``KeyedProcess ->
    Sink: Unnamed`` chains), so a placement must also fit the structure: each vertex at its nodes' parallelism,
    the vertices covering every node once, a chained node fed only by its chain predecessor, and the head's
    in-edges coming from the vertices the plan lists as its inputs, with their partitioners."""
    if len(job.vertices) > _ALIGN_MAX_VERTICES:
        return None
    options: dict[str, list[list[int]]] = {}
    for v in job.vertices:
        fitting = [
            nodes
            for nodes in _match_vertex(graph, v, set())
            if all(graph.node(n).parallelism == v.parallelism for n in nodes)
            and all(len(graph.in_edges(n)) == 1 for n in nodes[1:])
        ]
        if not fitting:
            return None
        options[v.id] = fitting
    order = sorted(job.vertices, key=lambda v: len(options[v.id]))
    solutions: list[dict[str, list[int]]] = []
    budget = [_ALIGN_BUDGET]

    def inputs_fit(v: JobVertexPlan, placed: Mapping[str, list[int]], vertex_of: Mapping[int, str]) -> bool:
        """The head's in-edges match ``v``'s plan inputs (checked once every source vertex is placed)."""
        if not all(inp.source in placed for inp in v.inputs):
            return True
        got = sorted((vertex_of.get(e.source, ""), e.kind.name) for e in graph.in_edges(placed[v.id][0]))
        want = sorted((inp.source, inp.kind.name) for inp in v.inputs)
        return got == want

    def search(i: int, placed: dict[str, list[int]], vertex_of: dict[int, str]) -> None:
        budget[0] -= 1
        if len(solutions) > 1 or budget[0] < 0:
            return
        if i == len(order):
            if len(vertex_of) == len(graph.nodes):
                solutions.append(dict(placed))
            return
        v = order[i]
        for nodes in options[v.id]:
            if any(n in vertex_of for n in nodes):
                continue
            placed[v.id] = nodes
            vertex_of.update((n, v.id) for n in nodes)
            touched = [v, *(w for w in job.vertices if w.id in placed and any(x.source == v.id for x in w.inputs))]
            if all(inputs_fit(w, placed, vertex_of) for w in touched):
                search(i + 1, placed, vertex_of)
            del placed[v.id]
            for n in nodes:
                del vertex_of[n]

    search(0, {}, {})
    if len(solutions) != 1 or budget[0] < 0:
        return None
    return solutions[0]


def chained_edges_from_job_graph(graph: StreamGraph, job: JobGraphPlan) -> set[tuple[int, int]] | None:
    """The (source, target) edges Flink actually chained, read off a job-graph plan of the same job; ``None``
    when the plan cannot be matched onto the graph unambiguously (then fall back to the release rules)."""
    aligned = _align(graph, job)
    if aligned is None:
        return None
    chained: set[tuple[int, int]] = set()
    for v in job.vertices:
        nodes = aligned[v.id]
        for i, p in enumerate(v.parents):
            if p is not None:
                chained.add((nodes[p], nodes[i]))
    return chained


# ------------------------------------------------------------------------------------------------- binding


@dataclass(frozen=True, slots=True)
class BoundOperator:
    """One plan operator and the checkpoint operator it is.

    ``operator_id`` is Flink's id for the operator when known (stored, computed by Flink's rule, a vertex id, or
    by elimination); ``in_checkpoint`` says whether the checkpoint holds that id. ``exact`` = the id is Flink's
    own (``method`` in :data:`EXACT_METHODS`) *and* in the checkpoint. ``reason`` says how, or what is
    missing (for ``unbound``: the uid to pass as ``--uid NAME=UID``).
    """

    name: str
    method: str
    operator_id: str | None
    in_checkpoint: bool
    exact: bool
    reason: str
    uid: str | None = None
    node_id: int | None = None  # stream graph node
    vertex_id: str | None = None  # job vertex holding the operator (job-graph plan)
    position: int | None = None  # index in the vertex's operators, head = 0 (job-graph plan)
    #: Not bound: every checkpoint id it takes in some consistent assignment ("-": none, it is not in the
    #: checkpoint). What does not differ between them is certain all the same.
    candidates: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Binding:
    operators: tuple[BoundOperator, ...]
    #: Checkpoint operator ids no plan operator was bound to.
    unclaimed: tuple[str, ...]
    #: Rules used (release line).
    rules: str
    notes: tuple[str, ...] = ()
    #: Plan operator index (into ``operators``) -> how many of its out-edges Flink chained, read off a generated id.
    chained_outputs: Mapping[int, int] = field(default_factory=dict)
    #: How many assignments of the operators left after the exact methods fit the checkpoint's facts (None: the
    #: structural step did not run; 0: none fits — the plan does not describe this checkpoint as given).
    solutions: int | None = None
    #: The structural step fitted only by admitting keyed state behind a FORWARD edge (reinterpretAsKeyedStream):
    #: weaker evidence, as a plan that lost a keyBy fits the same way.
    forward_keyed: bool = False
    #: The consistent assignments of the operators the structural step left open that it met (operator index into
    #: ``operators`` -> checkpoint id, or "-": not in the checkpoint): the proof that an operator is open — two of
    #: them give it different ids, and each fits every fact the checkpoint gives.
    assignments: tuple[Mapping[int, str], ...] = ()

    def by_name(self, name: str) -> list[BoundOperator]:
        return [b for b in self.operators if b.name == name]

    def id_of(self, name: str) -> str | None:
        """The checkpoint id bound to the operator called ``name`` (``None`` if unbound or ambiguous)."""
        hits = [b for b in self.operators if b.name == name and b.in_checkpoint]
        return hits[0].operator_id if len(hits) == 1 else None


@dataclass(slots=True)
class _Op:
    name: str
    parallelism: int
    node_id: int | None = None
    vertex_id: str | None = None
    position: int | None = None
    method: str = UNBOUND
    operator_id: str | None = None
    in_checkpoint: bool = False
    uid: str | None = None
    reason: str = ""
    tried: tuple[str, ...] = ()
    uid_known: bool | None = None  # True: has a uid; False: has none; None: not known
    candidates: tuple[str, ...] = ()


def node_ref(node_id: int | None, vertex_id: str | None, position: int | None) -> str | None:
    """The form that picks one plan operator where names are shared: ``#7`` (stream node 7), or in a job-graph
    plan ``#cbc357cc.1`` (the vertex id's first eight digits, the chain position)."""
    if node_id is not None:
        return f"#{node_id}"
    if vertex_id is not None and position is not None:
        return f"#{vertex_id[:8]}.{position}"
    return None


def _given(op: _Op, overrides: Mapping[str, str]) -> str | None:
    ref = node_ref(op.node_id, op.vertex_id, op.position)
    if ref is not None and ref in overrides:
        return overrides[ref]
    return overrides.get(op.name)


def _norm(op_id: str) -> str:
    h = op_id.strip().lower().replace("-", "")
    if not _HEX32.match(h):
        raise ValueError(f"not an operator id (32 hex chars): {op_id!r}")
    return h


def bind(
    plan: StreamGraph | JobGraphPlan,
    checkpoint_operator_ids: Iterable[str],
    *,
    stored: Mapping[str, tuple[str | None, str | None]] | None = None,
    uid_overrides: Mapping[str, str] | None = None,
    release: str | None = None,
    format_version: int | None = None,
    job_graph: JobGraphPlan | None = None,
    checkpoint_parallelism: Mapping[str, int] | None = None,
    facts: Sequence[OperatorFacts] | None = None,
    absent_allowed: bool = True,
) -> Binding:
    """Bind every plan operator to the checkpoint operator it is.

    ``plan``: a stream graph (:func:`parse_stream_plan`) or a job-graph plan (:func:`parse_job_graph_plan`);
    ``job_graph``: optionally the job-graph plan of the same job next to a stream graph (gives vertex ids and the
    actual chains). ``stored``: id -> (name, uid) when the metadata stores them (V5+). ``uid_overrides``:
    operator name, or plan node (:func:`node_ref`: ``#7``), -> uid the user knows; the node wins over the name.
    ``release`` (preferred) or ``format_version`` selects the rules.
    ``checkpoint_parallelism``: id -> parallelism from the metadata (narrows elimination).

    ``facts``: what the checkpoint says of each id (:class:`~spillway.flink.deduction.OperatorFacts`); with them
    the structural step enumerates every consistent assignment instead of guessing. ``absent_allowed``: the
    release may leave stateless operators out of ``_metadata`` (1.10, 1.12).

    Order of methods, each only for operators still unbound: ``stored-name`` -> ``uid-hash`` (given uid) ->
    ``vertex-id`` (a job-graph plan's ids outrank every guess) -> ``uid-hash`` (guesses from
    :func:`uid_candidates`) -> ``deterministic-hash`` (Flink's traversal, then the
    search of :func:`spillway.flink.deduction.hash_search`, which also binds the inputs whose ids went into a
    generated id: ``hash-input``) -> ``deduced`` (the only assignment consistent with the checkpoint's facts) or,
    without facts, ``elimination``. An id claimed by two operators is given to neither. Nothing is exact unless
    an id computed by Flink's rule (or stored by Flink) is in the checkpoint, or every consistent assignment
    agrees on it.

    A uid guessed from a name is a hypothesis (an operator's name may be another operator's uid): it stays
    exact only when the binding made without it gives the operator the same id; otherwise it is dropped and the
    operator is left to the other evidence.
    """
    args = _BindArgs(
        plan,
        tuple(checkpoint_operator_ids),
        stored,
        uid_overrides,
        release,
        format_version,
        job_graph,
        checkpoint_parallelism,
        facts,
        absent_allowed,
    )
    # Each guess is checked once, against the binding with every other guess that stands, then all together
    # (two names that are each other's uids support each other: only the binding without both shows it).
    dropped: frozenset[int] = frozenset()
    checked: set[int] = set()
    binding, guessed = _bind_pass(args, dropped)
    if facts is None:
        return binding  # no evidence to check a guess against: the caller takes names at their word (a new job's plan)
    while set(guessed) - checked:
        todo = set(guessed) - checked
        checked |= todo
        refuted = {
            i
            for i in todo
            if not _only_behind_forward(args, binding.operators[i])
            and not _survives(_bind_pass(args, dropped | {i})[0], i, binding.operators[i])
        }
        without_all = _bind_pass(args, dropped | set(guessed))[0]
        refuted |= {i for i in set(guessed) - refuted if _contradicted(without_all, i, binding.operators[i])}
        if not refuted:
            break
        dropped |= refuted
        binding, guessed = _bind_pass(args, dropped)
    if not dropped:
        return binding
    return _with_dropped_guesses(binding, dropped, args)


def _survives(without: Binding, i: int, bound: BoundOperator) -> bool:
    """Whether the binding made without operator ``i``'s uid guess still gives it the guessed id exactly, or
    leaves it among ids no command can tell apart (no state, finished alike), or fits the checkpoint in no way at
    all or only by admitting keyed state behind a FORWARD edge (then the plan may not be this checkpoint's job, and
    the guess is not what is wrong): only then is the guess more than a name that happens to be some operator's
    uid."""
    if without.solutions == 0 or without.forward_keyed:
        return True
    other = without.operators[i]
    if other.exact:
        return other.operator_id == bound.operator_id
    # Ids that hold no state and finished alike: nothing any command does depends on which of them it is.
    return other.method == INDISTINCT and bound.operator_id in other.candidates


def _only_behind_forward(args: _BindArgs, bound: BoundOperator) -> bool:
    """The guessed id holds keyed state and the operator's keyed inputs can only be FORWARD edges
    (reinterpretAsKeyedStream): the structural step admits that only when nothing else fits, so a binding made
    without the guess is no fair test of it."""
    graph = args.plan if isinstance(args.plan, StreamGraph) else None
    fact = next((f for f in args.facts or () if f.operator_id == bound.operator_id), None)
    if graph is None or fact is None or not fact.keyed or bound.node_id is None:
        return False
    node = graph.node(bound.node_id)
    strict = deduction.compatible(graph, node, fact, forward_keyed=False)
    return strict is not None and deduction.compatible(graph, node, fact, forward_keyed=True) is None


def _contradicted(without: Binding, i: int, bound: BoundOperator) -> bool:
    """The binding made without any guess gives operator ``i`` another id, exactly."""
    other = without.operators[i]
    fits = without.solutions != 0 and not without.forward_keyed
    return fits and other.exact and other.operator_id != bound.operator_id


@dataclass(frozen=True, slots=True)
class _BindArgs:
    plan: StreamGraph | JobGraphPlan
    checkpoint_operator_ids: tuple[str, ...]
    stored: Mapping[str, tuple[str | None, str | None]] | None
    uid_overrides: Mapping[str, str] | None
    release: str | None
    format_version: int | None
    job_graph: JobGraphPlan | None
    checkpoint_parallelism: Mapping[str, int] | None
    facts: Sequence[OperatorFacts] | None
    absent_allowed: bool


def _with_dropped_guesses(binding: Binding, dropped: frozenset[int], args: _BindArgs) -> Binding:
    """Say, on each operator whose guessed uid was dropped, what the guess was and why it does not count."""
    ops = list(binding.operators)
    for i in sorted(dropped):
        op = ops[i]
        guess = next(
            ((u, uid_hash(u)) for u, _ in uid_candidates(op.name) if uid_hash(u) in _ckpt_ids(args)),
            None,
        )
        if guess is None:
            continue
        uid, h = guess
        said = (
            f"its name as a uid ({uid!r}) hashes to {h}, but that is a guess the other evidence does not confirm "
            "(a name may be another operator's uid), so it is not used"
        )
        ops[i] = replace(op, reason=f"{op.reason}; {said}" if op.exact else f"{said}; {op.reason}")
    return replace(binding, operators=tuple(ops))


def _ckpt_ids(args: _BindArgs) -> set[str]:
    return {_norm(i) for i in args.checkpoint_operator_ids}


def _bind_pass(args: _BindArgs, no_guess: frozenset[int]) -> tuple[Binding, dict[int, str]]:
    """One binding; ``no_guess``: operator indexes whose uid is not guessed from their name. Also returns the
    operators bound by a guessed uid (index -> uid)."""
    plan, stored, uid_overrides = args.plan, args.stored, args.uid_overrides
    release, format_version, job_graph = args.release, args.format_version, args.job_graph
    checkpoint_parallelism, facts, absent_allowed = args.checkpoint_parallelism, args.facts, args.absent_allowed
    checkpoint_operator_ids = args.checkpoint_operator_ids
    rules = _rules(release, format_version)
    ckpt: list[str] = []
    for i in checkpoint_operator_ids:
        h = _norm(i)
        if h not in ckpt:
            ckpt.append(h)
    in_ckpt = set(ckpt)
    overrides = dict(uid_overrides or {})
    stored_n = {_norm(k): v for k, v in (stored or {}).items()}
    notes: list[str] = []

    graph = plan if isinstance(plan, StreamGraph) else None
    job = plan if isinstance(plan, JobGraphPlan) else job_graph
    ops: list[_Op] = []
    aligned: dict[str, list[int]] | None = None
    if graph is not None:
        for n in graph.nodes:
            ops.append(_Op(n.name, n.parallelism, node_id=n.id))
        if job is not None:
            aligned = _align(graph, job)
            if aligned is None:
                notes.append("the job-graph plan could not be matched onto the stream graph; vertex ids not used")
    else:
        assert job is not None
        for v in job.vertices:
            for pos, label in enumerate(v.operators):
                ops.append(_Op(label, v.parallelism, vertex_id=v.id, position=pos))
    by_node = {op.node_id: op for op in ops if op.node_id is not None}

    claimed: dict[str, _Op] = {}

    def claim(op: _Op, op_id: str, method: str, reason: str, uid: str | None = None) -> None:
        op.method, op.operator_id, op.in_checkpoint, op.reason = method, op_id, op_id in in_ckpt, reason
        if uid is not None:
            op.uid = uid
        if op.in_checkpoint:
            claimed[op_id] = op

    # 0. Flink's own ids (a graph built by Flink from the job's jar): every operator is what Flink says it is.
    if graph is not None:
        _bind_flink_ids(graph, ops, in_ckpt, claim)

    # 1. stored names (V5+): the checkpoint says which id is which name/uid.
    if stored_n:
        names = [op.name for op in ops]
        for op in ops:
            uid = _given(op, overrides)
            if uid is not None:
                continue  # checked in step 2
            hits = [k for k, (name, _) in stored_n.items() if name == op.name and k in in_ckpt and k not in claimed]
            if len(hits) == 1 and names.count(op.name) == 1:
                s_uid = stored_n[hits[0]][1]
                claim(op, hits[0], STORED_NAME, "the checkpoint stores this name for the id", s_uid)
                op.uid_known = s_uid is not None
            elif len(hits) > 1 or (hits and names.count(op.name) > 1):
                op.reason = f"name {op.name!r} occurs more than once; stored names cannot tell them apart"

    # 2. the uids the user gave.
    for op in ops:
        if op.method != UNBOUND:
            continue
        given = _given(op, overrides)
        if given is None:
            continue
        h = uid_hash(given)
        op.uid, op.uid_known = given, True
        if h in in_ckpt and h not in claimed:
            claim(op, h, UID_HASH, f"given uid {given!r} hashes to this id", given)
        elif h in claimed:
            op.reason = f"given uid {given!r} hashes to {h}, already bound to {claimed[h].name!r}"
        else:
            claim(
                op,
                h,
                UID_HASH,
                f"given uid {given!r} hashes to {h}, which is not in the checkpoint "
                "(no state for this operator there, or the uid is wrong)",
                given,
            )

    # 3. job vertex ids: a vertex id is its chain head's operator id — Flink's own, so before any guess.
    if job is not None and (graph is None or aligned is not None):
        for v in job.vertices:
            if graph is not None:
                assert aligned is not None
                head = by_node[aligned[v.id][0]]
            else:
                head = next(op for op in ops if op.vertex_id == v.id and op.position == 0)
            if graph is not None:
                head.vertex_id, head.position = v.id, 0
            if head.method == UNBOUND and v.id not in claimed:
                claim(
                    head,
                    v.id,
                    VERTEX_ID,
                    "head of job vertex "
                    + v.id
                    + " (vertex id = head operator id)"
                    + ("" if v.id in in_ckpt else "; not in the checkpoint (no state for it there)"),
                )
            elif head.operator_id is not None and head.operator_id != v.id:
                notes.append(f"{head.name!r}: bound to {head.operator_id} but heads vertex {v.id}")
        if graph is not None and aligned is not None:
            for v in job.vertices:
                for pos, nid in enumerate(aligned[v.id]):
                    by_node[nid].vertex_id, by_node[nid].position = v.id, pos

    # 3b. uids guessed from names (a hypothesis, checked by :func:`bind`); a guess counts only if its hash is in
    # the checkpoint and no other operator's guess gives the same id.
    guesses: dict[str, list[tuple[int, str, str]]] = {}
    for k, op in enumerate(ops):
        if op.method != UNBOUND or _given(op, overrides) is not None:
            continue
        cands = uid_candidates(op.name)
        op.tried = tuple(u for u, _ in cands)
        if k in no_guess:
            continue
        for uid, how in cands:
            h = uid_hash(uid)
            if h in in_ckpt and h not in claimed:
                guesses.setdefault(h, []).append((k, uid, how))
                break
    guessed: dict[int, str] = {}
    for h, takers in guesses.items():
        if len(takers) == 1:
            k, uid, how = takers[0]
            claim(ops[k], h, UID_HASH, f"uid {uid!r} ({how}) hashes to this id", uid)
            ops[k].uid_known = True
            guessed[k] = uid
        else:
            for k, _, _ in takers:
                ops[k].reason = f"id {h} fits more than one operator by uid guess"

    # 4. generated ids (StreamGraphHasherV2): on the stream graph, or on one rebuilt from the job-graph plan.
    candidates: list[_Candidate] = []
    chained_outputs: dict[int, int] = {}  # operator index -> chained out-edges, read off a generated id found
    if graph is not None:
        chained = chained_edges_from_job_graph(graph, job) if (job is not None and aligned is not None) else None
        candidates.append(
            _Candidate(graph, {op.node_id: i for i, op in enumerate(ops) if op.node_id is not None}, chained)
        )
    elif job is not None:
        candidates = _candidates_from_job_graph(job, ops)
        if not candidates:
            notes.append("the job-graph plan could not be rebuilt into a stream graph; generated ids not tried")
    if candidates:
        _generated_ids(ops, candidates, rules, in_ckpt, claimed, claim, chained_outputs)

    # 4b. generated ids found by search (any position, chained-output count and input ids), alternating with
    # the structural step: each can unlock the other. A hit also binds the inputs whose ids went into it and says
    # how many out-edges Flink chained.
    solutions: int | None = None
    assignments: list[Mapping[int, str]] = []
    # Places in Flink's traversal (:func:`_places`) only on a stream graph: one rebuilt from a job-graph plan is a
    # guess at the job's (its source order, which operator of a chain sends), so it cannot rule a place out.
    sole = rules if graph is not None else None
    loop_notes: list[str] = []
    if candidates:
        cand = candidates[0]
        node_of = {i: nid for nid, i in cand.op_of.items()}
        by_fact = {f.operator_id: f for f in facts or ()}

        def fits(nid: int, op_id: str) -> bool:
            f = by_fact.get(op_id)
            return f is None or deduction.compatible(cand.graph, cand.graph.node(nid), f, forward_keyed=True) is None

        for _ in range(4 * len(ops) + 4):
            known = {node_of[i]: op.operator_id for i, op in enumerate(ops) if op.operator_id and i in node_of}
            free = [h for h in ckpt if h not in claimed]
            progress = False
            for use_pool in (False, True):
                if use_pool and absent_allowed:
                    break  # an input absent from the checkpoint could leave only a mirror standing
                if use_pool:
                    todo = [n for n in node_of.values() if any(e.source not in known for e in cand.graph.in_edges(n))]
                else:
                    todo = [
                        n
                        for n in node_of.values()
                        if n not in known and all(e.source in known for e in cand.graph.in_edges(n))
                    ]
                found_hits = deduction.hash_search(
                    cand.graph, known, free if use_pool else [], free, todo, fits=fits if facts else None
                )
                node_hits, input_ids = deduction.accept_hits(found_hits, known)
                for nid, hit in node_hits.items():
                    op = ops[cand.op_of[nid]]
                    if op.method != UNBOUND or hit.operator_id in claimed:
                        continue
                    if hit.chained_outputs >= 0:
                        chained_outputs[cand.op_of[nid]] = hit.chained_outputs
                    claim(
                        op,
                        hit.operator_id,
                        DETERMINISTIC_HASH,
                        f"StreamGraphHasherV2 gives this id (no uid; position {hit.position}"
                        + (f", {hit.chained_outputs} chained output(s)" if hit.chained_outputs >= 0 else "")
                        + (", from its inputs' ids" if hit.inputs else "")
                        + ")",
                    )
                    op.uid_known = False
                    progress = True
                for nid, h in input_ids.items():
                    up = ops[cand.op_of[nid]]
                    if up.method == UNBOUND and h not in claimed and fits(nid, h):
                        claim(up, h, deduction.HASH_INPUT, "its id goes into a generated id found in the checkpoint")
                        progress = True
                if progress:
                    break
            if progress:
                continue
            if facts is not None:
                before = sum(1 for op in ops if op.method != UNBOUND)
                solutions = _deduce(
                    ops, cand, facts, ckpt, claimed, claim, absent_allowed, loop_notes, chained_outputs, None, sole
                )
                if sum(1 for op in ops if op.method != UNBOUND) > before:
                    continue
            break

    # 5. structure: every assignment of the open operators to the open ids that fits the checkpoint's facts.
    if facts is not None and candidates:
        solutions = _deduce(
            ops, candidates[0], facts, ckpt, claimed, claim, absent_allowed, notes, chained_outputs, assignments, sole
        )
    else:
        changed = True
        while changed:
            changed = False
            free = [h for h in ckpt if h not in claimed]
            open_ops = [op for op in ops if op.method == UNBOUND and not _is_known_absent(op)]
            groups: dict[int | None, tuple[list[_Op], list[str]]] = {}
            if checkpoint_parallelism:
                for op in open_ops:
                    groups.setdefault(op.parallelism, ([], []))[0].append(op)
                for h in free:
                    p = checkpoint_parallelism.get(h)
                    groups.setdefault(p, ([], []))[1].append(h)
            else:
                groups[None] = (open_ops, free)
            for p, (g_ops, g_ids) in groups.items():
                if len(g_ops) == 1 and len(g_ids) == 1 and (p is not None or len(free) == 1):
                    op = g_ops[0]
                    claim(
                        op,
                        g_ids[0],
                        ELIMINATION,
                        "the only operator left"
                        + (f" with parallelism {p}" if p is not None else "")
                        + " and the only checkpoint id left: "
                        "structural guess, not Flink's rule",
                    )
                    changed = True

    forward_keyed = any(n == _FORWARD_KEYED for n in (*loop_notes, *notes))

    # 6. reasons for what is left.
    out: list[BoundOperator] = []
    for op in ops:
        if op.method == UNBOUND and facts is not None and op.reason:
            pass  # the structural step said what decides it
        elif op.method == UNBOUND:
            tried = ", ".join(repr(u) for u in op.tried) or "none"
            extra = f"{op.reason}; " if op.reason else ""
            op.reason = (
                f"{extra}no id computed by Flink's rules for {op.name!r} is in the checkpoint (uids tried: {tried}"
                + ("; generated id tried" if graph is not None else "")
                + f"). If it has state there, give its uid: --uid {_uid_form(op, ops)}=UID"
            )
        out.append(
            BoundOperator(
                name=op.name,
                method=op.method,
                operator_id=op.operator_id,
                in_checkpoint=op.in_checkpoint,
                exact=op.in_checkpoint and op.method in EXACT_METHODS,
                reason=op.reason,
                uid=op.uid,
                node_id=op.node_id,
                vertex_id=op.vertex_id,
                position=op.position,
                candidates=op.candidates if op.method in (UNBOUND, deduction.INDISTINCT) else (),
            )
        )
    binding = Binding(
        tuple(out),
        tuple(h for h in ckpt if h not in claimed),
        rules.line,
        tuple(notes),
        chained_outputs,
        solutions,
        forward_keyed,
        tuple(assignments),
    )
    return binding, guessed


def _bind_flink_ids(
    graph: StreamGraph, ops: Sequence[_Op], in_ckpt: Collection[str], claim: Callable[..., None]
) -> None:
    """Operators whose node carries Flink's own id. As Flink restores: the ``setUidHash`` id when the checkpoint
    holds state under it, else the generated id; an id the checkpoint lacks means no state there (stateless)."""
    for op in ops:
        node = graph.node(op.node_id) if op.node_id is not None else None
        if node is None or node.operator_id is None:
            continue
        own = _norm(node.operator_id)
        user = _norm(node.user_hash) if node.user_hash else None
        op_id = user if user is not None and user in in_ckpt else own
        how = "the setUidHash id" if op_id == user else "Flink's id"
        absent = "" if op_id in in_ckpt else "; not in the checkpoint (no state for it there)"
        claim(op, op_id, FLINK_ID, f"{how} from the job's jar{absent}", node.uid)
        op.uid_known = node.uid is not None
        op.vertex_id = node.vertex_id


def _evidence(f: deduction.OperatorFacts) -> str:
    said = [f"parallelism {f.parallelism}"]
    if f.keyed:
        said.append("keyed state")
    if f.source_reader:
        said.append("source-reader state")
    if f.input_gates:
        said.append("input channel state on gate " + "/".join(map(str, sorted(set(f.input_gates)))))
    if f.output_partitions:
        said.append("output channel state")
    if f.stateless:
        said.append("no state")
    return ", ".join(said)


def _interchangeable(values: Collection[str], by_id: Mapping[str, deduction.OperatorFacts]) -> bool:
    """Ids (or absence) that differ in nothing a command uses: no state at all, the same finished flags."""
    kinds: set[tuple[bool, ...]] = set()
    for v in values:
        if v == deduction.ABSENT:
            kinds.add(())
            continue
        f = by_id[v]
        if f.holds_state:
            return False
        kinds.add(tuple(f.finished) if any(f.finished) else ())
    return len(kinds) == 1


def _deduce(
    ops: list[_Op],
    cand: _Candidate,
    facts: Sequence[deduction.OperatorFacts],
    ckpt: list[str],
    claimed: dict[str, _Op],
    claim: Callable[[_Op, str, str, str], None],
    absent_allowed: bool,
    notes: list[str],
    chained_outputs: dict[int, int] | None = None,
    met: list[Mapping[int, str]] | None = None,
    rules: ChainRules | None = None,
) -> int:
    """Bind what every consistent assignment of the open operators to the open ids agrees on; returns how many
    assignments there are, and puts those met (operator index -> id) in ``met``. A deduced operator whose id is
    generated from its input's id also tells how many of its out-edges Flink chained (into ``chained_outputs``, by
    operator index)."""
    by_id = {f.operator_id: f for f in facts}
    node_of = {i: nid for nid, i in cand.op_of.items()}
    open_ops = [
        i
        for i, op in enumerate(ops)
        if op.method in (UNBOUND, deduction.INDISTINCT) and not _is_known_absent(op) and i in node_of
    ]
    open_facts = [by_id[h] for h in ckpt if h not in claimed and h in by_id]
    if not open_facts and not open_ops:
        return 1
    chained = set(cand.chained) if cand.chained is not None else None
    graph = cand.graph

    def extra(nid: int, f: deduction.OperatorFacts) -> str | None:
        if chained is None:
            return None
        if f.input_gates and any((e.source, e.target) in chained for e in graph.in_edges(nid)):
            return "it holds input channel state and this operator is chained behind another (not a chain head)"
        if f.output_partitions and any((e.source, e.target) in chained for e in graph.out_edges(nid)):
            return "it holds output channel state and this operator is not the end of its chain"
        return None

    known = {
        node_of[i]: op.operator_id
        for i, op in enumerate(ops)
        if i in node_of and op.operator_id is not None and op.in_checkpoint
    }
    relations = deduction.id_relations(
        list(by_id), len(graph.nodes), max((len(graph.out_edges(n.id)) for n in graph.nodes), default=0)
    )
    m = deduction.solve_matching(
        graph,
        [node_of[i] for i in open_ops],
        open_facts,
        absent_allowed=absent_allowed,
        extra=extra,
        known=known,
        relations=relations,
        known_facts=[by_id[h] for h in known.values() if h in by_id],
        places=_places(cand, rules) if rules is not None else None,
    )
    if m.count == 0:
        notes.append(
            "no assignment of the "
            + str(len(open_ops))
            + " plan operator(s) not bound by id to the "
            + str(len(open_facts))
            + " checkpoint operator(s) left fits the checkpoint (parallelism, keyed state, source state, channel "
            "state): the plan does not describe this checkpoint, or describes another version of the job"
        )
        for i in open_ops:
            ops[i].reason = "no consistent assignment exists (see the notes)"
        return 0
    if m.forward_keyed:
        notes.append(_FORWARD_KEYED)
    if met is not None:
        op_of = {nid: i for i, nid in node_of.items()}
        met[:] = [{op_of[nid]: v for nid, v in a.items()} for a in m.assignments]
    how_many = f"{m.count}{'' if m.complete else '+'} consistent assignment(s) met"
    for i in open_ops:
        op = ops[i]
        nid = node_of[i]
        values = m.values[nid]
        ruled = m.ruled_out.get(nid, {})
        op.candidates = tuple(sorted(values))
        if len(values) == 1:
            (v,) = values
            if v == deduction.ABSENT:
                op.method, op.reason = (
                    deduction.DEDUCED,
                    (
                        f"not in the checkpoint: every one of the {how_many} leaves it out (a stateless operator; "
                        "this release writes no state for those)"
                    ),
                )
                continue
            why_not = "; ".join(f"{h[:8]}…: {r}" for h, r in list(ruled.items())[:3])
            claim(
                op,
                v,
                deduction.DEDUCED,
                f"the only checkpoint operator that fits ({_evidence(by_id[v])}) in every consistent assignment "
                f"({how_many})" + (f"; others ruled out: {why_not}" if why_not else ""),
            )
        elif values and _interchangeable(values, by_id):
            op.method = deduction.INDISTINCT
            shown = ", ".join(sorted("not in the checkpoint" if v == deduction.ABSENT else v for v in values))
            op.reason = (
                f"one of {shown}: they hold no state and finished alike, so they cannot be told apart and "
                "nothing depends on which"
            )
        else:
            shown = ", ".join(sorted("absent" if v == deduction.ABSENT else v for v in values))
            op.reason = (
                f"could be any of {shown} ({how_many}); give its uid (--uid {_uid_form(op, ops)}=UID) if it has one, "
                "or the job-graph plan (REST /jobs/<job-id>/plan)"
            )
    for i in open_ops:
        op = ops[i]
        ins = graph.in_edges(node_of[i])
        if op.method != deduction.DEDUCED or op.operator_id is None or len(ins) != 1:
            continue
        up = next((o for j, o in enumerate(ops) if node_of.get(j) == ins[0].source), None)
        found = relations.get((op.operator_id, up.operator_id)) if up is not None and up.operator_id else None
        if found:
            op.uid_known = False
            counts = {c for _, c in found}
            if chained_outputs is not None and len(counts) == 1:
                chained_outputs[i] = next(iter(counts))
            positions = "/".join(str(p) for p in sorted({p for p, _ in found}))
            op.reason += f"; no uid: the id is the one Flink generates from its input's id (position {positions})"
    return m.count


# ---------------------------------------------------------------------------------------- generated-id pass


@dataclass(frozen=True, slots=True)
class _Candidate:
    """A stream graph the job may have had, with its nodes' operators (index into the op list)."""

    graph: StreamGraph
    op_of: dict[int, int]
    chained: Collection[tuple[int, int]] | None
    #: Out-edge order tried at the fan-out nodes (node -> edges), when the graph's order is inferred.
    out_order: Mapping[int, tuple[StreamEdge, ...]] = field(default_factory=dict)


#: Most output orders tried per candidate graph; past it, ids whose position depends on the order are not taken.
_MAX_ORDERS = 720


def _with_output_orders(cand: _Candidate, most: int = _MAX_ORDERS) -> tuple[list[_Candidate], bool]:
    """``cand`` once per order of the out-edges of its fan-out nodes, when a plan did not give Flink's order (a
    node's breadth-first position, hence its generated id, depends on it: the order a plan implies is no proof).
    Returns (variants, complete): not complete when there are more than ``most`` orders (then only ``cand``
    itself)."""
    graph = cand.graph
    if not graph.inferred_edge_order:
        return [cand], True
    fans = [n.id for n in graph.nodes if len(graph.out_edges(n.id)) > 1]
    total = 1
    for n in fans:
        for k in range(2, len(graph.out_edges(n)) + 1):
            total *= k
    if total > most:
        return [cand], False
    variants = []
    for combo in itertools.product(*(itertools.permutations(graph.out_edges(n)) for n in fans)):
        variants.append(replace(cand, out_order=dict(zip(fans, combo, strict=True))))
    return variants, True


def _generated_ids(
    ops: list[_Op],
    candidates: list[_Candidate],
    rules: ChainRules,
    in_ckpt: set[str],
    claimed: dict[str, _Op],
    claim: Callable[[_Op, str, str, str], None],
    chained_outputs: dict[int, int],
) -> None:
    """Bind unbound operators whose generated id is in the checkpoint (and note, in ``chained_outputs``, how many
    chained out-edges the id was computed with: a hit proves it).

    A node's generated id depends on which other nodes carry a uid (their ids are taken as is, and they do not
    wait for their inputs), so iterate: an operator whose known id differs from its generated one carries a
    uid; unresolved operators whose generated id is absent are then assumed to carry one, for another round.
    With several candidate graphs (unknown source order), only the candidates reproducing the most known ids
    count, and an id is taken only if they all agree on it. Every id taken is one the checkpoint holds.
    """
    expanded: list[_Candidate] = []
    every_order = True
    for c in candidates:
        variants, complete = _with_output_orders(c, max(1, _MAX_ORDERS // len(candidates)))
        expanded.extend(variants)
        every_order = every_order and complete
    n_orders = len(expanded)
    assume_uid: set[int] = set()
    for _ in range(2 * len(ops) + 2):
        results: list[tuple[int, dict[int, str | None], _Traversal, _Candidate]] = []
        for cand in expanded:
            fixed: dict[int, bytes | None] = {}
            for nid, i in cand.op_of.items():
                op = ops[i]
                if op.uid is not None and op.uid_known:
                    fixed[nid] = bytes.fromhex(uid_hash(op.uid))
                elif op.uid_known or i in assume_uid:
                    fixed[nid] = bytes.fromhex(op.operator_id) if op.operator_id else None
            t = _traverse(cand.graph, rules, fixed, cand.chained, cand.out_order)
            gen = {i: _hex(t.ids.get(nid)) for nid, i in cand.op_of.items() if nid not in fixed}
            score = sum(1 for i, h in gen.items() if h is not None and h == ops[i].operator_id)
            results.append((score, gen, t, cand))
        best = max(r[0] for r in results)
        keep = [r for r in results if r[0] == best]
        progress = False
        for i, op in enumerate(ops):
            values = {r[1].get(i, "fixed") for r in keep}
            if len(values) != 1:
                continue
            h = values.pop()
            if h is None or h == "fixed":
                continue
            if op.method == UNBOUND and h in in_ckpt and h not in claimed:
                _, _, t, cand = keep[0]
                nid = next(n for n, j in cand.op_of.items() if j == i)
                sensitive = cand.graph.inferred_edge_order and _order_sensitive(cand.graph, nid)
                if sensitive and not every_order:
                    continue  # its position depends on an output order not tried: a hit is no proof
                positions = sorted({r[2].positions[n] for r in keep for n, j in r[3].op_of.items() if j == i})
                why = (
                    "StreamGraphHasherV2 gives this id (no uid, breadth-first position "
                    + "/".join(map(str, positions))
                    + ")"
                )
                if sensitive and n_orders > 1:
                    why += (
                        f"; its position depends on the order of outputs, which a plan does not show: of the "
                        f"{n_orders} source and output orders tried, every one that reproduces the ids known gives it"
                    )
                elif len(candidates) > 1:
                    why += f"; same id under all {len(keep)} source orders that fit the known ids"
                claim(op, h, DETERMINISTIC_HASH, why)
                chainable = chain_predicate(cand.graph, rules, cand.chained)
                chained_outputs[i] = sum(1 for e in cand.graph.out_edges(nid) if chainable(e))
                op.uid_known = False
                progress = True
            elif op.operator_id == h:
                op.uid_known = False
            elif op.operator_id is not None and op.uid_known is None and op.method in (VERTEX_ID, STORED_NAME):
                op.uid_known = True  # Flink's id, but not the generated one: the operator has a uid
                progress = True
        if not progress:
            guess = {
                i
                for i, op in enumerate(ops)
                if op.method == UNBOUND
                and op.uid_known is None
                and i not in assume_uid
                and any(r[1].get(i) is not None for r in keep)
            }
            if not guess:
                return
            assume_uid |= guess


def _candidates_from_job_graph(job: JobGraphPlan, ops: list[_Op]) -> list[_Candidate]:
    """Stream graphs consistent with a job-graph plan: one node per chained operator, chain edges FORWARD and
    chained, each vertex input an edge from the upstream chain's only leaf into the head (a chained operator
    has exactly one input, its chain predecessor). Node ids, which Flink assigns in creation order, are not
    in the plan: sources are tried in every order (up to 6 sources), the rest numbered topologically. Empty
    when an upstream chain with consumers has more than one leaf (its output operator is then unknown)."""
    index = {(op.vertex_id, op.position): i for i, op in enumerate(ops)}
    keys: list[tuple[str, int]] = []
    leaf: dict[str, tuple[str, int]] = {}
    chained: list[tuple[tuple[str, int], tuple[str, int]]] = []
    for v in job.vertices:
        has_kids = {p for p in v.parents if p is not None}
        leaves = [i for i in range(len(v.operators)) if i not in has_kids]
        if len(leaves) == 1:
            leaf[v.id] = (v.id, leaves[0])
        for i, p in enumerate(v.parents):
            keys.append((v.id, i))
            if p is not None:
                chained.append(((v.id, p), (v.id, i)))
    inter: list[tuple[tuple[str, int], tuple[str, int], str]] = []
    for v in job.vertices:
        for inp in sorted(v.inputs, key=lambda x: x.num):
            if inp.source not in leaf:
                return []
            inter.append((leaf[inp.source], (v.id, 0), inp.ship_strategy))
    ins: dict[tuple[str, int], int] = {k: 0 for k in keys}
    for _, dst in chained:
        ins[dst] += 1
    for _, dst, _ in inter:
        ins[dst] += 1
    sources = [k for k in keys if ins[k] == 0]
    orders = list(itertools.permutations(sources)) if len(sources) <= 6 else [tuple(sources)]
    out: list[_Candidate] = []
    parallelism = {v.id: v.parallelism for v in job.vertices}
    for order in orders:
        number: dict[tuple[str, int], int] = {}
        for k in order:
            number[k] = len(number) + 1
        # the rest in breadth-first order from the sources (creation order is unknown; only relative order of
        # a node's outputs matters, and that is flagged as inferred)
        succ: dict[tuple[str, int], list[tuple[str, int]]] = {k: [] for k in keys}
        for a, b in chained:
            succ[a].append(b)
        for a, b, _ in inter:
            succ[a].append(b)
        queue = deque(order)
        while queue:
            k = queue.popleft()
            for nxt in succ[k]:
                if nxt not in number:
                    number[nxt] = len(number) + 1
                    queue.append(nxt)
        if len(number) != len(keys):
            return []
        nodes = tuple(
            StreamNode(id=number[k], name=ops[index[k]].name, parallelism=parallelism[k[0]], is_source=k in order)
            for k in keys
        )
        edges = [StreamEdge(number[a], number[b], "FORWARD") for a, b in chained]
        edges += [StreamEdge(number[a], number[b], strategy) for a, b, strategy in inter]
        edges.sort(key=lambda e: e.target)
        graph = StreamGraph(nodes, tuple(edges), inferred_edge_order=True)
        out.append(_Candidate(graph, {number[k]: index[k] for k in keys}, {(number[a], number[b]) for a, b in chained}))
    return out


#: Most traversals tried for :func:`_places`; past it, a node may have any place.
_MAX_PLACE_TRAVERSALS = 4096


def _places(cand: _Candidate, rules: ChainRules) -> Mapping[int, frozenset[tuple[int, int]]] | None:
    """Node -> every (position, chained-output count) Flink's traversal can give it, for the generated-id
    relations: positions over every output order a plan leaves open and whichever of the nodes with several inputs
    carry a uid (a node without uid waits for all its inputs; that alone moves the order); counts up to the
    out-edges the release's rules let Flink chain (what a plan hides can only cut a chain), or exactly the chains
    known. None when there are too many traversals to try."""
    return _graph_places(cand.graph, rules, None if cand.chained is None else frozenset(cand.chained))


@functools.lru_cache(maxsize=16)
def _graph_places(
    graph: StreamGraph, rules: ChainRules, chained: frozenset[tuple[int, int]] | None
) -> Mapping[int, frozenset[tuple[int, int]]] | None:
    """:func:`_places` of one graph (a binding asks for the same graph's places once per pass)."""
    variants, complete = _with_output_orders(_Candidate(graph, {}, chained))
    waiting = [n.id for n in graph.nodes if len(graph.in_edges(n.id)) > 1]
    if not complete or len(variants) << len(waiting) > _MAX_PLACE_TRAVERSALS:
        return None
    positions: dict[int, set[int]] = {n.id: set() for n in graph.nodes}
    for variant in variants:
        for k in range(len(waiting) + 1):
            for with_uid in itertools.combinations(waiting, k):
                fixed: dict[int, bytes | None] = dict.fromkeys(with_uid)
                for nid, p in _traverse(graph, rules, fixed, chained, variant.out_order).positions.items():
                    positions[nid].add(p)
    chainable = chain_predicate(graph, rules, chained)
    out: dict[int, frozenset[tuple[int, int]]] = {}
    for nid, ps in positions.items():
        most = sum(1 for e in graph.out_edges(nid) if chainable(e))
        counts = [most] if chained is not None else range(most + 1)
        out[nid] = frozenset((p, c) for p in ps for c in counts)
    return MappingProxyType(out)


def _hex(digest: bytes | None) -> str | None:
    return digest.hex() if digest is not None else None


def _is_known_absent(op: _Op) -> bool:
    return op.operator_id is not None and not op.in_checkpoint


def _uid_form(op: _Op, ops: Sequence[_Op]) -> str:
    """How ``--uid`` names ``op``: its name, or where several plan operators carry that name the form that
    picks this one (``NAME#7``), since the bare name is refused there."""
    ref = node_ref(op.node_id, op.vertex_id, op.position)
    shared = sum(1 for o in ops if o.name == op.name) > 1
    return _quote(f"{op.name}{ref}" if shared and ref is not None else op.name)


def _quote(name: str) -> str:
    return name if re.fullmatch(r"[\w.:/-]+", name) else f"'{name}'"


def _order_sensitive(graph: StreamGraph, node_id: int) -> bool:
    """Whether the node's breadth-first position could change with the (inferred) out-edge order: some node
    upstream of it, or it, is reached through a fan-out."""
    seen: set[int] = set()
    stack = [node_id]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        for e in graph.in_edges(n):
            if len(graph.out_edges(e.source)) > 1:
                return True
            stack.append(e.source)
    return False
