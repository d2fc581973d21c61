"""A job's plan from whatever the caller holds: a plan file (either flavour), a running job's plan
(``http://HOST:PORT/jobs/JOB_ID``), a ``Topology`` or the job's jar, with the uids it cannot show.

Light on purpose: ``spillway.open`` imports this module, not the analyses behind the other calls."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from spillway.errors import UsageError

if TYPE_CHECKING:
    from spillway.flink.job_ids import JobIds
    from spillway.inspect.topology import Topology
    from spillway.storage.job_jar import JobJar

PathLike = str | os.PathLike[str]


def read_plan(
    plan: Topology | JobJar | PathLike | None,
    *,
    uids: Mapping[str, str] | None = None,
    uid_map: PathLike | None = None,
) -> Topology | None:
    """The plan with the uids it cannot show: ``uid_map`` (a JSON file ``{"operator name": "uid"}``) first,
    ``uids`` win. ``plan``: a file of either flavour (``getExecutionPlan()``/``flink info`` or the REST job
    graph), a running job's ``http://HOST:PORT/jobs/JOB_ID`` (fetched from its JobManager), a ``Topology``, or
    a ``JobJar`` (the job's own graph, built by Flink from its jar: every id exact, no uids to give)."""
    if plan is None:  # before importing what a plan needs: a run without one (a plain dump) loads none of it
        if uids or uid_map:
            raise UsageError("uids and uid_map need a plan")
        return None
    from spillway.storage.job_jar import JobJar

    if isinstance(plan, JobJar):
        if uids or uid_map:
            raise UsageError("uids and uid_map: a job's jar shows every uid itself; give neither with it")
        return job_plan(plan)
    from spillway.inspect.topology import load_uid_map

    merged = load_uid_map(Path(uid_map)) if uid_map is not None else {}
    for name, uid in (uids or {}).items():
        if not isinstance(name, str) or not isinstance(uid, str) or not name or not uid:
            raise UsageError(f"uids: {name!r}: expected {{operator name: uid}} with non-empty strings")
        merged[name] = uid
    from spillway.inspect.plan_names import check_uid_names
    from spillway.inspect.topology import Topology, load_plan, parse_plan
    from spillway.storage.rest import is_job_url

    if isinstance(plan, Topology):
        if merged:
            check_uid_names(plan, merged)
        return plan.with_uids({**plan.uids, **merged}) if merged else plan
    if is_job_url(str(plan)):
        from spillway.storage.rest import fetch_plan

        topology = parse_plan(fetch_plan(str(plan)), str(plan), uids=merged)
    else:
        topology = load_plan(Path(plan), merged)
    check_uid_names(topology, merged)
    return topology


def job_plan(jar: PathLike | JobJar | JobIds) -> Topology:
    """The plan of the job in ``jar`` (or of ``ids`` already taken): a stream-graph plan whose every operator
    carries Flink's own id, uid and job vertex."""
    from spillway.inspect.topology import chained_plan
    from spillway.storage.job_jar import JobIds, JobJar, ids

    found = jar if isinstance(jar, JobIds) else ids(jar)
    source = str(jar.path) if isinstance(jar, JobJar) else "the job's jar" if isinstance(jar, JobIds) else str(jar)
    vertex_of = {n.node_id: n.vertex_id for n in found.nodes}
    chained = {(e.source, e.target) for e in found.graph.edges if vertex_of[e.source] == vertex_of[e.target]}
    topology = chained_plan(found.stream_plan(), chained, source, found.graph)
    # The job's code says what max parallelism each vertex gets (None: it sets none, Flink derives one).
    set_by_job = max_parallelism_set(found)
    vertices = {
        key: replace(v, max_parallelism=set_by_job.get(key, set_by_job.get(None)))
        for key, v in topology.vertices.items()
    }
    return replace(topology, vertices=vertices, max_parallelism_known=True)


def max_parallelism_set(found: JobIds) -> dict[str | None, int]:
    """The max parallelism the job sets, as preflight takes it: ``{None: N}`` job-wide (``env``), and per job
    vertex (keyed as the job's plan keys it: its head's stream node id) where an operator sets its own."""
    out: dict[str | None, int] = {}
    if found.max_parallelism:
        out[None] = found.max_parallelism
    node_of = {n.operator_id: n for n in found.nodes}
    for v in found.vertices:
        head = node_of.get(v.operator_ids[0])
        if head is not None and head.max_parallelism and head.max_parallelism != found.max_parallelism:
            out[str(head.node_id)] = head.max_parallelism
    return out
