"""copy_data's copies (spillway/storage/staged_copies.py): staged under the claimed destination root, placed
only when asked, and a dead run's claim there cleared by the next run — its copies removed unless the output
they were for had been published (then they are that output's files: removing them would be a loss)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.fixtures import fixture_named

from spillway.notices import collecting
from spillway.storage.claim import Claim, OutputBusy, claim_destination, claim_output, lock_path
from spillway.storage.staged_copies import StagedCopies

FX = fixture_named("2.3.0-unaligned")
DATA = sorted(p for p in FX.checkpoint_dir.iterdir() if p.name != "_metadata")[:2]


def _staged(tmp_path: Path) -> tuple[Claim, StagedCopies, Path, list[Path]]:
    out, to = tmp_path / "out" / "chk-1", tmp_path / "to"
    output = claim_output(out)
    finals = [to / "shared" / p.name for p in DATA]
    staged = StagedCopies.stage(list(zip(DATA, finals, strict=True)), to, output)
    return output, staged, to, finals


def _killed(claim: Claim) -> None:
    """As if the process died: the flock goes, the lock file and its journal stay."""
    os.close(claim.fd)
    claim.fd = -1


def test_copies_stay_staged_until_placed_and_a_second_run_is_refused(tmp_path: Path) -> None:
    output, staged, to, finals = _staged(tmp_path)
    assert not any(f.exists() for f in finals), "nothing at a final name before place()"
    assert staged.rebase() == f"{to}={staged.claim.staging}"
    assert [(staged.claim.staging / "shared" / p.name).read_bytes() for p in DATA] == [p.read_bytes() for p in DATA]
    with pytest.raises(OutputBusy, match="is writing it"):
        claim_destination(to)
    assert staged.place() == len(DATA)
    assert [f.read_bytes() for f in finals] == [p.read_bytes() for p in DATA]
    output.publish()
    staged.settle()
    assert sorted(p.name for p in to.rglob("*")) == sorted(["shared", *(p.name for p in DATA)])
    assert not lock_path(to).exists()


def test_a_dead_runs_placed_copies_are_removed_when_its_output_was_not_published(tmp_path: Path) -> None:
    output, staged, to, finals = _staged(tmp_path)
    staged.place()
    _killed(staged.claim)
    _killed(output)
    with collecting() as notes:
        again = claim_destination(to)
    again.abandon()
    assert not any(f.exists() for f in finals) and not staged.claim.staging.exists()
    assert any("a spillway run that is gone" in n and f"{len(DATA)} files it had copied" in n for n in notes), notes


def test_a_dead_runs_copies_are_kept_when_its_output_was_published(tmp_path: Path) -> None:
    output, staged, to, finals = _staged(tmp_path)
    staged.place()
    output.publish()  # killed right after the output's rename, before letting go of --to
    _killed(staged.claim)
    with collecting() as notes:
        again = claim_destination(to)
    again.abandon()
    assert [f.read_bytes() for f in finals] == [p.read_bytes() for p in DATA], "the published output's files"
    assert not staged.claim.staging.exists()
    assert any(f"which had published {output.out}" in n for n in notes), notes
