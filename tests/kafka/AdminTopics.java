// Kafka's Java Admin client doing topic calls, run by the kafka-admin suite
// as a single-file program (java -cp KAFKA_LIBS/* AdminTopics.java
// BOOTSTRAP STEP...), against kmirrord and against a real Kafka broker so
// that the suite can compare their answers. Each STEP prints one line:
//   create:T:P:RF[:k=v,...]  CreateTopics; the answer's partitions, rf and
//                            the configs it names as the topic's own
//   validate:T:P             CreateTopics with validateOnly, then listTopics
//   parts:T:N                CreatePartitions to N
//   delrec:T:P:OFF           DeleteRecords below OFF (-1: the HW)
//   delete:T                 DeleteTopics
//   describe:T               partitions (describeTopics) and the topic's own
//                            configs (DescribeConfigs, DYNAMIC_TOPIC_CONFIG)
//   list:T                   is T in listTopics
//   earliest:T:P / latest:T:P  ListOffsets
// An error prints "STEP ERR ExceptionClass: message".
import java.util.*;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

public class AdminTopics {
	static String err(Exception e) {
		Throwable t = e instanceof ExecutionException ? e.getCause() : e;
		return "ERR " + t.getClass().getSimpleName() + ": " + t.getMessage();
	}

	static String own(Config c) {
		List<String> kv = new ArrayList<>();
		for (ConfigEntry e : c.entries())
			if (e.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG)
				kv.add(e.name() + "=" + e.value());
		Collections.sort(kv);
		return String.join(",", kv);
	}

	static Map<String, String> configs(String[] f, int at) {
		Map<String, String> m = new TreeMap<>();
		if (f.length > at)
			for (String kv : f[at].split(","))
				m.put(kv.substring(0, kv.indexOf('=')),
				      kv.substring(kv.indexOf('=') + 1));
		return m;
	}

	static String create(Admin a, String[] f) throws Exception {
		NewTopic t = new NewTopic(f[1], Optional.of(Integer.parseInt(f[2])),
					  Optional.of(Short.parseShort(f[3])));
		t.configs(configs(f, 4));
		CreateTopicsResult r = a.createTopics(List.of(t));
		r.all().get();
		return "OK partitions=" + r.numPartitions(f[1]).get() + " rf=" +
			r.replicationFactor(f[1]).get() + " configs=" +
			own(r.config(f[1]).get());
	}

	static String validate(Admin a, String[] f) throws Exception {
		NewTopic t = new NewTopic(f[1], Integer.parseInt(f[2]), (short) 1);
		CreateTopicsResult r = a.createTopics(
			List.of(t), new CreateTopicsOptions().validateOnly(true));
		r.all().get();
		return "OK partitions=" + r.numPartitions(f[1]).get() + " listed=" +
			a.listTopics().names().get().contains(f[1]);
	}

	static String delrec(Admin a, String[] f) throws Exception {
		TopicPartition tp = new TopicPartition(f[1], Integer.parseInt(f[2]));
		long off = Long.parseLong(f[3]);
		RecordsToDelete d = RecordsToDelete.beforeOffset(off);
		DeletedRecords r = a.deleteRecords(Map.of(tp, d)).lowWatermarks()
					.get(tp).get();
		return "OK low=" + r.lowWatermark();
	}

	static String describe(Admin a, String[] f) throws Exception {
		TopicDescription d = a.describeTopics(List.of(f[1]))
					 .allTopicNames().get().get(f[1]);
		ConfigResource cr = new ConfigResource(ConfigResource.Type.TOPIC, f[1]);
		Config c = a.describeConfigs(List.of(cr)).all().get().get(cr);
		return "OK partitions=" + d.partitions().size() + " configs=" + own(c);
	}

	static String offsets(Admin a, String[] f, OffsetSpec spec)
		throws Exception {
		TopicPartition tp = new TopicPartition(f[1], Integer.parseInt(f[2]));
		return "OK " + a.listOffsets(Map.of(tp, spec)).partitionResult(tp)
				 .get().offset();
	}

	static String step(Admin a, String s) throws Exception {
		String[] f = s.split(":");
		switch (f[0]) {
		case "create": return create(a, f);
		case "validate": return validate(a, f);
		case "parts":
			a.createPartitions(Map.of(f[1], NewPartitions.increaseTo(
				Integer.parseInt(f[2])))).all().get();
			return "OK";
		case "delrec": return delrec(a, f);
		case "delete":
			a.deleteTopics(List.of(f[1])).all().get();
			return "OK";
		case "describe": return describe(a, f);
		case "list":
			return "OK " + a.listTopics().names().get().contains(f[1]);
		case "earliest": return offsets(a, f, OffsetSpec.earliest());
		case "latest": return offsets(a, f, OffsetSpec.latest());
		default: throw new IllegalArgumentException(s);
		}
	}

	public static void main(String[] args) throws Exception {
		Properties p = new Properties();
		p.put("bootstrap.servers", args[0]);
		p.put("request.timeout.ms", "20000");
		p.put("default.api.timeout.ms", "40000");
		try (Admin a = Admin.create(p)) {
			for (int i = 1; i < args.length; i++) {
				String out;
				try {
					out = step(a, args[i]);
				} catch (Exception e) {
					out = err(e);
				}
				System.out.println(args[i] + " " + out);
			}
		}
	}
}
