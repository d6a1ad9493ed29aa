// A Kafka Streams application with exactly_once_v2, run by the
// kafka-streams suite as a single-file program (java -cp KAFKA_LIBS/*
// StreamsSum.java MODE ...). Two modes:
//
//   produce BOOTSTRAP TOPIC FROM COUNT
//     records FROM..FROM+COUNT-1 to TOPIC with an idempotent producer
//     (acks=all): key "r<i>", value "k<i%5>:<i%7+1>" - a group key and an
//     amount. Prints "PRODUCED n" once every send was acknowledged.
//   run BOOTSTRAP APPLICATION_ID STATE_DIR DELAY_MS HOLD_AT
//     reads `in`, re-keys each record by its group key (groupBy: the
//     repartition topic APPLICATION_ID-bykey-repartition), sums the amounts
//     per key in the state store "sums" (changelog
//     APPLICATION_ID-sums-changelog) and writes every update to `out`
//     (key, running sum as text). The record cache is off, so each input
//     record gives exactly one output record. DELAY_MS slows each update
//     of the store down, so that many transactions (commit.interval.ms
//     100) have committed sums when the suite kills the application. Once
//     it has written its HOLD_AT-th update (0: never) the stream thread
//     stops for good, its transaction open: "HOLDING n". Prints "STATE s"
//     on each state change and "SUMMED n" every 25 updates of the store.
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

public class StreamsSum {
	static void produce(String bootstrap, String topic, int from, int count)
			throws Exception {
		Properties p = new Properties();
		p.put("bootstrap.servers", bootstrap);
		p.put("acks", "all");
		p.put("enable.idempotence", "true");
		p.put("key.serializer", StringSerializer.class.getName());
		p.put("value.serializer", StringSerializer.class.getName());
		p.put("max.block.ms", "60000");
		p.put("delivery.timeout.ms", "60000");
		try (KafkaProducer<String, String> k = new KafkaProducer<>(p)) {
			for (int i = from; i < from + count; i++)
				k.send(new ProducerRecord<>(topic, "r" + i,
						"k" + (i % 5) + ":" + (i % 7 + 1))).get();
		}
		System.out.println("PRODUCED " + count);
	}

	static void say(String line) {
		System.out.println(line);
		System.out.flush();
	}

	static void pause(long ms) {
		try {
			Thread.sleep(ms);
		} catch (InterruptedException e) {
			Thread.currentThread().interrupt();
		}
	}

	static void run(String bootstrap, String appId, String stateDir, long delay,
			long holdAt) {
		Properties p = new Properties();
		p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
		p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
		p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
		p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
		p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
		p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
		p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
		p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
		p.put(StreamsConfig.producerPrefix("linger.ms"), 0);
		// Purged repartition records (DeleteRecords up to the committed
		// offset) every half second rather than every 30 s.
		p.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 500);
		// The transaction the kill leaves open stays open on the source
		// through the failover instead of being aborted there.
		p.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), 60000);
		p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10000);
		p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);

		AtomicLong seen = new AtomicLong(), written = new AtomicLong();
		StreamsBuilder b = new StreamsBuilder();
		KStream<String, String> sums = b.stream("in", Consumed.with(Serdes.String(), Serdes.String()))
			.groupBy((k, v) -> v.substring(0, v.indexOf(':')),
				 Grouped.with("bykey", Serdes.String(), Serdes.String()))
			.aggregate(() -> 0L,
				   (k, v, sum) -> {
					   pause(delay);
					   long n = seen.incrementAndGet();
					   if (n % 25 == 0)
						   say("SUMMED " + n);
					   return sum + Long.parseLong(v.substring(v.indexOf(':') + 1));
				   },
				   Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("sums")
					   .withKeySerde(Serdes.String())
					   .withValueSerde(Serdes.Long()))
			.toStream()
			.mapValues(sum -> Long.toString(sum));
		sums.to("out", Produced.with(Serdes.String(), Serdes.String()));
		// A child after the sink: the update's changelog and `out` records
		// were handed to the producer in the open transaction, which no
		// commit can end while this thread holds.
		sums.foreach((k, v) -> {
			if (written.incrementAndGet() != holdAt)
				return;
			say("HOLDING " + holdAt);
			for (;;)
				pause(1000);
		});

		KafkaStreams s = new KafkaStreams(b.build(), p);
		s.setStateListener((now, before) -> say("STATE " + now));
		s.setUncaughtExceptionHandler(e -> {
			e.printStackTrace();
			say("FAILED " + e);
			return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
		});
		Runtime.getRuntime().addShutdownHook(new Thread(() -> s.close(Duration.ofSeconds(20))));
		s.start();
	}

	public static void main(String[] a) throws Exception {
		if (a[0].equals("produce"))
			produce(a[1], a[2], Integer.parseInt(a[3]), Integer.parseInt(a[4]));
		else
			run(a[1], a[2], a[3], Long.parseLong(a[4]), Long.parseLong(a[5]));
	}
}
