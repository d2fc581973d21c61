"""``spillway.open`` and the read-side door (spillway/api/): one binding per opened checkpoint, results whose
``to_json()`` the CLI prints, option dataclasses whose errors speak Python, exports that resolve. Expected
values come from the fixtures (Flink's ids in ids.json, its loader's view in oracle.json), not from spillway."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import fixture_named

import spillway
from spillway import api

ROOT = Path(__file__).resolve().parents[2]
PROD = fixture_named("1.20.3-prod")  # a 1.x stream-graph plan whose uids differ from the names
COUNTED = fixture_named("2.3.0-counted")


def _flink_ids(name: str) -> dict[str, str]:
    ids = json.loads((fixture_named(name).root / "ids.json").read_text())["stream_nodes"]
    return {n["name"]: n["operator_id"] for n in ids}


def test_every_export_resolves_to_the_module_that_defines_it() -> None:
    for name, module in api._EXPORTS.items():
        value = getattr(api, name)
        assert value is getattr(importlib.import_module(module), name)
        # defined there, not re-exported from elsewhere: each name has one home
        assert getattr(value, "__module__", module) == module, (name, module)
    assert sorted(dir(api)) == sorted(api.__all__) == sorted(api._EXPORTS)


def test_the_package_offers_open_and_checkpoint_and_no_second_api() -> None:
    """One way in: ``spillway.open`` gives a ``Checkpoint``; the first API's free functions (and the path-based
    repairs) are gone, and ``spillway.rescale`` is a package only (nothing makes it callable)."""
    code = (
        "import spillway, spillway.rescale, spillway.repair, types\n"
        "print(spillway.open is spillway.api.open, spillway.Checkpoint is spillway.api.Checkpoint)\n"
        "print(type(spillway.rescale) is types.ModuleType, callable(spillway.rescale))\n"
        "print([n for n in ('validate', 'analyze', 'open_checkpoint', 'load_plan', 'restore_verdict')"
        " if hasattr(spillway, n) or hasattr(spillway.api, n)])\n"
        "print([n for n in ('relocate', 'strip_channel_state') if hasattr(spillway.repair, n)])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["True True", "True False", "[]", "[]"]


def test_no_export_is_shadowed_by_a_submodule_of_the_same_name() -> None:
    # Python binds a submodule to its package's attribute on import: an export named like a submodule would be
    # replaced by the module (as spillway.rescale once was).
    submodules = {p.stem for p in (ROOT / "spillway" / "api").glob("*.py")}
    assert not submodules & set(api._EXPORTS)
    code = "import spillway.api.session, spillway.api; print(spillway.api.keygroup('1', 'int').key_group)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_a_checkpoint_binds_its_plan_once_and_every_result_shares_it() -> None:
    cp = spillway.open(PROD.root / "checkpoints", plan=PROD.root / "plan.json")
    binding = cp.binding
    assert binding is not None and cp.binding is binding
    flinks = _flink_ids(PROD.name)
    assert {b.name: b.operator_id for b in binding.operators} == flinks  # deduced, without uids
    validated, analyzed = cp.validate(), cp.analyze()
    assert validated.binding is binding and analyzed.binding is binding
    assert validated.to_json()["binding"] == analyzed.to_json()["binding"] == cp.binding_json()
    flink = json.loads(PROD.oracle.read_text())
    assert analyzed.to_json()["checkpoint_id"] == flink["checkpoint_id"] == cp.model.checkpoint_id


def test_uids_and_a_uid_map_bind_through_flinks_uid_hash(tmp_path: Path) -> None:
    ids = json.loads((PROD.root / "ids.json").read_text())["stream_nodes"]
    uids = {n["name"]: n["uid"] for n in ids if n["uid"]}
    uid_map = tmp_path / "uids.json"
    uid_map.write_text(json.dumps(uids))
    for cp in (
        spillway.open(PROD.root / "checkpoints", plan=PROD.root / "plan.json", uids=uids),
        spillway.open(PROD.root / "checkpoints", plan=PROD.root / "plan.json", uid_map=uid_map),
    ):
        assert cp.binding is not None
        by_uid = {b.name: b.operator_id for b in cp.binding.operators if b.method == "uid-hash"}
        assert set(by_uid) == set(uids) and by_uid == {k: _flink_ids(PROD.name)[k] for k in uids}


def test_files_and_diff_name_operators_by_the_plan() -> None:
    flinks = {v: k for k, v in _flink_ids(PROD.name).items()}
    doc = api.files(PROD.root / "checkpoints", plan=PROD.root / "plan.json").to_json()
    named = {o["operator_id"]: o["plan_name"] for cp in doc["checkpoints"] for o in cp["operators"]}  # type: ignore[index, union-attr]
    assert named and all(flinks[i] == n for i, n in named.items())
    same = api.diff(PROD.root / "checkpoints", PROD.root / "checkpoints", plan=PROD.root / "plan.json")
    assert same.identical and same.to_json()["schema"] == "spillway.diff/1"


def _relative_files(node: Any) -> set[str]:
    """Every relative file name in Flink's own reading of a ``_metadata`` (oracle.json)."""
    if isinstance(node, dict):
        found = {node["relative_path"]} if isinstance(node.get("relative_path"), str) else set()
        return found.union(*(_relative_files(v) for v in node.values()))
    return set().union(*(_relative_files(v) for v in node)) if isinstance(node, list) else set()


def test_files_and_diff_take_opened_checkpoints_and_paths_alike() -> None:
    unaligned, rescaled = fixture_named("2.3.0-unaligned"), fixture_named("2.3.0-unaligned-p3")
    expected = _relative_files(json.loads(unaligned.oracle.read_text())["operators"])
    opened = spillway.open(unaligned.root / "checkpoints")
    for given in ([opened], [unaligned.root / "checkpoints"], opened):
        doc = api.files(given).to_json()
        assert {f["name"] for f in doc["files"]} == expected, given
    sides = [json.loads(f.oracle.read_text()) for f in (unaligned, rescaled)]
    expected_sides = [(o["checkpoint_id"], len(o["operators"])) for o in sides]
    later = spillway.open(rescaled.root / "checkpoints")
    for a, b in ((opened, rescaled.root / "checkpoints"), (unaligned.root / "checkpoints", later)):
        doc = api.diff(a, b).to_json()
        assert not doc["identical"]
        assert [(doc[s]["checkpoint_id"], doc[s]["operators"]) for s in ("a", "b")] == expected_sides


@pytest.mark.parametrize(
    ("make", "argument", "words"),
    [
        (lambda: api.ForecastOptions({"count": 0}), "parallelism", "parallelism['count']=0: must be a positive"),
        (lambda: api.ForecastOptions({}), "parallelism", "parallelism: name at least one vertex"),
        (lambda: api.buffer_settings(buffer_size=63), "buffer_size", "buffer_size=63: at least 64 bytes"),
        (lambda: api.buffer_settings(buffers_per_channel=-1), "buffers_per_channel", "must not be negative"),
        (lambda: api.AnalyzeOptions(records=True), "records", "records: needs parquet"),
        (lambda: api.AnalyzeOptions(value_type="tuple(nope)"), "value_type", "value_type='tuple(nope)': "),
        (lambda: api.PreflightOptions(flink_version="2.x"), "flink_version", "expected X.Y.Z"),
        (lambda: api.PreflightOptions(max_parallelism={None: 0}), "max_parallelism", "must be a positive"),
        (lambda: api.keygroup("x", "long"), "key", "key='x': is not an integer"),
        (lambda: api.keygroup("1", "int", 128, 129), "parallelism", "need 0 < parallelism"),
        (lambda: api.RescaleOptions({}, "o"), "parallelism", "parallelism: name at least one vertex"),
        (lambda: api.RescaleOptions({"count": 0}, "o"), "parallelism", "parallelism['count']=0: must be a positive"),
        (lambda: api.RescaleOptions({"count": 3}), "out", "out: the new checkpoint's directory is needed unless"),
        (lambda: api.RescaleOptions({"count": 3}, "o", buffer_size=32), "buffer_size", "buffer_size=32: at least 64"),
        (lambda: api.RescaleOptions({"c": 3}, "o", buffers_per_channel=-1), "buffers_per_channel", "not be negative"),
        (lambda: api.RelocateOptions("o", "", "/new"), "old", "old: the path prefix must not be empty"),
        (lambda: api.RelocateOptions("o", "/old", ""), "new", "new: the path prefix must not be empty"),
        (lambda: api.StripOptions("o", "slow"), "operators", "operators='slow': expected a list of operator ids"),
        (lambda: api.ClearFinishedOptions("o", [""]), "operators", "operators=['']: expected a list of operator ids"),
        (lambda: api.DropOperatorOptions("o"), "operators", "operators: name the operator(s) to drop"),
    ],
)
def test_argument_errors_speak_python(make: Any, argument: str, words: str) -> None:
    with pytest.raises(api.ArgumentError) as caught:
        make()
    assert caught.value.argument == argument and words in str(caught.value)
    assert "--" not in str(caught.value)  # no CLI option in a library error
    assert caught.value.exit_code == api.ExitStatus.USAGE and isinstance(caught.value, spillway.UsageError)


def test_key_extractors_are_checked_as_for_rescale() -> None:
    # one check (spillway.rescale.rescale_options.check_key_specs) for the forecast and the rescale alike
    for make in (api.ForecastOptions, lambda p, **k: api.RescaleOptions(p, dry_run=True, **k)):
        with pytest.raises(api.ArgumentError, match=r"^keys\['count'\]='tuple:x': value spec 'tuple:x': unknown type"):
            make({"count": 3}, keys={"count": "tuple:x"})
        with pytest.raises(api.ArgumentError, match=r"^key_fns\['count'\]='nofunction': expected module:function"):
            make({"count": 3}, key_fns={"count": "nofunction"})
        with pytest.raises(api.ArgumentError, match=r"^key_fns\['count'\]='m:f': also has a key extractor in keys"):
            make({"count": 3}, keys={"count": "long"}, key_fns={"count": "m:f"})


def test_a_forecast_needs_the_plan_and_says_so_in_python() -> None:
    cp = spillway.open(COUNTED.checkpoint_dir)
    with pytest.raises(api.ArgumentError, match=r"^forecast: needs the plan"):
        cp.analyze(api.AnalyzeOptions(forecast=api.ForecastOptions({"count": 3})))
    with pytest.raises(spillway.UsageError, match=r"^uids and uid_map need a plan"):
        spillway.open(COUNTED.checkpoint_dir, uids={"a": "b"})


def test_preflight_of_the_job_itself_answers_restorable() -> None:
    plan = COUNTED.root / "jobgraph.json"
    cp = spillway.open(COUNTED.checkpoint_dir, plan=plan)
    assert cp.verdict().restorable is True  # type: ignore[union-attr]
    # the counted job sets max parallelism 128 (Counted.java), which no plan shows
    answer = cp.preflight(plan, api.PreflightOptions(max_parallelism={None: 128}))
    assert answer.restorable is True and answer.to_json()["plan"] == str(plan)


def test_analyze_into_parquet_keeps_the_records_asked_for(tmp_path: Path) -> None:
    """``keep_records`` holds on the Parquet path too: the first N records of each channel are kept, the
    same ones (value and place) records.parquet starts that channel with."""
    import pyarrow.parquet as pq

    cp = spillway.open(COUNTED.checkpoint_dir, plan=COUNTED.root / "jobgraph.json")
    result = cp.analyze(api.AnalyzeOptions(parquet=tmp_path / "pq", records=True, keep_records=2))
    rows: dict[str, list[dict[str, Any]]] = {}
    for row in pq.read_table(tmp_path / "pq" / "records.parquet").to_pylist():
        rows.setdefault(row["channel"], []).append(row)
    counted = [c for c in result.analysis.channels if c.records]
    assert counted
    for c in counted:
        kept = [(r["seq"], r["position"]["file"], r["position"]["offset"], r["value"]) for r in c.record_list]
        written = [(r["seq"], r["file"], r["offset"], r["value"]) for r in rows[c.label]]
        assert len(kept) == min(2, c.records) and kept == written[: len(kept)], c.label


def test_a_forecast_comes_with_an_unknown_answer_too() -> None:
    """Flink 2.3.0 restored the counted checkpoint rescaled with mixed inputs (recorded); without the release
    preflight cannot tell (FLINK-38267: 1.15.4 and 2.0.0 refused it) and answers unknown, but the restore is
    still a rescale of this job: its forecast is given, the same as when the release is named and the answer
    is yes."""
    from support.preflight_matrix import job_uids, load_recorded, recorded_dir

    assert load_recorded("2.3.0", "mixed-inputs-rescaled")["outcome"] == "restored"
    plan = api.read_plan(
        recorded_dir("2.3.0", "mixed-inputs-rescaled") / "jobgraph.json", uids=job_uids("2.3.0", "counted")
    )
    cp = spillway.open(COUNTED.checkpoint_dir)
    unknown = cp.preflight(plan, api.PreflightOptions(max_parallelism={None: 128}))
    known = cp.preflight(plan, api.PreflightOptions(max_parallelism={None: 128}, flink_version="2.3.0"))
    assert (unknown.result.restorable, known.result.restorable) == (None, True)
    assert unknown.forecast is not None and unknown.forecast_note is None
    assert unknown.forecast == known.forecast


def test_parquet_output_keeps_the_records_asked_for(tmp_path: Path) -> None:
    """``keep_records=N`` keeps the first N records of each channel whether or not channels.parquet is written."""
    cp = spillway.open(COUNTED.checkpoint_dir, plan=COUNTED.root / "jobgraph.json")
    result = cp.analyze(api.AnalyzeOptions(keep_records=2, parquet=tmp_path / "out"))
    assert (tmp_path / "out" / "channels.parquet").is_file()
    with_records = [c for c in result.analysis.channels if (c.records or 0) >= 2]
    assert with_records and all(len(c.record_list) == 2 for c in with_records)
    assert all(len(c.record_list) == (c.records or 0) for c in result.analysis.channels if (c.records or 0) < 2)


def test_a_rescaled_job_gets_its_forecast_even_when_the_verdict_is_unknown() -> None:
    """The forecast is made whenever the new job is the checkpoint's job rescaled and Flink does not refuse it:
    without the max parallelism the counted job sets (128, which no plan shows) the verdict is unknown, and the
    forecast is the same as with it."""
    plan = COUNTED.root / "jobgraph.json"
    cp = spillway.open(COUNTED.checkpoint_dir, plan=plan)
    count, key = {"count": 3}, {"count": "tuple:0:long"}
    unknown = cp.preflight(plan, api.PreflightOptions(parallelism=count, keys=key))
    known = cp.preflight(plan, api.PreflightOptions(parallelism=count, keys=key, max_parallelism={None: 128}))
    assert unknown.restorable is None and known.restorable is True
    assert unknown.forecast is not None and unknown.forecast == known.forecast
    assert unknown.to_json()["forecast"] == known.forecast
    assert "recovery" in [r.check for r in unknown.result.reasons]
