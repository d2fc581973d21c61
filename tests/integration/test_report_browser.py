"""``spillway report --html`` in a real headless browser (Debian's Chromium; ``make test`` installs it).

Chromium loads the page from a file with networking discouraged, dumps the DOM it built and takes a
screenshot. The numbers the browser shows for every edge, heat-map cell and operator must equal
``spillway analyze --json`` on the same checkpoint, the embedded JSON documents must equal what
``analyze --json``, ``validate --json`` and ``files --json`` print, bracketed SQL vertex names must
survive as text, and the page must reference nothing outside itself.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner

from spillway.cli.app import app
from spillway.inspect.html_report import human_bytes

FIXTURES = Path(__file__).parents[1] / "fixtures"
CASES = ["2.3.0-unaligned", "1.20.3-unaligned", "2.3.0-sql"]


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("chromium is not installed: `make browser` (apt-get install chromium) installs it")
    return found


def _browser(chromium: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / "profile"
    profile.mkdir(exist_ok=True)
    cmd = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=True)


class Dom(HTMLParser):
    """What the browser built: elements with their attributes and text, in document order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[dict[str, Any]] = []
        self.elements: list[dict[str, Any]] = []

    VOID: ClassVar[set[str]] = {"meta", "br", "img", "input", "link", "hr"}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        el = {"tag": tag, "attrs": dict(attrs), "text": "", "children": []}
        if self.stack:
            self.stack[-1]["children"].append(el)
        self.elements.append(el)
        if tag not in self.VOID:
            self.stack.append(el)

    def handle_endtag(self, tag: str) -> None:
        if all(el["tag"] != tag for el in self.stack):
            return
        while self.stack:
            el = self.stack.pop()
            if el["tag"] == tag:
                break

    def handle_data(self, data: str) -> None:
        for el in self.stack:
            el["text"] += data

    def select(self, tag: str, **attrs: str) -> list[dict[str, Any]]:
        return [
            e
            for e in self.elements
            if e["tag"] == tag and all(e["attrs"].get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]


def _fields(row: dict[str, Any]) -> dict[str, str]:
    return {c["attrs"]["data-f"]: c["text"].strip() for c in row["children"] if "data-f" in c["attrs"]}


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _cli_json(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _png_ok(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct byte values in the pixel data): the screenshot is a real, non-blank image."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    idat, pos = b"", 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


@pytest.mark.parametrize("case", CASES)
def test_report_renders_with_the_numbers_of_analyze_json(case: str, chromium: str, tmp_path: Path) -> None:
    checkpoints = str(FIXTURES / case / "checkpoints")
    plan = str(FIXTURES / case / "jobgraph.json")
    page = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", checkpoints, "--plan", plan, "--html", str(page)])
    assert result.exit_code == 0, result.output
    raw = page.read_text()

    # Self-contained: nothing fetched at view time, no script runs.
    assert "http://" not in raw and "https://" not in raw
    assert not re.search(r"<script[^>]*\bsrc", raw, re.I)
    assert not re.search(r"<link\b|@import|<iframe|<img\b", raw, re.I)
    assert re.findall(r"url\(([^)]*)\)", raw) == ["#arrow"] * raw.count("url(")
    assert all('type="application/json"' in tag for tag in re.findall(r"<script[^>]*>", raw))

    dom_text = _browser(chromium, tmp_path, "--virtual-time-budget=2000", "--dump-dom", page.as_uri()).stdout
    dom = Dom()
    dom.feed(dom_text)
    analysis = _cli_json("analyze", checkpoints, "--plan", plan, "--json")
    assert analysis["edges"], "these fixtures have channel state on known edges"

    # Every edge row shows analyze's numbers.
    rows = dom.select("tr", **{"class": "edge-row"})
    assert len(rows) == len(analysis["edges"])
    for row, edge in zip(rows, analysis["edges"], strict=True):
        f = _fields(row)
        assert f["upstream"] == edge["upstream"] and f["downstream"] == edge["downstream"]
        assert f["ship_strategy"] == edge["ship_strategy"]
        for key in ("channels", "buffers", "records", "bytes", "watermarks", "other_elements"):
            assert _int(f[key]) == edge[key], (edge["upstream"], key)

    # Every heat-map cell is one channel of that edge, with its bytes and records.
    heat_tables = [t for t in dom.select("table") if t["attrs"].get("class") == "heat"]
    assert len(heat_tables) == len(analysis["edges"])
    cells = [e for e in dom.elements if e["tag"] == "td" and e["attrs"].get("class") == "cell"]
    by_end = {
        (
            c["upstream"]["operator"],
            c["downstream"]["operator"],
            c["upstream"]["subtask"],
            c["downstream"]["subtask"],
        ): c
        for c in analysis["channels"]
    }
    assert len(cells) == sum(e["channels"] for e in analysis["edges"])
    for table, edge in zip(heat_tables, analysis["edges"], strict=True):
        mine = [e for e in table_cells(table)]
        assert sum(int(c["attrs"]["data-bytes"]) for c in mine) == edge["bytes"]
        for c in mine:
            ch = by_end[
                (edge["upstream"], edge["downstream"], int(c["attrs"]["data-up"]), int(c["attrs"]["data-down"]))
            ]
            assert int(c["attrs"]["data-bytes"]) == ch["bytes"]
            exact = next(x for x in c["children"] if x["attrs"].get("class") == "exact")["text"]
            assert _int(exact.removesuffix(" rec")) == ch["records"]  # "5,454 rec"
            assert c["text"].startswith(human_bytes(ch["bytes"]))

    # Every operator row: finished state and in-flight numbers.
    op_rows = dom.select("tr", **{"class": "op-row"})
    assert len(op_rows) == len(analysis["operators"])
    for row, op in zip(op_rows, analysis["operators"], strict=True):
        f = _fields(row)
        assert f["operator_id"] == op["operator_id"]
        assert f["name"] == (op["name"] or "-")
        assert f["finished_state"].split()[0] == op["finished_state"]
        assert _int(f["in_flight_bytes"]) == op["in_flight_bytes"]
        assert _int(f["in_flight_records"]) == op["in_flight_records"]
        assert int(f["parallelism"]) == op["parallelism"]
    total = dom.select("div", id="total-bytes")[0]
    assert int(total["attrs"]["data-value"]) == sum(c["bytes"] for c in analysis["channels"])

    # The restore verdict and validate's verdict as the browser shows them.
    verdict = dom.select("p", id="verdict-state")[0]
    assert verdict["attrs"]["data-restorable"] == str(analysis["restore_verdict"]["restorable"]).lower()
    assert "would accept" in dom.select("div", id="verdict-banner")[0]["text"]
    assert "sound" in dom.select("div", id="validate-banner")[0]["text"]
    vertex_text = " ".join(e["text"] for e in dom.select("table", id="vertices"))
    for name in analysis["restore_verdict"]["vertices"]:
        assert name in vertex_text  # brackets, arrows and parentheses shown as written

    # The embedded documents are exactly what the JSON commands print.
    script = dom.select("script", id="spillway-report")[0]
    embedded = json.loads(script["text"])
    assert embedded["schema"] == "spillway.report/1"
    assert embedded["analyze"] == analysis
    validated = _cli_json("validate", checkpoints, "--plan", plan, "--json")
    assert embedded["validate"] == validated
    listed = _cli_json("files", checkpoints, "--json")
    assert embedded["files"]["files"] == listed["files"]
    summary = dom.select("p", id="files-summary")[0]
    assert int(summary["attrs"]["data-bytes"]) == listed["checkpoints"][-1]["bytes"]
    sizes = [
        _int(c["text"])
        for e in dom.elements
        if e["attrs"].get("class") == "file-row"
        for c in e["children"]
        if c["attrs"].get("data-f") == "size"
    ]
    assert sizes == [f["size"] for f in listed["files"]]

    # It renders: a real screenshot, not a blank page.
    shot = tmp_path / "shot.png"
    _browser(chromium, tmp_path, "--window-size=1400,1800", f"--screenshot={shot}", page.as_uri())
    width, height, distinct = _png_ok(shot)
    assert (width, height) == (1400, 1800)
    assert distinct > 50


def table_cells(table: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def walk(el: dict[str, Any]) -> None:
        for c in el["children"]:
            if c["tag"] == "td" and c["attrs"].get("class") == "cell":
                found.append(c)
            walk(c)

    walk(table)
    return found


def test_sql_vertex_names_keep_their_brackets(chromium: str, tmp_path: Path) -> None:
    case = FIXTURES / "2.3.0-sql"
    page = tmp_path / "sql.html"
    result = CliRunner().invoke(
        app, ["report", str(case / "checkpoints"), "--plan", str(case / "jobgraph.json"), "--html", str(page)]
    )
    assert result.exit_code == 0, result.output
    dom = Dom()
    dom.feed(_browser(chromium, tmp_path, "--dump-dom", page.as_uri()).stdout)
    body = dom.select("body")[0]["text"]
    assert "[1]:TableSourceScan(table=[[default_catalog, default_database, src]], fields=[k, v])" in body
    assert "[3]:GroupAggregate(groupBy=[k], select=[k, COUNT(*) AS c, SUM(v) AS s])" in body
