"""Real Flink restores checkpoints whose keyed and operator state spillway redistributed to a new parallelism.

Every operator of a fixture checkpoint goes through ``rescale_operator_state_and_keyed``; all channel state is
dropped (that is the channel-state rescaler's part) and every operator's parallelism set to the new one, so Flink
takes the handles as they are (spec 08 §8.3 step 2) — the keyed backends then restore exactly the key groups and
list elements spillway put there. The control restores the original checkpoint at the new parallelism (Flink
rescales it itself).
"""

from __future__ import annotations

import copy
import functools
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from support.fixtures import fixture_named
from support.flink_harness import prepare, restore, stage
from support.java_loop import SOURCE as MAIN_LOOP
from support.java_loop import JavaLoop

from spillway.formats.metadata_codec import encode_metadata
from spillway.inspect.output_check import validated_output
from spillway.model.checkpoint import FileHandle, RelativeFileHandle
from spillway.model.walk import all_stream_handles
from spillway.rescale.state import materialize, rescale_operator_state_and_keyed
from spillway.storage.blobs import DelegateBlobs
from spillway.storage.load import load_checkpoint
from spillway.storage.safe_writer import PlannedOutput, write_checkpoint

pytestmark = pytest.mark.flink


# Flink's own operator-state assignment and restore, outside a job: loads a checkpoint, runs
# RoundRobinOperatorStateRepartitioner to NEW_P subtasks, restores each subtask's DefaultOperatorStateBackend and
# prints what it holds (list elements sorted, so two assignments compare as multisets per subtask).
OPERATOR_STATE_CONTENTS = """import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.core.fs.CloseableRegistry;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.RoundRobinOperatorStateRepartitioner;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.DefaultOperatorStateBackend;
import org.apache.flink.runtime.state.DefaultOperatorStateBackendBuilder;
import org.apache.flink.runtime.state.OperatorStateHandle;
import java.io.DataInputStream;
import java.io.File;
import java.io.FileInputStream;
import java.util.*;

/** Prints what each subtask's operator state backend holds after Flink assigns a checkpoint's operator
 *  state to NEW_P subtasks (RoundRobinOperatorStateRepartitioner + DefaultOperatorStateBackend restore). */
public class OperatorStateContents {
    public static void main(String[] a) throws Exception {
        File dir = new File(a[0]);
        String op = a[1];
        int newP = Integer.parseInt(a[2]);
        CheckpointMetadata md;
        try (DataInputStream in = new DataInputStream(new FileInputStream(new File(dir, "_metadata")))) {
            md = Checkpoints.loadCheckpointMetadata(
                in, OperatorStateContents.class.getClassLoader(), dir.getAbsolutePath());
        }
        for (OperatorState st : md.getOperatorStates()) {
            if (!st.getOperatorID().toHexString().equals(op)) continue;
            List<List<OperatorStateHandle>> old = new ArrayList<>();
            for (int i = 0; i < st.getParallelism(); i++) {
                OperatorSubtaskState s = st.getState(i);
                old.add(s == null ? new ArrayList<>() : new ArrayList<>(s.getManagedOperatorState().asList()));
            }
            List<List<OperatorStateHandle>> assigned =
                RoundRobinOperatorStateRepartitioner.INSTANCE.repartitionState(old, st.getParallelism(), newP);
            for (int i = 0; i < newP; i++) {
                DefaultOperatorStateBackend b = new DefaultOperatorStateBackendBuilder(
                    OperatorStateContents.class.getClassLoader(), new ExecutionConfig(), false,
                    assigned.get(i), new CloseableRegistry()).build();
                TreeMap<String, Object> out = new TreeMap<>();
                for (String name : b.getRegisteredStateNames()) {
                    List<Object> items = new ArrayList<>();
                    if (name.equals("seen-union")) {
                        b.getUnionListState(new ListStateDescriptor<>(name, String.class)).get().forEach(items::add);
                    } else if (name.equals("SourceReaderState")) {
                        b.getListState(new ListStateDescriptor<>(name, byte[].class)).get()
                            .forEach(x -> items.add(Arrays.toString(x)));
                    } else {
                        b.getListState(new ListStateDescriptor<>(name, Long.class)).get().forEach(items::add);
                    }
                    items.sort(Comparator.comparing(Object::toString));
                    out.put(name, items);
                }
                for (String name : b.getRegisteredBroadcastStateNames()) {
                    TreeMap<String, Long> m = new TreeMap<>();
                    b.getBroadcastState(new MapStateDescriptor<>(name, Types.STRING, Types.LONG)).entries()
                        .forEach(e -> m.put(e.getKey(), e.getValue()));
                    out.put(name, m);
                }
                System.out.println("subtask " + i + " " + out);
                b.dispose();
            }
        }
    }
}
"""


KEYED_STATE_CONTENTS = """import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.core.fs.CloseableRegistry;
import org.apache.flink.metrics.groups.UnregisteredMetricsGroup;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.StateAssignmentOperation;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.AbstractKeyedStateBackend;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.LocalRecoveryConfig;
import org.apache.flink.runtime.state.UncompressedStreamCompressionDecorator;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.runtime.state.changelog.ChangelogStateBackendHandle;
import org.apache.flink.runtime.state.ttl.TtlTimeProvider;
import java.io.DataInputStream;
import java.io.File;
import java.io.FileInputStream;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.util.*;
import java.util.function.Function;

/** Per new subtask: the keys and values of keyed ValueStates "count" and "pad" that Flink's RocksDB backend
 *  restores. Mode "flink": the checkpoint at its own parallelism, handles assigned to NEW_P subtasks by Flink's
 *  StateAssignmentOperation.getManagedKeyedStateHandles. Mode "stored": the checkpoint already at NEW_P, subtask
 *  i's handles as stored (what Flink passes on at unchanged parallelism), a ChangelogStateBackendHandle replaced
 *  by its materialized handles (what ChangelogBackendRestoreOperation gives the base backend). */
public class KeyedStateContents {
    public static void main(String[] a) throws Exception {
        File dir = new File(a[0]);
        String op = a[1];
        int newP = Integer.parseInt(a[2]);
        String mode = a[3];
        File work = new File(a[4]);
        ClassLoader cl = KeyedStateContents.class.getClassLoader();
        CheckpointMetadata md;
        try (DataInputStream in = new DataInputStream(new FileInputStream(new File(dir, "_metadata")))) {
            md = Checkpoints.loadCheckpointMetadata(in, cl, dir.getAbsolutePath());
        }
        for (OperatorState st : md.getOperatorStates()) {
            if (!st.getOperatorID().toHexString().equals(op)) continue;
            if (mode.equals("stored") && st.getParallelism() != newP) {
                throw new IllegalStateException("stored parallelism " + st.getParallelism() + " != " + newP);
            }
            int maxP = st.getMaxParallelism();
            for (int i = 0; i < newP; i++) {
                KeyGroupRange range = KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(maxP, newP, i);
                List<KeyedStateHandle> handles = new ArrayList<>();
                if (mode.equals("flink")) {
                    handles.addAll(StateAssignmentOperation.getManagedKeyedStateHandles(st, range));
                } else {
                    OperatorSubtaskState s = st.getState(i);
                    Collection<KeyedStateHandle> stored =
                        s == null ? Collections.<KeyedStateHandle>emptyList() : s.getManagedKeyedState();
                    for (KeyedStateHandle h : stored) {
                        if (h instanceof ChangelogStateBackendHandle) {
                            if (!((ChangelogStateBackendHandle) h).getNonMaterializedStateHandles().isEmpty()) {
                                throw new IllegalStateException("changelog part present");
                            }
                            handles.addAll(((ChangelogStateBackendHandle) h).getMaterializedStateHandles());
                        } else {
                            handles.add(h);
                        }
                    }
                }
                AbstractKeyedStateBackend<String> b = build(cl, new File(work, mode + "-" + i), maxP, range, handles);
                ValueState<Long> count = b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE,
                    new ValueStateDescriptor<>("count", Long.class));
                ValueState<String> pad = b.getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE,
                    new ValueStateDescriptor<>("pad", String.class));
                TreeMap<String, String> out = new TreeMap<>();
                List<String> keys = new ArrayList<>();
                b.getKeys("count", VoidNamespace.INSTANCE).forEach(keys::add);
                for (String k : keys) {
                    b.setCurrentKey(k);
                    String p = pad.value();
                    out.put(k, count.value() + "/" + (p == null ? "-" : Integer.toHexString(p.hashCode())));
                }
                System.out.println("subtask " + i + " [" + range.getStartKeyGroup() + "-"
                    + range.getEndKeyGroup() + "] handles=" + handles.size() + " " + out);
                b.dispose();
            }
        }
    }

    /** Flink's RocksDBKeyedStateBackendBuilder (package and arity differ between releases: filled by type). */
    @SuppressWarnings("unchecked")
    static AbstractKeyedStateBackend<String> build(ClassLoader cl, File dir, int maxP, KeyGroupRange range,
            List<KeyedStateHandle> handles) throws Exception {
        String pkg;
        try {
            Class.forName("org.apache.flink.state.rocksdb.RocksDBKeyedStateBackendBuilder");
            pkg = "org.apache.flink.state.rocksdb.";
        } catch (ClassNotFoundException e) {
            pkg = "org.apache.flink.contrib.streaming.state.";
        }
        Class<?> builderClass = Class.forName(pkg + "RocksDBKeyedStateBackendBuilder");
        Object resources = Class.forName(pkg + "RocksDBResourceContainer").getConstructor().newInstance();
        Method columnOptions = resources.getClass().getMethod("getColumnOptions");
        Class<?> pqType = Class.forName(pkg + "EmbeddedRocksDBStateBackend$PriorityQueueStateType");
        Object heap = Enum.valueOf((Class<Enum>) pqType, "HEAP");
        Object pqConfig = Class.forName(pkg + "RocksDBPriorityQueueConfig")
            .getMethod("buildWithPriorityQueueType", pqType).invoke(null, heap);
        dir.mkdirs();
        Constructor<?> ctor = null;
        for (Constructor<?> c : builderClass.getConstructors()) {
            if (ctor == null || c.getParameterCount() < ctor.getParameterCount()) ctor = c;
        }
        Class<?>[] types = ctor.getParameterTypes();
        Object[] args = new Object[types.length];
        for (int k = 0; k < types.length; k++) {
            String n = types[k].getName();
            if (types[k] == String.class) args[k] = "keyed-state-contents";
            else if (types[k] == ClassLoader.class) args[k] = cl;
            else if (types[k] == File.class) args[k] = dir;
            else if (n.endsWith("RocksDBResourceContainer")) args[k] = resources;
            else if (types[k] == Function.class) args[k] = (Function<String, Object>) s -> {
                try {
                    return columnOptions.invoke(resources);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                } };
            else if (n.endsWith("TypeSerializer")) args[k] = StringSerializer.INSTANCE;
            else if (types[k] == int.class) args[k] = maxP;
            else if (types[k] == KeyGroupRange.class) args[k] = range;
            else if (types[k] == ExecutionConfig.class) args[k] = new ExecutionConfig();
            else if (types[k] == LocalRecoveryConfig.class) args[k] = LocalRecoveryConfig.BACKUP_AND_RECOVERY_DISABLED;
            else if (n.endsWith("RocksDBPriorityQueueConfig")) args[k] = pqConfig;
            else if (types[k] == TtlTimeProvider.class) args[k] = TtlTimeProvider.DEFAULT;
            else if (n.endsWith("LatencyTrackingStateConfig") || n.endsWith("SizeTrackingStateConfig"))
                args[k] = types[k].getMethod("disabled").invoke(null);
            else if (n.equals("org.apache.flink.metrics.MetricGroup")) args[k] = new UnregisteredMetricsGroup();
            else if (n.endsWith("CustomInitializationMetrics")) args[k] = java.lang.reflect.Proxy.newProxyInstance(
                cl, new Class<?>[] {types[k]}, (p, m, x) -> null);
            else if (types[k] == Collection.class) args[k] = handles;
            else if (n.endsWith("StreamCompressionDecorator"))
                args[k] = UncompressedStreamCompressionDecorator.INSTANCE;
            else if (types[k] == CloseableRegistry.class) args[k] = new CloseableRegistry();
            else if (n.endsWith("TaskKvStateRegistry")) args[k] = null;
            else throw new IllegalStateException("no value for builder parameter " + n);
        }
        Object builder = ctor.newInstance(args);
        return (AbstractKeyedStateBackend<String>) builderClass.getMethod("build").invoke(builder);
    }
}
"""


@functools.cache
def _contents_tool(release: str) -> tuple[Path, Path]:
    lib, _ = prepare(release)
    classes = Path(tempfile.mkdtemp(prefix="spillway-opstate-"))
    (classes / "OperatorStateContents.java").write_text(OPERATOR_STATE_CONTENTS)
    subprocess.run(
        ["javac", "-cp", f"{lib}/*", "-d", str(classes), str(classes / "OperatorStateContents.java"), str(MAIN_LOOP)],
        check=True,
        capture_output=True,
    )
    return lib, classes


@functools.cache
def _contents_loop(release: str) -> JavaLoop:
    """OperatorStateContents' runs of a release in one JVM (a run is milliseconds; a JVM start was most of it)."""
    lib, classes = _contents_tool(release)
    return JavaLoop(["java", "-cp", f"{classes}:{lib}/*", "MainLoop"])


def flink_operator_state(release: str, checkpoint: Path, operator_id: str, new_p: int) -> list[str]:
    """Per new subtask: the operator state Flink restores from ``checkpoint`` at parallelism ``new_p``."""
    loop = _contents_loop(release)
    code, stdout = loop.call("OperatorStateContents", str(checkpoint), operator_id, str(new_p), timeout=120)
    assert code == 0, stdout + loop.stderr()
    return [line for line in stdout.splitlines() if line.startswith("subtask ")]


def explain(res: dict) -> str:
    return json.dumps({k: res.get(k) for k in ("outcome", "stage", "error", "causes", "log", "tasks")}, indent=1)


def rescale_whole_job(fixture: str, new_p: int, out: Path, work: Path, self_check: bool = True) -> list[str]:
    """Write ``fixture``'s checkpoint with every operator at ``new_p`` (no channel state) to ``out``."""
    fx = fixture_named(fixture)
    loaded = load_checkpoint(fx.checkpoint_dir)
    cp = copy.deepcopy(loaded.checkpoint)
    blobs = DelegateBlobs(loaded.resolver)
    staging = work / "new-files"
    staging.mkdir(parents=True)
    copies: dict[Path, str] = {}
    notes: list[str] = []
    try:
        for op in cp.operators:
            result = rescale_operator_state_and_keyed(op, new_p, blobs, features=cp.features)
            op.subtasks = [s for s in result.subtasks if s.has_state()]
            op.parallelism = new_p
            for f in result.files:
                materialize(f, blobs, staging / f.relative_path)
                copies[staging / f.relative_path] = f.relative_path
            notes += result.notes
    finally:
        blobs.close()
    # Relative files of the source that the new metadata still names travel with it.
    for _, h in all_stream_handles(cp):
        if isinstance(h, RelativeFileHandle) and h.relative_path not in copies.values():
            copies[fx.checkpoint_dir / h.relative_path] = h.relative_path
    # Absolute files (RocksDB shared/) are read from a private copy of the fixture's job directory.
    job = Path("checkpoints") / fx.info["job_id"]
    old_prefix = f"file:{fx.info['generated_at']}/{job}/"
    if any(isinstance(h, FileHandle) for _, h in all_stream_handles(cp)):
        shutil.copytree(fx.root / job / "shared", work / "job" / "shared")
        rebased = {id(h): h for _, h in all_stream_handles(cp) if isinstance(h, FileHandle)}  # shared handles once
        for h in rebased.values():
            assert h.path.startswith(old_prefix), h.path
            h.path = f"file:{work / 'job'}/{h.path[len(old_prefix) :]}"
    if self_check:
        write_checkpoint(PlannedOutput(cp, copies), out, validated_output())
    else:
        # validate (the writer's self-check) flags a whole RocksDB incremental handle on several subtasks as
        # overlapping key groups; this writes the same bytes without it, to let Flink judge.
        out.mkdir()
        for source, relative in copies.items():
            shutil.copyfile(source, out / relative)
        (out / "_metadata").write_bytes(encode_metadata(cp))
    return notes


@pytest.mark.parametrize("new_p", [3, 1])
def test_flink_restores_spillway_rescaled_keyed_and_operator_state(tmp_path: Path, new_p: int) -> None:
    fx = fixture_named("2.3.0-unaligned")
    out = tmp_path / "rescaled"
    notes = rescale_whole_job(fx.name, new_p, out, tmp_path / "build")
    assert any("merged" in n for n in notes), notes  # p=3: slow#1 spans both old handles; p=1: everything
    res = restore(fx.release, fx.info["scenario"], out, parallelism=new_p, workdir=tmp_path / "work")
    assert res["outcome"] == "restored", explain(res)
    assert len(res["tasks"]) == 3 * new_p  # src->tostr, slow, len->sink chains, all up
    print(f"rescaled to p={new_p}: restored in {res['wall_seconds']} s")


def test_flink_rescales_the_original_itself(tmp_path: Path) -> None:
    """Control: the untouched checkpoint restored at p=3 (Flink rescales state and channel state)."""
    fx = fixture_named("2.3.0-unaligned")
    res = restore(fx.release, fx.info["scenario"], fx.checkpoint_dir, parallelism=3, workdir=tmp_path / "work")
    assert res["outcome"] == "restored", explain(res)
    print(f"original restored at p=3 in {res['wall_seconds']} s")


@pytest.mark.parametrize("new_p", [3, 1])
def test_flink_restores_rescaled_list_union_and_broadcast_state(tmp_path: Path, new_p: int) -> None:
    fx = fixture_named("2.3.0-operator-states")
    out = tmp_path / "rescaled"
    rescale_whole_job(fx.name, new_p, out, tmp_path / "build")
    res = restore(fx.release, fx.info["scenario"], out, parallelism=new_p, workdir=tmp_path / "work")
    assert res["outcome"] == "restored", explain(res)
    print(f"operator-states rescaled to p={new_p}: restored in {res['wall_seconds']} s")


def test_flink_clips_a_whole_rocksdb_incremental_handle(tmp_path: Path) -> None:
    """2 -> 4: each new key-group range lies inside one old handle, which is handed over whole; Flink's RocksDB
    restore opens it and drops the key groups outside the new subtask's range."""
    fx = fixture_named("2.3.0-rocksdb-incremental")
    out = tmp_path / "rescaled"
    notes = rescale_whole_job(fx.name, 4, out, tmp_path / "build", self_check=False)
    assert sum("kept whole" in n for n in notes) == 4, notes
    res = restore(fx.release, fx.info["scenario"], out, parallelism=4, workdir=tmp_path / "work")
    assert res["outcome"] == "restored", explain(res)
    # Flink's own log: every subtask opened the whole old instance and range-deleted the foreign key groups.
    log = Path(res["log"]).read_text()
    for first, last in ((0, 31), (32, 63), (64, 95), (96, 127)):
        assert f"Performing range delete for backend with target key-groups range [{first}, {last}]" in log
    print(f"rocksdb-incremental rescaled to p=4: restored in {res['wall_seconds']} s")


@functools.cache
def _keyed_contents_tool(release: str) -> tuple[Path, Path]:
    lib, _ = prepare(release)
    classes = Path(tempfile.mkdtemp(prefix="spillway-keyed-"))
    (classes / "KeyedStateContents.java").write_text(KEYED_STATE_CONTENTS)
    subprocess.run(
        ["javac", "-cp", f"{lib}/*", "-d", str(classes), str(classes / "KeyedStateContents.java"), str(MAIN_LOOP)],
        check=True,
        capture_output=True,
    )
    return lib, classes


@functools.cache
def _keyed_contents_loop(release: str) -> JavaLoop:
    """KeyedStateContents' runs of a release in one JVM (RocksDB's native library loaded once, too)."""
    lib, classes = _keyed_contents_tool(release)
    return JavaLoop(["java", "-cp", f"{classes}:{lib}/*", "MainLoop"])


def flink_keyed_state(release: str, checkpoint: Path, operator_id: str, new_p: int, mode: str, work: Path) -> list[str]:
    """Per new subtask: key -> "count/pad hash" as Flink's RocksDB backend restores it (``mode``: "flink" assigns
    a checkpoint's handles to ``new_p`` subtasks itself, "stored" takes each subtask's stored handles)."""
    loop = _keyed_contents_loop(release)
    args = [str(checkpoint), operator_id, str(new_p), mode, str(work)]
    code, stdout = loop.call("KeyedStateContents", *args, timeout=300)
    assert code == 0, stdout + loop.stderr()
    return [line for line in stdout.splitlines() if line.startswith("subtask ")]


def _operator_id(fixture: str, uid: str) -> str:
    ids = json.loads((fixture_named(fixture).root / "ids.json").read_text())
    return str(next(n["operator_id"] for n in ids["stream_nodes"] if n["uid"] == uid))


@pytest.mark.parametrize(
    ("fixture", "new_p"),
    [
        ("2.3.0-rocksdb-incremental", 3),
        ("2.3.0-rocksdb-incremental-p3", 2),
        ("1.20.3-rocksdb-incremental", 3),
        ("1.20.3-rocksdb-incremental-p3", 2),
    ],
)
def test_flink_restores_several_rocksdb_snapshots_per_subtask(tmp_path: Path, fixture: str, new_p: int) -> None:
    """2 -> 3 and 3 -> 2: a new subtask needs the RocksDB instances of two old subtasks. Flink restores the
    rescaled checkpoint (its rescaling restore opens both and keeps the subtask's key groups), and every subtask's
    restored keyed state — each key's count and pad — equals what Flink's own assignment of the original gives."""
    fx = fixture_named(fixture)
    out = tmp_path / "rescaled"
    notes = rescale_whole_job(fx.name, new_p, out, tmp_path / "build")
    assert sum("snapshots of old subtasks" in n for n in notes) >= 1, notes
    res = restore(fx.release, fx.info["scenario"], out, parallelism=new_p, workdir=tmp_path / "work")
    assert res["outcome"] == "restored", explain(res)
    assert len(res["tasks"]) == 3 * new_p
    log = Path(res["log"]).read_text(errors="replace")
    for lo, hi in {3: ((0, 42), (43, 85), (86, 127)), 2: ((0, 63), (64, 127))}[new_p]:
        assert f"target key-groups range [{lo}, {hi}]" in log
    slow = _operator_id(fixture, "slow")
    staged, cleanup = stage(fx.checkpoint_dir, tmp_path)  # the original's SST files where its _metadata names them
    try:
        flink = flink_keyed_state(fx.release, staged, slow, new_p, "flink", tmp_path / "flink-db")
        before = flink_keyed_state(fx.release, staged, slow, fx.info["parallelism"], "flink", tmp_path / "old-db")
    finally:
        if cleanup is not None:
            shutil.rmtree(cleanup, ignore_errors=True)
    ours = flink_keyed_state(fx.release, out, slow, new_p, "stored", tmp_path / "ours-db")
    assert len(ours) == new_p and ours == flink
    keys = sum(line.count("/") for line in before)  # one "count/pad" value per key
    assert keys > 0 and sum(line.count("/") for line in ours) == keys  # every key once, none lost
    print(f"{fixture} -> p={new_p}: restored in {res['wall_seconds']} s; {keys} keys identical to Flink's assignment")


@pytest.mark.parametrize("fixture", ["2.3.0-operator-states", "2.3.0-unaligned-p3"])
@pytest.mark.parametrize("new_p", [3, 2, 1])
def test_flink_sees_the_same_operator_state_as_after_its_own_rescale(tmp_path: Path, fixture: str, new_p: int) -> None:
    """Every subtask's restored list / union / broadcast state equals what Flink gives it when it rescales the
    original itself — in particular each union element once per subtask (Flink unions again on every restore)."""
    fx = fixture_named(fixture)
    out = tmp_path / "rescaled"
    rescale_whole_job(fx.name, new_p, out, tmp_path / "build")
    cp = load_checkpoint(fx.checkpoint_dir).checkpoint
    compared = 0
    for op in cp.operators:
        if not any(s.managed_operator_state for s in op.subtasks):
            continue
        flink = flink_operator_state(fx.release, fx.checkpoint_dir, op.operator_id, new_p)
        ours = flink_operator_state(fx.release, out, op.operator_id, new_p)
        assert len(flink) == new_p
        assert ours == flink, op.label()
        compared += 1
    assert compared >= 2
