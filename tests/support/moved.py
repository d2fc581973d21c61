"""The real 2.3.0 ``counted`` checkpoint moved in-process to parse = count = 3 (1 KiB buffers), self-checked
clean: the written files that the self-check tests damage (tests/unit/test_rescale_verify.py,
tests/unit/test_rescale_vectorized.py)."""

from __future__ import annotations

from pathlib import Path

from spillway.inspect.topology import load_plan
from spillway.rescale.execute import MoveResult, run_local
from spillway.rescale.plan import RescalePlan, build_plan
from spillway.rescale.verify import self_check
from spillway.storage.load import load_checkpoint

COUNTED = Path(__file__).parents[1] / "fixtures" / "2.3.0-counted"


def moved_counted(out: Path) -> tuple[Path, RescalePlan, MoveResult]:
    ld = load_checkpoint(next(COUNTED.glob("checkpoints/*/chk-*")))
    ld.resolve_files()
    plan = build_plan(
        ld.checkpoint, load_plan(COUNTED / "jobgraph.json"), ld.resolver, {"parse": 3, "count": 3},
        {"count": "tuple:0:long"}, None, 1024,
    )  # fmt: skip
    move = run_local(plan, str(out))
    assert self_check(out, plan, move) == []
    return out, plan, move
