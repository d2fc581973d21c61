"""Ground truth for the avro(...) and kryo(...) value specs: compiles tests/fixtures/generator/java-values/ once
per release (against the release's jars and the Avro jar PySpark ships) and runs its oracles.

``AvroOracle`` writes Avro records with Avro's own GenericDatumWriter / SpecificDatumWriter through an encoder
with the layout of Flink's AvroSerializer (flink-avro is not among a release's jars, see the class comment);
``KryoOracle`` serializes with the release's own KryoSerializer."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pyspark

from support.flink_harness import _generator, prepare

GENERATOR = Path(__file__).resolve().parents[1] / "fixtures" / "generator"
TREE = GENERATOR / "java-values"
# the generator's classes the oracles use too: the Avro layout encoder of its Avro jobs, its JSON writer
SHARED = [GENERATOR / "java" / "src" / "spillway" / "fixtures" / n for n in ("AvroLayoutEncoder.java", "Json.java")]
PYSPARK_JARS = Path(pyspark.__file__).parent / "jars"
AVRO_JARS = ("avro-1.12.1.jar", "jackson-core-*.jar", "jackson-databind-*.jar", "jackson-annotations-*.jar")


def avro_classpath() -> list[Path]:
    jars: list[Path] = []
    for pattern in AVRO_JARS:
        found = sorted(PYSPARK_JARS.glob(pattern))
        if not found:
            raise RuntimeError(f"{pattern} not found in {PYSPARK_JARS} (pyspark's jars hold Avro and Jackson)")
        jars.append(found[0])
    return jars


def compiled(release: str) -> tuple[Path, str]:
    """(class dir, class path) of java-values/ built for ``release`` (cached until a source changes)."""
    lib, _ = prepare(release)
    gen = _generator()
    sources = [*sorted(TREE.rglob("*.java")), *SHARED]
    h = hashlib.sha256()
    for p in sources:
        h.update(str(p.relative_to(GENERATOR)).encode())
        h.update(p.read_bytes())
    out = gen.CLASS_CACHE / release / f"java-values-{h.hexdigest()[:16]}"
    classpath = ":".join([f"{lib}/*", *map(str, avro_classpath())])
    with open(gen.CLASS_CACHE / f".{release}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / ".complete").exists():
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            cmd = ["javac", "-nowarn", "-encoding", "UTF-8", "--release", "8", "-cp", classpath, "-d", str(out)]
            res = subprocess.run(
                [*cmd, *map(str, sources)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            if res.returncode != 0:
                shutil.rmtree(out, ignore_errors=True)
                raise RuntimeError(f"javac of {TREE} failed:\n{res.stdout[-4000:]}")
            (out / ".complete").write_text(release)
    return out, classpath


def run_oracle(release: str, main: str) -> dict[str, Any]:
    classes, classpath = compiled(release)
    gen = _generator()
    with tempfile.TemporaryDirectory(prefix="spillway-java-values-") as tmp:
        out = Path(tmp) / "oracle.json"
        cmd = ["java", *gen.JVM_OPENS, "-cp", f"{classes}:{classpath}", main, "--out", str(out)]
        res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120, cwd=tmp)
        if res.returncode != 0:
            raise RuntimeError(f"{main} failed (rc={res.returncode}):\n{res.stdout[-4000:]}")
        return json.loads(out.read_text(encoding="utf-8"))


@cache
def avro_oracle(release: str = "2.3.0") -> dict[str, Any]:
    return run_oracle(release, "spillway.values.AvroOracle")


@cache
def kryo_oracle(release: str) -> dict[str, Any]:
    return run_oracle(release, "spillway.values.KryoOracle")
