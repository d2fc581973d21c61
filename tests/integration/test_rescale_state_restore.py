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
from support.flink_harness import prepare, restore

from spillway.formats.metadata_codec import encode_metadata
from spillway.inspect.output_check import validated_output
from spillway.model.checkpoint import FileHandle, RelativeFileHandle
from spillway.model.walk import all_stream_handles
from spillway.rescale.state import RescaleRefused, materialize, rescale_operator_state_and_keyed
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


@functools.cache
def _contents_tool(release: str) -> tuple[Path, Path]:
    lib, _ = prepare(release)
    classes = Path(tempfile.mkdtemp(prefix="spillway-opstate-"))
    (classes / "OperatorStateContents.java").write_text(OPERATOR_STATE_CONTENTS)
    subprocess.run(
        ["javac", "-cp", f"{lib}/*", "-d", str(classes), str(classes / "OperatorStateContents.java")],
        check=True,
        capture_output=True,
    )
    return lib, classes


def flink_operator_state(release: str, checkpoint: Path, operator_id: str, new_p: int) -> list[str]:
    """Per new subtask: the operator state Flink restores from ``checkpoint`` at parallelism ``new_p``."""
    lib, classes = _contents_tool(release)
    res = subprocess.run(
        ["java", "-cp", f"{classes}:{lib}/*", "OperatorStateContents", str(checkpoint), operator_id, str(new_p)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return [line for line in res.stdout.splitlines() if line.startswith("subtask ")]


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


def test_rocksdb_incremental_across_handles_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RescaleRefused, match="rescale in Flink or take a canonical savepoint"):
        rescale_whole_job("2.3.0-rocksdb-incremental", 3, tmp_path / "out", tmp_path / "build")
    assert not (tmp_path / "out").exists()


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
