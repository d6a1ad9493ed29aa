// A transactional consume-transform-produce loop with Kafka's Java clients,
// run by the kafka-txn-offsets suite as a single-file program:
//   java -cp KAFKA_LIBS/* TxnTransform.java BOOTSTRAP IN OUT GROUP TXN_ID MODE N
// A read_committed consumer of group GROUP on IN (partition 0, subscribed:
// the group's member id and generation go with the offsets), a producer
// with transactional.id TXN_ID writing transform(value) = "out(" + value +
// ")" with the same key to OUT partition 0, and per polled batch one
// transaction: the records, then sendOffsetsToTransaction(offsets,
// consumer.groupMetadata()), then commitTransaction.
// MODE "hang": once at least N input records are committed, one more
// transaction is begun, its records delivered, "OPEN <offset>" printed and
// the program waits to be killed. MODE "all": runs until the committed
// position reaches offset N, prints "DONE <position>" and exits.
// Every commit prints "COMMITTED <position>".
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnTransform {
	static KafkaConsumer<String, String> consumer(String bootstrap, String group) {
		Properties p = new Properties();
		p.put("bootstrap.servers", bootstrap);
		p.put("group.id", group);
		p.put("isolation.level", "read_committed");
		p.put("enable.auto.commit", "false");
		p.put("auto.offset.reset", "earliest");
		p.put("max.poll.records", "100");
		p.put("session.timeout.ms", "10000");
		p.put("key.deserializer", StringDeserializer.class.getName());
		p.put("value.deserializer", StringDeserializer.class.getName());
		return new KafkaConsumer<>(p);
	}

	static KafkaProducer<String, String> producer(String bootstrap, String id) {
		Properties p = new Properties();
		p.put("bootstrap.servers", bootstrap);
		p.put("transactional.id", id);
		p.put("transaction.timeout.ms", "60000");
		p.put("max.block.ms", "60000");
		p.put("delivery.timeout.ms", "60000");
		p.put("request.timeout.ms", "20000");
		p.put("key.serializer", StringSerializer.class.getName());
		p.put("value.serializer", StringSerializer.class.getName());
		KafkaProducer<String, String> k = new KafkaProducer<>(p);
		k.initTransactions();
		return k;
	}

	// The records of one poll to out, and where the group goes next.
	static Map<TopicPartition, OffsetAndMetadata> transform(
			KafkaProducer<String, String> p, String out,
			ConsumerRecords<String, String> recs) {
		Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
		for (ConsumerRecord<String, String> r : recs) {
			p.send(new ProducerRecord<>(out, 0, r.key(),
						    "out(" + r.value() + ")"));
			next.put(new TopicPartition(r.topic(), r.partition()),
				 new OffsetAndMetadata(r.offset() + 1));
		}
		return next;
	}

	// The source launcher cannot print an exception thrown from a client's
	// own thread (its trace is shorter than the launcher's frames).
	public static void main(String[] a) {
		try {
			run(a);
		} catch (Throwable e) {
			System.out.println("FAILED " + e);
			e.printStackTrace(System.out);
			System.exit(1);
		}
	}

	static void run(String[] a) throws Exception {
		String bootstrap = a[0], in = a[1], out = a[2], group = a[3], id = a[4];
		String mode = a[5];
		long n = Long.parseLong(a[6]);
		TopicPartition tp = new TopicPartition(in, 0);
		KafkaProducer<String, String> p = producer(bootstrap, id);
		KafkaConsumer<String, String> c = consumer(bootstrap, group);
		c.subscribe(Collections.singletonList(in));
		long committed = -1;
		while (true) {
			ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(500));
			if (recs.isEmpty()) {
				if (mode.equals("all") && committed >= n)
					break;
				continue;
			}
			p.beginTransaction();
			Map<TopicPartition, OffsetAndMetadata> next = transform(p, out, recs);
			if (mode.equals("hang") && committed >= n) {
				p.flush();
				System.out.println("OPEN " + next.get(tp).offset());
				System.out.flush();
				Thread.sleep(Long.MAX_VALUE);
			}
			p.sendOffsetsToTransaction(next, c.groupMetadata());
			p.commitTransaction();
			committed = next.get(tp).offset();
			System.out.println("COMMITTED " + committed);
			System.out.flush();
		}
		System.out.println("DONE " + committed);
		c.close(Duration.ofSeconds(5));
		p.close(Duration.ofSeconds(5));
	}
}
