"""``copy_data``'s copies, staged like everything else: nothing is at a final name until the output that
references them has passed its self-check.

The destination root is claimed first (``spillway.storage.claim.claim_destination``: one run per root, a
dead run's copies there cleared by whichever run comes next). Every copy is written into the claim's
staging directory ``ROOT/.spillway-<run>.partial`` at its path below the root; the output's self-check reads
them there (:meth:`StagedCopies.rebase`). Only once the check has passed does :meth:`StagedCopies.place`
link each into its final name — a link, which never replaces anything; an identical file already there is
kept, one with other bytes is refused — and the output is published after that. On any failure
:meth:`StagedCopies.abandon` removes the staging directory and every copy placed, each only while it is
still the file this run made.

The root's journal names the output the copies are for, with the identity of its staging directory (kept
by the rename that publishes it): a later run clearing a dead run's claim keeps the copies when that output
was published, and removes them when it was not.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from spillway.storage.claim import Claim, _signals_held, claim_destination
from spillway.storage.guard import Guard


class StagedCopies:
    """Copies of ``(source, destination)`` pairs, confined under ``root`` (see the module's doc)."""

    def __init__(self, root: Path, claim: Claim, guard: Guard, targets: list[tuple[Path, tuple[str, ...]]]) -> None:
        self.root = root
        self.claim = claim
        self.guard = guard
        self.targets = targets
        self.staging = (claim.staging.name,)

    @classmethod
    def stage(
        cls,
        pairs: list[tuple[Path, Path]],
        root: Path,
        output: Claim,
        copied: Callable[[int], None] | None = None,
    ) -> StagedCopies:
        """Claim ``root``, refuse any destination outside it or holding other bytes, then copy every source
        into the staging directory. ``output``: the claim of the output that will reference the copies;
        ``copied(size)`` hears of each file copied (progress)."""
        taken: list[Claim] = []
        guard: Guard | None = None
        try:
            with _signals_held():  # a Ctrl-C waits until the claim is taken, then unwinds through the clean-up below
                taken.append(claim_destination(root))
            claim = taken[0]
            if output.staging_id is not None:
                dev, ino = output.staging_id
                claim.journal({"output": str(output.out), "dev": dev, "ino": ino})
            guard = Guard.opening(root, journal=claim.journal)
            targets = [(source, guard.parts_of(dest)) for source, dest in pairs]  # every one, before any copy
            for source, parts in targets:
                guard.refuse_different(source, parts)
            copies = cls(root, claim, guard, targets)
            for source, parts in targets:
                made = guard.copy_file(source, (*copies.staging, *parts), named=guard.shown_path(parts))
                if copied is not None:
                    copied(os.stat(source).st_size if made else 0)
            copies.prepare_places()
            return copies
        except BaseException:
            if guard is not None:
                _undo(guard)
            for claim in taken:
                claim.abandon()
            raise

    def prepare_places(self) -> None:
        """Everything :meth:`place` needs but the links, done now: the final names' directories made and every
        final name journaled (with its staged copy's identity: a later run removes a name only while it is that
        copy). A kill between the first link and the output's publication, which leaves copies at final names
        for the next run to clear, then has the shortest possible moment to land in."""
        for parts in sorted({parts[:-1] for _, parts in self.targets}):
            self.guard.make_directory(parts)
        self.claim.journal_all(
            [
                {"file": str(self.root.joinpath(*parts)), "dev": made.dev, "ino": made.ino}
                for _, parts in self.targets
                for made in [self.guard.made_at((*self.staging, *parts))]
            ]
        )

    def rebase(self) -> str:
        """The self-check's rule sending every path below the root to its staged copy."""
        return f"{self.root}={self.claim.staging}"

    def place(self) -> int:
        """Link each staged copy into its final name (nothing replaced); the number placed (an identical
        file already there is kept as it is)."""
        placed = 0
        for source, parts in self.targets:
            placed += self.guard.link_into_place((*self.staging, *parts), parts, source, noted=True)
        return placed

    def settle(self) -> None:
        """The output referencing the copies is published: they are its files now."""
        self.guard.close()
        self.claim.settle()

    def abandon(self) -> None:
        """Remove every copy (staged or placed) and directory this run made, and let go of the root."""
        _undo(self.guard)
        self.claim.abandon()


def _undo(guard: Guard) -> None:
    with contextlib.suppress(OSError):
        guard.remove_all()
    guard.close()


__all__ = ["StagedCopies"]
