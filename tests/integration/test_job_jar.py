"""``spillway ids`` / ``--job JOB.jar``: the job's main run in Flink's plan-only environment gives Flink's own
ids. Expected values come from Flink: each fixture's ids.json (written by Flink's hasher while the fixture's
checkpoint was made) and the checkpoint itself."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from support.fixtures import Fixture, all_fixtures
from support.job_jars import fixture_job_jar

import spillway
from spillway import api

# Every release the Java helper supports (1.11 ... 2.x); PlanJob wraps the generator's scenarios of either tree.
FIXTURES = [f for f in all_fixtures() if tuple(int(p) for p in f.release.split(".")[:2]) >= (1, 11)]
_JARS: dict[str, Path] = {}


@pytest.fixture(scope="module")
def jar_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("job-jars")


def _fixture_jar(release: str, jar_dir: Path) -> Path:
    if release not in _JARS:
        workdir = jar_dir / release
        workdir.mkdir()
        _JARS[release] = fixture_job_jar(release, workdir)
    return _JARS[release]


_PLANNED: dict[str, api.JobIds | spillway.UsageError] = {}


def _job(f: Fixture, jar_dir: Path) -> api.JobJar:
    args = ("--scenario", f.info["scenario"], "--parallelism", str(f.info["parallelism"]))
    return api.JobJar(_fixture_jar(f.release, jar_dir), args=args, flink_version=f.release)


def _ids(fixture: Fixture, jar_dir: Path) -> api.JobIds:
    """Flink's graph of the fixture's job; every fixture job of its release is planned in the same JVM (one JVM
    per release rather than per fixture), each in a class loader of its own, as ``spillway ids`` plans one."""
    if fixture.name not in _PLANNED:
        same_release = [f for f in FIXTURES if f.release == fixture.release]
        planned = api.ids_each([_job(f, jar_dir) for f in same_release])
        _PLANNED.update({f.name: found for f, found in zip(same_release, planned, strict=True)})
    found = _PLANNED[fixture.name]
    if isinstance(found, spillway.UsageError):
        raise found
    return found


def _edges(doc_nodes: list[dict], doc_edges: list[dict]) -> Counter:
    op = {n["id"]: n["operator_id"] for n in doc_nodes}
    return Counter((op[e["source"]], op[e["target"]], e["partitioner"], e["type_number"]) for e in doc_edges)


@pytest.mark.parametrize("fixture", [pytest.param(f, id=f.name) for f in FIXTURES])
def test_ids_from_the_jar_are_flinks_and_bind_the_checkpoint_exactly(fixture: Fixture, jar_dir: Path) -> None:
    flink = json.loads((fixture.root / "ids.json").read_text())
    found = _ids(fixture, jar_dir)

    assert found.release == fixture.release
    # Stream node numbers depend on how many transformations the process made before; the ids do not.
    ours = {n.operator_id: (n.name, n.uid, n.vertex_id, n.parallelism, n.max_parallelism) for n in found.nodes}
    theirs = {
        n["operator_id"]: (n["name"], n["uid"], n["vertex_id"], n["parallelism"], n["max_parallelism"])
        for n in flink["stream_nodes"]
    }
    theirs = {k: (*v[:4], v[4] if v[4] > 0 else None) for k, v in theirs.items()}
    assert ours == theirs
    assert [(v.id, list(reversed(v.operator_ids))) for v in found.vertices] == [
        (v["id"], v["operator_ids"]) for v in flink["vertices"]
    ]
    ours_edges = Counter((e.source, e.target, e.partitioner, e.type_number) for e in found.graph.edges)
    by_node = {n.node_id: n.operator_id for n in found.nodes}
    ours_edges = Counter({(by_node[s], by_node[t], p, k): c for (s, t, p, k), c in ours_edges.items()})
    assert ours_edges == _edges(flink["stream_nodes"], flink["stream_edges"])

    # Binding the fixture's checkpoint with the job's own graph: every operator the checkpoint holds is bound
    # exactly to Flink's id for its stream node; nothing in the checkpoint is left unclaimed.
    checkpoint = api.open(fixture.checkpoint_dir, plan=api.job_plan(found))
    binding = checkpoint.binding
    assert binding is not None
    stored = {o.operator_id for o in checkpoint.model.operators}
    flink_names = {n["operator_id"]: n["name"] for n in flink["stream_nodes"]}
    assert len(binding.operators) == len(flink["stream_nodes"])
    for b in binding.operators:
        assert b.method == "flink-id"
        assert flink_names[b.operator_id] == b.name  # the id Flink gave the node of this name
        assert b.exact == (b.operator_id in stored)
    assert binding.unclaimed == ()
    assert stored == {b.operator_id for b in binding.operators if b.exact}

    # With Flink's own chains and edge order, every channel of the sound checkpoint frames: no finding is an error
    # and nothing is left unframed for want of the plan (a wrong tail or gate order shows up as record faults).
    report = checkpoint.validate().report
    assert [f"{f.rule}: {f.message}" for f in report.errors] == []
    assert not [f for f in report.findings if f.rule in ("binding-uncertain", "channel-holder")]
