"""How long a remote call may take (spillway/storage/timeouts.py): the setting, else ``SPILLWAY_STORAGE_TIMEOUT``,
else 30 s; every value a positive, finite number of seconds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from spillway.errors import ArgumentError, UsageError
from spillway.storage import timeouts


@pytest.fixture(autouse=True)
def unset(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("SPILLWAY_STORAGE_TIMEOUT", raising=False)
    timeouts.set_timeout(None)
    yield
    timeouts.set_timeout(None)


def test_the_default_then_the_environment_then_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert timeouts.timeout() == 30.0
    monkeypatch.setenv("SPILLWAY_STORAGE_TIMEOUT", "")
    assert timeouts.timeout() == 30.0  # set but empty: not set
    monkeypatch.setenv("SPILLWAY_STORAGE_TIMEOUT", "7.5")
    assert timeouts.timeout() == 7.5
    timeouts.set_timeout(2)
    assert timeouts.timeout() == 2.0 and isinstance(timeouts.timeout(), float)
    timeouts.set_timeout(0.5)  # under a second is a timeout too
    assert timeouts.timeout() == 0.5
    timeouts.set_timeout(2)
    timeouts.set_timeout(None)
    assert timeouts.timeout() == 7.5


@pytest.mark.parametrize("text", ["0", "-1", "inf", "nan", "abc", ""])
def test_a_bad_text_is_a_usage_error_naming_where_it_came_from(text: str) -> None:
    with pytest.raises(UsageError) as raised:
        timeouts.parse_timeout(text, "--storage-timeout")
    assert str(raised.value) == f"--storage-timeout {text!r}: expected a number of seconds greater than 0"


def test_a_good_text_is_its_seconds() -> None:
    assert timeouts.parse_timeout("0.25", "x") == 0.25
    assert timeouts.parse_timeout("1e3", "x") == 1000.0


def test_a_bad_environment_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPILLWAY_STORAGE_TIMEOUT", "0")
    with pytest.raises(UsageError, match=r"^SPILLWAY_STORAGE_TIMEOUT '0': expected"):
        timeouts.timeout()


@pytest.mark.parametrize("seconds", [0, -2.0, float("inf"), float("nan")], ids=["zero", "negative", "inf", "nan"])
def test_a_bad_setting_is_refused_and_changes_nothing(seconds: float) -> None:
    timeouts.set_timeout(5)
    with pytest.raises(ArgumentError) as raised:
        timeouts.set_timeout(seconds)
    assert (raised.value.argument, raised.value.detail) == ("seconds", "expected a number of seconds greater than 0")
    assert raised.value.value is seconds
    assert timeouts.timeout() == 5.0
