"""How long the one binding takes on a large 1.x-style job: N operators in branches of chained maps joined by keyBy
edges, every other operator with a uid the plan does not show, names unrelated to uids; the checkpoint's ids are
Flink's (``deterministic_ids``), its facts what such a job's checkpoint would say (parallelism, keyed state on
keyed operators). Prints seconds and how many operators were bound.

    .venv/bin/python benchmarks/bench_binding.py [N]
"""

from __future__ import annotations

import random
import sys
import time

from spillway.flink.deduction import OperatorFacts
from spillway.flink.operator_ids import bind, deterministic_ids
from spillway.flink.stream_graph import StreamEdge, StreamGraph, StreamNode


def job(n: int, seed: int = 7) -> tuple[StreamGraph, dict[int, str]]:
    rnd = random.Random(seed)
    nodes: list[StreamNode] = []
    edges: list[StreamEdge] = []
    uids: dict[int, str] = {}
    branch_tails: list[int] = []
    nid = 0
    while nid < n:
        p = rnd.choice([2, 3, 4])
        nid += 1
        nodes.append(StreamNode(nid, f"Source: s{nid}", p, is_source=True))
        prev = nid
        for _ in range(rnd.randint(2, 6)):
            if nid >= n:
                break
            nid += 1
            nodes.append(StreamNode(nid, f"op-{nid}", p))
            edges.append(StreamEdge(prev, nid, "FORWARD"))
            prev = nid
        if branch_tails and nid < n:
            nid += 1
            nodes.append(StreamNode(nid, f"join-{nid}", p))
            edges.append(StreamEdge(prev, nid, "HASH"))
            edges.append(StreamEdge(branch_tails.pop(), nid, "HASH"))
            prev = nid
        branch_tails.append(prev)
    for node in nodes:
        if rnd.random() < 0.5:
            uids[node.id] = f"uid-{rnd.getrandbits(40):x}"
    return StreamGraph(tuple(nodes), tuple(edges)), uids


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    graph, uids = job(n)
    ids = deterministic_ids(graph, "1.20.3", uids)
    keyed = {e.target for e in graph.edges if e.partitioner == "HASH"}
    facts = [
        OperatorFacts(ids[node.id], node.parallelism, keyed=node.id in keyed, stateless=node.id not in keyed,
                      holds_state=node.id in keyed)
        for node in graph.nodes
    ]  # fmt: skip
    start = time.perf_counter()
    binding = bind(graph, list(ids.values()), release="1.20.3", facts=facts, absent_allowed=False)
    took = time.perf_counter() - start
    exact = sum(1 for b in binding.operators if b.exact)
    wrong = sum(1 for b in binding.operators if b.exact and b.operator_id != ids[b.node_id or -1])
    print(f"{len(graph.nodes)} operators ({len(uids)} with uids): bound {exact} exactly, {wrong} wrongly, {took:.2f} s")


if __name__ == "__main__":
    main()
