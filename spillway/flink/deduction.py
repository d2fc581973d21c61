"""Deducing which checkpoint operator each plan operator is, from the checkpoint's own evidence.

A 1.x checkpoint knows its operators by id only, and the plan a user has (``getExecutionPlan()``) shows names,
no uids and no chain cuts. Two kinds of evidence remain, and this module uses both:

* **Generated ids.** An operator without a uid gets ``StreamGraphHasherV2``'s deterministic hash: a function of
  its breadth-first position, of how many of its out-edges are chained, and of its inputs' ids. The position and
  the chained-output count are small numbers, so every value is tried; the inputs' ids are ids already bound or
  any id of the checkpoint (an input with a uid has that uid's hash, which is its id in the checkpoint). A
  result found among the checkpoint's 128-bit ids is proof: it binds the operator, every input whose id went
  into it, and says how many of its out-edges Flink chained — no traversal order or chaining rule is assumed.
* **Structure.** What is left is a matching between plan operators and checkpoint ids in which every pairing must
  fit what the checkpoint says of the id (parallelism, keyed state only behind a keyed edge, source-reader state
  only on a source, input channel state only where the gate and channel indexes fit the inputs …). Every
  consistent matching is enumerated; an operator is bound when all of them agree.

Plain data in, plain data out (the checkpoint's facts arrive as :class:`OperatorFacts`). The facts each rule rests
on are in ``docs/format/operator-ids.md``.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Collection, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import mmh3

from spillway.flink.stream_graph import StreamEdge, StreamGraph, StreamNode

if TYPE_CHECKING:  # numpy is imported by the searches that use it: naming a plan's operators does not
    import numpy as np  # need it, and it is a tenth of a second of every command's start-up

__all__ = [
    "ABSENT",
    "DEDUCED",
    "HASH_INPUT",
    "INDISTINCT",
    "HashHit",
    "Matching",
    "OperatorFacts",
    "accept_hits",
    "compatible",
    "hash_search",
    "id_relations",
    "solve_matching",
]

#: Method names (see :mod:`spillway.flink.operator_ids` for the others).
HASH_INPUT = "hash-input"
DEDUCED = "deduced"
INDISTINCT = "indistinct"
#: Stands for "not in the checkpoint" in a matching (releases that leave stateless operators out).
ABSENT = "-"


@dataclass(frozen=True, slots=True)
class OperatorFacts:
    """What a checkpoint says of one operator id, as far as binding can use it."""

    operator_id: str
    parallelism: int
    #: Holds keyed state (managed or raw): only an operator whose input is keyed can.
    keyed: bool = False
    #: Holds a FLIP-27 ``SourceReaderState``: only a source operator can.
    source_reader: bool = False
    #: Gate indexes that hold input channel state (input state sits on a chain head only).
    input_gates: tuple[int, ...] = ()
    #: Highest input-channel index of any input handle (-1: none).
    max_input_channel: int = -1
    #: Partition indexes that hold output channel state (output state sits on a chain tail only).
    output_partitions: tuple[int, ...] = ()
    #: Highest subpartition index of any output handle (-1: none).
    max_subpartition: int = -1
    #: No state of any kind, not finished: nothing depends on which plan operator this id is.
    stateless: bool = True
    #: Any state (operator, keyed, channel) or coordinator state.
    holds_state: bool = False
    #: Per subtask, whether it is finished (chained operators share their task's flags).
    finished: tuple[bool, ...] = ()
    #: Stored by Flink (metadata V5+).
    name: str | None = None
    uid: str | None = None


# ------------------------------------------------------------------------------------------- generated ids


def _base_digests(positions: int, max_chained: int) -> np.ndarray:
    """``murmur3_128(0)`` of ``putInt(position)`` repeated ``1 + chained`` times, for every position and count:
    shape (positions, max_chained + 1, 16), uint8."""
    import numpy as np

    out = np.zeros((positions, max_chained + 1, 16), dtype=np.uint8)
    for p in range(positions):
        for c in range(max_chained + 1):
            out[p, c] = np.frombuffer(mmh3.hash_bytes(struct.pack("<i", p) * (1 + c), 0), dtype=np.uint8)
    return out


def _rows_in(rows: np.ndarray, wanted: set[bytes]) -> list[int]:
    """Indexes of the 16-byte ``rows`` that are in ``wanted``: first on their low 8 bytes with numpy, then each
    candidate whole (keeps the per-row Python work to the few rows that can match)."""
    import numpy as np

    if not wanted or rows.size == 0:
        return []
    rows = np.ascontiguousarray(rows)
    low = rows[:, :8].copy().view(np.uint64).ravel()
    keys = np.sort(np.frombuffer(b"".join(w[:8] for w in wanted), dtype=np.uint64))
    at = np.minimum(np.searchsorted(keys, low), len(keys) - 1)  # few keys, many rows: no sort of the rows
    hits = np.flatnonzero(keys[at] == low)
    if hits.size == 0:
        return []
    raw = rows.tobytes()
    return [int(i) for i in hits if raw[16 * i : 16 * i + 16] in wanted]


def _mix(digests: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Flink's per-input step ``hash[j] = (byte) (hash[j] * 37 ^ input[j])`` for every digest x every input
    candidate: (..., 16) x (M, 16) -> (..., M, 16). The low eight bits of the product depend only on the low
    eight bits of the byte, so unsigned 8-bit arithmetic gives Java's signed result."""
    import numpy as np

    scaled = (digests.astype(np.uint16) * 37).astype(np.uint8)
    return np.bitwise_xor(scaled[..., None, :], other.reshape((1,) * (digests.ndim - 1) + other.shape))


@dataclass(frozen=True, slots=True)
class HashHit:
    """A generated id found in the checkpoint: node ``node`` is ``operator_id``; ``inputs`` are the ids that went
    into it, in Flink's in-edge order (as (input node, id) pairs); ``position`` and ``chained_outputs`` are the
    values that reproduce it."""

    node: int
    operator_id: str
    position: int
    chained_outputs: int
    inputs: tuple[tuple[int, str], ...]


def hash_search(
    graph: StreamGraph,
    known: Mapping[int, str],
    pool: Sequence[str],
    targets: Collection[str],
    nodes: Collection[int],
    *,
    fits: Callable[[int, str], bool] | None = None,
    budget: int = 250_000,
) -> list[HashHit]:
    """Every way a node of ``nodes`` can be a generated id: for each position (0 .. nodes-1), each chained-output
    count (0 .. out-degree) and each assignment of ids to its inputs (a ``known`` input's id, else any id of
    ``pool``; every order of the inputs, since a plan does not print Flink's in-edge order), the generated id,
    kept when it is the node's known id (then the hit says which ids its inputs have) or, for a node not known, in
    ``targets`` and ``fits(node, id)``. Raw material: :func:`accept_hits` decides what is certain. ``budget``
    bounds the digests computed per node."""
    if not any(node.id in nodes and (node.id in known or len(targets) > 0) for node in graph.nodes):
        return []  # no node has an id to look for (e.g. every operator bound by name): numpy costs start-up time
    import numpy as np

    target_set = {bytes.fromhex(t) for t in targets}
    n_nodes = len(graph.nodes)
    max_out = max((len(graph.out_edges(n.id)) for n in graph.nodes), default=0)
    base = _base_digests(n_nodes, max_out)
    pool_arr = (
        np.frombuffer(b"".join(bytes.fromhex(c) for c in pool), dtype=np.uint8).reshape(-1, 16)
        if pool
        else np.zeros((0, 16), dtype=np.uint8)
    )
    hits: list[HashHit] = []
    for node in graph.nodes:
        if node.id not in nodes:
            continue
        wanted = {bytes.fromhex(known[node.id])} if node.id in known else target_set
        if not wanted:
            continue
        ins = graph.in_edges(node.id)
        outs = len(graph.out_edges(node.id))
        digests = base[:, : outs + 1]  # (P, C, 16)
        seen: set[tuple[str, tuple[tuple[int, str], ...], int, int]] = set()
        orders = list(itertools.permutations(range(len(ins)))) if len(ins) <= 3 else [tuple(range(len(ins)))]
        for order in orders:
            edges = [ins[i] for i in order]
            pools: list[tuple[np.ndarray, list[str]]] = []
            size = digests.shape[0] * digests.shape[1]
            for e in edges:
                if e.source in known:
                    ids = [known[e.source]]
                    arr = np.frombuffer(bytes.fromhex(ids[0]), dtype=np.uint8).reshape(1, 16)
                else:
                    ids, arr = list(pool), pool_arr
                pools.append((arr, ids))
                size *= max(1, len(ids))
            if size > budget or any(len(ids) == 0 for _, ids in pools):
                continue
            mixed = digests
            for arr, _ in pools:
                mixed = _mix(mixed, arr)
            flat = np.ascontiguousarray(mixed.reshape(-1, 16))
            raw = flat.tobytes()
            shape = mixed.shape[:-1]
            for idx in _rows_in(flat, wanted):
                coords = np.unravel_index(idx, shape)
                p, c = int(coords[0]), int(coords[1])
                used = tuple((e.source, pools[k][1][int(coords[2 + k])]) for k, e in enumerate(edges))
                hit_id = raw[16 * idx : 16 * idx + 16].hex()
                if len({i for _, i in used} | {hit_id}) != len(used) + 1:
                    continue  # an operator is not its own input, and two inputs are two operators
                if node.id not in known and fits is not None and not fits(node.id, hit_id):
                    continue
                key = (hit_id, tuple(sorted(used)), p, c)
                if key not in seen:
                    seen.add(key)
                    hits.append(HashHit(node.id, hit_id, p, c, used))
    return hits


def id_relations(ids: Sequence[str], positions: int, max_chained: int) -> dict[tuple[str, str], set[tuple[int, int]]]:
    """Every (child, parent) pair of ``ids`` with child = the generated id of a one-input node at some position and
    chained-output count whose input is parent: (child, parent) -> {(position, count)}. Each true pair comes with
    its mirror (parent, child) at the same values (the step can be undone); which is which is for the matching
    to decide, from where the two operators sit in the plan."""
    import numpy as np

    if not ids:
        return {}
    base = _base_digests(positions, max_chained)
    arr = np.frombuffer(b"".join(bytes.fromhex(i) for i in ids), dtype=np.uint8).reshape(-1, 16)
    mixed = np.ascontiguousarray(_mix(base, arr))  # (P, C, M, 16)
    raw = mixed.tobytes()
    where = {bytes.fromhex(i): i for i in ids}
    out: dict[tuple[str, str], set[tuple[int, int]]] = {}
    shape = mixed.shape[:-1]
    for idx in _rows_in(mixed.reshape(-1, 16), set(where)):
        child = where[raw[16 * idx : 16 * idx + 16]]
        p, c, m = (int(x) for x in np.unravel_index(idx, shape))
        if ids[m] != child:
            out.setdefault((child, ids[m]), set()).add((p, c))
    return out


def accept_hits(hits: Sequence[HashHit], known: Mapping[int, str]) -> tuple[dict[int, HashHit], dict[int, str]]:
    """What the raw hits prove: (node -> its hit, for nodes not known; input node -> id).

    The step ``hash[j] = hash[j] * 37 ^ input[j]`` can be undone, so a true relation "X is generated from input
    Y" always has a mirror "Y is generated from input X" at the same position and count. A hit is taken only when
    nothing contradicts it: every hit for its node gives the same id, no other node's hit gives that id, and no
    hit anywhere is its mirror (the mirror would show up wherever a pair of adjacent nodes could carry it). A hit
    whose inputs were all known has no possible mirror (it would need a cycle), so the last test never removes it.
    The same rules give input ids: every hit for the node agrees on that input's id, and no mirror."""
    by_node: dict[int, list[HashHit]] = {}
    by_id: dict[str, set[int]] = {}
    for h in hits:
        by_node.setdefault(h.node, []).append(h)
        by_id.setdefault(h.operator_id, set()).add(h.node)
    pairs = {(h.operator_id, i) for h in hits for _, i in h.inputs}

    def mirrored(h: HashHit) -> bool:
        return any((i, h.operator_id) in pairs for n, i in h.inputs if n not in known)

    nodes: dict[int, HashHit] = {}
    inputs: dict[int, str] = {}
    for node, hs in by_node.items():
        ids = {h.operator_id for h in hs}
        if len(ids) != 1 or any(mirrored(h) for h in hs):
            continue
        (x,) = ids
        if by_id[x] != {node}:
            continue
        if node not in known:
            chained = {h.chained_outputs for h in hs}
            first = hs[0]
            nodes[node] = HashHit(
                node, x, first.position, first.chained_outputs if len(chained) == 1 else -1, first.inputs
            )
        for k in range(len(hs[0].inputs)):
            src = {dict(h.inputs).get(hs[0].inputs[k][0]) for h in hs}
            m = hs[0].inputs[k][0]
            if len(src) == 1 and m not in known:
                (y,) = src
                if y is not None:
                    inputs[m] = y
    return nodes, inputs


# ---------------------------------------------------------------------------------------------- structure


def _is_hash(e: StreamEdge) -> bool:
    return e.kind.is_keyed


def _pointwise(e: StreamEdge) -> bool:
    return e.kind.is_pointwise


def _channels(graph: StreamGraph, e: StreamEdge) -> int:
    """Input channels a subtask of the target has on edge ``e`` at most."""
    up, down = graph.node(e.source).parallelism, graph.node(e.target).parallelism
    if _pointwise(e) and up > 0 and down > 0:
        return -(-up // down)
    return up


def _subpartitions(graph: StreamGraph, e: StreamEdge) -> int:
    """Subpartitions a subtask of the source has on edge ``e`` at most."""
    up, down = graph.node(e.source).parallelism, graph.node(e.target).parallelism
    if _pointwise(e) and up > 0 and down > 0:
        return -(-down // up)
    return down


def _downstream(graph: StreamGraph, nid: int) -> set[int]:
    seen: set[int] = set()
    stack = [e.target for e in graph.out_edges(nid)]
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(e.target for e in graph.out_edges(n))
    return seen


def _chain_region(graph: StreamGraph, nid: int) -> set[int]:
    """Nodes that could share a chain with ``nid``: joined by FORWARD edges of equal parallelism into a node with
    one input (what a plan shows is necessary for chaining; what it hides only prevents it)."""
    seen = {nid}
    stack = [nid]
    while stack:
        n = stack.pop()
        for e in (*graph.in_edges(n), *graph.out_edges(n)):
            if not e.kind.is_forward or len(graph.in_edges(e.target)) != 1:
                continue
            if graph.node(e.source).parallelism != graph.node(e.target).parallelism:
                continue
            other = e.target if e.source == n else e.source
            if other not in seen:
                seen.add(other)
                stack.append(other)
    return seen


def compatible(graph: StreamGraph, node: StreamNode, f: OperatorFacts, *, forward_keyed: bool = False) -> str | None:
    """``None`` when checkpoint operator ``f`` can be plan node ``node``; else the fact that rules it out.

    Every test is a fact of Flink, not a default: a plan's parallelism is the job's; keyed state needs a keyed
    input (``forward_keyed`` also admits a FORWARD input, for ``reinterpretAsKeyedStream``); a source-reader state
    belongs to a source; input channel state sits on a chain head, on a gate that exists, with a channel index
    below an input's parallelism; output channel state sits on the tail of a chain that sends over the network."""
    if node.parallelism > 0 and f.parallelism != node.parallelism:
        return f"parallelism {f.parallelism} in the checkpoint, {node.parallelism} in the plan"
    if f.name is not None and f.name != node.name:
        return f"the checkpoint stores the name {f.name!r}"
    ins = graph.in_edges(node.id)
    outs = graph.out_edges(node.id)
    if f.keyed and not any(_is_hash(e) or (forward_keyed and e.kind.is_forward) for e in ins):
        return "it holds keyed state and no input of this operator is keyed"
    if f.source_reader and ins:
        return "it holds a source reader's state and this operator is not a source"
    if f.input_gates:
        if not ins:
            return "it holds input channel state and this operator has no input"
        if max(f.input_gates) >= len(ins):
            return f"input channel state on gate {max(f.input_gates)}, this operator has {len(ins)} input(s)"
        widest = max(_channels(graph, e) for e in ins)
        if widest > 0 and f.max_input_channel >= widest:
            return f"input channel {f.max_input_channel}, no input of this operator has that many channels"
    if f.output_partitions:
        may_chain_in = any(e.kind.is_forward and graph.node(e.source).parallelism == node.parallelism for e in ins)
        if not outs and not may_chain_in:
            return "it holds output channel state and this operator sends nothing over the network"
        # The tail has no chained output: its chain is itself and chained operators not downstream of it, and
        # every edge out of it goes over the network.
        below = _downstream(graph, node.id)
        region = _chain_region(graph, node.id) - below
        sends = [e for n in region for e in graph.out_edges(n) if e.target not in region or n == node.id]
        widest = max((_subpartitions(graph, e) for e in sends), default=0)
        if f.max_subpartition >= widest:
            return f"subpartition {f.max_subpartition}, no output its chain can have has that many subpartitions"
        if max(f.output_partitions) >= len(sends):
            return f"output partition {max(f.output_partitions)}, its chain can have {len(sends)} output(s)"
    return None


def _narrow(
    graph: StreamGraph,
    domains: dict[int, list[str]],
    needed: set[str],
    known: Mapping[int, str],
    relations: Mapping[tuple[str, str], set[tuple[int, int]]],
    places: Mapping[int, AbstractSet[tuple[int, int]]] | None = None,
) -> None:
    """Take out of ``domains`` (in place) every (node, id) no complete matching holds, until none is left: an id
    whose generated-id partner (:func:`id_relations`) no neighbour of the node can be. In a complete matching both
    ids are placed, and two related ids sit on adjacent operators, the child with that one input (the rule the
    search checks pair by pair): the search then meets the same matchings with fewer dead ends, so fewer run out
    of budget."""
    related: dict[str, set[str]] = {}
    for a, b in relations:  # each true pair comes with its mirror: which is the child, the plan decides
        related.setdefault(a, set()).add(b)
        related.setdefault(b, set()).add(a)
    placed = needed | set(known.values())
    rel = _placed(relations, places)
    single_input = {n.id: graph.in_edges(n.id)[0].source for n in graph.nodes if len(graph.in_edges(n.id)) == 1}
    fed_alone = {n: [e.target for e in graph.out_edges(n) if e.target in single_input] for n in domains}

    def holds(n: int, v: str) -> bool:
        return known.get(n) == v or v in domains.get(n, ())

    def supported(nid: int, v: str) -> bool:
        up = single_input.get(nid)
        for partner in related[v] & placed:
            as_input = up is not None and bool(rel(nid, v, partner)) and holds(up, partner)
            as_output = any(holds(n, partner) and rel(n, partner, v) for n in fed_alone[nid] if n != nid)
            if not (as_input or as_output):
                return False
        return True

    changed = True
    while changed:
        changed = False
        for nid, dom in domains.items():
            for v in [v for v in dom if v in related and not supported(nid, v)]:
                dom.remove(v)
                changed = True


def _placed(
    relations: Mapping[tuple[str, str], set[tuple[int, int]]], places: Mapping[int, AbstractSet[tuple[int, int]]] | None
) -> Callable[[int, str, str], set[tuple[int, int]]]:
    """``rel(node, child, parent)``: the (position, chained-output count) pairs at which ``child`` is generated
    from ``parent`` that ``node`` can have in Flink's traversal (``places``: node -> those pairs; a node not in it,
    or no ``places``, can have any)."""

    def rel(node: int, child: str, parent: str) -> set[tuple[int, int]]:
        found = relations.get((child, parent), set())
        allowed = places.get(node) if places is not None else None
        return found if allowed is None else {place for place in found if place in allowed}

    return rel


@dataclass(slots=True)
class Matching:
    """The consistent matchings of the open plan nodes onto the open checkpoint ids."""

    #: Node id -> every value it takes in some consistent matching (an operator id or :data:`ABSENT`); when
    #: ``complete`` is False a search ran out of budget and the set may hold values no matching has — never
    #: fewer than the true ones, so a single value is certain either way.
    values: dict[int, set[str]] = field(default_factory=dict)
    #: How many distinct consistent matchings were met (0: there is none).
    count: int = 0
    complete: bool = True
    #: Node id -> why each id was ruled out for it (id -> reason), for the ones ruled out by a fact.
    ruled_out: dict[int, dict[str, str]] = field(default_factory=dict)
    #: Whether FORWARD inputs had to be admitted as keyed (``reinterpretAsKeyedStream``).
    forward_keyed: bool = False
    #: The distinct consistent matchings the searches met (node id -> value): each value in ``values`` that one
    #: of them holds is proven possible; a value only a search out of budget left is not among them.
    assignments: list[dict[int, str]] = field(default_factory=list)


def solve_matching(
    graph: StreamGraph,
    nodes: Sequence[int],
    facts: Sequence[OperatorFacts],
    *,
    absent_allowed: bool,
    cap: int = 5000,
    budget: int = 4000,
    total_budget: int = 200_000,
    extra: Callable[[int, OperatorFacts], str | None] | None = None,
    known: Mapping[int, str] | None = None,
    relations: Mapping[tuple[str, str], set[tuple[int, int]]] | None = None,
    known_facts: Sequence[OperatorFacts] = (),
    places: Mapping[int, AbstractSet[tuple[int, int]]] | None = None,
) -> Matching:
    """Enumerate matchings of ``nodes`` onto ``facts`` in which every id is taken by exactly one node and each
    pairing is :func:`compatible` (and passes ``extra``). ``absent_allowed``: a node may be in no id (releases that
    leave stateless operators out of ``_metadata``). Tries strict keyed rules first, then admits FORWARD keyed
    inputs if nothing fits.

    ``known``: nodes already bound (node -> id). ``relations``: :func:`id_relations` of the checkpoint's ids; two
    related ids sit on adjacent operators, the downstream one generated from the upstream one (so it is that
    relation's child, has one input and takes that relation's position, which no other operator shares).
    ``known_facts``: the facts of the known nodes' ids (for the finished-state rule between neighbours: a task
    that is not a source finishes only once every channel into it has ended, so a finished downstream subtask
    means finished upstream subtasks — all of them over an all-to-all edge, its own over a FORWARD one).
    ``places``: node -> every (position, chained-output count) Flink's traversal can give it (None: any); a
    relation holds between two nodes only at a place the child can have."""
    for forward_keyed in (False, True):
        every = {f.operator_id: f for f in (*known_facts, *facts)}
        m = _solve(
            graph,
            nodes,
            facts,
            absent_allowed,
            (budget, total_budget, cap),
            extra,
            forward_keyed,
            known or {},
            relations or {},
            every,
            places,
        )
        if m.count:
            return m
    return m


def _solve(
    graph: StreamGraph,
    nodes: Sequence[int],
    facts: Sequence[OperatorFacts],
    absent_allowed: bool,
    budgets: tuple[int, int, int],
    extra: Callable[[int, OperatorFacts], str | None] | None,
    forward_keyed: bool,
    known: Mapping[int, str],
    relations: Mapping[tuple[str, str], set[tuple[int, int]]],
    every: Mapping[str, OperatorFacts],
    places: Mapping[int, AbstractSet[tuple[int, int]]] | None = None,
) -> Matching:
    m = Matching(forward_keyed=forward_keyed)
    budget, total_budget, cap = budgets  # steps per search, over all searches; matchings counted at most
    related: dict[str, set[str]] = {}
    for child, parent in relations:
        related.setdefault(child, set()).add(parent)
        related.setdefault(parent, set()).add(child)
    owner: dict[str, int] = {v: n for n, v in known.items()}
    assigned: dict[int, str] = dict(known)
    used_pos: dict[int, int] = {}  # position -> node, for generated nodes with one possible position
    rel = _placed(relations, places)

    def position(n: int) -> int | None:
        ins = graph.in_edges(n)
        if len(ins) != 1 or n not in assigned or ins[0].source not in assigned:
            return None
        found = rel(n, assigned[n], assigned[ins[0].source])
        if not found:
            return None
        ps = {p for p, _ in found}
        return next(iter(ps)) if len(ps) == 1 else None

    def finished_ok(up_id: str, down_id: str, e: StreamEdge) -> bool:
        fu, fd = every.get(up_id), every.get(down_id)
        if fu is None or fd is None or not any(fd.finished):
            return True
        done_up = fu.finished
        if e.kind.is_forward and len(done_up) == len(fd.finished):
            return all(done_up[j] for j, d in enumerate(fd.finished) if d)
        if _pointwise(e):
            return True  # RESCALE: which upstream subtasks feed which is not checked here
        return bool(done_up) and all(done_up)

    def fits_pairs(nid: int, v: str) -> bool:
        for e in graph.in_edges(nid):
            if e.source in assigned and not finished_ok(assigned[e.source], v, e):
                return False
        for e in graph.out_edges(nid):
            if e.target in assigned and not finished_ok(v, assigned[e.target], e):
                return False
        for partner in related.get(v, ()):
            mnode = owner.get(partner)
            if mnode is None:
                continue
            ups = {e.source for e in graph.in_edges(nid)}
            downs = {e.target for e in graph.out_edges(nid)}
            if mnode in ups:
                if len(ups) != 1 or len(graph.in_edges(nid)) != 1 or not rel(nid, v, partner):
                    return False
            elif mnode in downs:
                if len(graph.in_edges(mnode)) != 1 or not rel(mnode, partner, v):
                    return False
            else:
                return False
        return True

    def place(nid: int, v: str) -> list[int] | None:
        """Assign and claim positions; None (and nothing changed) when a position is taken twice."""
        assigned[nid] = v
        owner[v] = nid
        touched = [nid, *(e.target for e in graph.out_edges(nid))]
        claimed_here: list[int] = []
        for n in touched:
            p = position(n)
            if p is None:
                continue
            # Flink hashes a node without uid only once every input is hashed: after them in the order.
            up = graph.in_edges(n)[0].source
            q = position(up)
            below = [position(e.target) for e in graph.out_edges(n) if e.target in assigned]
            if (
                (q is not None and q >= p)
                or any(b is not None and b <= p for b in below)
                or (p in used_pos and used_pos[p] != n)
            ):
                for q in claimed_here:
                    del used_pos[q]
                del assigned[nid]
                del owner[v]
                return None
            if p not in used_pos:
                used_pos[p] = n
                claimed_here.append(p)
        return claimed_here

    def unplace(nid: int, v: str, claimed_here: list[int]) -> None:
        for q in claimed_here:
            del used_pos[q]
        del assigned[nid]
        del owner[v]

    for n in known:
        p = position(n)
        if p is not None:
            used_pos.setdefault(p, n)
    domains: dict[int, list[str]] = {}
    for nid in nodes:
        node = graph.node(nid)
        dom: list[str] = []
        why: dict[str, str] = {}
        for f in facts:
            reason = compatible(graph, node, f, forward_keyed=forward_keyed)
            if reason is None and extra is not None:
                reason = extra(nid, f)
            if reason is None:
                dom.append(f.operator_id)
            else:
                why[f.operator_id] = reason
        if absent_allowed:
            dom.append(ABSENT)
        domains[nid] = dom
        m.ruled_out[nid] = why
        m.values[nid] = set()
    ids = [f.operator_id for f in facts]
    if len(ids) > len(nodes):
        return m  # more checkpoint operators than plan operators: no matching covers them all
    taken: set[str] = set()
    choice: dict[int, str] = {}
    needed = set(ids)
    _narrow(graph, domains, needed, known, relations, places)

    class _Budget(Exception):
        pass

    def walk(order: list[int], doms: Mapping[int, list[str]], limit: int, on_match: Callable[[], bool]) -> None:
        """Depth-first over the consistent matchings of ``order`` (domains ``doms``), calling ``on_match`` at each
        (``choice`` holds it); stops when it returns True. Raises _Budget past ``limit`` steps (all counted in
        ``spent``)."""
        # reachable[k]: every value the nodes order[k:] may take (the order is fixed, so computed once)
        reachable: list[set[str]] = [set() for _ in range(len(order) + 1)]
        for k in range(len(order) - 1, -1, -1):
            reachable[k] = reachable[k + 1] | set(doms[order[k]])
        steps = 0

        def feasible(rest: int) -> bool:
            # every id still untaken must be reachable by some unassigned node
            left = needed - taken
            if len(left) > len(order) - rest:
                return False
            return left <= reachable[rest]

        def rec(k: int) -> bool:  # True: stop
            nonlocal steps
            steps += 1
            spent[0] += 1
            if steps > limit:
                raise _Budget
            if k == len(order):
                return needed <= taken and on_match()
            nid = order[k]
            # ids no node after this one can take: this node must take it (one at most), or nothing fits
            must = (needed - taken) - reachable[k + 1]
            for v in doms[nid]:
                if (v != ABSENT and v in taken) or (must and v not in must):
                    continue
                claimed_here: list[int] | None = []
                if v != ABSENT:
                    if not fits_pairs(nid, v):
                        continue
                    claimed_here = place(nid, v)
                    if claimed_here is None:
                        continue
                    taken.add(v)
                choice[nid] = v
                try:
                    stop = feasible(k + 1) and rec(k + 1)
                finally:
                    del choice[nid]
                    if v != ABSENT:
                        taken.discard(v)
                        unplace(nid, v, claimed_here or [])
                if stop:
                    return True
            return False

        if feasible(0):
            rec(0)

    def first(order: list[int], doms: Mapping[int, list[str]]) -> dict[int, str] | None:
        """One consistent matching, or None when there is none; raises _Budget past ``budget`` steps."""
        found: list[dict[int, str]] = []

        def keep() -> bool:
            found.append(dict(choice))
            return True

        walk(order, doms, min(budget, spent[1] - spent[0]), keep)
        return found[0] if found else None

    def count(order: list[int], doms: Mapping[int, list[str]], limit: int) -> tuple[int, bool] | None:
        """(matchings, capped): counting stops at ``cap``; None when it takes more than ``limit`` steps."""
        seen = [0]

        def tally() -> bool:
            seen[0] += 1
            return seen[0] >= cap

        try:
            walk(order, doms, limit, tally)
        except _Budget:
            return None
        return seen[0], seen[0] >= cap

    # Which (node, id) pairs occur in some consistent assignment: each assignment found supports all its pairs,
    # and a pair not yet supported gets a search of its own. A search that runs out of budget counts its pair
    # as possible: the answer can only be less certain, never wrong.
    order = sorted(nodes, key=lambda n: len(domains[n]))
    spent = [0, total_budget]  # steps taken over all searches, and the most they may take
    solutions: set[tuple[tuple[int, str], ...]] = set()
    try:
        sol = first(order, domains)
    except _Budget:
        m.complete = False
        for n in nodes:
            m.values[n] = set(domains[n])
        m.count = 1  # not proven, not refuted
        return m
    if sol is None:
        return m
    solutions.add(tuple(sorted(sol.items())))
    for n, v in sol.items():
        m.values[n].add(v)
    for nid in order:
        for v in domains[nid]:
            if v in m.values[nid]:
                continue
            doms = {**domains, nid: [v]}
            try:
                found = first([nid, *(n for n in order if n != nid)], doms)
            except _Budget:
                m.values[nid].add(v)
                m.complete = False
                continue
            if found is not None:
                solutions.add(tuple(sorted(found.items())))
                for n, val in found.items():
                    m.values[n].add(val)
    m.count = len(solutions)
    m.assignments = [dict(s) for s in sorted(solutions)]
    # How many there are in all (for what is said, not for what is bound): counted while cheap.
    counted = count(order, domains, min(budget * 5, max(0, spent[1] - spent[0])))
    if counted is not None:
        m.count, capped = counted
        m.complete = m.complete and not capped
    else:
        m.complete = False
    return m
