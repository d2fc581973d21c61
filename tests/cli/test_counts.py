"""Records, watermarks and other stream events are counted apart, and the same way, in analyze, rescale (and its
dry-run forecast) and the HTML report (issue 21).

No fixture job emits watermarks before its exchanges (docs/format/record-framing.md), so a copy of the real
2.3.0 inline fixture gets one watermark and one watermark status put in front of an input channel's bytes (an
input side starts on an element boundary). Expected record counts come from the original bytes, walked here
element by element ([i32 length][tag …], docs/format/stream-elements.md), not from spillway's readers.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.damaged import Copy, copy_fixture, rewrite

from spillway.cli.app import app

FIXTURE = "2.3.0-inline"  # every channel inline in _metadata: one chunk per handle, easy to grow
WATERMARK = struct.pack(">ib", 9, 2) + struct.pack(">q", 1234)  # length 9: tag 2 + i64 timestamp
STATUS = struct.pack(">ib", 5, 4) + struct.pack(">i", 0)  # length 5: tag 4 + i32 status
RECORD_TAGS = {0, 1}


def _walk(stream: bytes) -> list[int]:
    """The tag of each whole element of ``stream``."""
    tags, pos = [], 0
    while pos + 4 < len(stream):
        n = struct.unpack_from(">i", stream, pos)[0]
        if pos + 4 + n > len(stream):
            break
        tags.append(stream[pos + 4])
        pos += 4 + n
    return tags


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.output


@pytest.fixture(scope="module")
def marked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Copy, dict[str, int]]:
    """The copy, and the original record count of each edge's channel state (tostr -> slow, slow -> len)."""
    c = copy_fixture(FIXTURE, tmp_path_factory.mktemp("marked"))
    records = {"tostr": 0, "slow": 0}  # by upstream operator: output side + the downstream's input side

    def mark(cp) -> None:  # type: ignore[no-untyped-def]
        # A logical channel u -> d is d's input side for channel u, then u's output side for subpartition d (an
        # output side alone may start inside an element): walk each whole.
        channels: dict[tuple[str, int, int], list[tuple[int, bytes]]] = {}
        upstream_of = {"slow": "tostr", "len": "slow"}
        for op in cp.operators:
            for sub in op.subtasks:
                for h in sub.input_channel_state:
                    (e,) = h.channels
                    key = (upstream_of[op.label()], e.input_channel_index, sub.index)
                    channels.setdefault(key, []).append((0, h.delegate.data[8:]))  # header, chunk length
                for h in sub.result_subpartition_state:
                    (e,) = h.channels
                    key = (op.label(), sub.index, e.subpartition_index)
                    channels.setdefault(key, []).append((1, h.delegate.data[8:]))
        for (up, _, _), parts in channels.items():
            stream = b"".join(data for _, data in sorted(parts))
            records[up] += sum(1 for t in _walk(stream) if t in RECORD_TAGS)
        slow = next(op for op in cp.operators if op.label() == "slow")
        h = next(h for h in slow.subtasks[0].input_channel_state if h.channels[0].input_channel_index == 1)
        data = h.delegate.data
        n = struct.unpack_from(">i", data, 4)[0]
        h.delegate.data = data[:4] + struct.pack(">i", n + len(WATERMARK) + len(STATUS)) + WATERMARK + STATUS + data[8:]
        h.state_size = h.channels[0].state_size = len(h.delegate.data)

    rewrite(c, mark)
    return c, records


def test_analyze_counts_records_watermarks_and_other_events_apart(marked) -> None:  # type: ignore[no-untyped-def]
    c, records = marked
    code, out = _run("analyze", str(c.chk), "--plan", str(c.plan), "--json")
    assert code == 0, out
    doc = json.loads(out)
    edges = {e["upstream"]: e for e in doc["edges"]}
    assert (edges["tostr"]["records"], edges["tostr"]["watermarks"], edges["tostr"]["other_elements"]) == (
        records["tostr"],
        1,
        1,
    )
    assert (edges["slow"]["records"], edges["slow"]["watermarks"], edges["slow"]["other_elements"]) == (
        records["slow"],
        0,
        0,
    )
    (ch,) = [c for c in doc["channels"] if c["watermarks"]]
    assert ch["label"] == "tostr#1 -> slow#0 (gate 0)" and ch["last_watermark"] == 1234
    assert ch["elements"]["watermark"] == ch["elements"]["watermark status"] == 1
    assert sum(o["in_flight_records"] for o in doc["operators"]) == records["tostr"] + records["slow"]
    code, text = _run("analyze", str(c.chk), "--plan", str(c.plan))
    total = records["tostr"] + records["slow"]
    assert f"{total} records · 1 watermarks · 1 other stream events" in " ".join(text.split())


def test_rescale_and_its_forecast_move_the_records_analyze_counts(marked, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    c, records = marked
    base = ["rescale", str(c.chk), "--plan", str(c.plan), "-p", "slow=3", "--key-fn", "slow=support.keyfns:key_of"]
    base += ["--master", "inprocess", "--json"]
    code, out = _run(*base, "--out", str(tmp_path / "dry"), "--dry-run")
    assert code == 0, out
    dry = json.loads(out)
    assert dry["forecast"]["spillway"]["records"] == records["tostr"] + records["slow"]  # both edges touch slow
    assert dry["records_moved"] is None
    code, out = _run(*base, "--out", str(tmp_path / "real"))
    assert code == 0, out
    real = json.loads(out)
    assert real["records_moved"] == records["tostr"] + records["slow"]
    assert real["markers_kept"] + real["dropped"].get("watermark", 0) == 1  # the one watermark, not a record
    assert real["dropped"].get("watermark status", 0) <= 1


def test_the_html_report_counts_records_apart(marked, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    c, records = marked
    page = tmp_path / "r.html"
    code, out = _run("report", str(c.chk), "--plan", str(c.plan), "--html", str(page))
    assert code == 0, out
    html = page.read_text()
    total = re.search(r'id="total-records"[^>]*data-value="(\d+)"', html) or re.search(
        r'data-value="(\d+)"[^>]*id="total-records"', html
    )
    assert total is not None and int(total.group(1)) == records["tostr"] + records["slow"]
    row = re.search(r'data-upstream="tostr".*?data-f="records">([\d,]+)<.*?data-f="watermarks">(\d+)<', html, re.S)
    assert row is not None and (int(row.group(1).replace(",", "")), int(row.group(2))) == (records["tostr"], 1)


def test_validate_counts_records_and_other_elements_apart(marked) -> None:  # type: ignore[no-untyped-def]
    c, records = marked
    code, out = _run("validate", str(c.chk), "--plan", str(c.plan), "--json")
    assert code == 0, out
    summary = json.loads(out)["summary"]
    total = records["tostr"] + records["slow"]
    assert (summary["records"], summary["elements"]) == (total, total + 2)  # + the watermark and the status
    code, text = _run("validate", str(c.chk), "--plan", str(c.plan))
    assert f"{total} records and 2 other stream elements" in " ".join(text.split())
