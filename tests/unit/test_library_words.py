"""Library messages name library things (a rebase rule, the storage timeout), never a CLI option; the CLI shows
the same message with its option (tests/cli/test_path_rules.py and test_usage_errors.py run the commands)."""

from __future__ import annotations

import threading

import pytest
from support.fixtures import fixture_named

import spillway
from spillway import notices
from spillway.cli.common import cli_words
from spillway.errors import StorageError
from spillway.storage import fs


def test_a_call_that_never_answers_names_the_storage_timeout() -> None:
    never = threading.Event()
    with pytest.raises(StorageError) as caught:
        fs.bounded("s3://bucket/x", "read", 0.2, never.wait)
    never.set()  # let the left-behind thread end
    message = str(caught.value)
    assert message == "s3://bucket/x: read: no answer within 0.2 s (storage timeout: SPILLWAY_STORAGE_TIMEOUT)"
    assert cli_words(message).endswith("(--storage-timeout or SPILLWAY_STORAGE_TIMEOUT)")


def test_a_rule_that_matches_nothing_is_a_rebase_rule_to_the_library() -> None:
    fx = fixture_named("1.15.4-counted")
    rule = "/nowhere/at/all=/elsewhere"
    with notices.collecting() as warnings:
        spillway.open(fx.checkpoint_dir, rebase=[rule])
    assert len(warnings) == 1 and warnings[0].startswith(f"rebase rule {rule!r}: matches no path in ")
    assert "--" not in warnings[0]
    assert cli_words(warnings[0]).startswith(f"--rebase {rule}: matches no path in ")


def test_a_malformed_rule_below_the_api_names_no_option() -> None:
    from spillway.storage.locate import LocateError, Rebase

    with pytest.raises(LocateError) as caught:
        Rebase.parse("it's")
    assert str(caught.value) == 'rebase rule "it\'s": expected OLD_PREFIX=NEW_PREFIX'
    assert cli_words(str(caught.value)) == "--rebase it's: expected OLD_PREFIX=NEW_PREFIX"
