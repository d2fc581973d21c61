"""The fault suite's sources and witnesses (tests/faults/): a real fixture copied into a fixed layout, crafted
handle paths aimed at a sentinel directory beside it, snapshots that prove a tree did not change, and the
writing commands run on such a source through the installed console script.

Layout under ``base`` (both job directories sit four levels below ``base``, so a path that climbs five levels
from either checkpoint directory lands on the sentinel)::

    base/src/<fixture>/checkpoints/<job>/chk-N   the source (its absolute paths name this place)
    base/sentinel/                               files of known content outside every output
    base/dst/a/b/<job>/                          --to; the output is base/dst/a/b/<job>/chk-N
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.model.checkpoint import FileHandle, RelativeFileHandle, StreamHandle, StreamLeaf
from spillway.model.walk import all_stream_handles, file_path_of, transform_stream_handles
from support.console import ROOT, SCRIPT, Run, spillway
from support.fixtures import Fixture, fixture_named

CLIMB = "../" * 5  # from base/src/<fx>/checkpoints/<job>/chk-N (or base/dst/a/b/<job>/chk-N) up to base
# A run's own scratch: hidden staging directories and files, partial files, locks (Flink names no file so).
SCRATCH_SUFFIXES = (".partial", ".part", ".lock", ".tmp")


Entry = tuple[int, int, int, int, str]  # a snapshot's entry: kind, mode, size, mtime (ns), content hash or link


@dataclass(frozen=True)
class Layout:
    base: Path
    fx: Fixture

    @property
    def root(self) -> Path:
        return self.base / "src" / self.fx.name

    @property
    def job(self) -> Path:
        return self.root / "checkpoints" / self.fx.info["job_id"]

    @property
    def chk(self) -> Path:
        return self.root / self.fx.info["checkpoint"]

    @property
    def plan(self) -> Path:
        return self.root / "jobgraph.json"

    @property
    def sentinel(self) -> Path:
        return self.base / "sentinel"

    @property
    def dst(self) -> Path:
        return self.base / "dst"

    @property
    def to(self) -> Path:
        return self.dst / "a" / "b" / self.fx.info["job_id"]

    @property
    def out(self) -> Path:
        return self.to / self.chk.name

    def metadata(self) -> Path:
        return self.chk / "_metadata"


def lay_out(base: Path, fixture: str) -> Layout:
    """Copy ``fixture`` into ``base`` with every absolute path of its ``_metadata`` naming the copy (Flink
    wrote them under ``generated_at``); make the sentinel and the empty ``--to``."""
    fx = fixture_named(fixture)
    layout = Layout(base, fx)
    shutil.copytree(fx.root, layout.root, symlinks=True)
    old, new = "file:" + fx.info["generated_at"], "file:" + str(layout.root)

    def localise(leaf: StreamLeaf) -> StreamHandle:
        if isinstance(leaf, FileHandle) and leaf.path.startswith(old + "/"):
            return leaf.with_file_name(new + leaf.path[len(old) :])
        return leaf

    cp = decode_metadata(layout.metadata().read_bytes())
    transform_stream_handles(cp, localise)
    layout.metadata().write_bytes(encode_metadata(cp))
    layout.sentinel.mkdir()
    (layout.sentinel / "notes.txt").write_text("an operator's file next to the checkpoints; never to be touched\n")
    (layout.sentinel / "deep").mkdir()
    (layout.sentinel / "deep" / "keep.bin").write_bytes(bytes(range(256)) * 64)
    layout.to.mkdir(parents=True)
    return layout


def target_file(layout: Layout) -> str:
    """The name of the first file (in walk order) that the source's handles point into: the one crafted."""
    cp = decode_metadata(layout.metadata().read_bytes())
    for _, leaf in all_stream_handles(cp):
        name = file_path_of(leaf)
        if name is not None:
            return name
    raise AssertionError(f"{layout.fx.name}: no file-backed handle to craft")


def _local(layout: Layout, name: str) -> Path:
    return Path(name.removeprefix("file:")) if name.startswith("file:") else layout.chk / name


# How each case names the target file; every case leaves the target's bytes at sentinel/state-1 (the file an
# escaping path reaches) and the target itself gone, so the source is readable only through the crafted path.
CASES = ("relative-dotdot", "absolute-dotdot", "symlink-out", "nul", "outside-file")
REFUSED = {"relative-dotdot", "absolute-dotdot", "nul"}  # refused by every writing command, --force or not


def craft(layout: Layout, case: str) -> str:
    """Make ``layout``'s source point at the sentinel as ``case`` says; returns the crafted path as written."""
    target = target_file(layout)
    original = _local(layout, target)
    (layout.sentinel / "state-1").write_bytes(original.read_bytes())
    original.unlink()
    if case == "symlink-out":
        original.symlink_to(layout.sentinel / "state-1")
        return str(original)
    if case == "relative-dotdot":
        crafted_path = CLIMB + "sentinel/state-1"
    elif case == "absolute-dotdot":
        crafted_path = f"file:{layout.chk}/{CLIMB}sentinel/state-1"
    elif case == "nul":
        crafted_path = f"{target}\x00.evil"  # a C library would open the target; Python refuses the path
    elif case == "outside-file":
        crafted_path = f"file:{layout.sentinel}/state-1"
    else:
        raise ValueError(case)
    relative = case == "relative-dotdot" or (case == "nul" and not target.startswith("file:"))

    def aim(leaf: StreamLeaf) -> StreamHandle:
        if file_path_of(leaf) != target:
            return leaf
        assert isinstance(leaf, FileHandle | RelativeFileHandle), f"crafting a {type(leaf).__name__}: not a whole file"
        return (RelativeFileHandle if relative else FileHandle)(crafted_path, leaf.state_size)

    cp = decode_metadata(layout.metadata().read_bytes())
    transform_stream_handles(cp, aim)
    layout.metadata().write_bytes(encode_metadata(cp))
    return crafted_path


# --- witnesses ------------------------------------------------------------------------------------------


def snapshot(root: Path) -> dict[str, Entry]:
    """Every path under ``root`` (symlinks not followed): kind, mode, size, mtime and a hash of a file's bytes
    or a link's target. Equal snapshots: not a byte, name or timestamp changed."""
    found: dict[str, Entry] = {}
    if not root.exists():
        return found
    for here, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            p = Path(here) / name
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                digest = os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                digest = ""
            found[str(p.relative_to(root))] = (stat.S_IFMT(st.st_mode), st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return found


def changes(before: dict[str, Entry], after: dict[str, Entry], dir_times: bool = True) -> list[str]:
    """What differs between two snapshots, one line each (empty: nothing). ``dir_times=False``: a directory
    whose entries are the same but whose mtime moved (something was made there and removed again) is equal."""

    def same(a: Entry, b: Entry) -> bool:
        return a == b or (not dir_times and stat.S_ISDIR(a[0]) and a[:3] == b[:3])

    return sorted(
        [f"+ {p}" for p in after.keys() - before.keys()]
        + [f"- {p}" for p in before.keys() - after.keys()]
        + [f"~ {p}" for p in before.keys() & after.keys() if not same(before[p], after[p])]
    )


def scratch_left(root: Path) -> list[str]:
    """Staging directories, partial files and locks a run left under ``root`` (Flink names none so)."""
    return (
        sorted(
            str(p.relative_to(root))
            for p in root.rglob("*")
            if p.name.startswith(".") or ".spillway" in p.name or p.name.endswith(SCRATCH_SUFFIXES)
        )
        if root.exists()
        else []
    )


# --- the writing commands ----------------------------------------------------------------------------------

# The writing commands, each on fixtures where it writes an output from the pristine source (exit 0).
COMMANDS = ("relocate", "relocate-copy", "strip", "clear", "drop", "rescale")


def command(layout: Layout, name: str, *extra: str, master: str = "inprocess", to: Path | None = None) -> list[str]:
    """The console-script arguments of writing command ``name`` from ``layout``'s source into its output
    (``to``: another job directory for the output, ``to/chk-N``, and for --to)."""
    to = layout.to if to is None else to
    chk, out, plan = str(layout.chk), str(to / layout.chk.name), str(layout.plan)
    move = ["--from", f"file:{layout.job}", "--to", f"file:{to}"]
    return {
        "relocate": ["repair", "relocate", chk, "--out", out, *move],
        "relocate-copy": ["repair", "relocate", chk, "--out", out, *move, "--copy-data"],
        "strip": ["repair", "strip-channel-state", chk, "--out", out],
        "clear": ["repair", "clear-finished", chk, "--out", out, "--operator", "bsrc", "--operator", "psrc"],
        "drop": ["repair", "drop-operator", chk, "--out", out, "--operator", "tostr", "--plan", plan],
        "rescale": [
            "rescale", chk, "--plan", plan, "-p", "slow=3", "--key-fn", "slow=support.keyfns:key_of",
            "--master", master, "--out", out,
        ],
    }[name] + list(extra)  # fmt: skip


# The key function of the fixture jobs (support.keyfns) must be importable by the console script too.
TESTS_ON_PATH = {"PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"}


def run(args: list[str], timeout: float = 120) -> Run:
    """``spillway ARGS`` through the installed console script, this checkout's code first."""
    return spillway(*args, env=TESTS_ON_PATH, timeout=timeout)


def console_env() -> dict[str, str]:
    """The environment ``support.console.spillway`` gives the script, with the fixture jobs' key functions."""
    env = {**os.environ, **TESTS_ON_PATH}
    env.pop("SPILLWAY_STORAGE_TIMEOUT", None)
    return env


def start(args: list[str]) -> subprocess.Popen[str]:
    """``spillway ARGS`` started in its own process group (a SIGKILL then reaches only it)."""
    return subprocess.Popen(
        [str(SCRIPT), *args], env=console_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def finish(proc: subprocess.Popen[str], started: float, timeout: float = 120) -> Run:
    out, err = proc.communicate(timeout=timeout)
    return Run(proc.returncode, out, err, time.monotonic() - started)


def data_files(root: Path) -> dict[str, str]:
    """Every file under ``root`` but ``_metadata`` (which names its own place): relative path -> sha256."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "_metadata" and not p.is_symlink()
    }
