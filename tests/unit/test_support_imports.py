"""Tests import their helpers as ``support.…`` (tests/ is on the path, conftest.py): a second spelling,
``tests.support.…``, would load every helper module twice, with two copies of its caches and classes."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).parents[1]


def test_no_test_imports_support_through_the_tests_package() -> None:
    pattern = re.compile(r"^\s*(from|import)\s+tests\.", re.M)
    offenders = [str(p.relative_to(TESTS)) for p in sorted(TESTS.rglob("*.py")) if pattern.search(p.read_text())]
    assert offenders == []
