"""``spillway report --html``: escaping, the no-clobber write, exit codes (the browser test is in
tests/integration/test_report_browser.py)."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

from click.testing import CliRunner

from spillway.cli.app import app
from spillway.inspect.html_report import render_html, report_document
from spillway.inspect.topology import load_plan
from spillway.storage.load import load_checkpoint

FIXTURES = Path(__file__).parents[1] / "fixtures"
UNALIGNED = FIXTURES / "2.3.0-unaligned"


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_every_name_is_escaped_and_the_json_block_cannot_be_closed() -> None:
    loaded = load_checkpoint(str(UNALIGNED / "checkpoints"))
    doc = report_document(loaded, load_plan(str(UNALIGNED / "jobgraph.json")), "src")
    hostile = '</script><script>alert(1)</script><b x="1">[[a]]&amp;'
    doc = copy.deepcopy(doc)
    for o in doc["analyze"]["operators"]:
        o["name"] = hostile + o["operator_id"]
    doc["analyze"]["edges"][0]["upstream"] = hostile
    doc["source"] = hostile
    html = render_html(doc)
    assert "<script>alert" not in html and "<b x=" not in html
    assert html.count("</script>") == 1  # only the JSON block's own end
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;b x=&quot;1&quot;&gt;[[a]]&amp;amp;" in html
    block = re.search(r'<script type="application/json" id="spillway-report">(.*?)</script>', html, re.S)
    assert block is not None
    assert json.loads(block.group(1)) == doc
    assert render_html(doc) == html  # pure


def test_existing_file_needs_force_and_nothing_is_left_behind(tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    page.write_text("keep me")
    args = ["report", str(UNALIGNED / "checkpoints"), "--plan", str(UNALIGNED / "jobgraph.json"), "--html", str(page)]
    code, output = _run(*args)
    assert code == 2 and "--force" in output
    assert page.read_text() == "keep me"
    code, output = _run(*args, "--force")
    assert code == 0, output
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]


def test_usage_errors_write_nothing(tmp_path: Path) -> None:
    cp = str(UNALIGNED / "checkpoints")
    assert _run("report", cp, "--html", str(tmp_path / "no" / "r.html"))[0] == 2
    assert _run("report", cp, "--html", str(tmp_path))[0] == 2
    assert _run("report", str(tmp_path / "missing"), "--html", str(tmp_path / "r.html"))[0] == 2
    assert _run("report", cp)[0] == 2  # --html is required
    assert list(tmp_path.iterdir()) == []


def test_without_plan_the_page_says_there_is_no_verdict(tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    code, output = _run("report", str(UNALIGNED / "checkpoints"), "--html", str(page))
    assert code == 0, output
    assert "no plan given" in page.read_text()


def test_without_plan_the_page_does_not_call_the_checkpoint_sound(tmp_path: Path) -> None:
    """Without a plan the output side is not framed: the banner says so instead of "sound" (issue 21)."""
    page = tmp_path / "r.html"
    assert _run("report", str(UNALIGNED / "checkpoints"), "--html", str(page))[0] == 0
    html = page.read_text()
    banner = re.search(r'<div class="banner (\w+)" id="validate-banner">([^<]*)</div>', html)
    assert banner is not None and banner.group(1) == "warn" and "sound" not in banner.group(2)
    outputs = sum(
        len(h.get("channels", [h]))
        for op in json.loads((UNALIGNED / "oracle.json").read_text())["operators"]
        for sub in op["subtasks"]
        for h in sub["result_subpartition_state"]
    )
    assert f"{outputs} part(s) unchecked" in banner.group(2)
    assert re.search(rf'<tr class="unchecked"><td class="n">{outputs}</td>', html)


def test_damaged_checkpoint_exit_1_and_the_page_lists_the_errors(tmp_path: Path) -> None:
    src = tmp_path / "cp"
    shutil.copytree(UNALIGNED / "checkpoints", src)
    channel_file = max(
        (p for p in src.rglob("*") if p.is_file() and p.name != "_metadata"), key=lambda p: p.stat().st_size
    )
    channel_file.write_bytes(channel_file.read_bytes()[: channel_file.stat().st_size // 2])
    page = tmp_path / "r.html"
    code, output = _run("report", str(src), "--plan", str(UNALIGNED / "jobgraph.json"), "--html", str(page))
    assert code == 1, output
    assert "validate errors" in output
    html = page.read_text()
    assert 'class="banner bad" id="validate-banner"' in html
    assert 'class="sev-error"' in html
