package spillway.fatjob;

import org.apache.commons.lang3.StringUtils;
import org.apache.flink.api.common.serialization.SimpleStringEncoder;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.java.utils.ParameterTool;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.file.sink.FileSink;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

/**
 * A production-shaped job packaged as a fat jar: the file connector (FileSink) and commons-lang3 are bundled
 * inside the jar, and main reads its arguments ({@code --parallelism N --out DIR}) with ParameterTool, as jobs
 * submitted with {@code flink run} do. The uids are ones the fixture jobs use, so Flink's ids for them are in the
 * fixtures' ids.json.
 */
public final class WordStats {
    private WordStats() {}

    public static void main(String[] args) throws Exception {
        ParameterTool params = ParameterTool.fromArgs(args);
        if (params.has("exit")) {
            System.exit(params.getInt("exit")); // a main that ends the JVM before building its job
        }
        if (params.has("wait-forever")) {
            Thread.sleep(Long.MAX_VALUE); // a main that waits for something before building its job
        }
        int parallelism = params.getInt("parallelism");
        String out = params.getRequired("out");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(parallelism);
        env.fromSequence(0, 1000).uid("events-src").name("Source: events")
                .map(n -> StringUtils.leftPad(Long.toString(n % 64), 4, '0')).uid("parse-events").name("parse")
                .keyBy(s -> s)
                .process(new Count()).uid("slow").name("slow-count")
                .sinkTo(FileSink.forRowFormat(new Path(out), new SimpleStringEncoder<String>()).build())
                .uid("discard-sink").name("files");
        env.execute("word-stats");
    }

    /** Counts per key in keyed state. */
    static final class Count extends KeyedProcessFunction<String, String, String> {
        private transient ValueState<Long> count;

        @Override
        public void open(Configuration parameters) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Long.class));
        }

        @Override
        public void processElement(String value, Context ctx, Collector<String> collector) throws Exception {
            Long c = count.value();
            long next = c == null ? 1 : c + 1;
            count.update(next);
            collector.collect(value + "=" + next);
        }
    }
}
