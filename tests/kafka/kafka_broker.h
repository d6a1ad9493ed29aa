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

/* One KRaft node in combined mode (broker and controller) with its own
 * temporary log dir and free loopback ports. start() formats the storage
 * once; stop() and start() again restart the same broker (same ports,
 * same data). The destructor SIGKILLs a broker still running. */
class KafkaBroker {
public:
	/* props: "key=value" lines added to (or overriding) the defaults. */
	explicit KafkaBroker(std::vector<std::string> props = {});
	~KafkaBroker();
	KafkaBroker(const KafkaBroker &) = delete;
	KafkaBroker &operator=(const KafkaBroker &) = delete;

	std::string start(int timeout_ms = 120000);
	/* SIGTERM (a controlled shutdown that closes every segment), then
	 * SIGKILL at the deadline. *res, if given, gets the exit. */
	std::string stop(int timeout_ms = 60000, ChildResult *res = nullptr);
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
	/* The last lines of the broker's own log (for failure messages). */
	std::string log_tail(size_t bytes = 4000) const;

	/* kafka-topics --create, with "key=value" topic configs. */
	std::string create_topic(const std::string &name, int partitions,
				 const std::vector<std::string> &configs = {});
	/* kafka-producer-perf-test: n records of `size` bytes to topic,
	 * with "key=value" producer properties (bootstrap added). */
	std::string producer_perf(const std::string &topic, int64_t n,
				  int size, const std::vector<std::string> &props,
				  const std::vector<std::string> &more_args = {});
	/* kafka-get-offsets: "topic:partition:offset" lines for time -1
	 * (latest) or -2 (earliest). */
	std::string get_offsets(const std::string &topic, int time,
				std::string *out);

private:
	std::string format();
	std::string wait_ready(int timeout_ms);

	TempDir dir_{ "km-kafka" };
	std::vector<std::string> props_;
	Child child_;
	uint16_t port_ = 0, cport_ = 0;
	bool formatted_ = false;
	int64_t start_ms_ = -1;
};

} // namespace kmtest

#endif
