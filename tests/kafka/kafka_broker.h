/* Apache Kafka 4.x as a test peer (spec/test-peers.md): a real KRaft broker
 * on loopback as a child process, and Kafka's own tools run with
 * `java -cp LIBS/(all jars) CLASS`. The jars come from $KM_KAFKA_LIBS, which
 * ./kmirror sets to the folder `./kmirror setup` filled with Maven (or to
 * $KMIRROR_KAFKA_HOME/libs); without them every call fails and says so, so
 * a suite built on this fails rather than skips.
 *
 * Every wait polls an observable condition (the broker answering a
 * Metadata request, the process exiting) with a deadline. Children run
 * under `setpriv --pdeathsig KILL`, so a test killed by its timeout leaves
 * no JVM behind. Errors come back as text ("" = ok). No googletest here.
 */
#ifndef KM_TESTS_KAFKA_KAFKA_BROKER_H
#define KM_TESTS_KAFKA_KAFKA_BROKER_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/process.h"

namespace kmtest {

/* The folder of Kafka jars in *dir, or why there is none (naming
 * ./kmirror setup and KMIRROR_KAFKA_HOME). */
std::string kafka_libs(std::string *dir);

/* Run one of Kafka's classes to completion with a small heap; its log4j
 * output (WARN and up) goes to stderr. If the jars are missing,
 * res.exit_code is -1 and res.err says why. */
ChildResult kafka_tool(const std::string &cls,
		       const std::vector<std::string> &args, int timeout_ms);

/* Kafka's DumpLogSegments (org.apache.kafka.tools in 4.x, kafka.tools
 * in older builds: whichever this Kafka has). */
ChildResult kafka_dump_log_segments(const std::vector<std::string> &args,
				    int timeout_ms = 120000);

/* kafka-console-consumer on one partition from the earliest offset (no
 * group): up to max records, printed one per line as
 * "Offset:N<TAB>key<TAB>value", into *out. isolation: read_committed or
 * read_uncommitted. Fails unless exactly max records came. */
std::string console_consume(const std::string &bootstrap,
			    const std::string &topic, int partition,
			    int64_t max, const std::string &isolation,
			    std::string *out);

/* One KRaft node in combined mode (broker and controller) with its own
 * temporary log dir and free loopback ports. start() formats the storage
 * once; stop() and start() again restart the same broker (same ports,
 * same data). The destructor SIGKILLs a broker still running. */
class KafkaBroker {
public:
	/* props: "key=value" lines added to (or overriding) the defaults. */
	explicit KafkaBroker(std::vector<std::string> props = {});
	/* One node of a KafkaCluster: its id, its ports, every controller
	 * ("1@127.0.0.1:P,2@...") and the cluster id they share. */
	KafkaBroker(int node_id, uint16_t port, uint16_t cport,
		    std::string voters, std::string cluster_id,
		    std::vector<std::string> props);
	~KafkaBroker();
	KafkaBroker(const KafkaBroker &) = delete;
	KafkaBroker &operator=(const KafkaBroker &) = delete;

	std::string start(int timeout_ms = 120000);
	/* start() without waiting: a cluster's nodes wait for each other. */
	std::string spawn();
	/* Until Metadata lists `brokers` live brokers. */
	std::string wait_ready(int timeout_ms, int brokers = 1);
	/* SIGTERM (a controlled shutdown that closes every segment), then
	 * SIGKILL at the deadline. *res, if given, gets the exit. */
	std::string stop(int timeout_ms = 60000, ChildResult *res = nullptr);
	/* SIGKILL and reap: an unclean shutdown (start() again runs the
	 * broker's own log recovery). */
	std::string kill9(int timeout_ms = 30000);
	bool running() const { return child_.running() && !child_.exited(); }

	std::string bootstrap() const
	{
		return "127.0.0.1:" + std::to_string(port_);
	}
	/* The directory of a partition's segments. */
	std::string partition_dir(const std::string &topic, int partition) const
	{
		return dir_.path() + "/data/" + topic + "-" +
		       std::to_string(partition);
	}
	/* Milliseconds the last start() took until Metadata answered. */
	int64_t start_ms() const { return start_ms_; }
	/* The broker's JVM (0 when not running): bench kafka reads its CPU
	 * time in /proc. */
	pid_t pid() const { return running() ? child_.pid() : 0; }
	/* The last lines of the broker's own log (for failure messages). */
	std::string log_tail(size_t bytes = 4000) const;

	/* kafka-topics --create, with "key=value" topic configs. */
	std::string create_topic(const std::string &name, int partitions,
				 const std::vector<std::string> &configs = {},
				 int replication = 1);
	/* kafka-producer-perf-test: n records of `size` bytes to topic,
	 * with "key=value" producer properties (bootstrap added). */
	std::string producer_perf(const std::string &topic, int64_t n,
				  int size, const std::vector<std::string> &props,
				  const std::vector<std::string> &more_args = {});
	/* kafka-get-offsets: "topic:partition:offset" lines for time -1
	 * (latest) or -2 (earliest). */
	std::string get_offsets(const std::string &topic, int time,
				std::string *out);

	/* Before the first start(): one more listener NAME on a free loopback
	 * port (advertised as 127.0.0.1), of security protocol `protocol`
	 * (SSL, SASL_SSL, SASL_PLAINTEXT; its own ssl.* and sasl.* settings
	 * go in props as listener.name.<name lower case>.KEY). The PLAINTEXT
	 * listener stays: the harness's own clients use it. @return the
	 * port, 0 if none was free. */
	uint16_t add_listener(const std::string &name,
			      const std::string &protocol);
	/* More arguments to kafka-storage format (--add-scram ...). */
	void add_format_args(std::vector<std::string> args)
	{
		format_args_.insert(format_args_.end(), args.begin(), args.end());
	}

private:
	std::string format();
	std::string extra_listeners(const std::string &lst,
				    const std::string &ctl) const;

	TempDir dir_{ "km-kafka" };
	std::vector<std::string> props_;
	int node_id_ = 1;
	std::string voters_, cluster_id_;
	int64_t spawned_ms_ = -1;
	Child child_;
	uint16_t port_ = 0, cport_ = 0;
	bool formatted_ = false;
	int64_t start_ms_ = -1;
	struct Listener {
		std::string name, protocol;
		uint16_t port;
	};
	std::vector<Listener> listeners_;
	std::vector<std::string> format_args_;
};

/* n KRaft nodes, each broker and controller (a quorum of n), on loopback:
 * for leader moves. Each node is a KafkaBroker (node ids 1..n); stop and
 * start them one by one. */
class KafkaCluster {
public:
	explicit KafkaCluster(int n, std::vector<std::string> props = {});

	/* Start every node and wait until each lists all n brokers. */
	std::string start(int timeout_ms = 180000);
	/* "127.0.0.1:P1,127.0.0.1:P2,..." */
	std::string bootstrap() const;
	KafkaBroker &node(int id) { return *nodes_.at((size_t)id - 1); }
	int size() const { return (int)nodes_.size(); }
	int64_t start_ms() const { return start_ms_; }

private:
	std::vector<std::unique_ptr<KafkaBroker>> nodes_;
	int64_t start_ms_ = -1;
};

/* Kafka's VerifiableProducer: n records to topic with acks=all and
 * idempotence, values "prefix.N"; keys "0".."keys-1" repeating if
 * keys > 0, else none. "" once every send was acknowledged. */
std::string verifiable_produce(const std::string &bootstrap,
			       const std::string &topic, int n, int keys,
			       int prefix);

} // namespace kmtest

namespace kmtest {

/* kafka_tool() left running: one of Kafka's classes as *c, its stdout
 * read with c->read_line() (e.g. kafka-verifiable-consumer's JSON events
 * as they come), ended with c->kill() and c->wait(). */
std::string kafka_tool_spawn(Child *c, const std::string &cls,
			     const std::vector<std::string> &args);

} // namespace kmtest

#endif
