"""Shared test helpers: the real-Flink fixtures under tests/fixtures/ (see fixtures/generator/README.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parents[1] / "fixtures"


@dataclass(frozen=True)
class Fixture:
    name: str
    root: Path
    info: dict

    @property
    def checkpoint_dir(self) -> Path:
        return self.root / self.info["checkpoint"]

    @property
    def metadata(self) -> Path:
        return self.checkpoint_dir / "_metadata"

    @property
    def oracle(self) -> Path:
        return self.root / "oracle.json"

    @property
    def release(self) -> str:
        return self.info["release"]

    def __str__(self) -> str:
        return self.name


@cache
def all_fixtures() -> tuple[Fixture, ...]:
    found = []
    for info_file in sorted(FIXTURES.glob("*/fixture.json")):
        info = json.loads(info_file.read_text())
        found.append(Fixture(info_file.parent.name, info_file.parent, info))
    return tuple(found)


def fixture_params() -> list:
    return [pytest.param(f, id=f.name) for f in all_fixtures()]


def fixture_named(name: str) -> Fixture:
    for f in all_fixtures():
        if f.name == name:
            return f
    raise LookupError(f"no fixture {name!r}; have {[f.name for f in all_fixtures()]}")


def flink_names(root: Path) -> dict[str, frozenset[str]]:
    """Operator id -> the names Flink gave the stream nodes with that id in the fixture (or copy) at ``root``
    (its ids.json): how a bound plan operator is named in findings, from Flink's record, not spillway's."""
    out: dict[str, set[str]] = {}
    ids = root / "ids.json"
    if ids.exists():
        for n in json.loads(ids.read_text())["stream_nodes"]:
            out.setdefault(n["operator_id"], set()).add(n["name"])
    return {k: frozenset(v) for k, v in out.items()}


def same_operator(shown: str | None, label: str, root: Path) -> bool:
    """``shown`` (a finding's operator) names the operator whose checkpoint label is ``label``: the label itself,
    or, once a plan binds it, the name Flink gave that id."""
    return shown == label or shown in flink_names(root).get(label, frozenset())


def dump_nodes(node: object) -> Iterator[dict[str, Any]]:
    """Every object of a decoded dump (oracle.json nests handles at several depths), each before those inside it."""
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from dump_nodes(v)
    elif isinstance(node, list):
        for v in node:
            yield from dump_nodes(v)


def flink_files(name: str) -> tuple[set[str], set[str]]:
    """(absolute paths, relative paths) of every file Flink's own decode of the fixture's ``_metadata`` names."""
    absolute: set[str] = set()
    relative: set[str] = set()
    for node in dump_nodes(json.loads(fixture_named(name).oracle.read_text())):
        if node.get("type") == "RelativeFileStateHandle":
            relative.add(node["relative_path"])
        elif isinstance(node.get("path"), str) and node.get("type", "").endswith("StateHandle"):
            absolute.add(node["path"])
    return absolute, relative
