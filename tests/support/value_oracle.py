"""Ground truth for value decoding and key routing: runs ValueOracle (tests/fixtures/generator/java/) once per
test session with Flink 2.3.0's own serializers and KeyGroupRangeAssignment, and turns its typed value
descriptions into the Python values spillway's decoders should produce."""

from __future__ import annotations

import json
import math
import struct
import subprocess
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from spillway.formats.values import RowValue
from support.flink_harness import _generator, prepare

RELEASE = "2.3.0"


@cache
def value_oracle() -> dict[str, Any]:
    """ValueOracle's JSON: ``routes`` [[max parallelism, parallelism], …] and ``cases``, each with ``spec``, ``hex``,
    ``value`` (typed description) and ``keys`` [{extractor, key, hash, murmur, routing: [[key group, subtask], …]}]."""
    return run_oracle("ValueOracle", RELEASE)


@cache
def object_oracle(release: str) -> dict[str, Any]:
    """ObjectOracle's JSON on ``release``: ``cases``, each with ``spec``, ``hex`` and ``value`` (plain JSON, as
    spillway's ``json_data`` gives it) and ``keys`` [{extractor, hash, routing: [[key group, subtask] for (128, 3)
    and (32768, 100)]} or {extractor, null: true}], or ``refusal`` (a text spillway's refusal must contain)."""
    return run_oracle("ObjectOracle", release)


def run_oracle(main: str, release: str) -> dict[str, Any]:
    lib, classes = prepare(release)
    gen = _generator()
    with tempfile.TemporaryDirectory(prefix="spillway-values-") as tmp:
        out = Path(tmp) / "values.json"
        cmd = [
            "java",
            *gen.JVM_OPENS,
            # the compile cache's log4j2.properties logs to ${sys:spillway.log}: keep that file out of the cwd
            f"-Dlog4j2.configurationFile={classes / 'log4j2.properties'}",
            f"-Dspillway.log={Path(tmp) / 'oracle.log'}",
            "-cp",
            f"{classes}:{lib}/*",
            f"spillway.fixtures.{main}",
            "--out",
            str(out),
        ]
        res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        if res.returncode != 0:
            raise RuntimeError(f"{main} failed (rc={res.returncode}):\n{res.stdout[-4000:]}")
        return json.loads(out.read_text(encoding="utf-8"))


def expected(desc: Any) -> Any:
    """The Python value for one of ValueOracle's typed descriptions."""
    if desc is None:
        return None
    t, v = desc["t"], desc["v"]
    if t == "string":
        return bytes.fromhex(v).decode("utf-16-be", "surrogatepass")
    if t in ("long", "int", "short", "byte"):
        return int(v)
    if t == "boolean":
        return v
    if t == "double":
        return struct.unpack(">d", struct.pack(">Q", int(v, 16)))[0]
    if t == "float":
        return struct.unpack(">f", struct.pack(">I", int(v, 16)))[0]
    if t == "tuple":
        return tuple(expected(f) for f in v)
    if t == "row":
        return RowValue(desc["kind"], tuple(expected(f) for f in v))
    raise ValueError(f"unknown description {desc!r}")


def same(a: Any, b: Any) -> bool:
    """Equality that tells -0.0 from 0.0 and lets NaN equal NaN (as Java's Double.equals does)."""
    if isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, float) and isinstance(b, float)):
            return False
        return (math.isnan(a) and math.isnan(b)) or struct.pack(">d", a) == struct.pack(">d", b)
    if isinstance(a, RowValue) and isinstance(b, RowValue):
        return a.kind == b.kind and same(a.fields, b.fields)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b
