"""FLIP-147 verdicts on every recorded restore variant (1.15.4, 1.20.3, 2.0.0, 2.3.0), without a JVM.

The plans and Flink's outcomes in tests/fixtures/finished-variants/ come from real restores
(tests/integration/test_flink_restore.py re-proves a subset with Flink and insists on the same plans)."""

from __future__ import annotations

import pytest
from support.finished_variants import VARIANTS, check_variant, load_recorded, recorded, recorded_dir
from support.fixtures import fixture_named

from spillway.storage.load import load_checkpoint

CASES = [pytest.param(r, v, id=f"{r}-{v}") for r, v in recorded()]


def test_every_variant_is_recorded_on_every_release() -> None:
    releases = {r for r, _ in recorded()}
    assert releases == {"1.15.4", "1.20.3", "2.0.0", "2.3.0"}
    assert set(recorded()) == {(r, v) for r in releases for v in VARIANTS}


@pytest.mark.parametrize(("release", "variant"), CASES)
def test_spillway_agrees_with_flink_on_the_recorded_restore(release: str, variant: str) -> None:
    d = recorded_dir(release, variant)
    checkpoint = load_checkpoint(fixture_named(f"{release}-finished").checkpoint_dir).checkpoint
    check_variant(release, variant, checkpoint, d / "jobgraph.json", d / "plan.json", load_recorded(release, variant))
