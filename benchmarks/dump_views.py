#!/usr/bin/env python3
"""Is ``spillway dump``'s output the same at two revisions? Every fixture, in every view.

    python benchmarks/dump_views.py 7db9a23            # that revision against this checkout
    python benchmarks/dump_views.py --capture OUT.json # (internal) this checkout's views, as JSON

Each revision's spillway runs in a child interpreter with the revision first on ``PYTHONPATH`` (the other
one from ``git archive`` into a temporary directory: no worktree is added to the repository) and captures,
in-process through click's test runner at ``COLUMNS=200``, stdout and exit code of: the table, ``--tree``,
``--json``, ``--subtask 0``, ``--subtask 999`` (a usage error), ``--operator`` (table and ``--json``), an
unknown ``--operator``, every job directory (newest chk-N picked), and every fixture plan with ``--plan``
(text and JSON). Exit status 0 when every view is byte-identical, 1 otherwise (the differing views listed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"


def capture(out: Path) -> None:
    os.environ["COLUMNS"] = "200"
    from click.testing import CliRunner

    from spillway.cli.app import app

    runner = CliRunner()
    views: dict[str, dict[str, object]] = {}

    def run(key: str, args: list[str]) -> str:
        r = runner.invoke(app, ["dump", *args])
        views[key] = {"rc": r.exit_code, "stdout": r.stdout}
        return str(r.stdout)

    metas = sorted(FIXTURES.rglob("_metadata"))
    for m in metas:
        chk = str(m.relative_to(REPO).parent)
        doc = run(f"{chk} --json", [str(m.relative_to(REPO)), "--json"])
        for extra in ([], ["--tree"], ["--subtask", "0"], ["--subtask", "999"], ["--json", "--subtask", "0"]):
            run(" ".join([chk, *extra]), [chk, *extra])
        try:
            ops = json.loads(doc)["operators"]
        except ValueError:
            ops = []
        if ops:
            run(f"{chk} --operator first", [chk, "--operator", ops[0]["operator_id"]])
            run(f"{chk} --json --operator last", [chk, "--json", "--operator", ops[-1]["operator_id"]])
        run(f"{chk} --operator unknown", [chk, "--operator", "no-such-operator"])
    for job in sorted({m.parent.parent for m in metas}):
        run(f"job {job.relative_to(REPO)}", [str(job.relative_to(REPO))])
    for plan in sorted(FIXTURES.rglob("plan.json")):
        for m in sorted(plan.parent.rglob("_metadata"))[:1]:
            chk = str(m.relative_to(REPO).parent)
            for extra in ([], ["--json"]):
                run(
                    f"plan {plan.relative_to(REPO)} {chk} {extra}", [chk, "--plan", str(plan.relative_to(REPO)), *extra]
                )
    out.write_text(json.dumps(views, indent=1, sort_keys=True))


def views_of(code: Path, tmp: Path, name: str) -> dict[str, dict[str, object]]:
    out = tmp / f"{name}.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), str(REPO / "tests")])}
    subprocess.run([sys.executable, "-P", __file__, "--capture", str(out)], cwd=REPO, env=env, check=True)
    views: dict[str, dict[str, object]] = json.loads(out.read_text())
    return views


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rev", nargs="?", help="the revision to compare this checkout with")
    ap.add_argument("--capture", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.capture:
        capture(args.capture)
        return 0
    if not args.rev:
        ap.error("give a revision")
    with tempfile.TemporaryDirectory(prefix="spillway-views-") as tmp_name:
        tmp = Path(tmp_name)
        old = tmp / "old"
        old.mkdir()
        archive = subprocess.run(["git", "archive", args.rev, "spillway"], cwd=REPO, capture_output=True, check=True)
        (tmp / "old.tar").write_bytes(archive.stdout)
        with tarfile.open(tmp / "old.tar") as tar:
            tar.extractall(old, filter="data")
        before, after = views_of(old, tmp, "before"), views_of(REPO, tmp, "after")
    differ = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    for key in differ:
        print(f"differs: {key}")
    print(f"{len(before.keys() | after.keys()) - len(differ)} of {len(before.keys() | after.keys())} views identical")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
