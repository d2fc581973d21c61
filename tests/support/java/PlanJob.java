package spillway.fixtures;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

import java.io.File;
import java.nio.file.Files;
import java.util.Arrays;

/**
 * A fixture scenario as an ordinary job's main: the environment is whatever Flink provides
 * ({@code getExecutionEnvironment()}), so under {@code flink info} or spillway's plan-only run the job is only
 * planned. Same scenario code and settings as {@code FixtureJob.run}, so the operator ids must be the fixture's.
 *
 * <p>{@code PlanJob --scenario NAME [--parallelism N] [--max-parallelism N]}
 */
public final class PlanJob {
    private PlanJob() {}

    public static void main(String[] args) throws Exception {
        String scenarioName = null;
        Integer parallelism = null;
        Integer maxParallelism = null;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--scenario": scenarioName = args[++i]; break;
                case "--parallelism": parallelism = Integer.parseInt(args[++i]); break;
                case "--max-parallelism": maxParallelism = Integer.parseInt(args[++i]); break;
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        FixtureJob.Scenario sc = FixtureJob.SCENARIOS.get(scenarioName);
        if (sc == null) {
            throw new IllegalArgumentException("no scenario " + scenarioName);
        }
        int p = parallelism == null ? sc.parallelism : parallelism;
        FixtureJob.release = Arrays.stream(EnvironmentInformation.getVersion().split("[.-]")).limit(2)
                .mapToInt(Integer::parseInt).toArray();
        File root = Files.createTempDirectory("spillway-planjob").toFile();
        FixtureJob.Ctx c = new FixtureJob.Ctx(root, p);
        c.set("interval", "500ms");
        c.set("unaligned", "true");
        c.set("aligned-timeout", "0s");
        c.set("backend", "hashmap");
        sc.settings(c);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.configure(Configuration.fromMap(c.settings), PlanJob.class.getClassLoader());
        env.setParallelism(p);
        if (maxParallelism != null) {
            env.setMaxParallelism(maxParallelism);
        }
        sc.build(env, c);
        env.execute("spillway-" + sc.name);
    }
}
