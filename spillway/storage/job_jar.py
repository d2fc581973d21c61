"""A job's own graph as Flink builds it from the job's jar (``spillway.api.ids``): every operator with Flink's
own id, so a plan made from it (``plan=JobJar(...)``, ``spillway.inspect.job_plans``) binds exactly."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spillway.errors import UsageError
from spillway.flink.job_ids import JobIds

__all__ = ["JobJar", "ids", "ids_each", "ids_json"]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class JobJar:
    """A job's jar and how to run its ``main``: ``entry_class`` (else the manifest's), ``args`` (the job's own
    arguments), ``flink_version`` (else the Flink release the jar bundles, else ``FLINK_HOME``'s), ``timeout``
    (seconds for the whole planning run)."""

    path: PathLike
    entry_class: str | None = None
    args: Sequence[str] = field(default_factory=tuple)
    flink_version: str | None = None
    timeout: float | None = None


def _release(job: JobJar) -> str:
    if job.flink_version:
        return job.flink_version
    from spillway.storage.job_graph import jar_release

    found = jar_release(Path(job.path))
    if found:
        return found
    home = os.environ.get("FLINK_HOME")
    if home:
        dist = sorted((Path(home) / "lib").glob("flink-dist*.jar"))
        if dist:
            return dist[0].stem.rpartition("-")[2]
    raise UsageError(
        f"{job.path}: which Flink release is the job for? The jar bundles no Flink artifacts (they are 'provided') "
        "and FLINK_HOME is not set: give it (spillway ids --flink-version X.Y.Z; --job-flink-version X.Y.Z with "
        "--job; the flink_version argument in Python)"
    )


def ids(
    jar: PathLike | JobJar,
    *,
    entry_class: str | None = None,
    args: Sequence[str] = (),
    flink_version: str | None = None,
    timeout: float | None = None,
) -> JobIds:
    """Flink's own graph of the job in ``jar``: its ``main(args)`` runs in Flink's plan-only environment with the
    jars of its Flink release (``FLINK_HOME/lib``, else downloaded once and cached), nothing is executed; every
    operator's name, uid, operator id, job vertex, parallelism and max parallelism as Flink computes them."""
    job = jar if isinstance(jar, JobJar) else JobJar(jar, entry_class, tuple(args), flink_version, timeout)
    if isinstance(job.args, str):
        raise UsageError(f"args={job.args!r}: expected a list of the job's arguments, not one string")
    from spillway.flink.job_ids import parse_job_ids
    from spillway.storage.job_graph import DEFAULT_TIMEOUT, plan_job

    release = _release(job)
    doc = plan_job(
        job.path,
        release,
        entry_class=job.entry_class,
        args=[str(a) for a in job.args],
        timeout=job.timeout or DEFAULT_TIMEOUT,
    )
    try:
        return parse_job_ids(doc)
    except ValueError as exc:
        raise UsageError(f"{job.path}: spillway's Flink helper wrote an unreadable document ({exc})") from None


def ids_each(jobs: Sequence[JobJar]) -> list[JobIds | UsageError]:
    """:func:`ids` of several jobs, in ``jobs``' order, with one JVM per Flink release instead of one per job
    (starting a JVM and loading Flink's classes is most of what planning one job costs); a job that cannot be
    planned gets its ``UsageError`` in its place and the others are planned all the same. Each job's ``timeout``
    (else the default) bounds its share of its release's run."""
    from spillway.flink.job_ids import parse_job_ids
    from spillway.storage.job_graph import DEFAULT_TIMEOUT, JobRun, plan_jobs

    found: list[JobIds | UsageError | None] = [None] * len(jobs)
    by_release: dict[str, list[int]] = {}
    for i, job in enumerate(jobs):
        if isinstance(job.args, str):
            found[i] = UsageError(f"args={job.args!r}: expected a list of the job's arguments, not one string")
            continue
        try:
            by_release.setdefault(_release(job), []).append(i)
        except UsageError as exc:
            found[i] = exc
    for release, members in by_release.items():
        runs = [JobRun(Path(jobs[i].path), jobs[i].entry_class, tuple(str(a) for a in jobs[i].args)) for i in members]
        timeout = max(jobs[i].timeout or DEFAULT_TIMEOUT for i in members)
        for i, doc in zip(members, plan_jobs(runs, release, timeout=timeout), strict=True):
            if isinstance(doc, UsageError):
                found[i] = doc
                continue
            try:
                found[i] = parse_job_ids(doc)
            except ValueError as exc:
                found[i] = UsageError(f"{jobs[i].path}: spillway's Flink helper wrote an unreadable document ({exc})")
    return [f for f in found if f is not None]


def ids_json(found: JobIds) -> dict[str, object]:
    """``spillway ids --json`` (schema ``spillway.ids/1``): the job's operators and vertices as Flink built them."""
    return {
        "schema": "spillway.ids/1",
        "release": found.release,
        "entry_class": found.entry_class,
        "job_name": found.job_name,
        "max_parallelism": found.max_parallelism,
        "nodes": [
            {
                "node_id": n.node_id,
                "name": n.name,
                "uid": n.uid,
                "operator_id": n.operator_id,
                "user_hash": n.user_hash,
                "vertex_id": n.vertex_id,
                "chain_position": n.chain_position,
                "parallelism": n.parallelism,
                "max_parallelism": n.max_parallelism,
            }
            for n in found.nodes
        ],
        "edges": [
            {"source": e.source, "target": e.target, "partitioner": e.partitioner, "type_number": e.type_number}
            for e in found.graph.edges
        ],
        "vertices": [
            {
                "id": v.id,
                "name": v.name,
                "parallelism": v.parallelism,
                "max_parallelism": v.max_parallelism,
                "operator_ids": list(v.operator_ids),
            }
            for v in found.vertices
        ],
    }
