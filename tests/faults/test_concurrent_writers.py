"""Two writers, one output: pairs of console-script runs of the same writing command into the same --out (and
the same --to), started together. Exactly one wins; the winner's output validates and holds every file a solo
run writes, byte for byte; the loser says why (the output exists, or which run holds it); neither leaves
scratch behind. 100 pairs: 80 relocate --copy-data (14 shared files each), 5 each of strip, clear-finished,
drop-operator and an in-process rescale."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from support.announce import announce
from support.console import Run
from support.faults import Layout, command, data_files, finish, lay_out, run, scratch_left, snapshot, start

PAIRS = {  # command -> (fixture, pairs)
    "relocate-copy": ("2.3.0-rocksdb-incremental", 80),
    "strip": ("2.3.0-unaligned", 5),
    "clear": ("2.3.0-finished", 5),
    "drop": ("2.3.0-unaligned", 5),
    "rescale": ("2.3.0-unaligned", 5),
}
# How a loser may explain itself: the output is there, or another run holds it.
LOSER_WORDS = ("already exists", "another", "in use", "locked", "claimed", "pid")


def race(args: list[str]) -> list[Run]:
    """Both runs of ``args`` started at the same instant (a barrier releases the two Popen calls)."""
    barrier = threading.Barrier(2)
    runs: list[Run | None] = [None, None]

    def go(i: int) -> None:
        barrier.wait()
        started = time.monotonic()
        runs[i] = finish(start(args), started)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert runs[0] is not None and runs[1] is not None
    return [runs[0], runs[1]]


def _job(base: Path, layout: Layout, name: str) -> Path:
    return base / name / layout.fx.info["job_id"]


@pytest.mark.timeout(420)
def test_one_writer_per_output(tmp_path: Path) -> None:
    counts: Counter[str] = Counter()
    problems: list[str] = []
    for cmd, (fixture, pairs) in PAIRS.items():
        layout = lay_out(tmp_path / cmd, fixture)
        source = snapshot(layout.root)
        solo_to = _job(tmp_path / cmd, layout, "solo")
        solo = run(command(layout, cmd, to=solo_to))
        assert solo.code == 0, f"{cmd}: the solo run must write\n{solo.output}"
        assert run(["validate", str(solo_to / layout.chk.name)]).code == 0, f"{cmd}: the solo output must validate"
        expected = data_files(solo_to)
        for i in range(pairs):
            to = _job(tmp_path / cmd, layout, f"pair{i}")
            out = to / layout.chk.name
            first, second = race(command(layout, cmd, to=to))
            counts["pairs"] += 1
            winners = [r for r in (first, second) if r.code == 0]
            losers = [r for r in (first, second) if r.code != 0]
            where = f"{cmd} pair {i}"
            if len(winners) != 1:
                problems.append(f"{where}: {len(winners)} winners; exits {first.code}, {second.code}: "
                                f"{first.err.strip()[-200:]!r} / {second.err.strip()[-200:]!r}")  # fmt: skip
            else:
                counts["single winners"] += 1
            for r in (first, second):
                if "Traceback" in r.output:
                    problems.append(f"{where}: traceback: {r.err.strip()[-300:]!r}")
            for loser in losers:
                if not any(w in loser.output.lower() for w in LOSER_WORDS):
                    problems.append(f"{where}: the loser does not say why (exit {loser.code}): {loser.err[-300:]!r}")
            if winners:
                written = data_files(to)
                missing = sorted(set(expected) - set(written))
                damaged = sorted(f for f in expected.keys() & written.keys() if expected[f] != written[f])
                valid = run(["validate", str(out)])
                if missing or damaged or valid.code != 0 or not (out / "_metadata").is_file():
                    counts["losses"] += 1
                    problems.append(f"{where}: the winner's output lost {len(missing)} files, {len(damaged)} changed, "
                                    f"validate exit {valid.code}: {valid.output.strip()[-300:]!r}")  # fmt: skip
            left = scratch_left(to.parent)
            if left:
                counts["leftovers"] += 1
                problems.append(f"{where}: scratch left behind: {left}")
        if snapshot(layout.root) != source:
            problems.append(f"{cmd}: the source changed")
    announce(
        f"concurrency: {counts['pairs']} pairs, {counts['single winners']} single winners, "
        f"{counts['losses']} losses, {counts['leftovers']} leftovers"
    )
    assert problems == [], "\n".join(problems)
