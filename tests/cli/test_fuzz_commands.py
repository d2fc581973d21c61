"""Fuzz every command with damaged copies of real checkpoints.

Each example copies a real fixture (2.3.0, 1.20.3 or 1.11.4 unaligned) into a fresh directory, damages
one file — ``_metadata``, a channel-state file or the plan JSON — by bit flips, truncation, inserted
bytes or (for the plan) structurally wrong JSON, and runs one command through the CLI. Whatever the
damage, the command must:

* exit 0, 1 or 2 — never a traceback (``result.exception`` is None or a ``SystemExit``);
* finish within a time limit (SIGALRM: a hang fails the example instead of stalling the run);
* leave the input tree byte for byte as it was;
* leave no complete-looking output (``<out>/_metadata``) unless it exited 0, and no temporary
  directories beside the output.

Deterministic (``derandomize=True``, no example database) and cheap: the whole file runs in well under
a minute on two cores.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import shutil
import signal
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from support.fixtures import fixture_named

from spillway.cli.app import app

FIXTURES = ("2.3.0-unaligned", "1.20.3-unaligned", "1.11.4-unaligned")
PLANS = ("jobgraph.json", "plan.json")
TIME_LIMIT_S = 20  # one command on a damaged ~600 KiB checkpoint; the clean run takes well under 1 s
# SPILLWAY_FUZZ_EXAMPLES=300 SPILLWAY_FUZZ_RANDOM=1 for a deeper, randomized run by hand.
EXAMPLES = int(os.environ.get("SPILLWAY_FUZZ_EXAMPLES", "12"))

FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=not os.environ.get("SPILLWAY_FUZZ_RANDOM"),
    database=None,
    deadline=None,
    # No explain phase: it re-runs a failing example under a line tracer, which slows a rescale past
    # TIME_LIMIT_S and turns a real finding into a spurious "hang".
    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Hang(Exception):
    """Raised by SIGALRM inside the command: it ran longer than TIME_LIMIT_S."""


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def on_alarm(signum: int, frame: object) -> None:
        raise Hang(f"command still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def tree_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# --- damage -------------------------------------------------------------------------------------------

# Values that are wrong for almost any plan field: wrong type, out of range, empty, huge.
WRONG_JSON = [None, 0, -1, 2**31, 2**63, 1.5, "", "x" * 40, "HASH", [], {}, [1, 2], {"id": "x"}, True]


@st.composite
def byte_damage(draw: st.DrawFn, data: bytes) -> bytes:
    """Bit flips, a truncation or an insertion somewhere in ``data``."""
    buf = bytearray(data)
    kind = draw(st.sampled_from(["flip", "flips", "truncate", "insert", "overwrite"]))
    # Favour the start of the file (headers, counts, lengths), but reach everywhere.
    pos = draw(st.one_of(st.integers(0, min(64, len(buf))), st.integers(0, len(buf))))
    if kind == "flip" and buf:
        i = min(pos, len(buf) - 1)
        buf[i] ^= 1 << draw(st.integers(0, 7))
    elif kind == "flips" and buf:
        for _ in range(draw(st.integers(2, 8))):
            i = draw(st.integers(0, len(buf) - 1))
            buf[i] ^= 1 << draw(st.integers(0, 7))
    elif kind == "truncate":
        del buf[pos:]
    elif kind == "insert":
        buf[pos:pos] = draw(st.binary(min_size=1, max_size=16))
    else:
        chunk = draw(st.sampled_from([b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\x00" * 8]))
        buf[pos : pos + len(chunk)] = chunk
    return bytes(buf)


@st.composite
def json_damage(draw: st.DrawFn, text: str) -> str:
    """Structurally wrong JSON (a node replaced by a wrong value, a key removed, a list emptied) or
    plain byte damage (invalid JSON)."""
    if draw(st.booleans()):
        return draw(byte_damage(text.encode())).decode("utf-8", "replace")
    doc = json.loads(text)
    for _ in range(draw(st.integers(1, 3))):
        # Walk down to a random container, then break one of its members.
        parent: Any = doc
        while True:
            members = list(parent.items()) if isinstance(parent, dict) else list(enumerate(parent))
            containers = [(k, v) for k, v in members if isinstance(v, dict | list) and v]
            if not members or (containers and draw(st.integers(0, 2)) > 0):
                if not containers:
                    break
                parent = draw(st.sampled_from(containers))[1]
                continue
            key = draw(st.sampled_from([k for k, _ in members]))
            action = draw(st.sampled_from(["replace", "delete", "duplicate"]))
            if action == "delete":
                del parent[key]
            elif action == "duplicate" and isinstance(parent, list):
                parent.append(copy.deepcopy(parent[key]))
            else:
                parent[key] = copy.deepcopy(draw(st.sampled_from(WRONG_JSON)))
            break
    if draw(st.integers(0, 4)) == 0:
        doc = copy.deepcopy(draw(st.sampled_from(WRONG_JSON)))  # the whole document of the wrong shape
    return json.dumps(doc)


@st.composite
def damaged_tree(draw: st.DrawFn) -> tuple[str, str, Callable[[Path], None]]:
    """(fixture, plan file name, a function that damages the copy at the given root)."""
    fx = fixture_named(draw(st.sampled_from(FIXTURES)))
    plan = draw(st.sampled_from(PLANS))
    channel_files = sorted(p.name for p in fx.checkpoint_dir.iterdir() if p.name != "_metadata")
    target = draw(st.sampled_from(["_metadata", "channel", "plan"]))
    if target == "plan":
        rel = plan
        new = json_damage((fx.root / plan).read_text()).map(str.encode)
    else:
        name = "_metadata" if target == "_metadata" else draw(st.sampled_from(channel_files))
        rel = f"{fx.info['checkpoint']}/{name}"
        new = byte_damage((fx.root / rel).read_bytes())
    return fx.name, plan, Damage(rel, draw(new))


class Damage:
    """Writes the damaged content over one file of the copy; its repr shows what changed."""

    def __init__(self, rel: str, content: bytes) -> None:
        self.rel, self.content = rel, content

    def __call__(self, root: Path) -> None:
        (root / self.rel).write_bytes(self.content)

    def __repr__(self) -> str:
        return f"Damage({self.rel!r}, {len(self.content)} bytes, head={self.content[:300]!r})"


# --- commands -------------------------------------------------------------------------------------------

UIDS = {"2.3.0-unaligned": ["--uid", "Source: seq=src"]}  # a stream-graph plan shows names, not uids


def command_args(command: str, fx: str, chk: str, plan: str, out: str) -> list[str]:
    uid = UIDS.get(fx, []) if plan.endswith("plan.json") else []
    return {
        "dump": ["dump", chk, "--tree"],
        "dump-json": ["dump", chk, "--json"],
        "validate": ["validate", chk, "--plan", plan, *uid],
        "analyze": ["analyze", chk, "--plan", plan, "--decode", "2", "--json", *uid],
        "rescale": [
            "rescale", chk, "--plan", plan, *uid, "-p", "slow=3", "--key-fn", "slow=support.keyfns:key_of",
            "--master", "inprocess", "--out", out,
        ],
        "rescale-force": [
            "rescale", chk, "--plan", plan, *uid, "-p", "slow=3", "--key-fn", "slow=support.keyfns:key_of",
            "--master", "inprocess", "--out", out, "--force",
        ],
        "relocate": ["repair", "relocate", chk, "--from", "file:/tmp", "--to", "file:/elsewhere", "--out", out],
        "strip": ["repair", "strip-channel-state", chk, "--plan", plan, *uid, "--operator", "slow", "--out", out],
        "clear": ["repair", "clear-finished", chk, "--plan", plan, *uid, "--out", out],
        "drop": ["repair", "drop-operator", chk, "--plan", plan, *uid, "--operator", "tostr", "--out", out],
    }[command]  # fmt: skip


COMMANDS = [
    "dump",
    "dump-json",
    "validate",
    "analyze",
    "rescale",
    "rescale-force",
    "relocate",
    "strip",
    "clear",
    "drop",
]
WRITES = {"rescale", "rescale-force", "relocate", "strip", "clear", "drop"}
# A clean run of each command on an undamaged copy: what the damaged runs are compared against.
CLEAN_EXIT = {"clear": 1}  # unaligned fixtures have nothing finished: "nothing to clear"


def run_checked(command: str, fx: str, plan_name: str, damage: Callable[[Path], None] | None) -> int:
    with tempfile.TemporaryDirectory(prefix="spillway-fuzz-") as tmp:
        root = Path(tmp) / "in"
        shutil.copytree(fixture_named(fx).root, root)
        if damage is not None:
            damage(root)
        outs = Path(tmp) / "outs"
        outs.mkdir()
        out = outs / "new"
        chk = root / fixture_named(fx).info["checkpoint"]
        before = tree_hashes(root)
        args = command_args(command, fx, str(chk), str(root / plan_name), str(out))
        with time_limit(TIME_LIMIT_S):
            result = CliRunner().invoke(app, args)
        text = result.output + (result.stderr if result.stderr_bytes is not None else "")
        where = f"{' '.join(args)}\nexit {result.exit_code}\n{text[-3000:]}"
        if not isinstance(result.exception, SystemExit | None):
            trace = "".join(traceback.format_exception(*result.exc_info)) if result.exc_info else ""
            raise AssertionError(f"{result.exception!r}\n{where}\n{trace}")
        assert "Traceback" not in text, where
        assert result.exit_code in (0, 1, 2), where
        assert tree_hashes(root) == before, f"input changed\n{where}"
        if command in WRITES:
            if result.exit_code != 0:
                assert not (out / "_metadata").exists(), f"complete-looking output after a failure\n{where}"
            assert {p.name for p in outs.iterdir()} <= {"new"}, (
                f"left beside the output: {list(outs.iterdir())}\n{where}"
            )
        if command == "rescale-force" and result.exit_code == 0:
            # Whatever --force left out, what it wrote is sound under the rescaled plan.
            check = CliRunner().invoke(app, ["validate", str(out), "--plan", str(out / "rescaled-plan.json")])
            assert check.exit_code == 0, f"forced output not sound\n{where}\n{check.output[-2000:]}"
        return result.exit_code


@pytest.mark.parametrize("command", COMMANDS)
def test_clean_copy(command: str) -> None:
    """The harness is sound: on an undamaged copy every command does its job."""
    for fx in FIXTURES:
        assert run_checked(command, fx, "jobgraph.json", None) == CLEAN_EXIT.get(command, 0)


@pytest.mark.parametrize("command", COMMANDS)
@FUZZ
@given(tree=damaged_tree())
def test_damaged_input(command: str, tree: tuple[str, str, Callable[[Path], None]]) -> None:
    fx, plan, damage = tree
    run_checked(command, fx, plan, damage)


@FUZZ
@given(
    key=st.text(max_size=30),
    key_type=st.sampled_from(["string", "long", "int", "boolean", "short", "byte", "double", "nope", ""]),
    max_parallelism=st.integers(-5, 2**15 + 5),
    parallelism=st.integers(-5, 2**15 + 5),
    json_out=st.booleans(),
)
def test_keygroup(key: str, key_type: str, max_parallelism: int, parallelism: int, json_out: bool) -> None:
    args = ["keygroup", "--type", key_type, "--max-parallelism", str(max_parallelism)]
    args += ["--parallelism", str(parallelism), *(["--json"] if json_out else []), "--", key]
    with time_limit(TIME_LIMIT_S):
        result = CliRunner().invoke(app, args)
    where = f"{args}\nexit {result.exit_code}\n{result.output[-2000:]}"
    assert isinstance(result.exception, SystemExit | None), f"{result.exception!r}\n{where}"
    assert "Traceback" not in result.output and result.exit_code in (0, 1, 2), where


def _plan_edit(plan: str, edit: Callable[[Any], object]) -> Damage:
    doc = json.loads((fixture_named("2.3.0-unaligned").root / plan).read_text())
    edit(doc)
    return Damage(plan, json.dumps(doc).encode())


@pytest.mark.parametrize(
    ("command", "plan", "edit", "message"),
    [
        # Found by this fuzz: a stream-graph node's name of the wrong type was a TypeError traceback.
        ("clear", "plan.json", lambda d: d["nodes"][0].update(contents=-1), "'contents' is int -1, not a string"),
        ("validate", "plan.json", lambda d: d["nodes"][1].update(parallelism="2"), "'parallelism' is '2'"),
        # Found by this fuzz: a job vertex without a description was a StopIteration traceback (operator ids).
        ("analyze", "jobgraph.json", lambda d: d["nodes"][1].pop("description"), "'description' names no operator"),
        # Found by a randomized run of this fuzz: a node that is not an object was an AttributeError traceback.
        ("rescale", "jobgraph.json", lambda d: d["nodes"].insert(0, ""), "nodes[0] is str"),
    ],
    ids=["contents-int", "parallelism-str", "no-description", "node-not-an-object"],
)
def test_malformed_plan_node_is_a_clean_usage_error(
    command: str, plan: str, edit: Callable[[Any], object], message: str
) -> None:
    with tempfile.TemporaryDirectory(prefix="spillway-fuzz-") as tmp:
        root = Path(tmp) / "in"
        fx = fixture_named("2.3.0-unaligned")
        shutil.copytree(fx.root, root)
        _plan_edit(plan, edit)(root)
        args = command_args(command, fx.name, str(root / fx.info["checkpoint"]), str(root / plan), str(Path(tmp) / "o"))
        result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, SystemExit | None) and result.exit_code == 2, result.output
    assert "malformed plan node" in result.output and message in result.output, result.output
