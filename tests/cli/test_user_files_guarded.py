"""The files a reading command writes for the user — ``analyze --parquet DIR`` and ``report --out FILE`` —
never replace an existing file (exit 2, naming it; ``report --force`` is the one way to replace its page),
are written under a staged name and linked into place, and leave nothing on a failure. Refusals through
the console script; failures injected in-process."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from support.console import spillway
from support.fixtures import fixture_named

from spillway.cli.app import app

FX = fixture_named("2.3.0-unaligned-p3")


def _analyze(directory: Path, *extra: str) -> list[str]:
    return ["analyze", str(FX.checkpoint_dir), "--plan", str(FX.root / "jobgraph.json"), "--parquet",
            str(directory), *extra]  # fmt: skip


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("existing", ["channels.parquet", "records.parquet"])
def test_analyze_parquet_refuses_an_existing_file_and_writes_nothing(existing: str, tmp_path: Path) -> None:
    out = tmp_path / "views"
    out.mkdir()
    (out / existing).write_bytes(b"the user's own file")
    run = spillway(*_analyze(out, "--records", "--json"))
    assert run.code == 2, run.output
    doc = json.loads(run.out.splitlines()[0])
    assert doc["error"].startswith(f"{out / existing}: exists; spillway never overwrites"), doc
    assert _tree(out) == {existing: b"the user's own file"}, "nothing replaced, nothing written beside it"


def test_analyze_parquet_into_a_new_directory_writes_both_views_and_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "a" / "views"
    run = spillway(*_analyze(out, "--records"))
    assert run.code in (0, 1), run.output
    assert sorted(_tree(out)) == ["channels.parquet", "records.parquet"]
    channels = pq.read_table(out / "channels.parquet").to_pylist()
    assert sum(c["records"] or 0 for c in channels) == pq.read_table(out / "records.parquet").num_rows > 0


def test_a_full_disk_while_writing_parquet_is_an_io_error_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spillway.inspect import parquet_out

    def full(a: object, sink: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(parquet_out, "write_channels", full)
    out = tmp_path / "a" / "views"
    res = CliRunner().invoke(app, _analyze(out, "--records", "--json"))
    doc = json.loads(res.stdout.splitlines()[0])
    assert res.exit_code == 3 and doc["category"] == "storage", res.output
    assert doc["error"].startswith(f"{out / 'channels.parquet'}: cannot write: No space left on device"), doc
    assert not (tmp_path / "a").exists(), "records.parquet, its staged name and the directories made: all gone"


def test_report_refuses_a_page_that_appeared_while_it_was_made_and_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spillway import api

    page = tmp_path / "r.html"
    real = api.report

    def slow(*args: object, **kwargs: object) -> object:
        done = real(*args, **kwargs)  # type: ignore[arg-type]
        page.write_text("someone else's page")  # written by another program meanwhile
        return done

    monkeypatch.setattr(api, "report", slow)
    args = ["report", str(FX.root / "checkpoints"), "--plan", str(FX.root / "jobgraph.json"), "--out", str(page)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and f"{page}: exists; spillway never overwrites" in res.output, res.output
    assert page.read_text() == "someone else's page"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"], "no staged page left"


def test_report_refuses_an_existing_page_through_the_console_script(tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    page.write_text("keep me")
    run = spillway("report", str(FX.root / "checkpoints"), "--out", str(page))
    assert run.code == 2 and str(page) in run.err and "--force" in run.err, run.output
    assert page.read_text() == "keep me" and sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]
