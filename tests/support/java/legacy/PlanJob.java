package spillway.fixtures;

import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * The legacy tree's (Flink 1.10 ... 1.13) fixture scenarios as an ordinary job's main: the same scenario code
 * ({@code FixtureJob.buildProd} / {@code buildMain}) on whatever environment Flink provides, then execute().
 *
 * <p>{@code PlanJob --scenario NAME [--parallelism N]}
 */
public final class PlanJob {
    private PlanJob() {}

    public static void main(String[] args) throws Exception {
        String scenarioName = null;
        int parallelism = 2;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--scenario")) {
                scenarioName = args[++i];
            } else if (args[i].equals("--parallelism")) {
                parallelism = Integer.parseInt(args[++i]);
            } else {
                throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        FixtureJob.Scenario sc = FixtureJob.SCENARIOS.get(scenarioName);
        if (sc == null) {
            throw new IllegalArgumentException("no scenario " + scenarioName);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(parallelism);
        Set<String> uids = new HashSet<>();
        Map<String, String> settings = new TreeMap<>();
        if (sc.prod) {
            FixtureJob.buildProd(env, sc, parallelism, uids, settings);
        } else {
            FixtureJob.buildMain(env, sc, uids, settings);
        }
        env.execute("spillway-" + sc.name);
    }
}
