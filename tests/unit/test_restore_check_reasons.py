"""The reasons preflight gives, word for word, on recorded real restores (tests/fixtures/preflight-matrix/): the
text users read in the CLI and the JSON. Each expected operator id comes from Flink's own hasher (the fixture's
ids.json), each number and message of Flink's from the restore Flink ran (flink.json); the surrounding words are
preflight's documented contract for each check (docs/preflight.md)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from functools import cache

from support.fixtures import fixture_named
from support.preflight_matrix import case_uids, load_recorded, preflight_row, preflight_settings, recorded_dir

from spillway.inspect.preflight import (
    FAILS,
    LOSS,
    OK,
    REFUSED,
    UNKNOWN,
    WARNING,
    FlinkDoes,
    PreflightVerdict,
    Reason,
    Settings,
    check,
)
from spillway.inspect.restore_checks import known_bugs
from spillway.inspect.topology import load_plan
from spillway.storage.load import load_checkpoint

RELEASE = "2.0.0"  # before FLINK-38267's fix (2.0.1): every check of the matrix names a refusal on it

FLINK_POINTWISE = (
    "Cannot rescale the given pointwise partitioner.\nDid you change the partitioner to forward or rescale?\n"
    "It may also help to add an explicit shuffle()."
)


@cache
def flink_ids(fixture: str) -> dict[str, str]:
    """uid -> operator id, as Flink's hasher wrote them for the fixture's job (ids.json)."""
    doc = json.loads((fixture_named(fixture).root / "ids.json").read_text())
    return {n["uid"]: n["operator_id"] for n in doc["stream_nodes"] if n.get("uid")}


def label(fixture: str, uid: str) -> str:
    return f"{uid} ({flink_ids(fixture)[uid]})"


def checkpoint_dir(fixture: str) -> str:
    return str(fixture_named(fixture).checkpoint_dir)


def not_ok(release: str, case: str) -> list[Reason]:
    return [r for r in preflight_row(release, case).reasons if r.verdict != OK]


def with_path(flink_error: str, fixture: str) -> str:
    """Flink's message with the restore path it was given replaced by the one preflight was given."""
    return re.sub(
        r"checkpoint/savepoint \S.*?\. (Cannot|Max)",
        rf"checkpoint/savepoint {checkpoint_dir(fixture)}. \1",
        flink_error,
        count=1,
    )


def test_every_check_passed_says_what_it_checked() -> None:
    result = preflight_row(RELEASE, "same")
    assert load_recorded(RELEASE, "same")["outcome"] == "restored"
    assert [(r.check, r.verdict, r.message) for r in result.reasons] == [
        ("operator-mapping", OK, "every operator of the checkpoint is in the new job"),
        ("max-parallelism", OK, "every new parallelism fits the checkpoint's max parallelism"),
        ("channel-state", OK, "channel state stays at chain ends; no rescaled exchange with it is pointwise"),
        ("keyed-exchange", OK, "every operator with keyed state gets its records by key (keyBy)"),
        ("finished-state", OK, "no finished operators in the checkpoint (FLIP-147 rules do not apply)"),
        (
            "files",
            OK,
            "every file the restored state needs exists, and its channel state is sound (spillway validate)",
        ),
    ]
    assert all(r.flink_message is None and r.flink_does is None for r in result.reasons)


def test_a_removed_stateless_operator_is_skipped_as_flink_does() -> None:
    assert load_recorded(RELEASE, "removed-stateless")["outcome"] == "restored"
    result = preflight_row(RELEASE, "removed-stateless")
    sink = flink_ids(f"{RELEASE}-counted")["sink"]
    [skip] = [r for r in result.reasons if r.check == "operator-mapping"]
    assert (skip.verdict, skip.operator) == (OK, sink)
    assert skip.message == f"sink ({sink}) is not in the new job but holds no state: Flink skips it"
    assert result.answer == PreflightVerdict.YES


def test_a_removed_stateful_operator_is_refused_with_flinks_message() -> None:
    fx = f"{RELEASE}-counted"
    flink = load_recorded(RELEASE, "removed-stateful")
    [r] = not_ok(RELEASE, "removed-stateful")
    assert (r.check, r.verdict, r.flink_does, r.operator) == (
        "operator-mapping",
        REFUSED,
        FlinkDoes.REFUSES,
        flink_ids(fx)["check"],
    )
    assert r.message == (
        f"{label(fx, 'check')} holds state and is not in the new job (allow it with --allow-non-restored-state: "
        "its state is then dropped)"
    )
    assert r.flink_message == with_path(flink["error"], fx)


def test_dropped_state_is_a_loss_with_its_kind_and_bytes() -> None:
    fx = f"{RELEASE}-counted"
    assert load_recorded(RELEASE, "removed-stateful-allowed")["outcome"] == "restored"
    result = preflight_row(RELEASE, "removed-stateful-allowed")
    [r] = [r for r in result.reasons if r.verdict != OK]
    [lost] = result.loss.state
    assert (r.check, r.verdict, r.flink_does, r.operator) == (
        "operator-mapping",
        LOSS,
        FlinkDoes.RESTORES_AND_DROPS,
        flink_ids(fx)["check"],
    )
    # check holds operator list state only (Counted.java: "seen"), no channel state on 2.0.0
    assert (lost.label, lost.kinds, result.loss.in_flight) == (label(fx, "check"), ("operator",), [])
    assert r.message == (
        f"{label(fx, 'check')} is not in the new job: Flink restores without it and drops its state (operator, "
        f"{lost.bytes} bytes) without a word (--allow-non-restored-state); see the loss section"
    )
    assert lost.to_doc() == {
        "operator": flink_ids(fx)["check"],
        "label": label(fx, "check"),
        "state_kinds": ["operator"],
        "bytes": lost.bytes,
    }
    assert lost.bytes > 0


def test_a_changed_max_parallelism_is_refused_per_operator_with_flinks_message() -> None:
    fx = f"{RELEASE}-counted"
    flink = load_recorded(RELEASE, "max-parallelism-changed")
    reasons = not_ok(RELEASE, "max-parallelism-changed")
    assert {r.check for r in reasons} == {"max-parallelism"} and all(r.verdict == REFUSED for r in reasons)
    # every operator of the checkpoint has max parallelism 128 (Counted.java); the new job sets 256
    uids = ["src", "parse", "count", "check", "sink"]
    assert sorted(r.operator or "" for r in reasons) == sorted(flink_ids(fx)[u] for u in uids)
    for r in reasons:
        uid = next(u for u in uids if flink_ids(fx)[u] == r.operator)
        assert r.message == (
            f"{label(fx, uid)}: the new job sets max parallelism 256, the checkpoint has 128; Flink adopts the "
            "checkpoint's only where the job sets none"
        )
    # Flink names the first operator it checks; the words around the id are the same for each
    named = next(r for r in reasons if r.operator == re.search(r"operator ([0-9a-f]{32})", flink["error"])[1])  # type: ignore[index]
    assert named.flink_message == with_path(flink["error"], fx)


def test_parallelism_above_the_checkpoints_max_parallelism_is_flinks_refusal() -> None:
    fx = f"{RELEASE}-unaligned"
    flink = load_recorded(RELEASE, "above-max-parallelism")
    reasons = not_ok(RELEASE, "above-max-parallelism")
    assert {(r.check, r.verdict) for r in reasons} == {("max-parallelism", REFUSED)}
    # Flink names one vertex (the first it assigns); preflight names each operator, with its vertex's id
    assert flink["error"] in {r.flink_message for r in reasons}
    slow = next(r for r in reasons if r.operator == flink_ids(fx)["slow"])
    assert slow.message == (
        f"{label(fx, 'slow')}: new parallelism 129 of vertex slow is above the checkpoint's max parallelism 128 "
        "(the number of key groups)"
    )
    # Flink names the vertex by its head operator's id (len's vertex, on 2.0.0); slow heads its own vertex
    assert slow.flink_message == re.sub(r"task [0-9a-f]{32}", f"task {flink_ids(fx)['slow']}", flink["error"])


def test_parallelism_equal_to_the_max_parallelism_is_accepted() -> None:
    """Flink: 'reduce the parallelism of the task to be lower or equal to the maximum parallelism' (129 was refused
    against 128): 128 on every vertex fits, with the max parallelism unset or set to 128."""
    fx = fixture_named(f"{RELEASE}-unaligned")
    loaded = load_checkpoint(fx.checkpoint_dir)
    plan = load_plan(recorded_dir(RELEASE, "above-max-parallelism") / "jobgraph.json")
    assert sorted({v.parallelism for v in plan.vertices.values()}) == [129]
    at_max = replace(plan, vertices={k: replace(v, parallelism=128) for k, v in plan.vertices.items()})
    settings = preflight_settings(RELEASE, "above-max-parallelism", str(fx.checkpoint_dir))
    for given in (settings, replace(settings, max_parallelism={None: 128}, no_max_parallelism=False)):
        result = check(at_max, loaded.checkpoint, given, loaded)
        mp = [r for r in result.reasons if r.check in ("max-parallelism", "parallelism")]
        assert [(r.check, r.verdict) for r in mp] == [("max-parallelism", OK)], [r.to_doc() for r in mp]
    # one above it is refused on both counts: the job itself, and the restore
    above = replace(plan, vertices={k: replace(v, parallelism=129) for k, v in plan.vertices.items()})
    given = replace(settings, max_parallelism={None: 128}, no_max_parallelism=False)
    refused = [r for r in check(above, loaded.checkpoint, given, loaded).reasons if r.verdict == REFUSED]
    assert {r.check for r in refused} == {"parallelism", "max-parallelism"}


def test_a_vertex_above_the_max_parallelism_the_job_sets_is_refused_as_flink_words_it() -> None:
    fx = f"{RELEASE}-counted"
    flink = load_recorded(RELEASE, "count-above-max-parallelism")
    reasons = not_ok(RELEASE, "count-above-max-parallelism")
    [job] = [r for r in reasons if r.check == "parallelism"]
    assert (job.verdict, job.flink_message) == (REFUSED, flink["error"])
    assert job.message == (
        "vertex count: parallelism 129 above the max parallelism 128 the job sets (Flink rejects the job itself, "
        "before any restore)"
    )
    [restore] = [r for r in reasons if r.check == "max-parallelism"]
    assert restore.message == (
        f"{label(fx, 'count')}: new parallelism 129 of vertex count is above the checkpoint's max parallelism 128 "
        "(the number of key groups)"
    )
    assert restore.flink_message == (
        f"The state for task {flink_ids(fx)['count']} can not be restored. The maximum parallelism (128) of the "
        "restored state is lower than the configured parallelism (129). Please reduce the parallelism of the task to "
        "be lower or equal to the maximum parallelism."
    )


def test_an_unseen_max_parallelism_names_the_vertices_and_what_decides_it() -> None:
    fx = f"{RELEASE}-unaligned"
    [r] = not_ok(RELEASE, "max-parallelism-set-unseen")
    assert (r.check, r.verdict, r.flink_does) == ("max-parallelism", UNKNOWN, FlinkDoes.REFUSES)
    assert r.message == (
        "a plan does not show the max parallelism the new job sets (vertices with restored state: Source: seq -> "
        "tostr, slow). If it sets one other than the checkpoint's (128; setMaxParallelism, pipeline.max-parallelism), "
        "Flink refuses the restore; if it sets none, Flink takes the checkpoint's. Give --max-parallelism N (or "
        "VERTEX=N), --max-parallelism none, or the job's jar (--job)"
    )
    flink = load_recorded(RELEASE, "max-parallelism-set-unseen")
    # Flink's words, with the id and the new value it met left open
    expected = re.sub(r"operator [0-9a-f]{32}", "operator <id>", with_path(flink["error"], fx))
    assert r.flink_message == expected.replace("max parallelism 256", "max parallelism <N>")


def test_keyed_state_behind_rebalance_fails_after_start() -> None:
    fx = f"{RELEASE}-counted"
    flink = load_recorded(RELEASE, "keyed-rebalance")
    assert flink["outcome"] == "failed" and "is not in KeyGroupRange" in flink["error"]
    [r] = not_ok(RELEASE, "keyed-rebalance")
    assert (r.check, r.verdict, r.flink_does, r.operator) == (
        "keyed-exchange",
        FAILS,
        FlinkDoes.FAILS_AFTER_START,
        flink_ids(fx)["count"],
    )
    assert r.message == (
        f"{label(fx, 'count')} holds keyed state, and its vertex count gets input 0 REBALANCE, not a key hash (was "
        "keyBy replaced?): records reach subtasks that do not hold their key group, and the first one fails the task"
    )
    assert r.flink_message == "Key group N is not in KeyGroupRange"


def test_a_rescaled_pointwise_exchange_with_channel_state_is_refused() -> None:
    fx = f"{RELEASE}-counted"
    flink = load_recorded(RELEASE, "pointwise-rescaled")
    [r] = not_ok(RELEASE, "pointwise-rescaled")
    assert (r.check, r.verdict, r.operator, r.flink_issue) == (
        "channel-state-rescale",
        REFUSED,
        flink_ids(fx)["parse"],
        None,
    )
    assert r.message == (
        f"{label(fx, 'parse')}: vertex parse rescaled 2 -> 3, its input 0 is RESCALE (pointwise) and holds channel "
        "state: Flink cannot map pointwise channels to new subtasks"
    )
    assert r.flink_message == flink["error"] == FLINK_POINTWISE


def test_a_pointwise_exchange_next_to_channel_state_depends_on_flink_38267() -> None:
    """parse gets a new RESCALE input next to its REBALANCE input with channel state, 2 -> 3: 2.0.0 refused, 2.3.0
    restored (FLINK-38267)."""
    fx = f"{RELEASE}-counted"
    assert load_recorded("2.3.0", "mixed-inputs-rescaled")["outcome"] == "restored"
    flink = load_recorded(RELEASE, "mixed-inputs-rescaled")
    [r] = not_ok(RELEASE, "mixed-inputs-rescaled")
    what = f"{label(fx, 'parse')}: vertex parse rescaled 2 -> 3, its input 1 is RESCALE"
    assert (r.check, r.verdict, r.flink_issue, r.flink_message) == (
        "channel-state-rescale",
        REFUSED,
        "FLINK-38267",
        flink["error"],
    )
    assert r.message == (
        f"{what} (pointwise) without channel state, next to inputs that hold some: this release asks every exchange "
        "of the vertex for its mapping and fails (fixed from 1.20.3, 2.0.1, 2.1.1, 2.2.0)"
    )
    assert not_ok("2.3.0", "mixed-inputs-rescaled") == []
    # the release not given
    loaded = load_checkpoint(fixture_named(fx).checkpoint_dir)
    settings = replace(preflight_settings(RELEASE, "mixed-inputs-rescaled", checkpoint_dir(fx)), flink_version=None)
    plan = load_plan(
        recorded_dir(RELEASE, "mixed-inputs-rescaled") / "jobgraph.json", case_uids(RELEASE, "mixed-inputs-rescaled")
    )
    [unsure] = [r for r in check(plan, loaded.checkpoint, settings, loaded).reasons if r.verdict != OK]
    assert (unsure.check, unsure.verdict, unsure.flink_issue, unsure.flink_does) == (
        "channel-state-rescale",
        UNKNOWN,
        "FLINK-38267",
        None,
    )
    assert unsure.message == (
        f"{what} (pointwise) without channel state, next to inputs that hold some: Flink before 1.20.3, 2.0.1, "
        "2.1.1 and 2.2.0 refuses this, later releases restore it; give --flink-version"
    )
    assert unsure.flink_message == FLINK_POINTWISE


def test_channel_state_on_an_unchanged_exchange_made_pointwise_fails_the_task() -> None:
    fx = f"{RELEASE}-counted"
    flink = load_recorded(RELEASE, "pointwise-same-parallelism")
    assert flink["outcome"] == "failed" and flink["error"] == "Index 1 out of bounds for length 1"
    reasons = not_ok(RELEASE, "pointwise-same-parallelism")
    assert [(r.check, r.verdict, r.operator, r.flink_message) for r in reasons] == [
        ("channel-state-channels", REFUSED, flink_ids(fx)["parse"], flink["error"]),
        ("channel-state-channels", REFUSED, flink_ids(fx)["src"], flink["error"]),
    ]
    tail = (
        "(pointwise) in the new job, with at most 1 channel(s) per subtask, but the checkpoint holds channel state "
        "for channel index 1: the exchange was not pointwise when checkpointed. Flink accepts the restore and the "
        "task then fails"
    )
    assert [r.message for r in reasons] == [
        f"{label(fx, 'parse')}: its input 0 is RESCALE {tail}",
        f"{label(fx, 'src')}: its output 0 is RESCALE {tail}",
    ]


def test_channel_state_of_an_edge_now_chained_is_refused() -> None:
    fx = f"{RELEASE}-counted"
    flink = load_recorded(RELEASE, "chained-edge-with-state")
    [r] = not_ok(RELEASE, "chained-edge-with-state")
    assert (r.check, r.verdict, r.operator) == ("channel-state-chained", REFUSED, None)
    assert r.message == (
        f"channel state of {label(fx, 'parse')}, {label(fx, 'src')} belongs to an exchange that the new job chains "
        "(input state off a chain's head, or output state off its tail)"
    )
    head = flink["error"].split("[")[0]
    assert r.flink_message == f"{head}[{flink_ids(fx)['parse']}, {flink_ids(fx)['src']}]"


CUT_TAIL = (
    ": the restored half reaches the new job as if it were whole. Flink then fails the task (seen: "
    '"Corrupt stream, found tag: -128", EOFException, "Key group N is not in KeyGroupRange") or misreads the bytes. '
    "Clear the in-flight data first (spillway repair strip-channel-state) to be sure"
)


def test_a_dropped_operators_cut_records_are_named_four_at_most() -> None:
    """slow (removed, allowed) and count (uid changed, allowed) hold input and output channel state: each is dropped
    whole while a restored neighbour's channel state holds the rest of a record. Flink failed the second ("Corrupt
    stream"); preflight says unknown, counts the channels and names at most four."""
    assert load_recorded(RELEASE, "uid-changed-allowed")["outcome"] == "failed"
    for case, fx, uid, many in [
        ("removed-keyed-allowed", f"{RELEASE}-unaligned", "slow", False),
        ("uid-changed-allowed", f"{RELEASE}-counted", "count", True),
    ]:
        result = preflight_row(RELEASE, case)
        [r] = [r for r in result.reasons if r.verdict != OK]
        assert (r.check, r.verdict, r.flink_does, r.operator) == (
            "dropped-channel-state",
            UNKNOWN,
            FlinkDoes.FAILS_AFTER_START,
            flink_ids(fx)[uid],
        )
        head = f"{label(fx, uid)} is dropped with its channel state, and a record is cut between it and restored "
        found = re.fullmatch(
            re.escape(head) + r"channel state on (\d+) channel\(s\) \((.*)\)" + re.escape(CUT_TAIL), r.message
        )
        assert found, r.message
        shown = found[2].split("; ")
        channel = r"\S+#\d in\(\d,\d\) \(alone\) \(\d+ bytes\)"
        if many:
            assert int(found[1]) > 4 and len(shown) == 5 and shown[4] == "…"
            shown = shown[:4]
        else:
            assert int(found[1]) == len(shown) == 1
        assert all(re.fullmatch(channel, c) for c in shown), shown
        # the loss: state and both sides in flight; the output side's records are not countable alone
        [state] = result.loss.state
        assert state.kinds == ("keyed", "input channel", "output channel")
        assert [(x.side, x.why) for x in result.loss.in_flight] == [
            ("input", "dropped with its operator (--allow-non-restored-state)"),
            ("output", "dropped with its operator (--allow-non-restored-state)"),
        ]
        records = [x.records for x in result.loss.in_flight]
        assert records[0] is not None and records[0] > 0 and records[1] is None
        doc = result.loss.to_doc()
        assert doc["in_flight_records"] is None
        assert doc["in_flight_bytes"] == sum(x.bytes for x in result.loss.in_flight) > 0
        assert doc["state_bytes"] == state.bytes >= doc["in_flight_bytes"]


def test_without_the_channel_files_a_dropped_operators_channel_state_is_unknown() -> None:
    """The same restore (count dropped with its channel state) judged from _metadata alone: whether a record is
    cut needs the channel-state files, so it is unknown; Flink failed it."""
    fx = fixture_named(f"{RELEASE}-counted")
    loaded = load_checkpoint(fx.checkpoint_dir)
    plan = load_plan(
        recorded_dir(RELEASE, "uid-changed-allowed") / "jobgraph.json", case_uids(RELEASE, "uid-changed-allowed")
    )
    settings = preflight_settings(RELEASE, "uid-changed-allowed", str(fx.checkpoint_dir))
    result = check(plan, loaded.checkpoint, settings)
    [r] = [r for r in result.reasons if r.verdict != OK]
    count = label(f"{RELEASE}-counted", "count")
    assert (r.check, r.verdict, r.flink_does) == ("operator-mapping", UNKNOWN, FlinkDoes.FAILS_AFTER_START)
    assert r.operator == flink_ids(f"{RELEASE}-counted")["count"]
    assert r.message == (
        f"{count} is not in the new job: its state (keyed, input channel, output channel) is dropped "
        "(--allow-non-restored-state), with its channel state, while what the other side of those channels holds may "
        "be restored; whether a record is cut between the two needs the channel-state files read"
    )


def test_state_of_an_unbound_operator_is_unknown_while_plan_operators_have_no_id() -> None:
    """added-no-uid (a job without uids gets a new map: the generated ids after it change): Flink refused it on
    every release; from the job-graph plan without uids preflight cannot tell which plan operator the checkpoint's
    stateful operators are, and says so for each, with a binding note naming the operator without an id."""
    release = "1.20.3"
    flink = load_recorded(release, "added-no-uid")
    assert flink["outcome"] == "refused"
    result = preflight_row(release, "added-no-uid")
    assert result.answer == PreflightVerdict.UNKNOWN
    notes = [r for r in result.reasons if r.check == "binding"]
    assert [n.message.split(": ", 1)[0] for n in notes] == ["plan operator without a known Flink id"]
    assert notes[0].message.startswith("plan operator without a known Flink id: 'added': ")
    unsure = [r for r in result.reasons if r.check == "operator-mapping" and r.verdict != OK]
    # the operator Flink could not map is among them
    missing = re.search(r"operator ([0-9a-f]{32})", flink["error"])[1]  # type: ignore[index]
    assert missing in {r.operator for r in unsure}
    for r in unsure:
        assert (r.verdict, r.flink_does) == (UNKNOWN, None)
        assert r.message == (
            f"{r.operator} holds state and no plan operator is bound to it; some plan operators have no known Flink "
            "id (see the binding notes), so it may be one of them. Give their uids (--uid NAME=UID), the job-graph "
            "plan or the job's jar (--job) to be sure"
        )


def test_output_state_chained_over_on_1_20_3_is_refused_with_flinks_message() -> None:
    """1.20.3 refused the map chained after count (count holds output channel state): Flink names count."""
    fx = "1.20.3-counted"
    flink = load_recorded("1.20.3", "chained-after-channel-state")
    [r] = not_ok("1.20.3", "chained-after-channel-state")
    count = flink_ids(fx)["count"]
    assert (r.check, r.verdict, r.flink_message) == ("channel-state-chained", REFUSED, flink["error"])
    assert r.message == (
        f"channel state of {count} belongs to an exchange that the new job chains (input state off a chain's head, "
        "or output state off its tail)"
    )


def test_output_state_chained_over_on_1_15_4_is_dropped_and_a_record_cut() -> None:
    """1.15.4 accepted the same restore and failed (EOFException): count's output state was dropped while check's
    input state, which holds the rest of a record, was restored."""
    fx = "1.15.4-counted"
    assert load_recorded("1.15.4", "chained-after-channel-state")["outcome"] == "failed"
    result = preflight_row("1.15.4", "chained-after-channel-state")
    [r] = [r for r in result.reasons if r.verdict != OK]
    count = flink_ids(fx)["count"]
    why = "output channel state of an operator that no longer ends its chain (vertex count -> added)"
    found = re.fullmatch(
        re.escape(
            f"{count}: {why}; this release restores without it and drops it and a record is cut between it "
            "and the restored input state downstream ("
        )
        + r"(.*)"
        + re.escape("): the task then fails (seen on 1.15.4: EOFException) or misreads the bytes"),
        r.message,
    )
    assert found and 1 <= len(found[1].split("; ")) <= 4, r.message
    assert all(re.fullmatch(r"[0-9a-f]{32}#\d in\(\d,\d\) \(alone\) \(\d+ bytes\)", c) for c in found[1].split("; "))
    assert (r.check, r.verdict, r.flink_does, r.operator) == (
        "channel-state-chained",
        UNKNOWN,
        FlinkDoes.FAILS_AFTER_START,
        count,
    )
    [lost] = result.loss.in_flight
    assert (lost.operator, lost.side, lost.why, lost.records) == (count, "output", why, None) and lost.bytes > 0


def test_file_merged_channel_state_warns_of_flink_39977() -> None:
    """The file-merging fixtures were written with execution.checkpointing.file-merging.enabled (fixture.json): their
    channel state sits in segments of merged files. The counted job's does not."""
    for name in ("1.20.3-file-merging", "2.3.0-file-merging"):
        fx = fixture_named(name)
        assert fx.info["settings"]["execution.checkpointing.file-merging.enabled"] == "true"
        [bug] = [r for r in known_bugs(load_checkpoint(fx.checkpoint_dir).checkpoint, Settings())]
        assert (bug.check, bug.verdict, bug.flink_issue, bug.flink_does, bug.operator) == (
            "known-bug",
            WARNING,
            "FLINK-39977",
            None,
            None,
        )
        assert bug.message == (
            "channel state stored with file merging (SegmentFileStateHandle): releases without FLINK-39977's fix "
            "do not register these files with the file-merging manager on recovery (cleanup of the merged files "
            "after the restore)"
        )
    assert known_bugs(load_checkpoint(fixture_named(f"{RELEASE}-counted").checkpoint_dir).checkpoint, Settings()) == []


def test_a_reasons_document_carries_what_is_set() -> None:
    fx = f"{RELEASE}-counted"
    [refused] = not_ok(RELEASE, "removed-stateful")
    assert refused.to_doc() == {
        "check": "operator-mapping",
        "verdict": "refused",
        "message": refused.message,
        "flink_message": refused.flink_message,
        "operator": flink_ids(fx)["check"],
        "flink_does": "refuses",
    }
    [mixed] = not_ok(RELEASE, "mixed-inputs-rescaled")
    assert mixed.to_doc()["flink_issue"] == "FLINK-38267"
    ok = preflight_row(RELEASE, "same").reasons[0]
    assert ok.to_doc() == {"check": "operator-mapping", "verdict": "ok", "message": ok.message}


def test_a_max_parallelism_given_for_one_vertex_is_checked_on_its_operators_only() -> None:
    """Flink compares the max parallelism per operator (Checkpoints.loadAndValidateCheckpoint): 256 on count's
    vertex alone is refused for count, as max-parallelism-changed was for every operator; the rest set 128 (the
    checkpoint's, as in "same", which Flink restored) or, given for one vertex only, set none."""
    fx = f"{RELEASE}-counted"
    assert load_recorded(RELEASE, "same")["outcome"] == "restored"
    loaded = load_checkpoint(fixture_named(fx).checkpoint_dir)
    plan = load_plan(recorded_dir(RELEASE, "same") / "jobgraph.json", case_uids(RELEASE, "same"))
    count = flink_ids(fx)["count"]  # a job-graph vertex id is its head operator's id
    for given in ({None: 128, count: 256}, {count: 256}):
        result = check(plan, loaded.checkpoint, Settings(max_parallelism=given, flink_version=(2, 0, 0)), loaded)
        [r] = [r for r in result.reasons if r.verdict != OK]
        assert (r.check, r.verdict, r.operator) == ("max-parallelism", REFUSED, count)
        assert r.message == (
            f"{label(fx, 'count')}: the new job sets max parallelism 256, the checkpoint has 128; Flink adopts the "
            "checkpoint's only where the job sets none"
        )
    result = check(plan, loaded.checkpoint, Settings(max_parallelism={count: 128}, flink_version=(2, 0, 0)), loaded)
    assert result.answer == PreflightVerdict.YES


def test_a_name_only_mapping_is_said_word_for_word() -> None:
    """2.3.0 refused uid-changed (count has a new uid under its old name); its stream-graph plan without uids maps
    each stateful operator of the checkpoint by the name 2.x stores: each is listed, in the checkpoint's order."""
    fx = "2.3.0-counted"
    assert load_recorded("2.3.0", "uid-changed")["outcome"] == "refused"
    loaded = load_checkpoint(fixture_named(fx).checkpoint_dir)
    plan = load_plan(recorded_dir("2.3.0", "uid-changed") / "plan.json")
    result = check(plan, loaded.checkpoint, preflight_settings("2.3.0", "uid-changed", "x"), loaded)
    [r] = [r for r in result.reasons if r.verdict != OK]
    # the sink holds no state: not an assumption that matters
    named = ", ".join(
        f"{name!r} = {label(fx, uid)}"
        for name, uid in [("parse", "parse"), ("count", "count"), ("check", "check"), ("Source: seq", "src")]
    )
    assert [o.uid for o in loaded.checkpoint.operators] == ["parse", "count", "check", "sink", "src"]
    assert (r.check, r.verdict, r.flink_does, r.operator) == ("operator-mapping", UNKNOWN, FlinkDoes.REFUSES, None)
    assert r.message == (
        f"placed by name only: {named}. This assumes uids unchanged: each keeps its Flink id in the new job (the same "
        "uid; without uids, a graph that generates the same ids). If an id changed, Flink refuses the restore (or, "
        "with --allow-non-restored-state, drops that state). Give the uids (--uid NAME=UID), the job-graph plan or "
        "the job's jar (--job) to map by ids"
    )


def test_the_finished_state_reasons_on_flinks_finished_restores() -> None:
    """The FLIP-147 variants (tests/fixtures/finished-variants/): where Flink restored the same job, every rule
    holds, said once; where it refused, each violation is a refusal naming a vertex of the new job."""
    from support import finished_variants

    for release, variant in finished_variants.recorded():
        flink = finished_variants.load_recorded(release, variant)
        fx = fixture_named(f"{release}-finished")
        loaded = load_checkpoint(fx.checkpoint_dir)
        plan = load_plan(
            finished_variants.recorded_dir(release, variant) / "jobgraph.json", finished_variants.job_uids(release)
        )
        settings = Settings(
            finished_variants.VARIANTS[variant][1],
            {},
            tuple(map(int, release.split("."))),  # type: ignore[arg-type]
            str(fx.checkpoint_dir),
            no_max_parallelism=True,
        )
        reasons = [r for r in check(plan, loaded.checkpoint, settings, loaded).reasons if r.check == "finished-state"]
        if flink["outcome"] == "restored":
            assert [(r.verdict, r.message, r.operator) for r in reasons] == [
                (OK, "finished operators: every FLIP-147 rule holds", None)
            ], (release, variant)
        else:
            assert reasons and all(r.verdict == REFUSED for r in reasons), (release, variant)
            labels = {v.label() for v in plan.vertices.values()}
            assert all(r.operator in labels and r.operator in r.message for r in reasons), (release, variant)
