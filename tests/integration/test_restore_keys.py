"""The restore instructions spillway prints after writing (spillway/inspect/restore_instructions.py) name options
Flink really reads: for every release line a fixture was written by, the configuration key is a constant of that
release's own option class (SavepointConfigOptions before 1.20, StateRecoveryOptions from 1.20 on) and ``-s`` /
``--fromSavepoint`` are options of its CLI — read from the release's flink-dist jar."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from support.fixtures import fixture_named
from support.flink_harness import _generator

from spillway.inspect.restore_instructions import path_key
from spillway.storage.load import load_checkpoint

pytestmark = pytest.mark.flink

# a fixture written by each release (its fixture.json names the release)
FIXTURES = {
    "1.11.4": "1.11.4-prod",
    "1.12.5": "1.12.5-prod",
    "1.13.6": "1.13.6-prod",
    "1.14.6": "1.14.6-prod",
    "1.15.4": "1.15.4-prod",
    "1.17.2": "1.17.2-prod",
    "1.18.1": "1.18.1-prod",
    "1.19.3": "1.19.3-prod",
    "1.20.3": "1.20.3-prod",
    "2.0.0": "2.0.0-prod",
    "2.3.0": "2.3.0-counted",
}
OPTION_CLASSES = (
    "org/apache/flink/runtime/jobgraph/SavepointConfigOptions.class",
    "org/apache/flink/configuration/StateRecoveryOptions.class",
)
CLI = "org/apache/flink/client/cli/CliFrontendParser.class"


def _utf8(text: str) -> bytes:
    """A class file's constant-pool entry for ``text`` (CONSTANT_Utf8: tag 1, u2 length, bytes)."""
    raw = text.encode()
    return b"\x01" + len(raw).to_bytes(2, "big") + raw


def _dist(release: str) -> Path:
    lib = Path(_generator().fetch_jars(release))
    return next(lib.glob("flink-dist*.jar"))


@pytest.mark.parametrize("release", sorted(FIXTURES))
def test_the_restore_key_and_cli_option_are_flinks(release: str) -> None:
    fx = fixture_named(FIXTURES[release])
    features = load_checkpoint(str(fx.checkpoint_dir)).checkpoint.features
    key = path_key(features)
    with zipfile.ZipFile(_dist(release)) as jar:
        names = set(jar.namelist())
        options = b"".join(jar.read(c) for c in OPTION_CLASSES if c in names)
        cli = jar.read(CLI)
    assert options, f"Flink {release}: no savepoint/state-recovery option class"
    assert _utf8(key) in options, f"Flink {release} does not read {key}"
    assert _utf8("fromSavepoint") in cli and _utf8("s") in cli
