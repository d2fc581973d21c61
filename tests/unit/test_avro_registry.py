"""A schema registry that is down or silent is one storage error line (exit 3), never a hang or a traceback."""

from __future__ import annotations

import time

import pytest
from support.endpoints import closed_port, silent_server

from spillway.errors import ExitStatus, StorageError
from spillway.formats import avro_schema
from spillway.formats.values import parse_key_extractor


def test_a_closed_registry_port_is_a_storage_error() -> None:
    url = f"http://127.0.0.1:{closed_port()}/subjects/s/versions/1"
    with pytest.raises(StorageError, match=rf"schema registry {url}: cannot be reached") as err:
        parse_key_extractor(f"avro({url}):id")
    assert err.value.exit_code == ExitStatus.STORAGE


def test_a_silent_registry_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(avro_schema, "REGISTRY_TIMEOUT_SECONDS", 0.5)
    with silent_server() as port:
        url = f"http://127.0.0.1:{port}/subjects/s/versions/1"
        started = time.monotonic()
        with pytest.raises(StorageError, match=rf"schema registry {url}: cannot be reached \(.*timed out"):
            parse_key_extractor(f"avro({url}):id")
        assert time.monotonic() - started < 5
