package spillway.planids;

import org.apache.flink.api.dag.Pipeline;
import org.apache.flink.client.program.PackagedProgram;
import org.apache.flink.client.program.PackagedProgramUtils;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.JobVertex;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.apache.flink.streaming.api.graph.StreamGraph;

import java.io.File;
import java.io.FileOutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

/**
 * Flink's own ids for a job's jar, the way {@code flink info} sees the job: the jar's {@code main(args)} runs in
 * Flink's plan-only environment ({@link PackagedProgramUtils#getPipelineFromProgram}; nothing is executed and no
 * cluster is contacted), then the StreamGraph is hashed by Flink's {@code StreamGraphHasherV2} and turned into a
 * JobGraph. Writes one JSON document (the shape of the test fixtures' {@code ids.json}, plus uids' user hashes and
 * max parallelism) to the file given by {@code --out}.
 *
 * <p>Compiled by spillway against the Flink release the job is for (1.11 ... 2.x); every call whose signature
 * differs between releases goes through reflection. Exit 0: written; 3: the job's main failed or built no
 * streaming job; 4: the jar or the arguments are unusable. The last stderr line starting "spillway-planids: "
 * says why.
 */
public final class PlanIds {
    private PlanIds() {}

    public static void main(String[] args) {
        int rc;
        try {
            rc = args.length == 2 && args[0].equals("--batch") ? batch(new File(args[1])) : run(args);
        } catch (JobFailure e) {
            report(e.getMessage());
            rc = 3;
        } catch (Throwable t) {
            t.printStackTrace();
            report(oneLine(rootCause(t)));
            rc = 4;
        }
        System.out.flush();
        System.err.flush();
        // a job's main may leave non-daemon threads behind; the document is written, nothing else matters
        Runtime.getRuntime().halt(rc);
    }

    private static final class JobFailure extends Exception {
        JobFailure(String message) {
            super(message);
        }
    }

    private static void report(String message) {
        System.err.println("spillway-planids: " + message.replace('\n', ' '));
    }

    /**
     * Several jobs in this one JVM (starting a JVM and loading Flink's classes is most of a job's planning time):
     * each line of {@code list} is one job's command line of the single-job form, every argument hex-encoded
     * UTF-8, separated by single spaces. Each job's main runs in a user-code class loader of its own, as in
     * Flink's REST server, which plans many jars in one JVM the same way. A job that fails does not stop the
     * others: its reason goes to its {@code --out} file + ".failed" as "EXIT-CODE TAB MESSAGE".
     */
    static int batch(File list) throws Exception {
        List<String> lines = java.nio.file.Files.readAllLines(list.toPath(), StandardCharsets.UTF_8);
        for (String line : lines) {
            if (line.isEmpty()) {
                continue;
            }
            String[] jobArgs = decodeLine(line);
            File out = outOf(jobArgs);
            String failure;
            try {
                run(jobArgs);
                continue;
            } catch (JobFailure e) {
                failure = "3\t" + e.getMessage();
            } catch (Throwable t) {
                t.printStackTrace();
                failure = "4\t" + oneLine(rootCause(t));
            }
            try (Writer w = new OutputStreamWriter(new FileOutputStream(new File(out.getPath() + ".failed")),
                    StandardCharsets.UTF_8)) {
                w.write(failure.replace('\n', ' '));
            }
        }
        return 0;
    }

    private static String[] decodeLine(String line) {
        String[] hex = line.split(" ", -1);
        String[] out = new String[hex.length];
        for (int i = 0; i < hex.length; i++) {
            byte[] bytes = new byte[hex[i].length() / 2];
            for (int b = 0; b < bytes.length; b++) {
                bytes[b] = (byte) Integer.parseInt(hex[i].substring(2 * b, 2 * b + 2), 16);
            }
            out[i] = new String(bytes, StandardCharsets.UTF_8);
        }
        return out;
    }

    private static File outOf(String[] jobArgs) {
        for (int i = 0; i + 1 < jobArgs.length && !jobArgs[i].equals("--"); i++) {
            if (jobArgs[i].equals("--out")) {
                return new File(jobArgs[i + 1]);
            }
        }
        throw new IllegalArgumentException("a batch line without --out");
    }

    static int run(String[] args) throws Exception {
        File jar = null;
        File out = null;
        String entry = null;
        int parallelism = -1;
        List<String> jobArgs = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--")) {
                jobArgs.addAll(Arrays.asList(args).subList(i + 1, args.length));
                break;
            } else if (a.equals("--jar")) {
                jar = new File(args[++i]);
            } else if (a.equals("--out")) {
                out = new File(args[++i]);
            } else if (a.equals("--class")) {
                entry = args[++i];
            } else if (a.equals("--parallelism")) {
                parallelism = Integer.parseInt(args[++i]);
            } else {
                throw new IllegalArgumentException("unknown argument " + a);
            }
        }
        if (jar == null || out == null) {
            throw new IllegalArgumentException("usage: PlanIds --jar JOB.jar --out FILE [--class MAIN] "
                    + "[--parallelism N] [-- ARGS...]");
        }
        Configuration conf = new Configuration();
        PackagedProgram.Builder builder = PackagedProgram.newBuilder()
                .setJarFile(jar)
                .setArguments(jobArgs.toArray(new String[0]))
                .setConfiguration(conf);
        if (entry != null) {
            builder.setEntryPointClassName(entry);
        }
        PackagedProgram program = builder.build();
        try {
            return plan(program, conf, parallelism, out);
        } finally {
            // the job's class loader and the jars its jar nests (extracted to temp files) are released, so the
            // next job of a batch starts clean and nothing is left behind in the temp directory
            try {
                callIfExists(program, "close");
            } catch (Exception e) {
                // closing is tidying up only: the document is written or the failure already on its way
            }
        }
    }

    private static int plan(PackagedProgram program, Configuration conf, int parallelism, File out)
            throws Exception {
        Pipeline pipeline;
        try {
            pipeline = PackagedProgramUtils.getPipelineFromProgram(program, conf, parallelism > 0 ? parallelism : 1,
                    true);
        } catch (Exception e) {
            throw new JobFailure("the job's main failed: " + oneLine(jobCause(e)));
        }
        if (!(pipeline instanceof StreamGraph)) {
            throw new JobFailure("the job built a " + pipeline.getClass().getSimpleName()
                    + ", not a streaming job (DataSet jobs have no operator state)");
        }
        StreamGraph sg = (StreamGraph) pipeline;
        ClassLoader previous = Thread.currentThread().getContextClassLoader();
        Thread.currentThread().setContextClassLoader(program.getUserCodeClassLoader());
        Map<String, Object> doc;
        try {
            Map<Integer, String> hashes = hashes(sg);
            JobGraph jg = jobGraph(sg, program.getUserCodeClassLoader());
            doc = document(sg, hashes, jg);
        } finally {
            Thread.currentThread().setContextClassLoader(previous);
        }
        doc.put("entry_class", call(program, "getMainClassName"));
        File tmp = new File(out.getPath() + ".partial");
        try (Writer w = new OutputStreamWriter(new FileOutputStream(tmp), StandardCharsets.UTF_8)) {
            w.write(json(doc));
            w.write("\n");
        }
        if (!tmp.renameTo(out)) {
            throw new IllegalStateException("cannot rename " + tmp + " to " + out);
        }
        return 0;
    }

    /** The exception the job's own code threw: below Flink's ProgramInvocationException wrappers. */
    private static Throwable jobCause(Throwable t) {
        Throwable c = t;
        while (c.getCause() != null && c.getCause() != c
                && (c.getClass().getName().startsWith("org.apache.flink.client.program.")
                        || c instanceof InvocationTargetException)) {
            c = c.getCause();
        }
        return c;
    }

    private static Throwable rootCause(Throwable t) {
        Throwable c = t;
        while (c.getCause() != null && c.getCause() != c) {
            c = c.getCause();
        }
        return c;
    }

    private static String oneLine(Throwable t) {
        String m = t.getMessage();
        String first = m == null ? "" : m.trim().split("\n", 2)[0];
        return t.getClass().getName() + (first.isEmpty() ? "" : ": " + first);
    }

    /** 1.x: StreamGraph#getJobGraph(); 2.x: getJobGraph(ClassLoader). */
    private static JobGraph jobGraph(StreamGraph sg, ClassLoader loader) throws Exception {
        try {
            Method m = StreamGraph.class.getMethod("getJobGraph", ClassLoader.class);
            return (JobGraph) m.invoke(sg, loader);
        } catch (NoSuchMethodException e) {
            return (JobGraph) StreamGraph.class.getMethod("getJobGraph").invoke(sg);
        }
    }

    /** stream node id -> operator id (32 hex) as Flink's default hasher computes it. */
    @SuppressWarnings("unchecked")
    private static Map<Integer, String> hashes(StreamGraph sg) throws Exception {
        Object hasher = Class.forName("org.apache.flink.streaming.api.graph.StreamGraphHasherV2")
                .getConstructor().newInstance();
        Method m = hasher.getClass().getMethod("traverseStreamGraphAndGenerateHashes", StreamGraph.class);
        Map<Integer, byte[]> raw = (Map<Integer, byte[]>) m.invoke(hasher, sg);
        Map<Integer, String> out = new TreeMap<>();
        for (Map.Entry<Integer, byte[]> e : raw.entrySet()) {
            out.put(e.getKey(), new OperatorID(e.getValue()).toString());
        }
        return out;
    }

    private static Map<String, Object> document(StreamGraph sg, Map<Integer, String> hashes, JobGraph jg)
            throws Exception {
        List<Object> vertices = new ArrayList<>();
        Map<String, String> operatorToVertex = new HashMap<>();
        Map<String, Integer> positionInVertex = new HashMap<>();
        for (JobVertex v : jg.getVerticesSortedTopologicallyFromSources()) {
            List<String> generated = new ArrayList<>();
            List<String> userDefined = new ArrayList<>();
            operatorIds(v, generated, userDefined);
            String vid = v.getID().toString();
            for (int i = 0; i < generated.size(); i++) {
                operatorToVertex.put(generated.get(i), vid);
                // Flink lists a vertex's operators tail first: the head is the last
                positionInVertex.put(generated.get(i), generated.size() - 1 - i);
            }
            Map<String, Object> vm = new LinkedHashMap<>();
            vm.put("id", vid);
            vm.put("name", v.getName());
            vm.put("parallelism", v.getParallelism());
            vm.put("max_parallelism", v.getMaxParallelism());
            vm.put("operator_ids", generated);
            vm.put("user_defined_operator_ids", userDefined);
            vertices.add(vm);
        }

        Map<Integer, Object> byId = new TreeMap<>();
        for (Object n : (Collection<?>) call(sg, "getStreamNodes")) {
            byId.put((Integer) call(n, "getId"), n);
        }
        List<Object> nodes = new ArrayList<>();
        List<Object> edges = new ArrayList<>();
        for (Map.Entry<Integer, Object> e : byId.entrySet()) {
            Object n = e.getValue();
            String op = hashes.get(e.getKey());
            if (op == null) {
                throw new IllegalStateException("Flink's hasher gave no id to stream node " + e.getKey());
            }
            Map<String, Object> nm = new LinkedHashMap<>();
            nm.put("id", e.getKey());
            nm.put("name", call(n, "getOperatorName"));
            nm.put("description", callIfExists(n, "getOperatorDescription"));
            nm.put("uid", call(n, "getTransformationUID"));
            nm.put("user_hash", callIfExists(n, "getUserHash"));
            nm.put("operator_id", op);
            nm.put("parallelism", call(n, "getParallelism"));
            int maxP = (Integer) call(n, "getMaxParallelism");
            nm.put("max_parallelism", maxP > 0 ? maxP : -1);
            nm.put("chaining_strategy", chainingStrategy(n));
            nm.put("slot_sharing_group", callIfExists(n, "getSlotSharingGroup"));
            nm.put("vertex_id", operatorToVertex.get(op));
            nm.put("chain_position", positionInVertex.get(op));
            nodes.add(nm);
        }
        // In an order Flink could have created them, so every node's in-edges (its input gates) and out-edges
        // (its result partitions) keep Flink's order in the document.
        for (Object edge : creationOrder(byId.values())) {
            Map<String, Object> em = new LinkedHashMap<>();
            em.put("source", call(edge, "getSourceId"));
            em.put("target", call(edge, "getTargetId"));
            em.put("partitioner", String.valueOf(call(edge, "getPartitioner")));
            em.put("type_number", call(edge, "getTypeNumber"));
            Object mode = callIfExists(edge, "getExchangeMode");
            em.put("exchange_mode", mode == null ? null : mode.toString());
            edges.add(em);
        }
        Map<String, Object> doc = new LinkedHashMap<>();
        doc.put("release", EnvironmentInformation.getVersion());
        doc.put("job_name", callIfExists(sg, "getJobName"));
        doc.put("chaining_enabled", call(sg, "isChainingEnabled"));
        Object config = callIfExists(sg, "getExecutionConfig");
        Object jobMax = config == null ? null : callIfExists(config, "getMaxParallelism");
        doc.put("max_parallelism", jobMax instanceof Integer && (Integer) jobMax > 0 ? jobMax : -1);
        doc.put("stream_nodes", nodes);
        doc.put("stream_edges", edges);
        doc.put("vertices", vertices);
        return doc;
    }

    /** 1.11+: a list of OperatorIDPair; 1.10: OperatorIDs plus getUserDefinedOperatorIDs(). */
    private static void operatorIds(JobVertex v, List<String> generated, List<String> userDefined) throws Exception {
        List<?> ids = (List<?>) call(v, "getOperatorIDs");
        List<?> legacyUser = null;
        for (int i = 0; i < ids.size(); i++) {
            Object id = ids.get(i);
            if (id instanceof OperatorID) {
                if (legacyUser == null) {
                    legacyUser = (List<?>) call(v, "getUserDefinedOperatorIDs");
                }
                generated.add(id.toString());
                Object u = legacyUser.get(i);
                userDefined.add(u == null ? null : u.toString());
            } else {
                generated.add(call(id, "getGeneratedOperatorID").toString());
                Object u = call(id, "getUserDefinedOperatorID");
                if (u instanceof Optional) {
                    u = ((Optional<?>) u).orElse(null);
                }
                userDefined.add(u == null ? null : u.toString());
            }
        }
    }

    private static Object chainingStrategy(Object node) throws Exception {
        Object factory = callIfExists(node, "getOperatorFactory");
        Object owner = factory != null ? factory : callIfExists(node, "getOperator");
        Object cs = owner == null ? null : callIfExists(owner, "getChainingStrategy");
        return cs == null ? null : cs.toString();
    }

    private static Object call(Object target, String name) throws Exception {
        Method m = findMethod(target.getClass(), name);
        if (m == null) {
            throw new NoSuchMethodException(target.getClass().getName() + "." + name + "()");
        }
        return m.invoke(target);
    }

    private static Object callIfExists(Object target, String name) throws Exception {
        Method m = findMethod(target.getClass(), name);
        return m == null ? null : m.invoke(target);
    }

    private static Method findMethod(Class<?> c, String name) {
        for (Class<?> k = c; k != null; k = k.getSuperclass()) {
            try {
                Method m = k.getDeclaredMethod(name);
                m.setAccessible(true);
                return m;
            } catch (NoSuchMethodException e) {
                // the superclass, then the interfaces
            }
        }
        try {
            Method m = c.getMethod(name);
            m.setAccessible(true);
            return m;
        } catch (NoSuchMethodException e) {
            return null;
        }
    }

    // ------------------------------------------------------------------------------------------ JSON writing

    private static String json(Object o) {
        StringBuilder sb = new StringBuilder();
        write(sb, o);
        return sb.toString();
    }

    private static void write(StringBuilder sb, Object o) {
        if (o == null) {
            sb.append("null");
        } else if (o instanceof Boolean || o instanceof Integer || o instanceof Long) {
            sb.append(o);
        } else if (o instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
                if (!first) {
                    sb.append(", ");
                }
                first = false;
                string(sb, String.valueOf(e.getKey()));
                sb.append(": ");
                write(sb, e.getValue());
            }
            sb.append('}');
        } else if (o instanceof Collection) {
            sb.append('[');
            boolean first = true;
            for (Object x : (Collection<?>) o) {
                if (!first) {
                    sb.append(", ");
                }
                first = false;
                write(sb, x);
            }
            sb.append(']');
        } else {
            string(sb, o.toString());
        }
    }

    private static void string(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        sb.append('"');
    }

    /**
     * The stream edges in an order Flink could have created them: every node's out-edges and its in-edges each in
     * Flink's own order (Flink appends a new edge to both lists at once, so such an order exists). Nodes are taken
     * by id; among the edges free to come next, the one of the lowest source node (then its out-edge index) first,
     * which is "by source node, then out-edge order" wherever the in-edge orders allow it. The in-edge order is what
     * the hash of a node with several inputs reads (a two-input operator fed by a lower-numbered node on its second
     * input).
     */
    private static List<Object> creationOrder(Collection<Object> nodes) throws Exception {
        Map<Object, Integer> rank = new IdentityHashMap<>();
        List<Object> all = new ArrayList<>();
        Map<Object, List<Object>> after = new IdentityHashMap<>();
        Map<Object, Integer> before = new IdentityHashMap<>();
        for (Object n : nodes) {
            for (Object e : (List<?>) call(n, "getOutEdges")) {
                rank.put(e, all.size());
                all.add(e);
                after.put(e, new ArrayList<>());
                before.put(e, 0);
            }
        }
        for (Object n : nodes) {
            for (String side : new String[] {"getOutEdges", "getInEdges"}) {
                List<?> list = (List<?>) call(n, side);
                for (int i = 1; i < list.size(); i++) {
                    if (!rank.containsKey(list.get(i - 1)) || !rank.containsKey(list.get(i))) {
                        throw new IllegalStateException("an in-edge is no node's out-edge: " + list);
                    }
                    after.get(list.get(i - 1)).add(list.get(i));
                    before.merge(list.get(i), 1, Integer::sum);
                }
            }
        }
        java.util.PriorityQueue<Object> free = new java.util.PriorityQueue<>(
                java.util.Comparator.comparingInt(rank::get));
        for (Object e : all) {
            if (before.get(e) == 0) {
                free.add(e);
            }
        }
        List<Object> out = new ArrayList<>();
        while (!free.isEmpty()) {
            Object e = free.poll();
            out.add(e);
            for (Object next : after.get(e)) {
                if (before.merge(next, -1, Integer::sum) == 0) {
                    free.add(next);
                }
            }
        }
        if (out.size() != all.size()) {
            throw new IllegalStateException("no edge order agrees with every node's in- and out-edge order");
        }
        return out;
    }
}
