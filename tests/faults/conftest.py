"""The fault suite's heavy modules (hundreds of console-script runs, kill -9, mounts, slow servers) carry the
``integration`` marker: ``make test`` runs them, ``make test-fast`` leaves them out. The crafted-path cases
(a few seconds each) stay in the edit loop."""

from __future__ import annotations

from pathlib import Path

import pytest

HEAVY = {"test_concurrent_writers.py", "test_kill_and_rerun.py", "test_full_disk.py", "test_remote_deadlines.py"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        path = Path(str(item.fspath))
        if path.parent == here and path.name in HEAVY:
            item.add_marker(pytest.mark.integration)
