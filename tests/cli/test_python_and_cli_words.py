"""One refusal, two readers: through the API it names the Python argument to give (``uids``, ``key_fns``,
``force``, ``plan``: each checked to be a real argument of the call), through the console script the option
(``--uid``, ``--key-fn``, ``--force``, ``--plan``). The same checkpoints, the same refusal, exit code 1."""

from __future__ import annotations

import dataclasses
import inspect
import shutil
from pathlib import Path

import pytest
from support.console import spillway as run_cli
from support.fixtures import fixture_named

import spillway
from spillway.api import RescaleOptions, SpillwayError, StripOptions

PROD = fixture_named("1.20.3-prod-counted")
COUNTED = fixture_named("2.3.0-counted")
UNALIGNED = fixture_named("2.3.0-unaligned")
NO_MODULE = "spillway_no_such_module:key"  # a --key-fn whose module does not exist anywhere


def _arguments(options: type) -> set[str]:
    return {f.name for f in dataclasses.fields(options)}


def _refusal(call: object) -> str:
    assert callable(call)
    with pytest.raises(SpillwayError) as caught:
        call()
    assert caught.value.exit_code == 1
    message = str(caught.value)
    assert " --" not in message and not message.startswith("--"), message  # no CLI option in a library error
    return message


def test_a_rescale_that_needs_a_uid_asks_for_uids_or_for_uid(tmp_path: Path) -> None:
    assert {"uids", "uid_map"} <= set(inspect.signature(spillway.open).parameters)
    parallelism = {"count-per-key": 3, "forward-values": 3, "parse": 3}
    keys = {"count-per-key": "tuple:0:long"}
    cp = spillway.open(PROD.checkpoint_dir, plan=PROD.root / "plan.json")
    options = RescaleOptions(parallelism, out=tmp_path / "api", keys=keys, master="inprocess")
    message = _refusal(lambda: cp.rescale(options))
    assert "uids={NAME: UID} or uid_map=FILE" in message and not (tmp_path / "api").exists()

    args = [f"{flag}={n}" for flag, n in parallelism.items()]
    run = run_cli(
        "rescale", str(PROD.checkpoint_dir), "--plan", str(PROD.root / "plan.json"),
        *[x for a in args for x in ("-p", a)], "--key", "count-per-key=tuple:0:long", "--master", "inprocess",
        "--out", str(tmp_path / "cli"),
    )  # fmt: skip
    assert run.code == 1 and "--uid NAME=UID or --uid-map FILE" in run.err and "uids=" not in run.err


def test_a_key_function_that_cannot_be_imported_names_key_fns_or_key_fn(tmp_path: Path) -> None:
    assert "key_fns" in _arguments(RescaleOptions)
    cp = spillway.open(COUNTED.checkpoint_dir, plan=COUNTED.root / "jobgraph.json")
    options = RescaleOptions({"count": 3}, out=tmp_path / "api", key_fns={"count": NO_MODULE}, master="inprocess")
    message = _refusal(lambda: cp.rescale(options))
    assert message.startswith(f"key_fns[…]={NO_MODULE!r}: No module named 'spillway_no_such_module'"), message

    run = run_cli(
        "rescale", str(COUNTED.checkpoint_dir), "--plan", str(COUNTED.root / "jobgraph.json"), "-p", "count=3",
        "--key-fn", f"count={NO_MODULE}", "--master", "inprocess", "--out", str(tmp_path / "cli"),
    )  # fmt: skip
    assert run.code == 1 and f"--key-fn {NO_MODULE}: No module named 'spillway_no_such_module'" in run.err


def test_a_repair_of_a_damaged_source_names_force_true_or_force(tmp_path: Path) -> None:
    assert "force" in _arguments(StripOptions)
    root = tmp_path / "fx"
    shutil.copytree(UNALIGNED.root, root)
    chk = root / UNALIGNED.info["checkpoint"]
    channel_file = next(p for p in chk.iterdir() if p.name != "_metadata" and p.is_file())
    channel_file.write_bytes(channel_file.read_bytes()[:100])  # truncated: a validate error
    message = _refusal(lambda: spillway.open(chk).strip_channel_state(StripOptions(tmp_path / "api")))
    assert "force=True writes anyway" in message

    run = run_cli("repair", "strip-channel-state", str(chk), "--out", str(tmp_path / "cli"))
    assert run.code == 1 and "--force writes anyway" in run.err and "force=True" not in run.err


def test_stripping_chosen_operators_without_a_plan_names_plan_or_plan(tmp_path: Path) -> None:
    assert "plan" in inspect.signature(spillway.open).parameters and "operators" in _arguments(StripOptions)
    cp = spillway.open(COUNTED.checkpoint_dir)
    message = _refusal(lambda: cp.strip_channel_state(StripOptions(tmp_path / "api", operators=["count"])))
    assert message.startswith("stripping some operators needs the job's plan=...: "), message

    run = run_cli(
        "repair", "strip-channel-state", str(COUNTED.checkpoint_dir), "--operator", "count",
        "--out", str(tmp_path / "cli"),
    )  # fmt: skip
    assert run.code == 1 and "stripping some operators needs the job's --plan: " in run.err


def test_a_path_that_reads_like_arguments_is_shown_as_it_is(tmp_path: Path) -> None:
    # an output directory whose name reads like keyword arguments, given by the user: not advice to rewrite
    out = tmp_path / "job plan=... force=True"
    out.mkdir()
    run = run_cli("repair", "strip-channel-state", str(COUNTED.checkpoint_dir), "--out", str(out))
    assert run.code == 1, run.output  # a refusal to overwrite
    assert f"error: {out}: already exists; spillway never overwrites (choose a new --out)" in run.err, run.err


def test_a_bad_salvage_argument_is_named_by_its_option(tmp_path: Path) -> None:
    run = run_cli("salvage", str(COUNTED.checkpoint_dir), "--out", str(tmp_path / "out"), "--operator", "")
    assert run.code == 2, run.output
    assert run.err.startswith("error: --operator ") and "operators=" not in run.err, run.err
    assert not (tmp_path / "out").exists()
