"""Mistaken arguments are usage errors (exit 2), the same in every command, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from support.fixtures import fixture_named

from spillway.cli.app import app

FX = fixture_named("2.3.0-counted")


@pytest.mark.parametrize(
    "args",
    [
        ["-p", "count=0"],
        ["-p", "count=-1"],
        ["-p", "count=x"],
        ["-p", "nope=3"],
        ["-p", "count=3", "-p", "count=4"],
        ["-p", "count=3", "--key", "count=bad"],
        ["-p", "count=3", "--key", "count=long", "--key-fn", "count=mod:fn"],
        ["-p", "count=3", "--key-fn", "count=no-colon"],
        ["-p", "count"],
        ["-p", "count=3"],  # records in flight on the keyBy edge into count: --key or --key-fn is missing
    ],
    ids=lambda a: " ".join(a),
)
def test_rescale_usage_errors(args: list[str], tmp_path: Path) -> None:
    out = tmp_path / "o"
    cmd = ["rescale", str(FX.checkpoint_dir), "--plan", str(FX.root / "jobgraph.json"), *args]
    res = CliRunner().invoke(app, [*cmd, "--out", str(out), "--master", "inprocess"])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and not out.exists()


def test_unknown_operator_is_a_usage_error_in_repair_too(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app, ["repair", "drop-operator", str(FX.checkpoint_dir), "--operator", "nope", "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 2 and "no operator" in res.output


def test_short_help() -> None:
    assert CliRunner().invoke(app, ["-h"]).exit_code == 0
    assert "--plan" in CliRunner().invoke(app, ["validate", "-h"]).output


@pytest.mark.parametrize("command", ["analyze", "preflight", "rescale"])
@pytest.mark.parametrize(
    ("args", "first_words"),
    [
        (["--key", "count=tuple:x"], "error: --key count=tuple:x: "),  # ':x:' stays text (no emoji)
        (["--key-fn", "count=no-colon"], "error: --key-fn count=no-colon: expected module:function"),
        (["--buffer-size", "32"], "error: --buffer-size 32: at least 64 bytes"),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else None,
)
def test_key_and_buffer_errors_name_the_option(command: str, args: list[str], first_words: str, tmp_path: Path) -> None:
    # The library says keys['count'] / key_fns['count'] / buffer_size=32; the CLI says the option the user typed.
    out = tmp_path / "o"
    cmd = [command, str(FX.checkpoint_dir), "--plan", str(FX.root / "jobgraph.json"), "-p", "count=3", *args]
    if command == "rescale":
        cmd += ["--out", str(out), "--master", "inprocess"]
    res = CliRunner().invoke(app, cmd)
    assert res.exit_code == 2, res.output
    assert res.output.startswith(first_words), res.output
    assert "keys[" not in res.output and "key_fns[" not in res.output and "buffer_size" not in res.output
    assert not out.exists()
