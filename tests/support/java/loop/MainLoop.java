import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Calls the {@code main} of a small checking program many times in one JVM: for a program that runs for
 * milliseconds, starting a JVM and loading Flink's classes is nearly all of a run's cost. The program must keep no
 * state between calls (ReaderCheck, for one, builds everything it uses in {@code main}).
 *
 * <p>One call per line on stdin, fields separated by TAB: the class, then its arguments. For each, what {@code main}
 * printed, then the line {@code spillway-main-done RC} (0, or 1 when it threw; the stack trace is printed first).
 * The JVM ends when stdin closes.
 */
public final class MainLoop {

    public static void main(String[] args) throws Exception {
        PrintStream console = System.out;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] fields = line.split("\t", -1);
            ByteArrayOutputStream captured = new ByteArrayOutputStream();
            PrintStream out = new PrintStream(captured, true, "UTF-8");
            int rc = 0;
            System.setOut(out);
            try {
                Method entry = Class.forName(fields[0]).getMethod("main", String[].class);
                entry.invoke(null, (Object) Arrays.copyOfRange(fields, 1, fields.length));
            } catch (InvocationTargetException e) {
                e.getCause().printStackTrace(out);
                rc = 1;
            } catch (Throwable t) {
                t.printStackTrace(out);
                rc = 1;
            } finally {
                System.out.flush();
                System.setOut(console);
            }
            console.print(captured.toString("UTF-8"));
            console.println();
            console.println("spillway-main-done " + rc);
            console.flush();
        }
        Runtime.getRuntime().halt(0);
    }
}
