/* A hostile source cluster for end-to-end tests: one fake Kafka broker on
 * 127.0.0.1 (random port), served by one thread, that speaks the protocol
 * with kmirror's own codecs (kafka/proto.h) and can be told, request by
 * request, to misbehave.
 *
 * It answers ApiVersions v0-3, Metadata v0-4 (or up to v12, which names
 * the topic id, when metadata_max_version says so; itself as the only
 * broker, leader of every partition; a configurable cluster id and topic
 * id; one topic with N partitions), ListOffsets v0-5 and Fetch v4-11 from
 * the record batches the
 * test gives per partition (whole batches from the one holding the fetch
 * offset, at least one, up to PartitionMaxBytes and max_batches_per_fetch).
 * A Fetch at the end of the partition waits MaxWaitMs, as Kafka does, so a
 * caught-up client does not spin.
 *
 * A fault hook sees every request (api key, version, connection, counts,
 * partition and offset) and picks what to send instead of the answer: see
 * enum class Fault. It runs on the broker's thread. Counters (connections,
 * requests per api key, faults applied) are atomics the test may read at
 * any time.
 *
 * The cluster behind the address can be replaced while it runs
 * (replace), or change under its clients' feet (change):
 * another cluster id or topic id, other batches, partitions it lacks.
 *
 * No googletest here: errors come back as text ("" = ok).
 */
#ifndef KM_TESTS_E2E_FAKE_SOURCE_H
#define KM_TESTS_E2E_FAKE_SOURCE_H

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kmtest {

/* What the fake sends for one request. */
enum class Fault {
	kNone = 0,
	/* A frame of the right size whose body after the correlation id is
	 * random bytes. */
	kGarbage,
	/* A size field of 0x7ffffff0 (almost 2 GiB), the first bytes of the
	 * real answer, then silence on an open connection. */
	kHugeSize,
	/* A size field of -256, the first bytes of the real answer, then
	 * silence on an open connection. */
	kNegativeSize,
	/* The first half of the real answer, then the connection is closed. */
	kTruncateClose,
	/* The first half of the real answer, then silence on an open
	 * connection (a broker hung mid-response). */
	kTruncateStall,
	/* Fetch only: the real answer with one byte flipped inside the records
	 * of one batch, its stored CRC kept (see FaultAction::crc_offset). */
	kBadCrc,
	/* The real answer under another correlation id (the one asked + 7). */
	kWrongCorrelation,
	/* No answer at all; the connection stays open and silent. */
	kStall,
	/* Fetch only: the real answer with the baseOffset of one batch
	 * rewritten to FaultAction::base_offset_to. baseOffset is outside the
	 * CRC, so the batch still checks (see FaultAction::crc_offset). */
	kBadBaseOffset,
	kCount,
};

const char *fault_name(Fault f);

struct FaultAction {
	Fault fault = Fault::kNone;
	/* kBadCrc, kBadBaseOffset: spoil the batch holding this offset if the
	 * answer carries it (else send the answer untouched, and count no
	 * fault); -1: the first batch of the answer. */
	int64_t crc_offset = -1;
	/* kBadCrc, kBadBaseOffset: only a batch of this partition; -1: of
	 * any. */
	int32_t crc_partition = -1;
	/* kBadBaseOffset: the baseOffset written into the batch. */
	int64_t base_offset_to = 0;
};

/* One request, as the fault hook sees it. */
struct FakeRequest {
	int16_t api_key = -1;
	int16_t api_version = -1;
	int32_t correlation_id = 0;
	std::string client_id;
	uint64_t conn = 0;	   /* connection number, from 1 */
	uint64_t conn_request = 0; /* request number on it, from 1 */
	uint64_t api_count = 0;	   /* requests of this api key so far, this
				      one included */
	/* Fetch and ListOffsets: the first partition asked, its FetchOffset
	 * (ListOffsets: its Timestamp), and how many requests of this api key
	 * named this partition so far, this one included. */
	int32_t partition = -1;
	int64_t offset = -1;
	uint64_t part_count = 0;
	/* Every partition asked, in request order (a fetch session names all
	 * the partitions it carries in one request). */
	struct Part {
		int32_t partition = -1;
		int64_t offset = -1;
		uint64_t count = 0; /* as part_count, for this partition */
	};
	std::vector<Part> parts;
	/* Partition p if the request names it, else nullptr. */
	const Part *part(int32_t p) const
	{
		for (const Part &x : parts)
			if (x.partition == p)
				return &x;
		return nullptr;
	}
};

using FaultHook = std::function<FaultAction(const FakeRequest &)>;

/* One record of a batch the fake serves, as a consumer should see it. */
struct SourceRecord {
	int64_t offset = -1;
	int64_t timestamp = -1;
	std::optional<std::string> key, value;
	std::vector<std::pair<std::string, std::optional<std::string>>> headers;
};

/* Uncompressed RecordBatch v2 bytes (km_records_build), back to back from
 * offset 0 of a partition: `batches` batches of `records` records each,
 * idempotent-style (producer id 7000 + partition, epoch 0, sequence =
 * offset), with keys, values (some null, some empty) and headers that
 * depend on (partition, offset). The records a consumer should read are
 * appended to *expect. Throws nothing; an empty vector on a build error. */
std::vector<std::string> build_batches(int32_t partition, int batches,
				       int records,
				       std::vector<SourceRecord> *expect,
				       const std::string &tag = "");

/* tag: text in every value, so that two sources' records differ ("" as
 * before). */

/* A topic id (16 bytes; all zero: Kafka's "no id"). */
using TopicId = std::array<uint8_t, 16>;
/* A topic id whose bytes are all `b`; and its Uuid text (22 characters). */
TopicId topic_id_of(uint8_t b);
std::string topic_id_text(const TopicId &id);

/* Base offset and last offset of a batch's bytes. */
int64_t batch_base_offset(const std::string &batch);
int64_t batch_last_offset(const std::string &batch);

struct FakeSourceConfig {
	std::string topic = "hostile";
	std::string cluster_id = "fake-source-cluster";
	TopicId topic_id = {}; /* sent at Metadata v10+ */
	/* Highest Metadata version advertised: 4 (no topic ids), up to 12. */
	int16_t metadata_max_version = 4;
	int32_t node_id = 1;
	/* Batches per partition (the partition count is its size). */
	std::vector<std::vector<std::string>> partitions;
	/* At most this many batches per Fetch answer (0: no limit but
	 * PartitionMaxBytes), so that a partition takes several Fetches. */
	int max_batches_per_fetch = 0;
	/* Partitions from this one on are not there (-1: all are; 0: the
	 * topic is not): Metadata leaves them out, Fetch and ListOffsets
	 * answer UNKNOWN_TOPIC_OR_PARTITION. */
	int32_t hidden_from = -1;
	uint64_t garbage_seed = 1;
};

class FakeSource {
public:
	explicit FakeSource(FakeSourceConfig cfg);
	~FakeSource();
	FakeSource(const FakeSource &) = delete;
	FakeSource &operator=(const FakeSource &) = delete;

	/* Listen on 127.0.0.1:0 and start the thread. */
	std::string start();
	/* Stop the thread and close every connection (the destructor does). */
	void stop();

	/* Replace the hook (nullptr: no faults). Takes effect at the next
	 * request. */
	void set_fault_hook(FaultHook hook);

	/* The source changes under its clients' feet from the next request on
	 * (a topic deleted, made again): `fn` edits the configuration at once,
	 * between two answers, connections kept. The partition count must
	 * stay. */
	void change(const std::function<void(FakeSourceConfig &)> &fn);
	/* Another cluster behind the address: on the broker thread, between
	 * two requests, `change` edits the configuration (nullptr: none) and
	 * every open connection is closed, so no answer of the new cluster
	 * ever goes out on a connection to the old one. Returns once done
	 * (or after 10 s). The partition count must stay. */
	void replace(std::function<void(FakeSourceConfig &)> change);

	uint16_t port() const { return port_; }
	std::string bootstrap() const
	{
		return "127.0.0.1:" + std::to_string(port_);
	}
	const std::string &topic() const { return cfg_.topic; }
	int32_t partitions() const
	{
		std::lock_guard<std::mutex> g(cfg_mu_);
		return (int32_t)cfg_.partitions.size();
	}
	/* The offset after the last batch of a partition (its high
	 * watermark). */
	int64_t end_offset(int32_t partition) const;

	uint64_t connections() const { return conns_.load(); }
	uint64_t requests(int16_t api_key) const;
	/* Fetch requests that named this partition. */
	uint64_t fetches(int32_t partition) const;
	uint64_t faults_applied(Fault f) const;
	/* A protocol error of the fake itself (a request it could not decode),
	 * or "". */
	std::string error() const;

	struct Conn;   /* private */
	struct Answer; /* private */

private:
	void run();
	bool drop_if_asked();
	void accept_all();
	void service(Conn *c, short revents, uint64_t now);
	bool handle_request(Conn *c, const std::string &frame, uint64_t now);
	bool answer(const std::string &frame, FakeRequest *rq, Answer *a);
	void apply(Conn *c, const FaultAction &act, const FakeRequest &rq,
		   Answer *a, uint64_t now);
	void fail(const std::string &why);

	mutable std::mutex cfg_mu_; /* cfg_ */
	FakeSourceConfig cfg_;
	std::mutex drop_mu_;
	std::condition_variable drop_cv_;
	/* under drop_mu_ */
	std::vector<std::function<void(FakeSourceConfig &)>> changes_;
	uint64_t drop_asked_ = 0, drop_done_ = 0;
	int lfd_ = -1, wake_[2] = { -1, -1 };
	uint16_t port_ = 0;
	std::thread th_;
	std::atomic<bool> stop_{ false };
	std::vector<Conn *> live_;
	mutable std::mutex mu_; /* hook_ and err_ */
	FaultHook hook_;
	std::string err_;
	uint64_t rng_;
	std::atomic<uint64_t> conns_{ 0 };
	std::atomic<uint64_t> by_api_[64] = {};
	std::vector<std::atomic<uint64_t>> by_part_fetch_;
	std::vector<std::atomic<uint64_t>> by_part_lo_;
	std::atomic<uint64_t> faults_[(int)Fault::kCount] = {};
};

} // namespace kmtest

#endif
