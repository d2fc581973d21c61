"""Library messages name library things (a rebase rule, the storage timeout), never a CLI option; the CLI shows
the same message with its option (tests/cli/test_path_rules.py and test_usage_errors.py run the commands)."""

from __future__ import annotations

import inspect
import threading
from pathlib import Path

import pytest
from support.fixtures import fixture_named

import spillway
import spillway.api
from spillway import notices
from spillway.cli.common import in_options
from spillway.errors import ArgumentError, Message, Named, StorageError, message_of
from spillway.storage import fs
from spillway.storage.claim import claim_output
from spillway.storage.safe_writer import WriteError


def test_a_call_that_never_answers_names_the_storage_timeout() -> None:
    never = threading.Event()
    with pytest.raises(StorageError) as caught:
        fs.bounded("s3://bucket/x", "read", 0.2, never.wait)
    never.set()  # let the left-behind thread end
    message = str(caught.value)
    assert message == "s3://bucket/x: read: no answer within 0.2 s (storage timeout: SPILLWAY_STORAGE_TIMEOUT)"
    assert in_options(message_of(caught.value)).endswith("(--storage-timeout or SPILLWAY_STORAGE_TIMEOUT)")


def test_a_rule_that_matches_nothing_is_a_rebase_rule_to_the_library() -> None:
    fx = fixture_named("1.15.4-counted")
    rule = "/nowhere/at/all=/elsewhere"
    with notices.collecting() as warnings:
        spillway.open(fx.checkpoint_dir, rebase=[rule])
    assert len(warnings) == 1 and warnings[0].startswith(f"rebase rule {rule!r}: matches no path in ")
    assert "--" not in warnings[0]
    assert in_options(warnings[0]).startswith(f"--rebase {rule}: matches no path in ")


def test_a_malformed_rule_below_the_api_names_no_option() -> None:
    from spillway.storage.locate import LocateError, Rebase

    with pytest.raises(LocateError) as caught:
        Rebase.parse("it's")
    assert str(caught.value) == 'rebase rule "it\'s": expected OLD_PREFIX=NEW_PREFIX'
    assert in_options(message_of(caught.value)) == "--rebase it's: expected OLD_PREFIX=NEW_PREFIX"


def test_an_output_that_exists_is_refused_naming_out(tmp_path: Path) -> None:
    with pytest.raises(WriteError) as caught:
        claim_output(tmp_path)
    message = str(caught.value)
    assert message == f"{tmp_path}: already exists; spillway never overwrites (choose a new out=...)"
    assert in_options(message_of(caught.value)).endswith("(choose a new --out)")


def test_a_timeout_set_from_python_names_its_argument() -> None:
    assert list(inspect.signature(spillway.api.set_storage_timeout).parameters) == ["seconds"]
    with pytest.raises(ArgumentError) as caught:
        spillway.api.set_storage_timeout(0)
    assert str(caught.value) == "seconds=0: expected a number of seconds greater than 0"


@pytest.mark.parametrize(
    ("parts", "python", "cli"),
    [  # each keyword form of spillway.errors, and the option a CLI user types for it
        (("use ", Named("force", True), " if so"), "use force=True if so", "use --force if so"),
        (("needs the job's ", Named("plan"), ": x"), "needs the job's plan=...: x", "needs the job's --plan: x"),
        (
            ("give ", Named("keys", pair=("VERTEX", "EXTRACTOR")), " or"),
            "give keys={VERTEX: EXTRACTOR} or",
            "give --key VERTEX=EXTRACTOR or",
        ),
        ((Named("key_fns", "m:f", entry=True), ": no"), "key_fns[…]='m:f': no", "--key-fn m:f: no"),
        ((Named("key_fns", entry=True), " returned"), "key_fns[…]=... returned", "--key-fn returned"),
        ((Named("master", "yarn"), " needs pyspark"), "master='yarn' needs pyspark", "--master yarn needs pyspark"),
        (
            ("(", Named("uids", pair=("NAME", "UID")), " or ", Named("uid_map", placeholder="FILE"), ")"),
            "(uids={NAME: UID} or uid_map=FILE)",
            "(--uid NAME=UID or --uid-map FILE)",
        ),
        (("with ", Named("copy_data", True)), "with copy_data=True", "with --copy-data"),
        (("unless ", Named("dry_run", True)), "unless dry_run=True", "unless dry_run=True"),  # no option sets it
    ],
)
def test_the_cli_says_each_keyword_form_with_its_option(parts: tuple[str | Named, ...], python: str, cli: str) -> None:
    message = Message(*parts)
    assert message == python  # Python callers read the keyword form
    assert in_options(message) == cli


@pytest.mark.parametrize(
    "text",
    [
        "spillway.open(path, plan=...)",  # Python code in a message stays Python
        "/data/force=True/chk-3: damaged",  # a path that looks like an argument
        "s3://bkt/plan=.../keys={VERTEX: X}/_metadata: does not exist",
        "key_fns[…]='m:f': no",  # the keyword form as plain text: nothing says it names an argument
    ],
)
def test_plain_text_that_looks_like_an_argument_is_left_alone(text: str) -> None:
    assert in_options(text) == text
    assert in_options(Message(text)) == text


def test_a_path_that_looks_like_an_argument_stays_as_it_is_beside_a_named_one(tmp_path: Path) -> None:
    out = tmp_path / "out=..." / "force=True"
    out.mkdir(parents=True)
    with pytest.raises(WriteError) as caught:
        claim_output(out)
    assert in_options(message_of(caught.value)) == (
        f"{out}: already exists; spillway never overwrites (choose a new --out)"
    )


def test_the_words_survive_a_pickle_as_spark_workers_send_them() -> None:
    import pickle

    sent = StorageError(Message("s3://b/force=True: read (", Named("force", True), ")"))
    got = pickle.loads(pickle.dumps(sent))
    assert str(got) == "s3://b/force=True: read (force=True)"
    assert in_options(message_of(got)) == "s3://b/force=True: read (--force)"


def test_an_executor_refusal_reaches_the_driver_with_the_argument_it_names() -> None:
    import traceback

    from spillway.rescale import spark_job
    from spillway.rescale.key_extract import java_hash_of
    from spillway.rescale.route_error import RouteError

    with pytest.raises(RouteError) as sent, spark_job._sent_as_text():
        java_hash_of([1])  # a key function that returned a list, on an executor
    # what the driver gets: Spark's own lines around the worker's Python traceback, as text
    text = "org.apache.spark.SparkException: Job aborted due to stage failure\n" + "".join(
        traceback.format_exception(sent.value)
    )
    got = spark_job.executor_failure(Exception(text))
    assert type(got) is RouteError
    assert str(got) == "key_fns[…]=... returned list; return the key's Java hashCode (int) or a str"
    assert in_options(message_of(got)) == "--key-fn returned list; return the key's Java hashCode (int) or a str"
