"""Crafted handle paths in ``_metadata``, through the installed console script: a path that climbs out with
``..`` (relative, or absolute like ``/ckpts/J/chk-3/../../../../tmp/victim/state-1``), a NUL byte, an
absolute path to a file outside the job directory, a symlink leading out.

Each case is a real Flink checkpoint (V2 … V6) whose ``_metadata`` is decoded, changed in one handle path and
encoded back. ``validate`` must report ``path-escape`` / ``bad-path`` (exit 1), ``dump`` must mark it, ``files``
must list an outside file apart and never as freed by dropping the checkpoint, every command must answer (JSON
where asked) without a traceback, and no writing command may write from such a source, even with --force. A
sentinel file outside every checkpoint must be byte-identical afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.console import Run, spillway
from support.damaged import Copy, copy_fixture, rewrite

from spillway.model.checkpoint import FileHandle, is_file_backed
from spillway.model.walk import all_stream_handles, transform_stream_handles

SENTINEL = b"an operator's file outside every checkpoint\n"
CLIMB = "../" * 40  # more than any temporary directory is deep: the kernel stops at /

# One fixture per metadata format, each with the handle kind it holds (first file-backed handle in _metadata).
FORMATS = {
    "V2": "1.10.3-aligned",  # absolute FileStateHandle (keyed state)
    "V3": "1.15.4-prod",  # relative channel-state file
    "V4": "1.17.2-unaligned",  # relative channel-state file
    "V5": "2.0.0-prod",  # relative channel-state file
    "V6": "2.3.0-rocksdb-incremental",  # absolute shared SST file
    "V6-merged": "2.3.0-file-merging",  # SegmentFileStateHandle (file merging)
}


@dataclass
class Crafted:
    copy: Copy
    sentinel: Path
    original: str  # the handle path before the change
    written: str  # the handle path written into _metadata
    operator_id: str
    subtask: int | None

    @property
    def job_dir(self) -> Path:
        return self.copy.chk.parent

    @property
    def checkpoints(self) -> str:
        return str(self.copy.chk.parent.parent)


def craft(tmp_path: Path, fixture: str, kind: str) -> Crafted:
    """Copy ``fixture`` and change its first file-backed handle path: ``dotdot`` (climbs out to the sentinel,
    keeping the handle's kind), ``nul`` (a NUL byte appended), ``outside`` (an absolute FileStateHandle naming
    the sentinel)."""
    sentinel = tmp_path / "outside" / "victim" / "state-1"
    sentinel.parent.mkdir(parents=True)
    sentinel.write_bytes(SENTINEL)
    copy = copy_fixture(fixture, tmp_path / "src")
    site, first = next((s, h) for s, h in all_stream_handles(copy.checkpoint()) if is_file_backed(h))
    original = first.file_name
    if kind == "dotdot":
        target = str(sentinel).lstrip("/")
        written = CLIMB + target if first.relative else f"file:{copy.chk}/{CLIMB}{target}"
    elif kind == "nul":
        written = original + "\0.bak"
    else:
        written = f"file:{sentinel}"
    done: list[bool] = []

    def change(h: Any) -> Any:
        if done or not is_file_backed(h):
            return h
        done.append(True)
        return FileHandle(written, h.state_size) if kind == "outside" else h.with_file_name(written)

    rewrite(copy, lambda cp: transform_stream_handles(cp, change))
    subtask = site.subtask.index if site.subtask else None
    return Crafted(copy, sentinel, original, written, site.operator.operator_id, subtask)


def tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def clean(run: Run) -> Run:
    assert "Traceback" not in run.output, run.output
    assert "embedded null byte" not in run.output, run.output
    return run


def as_json(run: Run) -> Any:
    clean(run)
    return json.loads(run.out)


def shown(path: str) -> str:
    """A path as findings and tables show it: a NUL as \\x00."""
    return path.replace("\0", "\\x00")


# ------------------------------------------------------------------ validate


@pytest.mark.parametrize("kind", ["dotdot", "nul"])
@pytest.mark.parametrize("version", sorted(FORMATS))
def test_validate_reports_the_unsafe_path_as_an_error(tmp_path: Path, version: str, kind: str) -> None:
    c = craft(tmp_path, FORMATS[version], kind)
    run = spillway("validate", c.checkpoints, "--json")
    doc = as_json(run)
    assert run.code == 1, run.output
    rule = "path-escape" if kind == "dotdot" else "bad-path"
    hits = [f for f in doc["findings"] if f["rule"] == rule]
    assert [(f["severity"], f["file"], f["subtask"]) for f in hits] == [("error", shown(c.written), c.subtask)]
    assert hits[0]["message"].startswith(shown(c.written) + ": ")
    assert not doc["ok"]
    assert c.sentinel.read_bytes() == SENTINEL


def test_validate_text_names_the_path_with_the_nul_escaped(tmp_path: Path) -> None:
    c = craft(tmp_path, "1.10.3-aligned", "nul")
    run = clean(spillway("validate", c.checkpoints))
    assert run.code == 1
    assert "bad-path" in run.out and "\\x00.bak" in run.out and "\0" not in run.out


def test_an_absolute_path_elsewhere_is_not_an_escape(tmp_path: Path) -> None:
    """Flink writes absolute paths anywhere (shared directories, other jobs): only '..' or a NUL is unsafe."""
    c = craft(tmp_path, "2.3.0-rocksdb-incremental", "outside")
    doc = as_json(spillway("validate", c.checkpoints, "--json"))
    assert not {f["rule"] for f in doc["findings"]} & {"path-escape", "bad-path"}


# ------------------------------------------------------------------ dump


@pytest.mark.parametrize("kind", ["dotdot", "nul"])
@pytest.mark.parametrize("version", ["V2", "V4", "V6", "V6-merged"])
def test_dump_marks_the_unsafe_path(tmp_path: Path, version: str, kind: str) -> None:
    c = craft(tmp_path, FORMATS[version], kind)
    rule = "path-escape" if kind == "dotdot" else "bad-path"
    run = spillway("dump", c.checkpoints, "--json")
    doc = as_json(run)
    assert [(u["path"], u["rule"]) for u in doc["source"]["unsafe_paths"]] == [(shown(c.written), rule)]
    marked = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "path_problem" in node:
                marked.append((node.get("relative_path", node.get("path")), node["path_problem"]["rule"]))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(doc["operators"])
    assert set(marked) == {(c.written, rule)}  # the path exactly as stored, marked
    for args in (["dump", c.checkpoints], ["dump", c.checkpoints, "--tree"]):
        text = clean(spillway(*args))
        assert text.code == 0 and rule in text.out and shown(c.written) in text.out and "\0" not in text.out


# ------------------------------------------------------------------ files


@pytest.mark.parametrize("kind", ["dotdot", "outside"])
@pytest.mark.parametrize("version", ["V2", "V3", "V6", "V6-merged"])
def test_files_lists_an_outside_file_apart_and_never_as_freed(tmp_path: Path, version: str, kind: str) -> None:
    c = craft(tmp_path, FORMATS[version], kind)
    run = spillway("files", c.checkpoints, "--json")
    doc = as_json(run)
    real = os.path.realpath(c.sentinel)
    entry = next(f for f in doc["files"] if f["path"] == real)
    assert (entry["exists"], entry["size"], entry["area"], entry["outside_job_dir"]) == (
        True,
        len(SENTINEL),
        "external",
        True,
    )
    assert (entry["path_problem"] or {}).get("rule") == ("path-escape" if kind == "dotdot" else None)
    cp = doc["checkpoints"][0]
    assert real not in cp["unreferenced_if_dropped"]["paths"]
    assert real in cp["outside_job_dir"]["paths"]
    assert not [f for f in doc["files"] if f["outside_job_dir"] and f["path"] in cp["unreferenced_if_dropped"]["paths"]]
    assert run.code == (1 if kind == "dotdot" else 0), run.output
    text = clean(spillway("files", c.checkpoints))
    assert "(outside the job directory)" in text.out


def test_files_never_looks_up_a_nul_path(tmp_path: Path) -> None:
    c = craft(tmp_path, "2.3.0-rocksdb-incremental", "nul")
    run = spillway("files", c.checkpoints, "--json")
    doc = as_json(run)
    assert run.code == 1
    (entry,) = [f for f in doc["files"] if f["path_problem"]]
    assert (entry["name"], entry["exists"], entry["path_problem"]["rule"]) == (c.written, False, "bad-path")
    assert entry["path"] not in doc["checkpoints"][0]["unreferenced_if_dropped"]["paths"]
    assert doc["unsafe_paths"] == [entry["path"]]
    text = clean(spillway("files", c.checkpoints))
    assert "bad-path" in text.out and "\0" not in text.out


def test_files_a_symlink_leading_out_is_external(tmp_path: Path) -> None:
    """No change to _metadata: the channel-state file in chk-3 is replaced by a symlink to a file elsewhere."""
    copy = copy_fixture("2.3.0-unaligned", tmp_path / "src")
    channel_file = next(p for p in copy.chk.iterdir() if p.name != "_metadata")
    outside = tmp_path / "outside" / channel_file.name
    outside.parent.mkdir()
    outside.write_bytes(channel_file.read_bytes())
    channel_file.unlink()
    channel_file.symlink_to(outside)
    doc = as_json(spillway("files", str(copy.chk), "--json"))
    entry = next(f for f in doc["files"] if f["path"] == os.path.realpath(outside))
    assert (entry["exists"], entry["outside_job_dir"], entry["area"]) == (True, True, "external")
    assert entry["path"] not in doc["checkpoints"][0]["unreferenced_if_dropped"]["paths"]


# ------------------------------------------------------------------ every command answers


@pytest.mark.parametrize("kind", ["dotdot", "nul"])
@pytest.mark.parametrize("fixture", ["1.10.3-aligned", "2.3.0-unaligned"])
def test_every_reading_command_answers_without_a_traceback(tmp_path: Path, fixture: str, kind: str) -> None:
    c = craft(tmp_path, fixture, kind)
    plan = str(c.copy.plan)
    pristine = copy_fixture(fixture, tmp_path / "pristine")
    for args, code in (
        (["validate", c.checkpoints, "--plan", plan, "--json"], 1),
        (["files", c.checkpoints, "--json"], 1),
        (["diff", str(c.copy.chk), str(pristine.chk), "--json"], 1),
        (["analyze", c.checkpoints, "--plan", plan, "--json"], None),
        (["dump", str(c.copy.chk), "--json"], 0),
    ):
        run = spillway(*args)
        doc = as_json(run)
        assert doc["schema"].startswith("spillway."), args
        if code is not None:
            assert run.code == code, (args, run.output)
    page = tmp_path / "report.html"
    run = clean(spillway("report", c.checkpoints, "--plan", plan, "--out", str(page)))
    assert run.code == 1 and "validate errors" in run.output
    assert ("path-escape" if kind == "dotdot" else "bad-path") in page.read_text()
    assert c.sentinel.read_bytes() == SENTINEL


# ------------------------------------------------------------------ writing commands refuse, even with --force


def _writing(c: Crafted, out: Path, fixture: str) -> dict[str, list[str]]:
    plan = str(c.copy.plan)
    to = str(out.parent / "to")
    first_dir = c.original.rpartition("/")[0] if "/" in c.original else "file:/nowhere"
    return {
        "relocate": ["repair", "relocate", c.checkpoints, "--from", first_dir, "--to", to, "--out", str(out)],
        "relocate-copy": [
            "repair", "relocate", c.checkpoints, "--from", first_dir, "--to", to, "--copy-data", "--out", str(out),
        ],
        "strip": ["repair", "strip-channel-state", c.checkpoints, "--out", str(out)],
        "clear": ["repair", "clear-finished", c.checkpoints, "--plan", plan, "--out", str(out)],
        "drop": ["repair", "drop-operator", c.checkpoints, "--plan", plan, "--operator", "tostr", "--out", str(out)],
        "rescale": [
            "rescale", c.checkpoints, "--plan", plan, "-p", "slow=3", "--key", "slow=string",
            "--master", "inprocess", "--out", str(out),
        ],
    }  # fmt: skip


@pytest.mark.parametrize("command", ["relocate", "relocate-copy", "strip", "clear", "drop", "rescale"])
@pytest.mark.parametrize(("fixture", "kind"), [("1.10.3-aligned", "dotdot"), ("2.3.0-unaligned", "nul")])
def test_writing_commands_refuse_an_unsafe_source_even_with_force(
    tmp_path: Path, fixture: str, kind: str, command: str
) -> None:
    c = craft(tmp_path, fixture, kind)
    before = tree(c.copy.root)
    out = tmp_path / "out"
    rule = "path-escape" if kind == "dotdot" else "bad-path"
    for force in ([], ["--force"]):
        run = clean(spillway(*_writing(c, out, fixture)[command], *force, "--json"))
        assert run.code == 1, run.output
        error = json.loads(run.out)["error"]
        assert f"{rule}: {shown(c.written)}" in error and "not even with --force" in error, error
        assert not out.exists() and not (tmp_path / "to").exists()
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]
    assert tree(c.copy.root) == before
    assert c.sentinel.read_bytes() == SENTINEL
