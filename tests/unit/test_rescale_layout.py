"""The piecewise writer (spillway/rescale/layout.py) against the streaming writer: on a real rescale of
the 2.3.0 "counted" checkpoint (parse and count 2 -> 3, count routed by key group), files written piece
by piece — in any order, with pieces much smaller than a file — must be byte-identical to
``write_sorted_runs``' files and report the same channels; the per-piece re-read must find exactly the
records the old channels held, and report damage."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from spillway.inspect.topology import load_plan
from spillway.rescale.channel_writer import write_sorted_runs
from spillway.rescale.execute import finish_report
from spillway.rescale.layout import check_piece, create_files, plan_files, sum_pieces, write_piece
from spillway.rescale.plan import build_plan
from spillway.rescale.staging import stage_source, staged_rows
from spillway.rescale.verify import check_totals
from spillway.storage.load import load_checkpoint

FIXTURE = Path(__file__).parents[1] / "fixtures" / "2.3.0-counted"


def _plan(buffer_size: int):  # type: ignore[no-untyped-def]
    ld = load_checkpoint(next(FIXTURE.glob("checkpoints/*/chk-*")))
    ld.resolve_files()
    return build_plan(
        ld.checkpoint, load_plan(FIXTURE / "jobgraph.json"), ld.resolver, {"parse": 3, "count": 3},
        {"count": "tuple:0:long"}, None, buffer_size,
    )  # fmt: skip


def _staged(plan, directory: Path):  # type: ignore[no-untyped-def]
    refs, reports = [], []
    for src in plan.sources:
        staged, stats = stage_source(src, plan.edges[src.edge], str(directory))
        reports.append(finish_report(src, stats, copies=sum(r.records for r in staged)))
        refs += staged
    refs.sort(key=lambda r: r.order())
    return refs, reports


def _files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.glob("*.channels"))}


@pytest.mark.parametrize(("buffer_size", "piece_bytes"), [(64, 1), (100, 700), (1024, 5000), (32 * 1024, 1 << 30)])
def test_pieces_in_any_order_write_the_streaming_writers_bytes(
    tmp_path: Path, buffer_size: int, piece_bytes: int
) -> None:
    plan = _plan(buffer_size)
    refs, reports = _staged(plan, tmp_path / "pieces")
    stream = tmp_path / "stream"
    stream.mkdir()
    expected = write_sorted_runs(str(stream), staged_rows(str(tmp_path / "pieces"), refs), buffer_size)

    files, pieces = plan_files(refs, buffer_size, piece_bytes)
    assert [f.to_doc() for f in files] == [f.to_doc() for f in expected]
    if piece_bytes == 1:  # every run a piece of its own: more pieces than files
        assert len(pieces) > len(files)
    create_files(str(tmp_path / "pieces"), files)
    order = list(pieces)
    random.Random(buffer_size).shuffle(order)
    results = [write_piece(str(tmp_path / "pieces"), p, buffer_size, plan) for p in order]
    assert _files(tmp_path / "pieces") == _files(stream)
    assert len(_files(stream)) == 8  # parse 3 + count 3 + check 2 input files

    problems, per_gate = sum_pieces(str(tmp_path / "pieces"), files, results)
    assert problems == []
    by_gate = {(ep.down_head, ep.gate): ep.index for ep in plan.edges}
    per_edge: dict[int, int] = {}
    for key, n in per_gate.items():
        if key in by_gate:
            per_edge[by_gate[key]] = per_edge.get(by_gate[key], 0) + n
    from spillway.rescale.execute import MoveResult

    assert check_totals(plan, MoveResult(files, reports), per_edge) == []
    # the staged bytes were freed once written (a punched range reads back as zeros)
    staging = tmp_path / "pieces" / ".spillway-staging"
    assert all(set(p.read_bytes()) <= {0} for p in staging.iterdir())


def test_a_damaged_piece_is_reported(tmp_path: Path) -> None:
    plan = _plan(1024)
    refs, _ = _staged(plan, tmp_path)
    files, pieces = plan_files(refs, 1024, 4096)
    create_files(str(tmp_path), files)
    results = [write_piece(str(tmp_path), p, 1024, plan, punch=False) for p in pieces]
    assert sum_pieces(str(tmp_path), files, results)[0] == []

    victim = max(pieces, key=lambda p: p.end - p.start)
    middle = victim.runs[len(victim.runs) // 2]
    first, _ = middle.span(1024)
    fd = os.open(tmp_path / victim.name, os.O_RDWR)
    try:  # one payload byte changed (past the chunk header the run may begin with)
        at = first + 4 + 1
        (old,) = os.pread(fd, 1, at)
        os.pwrite(fd, bytes([old ^ 0x40]), at)
    finally:
        os.close(fd)
    redo = [check_piece(str(tmp_path), p, 1024, plan) for p in pieces]
    problems, _ = sum_pieces(str(tmp_path), files, redo)
    assert problems and any(victim.name in p for p in problems), problems

    with open(tmp_path / victim.name, "r+b") as fh:  # cut short: the piece cannot be read whole
        fh.truncate(victim.start + 2)
    redo = [check_piece(str(tmp_path), p, 1024, plan) for p in pieces]
    problems, _ = sum_pieces(str(tmp_path), files, redo)
    assert any("bytes on disk" in p for p in problems), problems
    assert any("missing" in p for p in problems), problems
