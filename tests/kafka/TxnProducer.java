// Kafka's Java producer with a transactional.id, run by the kafka-txn suite
// as a single-file program (java -cp KAFKA_LIBS/* TxnProducer.java
// BOOTSTRAP TOPIC TXN_ID): commits c1, aborts a1 (delivered first), leaves
// o1 open, starts a second instance with the same id (which must fence the
// first and end o1), tries to commit the first, then commits c2 with the
// second. Each record's value names its transaction ("c1-0"...); each
// step prints one line the suite reads.
import java.time.Duration;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnProducer {
	static KafkaProducer<String, String> open(String bootstrap, String id) {
		Properties p = new Properties();
		p.put("bootstrap.servers", bootstrap);
		p.put("transactional.id", id);
		p.put("key.serializer", StringSerializer.class.getName());
		p.put("value.serializer", StringSerializer.class.getName());
		p.put("max.block.ms", "60000");
		p.put("delivery.timeout.ms", "60000");
		p.put("request.timeout.ms", "20000");
		KafkaProducer<String, String> k = new KafkaProducer<>(p);
		k.initTransactions();
		return k;
	}

	static void send(KafkaProducer<String, String> k, String topic, String txn,
			 int n) {
		for (int i = 0; i < n; i++)
			k.send(new ProducerRecord<>(topic, 0, null, txn + "-" + i));
		k.flush();
	}

	public static void main(String[] a) {
		String bootstrap = a[0], topic = a[1], id = a[2];
		KafkaProducer<String, String> p = open(bootstrap, id);
		p.beginTransaction();
		send(p, topic, "c1", 5);
		p.commitTransaction();
		System.out.println("COMMITTED c1");
		p.beginTransaction();
		send(p, topic, "a1", 5);
		p.abortTransaction();
		System.out.println("ABORTED a1");
		p.beginTransaction();
		send(p, topic, "o1", 3);
		KafkaProducer<String, String> q = open(bootstrap, id);
		System.out.println("SECOND INSTANCE READY");
		try {
			p.commitTransaction();
			System.out.println("OLD INSTANCE COMMITTED");
		} catch (ProducerFencedException e) {
			System.out.println("OLD INSTANCE FENCED");
		} catch (RuntimeException e) {
			System.out.println("OLD INSTANCE FAILED " + e);
		}
		q.beginTransaction();
		send(q, topic, "c2", 5);
		q.commitTransaction();
		System.out.println("COMMITTED c2");
		p.close(Duration.ofSeconds(5));
		q.close(Duration.ofSeconds(5));
	}
}
