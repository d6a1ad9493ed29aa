/* bench kafka: kmirrord against what a user would pick instead, on the same
 * real Apache Kafka topic, side by side in one run (issue 14, section 4):
 *   kmirrord         mirrors the topic onto the disk, then onto tmpfs (to
 *                    tell the disk's share from the software's);
 *   MirrorMaker 2    connect-mirror's dedicated driver
 *                    (org.apache.kafka.connect.mirror.MirrorMaker), one
 *                    task, from that broker into a second broker;
 *   consumer-perf    kafka-consumer-perf-test (ConsumerPerformance) reading
 *                    the topic: the floor of any consume-and-reproduce
 *                    mirror, which must at least read it.
 *
 * Method. Two KRaft brokers (tests/kafka's harness), source S and
 * destination D, every JVM run with Kafka's scripts' flags (G1, C2). For
 * each workload, a one-partition topic on S is filled with
 * kafka-producer-perf-test (uncompressed, 512 KiB batches); its end offset
 * comes from S (ListOffsets) and its size from S's segment files, which is
 * the "bytes moved" of every contender. Then, one after the other:
 *   - consumer-perf: --messages END; done = the tool's own exit. CPU is
 *     getrusage(RUSAGE_CHILDREN) across its wait. A run with --messages 1
 *     gives its fixed cost (JVM start, group join), subtracted for the
 *     streaming figures; its streaming time is its own fetch.time.ms.
 *   - kmirrord (flush.ms=20, kernel networking): done = its status says
 *     hw (durable offset) = END; "first" = the first status with leo > 0.
 *     CPU = kmirrord's utime+stime (+ reaped children: none) in /proc.
 *   - MM2: done = D's high watermark of src.TOPIC (ListOffsets from a
 *     librdkafka client, polled) = END, checked again at the end with
 *     kafka-get-offsets; "first" = the first poll with a record there. CPU
 *     = the MM2 JVM in /proc, and separately D's CPU over the same span
 *     (D idles otherwise, so that is the cost of taking MM2's writes).
 * S's CPU over each contender's span is printed too: it serves them all.
 * Throughput is log bytes over wall time; "total" runs from the spawn,
 * "stream" from the first record. No sleep stands for a condition: every
 * wait polls one with a deadline.
 *
 * usage: bench-kafka [MIB]   MiB per workload (default 512, or
 *   $KM_BENCH_KAFKA_MIB); $KM_BENCH_KAFKA_SIZES = record sizes (default
 *   "1024,65536"); $KM_BENCH_KAFKA_TMPFS=0 leaves the tmpfs pass out;
 *   $KM_BENCH_KAFKA_MM2_LOG=DIR keeps MM2's logs in DIR.
 *   Needs Kafka's jars in $KM_KAFKA_LIBS (./kmirror setup, or
 *   KMIRROR_KAFKA_HOME): without them it fails and says so. */
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <librdkafka/rdkafka.h>

#include "tests/e2e/daemon.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/support/kafka_peers.h"
#include "bench/proc_cpu.h"

using namespace kmtest;

namespace {

/* What bin/kafka-run-class.sh gives every Kafka JVM. */
const char *const kKafkaJvm =
	"-XX:+UseG1GC -XX:MaxGCPauseMillis=20 "
	"-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent";

const int kWaitMs = 900000; /* per contender and workload: a deadline */
const int kFirstMs = 180000; /* until a contender's first record */

double now_s()
{
	return (double)now_ms() / 1000.0;
}


double children_cpu_s()
{
	struct rusage ru;

	getrusage(RUSAGE_CHILDREN, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* The size of a partition: its .log files (Kafka's and kmirror's names). */
int64_t log_bytes(const std::string &dir)
{
	DIR *d = opendir(dir.c_str());
	struct dirent *e;
	struct stat st;
	int64_t sum = 0;

	while (d && (e = readdir(d)) != nullptr) {
		std::string n = e->d_name;
		if (n.size() > 4 && n.compare(n.size() - 4, 4, ".log") == 0 &&
		    stat((dir + "/" + n).c_str(), &st) == 0)
			sum += st.st_size;
	}
	if (d)
		closedir(d);
	return sum;
}

int64_t env_int(const char *name, int64_t def)
{
	const char *v = getenv(name);

	return v && *v ? atoll(v) : def;
}

/* One contender's run on one workload. "stream" figures start at its
 * first record; src_cpu_s is the source broker's CPU over the run. */
struct Result {
	std::string name;
	double wall_s = 0, stream_s = 0, cpu_s = 0, stream_cpu_s = 0;
	double src_cpu_s = 0;
	bool estimated = false; /* stream CPU by subtraction */
};

struct Workload {
	std::string topic;
	int size = 0;
	int64_t records = 0, end = 0, bytes = 0;
};

/* The high watermark of partition 0 of topic through a client kept open
 * (a poll every 20 ms must not start a JVM or a connection); -1 until the
 * topic exists. A failed query asks for the topic's metadata: librdkafka
 * may otherwise keep it as unknown for its metadata max age (5 min),
 * long after MM2 has made it. */
class Watermark {
public:
	explicit Watermark(const std::string &bootstrap)
	{
		std::string err;
		rk_ = client_new(RD_KAFKA_PRODUCER,
				 { { "bootstrap.servers", bootstrap },
				   { "allow.auto.create.topics", "false" } },
				 &err);
	}
	~Watermark()
	{
		if (rk_)
			rd_kafka_destroy(rk_);
	}
	int64_t high(const std::string &topic)
	{
		int64_t lo = -1, hi = -1;
		const struct rd_kafka_metadata *md = nullptr;
		if (rk_ == nullptr)
			return -1;
		if (rd_kafka_query_watermark_offsets(rk_, topic.c_str(), 0, &lo,
						     &hi, 2000) == 0)
			return hi;
		rd_kafka_topic_t *t = rd_kafka_topic_new(rk_, topic.c_str(), nullptr);
		if (t && rd_kafka_metadata(rk_, 0, t, &md, 2000) == 0)
			rd_kafka_metadata_destroy(md);
		if (t)
			rd_kafka_topic_destroy(t);
		return -1;
	}

private:
	rd_kafka_t *rk_ = nullptr;
};

std::string fill(KafkaBroker &src, Watermark &swm, Workload *w)
{
	std::string why = src.create_topic(w->topic, 1);

	if (!why.empty())
		return why;
	printf("filling %s on S: %lld records of %d B (kafka-producer-perf-test)\n",
	       w->topic.c_str(), (long long)w->records, w->size);
	fflush(stdout);
	why = src.producer_perf(w->topic, w->records, w->size,
				{ "acks=1", "batch.size=524288", "linger.ms=20",
				  "compression.type=none" });
	if (!why.empty())
		return why;
	w->end = swm.high(w->topic);
	w->bytes = log_bytes(src.partition_dir(w->topic, 0));
	if (w->end != w->records)
		return "S's end offset of " + w->topic + " is " +
		       std::to_string(w->end) + ", not the " +
		       std::to_string(w->records) + " records sent";
	printf("source %s: end offset %lld, %lld bytes of log\n", w->topic.c_str(),
	       (long long)w->end, (long long)w->bytes);
	return "";
}

/* ConsumerPerformance's one line of figures (after its header line):
 * column 4 is records consumed, column 7 fetch.time.ms. */
std::string perf_line(const ChildResult &r, int64_t *msgs, double *fetch_ms)
{
	std::istringstream in(r.out);
	std::string line, last;

	while (std::getline(in, line))
		if (!line.empty() && isdigit((unsigned char)line[0]))
			last = line;
	std::vector<std::string> col;
	std::istringstream f(last);
	while (std::getline(f, line, ','))
		col.push_back(line);
	if (col.size() < 8)
		return "kafka-consumer-perf-test printed no figures: " +
		       r.describe() + "\n" + r.out;
	*msgs = atoll(col[4].c_str());
	*fetch_ms = atof(col[7].c_str());
	return "";
}

std::string consumer_perf_once(KafkaBroker &src, const Workload &w,
			       int64_t n, double *wall_s, double *cpu_s,
			       double *fetch_ms)
{
	static int group;
	int64_t msgs = 0;
	double c0 = children_cpu_s(), t0 = now_s();
	ChildResult r = kafka_tool(
		"org.apache.kafka.tools.ConsumerPerformance",
		{ "--bootstrap-server", src.bootstrap(), "--topic", w.topic,
		  "--messages", std::to_string(n), "--group",
		  "bench-perf-" + std::to_string(++group), "--timeout", "60000" },
		kWaitMs);

	*wall_s = now_s() - t0;
	*cpu_s = children_cpu_s() - c0;
	if (r.exit_code != 0)
		return "kafka-consumer-perf-test: " + r.describe() + "\n" + r.out;
	std::string why = perf_line(r, &msgs, fetch_ms);
	if (why.empty() && msgs < n)
		why = "kafka-consumer-perf-test read " + std::to_string(msgs) +
		      " records, not " + std::to_string(n);
	return why;
}

std::string run_consumer_perf(KafkaBroker &src, const Workload &w, Result *r)
{
	double w1, c1, f1, fetch_ms, s0;
	std::string why;

	r->name = "consumer-perf";
	r->estimated = true;
	/* Its fixed cost: JVM start, group join, one fetch. */
	why = consumer_perf_once(src, w, 1, &w1, &c1, &f1);
	if (!why.empty())
		return why;
	s0 = proc_cpu_s(src.pid(), true);
	why = consumer_perf_once(src, w, w.end, &r->wall_s, &r->cpu_s, &fetch_ms);
	r->src_cpu_s = proc_cpu_s(src.pid(), true) - s0;
	r->stream_s = fetch_ms / 1000.0;
	r->stream_cpu_s = r->cpu_s - c1;
	return why;
}

std::string run_kmirrord(const std::string &bootstrap, pid_t src_pid,
			 const Workload &w, const std::string &parent,
			 const std::string &label, Result *r)
{
	std::string dir = parent + "/kmirrord-" + w.topic, why;
	Daemon d(dir, { "topics=" + w.topic, "source.bootstrap.servers=" + bootstrap });
	double t0 = now_s(), s0 = proc_cpu_s(src_pid, true), tf = 0, cf = 0;

	r->name = label;
	if (!(why = d.start()).empty())
		return why;
	pid_t pid = d.child().pid();
	std::string part = w.topic + ":0";
	why = d.wait_status([&](auto &st) { return st.count(part) && st.at(part).leo > 0; },
			    kFirstMs);
	tf = now_s();
	cf = proc_cpu_s(pid, true);
	if (why.empty())
		why = d.wait_status([&](auto &st) { return st.count(part) && st.at(part).hw == w.end; },
				    kWaitMs);
	double t1 = now_s();
	r->cpu_s = proc_cpu_s(pid, true);
	r->src_cpu_s = proc_cpu_s(src_pid, true) - s0;
	r->wall_s = t1 - t0;
	r->stream_s = t1 - tf;
	r->stream_cpu_s = r->cpu_s - cf;
	ChildResult res;
	d.stop(30000, &res);
	return why;
}

std::string write_file(const std::string &path, const std::string &text)
{
	std::ofstream f(path, std::ios::trunc);
	f << text;
	return f ? "" : "cannot write " + path;
}

/* mm2.properties: one flow src->dst of one topic, one task, and nothing
 * else MM2 does by default that is not mirroring (heartbeats, checkpoints,
 * offset syncs, ACL and config syncs; with offset syncs off, any
 * offset-syncs.* key makes the connector refuse its config); replication
 * factor 1 for the topics it creates, internal or mirrored, as the brokers
 * are single nodes. plugin.discovery=service_load, as MM2's own warning
 * advises: the default scan of the classpath costs ~12 s of start. Its
 * producer batches as S's producer did (512 KiB, linger 10 ms): Connect's
 * defaults would send 16 KiB batches, which is not how one would run a
 * mirror for throughput. */
std::string mm2_properties(KafkaBroker &src, KafkaBroker &dst, const Workload &w)
{
	std::string p = "clusters=src,dst\n"
			"src.bootstrap.servers=" + src.bootstrap() + "\n"
			"dst.bootstrap.servers=" + dst.bootstrap() + "\n"
			"src->dst.enabled=true\nsrc->dst.topics=" + w.topic + "\n"
			"dst->src.enabled=false\n"
			"tasks.max=1\nreplication.factor=1\n"
			"emit.heartbeats.enabled=false\nemit.checkpoints.enabled=false\n"
			"emit.offset-syncs.enabled=false\nsync.group.offsets.enabled=false\n"
			"sync.topic.acls.enabled=false\nsync.topic.configs.enabled=false\n"
			"refresh.topics.enabled=false\nrefresh.groups.enabled=false\n"
			"dst->src.emit.heartbeats.enabled=false\n"
			"plugin.discovery=service_load\n";
	for (const char *t : { "checkpoints.topic", "heartbeats.topic",
			       "offset.storage",
			       "status.storage", "config.storage" })
		p += std::string(t) + ".replication.factor=1\n";
	return p + "dst.producer.batch.size=524288\ndst.producer.linger.ms=10\n"
		   "dst.producer.compression.type=none\n";
}

/* The MM2 JVM, its output into a file (a pipe nobody reads would stall
 * it), as bin/connect-mirror-maker.sh runs it (heap up to 1 GiB here). */
std::string spawn_mm2(Child *mm2, const TempDir &tmp)
{
	std::string libs, why = kafka_libs(&libs);

	if (!why.empty())
		return why;
	why = write_file(tmp.file("log4j2.properties"),
			 "status = warn\nappender.f.type = File\nappender.f.name = F\n"
			 "appender.f.fileName = " + tmp.file("mm2.log") + "\n"
			 "appender.f.layout.type = PatternLayout\n"
			 "appender.f.layout.pattern = [%d] %p %m (%c)%n\n"
			 "rootLogger.level = info\nrootLogger.appenderRef.f.ref = F\n");
	if (!why.empty())
		return why;
	std::vector<std::string> argv = {
		"setpriv", "--pdeathsig", "KILL", "sh", "-c",
		"out=$1; shift; exec \"$@\" >\"$out\" 2>&1", "sh",
		tmp.file("mm2.out"), "java", "-Xms256m", "-Xmx1g" };
	std::istringstream f(kKafkaJvm);
	for (std::string flag; f >> flag;)
		argv.push_back(flag);
	argv.insert(argv.end(),
		    { "-Djava.awt.headless=true",
		      "-Dlog4j2.configurationFile=" + tmp.file("log4j2.properties"),
		      "-cp", libs + "/*", "org.apache.kafka.connect.mirror.MirrorMaker",
		      tmp.file("mm2.properties") });
	return mm2->spawn(argv);
}

/* Poll D's high watermark of src.TOPIC until pred, or MM2 dies. */
template <class F>
std::string wait_dst(Watermark &dwm, Child &mm2, const std::string &topic,
		     const TempDir &tmp, int timeout_ms, F pred)
{
	bool ok = poll_until([&] { return pred(dwm.high(topic)) || mm2.exited(); },
			     timeout_ms);
	if (ok && !mm2.exited())
		return "";
	std::string log = read_file(tmp.file("mm2.log"));
	return std::string(mm2.exited() ? "MM2 exited" : "MM2 timed out") +
	       "; D's watermark of " + topic + " is " +
	       std::to_string(dwm.high(topic)) + "; its log ends:\n" +
	       log.substr(log.size() > 4000 ? log.size() - 4000 : 0);
}

/* $KM_BENCH_KAFKA_MM2_LOG=DIR keeps MM2's log there (to see where its
 * start-up time goes). */
void keep_mm2_log(const TempDir &tmp, const Workload &w)
{
	const char *dir = getenv("KM_BENCH_KAFKA_MM2_LOG");
	std::string cp = std::string("cp '") + tmp.file("mm2.log") + "' '" +
			 (dir ? dir : "") + "/mm2-" + w.topic + ".log'";

	if (dir && *dir && system(cp.c_str()) != 0)
		fprintf(stderr, "bench kafka: could not copy MM2's log to %s\n", dir);
}

/* kafka-get-offsets on D says what the polls said. */
std::string check_dst_end(KafkaBroker &dst, const std::string &topic, int64_t end)
{
	std::string out, why = dst.get_offsets(topic, -1, &out);
	std::string want = topic + ":0:" + std::to_string(end);

	if (!why.empty())
		return why;
	return out.find(want) == std::string::npos
		       ? "kafka-get-offsets on D: " + out + " (want " + want + ")"
		       : "";
}

/* *r is the MM2 JVM, *rd the MM2 JVM and D together. */
std::string run_mm2(KafkaBroker &src, KafkaBroker &dst, Watermark &dwm,
		    const Workload &w, Result *r, Result *rd)
{
	TempDir tmp("km-bench-mm2");
	Child mm2;
	std::string topic = "src." + w.topic, why;

	r->name = "MirrorMaker 2";
	why = write_file(tmp.file("mm2.properties"), mm2_properties(src, dst, w));
	double t0 = now_s(), s0 = proc_cpu_s(src.pid(), true), d0 = proc_cpu_s(dst.pid(), true);
	if (why.empty())
		why = spawn_mm2(&mm2, tmp);
	if (why.empty())
		why = wait_dst(dwm, mm2, topic, tmp, kFirstMs,
			       [](int64_t h) { return h > 0; });
	double tf = now_s(), cf = proc_cpu_s(mm2.pid(), true), df = proc_cpu_s(dst.pid(), true);
	if (why.empty())
		why = wait_dst(dwm, mm2, topic, tmp, kWaitMs,
			       [&](int64_t h) { return h == w.end; });
	double t1 = now_s();
	double d1 = proc_cpu_s(dst.pid(), true);
	r->cpu_s = proc_cpu_s(mm2.pid(), true);
	r->src_cpu_s = proc_cpu_s(src.pid(), true) - s0;
	r->wall_s = t1 - t0;
	r->stream_s = t1 - tf;
	r->stream_cpu_s = r->cpu_s - cf;
	*rd = *r;
	rd->name = "MirrorMaker 2 + D";
	rd->cpu_s += d1 - d0;
	rd->stream_cpu_s += d1 - df;
	ChildResult res;
	if (mm2.running()) {
		mm2.kill(SIGTERM);
		mm2.wait(60000, &res);
	}
	keep_mm2_log(tmp, w);
	if (why.empty())
		why = check_dst_end(dst, topic, w.end);
	if (why.empty())
		printf("MM2 wrote %lld bytes of log on D for %lld on S "
		       "(kafka-get-offsets on D: end %lld)\n",
		       (long long)log_bytes(dst.partition_dir(topic, 0)),
		       (long long)w.bytes, (long long)w.end);
	return why;
}

void print_row(const Workload &w, const Result &r)
{
	double gb = (double)w.bytes / 1e9, mb = (double)w.bytes / 1e6;

	printf("  %-20s %11lld %8.2f %8.1f %8.2f %8.2f | %8.2f %8.1f %8.2f %8.2f%s | %6.2f\n",
	       r.name.c_str(), (long long)w.bytes, r.wall_s, mb / r.wall_s,
	       r.cpu_s, r.cpu_s / gb, r.stream_s, mb / r.stream_s,
	       r.stream_cpu_s, r.stream_cpu_s / gb, r.estimated ? "*" : " ",
	       r.src_cpu_s);
}

/* Same bytes for all: throughput ratio = time ratio, CPU per GB ratio =
 * CPU ratio. Above 1 is kmirrord faster / cheaper. */
void print_ratio(const Result &k, const Result &o)
{
	printf("  %s vs %s: throughput x%.2f stream, x%.2f total; "
	       "CPU per GB: %s uses x%.2f stream, x%.2f total\n",
	       k.name.c_str(), o.name.c_str(), o.stream_s / k.stream_s,
	       o.wall_s / k.wall_s, o.name.c_str(),
	       o.stream_cpu_s / k.stream_cpu_s, o.cpu_s / k.cpu_s);
}

/* Issue 18's target: kmirrord (onto the disk) moves at least 10x the
 * bytes per CPU second of MirrorMaker 2 (its own JVM, streaming). Same
 * bytes for both: the ratio of bytes per CPU second is that of CPU s. */
void print_target(const Result &k, const Result &mm2)
{
	double x = mm2.stream_cpu_s / k.stream_cpu_s;

	if (k.name.empty() || mm2.name.empty() || k.stream_cpu_s <= 0)
		return;
	printf("  target (issue 18): %s >= 10x MirrorMaker 2's bytes per CPU "
	       "second: x%.1f, %s\n", k.name.c_str(), x,
	       x >= 10 ? "met" : "NOT met");
}

/* A directory on tmpfs, removed with the run. */
struct ShmDir {
	std::string path;
	ShmDir()
	{
		char t[] = "/dev/shm/km-bench-kafka-XXXXXX";
		if (mkdtemp(t) != nullptr)
			path = t;
	}
	~ShmDir()
	{
		std::string rm = "rm -rf '" + path + "'";
		if (!path.empty() && system(rm.c_str()) != 0)
			fprintf(stderr, "bench kafka: could not remove %s\n", path.c_str());
	}
};

/* The machine is shared: its load goes with the figures. */
std::string loadavg()
{
	std::string s = read_file("/proc/loadavg");

	return s.substr(0, s.find(' ', s.find(' ', s.find(' ') + 1) + 1));
}

void print_table(const Workload &w, const std::vector<Result> &rs)
{
	printf("\n%s: %lld records of %d B, %lld bytes of log (%.1f MB); "
	       "load average now %s\n",
	       w.topic.c_str(), (long long)w.end, w.size, (long long)w.bytes,
	       (double)w.bytes / 1e6, loadavg().c_str());
	printf("  %-20s %11s %8s %8s %8s %8s | %8s %8s %8s %8s  | %6s\n",
	       "", "bytes", "total s", "MB/s", "CPU s", "CPU s/GB", "stream s",
	       "MB/s", "CPU s", "CPU s/GB", "S CPU");
	for (auto &r : rs)
		if (!r.name.empty())
			print_row(w, r);
	printf("  (* consumer-perf: stream s is its own fetch.time.ms, stream CPU "
	       "its CPU less that of a --messages 1 run)\n");
	for (size_t k : { 1, 2 })
		if (!rs[k].name.empty())
			for (size_t o : { 3, 4, 0 })
				print_ratio(rs[k], rs[o]);
	print_target(rs[1], rs[3]);
	printf("\n");
}

/* Every contender on one workload, then the table. */
std::string bench_workload(KafkaBroker &src, KafkaBroker &dst, Watermark &swm,
			   Watermark &dwm, Workload &w, bool tmpfs)
{
	std::vector<Result> rs(5);
	std::string why = fill(src, swm, &w);
	TempDir disk("km-bench-kafka");

	if (why.empty())
		why = run_consumer_perf(src, w, &rs[0]);
	if (why.empty())
		why = run_kmirrord(src.bootstrap(), src.pid(), w, disk.path(),
				   "kmirrord (disk)", &rs[1]);
	if (why.empty() && tmpfs) {
		ShmDir shm;
		why = shm.path.empty() ? "cannot make a directory in /dev/shm"
				       : run_kmirrord(src.bootstrap(), src.pid(), w,
						      shm.path, "kmirrord (tmpfs)", &rs[2]);
	}
	if (why.empty())
		why = run_mm2(src, dst, dwm, w, &rs[3], &rs[4]);
	if (why.empty())
		print_table(w, rs);
	return why;
}

} // namespace

int main(int argc, char **argv)
{
	std::string libs, why = kafka_libs(&libs);
	int64_t mib = argc > 1 ? atoll(argv[1]) : env_int("KM_BENCH_KAFKA_MIB", 512);
	const char *sizes = getenv("KM_BENCH_KAFKA_SIZES");
	bool tmpfs = env_int("KM_BENCH_KAFKA_TMPFS", 1) != 0 &&
		     access("/dev/shm", W_OK) == 0;

	if (!why.empty()) {
		fprintf(stderr, "bench kafka: no Apache Kafka jars: %s\n", why.c_str());
		return 1;
	}
	setenv("KM_KAFKA_JVM_FLAGS", kKafkaJvm, 1);
	setvbuf(stdout, nullptr, _IOLBF, 0);
	KafkaBroker src, dst;
	if (!(why = src.start()).empty() || !(why = dst.start()).empty()) {
		fprintf(stderr, "bench kafka: a broker did not start: %s\n", why.c_str());
		return 1;
	}
	printf("bench kafka: Kafka jars %s; S %s, D %s; %lld MiB per workload; "
	       "%ld online cores, load average %s\n", libs.c_str(),
	       src.bootstrap().c_str(), dst.bootstrap().c_str(), (long long)mib,
	       sysconf(_SC_NPROCESSORS_ONLN), loadavg().c_str());
	Watermark swm(src.bootstrap()), dwm(dst.bootstrap());
	std::istringstream list(sizes && *sizes ? sizes : "1024,65536");
	for (std::string s; std::getline(list, s, ',');) {
		Workload w;
		w.size = atoi(s.c_str());
		w.topic = "bench" + std::to_string(w.size);
		w.records = w.size > 0 ? (mib << 20) / w.size : 0;
		if (w.records <= 0 ||
		    !(why = bench_workload(src, dst, swm, dwm, w, tmpfs)).empty()) {
			fprintf(stderr, "bench kafka: %s: %s\n", w.topic.c_str(),
				w.records <= 0 ? "bad record size" : why.c_str());
			return 1;
		}
	}
	return 0;
}
