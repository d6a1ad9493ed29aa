/* The Kafka broker and tools of kafka_broker.h. */
#include "tests/kafka/kafka_broker.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <random>

#include <librdkafka/rdkafka.h>

#include "tests/support/kafka_peers.h"

namespace kmtest {

namespace {

int64_t mono_ms()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool write_text(const std::string &path, const std::string &text)
{
	std::ofstream f(path, std::ios::trunc);
	f << text;
	return static_cast<bool>(f);
}

/* log4j2 configuration: everything at `level` into one appender (a file,
 * or stderr when file is ""), so a broker never fills a pipe nobody
 * reads and a tool's stdout holds only its answer. */
std::string log4j_config(const std::string &level, const std::string &file)
{
	std::string s = "status = warn\n";
	if (file.empty())
		s += "appender.o.type = Console\nappender.o.target = SYSTEM_ERR\n";
	else
		s += "appender.o.type = File\nappender.o.fileName = " + file + "\n";
	return s + "appender.o.name = O\n"
		   "appender.o.layout.type = PatternLayout\n"
		   "appender.o.layout.pattern = [%d] %p %m (%c)%n\n"
		   "rootLogger.level = " + level + "\n"
		   "rootLogger.appenderRef.o.ref = O\n";
}

/* The tools' log4j2 file, written once per test process. */
const std::string &tools_log4j()
{
	static std::unique_ptr<TempDir> dir;
	static std::string path;

	if (!dir) {
		dir = std::make_unique<TempDir>("km-kafka-tools");
		path = dir->file("log4j2.properties");
		write_text(path, log4j_config("warn", ""));
	}
	return path;
}

/* setpriv makes the JVM die with the thread that started it; C1 only and
 * the serial collector keep a short-lived JVM's CPU small on 2 cores.
 * KM_KAFKA_JVM_FLAGS (space-separated) replaces those two flags: bench
 * kafka runs every JVM as Kafka's own scripts do (G1, C2), since there
 * Kafka's speed is what is measured. */
std::vector<std::string> java_argv(const std::string &libs,
				   const std::string &heap,
				   const std::string &log4j,
				   const std::string &cls)
{
	std::vector<std::string> argv = { "setpriv", "--pdeathsig", "KILL",
					  "java", "-Xmx" + heap };
	const char *env = getenv("KM_KAFKA_JVM_FLAGS");
	std::string flags = env && *env ? env : "-XX:+UseSerialGC -XX:TieredStopAtLevel=1";
	size_t at = 0, end;

	while ((at = flags.find_first_not_of(' ', at)) != std::string::npos) {
		end = flags.find(' ', at);
		argv.push_back(flags.substr(at, end - at));
		at = end;
	}
	argv.insert(argv.end(), { "-Djava.awt.headless=true",
				  "-Dlog4j2.configurationFile=" + log4j, "-cp",
				  libs + "/*", cls });
	return argv;
}

/* A loopback port nobody listens on now. */
uint16_t free_port()
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {};
	socklen_t len = sizeof(a);
	uint16_t port = 0;

	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* A cluster id as Kafka's Uuid prints one: 16 random bytes in unpadded
 * base64url, never starting with '-' (the tools would read an option). */
std::string random_cluster_id()
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	std::random_device rd;
	std::string s;

	do {
		uint8_t b[18] = {};
		for (int i = 0; i < 16; i++)
			b[i] = (uint8_t)rd();
		s.clear();
		for (int i = 0; i < 18 && s.size() < 22; i += 3) {
			uint32_t v = (uint32_t)b[i] << 16 | (uint32_t)b[i + 1] << 8 | b[i + 2];
			for (int k = 3; k >= 0 && s.size() < 22; k--)
				s += b64[(v >> (6 * k)) & 63];
		}
	} while (s[0] == '-');
	return s;
}

/* A folder of Kafka jars holds kafka-clients-VERSION.jar. */
bool has_kafka_clients(const std::string &dir)
{
	DIR *d = opendir(dir.c_str());
	struct dirent *e;
	bool found = false;

	while (d && !found && (e = readdir(d)) != nullptr)
		found = strncmp(e->d_name, "kafka-clients-", 14) == 0 &&
			strstr(e->d_name, ".jar") != nullptr;
	if (d)
		closedir(d);
	return found;
}

} // namespace

std::string kafka_libs(std::string *dir)
{
	const char *env = getenv("KM_KAFKA_LIBS");
	std::string how = "run ./kmirror setup (it fetches Apache Kafka with "
			  "Maven into its cache and sets KM_KAFKA_LIBS for the "
			  "tests), or set KMIRROR_KAFKA_HOME to a Kafka "
			  "distribution and run it again";

	if (env == nullptr || *env == '\0')
		return "KM_KAFKA_LIBS is not set: " + how;
	if (!has_kafka_clients(env))
		return std::string("no kafka-clients jar in KM_KAFKA_LIBS=") +
		       env + ": " + how;
	*dir = env;
	return "";
}

ChildResult kafka_tool(const std::string &cls,
		       const std::vector<std::string> &args, int timeout_ms)
{
	std::string libs, why = kafka_libs(&libs);
	if (!why.empty()) {
		ChildResult r;
		r.err = why;
		return r;
	}
	std::vector<std::string> argv =
		java_argv(libs, "256m", tools_log4j(), cls);
	argv.insert(argv.end(), args.begin(), args.end());
	return run_command(argv, timeout_ms);
}

ChildResult kafka_dump_log_segments(const std::vector<std::string> &args,
				    int timeout_ms)
{
	static std::string cls = "org.apache.kafka.tools.DumpLogSegments";
	ChildResult r = kafka_tool(cls, args, timeout_ms);

	if (r.err.find("Could not find or load main class " + cls) !=
	    std::string::npos) {
		cls = "kafka.tools.DumpLogSegments"; /* Kafka before 4.1 */
		r = kafka_tool(cls, args, timeout_ms);
	}
	return r;
}

std::string console_consume(const std::string &bootstrap,
			    const std::string &topic, int partition,
			    int64_t max, const std::string &isolation,
			    std::string *out)
{
	ChildResult r = kafka_tool(
		"org.apache.kafka.tools.consumer.ConsoleConsumer",
		{ "--bootstrap-server", bootstrap, "--topic", topic, "--partition",
		  std::to_string(partition), "--offset", "earliest",
		  "--max-messages", std::to_string(max), "--timeout-ms", "30000",
		  "--isolation-level", isolation, "--formatter-property",
		  "print.offset=true", "--formatter-property", "print.key=true" },
		120000);
	*out = r.out;
	if (r.exit_code != 0)
		return "kafka-console-consumer: " + r.describe();
	std::string done = "Processed a total of " + std::to_string(max) + " messages";
	if (r.err.find(done) == std::string::npos)
		return "kafka-console-consumer did not read " + std::to_string(max) +
		       " records: " + r.err;
	return "";
}

KafkaBroker::KafkaBroker(std::vector<std::string> props)
	: props_(std::move(props))
{
}

KafkaBroker::KafkaBroker(int node_id, uint16_t port, uint16_t cport,
			 std::string voters, std::string cluster_id,
			 std::vector<std::string> props)
	: props_(std::move(props)), node_id_(node_id), voters_(std::move(voters)),
	  cluster_id_(std::move(cluster_id)), port_(port), cport_(cport)
{
}

KafkaBroker::~KafkaBroker()
{
	if (running())
		stop(20000);
}

std::string KafkaBroker::log_tail(size_t bytes) const
{
	std::string s = read_file(dir_.file("server.log"));
	return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

uint16_t KafkaBroker::add_listener(const std::string &name,
				  const std::string &protocol)
{
	uint16_t port = free_port();

	if (port != 0)
		listeners_.push_back({ name, protocol, port });
	return port;
}

/* The listeners add_listener() named, overriding the three lines above
 * them (a later key wins in a properties file). */
std::string KafkaBroker::extra_listeners(const std::string &lst,
					 const std::string &ctl) const
{
	if (listeners_.empty())
		return "";
	std::string l = "listeners=PLAINTEXT://" + lst + ",CONTROLLER://" + ctl;
	std::string a = "advertised.listeners=PLAINTEXT://" + lst;
	std::string m = "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,"
			"CONTROLLER:PLAINTEXT";
	for (auto &x : listeners_) {
		std::string at = "://127.0.0.1:" + std::to_string(x.port);
		l += "," + x.name + at;
		a += "," + x.name + at;
		m += "," + x.name + ":" + x.protocol;
	}
	return l + "\n" + a + "\n" + m + "\n";
}

/* server.properties for one combined node, then kafka-storage format.
 * Internal topics get one partition and one replica, and the cleaner a
 * small buffer: the broker lives in -Xmx512m on a 2-core machine. */
std::string KafkaBroker::format()
{
	std::string libs, why = kafka_libs(&libs);
	if (!why.empty())
		return why;
	if (!dir_.error().empty())
		return dir_.error();
	if (port_ == 0) {
		port_ = free_port();
		cport_ = free_port();
	}
	if (port_ == 0 || cport_ == 0 || port_ == cport_)
		return "no free loopback ports";
	std::string lst = "127.0.0.1:" + std::to_string(port_);
	std::string ctl = "127.0.0.1:" + std::to_string(cport_);
	if (voters_.empty())
		voters_ = "1@" + ctl;
	if (cluster_id_.empty())
		cluster_id_ = random_cluster_id();
	std::string p =
		"process.roles=broker,controller\nnode.id=" +
		std::to_string(node_id_) + "\n"
		"controller.quorum.voters=" + voters_ + "\n"
		"listeners=PLAINTEXT://" + lst + ",CONTROLLER://" + ctl + "\n"
		"advertised.listeners=PLAINTEXT://" + lst + "\n"
		"controller.listener.names=CONTROLLER\n"
		"inter.broker.listener.name=PLAINTEXT\n"
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
		"log.dirs=" + dir_.file("data") + "\n"
		"offsets.topic.replication.factor=1\noffsets.topic.num.partitions=1\n"
		"transaction.state.log.replication.factor=1\n"
		"transaction.state.log.min.isr=1\ntransaction.state.log.num.partitions=1\n"
		"share.coordinator.state.topic.replication.factor=1\n"
		"share.coordinator.state.topic.min.isr=1\n"
		"group.initial.rebalance.delay.ms=0\n"
		"auto.create.topics.enable=false\nnum.partitions=1\n"
		"num.network.threads=2\nnum.io.threads=2\nbackground.threads=2\n"
		"log.cleaner.threads=1\nlog.cleaner.dedupe.buffer.size=8388608\n";
	p += extra_listeners(lst, ctl);
	for (auto &kv : props_)
		p += kv + "\n";
	if (!write_text(dir_.file("server.properties"), p) ||
	    !write_text(dir_.file("log4j2.properties"),
			log4j_config("info", dir_.file("server.log"))))
		return "cannot write the broker's config in " + dir_.path();
	std::vector<std::string> fargs = { "format", "-t", cluster_id_, "-c",
					   dir_.file("server.properties") };
	fargs.insert(fargs.end(), format_args_.begin(), format_args_.end());
	ChildResult r = kafka_tool("kafka.tools.StorageTool", fargs, 120000);
	if (r.exit_code != 0)
		return "kafka-storage format: " + r.describe() + "\n" + r.out;
	formatted_ = true;
	return "";
}

/* Ready = a Metadata request to this broker answers with `brokers`
 * brokers in it. The client retries its connection every 100-200 ms
 * meanwhile. */
std::string KafkaBroker::wait_ready(int timeout_ms, int brokers)
{
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_PRODUCER,
				    { { "bootstrap.servers", bootstrap() },
				      { "reconnect.backoff.ms", "100" },
				      { "reconnect.backoff.max.ms", "200" } },
				    &err);
	if (rk == nullptr)
		return "librdkafka client: " + err;
	int64_t deadline = mono_ms() + timeout_ms;
	std::string last = "no answer";
	while (mono_ms() < deadline) {
		if (child_.exited()) {
			rd_kafka_destroy(rk);
			return "the broker exited while starting:\n" + log_tail();
		}
		const struct rd_kafka_metadata *md = nullptr;
		rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 1, nullptr, &md, 500);
		if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
			bool up = md->broker_cnt >= brokers;
			rd_kafka_metadata_destroy(md);
			if (up) {
				rd_kafka_destroy(rk);
				return "";
			}
		} else {
			last = rd_kafka_err2str(e);
		}
	}
	rd_kafka_destroy(rk);
	return "the broker did not answer Metadata in " +
	       std::to_string(timeout_ms) + " ms (" + last + "):\n" + log_tail();
}

std::string KafkaBroker::spawn()
{
	std::string libs, why;

	spawned_ms_ = mono_ms();
	if (running())
		return "already running";
	if (!formatted_ && !(why = format()).empty())
		return why;
	kafka_libs(&libs);
	std::vector<std::string> argv = java_argv(
		libs, "512m", dir_.file("log4j2.properties"), "kafka.Kafka");
	argv.push_back(dir_.file("server.properties"));
	if (!(why = child_.spawn(argv)).empty())
		return "start the broker: " + why;
	return "";
}

std::string KafkaBroker::start(int timeout_ms)
{
	std::string why = spawn();

	if (!why.empty() || !(why = wait_ready(timeout_ms)).empty())
		return why;
	start_ms_ = mono_ms() - spawned_ms_;
	return "";
}

std::string KafkaBroker::stop(int timeout_ms, ChildResult *res)
{
	ChildResult r;
	std::string why;

	if (!child_.running())
		return "not running";
	child_.kill(SIGTERM);
	why = child_.wait(timeout_ms, &r); /* SIGKILLs at the deadline */
	if (res)
		*res = r;
	if (!why.empty())
		return why;
	if (r.timed_out)
		return "the broker ignored SIGTERM for " +
		       std::to_string(timeout_ms) + " ms (killed)";
	return "";
}

std::string KafkaBroker::kill9(int timeout_ms)
{
	ChildResult r;

	if (!child_.running())
		return "not running";
	if (std::string why = child_.kill(SIGKILL); !why.empty())
		return why;
	return child_.wait(timeout_ms, &r);
}

std::string KafkaBroker::create_topic(const std::string &name, int partitions,
				      const std::vector<std::string> &configs,
				      int replication)
{
	std::vector<std::string> a = { "--bootstrap-server", bootstrap(),
				       "--create", "--topic", name,
				       "--partitions", std::to_string(partitions),
				       "--replication-factor",
				       std::to_string(replication) };
	for (auto &c : configs) {
		a.push_back("--config");
		a.push_back(c);
	}
	ChildResult r = kafka_tool("org.apache.kafka.tools.TopicCommand", a, 120000);
	return r.exit_code == 0 ? "" : "kafka-topics --create " + name + ": " +
					       r.describe() + "\n" + r.out;
}

std::string KafkaBroker::producer_perf(const std::string &topic, int64_t n,
				       int size,
				       const std::vector<std::string> &props,
				       const std::vector<std::string> &more_args)
{
	std::vector<std::string> a = { "--topic", topic, "--num-records",
				       std::to_string(n), "--record-size",
				       std::to_string(size), "--throughput", "-1",
				       "--producer-props",
				       "bootstrap.servers=" + bootstrap() };
	/* --producer-props: every 4.x has it (4.3 adds --command-property). */
	a.insert(a.end(), props.begin(), props.end());
	a.insert(a.end(), more_args.begin(), more_args.end());
	ChildResult r = kafka_tool("org.apache.kafka.tools.ProducerPerformance",
				   a, 180000);
	if (r.exit_code != 0)
		return "kafka-producer-perf-test: " + r.describe() + "\n" + r.out;
	if (r.out.find(std::to_string(n) + " records sent") == std::string::npos)
		return "kafka-producer-perf-test did not send " +
		       std::to_string(n) + " records:\n" + r.out + r.err;
	return "";
}

std::string KafkaBroker::get_offsets(const std::string &topic, int time,
				     std::string *out)
{
	ChildResult r = kafka_tool("org.apache.kafka.tools.GetOffsetShell",
				   { "--bootstrap-server", bootstrap(), "--topic",
				     topic, "--time", std::to_string(time) },
				   120000);
	*out = r.out;
	return r.exit_code == 0 ? "" : "kafka-get-offsets: " + r.describe();
}

KafkaCluster::KafkaCluster(int n, std::vector<std::string> props)
{
	std::vector<uint16_t> ports, cports;
	std::string voters, id = random_cluster_id();

	for (int i = 1; i <= n; i++) {
		ports.push_back(free_port());
		cports.push_back(free_port());
		voters += (i > 1 ? "," : "") + std::to_string(i) + "@127.0.0.1:" +
			  std::to_string(cports.back());
	}
	/* Replicated internal topics, so a node may stop. */
	std::string rf = std::to_string(n < 3 ? n : 3);
	props.insert(props.begin(),
		     { "offsets.topic.replication.factor=" + rf,
		       "transaction.state.log.replication.factor=" + rf,
		       "default.replication.factor=" + rf });
	for (int i = 1; i <= n; i++)
		nodes_.push_back(std::make_unique<KafkaBroker>(
			i, ports[(size_t)i - 1], cports[(size_t)i - 1], voters, id,
			props));
}

std::string KafkaCluster::start(int timeout_ms)
{
	int64_t t0 = mono_ms();
	std::string why;

	/* Formatting is one JVM per node, in turn; then all run at once: a
	 * quorum needs a majority before any node answers. */
	for (auto &b : nodes_)
		if (!(why = b->spawn()).empty())
			return "node: " + why;
	for (auto &b : nodes_)
		if (!(why = b->wait_ready(timeout_ms, size())).empty())
			return "node at " + b->bootstrap() + ": " + why;
	start_ms_ = mono_ms() - t0;
	return "";
}

std::string KafkaCluster::bootstrap() const
{
	std::string s;
	for (auto &b : nodes_)
		s += (s.empty() ? "" : ",") + b->bootstrap();
	return s;
}

/* VerifiableProducer sets retries=0, which idempotence refuses: the
 * config file gives it retries back. It prints one JSON line per
 * acknowledged send. */
std::string verifiable_produce(const std::string &bootstrap, const std::string &topic,
			       int n, int keys, int prefix)
{
	TempDir tmp("km-verif");
	std::string cfg = tmp.file("producer.properties");
	std::vector<std::string> a = { "--bootstrap-server", bootstrap, "--topic", topic,
				       "--max-messages", std::to_string(n), "--acks", "-1",
				       "--value-prefix", std::to_string(prefix),
				       "--command-config", cfg };
	if (keys > 0) {
		a.push_back("--repeating-keys");
		a.push_back(std::to_string(keys));
	}
	if (!write_text(cfg, "enable.idempotence=true\nretries=2147483647\n"
			     "linger.ms=5\nbatch.size=4096\n"))
		return "cannot write " + cfg;
	ChildResult r = kafka_tool("org.apache.kafka.tools.VerifiableProducer", a, 120000);
	if (r.exit_code != 0)
		return "VerifiableProducer: " + r.describe();
	size_t acked = 0, at = 0;
	while ((at = r.out.find("\"name\":\"producer_send_success\"", at)) !=
	       std::string::npos) {
		acked++;
		at++;
	}
	if (acked != (size_t)n)
		return "VerifiableProducer acknowledged " + std::to_string(acked) +
		       " of " + std::to_string(n) + ":\n" + r.out.substr(0, 2000);
	return "";
}

} // namespace kmtest

namespace kmtest {

std::string kafka_tool_spawn(Child *c, const std::string &cls,
			     const std::vector<std::string> &args)
{
	std::string libs, why = kafka_libs(&libs);
	if (!why.empty())
		return why;
	std::vector<std::string> argv =
		java_argv(libs, "256m", tools_log4j(), cls);
	argv.insert(argv.end(), args.begin(), args.end());
	return c->spawn(argv);
}

} // namespace kmtest
