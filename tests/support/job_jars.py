"""Job jars built from Java sources for the tests of ``spillway ids`` / ``--job``: the fixture scenarios as
ordinary jobs (``PlanJob``: the generator's scenario code behind ``getExecutionEnvironment()``), and a fat jar
with a connector and a library bundled inside (``fatjob/WordStats``). Built with the machine's javac against the
release's Flink jars (fetched and cached by the Flink harness)."""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from support.flink_harness import _generator, prepare, require_java

JAVA = Path(__file__).parent / "java"
DEBIAN_JAVA = Path("/usr/share/java")


def _javac(sources: list[Path], classpath: list[str], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cmd = ["javac", "-nowarn", "-encoding", "UTF-8", "--release", "8", "-cp", ":".join(classpath), "-d", str(out)]
    done = subprocess.run([*cmd, *map(str, sources)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"javac failed:\n{done.stdout}{done.stderr}")


def _jar(path: Path, main: str, trees: list[Path], bundled: Sequence[Path] = (), artifacts: Sequence[str] = ()) -> Path:
    """A jar of the class ``trees`` and the contents of the ``bundled`` jars (as a shading build copies them in),
    with ``main`` as its Main-Class. ``artifacts`` (``group:artifact:version``): the Maven coordinates a shading
    build records for each bundled artifact (``META-INF/maven/<group>/<artifact>/pom.properties``); Flink's lib/
    jars come without them."""
    seen: set[str] = set()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as jar:
        jar.writestr("META-INF/MANIFEST.MF", f"Manifest-Version: 1.0\nMain-Class: {main}\n")
        seen.add("META-INF/MANIFEST.MF")
        for coordinates in artifacts:
            group, artifact, version = coordinates.split(":")
            name = f"META-INF/maven/{group}/{artifact}/pom.properties"
            jar.writestr(name, f"groupId={group}\nartifactId={artifact}\nversion={version}\n")
            seen.add(name)
        for tree in trees:
            for f in sorted(tree.rglob("*")):
                name = f.relative_to(tree).as_posix()
                if f.is_file() and not name.startswith(".") and name not in seen:
                    seen.add(name)
                    jar.write(f, name)
        for dep in bundled:
            with zipfile.ZipFile(dep) as src:
                for name in src.namelist():
                    if name.endswith("/") or name in seen or name.upper().endswith((".SF", ".RSA", ".DSA")):
                        continue
                    seen.add(name)
                    jar.writestr(name, src.read(name))
    return path


def _generator_classes(release: str) -> tuple[Path, Path]:
    """(jar dir, generator class dir) of any release the generator supports (the legacy tree's too)."""
    if tuple(int(p) for p in release.split(".")[:2]) >= (1, 14):
        return prepare(release)
    require_java()
    gen = _generator()
    lib = gen.fetch_jars(release)
    return lib, gen.compile_job(release, lib)


def fixture_job_jar(release: str, workdir: Path) -> Path:
    """The generator's fixture jobs as one jar whose main (``PlanJob --scenario S [--parallelism N]``) builds the
    scenario on whatever environment Flink provides."""
    lib, classes = _generator_classes(release)
    own = _planjob_classes(release, lib, classes)
    # the Avro scenarios' records need Avro at plan time too: bundled, as a job's fat jar carries its libraries
    legacy = classes.name.startswith("java-legacy")
    bundled = [] if legacy else [Path(p) for p in _generator().avro_jars()]
    return _jar(workdir / f"fixtures-{release}.jar", "spillway.fixtures.PlanJob", [classes, own], bundled)


def _planjob_classes(release: str, lib: Path, classes: Path) -> Path:
    """PlanJob compiled against the generator's ``classes``, kept next to them in the generator's class cache
    (javac is most of what building a fixture jar costs, and the suite builds one per release): keyed by
    PlanJob's source and the generator classes' directory (itself keyed by the generator's sources), compiled
    into a directory of its own and renamed into place, so concurrent first uses never see half-written classes."""
    source = JAVA / ("legacy" if classes.name.startswith("java-legacy") else ".") / "PlanJob.java"
    digest = hashlib.sha256(source.read_bytes() + str(classes.resolve()).encode()).hexdigest()[:16]
    out = classes.parent / f"planjob-{classes.name}-{digest}"
    if (out / ".complete").exists():
        return out
    with tempfile.TemporaryDirectory(dir=classes.parent, prefix=".planjob-") as tmp:
        built = Path(tmp) / "classes"
        _javac([source], [f"{lib}/*", str(classes)], built)
        (built / ".complete").write_text(release)
        try:
            built.rename(out)
        except OSError:
            if not (out / ".complete").exists():
                raise
    return out


def fat_job_jar(release: str, workdir: Path) -> Path:
    """WordStats with Flink's file connector and commons-lang3 bundled inside (Flink's own core is not)."""
    lib, _ = prepare(release)
    lang = DEBIAN_JAVA / "commons-lang3.jar"
    own = workdir / "fatjob-classes"
    _javac(sorted((JAVA / "fatjob").glob("*.java")), [f"{lib}/*", str(lang)], own)
    connector = next(lib.glob("flink-connector-files-*.jar"))
    coordinates = [f"org.apache.flink:flink-connector-files:{release}", "org.apache.commons:commons-lang3:3.12.0"]
    return _jar(workdir / "word-stats.jar", "spillway.fatjob.WordStats", [own], [connector, lang], coordinates)
