"""Which of Flink's stream nodes (ids.json) each node of a fixture's plan.json is. Names repeat in
production-shaped jobs, so nodes are matched by id and, where the plan numbers a node apart, by name and inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def plan_to_flink_nodes(root: Path) -> dict[int, dict[str, Any]]:
    """plan.json node id -> Flink's stream node (ids.json). The plan was built by a second ``getStreamGraph`` of the
    same program: node ids agree except for nodes Flink creates while translating (a Sink V2 writer gets a fresh
    transformation id each time), which are found by name and their already matched inputs."""
    plan = json.loads((root / "plan.json").read_text())
    ids = json.loads((root / "ids.json").read_text())
    nodes = {n["id"]: n for n in ids["stream_nodes"]}
    inputs: dict[int, set[int]] = {}
    for e in ids["stream_edges"]:
        inputs.setdefault(e["target"], set()).add(e["source"])
    out: dict[int, dict[str, Any]] = {}
    rest = []
    for p in plan["nodes"]:
        n = nodes.get(p["id"])
        if n is not None and n["name"] == p["type"]:
            out[p["id"]] = n
        else:
            rest.append(p)
    for _ in range(len(rest) + 1):  # a renumbered node may feed another one
        for p in list(rest):
            preds = [q["id"] for q in p.get("predecessors", [])]
            if any(q not in out for q in preds):
                continue
            wanted = {out[q]["id"] for q in preds}
            hits = [n for n in nodes.values() if n["name"] == p["type"] and inputs.get(n["id"], set()) == wanted]
            assert len(hits) == 1, (p, hits)
            out[p["id"]] = hits[0]
            rest.remove(p)
    assert not rest and len(out) == len(nodes) == len(plan["nodes"]), rest
    return out
