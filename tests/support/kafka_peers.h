/* Real Kafka peers for tests (spec/test-peers.md): librdkafka's mock cluster
 * in this process or as the kmirror-mock-source process, real librdkafka
 * producers of every kind writing deterministic payloads, and a checking
 * consumer that reads a partition range back.
 *
 * Everything returns "" or the reason it failed, bounded by a timeout, so a
 * gtest test writes ASSERT_EQ("", ...). No googletest here.
 *
 * Payloads are tools/payload.h's: the same (seed, partition,
 * sequence) gives the same key, value and headers here and in
 * kmirror-produce, so a test can check either one's output.
 */
#ifndef KM_TESTS_SUPPORT_KAFKA_PEERS_H
#define KM_TESTS_SUPPORT_KAFKA_PEERS_H

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/blocking_io.h"
#include "tests/support/process.h"

namespace kmtest {

using Props = std::vector<std::pair<std::string, std::string>>;

/* librdkafka's mock cluster in this process (brokers 1..N on 127.0.0.1,
 * random ports). Construction cannot fail loudly: check error() first. */
class MockCluster {
public:
	explicit MockCluster(int brokers = 1);
	~MockCluster();
	MockCluster(const MockCluster &) = delete;
	MockCluster &operator=(const MockCluster &) = delete;

	const std::string &error() const { return error_; }
	/* "127.0.0.1:P1,127.0.0.1:P2,..." */
	const std::string &bootstrap() const { return bootstrap_; }
	/* The first broker's address, for raw clients. */
	const std::string &host() const { return host_; }
	uint16_t port() const { return port_; }
	rd_kafka_mock_cluster_t *handle() const { return mock_; }

	/* The mock's control calls now and then stall for a second: prefer
	 * one topic with several partitions to many topics. */
	std::string create_topic(const std::string &name, int partitions,
				 int replication = 1);
	std::string set_leader(const std::string &topic, int32_t partition,
			       int32_t broker);
	/* The next errors.size() requests of api_key (any broker) fail with
	 * these codes, in order. */
	void push_request_errors(int16_t api_key,
				 const std::vector<rd_kafka_resp_err_t> &errors);
	std::string set_broker_down(int32_t broker);
	std::string set_broker_up(int32_t broker);

private:
	rd_kafka_t *rk_ = nullptr; /* the mock lives in it; never connects */
	rd_kafka_mock_cluster_t *mock_ = nullptr;
	std::string error_, bootstrap_, host_;
	uint16_t port_ = 0;
};

/* kmirror-mock-source as a child process. start() runs it with args (plus
 * --exit-with-parent, so a crashed test leaves no cluster behind: it stops
 * when the thread that started it ends) and waits for its bootstrap line;
 * the destructor kills and reaps it. */
class MockSource {
public:
	std::string start(const std::string &exe,
			  const std::vector<std::string> &args, int timeout_ms);
	/* SIGTERM, then wait up to timeout_ms for the exit. */
	std::string stop(int timeout_ms, ChildResult *res);

	const std::string &bootstrap() const { return bootstrap_; }
	const std::string &host() const { return host_; }
	uint16_t port() const { return port_; }
	Child &child() { return child_; }

private:
	Child child_;
	std::string bootstrap_, host_;
	uint16_t port_ = 0;
};

/* ---- deterministic payloads (tools/payload.h) ---- */

enum class Keys { kNone, kSeq, kRandom };
using Header = std::pair<std::string, std::optional<std::string>>;

std::string payload_value(uint64_t seed, int32_t partition, int64_t seq,
			  size_t size);
std::optional<std::string> payload_key(Keys keys, uint64_t seed,
				       int32_t partition, int64_t seq);
std::vector<Header> payload_headers(uint64_t seed, int32_t partition,
				    int64_t seq, int n);

/* ---- producing ---- */

enum class ProducerMode { kPlain, kIdempotent, kTransactional };

struct ProduceSpec {
	std::string topic;
	int32_t partition = 0; /* every message goes here */
	int64_t count = 0;
	ProducerMode mode = ProducerMode::kPlain;
	std::string compression = "none"; /* gzip, snappy, lz4, zstd */
	uint64_t seed = 0;
	int64_t first_seq = 0; /* sequence of the first message */
	size_t value_size = 100;
	/* If set, the value size of each sequence (overrides value_size). */
	std::function<size_t(int64_t seq)> value_size_of;
	Keys keys = Keys::kSeq;
	int headers = 0;
	/* Flush after every N messages (0: only at the end), so the
	 * partition gets several batches. */
	int64_t flush_every = 0;
	/* Transactional: messages per transaction (0: all in one), and abort
	 * (after a flush, so the batches are stored) every K-th. */
	int64_t txn_size = 0;
	int64_t abort_every = 0;
	std::string transactional_id = "kmirror-test-txn";
	Props conf; /* more librdkafka properties, applied last */
	int timeout_ms = 20000;
};

struct ProduceResult {
	int64_t delivered = 0, failed = 0;
	int64_t committed = 0, aborted = 0;
	std::string first_error; /* of a failed delivery report */
};

/* Produce spec.count messages with one real producer and wait for every
 * delivery report. "" only if all were delivered. */
std::string produce(const std::string &bootstrap, const ProduceSpec &spec,
		    ProduceResult *result = nullptr);

/* "" if this librdkafka build has the codec, else its own words why not
 * (for GTEST_SKIP). */
std::string codec_unsupported(const std::string &codec);

/* ---- consuming ---- */

struct Message {
	int32_t partition = -1;
	int64_t offset = -1;
	std::optional<std::string> key, value; /* nullopt = null */
	std::vector<Header> headers;
	int64_t timestamp = -1;
	rd_kafka_timestamp_type_t timestamp_type =
		RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
};

struct ConsumeSpec {
	std::string topic;
	int32_t partition = 0;
	int64_t from = 0;
	int64_t to = -1; /* exclusive; -1: the high watermark at the start */
	bool check_crcs = true;
	bool read_committed = false;
	Props conf; /* more librdkafka properties, applied last */
	int timeout_ms = 20000;
};

/* Every message of partition [from, to) with a librdkafka consumer (assign,
 * no group membership). Stops at the first consumer error, which it
 * returns (e.g. "... failed CRC32C check"): after a CRC failure librdkafka
 * 2.0.2 fetches from a wrong position, so nothing later is meaningful.
 * *out holds what arrived before. */
std::string consume(const std::string &bootstrap, const ConsumeSpec &spec,
		    std::vector<Message> *out);

/* The low and high watermarks of a partition, asked with a client. */
std::string watermarks(const std::string &bootstrap, const std::string &topic,
		       int32_t partition, int64_t *low, int64_t *high,
		       int timeout_ms = 10000);

/* The leader of a partition, from Metadata: its broker id and address. */
std::string partition_leader(const std::string &bootstrap,
			     const std::string &topic, int32_t partition,
			     int32_t *broker, std::string *host,
			     uint16_t *port, int timeout_ms = 10000);

/* Set every property; "" or "key=value: why" of the first refused. */
std::string conf_set_all(rd_kafka_conf_t *conf, const Props &props);

/* A librdkafka client of `type` with log_level 3 and then props;
 * `configure`, if given, runs on the conf last (callbacks, opaque).
 * nullptr and *err on failure. The caller rd_kafka_destroy()s it. */
rd_kafka_t *client_new(
	rd_kafka_type_t type, const Props &props, std::string *err,
	const std::function<void(rd_kafka_conf_t *)> &configure = nullptr);

} // namespace kmtest

#endif
