"""The preflight matrix: real restores of fixture checkpoints into changed jobs, and what spillway preflight must say.

``tests/fixtures/preflight-matrix/<release>/<case>/`` holds what the restore harness recorded for each case
(``RestoreCheck``, tests/fixtures/generator/README.md): the submitted job's ``jobgraph.json`` (``JsonPlanGenerator``)
and ``plan.json`` (``getExecutionPlan()``), and ``flink.json`` (Flink's outcome, stage, error class and message, and
the case's restore options). The unit test (tests/unit/test_preflight_matrix.py) runs preflight on every recorded row
without a JVM; the integration test (tests/integration/test_preflight_flink.py, marker ``flink``) restores a few rows
live. Re-record with ``python tests/support/preflight_matrix.py RELEASE [CASE ...]`` (one restore at a time).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "preflight-matrix"
RELEASES = ("1.15.4", "1.20.3", "2.0.0", "2.3.0")


@dataclass(frozen=True)
class Case:
    """One restore: fixture ``<release>-<fixture>``, the job (scenario or variant) and its settings."""

    fixture: str  # fixture suffix: "counted", "unaligned"
    what: str  # one line for the docs and the report
    variant: str | None = None
    parallelism: int | None = None  # the whole job (RestoreCheck --parallelism)
    vertex_parallelism: dict[str, int] = field(default_factory=dict)  # uid -> N (scenario "counted")
    allow_non_restored: bool = False
    max_parallelism: int | None = None  # set explicitly in the new job (RestoreCheck --max-parallelism)
    # the restored job runs to its end and its output is checked against the input (Counted.java: every record
    # counted once per key and once by check), so a restore that loses data is told from one that does not
    data_checked: bool = False
    # whether the user tells preflight the max parallelism the new job sets (False: only the plan is given)
    max_parallelism_given: bool = True
    # uids the new job gives differently from the fixture's job (operator name -> new uid), as its user knows them
    new_uids: dict[str, str] = field(default_factory=dict)
    # releases the case is recorded on (None: every one of RELEASES with the fixture)
    releases: tuple[str, ...] | None = None


CASES: dict[str, Case] = {
    "same": Case("counted", "the same job, same parallelism"),
    "keyed-up": Case(
        "counted", "count (keyed state, HASH input with channel state) 2 -> 3", vertex_parallelism={"count": 3}
    ),
    "keyed-down": Case("counted", "count 2 -> 1", vertex_parallelism={"count": 1}),
    "rebalance-up": Case(
        "counted", "parse (REBALANCE input with channel state) 2 -> 3", vertex_parallelism={"parse": 3}
    ),
    "all-down": Case("counted", "every vertex 2 -> 1", parallelism=1),
    "above-max-parallelism": Case(
        "unaligned",
        "every vertex 2 -> 129, above the checkpoint's max parallelism 128 (not set in the job)",
        parallelism=129,
    ),
    "count-above-max-parallelism": Case(
        "counted", "count 2 -> 129 in a job that sets max parallelism 128", vertex_parallelism={"count": 129}
    ),
    "max-parallelism-changed": Case(
        "counted", "the job's max parallelism set to 256 (checkpoint: 128, set explicitly too)", max_parallelism=256
    ),
    "max-parallelism-set-same": Case(
        "unaligned", "the job sets max parallelism 128 explicitly (checkpoint: 128, derived)", max_parallelism=128
    ),
    "removed-stateful": Case("counted", "check (operator list state) removed", variant="without-check"),
    "removed-stateful-allowed": Case(
        "counted", "check removed, --allow-non-restored-state", variant="without-check", allow_non_restored=True
    ),
    "removed-stateless": Case("counted", "the stateless sink removed", variant="without-sink"),
    "removed-keyed": Case("unaligned", "slow (keyed state, input channel state) removed", variant="without-slow"),
    "removed-keyed-allowed": Case(
        "unaligned", "slow removed, --allow-non-restored-state", variant="without-slow", allow_non_restored=True
    ),
    "added-operator": Case("counted", "a new stateless map chained between check and sink", variant="added-operator"),
    "pointwise-rescaled": Case(
        "counted",
        "src -> parse becomes RESCALE (pointwise; parse holds its channel state), parse 2 -> 3",
        variant="src-rescale",
        vertex_parallelism={"parse": 3},
    ),
    "pointwise-same-parallelism": Case(
        "counted", "src -> parse becomes RESCALE (pointwise), parallelism unchanged", variant="src-rescale"
    ),
    "chained-edge-with-state": Case(
        "counted", "src -> parse chained (FORWARD): parse's input channel state inside a chain", variant="src-chained"
    ),
    "mixed-inputs-rescaled": Case(
        "counted",
        "parse gets a second input (new source over RESCALE) next to its REBALANCE input with channel state; "
        "parse 2 -> 3 (FLINK-38267)",
        variant="mixed-inputs",
        vertex_parallelism={"parse": 3},
    ),
    "uid-changed": Case(
        "counted",
        "count's uid changed (count -> count-v2), name kept",
        "count-uid-changed",
        data_checked=True,
        new_uids={"count": "count-v2"},
    ),
    "uid-changed-allowed": Case(
        "counted",
        "count's uid changed, --allow-non-restored-state: count's state is dropped",
        "count-uid-changed",
        allow_non_restored=True,
        data_checked=True,
        new_uids={"count": "count-v2"},
    ),
    "check-uid-changed-allowed": Case(
        "counted",
        "check's uid changed (check -> check-v2), --allow-non-restored-state: check's state and in-flight input "
        "are dropped",
        "check-uid-changed",
        allow_non_restored=True,
        data_checked=True,
        new_uids={"check": "check-v2"},
    ),
    "same-to-the-end": Case("counted", "the same job, run to its end: its output is checked", data_checked=True),
    "added-no-uid": Case(
        "prod-counted-no-uid",
        "a job without uids gets a new map chained after parse: the generated ids after it change",
        "added-no-uid",
        data_checked=True,
        releases=("1.15.4", "1.20.3", "2.3.0"),  # no 2.0.0 fixture of prod-counted-no-uid
    ),
    "keyed-rebalance": Case(
        "counted", "parse -> count (keyed state) over REBALANCE instead of keyBy", "keyed-rebalance", data_checked=True
    ),
    "chained-after-channel-state": Case(
        "counted",
        "a new map chained after count, whose output channel state (to check) now leaves the chain through it",
        "chained-after-count",
        data_checked=True,
    ),
    "max-parallelism-set-unseen": Case(
        "unaligned",
        "the new job sets max parallelism 256 (checkpoint: 128, derived); preflight is given the plan only",
        max_parallelism=256,
        max_parallelism_given=False,
    ),
}

# What a plan does not show and a user knows: the job's uids (operator name -> uid, for --uid), per fixture job.
# Sinks are Sink V2 writers from 1.19 on ("sink: Writer"), SinkFunctions before (FixtureJob.java, Shims.discard).


def job_uids(release: str, fixture: str) -> dict[str, str]:
    if fixture.endswith("no-uid"):
        return {}
    sink_v2 = tuple(map(int, release.split(".")[:2])) >= (1, 19)
    sink = "sink: Writer" if sink_v2 else "Sink: sink"
    if fixture == "counted":
        return {
            "Source: seq": "src",
            "Source: extra": "extra",
            "parse": "parse",
            "count": "count",
            "check": "check",
            "added": "added",
            sink: "sink",
        }
    return {"Source: seq": "src", "tostr": "tostr", "slow": "slow", "len": "len", sink: "sink"}


def case_uids(release: str, name: str) -> dict[str, str]:
    """The uids of the case's new job, as its user knows them (for --uid)."""
    c = CASES[name]
    return job_uids(release, c.fixture) | c.new_uids


def expected_rows() -> list[tuple[str, str]]:
    """Every (release, case) the matrix must hold."""
    return sorted((r, name) for name, c in CASES.items() for r in (c.releases or RELEASES))


def recorded() -> list[tuple[str, str]]:
    return sorted((d.parent.name, d.name) for d in RECORDED.glob("*/*") if (d / "flink.json").is_file())


def recorded_dir(release: str, case: str) -> Path:
    return RECORDED / release / case


def load_recorded(release: str, case: str) -> dict[str, Any]:
    return json.loads((recorded_dir(release, case) / "flink.json").read_text())


RECORDED_KEYS = (
    "flink_version",
    "scenario",
    "variant",
    "parallelism",
    "vertex_parallelism",
    "max_parallelism",
    "allow_non_restored_state",
    "outcome",
    "stage",
    "error_class",
    "error",
    "causes",
)


def record(release: str, name: str) -> dict[str, Any]:
    """Restore the case with real Flink and (re)write its recorded plans and outcome."""
    import shutil
    import tempfile

    from support.fixtures import fixture_named
    from support.flink_harness import restore

    case = CASES[name]
    fx = fixture_named(f"{release}-{case.fixture}")
    with tempfile.TemporaryDirectory(prefix="spillway-preflight-") as tmp:
        res = restore(
            release,
            fx.info["scenario"],
            fx.checkpoint_dir,
            variant=case.variant,
            parallelism=case.parallelism,
            allow_non_restored=case.allow_non_restored,
            vertex_parallelism=case.vertex_parallelism or None,
            max_parallelism=case.max_parallelism,
            run_seconds=3,
            workdir=Path(tmp) / "work",
            until_finished=case.data_checked,
        )
        out = recorded_dir(release, name)
        out.mkdir(parents=True, exist_ok=True)
        for src, dst in ((res["jobgraph_plan"], "jobgraph.json"), (res["stream_plan"], "plan.json")):
            if Path(src).is_file():
                shutil.copy(src, out / dst)
    doc: dict[str, Any] = {"case": name, "fixture": f"{release}-{case.fixture}", "what": case.what}
    doc |= {k: res.get(k) for k in RECORDED_KEYS}
    doc["causes"] = [c[:600] for c in (doc["causes"] or [])][:6]
    if case.data_checked and res["outcome"] == "restored":
        doc["data"] = data_check(res.get("results") or [])
    (out / "flink.json").write_text(json.dumps(doc, indent=1) + "\n")
    return doc


# Counted.java: the source emits 0..N-1, parse keys each value by v % KEYS
COUNTED_N = 200_000
COUNTED_KEYS = 32


def data_check(lines: list[str]) -> dict[str, Any]:
    """The restored job's output against its input (Counted.java): per key, count's records and sum (its keyed
    state plus what it got after the restore) must be those of the source's values with that key ("count KEY
    RECORDS SUM"); over all check subtasks (operator state plus records after the restore; "check RECORDS SUM"),
    N records summing to N(N-1)/2. Anything else is data the restore lost (or duplicated)."""
    counts = {int(k): (int(n), int(t)) for _, k, n, t in (ln.split() for ln in lines if ln.startswith("count "))}
    checks = [(int(n), int(t)) for _, n, t in (ln.split() for ln in lines if ln.startswith("check "))]
    expected = {
        k: (len(range(k, COUNTED_N, COUNTED_KEYS)), sum(range(k, COUNTED_N, COUNTED_KEYS))) for k in range(COUNTED_KEYS)
    }
    wrong = sorted(k for k in expected if counts.get(k) != expected[k])
    records = sum(n for n, _ in checks)
    total = sum(t for _, t in checks)
    return {
        "complete": not wrong and records == COUNTED_N and total == COUNTED_N * (COUNTED_N - 1) // 2,
        "keys_with_wrong_count": len(wrong),
        "counted_records": sum(n for n, _ in counts.values()),
        "checked_records": records,
        "expected_records": COUNTED_N,
    }


def preflight_settings(release: str, name: str, checkpoint: str) -> Any:
    """What a user of the case's job knows and gives preflight: allow-non-restored-state, the max parallelism
    the job sets (the counted job calls setMaxParallelism(128), Counted.java; the unaligned job sets none), the
    restoring release."""
    from spillway.inspect.preflight import Settings

    c = CASES[name]
    if not c.max_parallelism_given:
        return Settings(c.allow_non_restored, {}, version_of(release), checkpoint)
    # the counted jobs call setMaxParallelism(128) (Counted.java); the others set none unless the case does
    mp = c.max_parallelism or (128 if "counted" in c.fixture else None)
    return Settings(c.allow_non_restored, {} if mp is None else {None: mp}, version_of(release), checkpoint, mp is None)


def version_of(release: str) -> tuple[int, int, int]:
    major, minor, patch = map(int, release.split("."))
    return major, minor, patch


def preflight_row(release: str, name: str, flavour: str = "jobgraph.json", uids: bool = True) -> Any:
    """spillway preflight's result for a recorded row (the recorded submitted plan, the fixture's checkpoint)."""
    from spillway.inspect.preflight import check
    from spillway.inspect.topology import load_plan
    from spillway.storage.load import load_checkpoint
    from support.fixtures import fixture_named

    c = CASES[name]
    fx = fixture_named(f"{release}-{c.fixture}")
    plan = load_plan(recorded_dir(release, name) / flavour, case_uids(release, name) if uids else None)
    loaded = load_checkpoint(fx.checkpoint_dir)
    return check(plan, loaded.checkpoint, preflight_settings(release, name, str(fx.checkpoint_dir)), loaded)


def table() -> str:
    """The matrix as a Markdown table: per case and release, Flink's outcome (message, and for a job run to its end
    whether its output was complete) beside preflight's answer."""
    lines = [
        "| case | release | Flink | Flink's message | data | preflight | preflight's checks |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, case in CASES.items():
        first = True
        for release in case.releases or RELEASES:
            if not (recorded_dir(release, name) / "flink.json").is_file():
                continue
            f = load_recorded(release, name)
            r = preflight_row(release, name)
            checks = sorted({x.check for x in r.reasons if x.verdict in ("refused", "fails", "loss", "unknown")})
            msg = (f["error"] or "").replace("\n", " ").replace("|", "\\|")
            msg = msg if len(msg) < 110 else msg[:107] + "…"
            what = f"`{name}`: {case.what}" if first else ""
            first = False
            outcome = f["outcome"] + (f" ({f['stage']})" if f["stage"] else "")
            data = f.get("data")
            seen = (
                ""
                if data is None
                else "complete"
                if data["complete"]
                else f"{data['checked_records']} of {data['expected_records']} records checked"
            )
            lines.append(
                f"| {what} | {release} | {outcome} | {msg} | {seen} | {r.answer.value} | {', '.join(checks)} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":  # python tests/support/preflight_matrix.py RELEASE [CASE ...] | --table
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    if sys.argv[1:] == ["--table"]:
        print(table())
        sys.exit(0)
    release, *names = sys.argv[1:]
    for name in names or list(CASES):
        doc = record(release, name)
        print(name, doc["outcome"], doc["stage"], (doc["error"] or "")[:300], flush=True)
