/* bench-consume-rate: how fast a librdkafka consumer reads one partition —
 * the ceiling of a consume-and-reproduce mirror (MirrorMaker and the
 * like), which must at least do this before it reproduces anything.
 *
 *   bench-consume-rate BOOTSTRAP TOPIC PARTITION END_OFFSET LOG_BYTES
 *
 * Reads [0, END_OFFSET) with a consumer tuned for throughput (large
 * fetches, CRC checks off, no group) and prints
 * `consume bytes=B seconds=S gbps=G cpu_s_per_gb=C`, where B = LOG_BYTES
 * (the partition's size on disk, so that the figure compares with a
 * byte-for-byte mirror of the same data) and CPU is the whole process's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double proc_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static rd_kafka_t *consumer(const char *bootstrap)
{
	static const char *const props[][2] = {
		{ "group.id", "bench-consume-rate" },
		{ "enable.auto.commit", "false" },
		{ "check.crcs", "false" },
		{ "fetch.max.bytes", "104857600" },
		{ "max.partition.fetch.bytes", "104857600" },
		{ "fetch.wait.max.ms", "10" },
		{ "queued.max.messages.kbytes", "1048576" },
	};
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char err[256];

	rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, err, sizeof(err));
	for (size_t i = 0; i < sizeof(props) / sizeof(props[0]); i++)
		rd_kafka_conf_set(conf, props[i][0], props[i][1], err,
				  sizeof(err));
	return rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
}

int main(int argc, char **argv)
{
	rd_kafka_topic_partition_list_t *tp;
	rd_kafka_t *rk;
	long long end, bytes, n = 0;
	double t0, c0, secs;

	if (argc != 6) {
		fprintf(stderr, "usage: bench-consume-rate BOOTSTRAP TOPIC "
				"PARTITION END_OFFSET LOG_BYTES\n");
		return 2;
	}
	end = atoll(argv[4]);
	bytes = atoll(argv[5]);
	if ((rk = consumer(argv[1])) == NULL)
		return 1;
	tp = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(tp, argv[2], atoi(argv[3]))->offset = 0;
	t0 = now_s();
	c0 = proc_cpu_s();
	rd_kafka_assign(rk, tp);
	while (n < end && now_s() - t0 < 600) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 1000);

		if (m == NULL)
			continue;
		if (m->err == 0 && m->offset + 1 > n)
			n = m->offset + 1;
		rd_kafka_message_destroy(m);
	}
	secs = now_s() - t0;
	printf("consume bytes=%lld seconds=%.3f gbps=%.3f cpu_s_per_gb=%.3f\n",
	       bytes, secs, (double)bytes / secs / 1e9,
	       (proc_cpu_s() - c0) / ((double)bytes / 1e9));
	rd_kafka_topic_partition_list_destroy(tp);
	rd_kafka_destroy(rk);
	return n >= end ? 0 : 1;
}
