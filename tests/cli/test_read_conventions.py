"""The read-side commands' conventions, through the installed console script: one name per concept
(``-p/--parallelism VERTEX=N``, ``--buffer-size``, ``--out FILE``/``-``), the old names kept as hidden aliases,
usage errors in the CLI's words, and each ``--json`` document exactly the API result's ``to_json()``.
Expected values come from the fixtures (the job's settings, Flink's ids and key groups), not from spillway."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.console import run, spillway
from support.fixtures import fixture_named

import spillway as api_root
from spillway import api

COUNTED = fixture_named("2.3.0-counted")  # count is keyed by the Tuple2's first field (a long)
PLAN = str(COUNTED.root / "jobgraph.json")
CHK = str(COUNTED.checkpoint_dir)
KEY = ["--key", "count=tuple:0:long"]


def _json(*args: str) -> dict[str, Any]:
    done = spillway(*args)
    assert done.code == 0, done.err
    doc: dict[str, Any] = json.loads(done.out)
    return doc


def _segment_size() -> int:
    """The network buffer size the job ran with (its fixture.json settings, e.g. "4kb")."""
    text = json.loads((COUNTED.root / "fixture.json").read_text())["settings"]["taskmanager.memory.segment-size"]
    assert text.endswith("kb")
    return int(text[:-2]) * 1024


def test_analyze_parallelism_forecasts_and_the_old_name_is_a_hidden_alias() -> None:
    doc = _json("analyze", CHK, "--plan", PLAN, "-p", "count=3", *KEY, "--json")
    old = _json("analyze", CHK, "--plan", PLAN, "--new-parallelism", "count=3", *KEY, "--json")
    assert doc == old and doc["forecast"] is not None
    # every record in flight on count's edges is routed once, to count's three new subtasks
    on_count = [e for e in doc["edges"] if "count" in (e["upstream"], e["downstream"])]
    assert doc["forecast"]["spillway"]["records"] == sum(e["records"] for e in on_count) > 0
    assert {f["subtask"] for f in doc["forecast"]["spillway"]["files"] if f["vertex"] == "count"} == {0, 1, 2}
    assert _json("analyze", CHK, "--plan", PLAN, "--parallelism", "count=3", *KEY, "--json") == doc
    helptext = spillway("analyze", "-h", env={"COLUMNS": "120"}).out
    assert "-p, --parallelism" in helptext and "--new-parallelism" not in helptext


def test_a_forecast_at_the_current_parallelism_says_so_without_an_old_option_name() -> None:
    plan = json.loads(Path(PLAN).read_text())  # the job graph Flink's REST API gave for the job
    count = next(n["parallelism"] for n in plan.get("plan", plan)["nodes"] if n["description"].startswith("count<"))
    done = spillway("analyze", CHK, "--plan", PLAN, "-p", f"count={count}", *KEY, "--json")
    doc = json.loads(done.out)
    assert done.code == 1 and doc["error"].startswith("nothing to forecast: every vertex named keeps its current")
    assert "--" not in doc["error"]


def test_one_buffer_size_option_and_segment_size_is_its_hidden_alias() -> None:
    size = _segment_size()
    args = ["analyze", CHK, "--plan", PLAN, "-p", "count=3", *KEY, "--json"]
    doc = _json(*args, "--buffer-size", str(size))
    assert doc["forecast"]["flink"]["settings"]["segment_size"] == size
    assert _json(*args, "--segment-size", str(size)) == doc
    for command in (["analyze"], ["preflight"]):
        helptext = spillway(*command, "-h", env={"COLUMNS": "120"}).out
        assert "--buffer-size" in helptext and "--segment-size" not in helptext
    bad = spillway(*args, "--buffer-size", "32")
    assert bad.code == 2 and "--buffer-size 32: at least 64 bytes" in json.loads(bad.out)["error"]
    assert "buffer_size" not in bad.err  # the CLI's words, not the API's argument name


def test_preflight_takes_the_same_buffer_size() -> None:
    size = _segment_size()
    doc = _json(
        "preflight",
        CHK,
        "--plan",
        PLAN,
        "-p",
        "count=3",
        *KEY,
        "--buffer-size",
        str(size),
        "--max-parallelism",
        "128",
        "--json",
    )
    assert doc["restorable"] is True and doc["forecast"]["flink"]["settings"]["segment_size"] == size


def test_report_out_dash_writes_stdout_and_html_is_an_alias(tmp_path: Path) -> None:
    code, page, err = run(["report", CHK, "--out", "-"], cwd=tmp_path)
    assert code == 0, err
    assert page.startswith("<!DOCTYPE html>") and list(tmp_path.iterdir()) == []  # no file named "-"
    target = tmp_path / "page.html"
    assert run(["report", CHK, "--out", str(target)])[0] == 0
    alias = tmp_path / "alias.html"
    assert run(["report", CHK, "--html", str(alias)])[0] == 0
    embedded = [_embedded(p.read_text()) for p in (target, alias)] + [_embedded(page)]
    assert embedded[0] == embedded[1] == embedded[2]
    assert embedded[0]["metadata_path"].endswith("_metadata")
    code, _, err = run(["report", CHK])
    assert code == 2 and "--out FILE is required" in err
    helptext = run(["report", "-h"], columns=120)[1]
    assert "--out FILE" in helptext and "--html" not in helptext


def _embedded(html: str) -> dict[str, Any]:
    """The spillway.report/1 document the page embeds, without when it was generated."""
    start = html.index('<script type="application/json"')
    body = html[html.index(">", start) + 1 : html.index("</script>", start)]
    doc: dict[str, Any] = json.loads(body)
    doc.pop("generated", None)
    return doc


@pytest.mark.parametrize(
    ("key", "key_type", "hash_code", "key_group", "subtask"),
    [("17", "int", 17, 81, 1), (str(1 << 32), "long", 1, 86, 2), ("true", "boolean", 1231, 77, 1)],
)
def test_keygroup_json_is_flinks_routing(key: str, key_type: str, hash_code: int, key_group: int, subtask: int) -> None:
    # Flink 2.3.0's own KeyGroupRangeAssignment at max parallelism 128, parallelism 3 (tests/unit/test_keygroups.py)
    doc = _json("keygroup", key, "--type", key_type, "--max-parallelism", "128", "--parallelism", "3", "--json")
    assert doc["schema"] == "spillway.keygroup/1"
    assert (doc["hash_code"], doc["key_group"], doc["subtask"]) == (hash_code, key_group, subtask)
    assert doc == api.keygroup(key, key_type, 128, 3).to_json()


@pytest.mark.parametrize("command", [["files", CHK], ["diff", CHK, CHK]])
def test_files_and_diff_say_a_usage_error_as_json(command: list[str], tmp_path: Path) -> None:
    for extra, words in (
        (["--uid", "a=b"], "--uid and --uid-map need --plan"),
        (["--plan", str(tmp_path / "none.json")], "no such plan file"),
        (["--rebase", "nonsense"], "--rebase expects OLD_PREFIX=NEW_PREFIX"),
    ):
        done = spillway(*command, *extra, "--json")
        doc = json.loads(done.out)
        assert done.code == 2 and doc["schema"] == "spillway.error/1" and words in doc["error"], done.out


@pytest.mark.parametrize(
    "name",
    ["1.20.3-prod", "2.3.0-unaligned", "1.14.6-prod-finished"],
)
def test_each_json_document_is_the_api_results_to_json(name: str) -> None:
    fx = fixture_named(name)
    plan = str(fx.root / ("jobgraph.json" if name.startswith("2.") else "plan.json"))
    chk = str(fx.checkpoint_dir)
    cp = api_root.open(chk, plan=plan)

    def printed(*args: str) -> str:
        done = spillway(*args, "--json")
        assert done.code in (0, 1, 4), done.err
        return done.out

    def compact(doc: dict[str, Any]) -> str:
        return json.dumps(doc, separators=(",", ":")) + "\n"  # what a command writes into a pipe

    assert printed("validate", chk, "--plan", plan) == compact(cp.validate().to_json())
    assert printed("analyze", chk, "--plan", plan) == compact(cp.analyze().to_json())
    assert printed("files", chk) == compact(api.files(chk).to_json())
    assert printed("diff", chk, chk) == compact(api.diff(chk, chk).to_json())
    assert printed("preflight", chk, "--plan", plan) == compact(cp.preflight(plan).to_json())
