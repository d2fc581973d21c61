/*
 * Build a large, realistic checkpoint `_metadata` in memory and write it with Flink's own
 * serializer (Checkpoints.storeCheckpointMetadata), so the file is byte-for-byte what Flink would
 * write for that state. Compiled and run against the Flink 2.3.0 jars (metadata format V6).
 *
 * Usage: java -cp <classes>:<flink-2.3.0 lib/*> SynthMetadata OUT_FILE [OPERATORS [PARALLELISM [SEED [SHAPE]]]]
 *        (defaults: 200 operators x 128 subtasks, seed 42, shape "mixed"; the output is deterministic
 *        per seed and shape)
 *
 * Shape of the state (modelled on the real 2.3.0 RocksDB / unaligned-checkpoint runs):
 *  - every operator: keyed state = one IncrementalRemoteKeyedStateHandle per subtask, max
 *    parallelism 256 (two key groups per subtask at parallelism 128), inline RocksDB meta data,
 *    10 shared SST files + MANIFEST / OPTIONS as absolute FileStateHandles under
 *    s3://…/<job>/shared/, CURRENT inline (private);
 *  - every 10th operator is a FLIP-27 source: coordinator state + "SourceReaderState" operator
 *    state (inline) per subtask;
 *  - every 10th operator (5, 15, ...) sits behind a keyBy with backpressure: per subtask one channel-state file
 *    (RelativeFileStateHandle in chk-N/) carrying a MergedInputChannelStateHandle over all
 *    upstream channels and a MergedResultSubpartitionStateHandle over all downstream subpartitions.
 *
 * Shape "handle-heavy": channel state on every subtask of every operator, one InputChannelStateHandle
 * per upstream channel and one ResultSubpartitionStateHandle per downstream subpartition (not merged:
 * what a job whose channel-state files are not merged, or a release before merging, writes), each
 * over the subtask's one channel-state file. 200 operators x 32 subtasks give ~205k input and ~205k
 * output channel handles in ~99 MB.
 */

import java.io.BufferedOutputStream;
import java.io.FileOutputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.UUID;

import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.checkpoint.CheckpointProperties;
import org.apache.flink.runtime.checkpoint.CheckpointRetentionPolicy;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.MasterState;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.StateObjectCollection;
import org.apache.flink.runtime.checkpoint.channel.InputChannelInfo;
import org.apache.flink.runtime.checkpoint.channel.ResultSubpartitionInfo;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.state.IncrementalKeyedStateHandle.HandleAndLocalPath;
import org.apache.flink.runtime.state.IncrementalRemoteKeyedStateHandle;
import org.apache.flink.runtime.state.InputChannelStateHandle;
import org.apache.flink.runtime.state.InputStateHandle;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.MergedInputChannelStateHandle;
import org.apache.flink.runtime.state.MergedResultSubpartitionStateHandle;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.OperatorStreamStateHandle;
import org.apache.flink.runtime.state.OutputStateHandle;
import org.apache.flink.runtime.state.ResultSubpartitionStateHandle;
import org.apache.flink.runtime.state.StreamStateHandle;
import org.apache.flink.runtime.state.filesystem.FileStateHandle;
import org.apache.flink.runtime.state.filesystem.RelativeFileStateHandle;
import org.apache.flink.runtime.state.memory.ByteStreamStateHandle;

public final class SynthMetadata {

    private static final long CHECKPOINT_ID = 4242L;
    private static final int MAX_PARALLELISM = 256;

    private final Random rnd;
    private final String root;     // s3://…/<job id>
    private final String chkDir;   // root + /chk-<id>
    private final boolean handleHeavy;

    private SynthMetadata(long seed, boolean handleHeavy) {
        this.rnd = new Random(seed);
        this.handleHeavy = handleHeavy;
        this.root = "s3://acme-flink-prod-checkpoints/pipelines/clickstream-enrichment/" + hex(16);
        this.chkDir = root + "/chk-" + CHECKPOINT_ID;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: SynthMetadata OUT_FILE [OPERATORS [PARALLELISM [SEED [mixed|handle-heavy]]]]");
            System.exit(2);
        }
        int operators = args.length > 1 ? Integer.parseInt(args[1]) : 200;
        int parallelism = args.length > 2 ? Integer.parseInt(args[2]) : 128;
        long seed = args.length > 3 ? Long.parseLong(args[3]) : 42L;
        String shape = args.length > 4 ? args[4] : "mixed";
        if (!shape.equals("mixed") && !shape.equals("handle-heavy")) {
            System.err.println("unknown shape " + shape + ": mixed or handle-heavy");
            System.exit(2);
        }

        long t0 = System.nanoTime();
        CheckpointMetadata md = new SynthMetadata(seed, shape.equals("handle-heavy")).build(operators, parallelism);
        long t1 = System.nanoTime();
        java.io.File parent = new java.io.File(args[0]).getAbsoluteFile().getParentFile();
        if (parent != null) {
            parent.mkdirs();
        }
        try (OutputStream out = new BufferedOutputStream(new FileOutputStream(args[0]), 1 << 20)) {
            Checkpoints.storeCheckpointMetadata(md, out);
        }
        long t2 = System.nanoTime();
        System.out.printf("operators=%d parallelism=%d build_ms=%d write_ms=%d file=%s bytes=%d%n",
                operators, parallelism, (t1 - t0) / 1_000_000, (t2 - t1) / 1_000_000, args[0],
                new java.io.File(args[0]).length());
    }

    private CheckpointMetadata build(int operators, int parallelism) {
        List<OperatorState> states = new ArrayList<>(operators);
        for (int op = 0; op < operators; op++) {
            states.add(operator(op, parallelism));
        }
        return new CheckpointMetadata(
                CHECKPOINT_ID,
                states,
                Collections.<MasterState>emptyList(),
                CheckpointProperties.forCheckpoint(CheckpointRetentionPolicy.RETAIN_ON_CANCELLATION));
    }

    private OperatorState operator(int op, int parallelism) {
        boolean source = op % 10 == 0;
        boolean channelState = handleHeavy || op % 10 == 5;
        String name = source ? "Source: events-" + op : (op % 3 == 0 ? "KeyedProcess" : "Window(Tumbling)");
        String uid = "op-" + op;
        OperatorState state = new OperatorState(name, uid, new OperatorID(rnd.nextLong(), rnd.nextLong()),
                parallelism, MAX_PARALLELISM);
        if (source) {
            state.setCoordinatorState(new ByteStreamStateHandle(state.getOperatorID().toString(), bytes(48)));
        }
        for (int sub = 0; sub < parallelism; sub++) {
            OperatorSubtaskState.Builder b = OperatorSubtaskState.builder();
            b.setManagedKeyedState(keyed(sub, parallelism));
            if (source) {
                b.setManagedOperatorState(sourceReaderState());
            }
            if (channelState) {
                channels(b, sub, parallelism);
            }
            state.putState(sub, b.build());
        }
        return state;
    }

    private IncrementalRemoteKeyedStateHandle keyed(int sub, int parallelism) {
        KeyGroupRange range =
                KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(MAX_PARALLELISM, parallelism, sub);
        List<HandleAndLocalPath> shared = new ArrayList<>();
        int sst = 7 + rnd.nextInt(400);
        long total = 0;
        for (int i = 0; i < 10; i++) {
            long size = 2_000_000L + rnd.nextInt(60_000_000);
            total += size;
            shared.add(HandleAndLocalPath.of(sharedFile(size), String.format("%06d.sst", sst + i * 3)));
        }
        List<HandleAndLocalPath> priv = new ArrayList<>();
        int manifest = sst + 40;
        priv.add(HandleAndLocalPath.of(sharedFile(20_000 + rnd.nextInt(200_000)),
                String.format("MANIFEST-%06d", manifest)));
        priv.add(HandleAndLocalPath.of(sharedFile(21_000 + rnd.nextInt(2_000)),
                String.format("OPTIONS-%06d", manifest + 3)));
        priv.add(HandleAndLocalPath.of(
                new ByteStreamStateHandle(sharedPath(), String.format("MANIFEST-%06d%n", manifest)
                        .getBytes(StandardCharsets.US_ASCII)), "CURRENT"));
        StreamStateHandle meta = new ByteStreamStateHandle(chkDir + "/" + uuid(), bytes(500 + rnd.nextInt(400)));
        long checkpointed = total / (1 + rnd.nextInt(8)); // this checkpoint uploaded only part of it
        return new IncrementalRemoteKeyedStateHandle(
                uuid(), range, CHECKPOINT_ID, shared, priv, meta, checkpointed);
    }

    private OperatorStateHandle sourceReaderState() {
        Map<String, OperatorStateHandle.StateMetaInfo> m = new HashMap<>();
        m.put("SourceReaderState", new OperatorStateHandle.StateMetaInfo(
                new long[] {0L}, OperatorStateHandle.Mode.SPLIT_DISTRIBUTE));
        return new OperatorStreamStateHandle(m, new ByteStreamStateHandle(chkDir + "/" + uuid(), bytes(180)));
    }

    /** One channel-state file per subtask, shared by its merged input and output handles. */
    private void channels(OperatorSubtaskState.Builder b, int sub, int parallelism) {
        if (handleHeavy) {
            unmergedChannels(b, sub, parallelism);
            return;
        }
        long pos = 0;
        List<InputChannelStateHandle> in = new ArrayList<>();
        List<ResultSubpartitionStateHandle> out = new ArrayList<>();
        List<long[]> inPlan = new ArrayList<>();
        List<long[]> outPlan = new ArrayList<>();
        for (int ch = 0; ch < parallelism; ch++) {
            long size = 4 + rnd.nextInt(32_000);
            inPlan.add(new long[] {pos, size});
            pos += size;
        }
        for (int ch = 0; ch < parallelism; ch++) {
            long size = 4 + rnd.nextInt(8_000);
            outPlan.add(new long[] {pos, size});
            pos += size;
        }
        String file = uuid().toString();
        StreamStateHandle delegate =
                new RelativeFileStateHandle(new Path(chkDir + "/" + file), file, pos);
        for (int ch = 0; ch < parallelism; ch++) {
            long[] p = inPlan.get(ch);
            in.add(new InputChannelStateHandle(sub, new InputChannelInfo(0, ch), delegate,
                    Collections.singletonList(p[0]), p[1]));
            long[] q = outPlan.get(ch);
            out.add(new ResultSubpartitionStateHandle(sub, new ResultSubpartitionInfo(0, ch), delegate,
                    Collections.singletonList(q[0]), q[1]));
        }
        b.setInputChannelState(new StateObjectCollection<InputStateHandle>(
                Collections.singletonList(MergedInputChannelStateHandle.fromChannelHandles(in))));
        b.setResultSubpartitionState(new StateObjectCollection<OutputStateHandle>(
                Collections.singletonList(MergedResultSubpartitionStateHandle.fromChannelHandles(out))));
    }

    /**
     * One channel-state file per subtask, one handle per channel over it; each channel holds 1-29
     * buffers (one offset each), as the in-flight buffers of a backpressured channel do.
     */
    private void unmergedChannels(OperatorSubtaskState.Builder b, int sub, int parallelism) {
        String file = uuid().toString();
        List<List<Long>> inOffsets = new ArrayList<>();
        List<List<Long>> outOffsets = new ArrayList<>();
        long[] inSizes = new long[parallelism];
        long[] outSizes = new long[parallelism];
        long pos = 0;
        for (int side = 0; side < 2; side++) {
            for (int ch = 0; ch < parallelism; ch++) {
                List<Long> offsets = new ArrayList<>();
                long size = 0;
                for (int buf = 1 + rnd.nextInt(29); buf > 0; buf--) {
                    long n = 4 + rnd.nextInt(32_000);
                    offsets.add(pos);
                    pos += n;
                    size += n;
                }
                (side == 0 ? inOffsets : outOffsets).add(offsets);
                (side == 0 ? inSizes : outSizes)[ch] = size;
            }
        }
        StreamStateHandle delegate = new RelativeFileStateHandle(new Path(chkDir + "/" + file), file, pos);
        List<InputStateHandle> in = new ArrayList<>();
        List<OutputStateHandle> out = new ArrayList<>();
        for (int ch = 0; ch < parallelism; ch++) {
            in.add(new InputChannelStateHandle(sub, new InputChannelInfo(0, ch), delegate,
                    inOffsets.get(ch), inSizes[ch]));
            out.add(new ResultSubpartitionStateHandle(sub, new ResultSubpartitionInfo(0, ch), delegate,
                    outOffsets.get(ch), outSizes[ch]));
        }
        b.setInputChannelState(new StateObjectCollection<>(in));
        b.setResultSubpartitionState(new StateObjectCollection<>(out));
    }

    private FileStateHandle sharedFile(long size) {
        return new FileStateHandle(new Path(sharedPath()), size);
    }

    private String sharedPath() {
        return root + "/shared/" + uuid();
    }

    private UUID uuid() {
        return new UUID((rnd.nextLong() & ~0xF000L) | 0x4000L,
                (rnd.nextLong() & 0x3FFFFFFFFFFFFFFFL) | 0x8000000000000000L);
    }

    private byte[] bytes(int n) {
        byte[] b = new byte[n];
        rnd.nextBytes(b);
        return b;
    }

    private String hex(int nbytes) {
        StringBuilder sb = new StringBuilder();
        for (byte x : bytes(nbytes)) {
            sb.append(String.format("%02x", x & 0xff));
        }
        return sb.toString();
    }
}
