// A Kafka Streams application with exactly_once_v2 for tests/kafka/test_streams_connect.py: copies every record
// of the input topic to the copied topic and keeps a count per key (a state store with its changelog) written
// to the counts topic. It runs until killed or for at most <lifetime s>, then closes.
// Arguments: bootstrap application.id input copied counts state.dir lifetime_s
import java.time.Duration;
import java.util.Properties;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.KStream;

public class EosCount {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> input = builder.stream(args[2]);
        input.to(args[3]);
        input.groupByKey().count().toStream().mapValues(count -> Long.toString(count)).to(args[4]);
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) -> System.out.println("STATE " + now));
        streams.start();
        Thread.sleep(Long.parseLong(args[6]) * 1000L);
        streams.close(Duration.ofSeconds(30));
        System.out.println("CLOSED");
    }
}
