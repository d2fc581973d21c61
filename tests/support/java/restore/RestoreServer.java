package spillway.fixtures;

import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.LoggerContext;

import java.io.BufferedReader;
import java.io.File;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Runs many {@link RestoreCheck}s in one JVM, one after the other: JVM start-up, loading Flink's classes and
 * warming the JIT are most of a short restore check's cost, and they are the same for every restore of a release.
 * Every restore still gets a MiniCluster of its own (RestoreCheck starts and closes it), so one restore's
 * configuration (slots, state backend, REST port) never leaks into the next.
 *
 * <p>One request per line on stdin, fields separated by TAB: the Flink log file, the log4j2 configuration, the file
 * that receives what the run prints, then RestoreCheck's own arguments. After each run one line
 * {@code spillway-restore-done RC} on stdout (RC as RestoreCheck's exit code). The JVM ends when stdin closes, so it
 * never outlives the test process that started it.
 */
public final class RestoreServer {

    static final String DONE = "spillway-restore-done ";

    /**
     * Transformation ids come from one counter per JVM, and the stream-graph plan (plan.json) shows them as node ids:
     * without this, a restore's plan would differ from the one a fresh JVM (and the recorded fixtures) writes.
     * The counter is {@code Integer idCounter} up to 1.16 and {@code AtomicInteger ID_COUNTER} from 1.17 on.
     */
    static void resetTransformationIds() throws ReflectiveOperationException {
        Class<?> transformation = Class.forName("org.apache.flink.api.dag.Transformation");
        for (java.lang.reflect.Field f : transformation.getDeclaredFields()) {
            if (!java.lang.reflect.Modifier.isStatic(f.getModifiers())) {
                continue;
            }
            if (f.getName().equals("ID_COUNTER")) {
                f.setAccessible(true);
                ((java.util.concurrent.atomic.AtomicInteger) f.get(null)).set(0);
                return;
            }
            if (f.getName().equals("idCounter")) {
                f.setAccessible(true);
                f.set(null, 0);
                return;
            }
        }
        throw new NoSuchFieldException("Transformation's id counter (idCounter / ID_COUNTER)");
    }

    public static void main(String[] args) throws Exception {
        PrintStream console = System.out;
        PrintStream errors = System.err;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String[] fields = line.split("\t", -1);
            int rc;
            try (PrintStream out = new PrintStream(new FileOutputStream(fields[2]), true, "UTF-8")) {
                // the log's file name is read by the configuration (${sys:spillway.log}) when it is (re)loaded
                System.setProperty("spillway.log", fields[0]);
                ((LoggerContext) LogManager.getContext(false)).setConfigLocation(new File(fields[1]).toURI());
                System.setOut(out);
                System.setErr(out);
                try {
                    resetTransformationIds();
                    rc = RestoreCheck.run(Arrays.copyOfRange(fields, 3, fields.length));
                } catch (Throwable t) {
                    t.printStackTrace(out);
                    rc = 1;
                } finally {
                    System.out.flush();
                    System.setOut(console);
                    System.setErr(errors);
                }
            }
            console.println(DONE + rc);
            console.flush();
        }
        Runtime.getRuntime().halt(0); // MiniClusters leave non-daemon threads behind
    }
}
