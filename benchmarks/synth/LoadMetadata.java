/*
 * Load a `_metadata` with Flink's own Checkpoints.loadCheckpointMetadata (Flink 2.x API) and print
 * the number of operators / subtask states and the in-JVM load time. The benchmark measures the
 * whole process from outside (JVM start included); the printed time is the loader alone.
 *
 * Usage: java -cp <classes>:<flink lib/*> LoadMetadata PATH_TO_METADATA [EXTERNAL_POINTER]
 */

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.File;
import java.io.FileInputStream;

import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;

public final class LoadMetadata {
    public static void main(String[] args) throws Exception {
        File f = new File(args[0]);
        String pointer = args.length > 1 ? args[1] : f.getAbsoluteFile().getParent();
        long t0 = System.nanoTime();
        CheckpointMetadata md;
        try (DataInputStream in = new DataInputStream(new BufferedInputStream(new FileInputStream(f), 1 << 16))) {
            md = Checkpoints.loadCheckpointMetadata(in, LoadMetadata.class.getClassLoader(), pointer);
        }
        long t1 = System.nanoTime();
        long subtasks = 0;
        for (OperatorState op : md.getOperatorStates()) {
            subtasks += op.getSubtaskStates().size();
        }
        System.out.printf("checkpoint=%d operators=%d subtask_states=%d load_ms=%d%n",
                md.getCheckpointId(), md.getOperatorStates().size(), subtasks, (t1 - t0) / 1_000_000);
    }
}
