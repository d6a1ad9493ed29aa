/* Kafka's group tools as the kafka suites drive them: the JSON events of
 * kafka-verifiable-consumer (run to completion, or left running and read
 * as they come) and kafka-consumer-groups --describe, parsed (moved out of
 * test_kafka_groups.cc so that kafka-ops-groups judges groups the same
 * way). No googletest here: errors come back as text ("" = ok).
 */
#ifndef KM_TESTS_KAFKA_KAFKA_GROUPS_UTIL_H
#define KM_TESTS_KAFKA_KAFKA_GROUPS_UTIL_H

#include <signal.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tests/e2e/daemon.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/support/process.h"

namespace kmtest {

extern const char *const kVerifiable;
extern const char *const kGroupCmd;

/* What kafka-verifiable-consumer printed, per partition of one topic. */
struct Consumed {
	std::map<int, int64_t> first, last, count, committed;
	int64_t total = 0;
	bool assigned = false;
	int64_t commit_ms = -1; /* wall clock of the last successful commit */
};

/* One JSON event line into *c. */
void take_event(const std::string &line, Consumed *c);

/* kafka-verifiable-consumer's arguments (--max-messages when max > 0). */
std::vector<std::string> verifiable_args(const std::string &bootstrap,
					 const std::string &topic,
					 const std::string &group,
					 const std::string &protocol, int64_t max);

/* kafka-verifiable-consumer until it has read max records (and committed
 * them, which it does after each poll). */
std::string verifiable_consume(const std::string &bootstrap,
			       const std::string &topic, const std::string &group,
			       const std::string &protocol, int64_t max,
			       Consumed *c);

/* A kafka-verifiable-consumer left running: events read as they come. */
class LiveConsumer {
public:
	std::string start(const std::string &bootstrap, const std::string &topic,
			  const std::string &group, int64_t max = 0)
	{
		return kafka_tool_spawn(&child_, kVerifiable,
					verifiable_args(bootstrap, topic, group,
							"classic", max));
	}
	/* Read events until pred(consumed) holds. */
	template <class F> std::string until(F pred, int timeout_ms)
	{
		int64_t deadline = now_ms() + timeout_ms;
		while (!pred(c_)) {
			std::string line;
			int64_t left = deadline - now_ms();
			if (left <= 0)
				return "no such event in time; stderr: " + child_.stderr_so_far();
			std::string why = child_.read_line((int)left, &line);
			if (!why.empty())
				return why + "; stderr: " + child_.stderr_so_far();
			take_event(line, &c_);
		}
		return "";
	}
	/* SIGTERM: the consumer commits, leaves its group and exits. */
	std::string stop()
	{
		ChildResult r;
		child_.kill(SIGTERM);
		std::string why = child_.wait(60000, &r);
		return !why.empty() ? why : r.timed_out ? "did not exit" : "";
	}
	const Consumed &consumed() const { return c_; }

private:
	Child child_;
	Consumed c_;
};

/* One row of kafka-consumer-groups --describe --group (offsets view). */
struct Row {
	int64_t current = -1, end = -1, lag = -1;
	std::string member; /* CONSUMER-ID, "-" if none */
};

int64_t num_or_none(const std::string &s);

/* kafka-consumer-groups with --bootstrap-server and args. */
std::string group_cmd(const std::string &bootstrap,
		      const std::vector<std::string> &args, ChildResult *r);

/* kafka-consumer-groups --describe --group: partition -> row of topic. */
std::string describe(const std::string &bootstrap, const std::string &group,
		     const std::string &topic, std::map<int, Row> *rows,
		     std::string *text = nullptr);

} // namespace kmtest

#endif
