"""``spillway report --new-plan``: the page and its ``spillway.report/1`` document carry spillway preflight's answer
for the new job — through the installed console script, on recorded real restores (tests/fixtures/preflight-matrix/):
the expected answer is what Flink did (flink.json), never spillway's output."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from support.console import run
from support.fixtures import fixture_named
from support.preflight_matrix import CASES, job_uids, load_recorded, recorded_dir

RELEASE = "1.20.3"
FLINK_ANSWER = {"refused": "no", "restored": "yes"}


def _args(case: str) -> list[str]:
    """What a user of the case's job gives: the checkpoint's own plan, the recorded new plan, the job's uids, the
    max parallelism the job sets (the counted job calls setMaxParallelism(128)), the recorded restore options."""
    c = CASES[case]
    fx = fixture_named(f"{RELEASE}-{c.fixture}")
    flink = load_recorded(RELEASE, case)
    args = [str(fx.checkpoint_dir), "--plan", str(fx.root / "plan.json")]
    args += ["--new-plan", str(recorded_dir(RELEASE, case) / "jobgraph.json"), "--flink-version", RELEASE]
    for name, uid in job_uids(RELEASE, c.fixture).items():
        args += ["--uid", f"{name}={uid}"]
    mp = c.max_parallelism or (128 if c.fixture == "counted" else None)
    if mp is not None:
        args += ["--max-parallelism", str(mp)]
    if flink["allow_non_restored_state"]:
        args.append("--allow-non-restored-state")
    return args


def _page(tmp_path: Path, *args: str) -> tuple[str, dict[str, Any]]:
    page = tmp_path / "r.html"
    code, out, err = run(["report", *args, "--html", str(page)])
    assert code == 0, out + err  # written; the checkpoint is sound
    html = page.read_text()
    block = re.search(r'<script type="application/json" id="spillway-report">\n(.*)\n</script>', html, re.S)
    assert block is not None
    return html, json.loads(block.group(1))


def _text(html: str, element_id: str) -> str:
    start = html.index(f'id="{element_id}"')
    end = html.index("</table>", start) if "<table" in html[start - 80 : start] else html.index("</p>", start)
    return unescape(re.sub(r"<[^>]+>", " ", html[start:end]))


@pytest.mark.parametrize("case", ["removed-stateful", "pointwise-rescaled", "keyed-up"])
def test_the_page_answers_as_flink_did(tmp_path: Path, case: str) -> None:
    flink = load_recorded(RELEASE, case)
    html, doc = _page(tmp_path, *_args(case))
    pre = doc["preflight"]
    assert doc["schema"] == "spillway.report/1" and pre["schema"] == "spillway.preflight/2"
    answer = FLINK_ANSWER[flink["outcome"]]
    assert {True: "yes", False: "no", None: "unknown"}[pre["restorable"]] == answer
    assert "Will Flink restore this into that job?" in html
    assert f'data-restorable="{answer}"' in html and f"restorable: <b>{answer}</b>" in html
    reasons = _text(html, "preflight-reasons")
    for r in pre["reasons"]:  # every reason is on the page, with its verdict
        assert r["check"] in reasons and r["message"] in reasons
    if flink["outcome"] == "refused":
        refused = [r for r in pre["reasons"] if r["verdict"] == "refused"]
        assert refused, pre["reasons"]
        # Flink's own words (after the restore path only its message names) are on the page
        words = flink["error"].split("chk-3. ", 1)[-1].splitlines()[0]
        assert any(words in (r.get("flink_message") or "") for r in refused)
        assert words in reasons
        assert 'id="preflight-banner">preflight: Flink would refuse' in html
    else:
        assert not [r for r in pre["reasons"] if r["verdict"] in ("refused", "unknown")]
        assert 'id="preflight-banner">preflight: Flink would restore' in html


def test_the_answer_with_flinks_failure_is_unknown(tmp_path: Path) -> None:
    # Flink accepted this restore and the task then failed reading the cut records: neither yes nor no
    case = "removed-stateful-allowed"
    assert load_recorded(RELEASE, case)["outcome"] == "failed"
    html, doc = _page(tmp_path, *_args(case))
    assert doc["preflight"]["restorable"] is None
    assert 'data-restorable="unknown"' in html and "dropped-channel-state" in _text(html, "preflight-reasons")


def test_without_new_plan_preflight_is_null_and_the_section_says_how_to_ask(tmp_path: Path) -> None:
    fx = fixture_named(f"{RELEASE}-counted")
    html, doc = _page(tmp_path, str(fx.checkpoint_dir), "--plan", str(fx.root / "plan.json"))
    assert doc["preflight"] is None
    assert "Will Flink restore this into that job?" in html and "--new-plan" in html
    assert 'id="preflight-banner"' not in html


def test_new_job_options_without_new_plan_are_usage_errors(tmp_path: Path) -> None:
    fx = fixture_named(f"{RELEASE}-counted")
    code, _, err = run(["report", str(fx.checkpoint_dir), "--max-parallelism", "128", "--html", str(tmp_path / "r")])
    assert code == 2 and "only with --new-plan" in err
    assert not (tmp_path / "r").exists()


def test_new_plan_without_the_checkpoints_plan_takes_the_uids(tmp_path: Path) -> None:
    args = _args("removed-stateful")
    i = args.index("--plan")
    del args[i : i + 2]
    _, doc = _page(tmp_path, *args)
    assert doc["analyze"]["restore_verdict"] is None  # no plan of the checkpoint's job
    assert doc["preflight"]["restorable"] is False  # Flink refused (flink.json)
