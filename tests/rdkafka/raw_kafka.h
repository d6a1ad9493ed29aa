/* A deliberately small Kafka client for tests: Fetch v4 and Produce v3 over
 * one blocking POSIX TCP socket, nothing else (no ApiVersions, no Metadata:
 * the caller talks to the partition leader it already knows).
 *
 * It exists so tests can see the exact bytes a broker stores and hand a
 * broker exact bytes to store, which no real client allows. It shares no
 * code with kmirror: every field is encoded and decoded here, by hand.
 *
 * Wire formats (all big-endian, non-flexible versions):
 *   request  = size int32 | apiKey int16 | apiVersion int16 |
 *              correlationId int32 | clientId STRING | body
 *   response = size int32 | correlationId int32 | body
 *   STRING = int16 length + bytes (-1 = null); BYTES = int32 length + bytes;
 *   ARRAY = int32 count + items (-1 = null).
 * Every wait is bounded (poll() with a deadline, tests/support/blocking_io.h);
 * errors come back as text.
 */
#ifndef KM_TESTS_RDKAFKA_RAW_KAFKA_H
#define KM_TESTS_RDKAFKA_RAW_KAFKA_H

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/blocking_io.h"

namespace rawkafka {

using Bytes = std::vector<uint8_t>;

/* "host:port" of the first entry of a bootstrap list (tests/support). */
using kmtest::parse_bootstrap;

/* One partition of a Fetch v4 response. */
struct FetchPartition {
	int16_t error = -1;
	int64_t high_watermark = -1;
	int64_t last_stable_offset = -1;
	int32_t aborted_count = -1; /* -1 = null array */
	Bytes records;		    /* the Records field, verbatim */
};

class Conn {
public:
	Conn() = default;
	~Conn();
	Conn(const Conn &) = delete;
	Conn &operator=(const Conn &) = delete;

	/* Connect to host:port (IPv4 literal). "" on success, else why not. */
	std::string connect(const std::string &host, uint16_t port,
			    int timeout_ms);

	/* Fetch v4 for one partition: ReplicaId -1, MinBytes 1, MaxBytes and
	 * partitionMaxBytes 1 MiB, IsolationLevel 0 (read uncommitted). */
	std::string fetch(const std::string &topic, int32_t partition,
			  int64_t offset, int32_t max_wait_ms,
			  FetchPartition *out);

	/* Produce v3 of `records` (one RecordBatch) to one partition, with
	 * TransactionalId null and Acks 1. *error is the partition's error
	 * code; *base_offset the offset the broker assigned. */
	std::string produce(const std::string &topic, int32_t partition,
			    const Bytes &records, int16_t *error,
			    int64_t *base_offset);

	/* Per-call I/O bound for one request/response round trip. */
	int io_timeout_ms = 5000;

private:
	std::string roundtrip(int16_t api_key, int16_t api_version,
			      const Bytes &body, Bytes *resp_body);

	int fd_ = -1;
	int32_t next_correlation_id_ = 1;
};

/* Split a Records blob into whole RecordBatches by their batchLength field.
 * A trailing partial batch (a broker may cut the last one) is dropped, as
 * consumers do. Returns false if a length is impossible (< 49). */
bool split_batches(const Bytes &records, std::vector<Bytes> *out);

/* baseOffset + lastOffsetDelta of a whole batch (decoded here, by hand). */
int64_t batch_last_offset(const Bytes &batch);

/* Every batch of topic/partition from `from` up to the high watermark. The
 * mock cluster returns one batch per Fetch, so this loops from the last
 * offset + 1, at most max_fetches times and for at most timeout_ms. */
std::string fetch_all(Conn &conn, const std::string &topic, int32_t partition,
		      int64_t from, int max_fetches, int timeout_ms,
		      std::vector<Bytes> *batches);

} // namespace rawkafka

#endif
