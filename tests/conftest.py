"""Test-wide set-up: ``support`` (real-Flink fixtures, the Flink harness, oracles) is importable, and
tests under ``integration/`` (Spark, Flink JVMs, S3) carry the ``integration`` marker so that
``make test-fast`` can leave them out."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import announce

INTEGRATION = Path(__file__).parent / "integration"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


def pytest_configure(config: pytest.Config) -> None:
    announce.install(config)  # downloads and one-time builds are announced past the capture
