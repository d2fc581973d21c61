"""The job's own graph (what ``spillway ids`` reads back from Flink) as the plan model, and binding by it.

Expected ids come from Flink: every fixture's ids.json was written by Flink's own hasher while the fixture's
checkpoint was made, and has the shape the Java helper writes."""

from __future__ import annotations

import copy
import json
import re
import zipfile
from pathlib import Path

import pytest
from support.fixtures import Fixture, all_fixtures, fixture_named

from spillway.api import UsageError
from spillway.cli.options import Naming
from spillway.flink import operator_ids
from spillway.flink.job_ids import parse_job_ids
from spillway.storage.job_graph import jar_release
from spillway.storage.load import load_checkpoint


def _ids(f: Fixture) -> dict:
    return json.loads((f.root / "ids.json").read_text())


@pytest.mark.parametrize("fixture", [pytest.param(f, id=f.name) for f in all_fixtures()])
def test_flinks_ids_bind_every_operator_of_every_fixture_exactly(fixture: Fixture) -> None:
    flink = _ids(fixture)
    job = parse_job_ids(flink)
    checkpoint = load_checkpoint(str(fixture.checkpoint_dir)).checkpoint
    stored = [o.operator_id for o in checkpoint.operators]
    binding = operator_ids.bind(job.graph, stored, format_version=checkpoint.format_version)

    by_node = {n["id"]: n for n in flink["stream_nodes"]}
    assert len(binding.operators) == len(by_node)
    for b in binding.operators:
        node = by_node[b.node_id]
        assert (b.name, b.method, b.operator_id) == (node["name"], "flink-id", node["operator_id"])
        assert b.vertex_id == node["vertex_id"]
        assert b.exact == (node["operator_id"] in stored) == b.in_checkpoint
        assert b.reason.startswith("Flink's id from the job's jar")
    # every operator the checkpoint holds is one of the job's: nothing left over, nothing guessed
    assert binding.unclaimed == ()


def test_vertices_are_head_first_and_edges_keep_their_partitioners() -> None:
    flink = _ids(fixture_named("1.20.3-prod-no-uid"))
    job = parse_job_ids(flink)
    for raw, v in zip(flink["vertices"], job.vertices, strict=True):
        assert v.operator_ids == tuple(reversed(raw["operator_ids"]))  # Flink lists them tail first
        assert v.id == v.operator_ids[0]  # a vertex id is its head operator's id
    assert {(e.source, e.target, e.partitioner) for e in job.graph.edges} == {
        (e["source"], e["target"], e["partitioner"]) for e in flink["stream_edges"]
    }
    plan = job.job_graph()
    assert [v.id for v in plan.vertices] == [v["id"] for v in flink["vertices"]]
    # the stream plan it prints lists every node after its inputs
    seen: set[int] = set()
    for node in job.stream_plan()["nodes"]:
        assert all(p["id"] in seen for p in node["predecessors"])
        seen.add(node["id"])


def test_the_set_uid_hash_id_binds_when_the_checkpoint_holds_it() -> None:
    flink = copy.deepcopy(_ids(fixture_named("1.20.3-prod-no-uid")))
    node = next(n for n in flink["stream_nodes"] if n["name"] == "slow-count")
    old_id = node["operator_id"]
    given = "0123456789abcdef0123456789abcdef"
    node["user_hash"] = given
    job = parse_job_ids(flink)
    others = [n["operator_id"] for n in flink["stream_nodes"] if n is not node]

    restored_from_old = operator_ids.bind(job.graph, [*others, given], release="1.20.3")
    bound = next(b for b in restored_from_old.operators if b.name == "slow-count")
    assert (bound.operator_id, bound.exact) == (given, True)
    assert "setUidHash" in bound.reason

    written_by_job = operator_ids.bind(job.graph, [*others, old_id], release="1.20.3")
    bound = next(b for b in written_by_job.operators if b.name == "slow-count")
    assert (bound.operator_id, bound.exact) == (old_id, True)


def test_an_operator_the_checkpoint_lacks_is_not_in_it() -> None:
    flink = _ids(fixture_named("1.20.3-prod-no-uid"))
    job = parse_job_ids(flink)
    missing = next(n for n in flink["stream_nodes"] if n["name"] == "length")
    rest = [n["operator_id"] for n in flink["stream_nodes"] if n is not missing]
    binding = operator_ids.bind(job.graph, rest, release="1.20.3")
    bound = next(b for b in binding.operators if b.name == "length")
    assert (bound.operator_id, bound.in_checkpoint, bound.exact) == (missing["operator_id"], False, False)
    assert "not in the checkpoint" in bound.reason


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d.pop("vertices"), "no field 'vertices'"),
        (lambda d: d["stream_nodes"][1].update(operator_id="xyz"), "stream_nodes[1].operator_id"),
        (lambda d: d["stream_nodes"][0].update(parallelism="2"), "stream_nodes[0].parallelism"),
        (lambda d: d["stream_edges"][0].update(target=999), "stream_edges"),
        (lambda d: d["vertices"][0].update(id=7), "vertices[0].id"),
    ],
)
def test_a_bad_document_names_the_field(change, field: str) -> None:  # type: ignore[no-untyped-def]
    doc = copy.deepcopy(_ids(fixture_named("1.20.3-prod")))
    change(doc)
    with pytest.raises(ValueError, match=None) as err:
        parse_job_ids(doc)
    assert field in str(err.value)


def test_release_of_a_fat_jar_is_the_flink_it_bundles(tmp_path: Path) -> None:
    fat = tmp_path / "fat.jar"
    with zipfile.ZipFile(fat, "w") as jar:
        jar.writestr("META-INF/maven/org.apache.flink/flink-connector-files/pom.properties", "version=1.18.1\n")
        jar.writestr("META-INF/maven/org.apache.kafka/kafka-clients/pom.properties", "version=3.4.0\n")
        jar.writestr("META-INF/maven/org.apache.flink/flink-connector-kafka/pom.properties", "version=3.2.0-1.18\n")
    assert jar_release(fat) == "1.18.1"
    thin = tmp_path / "thin.jar"
    with zipfile.ZipFile(thin, "w") as jar:
        jar.writestr("com/example/Job.class", b"\xca\xfe\xba\xbe")
    assert jar_release(thin) is None
    with pytest.raises(UsageError, match="not a jar"):
        jar_release(Path(__file__))


def test_job_options_need_job_and_exclude_plan() -> None:
    with pytest.raises(UsageError, match="--job-arg need --job"):
        Naming(job_arg=["x"]).plan_or_job(None)
    with pytest.raises(UsageError, match="--plan and --job both given"):
        Naming(job="job.jar").plan_or_job("plan.json")
    with pytest.raises(UsageError, match="--uid and --uid-map are not taken with --job"):
        Naming(uid=["parse=parse-events"], job="job.jar").plan_or_job(None)
    job = Naming(
        job="job.jar", job_class="com.example.Main", job_arg=["--p", "3"], job_flink_version="1.20.3"
    ).plan_or_job(None)
    assert not isinstance(job, str) and job is not None
    assert (job.entry_class, tuple(job.args), job.flink_version) == ("com.example.Main", ("--p", "3"), "1.20.3")


def test_flink_home_is_used_only_for_its_own_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spillway.storage.flink_release import flink_lib

    lib = tmp_path / "flink-1.18.1" / "lib"
    lib.mkdir(parents=True)
    monkeypatch.setenv("FLINK_HOME", str(lib.parent))
    with pytest.raises(UsageError, match="no lib/flink-dist"):
        flink_lib("1.18.1")
    (lib / "flink-dist-1.18.1.jar").write_bytes(b"")
    assert flink_lib("1.18.1") == lib
    with pytest.raises(UsageError, match=re.escape("is Flink 1.18.1, the job is for 1.20.3")):
        flink_lib("1.20.3")
    (lib / "flink-dist-1.18.1.jar").rename(lib / "flink-dist_2.12-1.18.1.jar")  # the Scala-suffixed name
    assert flink_lib("1.18.1") == lib
