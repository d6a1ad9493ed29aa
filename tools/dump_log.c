/* kmirror-dump-log: print .log segments the way Apache Kafka's
 * kafka-dump-log.sh (core/.../tools/DumpLogSegments.scala, dumpLog and
 * printBatchLevel) prints them, so the output of a mirror and of a Kafka
 * broker can be compared line by line (spec/kafka-formats.md §8).
 *
 * Kafka's own tool maps control type 7 to UNKNOWN; this one also decodes
 * kmirror's MIRROR_PID_RESET barrier (R3) as the KIP-1279 prototype does.
 *
 * A segment is read in 1 MiB chunks into one buffer and framed with
 * km_batch_parse() over a one-segment chain. A batch larger than the buffer
 * grows it, up to KM_BATCH_BYTES_MAX. A batch with a bad CRC is still printed
 * (isvalid: false), as Kafka does; any other framing error ends the file with
 * Kafka's "Found N invalid bytes at the end of" line.
 *
 * Exit status: 0 if every file could be read, 1 if any could not (or stdout
 * failed), 2 on a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/chain.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/km_limits.h"
#include "kafka/batch.h"
#include "kafka/control.h"
#include "kafka/records.h"

#define PROG "kmirror-dump-log"

/* Bytes read per read(2); also the buffer's starting size. Batches are
 * usually far smaller (message.max.bytes defaults to ~1 MiB). */
#define READ_CHUNK_BYTES (1u << 20)

/* A read(2) interrupted by a signal is retried at most this many times; the
 * tool installs no handlers, so EINTR is not expected at all. */
#define EINTR_RETRIES_MAX 64

/* The read buffer, kept across files so it is allocated once per run. */
struct dump_buf {
	uint8_t *mem;
	size_t cap; /* READ_CHUNK_BYTES .. KM_BATCH_BYTES_MAX */
};

/* One open segment and the window of it held in the buffer. */
struct seg {
	const char *path;
	int fd;
	struct dump_buf *buf;
	size_t len;	  /* file bytes held in buf->mem */
	size_t at;	  /* buf->mem offset of the next batch */
	uint64_t buf_pos; /* file position of buf->mem[0] */
	bool eof;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: " PROG " [--deep] FILE...\n"
		"Print Kafka .log segments as kafka-dump-log.sh does.\n"
		"  --deep, --deep-iteration  also print every record\n");
}

/* ---- number formatting, with Java's wrapping int arithmetic ---- */

/* DefaultRecordBatch.incrementSequence: sequences wrap past INT32_MAX to 0.
 * Computed in uint32 so hostile header values print what Java would print
 * instead of overflowing a signed int. */
static int32_t inc_sequence(int32_t seq, int32_t inc)
{
	int32_t room = (int32_t)((uint32_t)INT32_MAX - (uint32_t)inc);

	if (seq > room)
		return (int32_t)((uint32_t)inc - ((uint32_t)INT32_MAX - (uint32_t)seq) -
				 1u);
	return (int32_t)((uint32_t)seq + (uint32_t)inc);
}

/* baseOffset is outside the CRC, so it may hold anything: add as Java does. */
static int64_t add_offset(int64_t base, int32_t delta)
{
	return (int64_t)((uint64_t)base + (uint64_t)(int64_t)delta);
}

static const char *bool_str(bool v)
{
	return v ? "true" : "false";
}

static const char *ts_type(const struct km_batch *b)
{
	return km_batch_is_log_append_time(b) ? "LogAppendTime" : "CreateTime";
}

/* ---- batch level ---- */

/* printBatchLevel for magic 2: one line per batch. Kafka's isValid is
 * exactly "the CRC matches", which the caller knows from km_batch_parse. */
static void print_batch(const struct km_batch *b, uint64_t pos, bool crc_ok)
{
	int32_t base_seq = km_batch_base_sequence(b);
	int32_t last_seq = base_seq == -1
				   ? -1
				   : inc_sequence(base_seq,
						  km_batch_last_offset_delta(b));

	printf("baseOffset: %" PRId64 " lastOffset: %" PRId64 " count: %" PRId32
	       " baseSequence: %" PRId32 " lastSequence: %" PRId32
	       " producerId: %" PRId64 " producerEpoch: %d"
	       " partitionLeaderEpoch: %" PRId32
	       " isTransactional: %s isControl: %s deleteHorizonMs: ",
	       km_batch_base_offset(b),
	       add_offset(km_batch_base_offset(b), km_batch_last_offset_delta(b)),
	       km_batch_records_count(b), base_seq, last_seq,
	       km_batch_producer_id(b), km_batch_producer_epoch(b),
	       km_batch_leader_epoch(b), bool_str(km_batch_is_transactional(b)),
	       bool_str(km_batch_is_control(b)));
	/* Java's OptionalLong.toString; the horizon lives in baseTimestamp. */
	if (km_batch_has_delete_horizon(b))
		printf("OptionalLong[%" PRId64 "]", km_batch_base_timestamp(b));
	else
		fputs("OptionalLong.empty", stdout);
	printf(" position: %" PRIu64 " %s: %" PRId64 " size: %" PRIu32
	       " magic: %d compresscodec: %s crc: %" PRIu32 " isvalid: %s\n",
	       pos, ts_type(b), km_batch_max_timestamp(b), km_batch_size(b),
	       km_batch_magic(b), km_codec_name(km_batch_codec(b)),
	       km_batch_crc(b), bool_str(crc_ok));
}

/* A view of a framed batch whose CRC (or header sanity) check failed, so its
 * header can still be printed. km_batch_parse() has already checked that the
 * length is sane and the whole batch is in the chain. */
static void view_unchecked(struct km_batch *b, const struct km_chain *chain,
			   struct km_chain_cur cur)
{
	size_t n = km_chain_copy(chain, cur, b->hdr, sizeof(b->hdr));

	KM_ASSERT(n == sizeof(b->hdr));
	b->chain = chain;
	b->start = cur;
	b->size_bytes = (uint32_t)km_batch_length(b) + KM_BATCH_LOG_OVERHEAD;
}

/* ---- record level (--deep) ---- */

/* Raw bytes of a key, copied out of the chain in small pieces. */
static void put_bytes(const struct km_chain *chain, struct km_chain_cur cur,
		      uint32_t len)
{
	uint8_t tmp[256];

	while (len > 0) { /* bounded: len shrinks every pass or we stop */
		size_t want = len < sizeof(tmp) ? len : sizeof(tmp);
		size_t n = km_chain_copy(chain, cur, tmp, want);

		if (n == 0 || km_chain_advance(chain, &cur, n) < 0)
			return;
		fwrite(tmp, 1, n, stdout);
		len -= (uint32_t)n;
	}
}

/* headerKeys: [k1,k2]. Each header is read from the one before it (a copy of
 * the record whose first header moves along), so a record with many headers
 * costs linear time, not the quadratic walk of km_record_header_get(i). */
static void print_header_keys(const struct km_batch *b,
			      const struct km_chain *chain,
			      const struct km_record *r)
{
	struct km_record rest = *r;
	struct km_record_header h;

	fputs(" headerKeys: [", stdout);
	for (int32_t i = 0; i < r->header_count; i++) {
		if (km_record_header_get(b, &rest, 0, &h) < 0)
			break;
		if (i > 0)
			putchar(',');
		put_bytes(chain, h.key, (uint32_t)h.key_len);
		rest.headers = h.value;
		if (km_chain_advance(chain, &rest.headers,
				     h.value_len > 0 ? (size_t)h.value_len : 0) < 0)
			break;
		rest.header_count--;
	}
	putchar(']');
}

/* A JSON string as Jackson writes it: quote, backslash and control bytes
 * escaped; other bytes (UTF-8) as they are. */
static void put_json_string(const char *s, uint32_t len)
{
	putchar('"');
	for (uint32_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c == '\n')
			fputs("\\n", stdout);
		else if (c == '\r')
			fputs("\\r", stdout);
		else if (c == '\t')
			fputs("\\t", stdout);
		else if (c == '\b')
			fputs("\\b", stdout);
		else if (c == '\f')
			fputs("\\f", stdout);
		else if (c < 0x20)
			printf("\\u%04X", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* The control part of a record line, from the batch's control record.
 * Types Kafka decodes to JSON that kmirror does not (LEADER_CHANGE ..
 * KRAFT_VOTERS) use Kafka's fallback form, "controlType: NAME(id)". */
static void print_control(const struct km_batch *b)
{
	struct km_ctrl ctrl;
	int rc = km_ctrl_parse(b, &ctrl);

	if (rc < 0) {
		printf(" controlRecord: invalid (%s)", km_strerror(rc));
		return;
	}
	switch (ctrl.type) {
	case KM_CTRL_ABORT:
	case KM_CTRL_COMMIT:
		printf(" endTxnMarker: %s coordinatorEpoch: %" PRId32,
		       km_ctrl_type_name(ctrl.type), ctrl.coordinator_epoch);
		return;
	case KM_CTRL_MIRROR_PID_RESET:
		printf(" MirrorPidReset {\"version\":%d,\"sourceClusterId\":",
		       ctrl.value_version);
		put_json_string(ctrl.cluster_id, ctrl.cluster_id_len);
		putchar('}');
		return;
	default:
		printf(" controlType: %s(%d)", km_ctrl_type_name(ctrl.type),
		       ctrl.type);
		return;
	}
}

/* A control record after the batch's first. Kafka writes exactly one per
 * control batch and km_ctrl_parse() decodes only the first, so later ones
 * get their type from the key alone. */
static void print_control_key(const struct km_chain *chain,
			      const struct km_record *r)
{
	uint8_t key[KM_CTRL_KEY_BYTES];
	int16_t type;

	if (r->key_len < KM_CTRL_KEY_BYTES ||
	    km_chain_copy(chain, r->key, key, sizeof(key)) != sizeof(key) ||
	    (int16_t)km_load_be16(key) < 0) {
		printf(" controlRecord: invalid (%s)", km_strerror(KM_ECTRLKEY));
		return;
	}
	type = (int16_t)km_load_be16(key + 2);
	printf(" controlType: %s(%d)", km_ctrl_type_name(type), type);
}

/* One "| offset: ..." line, as dumpLog prints it for magic 2. */
static void print_record(const struct km_batch *b, const struct km_chain *chain,
			 const struct km_record *r, uint32_t index)
{
	int32_t base_seq = km_batch_base_sequence(b);
	/* DefaultRecord.readFrom: LogAppendTime replaces every record's
	 * timestamp with the batch's maxTimestamp; the sequence exists only
	 * for baseSequence >= 0. */
	int64_t ts = km_batch_is_log_append_time(b) ? km_batch_max_timestamp(b)
						    : r->timestamp;
	int32_t seq = base_seq >= 0 ? inc_sequence(base_seq, r->offset_delta)
				    : -1;

	printf("| offset: %" PRId64 " %s: %" PRId64 " keySize: %" PRId32
	       " valueSize: %" PRId32 " sequence: %" PRId32,
	       add_offset(km_batch_base_offset(b), r->offset_delta), ts_type(b),
	       ts, r->key_len, r->value_len, seq);
	print_header_keys(b, chain, r);
	if (km_batch_is_control(b) && index == 0)
		print_control(b);
	else if (km_batch_is_control(b))
		print_control_key(chain, r);
	putchar('\n');
}

/* records.c computes a record's offset as baseOffset + offsetDelta in int64;
 * baseOffset is not covered by the CRC, so refuse to iterate where that sum
 * could overflow rather than hand the library undefined behaviour. */
static bool offsets_fit(const struct km_batch *b)
{
	int64_t base = km_batch_base_offset(b);

	return base <= INT64_MAX - INT32_MAX && base >= INT64_MIN - INT32_MIN;
}

/* Every record of the batch, or one line saying why they are not shown. */
static void print_records(const struct km_batch *b, const struct km_chain *chain)
{
	struct km_records_iter it;
	struct km_record r;
	int rc;

	if (km_batch_codec(b) != KM_CODEC_NONE) {
		printf("| records compressed with %s: not decoded\n",
		       km_codec_name(km_batch_codec(b)));
		return;
	}
	if (!offsets_fit(b)) {
		printf("| records not decoded: baseOffset too close to the int64 limit\n");
		return;
	}
	rc = km_records_begin(&it, b);
	/* Bounded: each record takes at least one byte of the batch. */
	for (uint32_t i = 0; rc == 0 && i <= km_batch_size(b); i++) {
		rc = km_records_next(&it, &r);
		if (rc > 0) {
			print_record(b, chain, &r, i);
			rc = 0;
		} else if (rc == 0) {
			break;
		}
	}
	if (rc < 0)
		printf("| invalid records: %s\n", km_strerror(rc));
}

/* ---- reading a segment ---- */

static int grow(struct dump_buf *buf, size_t want)
{
	uint8_t *mem;

	KM_ASSERT(want <= KM_BATCH_BYTES_MAX);
	if (want <= buf->cap)
		return 0;
	mem = realloc(buf->mem, want);
	if (mem == NULL)
		return -ENOMEM;
	buf->mem = mem;
	buf->cap = want;
	return 0;
}

/* Move the unread tail to the front of the buffer, make room for want bytes,
 * and read once. @return bytes read (0 at end of file), or -errno. */
static ssize_t fill(struct seg *s, size_t want)
{
	ssize_t n = -1;
	int rc;

	memmove(s->buf->mem, s->buf->mem + s->at, s->len - s->at);
	s->buf_pos += s->at;
	s->len -= s->at;
	s->at = 0;
	if ((rc = grow(s->buf, want)) < 0)
		return rc;
	KM_ASSERT(s->len < s->buf->cap);
	for (int i = 0; i < EINTR_RETRIES_MAX; i++) {
		n = read(s->fd, s->buf->mem + s->len, s->buf->cap - s->len);
		if (n >= 0 || errno != EINTR)
			break;
	}
	if (n < 0)
		return -errno;
	s->len += (size_t)n;
	s->eof = n == 0;
	return n;
}

/* Size of the batch that starts at s->at, once its length is readable;
 * km_batch_parse() has checked it lies in 61..KM_BATCH_BYTES_MAX. */
static size_t pending_size(const struct seg *s)
{
	if (s->len - s->at < KM_BATCH_LOG_OVERHEAD)
		return 0;
	return (size_t)km_load_be32(s->buf->mem + s->at + KM_BATCH_OFF_LENGTH) +
	       KM_BATCH_LOG_OVERHEAD;
}

/* The bytes from the first unframeable one to the end of the file: Kafka's
 * "fileRecords.sizeInBytes - validBytes". Reads the rest to count it, so it
 * is right for pipes and files that are still growing. */
static int report_trailing(struct seg *s)
{
	uint64_t invalid = s->len - s->at;
	const char *name = strrchr(s->path, '/');
	ssize_t n = 1;

	/* Bounded by the file size: each pass reads at least one byte. */
	while (n > 0) {
		s->at = s->len;
		n = fill(s, 0);
		invalid += n > 0 ? (uint64_t)n : 0;
	}
	if (n < 0)
		return (int)n;
	/* Kafka names the file by file.getName, without its directory. */
	if (invalid > 0)
		printf("Found %" PRIu64 " invalid bytes at the end of %s\n",
		       invalid, name != NULL ? name + 1 : s->path);
	return 0;
}

/* Codes after which the bytes cannot be framed as a batch: Kafka's
 * FileLogInputStream stops there too. */
static bool ends_scan(int rc)
{
	return rc == KM_EBATCHLEN || rc == KM_EBATCHMAX || rc == KM_EBADMAGIC;
}

static void note_stop(const struct seg *s, int rc)
{
	fflush(stdout);
	fprintf(stderr, PROG ": %s: no batch at position %" PRIu64 ": %s\n",
		s->path, s->buf_pos + s->at, km_strerror(rc));
}

/* Print every batch of an open segment. @return 0, or -errno on a read
 * error. Terminates: each pass frames a batch (s->at grows by at least 61),
 * reads at least one byte, reaches end of file, or returns. */
static int scan(struct seg *s, bool deep)
{
	for (;;) {
		struct iovec iov = { s->buf->mem + s->at, s->len - s->at };
		struct km_chain chain = { &iov, 1 };
		struct km_chain_cur cur = km_chain_start(&chain);
		struct km_batch b;
		int rc = km_batch_parse(&b, &chain, cur, KM_BATCH_BYTES_MAX);
		ssize_t n;

		if (rc == 0 && !s->eof) {
			if ((n = fill(s, pending_size(s))) < 0)
				return (int)n;
			continue;
		}
		if (ends_scan(rc))
			note_stop(s, rc);
		if (rc == 0 || ends_scan(rc))
			return report_trailing(s);
		/* KM_EBADCRC and KM_EBATCHHDR come after framing: print it. */
		if (rc < 0)
			view_unchecked(&b, &chain, cur);
		print_batch(&b, s->buf_pos + s->at, rc != KM_EBADCRC);
		if (deep)
			print_records(&b, &chain);
		s->at += km_batch_size(&b);
	}
}

/* The base offset in a segment's name (00000000000000000042.log -> 42), or 0
 * when the name before the first dot is not a decimal int64. */
static int64_t start_offset(const char *path)
{
	const char *name = strrchr(path, '/');
	uint64_t v = 0;
	int digits = 0;

	name = name != NULL ? name + 1 : path;
	for (; *name >= '0' && *name <= '9' && digits <= 20; name++, digits++) {
		if (v > ((uint64_t)INT64_MAX - (uint64_t)(*name - '0')) / 10)
			return 0;
		v = v * 10 + (uint64_t)(*name - '0');
	}
	if (digits == 0 || (*name != '.' && *name != '\0'))
		return 0;
	return (int64_t)v;
}

/* dumpLog for one file. @return 0, or -errno if it could not be read. */
static int dump_file(const char *path, bool deep, struct dump_buf *buf)
{
	struct seg s = { .path = path, .buf = buf };
	int rc;

	printf("Dumping %s\n", path);
	s.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (s.fd < 0)
		return -errno;
	printf("Log starting offset: %" PRId64 "\n", start_offset(path));
	rc = scan(&s, deep);
	close(s.fd);
	return rc;
}

/* True if arg names a file; "--" ends the options (and is not a file). */
static bool is_file_arg(const char *arg, bool *opts_done)
{
	if (*opts_done)
		return true;
	if (strcmp(arg, "--") == 0) {
		*opts_done = true;
		return false;
	}
	return arg[0] != '-' || arg[1] == '\0';
}

/* Options may come anywhere before "--", as with getopt's permutation.
 * @return -1 to go on, or the exit status to end with. */
static int parse_options(int argc, char **argv, bool *deep)
{
	bool opts_done = false;
	int nfiles = 0;

	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];

		if (is_file_arg(arg, &opts_done)) {
			nfiles++;
		} else if (opts_done) {
			continue; /* the "--" itself */
		} else if (!strcmp(arg, "--deep") ||
			   !strcmp(arg, "--deep-iteration")) {
			*deep = true;
		} else if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, PROG ": unknown option %s\n", arg);
			usage(stderr);
			return 2;
		}
	}
	if (nfiles > 0)
		return -1;
	usage(stderr);
	return 2;
}

int main(int argc, char **argv)
{
	struct dump_buf buf = { 0 };
	bool deep = false, opts_done = false;
	int status = parse_options(argc, argv, &deep);

	if (status >= 0)
		return status;
	status = 0;
	if (grow(&buf, READ_CHUNK_BYTES) < 0) {
		fprintf(stderr, PROG ": out of memory\n");
		return 1;
	}
	for (int i = 1; i < argc; i++) {
		int rc;

		if (!is_file_arg(argv[i], &opts_done))
			continue;
		if ((rc = dump_file(argv[i], deep, &buf)) < 0) {
			fflush(stdout);
			fprintf(stderr, PROG ": %s: %s\n", argv[i], km_strerror(rc));
			status = 1;
		}
	}
	free(buf.mem);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, PROG ": writing output: %s\n", strerror(errno));
		return 1;
	}
	return status;
}
