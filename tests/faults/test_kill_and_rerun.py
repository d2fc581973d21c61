"""``kill -9`` at random points of a writing command, then the same command again: never a ``_metadata`` at the
final --out unless that output is complete (it validates); nothing the killed run wrote outside its hidden
staging (--copy-data's copies included); the source byte-identical; the rerun (none after a kill that left no
trace: it would repeat the solo run) writes the output (exit 0), says it removed what the dead run left, and
leaves no staging, lock or partial file — and under --to exactly the files a solo run writes. 100 trials: 60
relocate --copy-data, 20 strip, 20 rescale."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.announce import announce
from support.faults import Layout, command, data_files, finish, lay_out, run, scratch_left, snapshot, start

TRIALS = {  # command -> (fixture, trials)
    "relocate-copy": ("2.3.0-rocksdb-incremental", 60),
    "strip": ("2.3.0-unaligned", 20),
    "rescale": ("2.3.0-unaligned", 20),
}
SEED = 29
# How a rerun may tell that it found and removed a dead run's scratch.
CLEANUP_WORDS = ("stale", "dead", "left behind", "left by", "interrupted", "previous run", "earlier run")


def _trial(
    layout: Layout, cmd: str, to: Path, when: tuple[bool, float], expected: dict[str, str]
) -> tuple[str, list[str]]:
    """One kill and rerun; returns how it went (killed / finished) and what was wrong. ``when``: (counted from
    the run's first entry beside its output — its claim — rather than from its start, seconds)."""
    out = to / layout.chk.name
    args = command(layout, cmd, to=to)
    after_claim, delay = when
    to.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    proc = start(args)
    while after_claim and proc.poll() is None and not any(to.iterdir()):
        time.sleep(0.001)  # a load-independent start of the write phase: the claim appears first
    time.sleep(delay)
    outcome = "finished" if proc.poll() is not None else "killed"
    if outcome == "killed":
        os.killpg(proc.pid, signal.SIGKILL)
    first = finish(proc, started)
    problems: list[str] = []
    if (out / "_metadata").exists():
        where = f"{cmd} after {delay:.3f}s (exit {first.code})"
        valid = run(["validate", str(out)])
        if valid.code != 0:
            problems.append(f"{where}: an incomplete output at --out: {valid.output.strip()[-300:]!r}")
        return "complete", problems  # a complete output: a rerun is refused, as it must be
    left = scratch_left(to.parent)
    if outcome == "killed" and (left or _files(to.parent)):
        outcome = "killed while writing"
    where = f"{cmd} after {delay:.3f}s ({outcome}, exit {first.code})"
    # Until its final rename a run writes only into its hidden staging (--copy-data's copies too), so that
    # what a killed run wrote is all scratch, for the next run to find and remove.
    # One exception: --copy-data links its copies to their final names under --to just before the output's rename
    # (after the output's self-check), a moment of about 2 ms; a kill there leaves copies the --to claim's journal
    # lists (with their identity), which the rerun must clear like any scratch.
    journaled = _journaled(to)
    stray = [
        p
        for p in _files(to.parent)
        if not any(part.startswith(".") for part in p.parts) and str(to.parent / p) not in journaled
    ]
    if stray:
        problems.append(f"{where}: the killed run wrote outside its staging: {[str(p) for p in stray[:5]]}")
    if outcome == "killed" and list(to.parent.rglob("*")) == [to] and not any(to.iterdir()):
        # Killed before it left any trace: the rerun would start from exactly the solo run's state (an empty
        # --to) and repeat it. Such kills prove only that nothing was left, checked here.
        return "killed before any trace", problems
    rerun = run(args)
    if rerun.code != 0:
        problems.append(f"{where}: the rerun failed (exit {rerun.code}): {rerun.err.strip()[-300:]!r}")
    elif run(["validate", str(out)]).code != 0:
        problems.append(f"{where}: the rerun's output does not validate")
    if left and not any(w in rerun.output.lower() for w in CLEANUP_WORDS):
        problems.append(f"{where}: the rerun says nothing of the dead run's {left}")
    if scratch_left(to.parent):
        problems.append(f"{where}: left behind after the rerun: {scratch_left(to.parent)}")
    if rerun.code == 0 and data_files(to) != expected:
        extra = sorted(set(data_files(to)) - set(expected))
        problems.append(f"{where}: --to holds other files than a solo run's; extra: {extra[:5]}")
    return outcome, problems


def _journaled(to: Path) -> set[str]:
    """The final names the journal of ``to``'s claim (a run of relocate --copy-data) says its run placed."""
    lock = to.parent / f".{to.name}.spillway.lock"
    found: set[str] = set()
    for line in (lock.read_text().splitlines() if lock.is_file() else [])[1:]:
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line torn by the kill
        if isinstance(row, dict) and isinstance(row.get("file"), str):
            found.add(row["file"])
    return found


def _probe(args: list[str], to: Path) -> tuple[float, float]:
    """A solo run of ``args`` into ``to``: when it started writing under ``to`` and when it ended (seconds)."""
    to.mkdir(parents=True)
    started = time.monotonic()
    proc = start(args)
    first_write = None
    while proc.poll() is None:
        if first_write is None and any(to.iterdir()):
            first_write = time.monotonic() - started
        time.sleep(0.002)
    solo = finish(proc, started)
    assert solo.code == 0, f"the solo run must write\n{solo.output}"
    return first_write if first_write is not None else 0.0, solo.seconds


def _files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())


@pytest.mark.timeout(420)
def test_kill_at_random_points_then_rerun(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    counts: Counter[str] = Counter()
    problems: list[str] = []
    for cmd, (fixture, trials) in TRIALS.items():
        layout = lay_out(tmp_path / cmd, fixture)
        source = snapshot(layout.root)
        solo_to = tmp_path / cmd / "solo" / layout.fx.info["job_id"]
        writing, typical = _probe(command(layout, cmd, to=solo_to), solo_to)
        expected = data_files(solo_to)
        tos = [tmp_path / cmd / f"trial{i}" / layout.fx.info["job_id"] for i in range(trials)]
        # Half the kills anywhere in a run; half while it writes: counted from the moment its claim appears
        # (most of a run is the interpreter starting and the source being read, and under load a delay from
        # the start alone lands mostly before writing).
        delays = [(False, rng.uniform(0, typical)) if i % 2 else (True, rng.uniform(0, (typical - writing) / 2))
                  for i in range(trials)]  # fmt: skip
        with ThreadPoolExecutor(max_workers=2) as pool:  # two at a time: the machine has two cores
            results = list(pool.map(_trial, [layout] * trials, [cmd] * trials, tos, delays, [expected] * trials))
        for outcome, found in results:
            counts["trials"] += 1
            counts[outcome] += 1
            counts["killed"] += outcome == "killed before any trace"
            counts["bad trials"] += bool(found)
            problems.extend(found)
        if snapshot(layout.root) != source:
            problems.append(f"{cmd}: the source changed")
    announce(
        f"kill -9: {counts['trials']} trials (seed {SEED}), {counts['killed while writing']} killed while writing, "
        f"{counts['killed']} before writing ({counts['killed before any trace']} before any trace: no rerun), "
        f"{counts['complete'] + counts['finished']} complete before the kill, {counts['bad trials']} with a fault"
    )
    assert problems == [], "\n".join(problems)
