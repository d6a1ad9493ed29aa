/* kmirror-demo-segment OUT.log: write a small segment holding what a mirror
 * writes, for `./kmirror demo` and the dump tool's tests.
 *
 * Each "source" batch is built as the source cluster's producer wrote it
 * (positive producer ids), then goes through the mirror's per-batch work:
 * frame and verify it (km_batch_parse), map its producer id in place with the
 * O(1) CRC patch (R1, km_batch_map_pid), append it at its source offset. The
 * log therefore shows idempotent data from producer 5000 as -5002, a
 * committed and an aborted transaction of transactional producer 5001 as
 * -5003, a non-idempotent batch whose -1 passes unchanged, and finally the
 * MIRROR_PID_RESET barrier the mirror appends on stop (R3, R4 step 4).
 *
 * Every value is fixed (timestamps included), so the segment is the same
 * byte for byte on every run.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/chain.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/km_limits.h"
#include "kafka/batch.h"
#include "kafka/control.h"
#include "kafka/records.h"

#define PROG "kmirror-demo-segment"

/* The demo writes about 1 KiB; this leaves ample room and lives in .bss. */
#define DEMO_SEGMENT_BYTES_MAX (64u * 1024)

/* 2026-01-01T00:00:00Z: fixed so the demo output is reproducible. */
#define DEMO_TS_MS INT64_C(1767225600000)

/* The source partition's leader epoch, and the one a local append uses after
 * the stop: "a leader epoch above any mirrored one" (R6). */
#define SOURCE_LEADER_EPOCH 7
#define LOCAL_LEADER_EPOCH 8

#define IDEMPOTENT_PID 5000	 /* mirrored as -5002 */
#define TRANSACTIONAL_PID 5001	 /* mirrored as -5003 */
#define TRANSACTIONAL_EPOCH 2
#define COORDINATOR_EPOCH 4

/* A 22-character base64 UUID, the form Kafka cluster ids take. */
#define SOURCE_CLUSTER_ID "Zm9vYmFyYmF6cXV4cXV1eA"

struct demo_seg {
	uint8_t mem[DEMO_SEGMENT_BYTES_MAX];
	size_t len;
	int64_t next_offset; /* offsets are consecutive: no compaction gaps */
};

/* What a source producer sent, before the mirror touches it. */
struct source_batch {
	int64_t producer_id;
	int16_t producer_epoch;
	int32_t base_sequence;
	bool transactional;
	const struct km_record_spec *recs;
	int32_t n;
};

/* The mirror's per-batch work on a batch just written at seg->len: frame and
 * verify it, then map its producer id and patch the CRC in place (R1). */
static void mirror_append(struct demo_seg *seg, int size)
{
	struct iovec iov = { seg->mem + seg->len, (size_t)size };
	struct km_chain chain = { &iov, 1 };
	struct km_batch b;
	int rc = km_batch_parse(&b, &chain, km_chain_start(&chain),
				KM_BATCH_BYTES_MAX);

	KM_ASSERT(rc == size);
	rc = km_batch_map_pid(&b);
	KM_ASSERT(rc >= 0);
	/* Pair assertion: the patched CRC equals a full recompute. */
	KM_ASSERT(km_batch_verify_crc(&b) == 0);
	seg->len += (size_t)size;
	seg->next_offset = km_batch_last_offset(&b) + 1;
}

static void add_data(struct demo_seg *seg, const struct source_batch *src)
{
	struct km_batch_spec spec = {
		.base_offset = seg->next_offset,
		.leader_epoch = SOURCE_LEADER_EPOCH,
		.attributes = src->transactional ? KM_BATCH_ATTR_TRANSACTIONAL : 0,
		.producer_id = src->producer_id,
		.producer_epoch = src->producer_epoch,
		.base_sequence = src->base_sequence,
	};
	int size = km_records_build(seg->mem + seg->len, sizeof(seg->mem) - seg->len,
				    &spec, src->recs, src->n);

	KM_ASSERT(size > 0);
	mirror_append(seg, size);
}

/* The transaction coordinator's marker for producer 5001, as mirrored. */
static void add_marker(struct demo_seg *seg, bool commit, int64_t ts)
{
	struct km_ctrl_spec s = {
		.base_offset = seg->next_offset,
		.leader_epoch = SOURCE_LEADER_EPOCH,
		.timestamp = ts,
	};
	int size = km_ctrl_build_marker(seg->mem + seg->len,
					sizeof(seg->mem) - seg->len, &s,
					TRANSACTIONAL_PID, TRANSACTIONAL_EPOCH,
					commit, COORDINATOR_EPOCH);

	KM_ASSERT(size == KM_CTRL_MARKER_BATCH_BYTES);
	mirror_append(seg, size);
}

/* The barrier is the mirror's own append, not a copy, so it is not mapped:
 * its producerId -1 must stay -1 anyway (R3). */
static void add_barrier(struct demo_seg *seg, int64_t ts)
{
	struct km_ctrl_spec s = {
		.base_offset = seg->next_offset,
		.leader_epoch = LOCAL_LEADER_EPOCH,
		.timestamp = ts,
	};
	int size = km_ctrl_build_pid_reset(seg->mem + seg->len,
					   sizeof(seg->mem) - seg->len, &s,
					   SOURCE_CLUSTER_ID);

	KM_ASSERT(size > 0);
	seg->len += (size_t)size;
	seg->next_offset++;
}

#define STR(s) s, (int32_t)(sizeof(s) - 1)

static const struct km_record_header_spec web_hdrs[] = {
	{ .key = "trace-id", STR("4bf92f3577b34da6") },
	{ .key = "content-type", STR("application/json") },
};
static const struct km_record_header_spec pay_hdrs[] = {
	{ .key = "trace-id", STR("a3ce929d0e0e4736") },
};

static const struct km_record_spec orders[] = {
	{ STR("order-1001"), STR("{\"item\":\"book\",\"qty\":1}"), DEMO_TS_MS, web_hdrs, 2 },
	{ STR("order-1002"), STR("{\"item\":\"lamp\",\"qty\":2}"), DEMO_TS_MS + 5, web_hdrs, 2 },
	{ STR("order-1003"), STR("{\"item\":\"desk\",\"qty\":1}"), DEMO_TS_MS + 9, web_hdrs, 1 },
};
static const struct km_record_spec more_orders[] = {
	{ STR("order-1004"), STR("{\"item\":\"pen\",\"qty\":10}"), DEMO_TS_MS + 1000, NULL, 0 },
	/* A tombstone: null value. */
	{ STR("order-1001"), NULL, -1, DEMO_TS_MS + 1002, NULL, 0 },
};
static const struct km_record_spec payments[] = {
	{ STR("pay-77"), STR("{\"order\":1002,\"eur\":49.90}"), DEMO_TS_MS + 2000, pay_hdrs, 1 },
	{ STR("pay-78"), STR("{\"order\":1003,\"eur\":120.00}"), DEMO_TS_MS + 2001, pay_hdrs, 1 },
};
static const struct km_record_spec refund[] = {
	{ STR("pay-79"), STR("{\"order\":1004,\"eur\":-3.50}"), DEMO_TS_MS + 3000, pay_hdrs, 1 },
};
static const struct km_record_spec heartbeat[] = {
	/* Null key: a plain (non-idempotent) producer. */
	{ NULL, -1, STR("heartbeat"), DEMO_TS_MS + 4000, NULL, 0 },
};

static void build_demo(struct demo_seg *seg)
{
	const struct source_batch data[] = {
		{ IDEMPOTENT_PID, 0, 0, false, orders, 3 },
		{ IDEMPOTENT_PID, 0, 3, false, more_orders, 2 },
		{ TRANSACTIONAL_PID, TRANSACTIONAL_EPOCH, 0, true, payments, 2 },
		{ TRANSACTIONAL_PID, TRANSACTIONAL_EPOCH, 2, true, refund, 1 },
		{ -1, -1, -1, false, heartbeat, 1 },
	};

	add_data(seg, &data[0]);
	add_data(seg, &data[1]);
	add_data(seg, &data[2]);
	add_marker(seg, true, DEMO_TS_MS + 2500);
	add_data(seg, &data[3]);
	add_marker(seg, false, DEMO_TS_MS + 3500);
	add_data(seg, &data[4]);
	add_barrier(seg, DEMO_TS_MS + 5000);
}

/* Write all of buf and make it durable. @return 0 or -errno. */
static int write_file(const char *path, const uint8_t *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int rc = 0;

	if (fd < 0)
		return -errno;
	/* Bounded: each pass writes at least one byte or fails. */
	while (len > 0 && rc == 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno != EINTR)
			rc = -errno;
		if (n == 0)
			rc = -EIO; /* no progress: do not spin */
		if (n > 0) {
			buf += n;
			len -= (size_t)n;
		}
	}
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

int main(int argc, char **argv)
{
	static struct demo_seg seg;
	int rc;

	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: " PROG " OUT.log\n");
		return 2;
	}
	build_demo(&seg);
	rc = write_file(argv[1], seg.mem, seg.len);
	if (rc < 0) {
		fprintf(stderr, PROG ": %s: %s\n", argv[1], km_strerror(rc));
		return 1;
	}
	return 0;
}
