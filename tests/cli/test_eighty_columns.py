"""What an operator reads at 80 columns (``COLUMNS=80``, the installed script): ``dump``, ``dump --tree``,
``files`` and ``preflight`` fit the width — a longer line is one word (an identifier wider than the line stands
alone on it, never cut) — and every identifier (operator id, file name, path) is whole on one line.
``files`` on a job directory with three retained checkpoints lists what dropping each one leaves
unreferenced and which checkpoints need each file.

Expected values come from Flink's own files: ids.json / oracle.json (operator ids), the files on disk (names,
sizes), the ``_metadata`` bytes Flink wrote (which checkpoint names which file: the generator keeps a file
for exactly that reason) and the restore Flink recorded (flink.json)."""

from __future__ import annotations

import json
import re

from support.console import run
from support.fixtures import FIXTURES, fixture_named

WIDTH = 80
GUIDES = "│├└─ "  # a tree's guides: not words


def _fits(text: str) -> None:
    wide = [line for line in text.splitlines() if len(line) > WIDTH and len(line.lstrip(GUIDES).split()) > 1]
    assert not wide, f"{len(wide)} lines wider than {WIDTH} columns that could wrap, e.g. {wide[0]!r}"


def _whole(text: str, identifiers: set[str]) -> None:
    lines = text.splitlines()
    broken = [i for i in identifiers if not any(i in line for line in lines)]
    assert not broken, f"not whole on any line: {broken}"


def _operator_ids(name: str) -> set[str]:
    return {o["operator_id"] for o in json.loads((fixture_named(name).oracle).read_text())["operators"]}


def test_dump_of_eleven_operators_is_one_table_that_fits() -> None:
    fx = fixture_named("2.3.0-prod")
    ids = _operator_ids(fx.name)
    assert len(ids) == 11
    code, text, err = run(["dump", str(fx.checkpoint_dir)], columns=WIDTH)
    assert code == 0, err
    _fits(text)
    _whole(text, ids | {str(fx.metadata)})
    # a table: a header and two lines an operator (name above id), not a block of eight lines each
    assert len(text.splitlines()) <= 2 * len(ids) + 8, text
    assert "…" not in text


def test_dump_tree_wraps_its_labels_at_spaces() -> None:
    fx = fixture_named("2.3.0-prod")
    files = {p.name for p in fx.checkpoint_dir.iterdir() if p.name != "_metadata"}
    code, text, err = run(["dump", str(fx.checkpoint_dir), "--tree"], columns=WIDTH)
    assert code == 0, err
    _fits(text)
    _whole(text, _operator_ids(fx.name) | files)
    code, wide, _ = run(["dump", str(fx.checkpoint_dir), "--tree"], columns=None)
    assert max(len(line) for line in wide.splitlines()) > WIDTH  # the same tree, unwrapped in a pipe
    assert "".join(text.split()).replace("│", "").count("subtask_index=") == "".join(wide.split()).count(
        "subtask_index="
    )


def test_preflight_reasons_and_flinks_words_wrap() -> None:
    matrix = FIXTURES / "preflight-matrix" / "2.3.0" / "removed-stateful"
    recorded = json.loads((matrix / "flink.json").read_text())
    fx = fixture_named("2.3.0-counted")
    uids = ["--uid", "Source: seq=src", "--uid", "sink: Writer=sink"]
    args = ["preflight", str(fx.checkpoint_dir), "--plan", str(matrix / "jobgraph.json"), *uids]
    code, text, err = run([*args, "--max-parallelism", "128"], columns=WIDTH)
    assert code == 1 and recorded["outcome"] == "refused", err
    _fits(text)
    flat = " ".join(text.split())
    # Flink's own message, every word of it, in order (the path it names is rebased onto this checkout)
    words = [w for w in " ".join(recorded["error"].split()).split() if "/" not in w]
    assert re.search(r"\s+".join(map(re.escape, words[-12:])), flat), flat
    removed = next(o for o in _operator_ids(fx.name) if o in recorded["error"])
    _whole(text, {removed})


# ----------------------------------------------------------------------------- files on retained checkpoints
RETAINED = fixture_named("2.3.0-rocksdb-incremental-retained")
JOB = RETAINED.checkpoint_dir.parent


def _needed_by() -> dict[str, set[str]]:
    """Every file of the job directory (job-relative name) -> the checkpoints whose _metadata names it."""
    chks = sorted(p.name for p in JOB.glob("chk-*"))
    metadata = {c: (JOB / c / "_metadata").read_bytes() for c in chks}
    files = [p for p in JOB.rglob("*") if p.is_file() and p.name != "_metadata"]
    return {str(p.relative_to(JOB)): {c for c in chks if p.name.encode() in metadata[c]} for p in files}


def _kib(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB"


def test_the_bundled_job_directory_holds_three_checkpoints_sharing_files() -> None:
    needed = _needed_by()
    assert sorted(p.name for p in JOB.glob("chk-*")) == ["chk-1", "chk-2", "chk-3"]
    assert all(needed.values()), "the generator keeps only files some checkpoint names"
    assert any(len(c) == 3 for c in needed.values()) and any(len(c) == 1 for c in needed.values())


def test_files_says_what_dropping_each_checkpoint_leaves_and_who_needs_each_file() -> None:
    needed = _needed_by()
    code, text, err = run(["files", str(JOB)], columns=WIDTH)
    assert code == 0, err
    _fits(text)
    _whole(text, set(needed))
    listed: dict[str, dict[str, str]] = {}
    current = None
    for line in text.splitlines():
        if m := re.match(r"dropping (chk-\d+) leaves (\d+) files \((.+)\) unreferenced", line):
            current = m[1]
            listed[current] = {}
        elif current and (m := re.match(r"\s+(\d+(?:\.\d)? (?:B|KiB))\s+(\S+)$", line)):
            listed[current][m[2]] = m[1]
        elif not line.startswith(" "):
            current = None
    for chk in ("chk-1", "chk-2", "chk-3"):
        alone = {n for n, c in needed.items() if c == {chk}}
        assert set(listed[chk]) == alone, chk
        assert listed[chk] == {n: _kib((JOB / n).stat().st_size) for n in alone}
        total = sum((JOB / n).stat().st_size for n in alone)
        assert f"dropping {chk} leaves {len(alone)} files ({_kib(total)}) unreferenced:" in text
        kept = {n for n, c in needed.items() if chk in c and len(c) > 1}
        others = ", ".join(sorted(set().union(*(needed[n] for n in kept)) - {chk}))
        assert (
            f"    kept: {len(kept)} files ({_kib(sum((JOB / n).stat().st_size for n in kept))}) also needed by {others}"
            in text
        )
    # the table, wide enough to be one line a file: which checkpoints need it
    code, wide, _ = run(["files", str(JOB)], columns=250)
    rows = {cells[1].strip(): cells[5].strip() for line in wide.splitlines() if len(cells := line.split("│")) > 6}
    assert {n: set(c.split()) for n, c in rows.items()} == needed
