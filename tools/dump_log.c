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

/* ---- number formatting ---- */

/* DefaultRecordBatch.incrementSequence: sequences wrap past INT32_MAX to 0,
 * in Java int arithmetic (also for a negative offsetDelta). */
static int32_t inc_sequence(int32_t seq, int32_t inc)
{
	int32_t room = (int32_t)((uint32_t)INT32_MAX - (uint32_t)inc);

	if (seq > room)
		return (int32_t)((uint32_t)inc - ((uint32_t)INT32_MAX - (uint32_t)seq) -
				 1u);
	return (int32_t)((uint32_t)seq + (uint32_t)inc);
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
	printf("baseOffset: %" PRId64 " lastOffset: %" PRId64 " count: %" PRId32
	       " baseSequence: %" PRId32 " lastSequence: %" PRId32
	       " producerId: %" PRId64 " producerEpoch: %d"
	       " partitionLeaderEpoch: %" PRId32
	       " isTransactional: %s isControl: %s deleteHorizonMs: ",
	       km_batch_base_offset(b), km_batch_last_offset(b),
	       km_batch_records_count(b), km_batch_base_sequence(b),
	       km_batch_last_sequence(b),
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

/* headerKeys: [k1,k2], walked in order (linear in the record). */
static void print_header_keys(const struct km_batch *b,
			      const struct km_chain *chain,
			      const struct km_record *r)
{
	struct km_record_headers_iter it;
	struct km_record_header h;

	fputs(" headerKeys: [", stdout);
	km_record_headers_begin(&it, r);
	for (int32_t i = 0; km_record_header_next(b, &it, &h) > 0; i++) {
		if (i > 0)
			putchar(',');
		put_bytes(chain, h.key, (uint32_t)h.key_len);
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

/* The control part of a record line, decoded from that record.
 * Types Kafka decodes to JSON that kmirror does not (LEADER_CHANGE ..
 * KRAFT_VOTERS) use Kafka's fallback form, "controlType: NAME(id)". */
static void print_control(const struct km_batch *b, const struct km_record *r)
{
	struct km_ctrl ctrl;
	int rc = km_ctrl_parse_record(b, r, &ctrl);

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

/* One "| offset: ..." line, as dumpLog prints it for magic 2. */
static void print_record(const struct km_batch *b, const struct km_chain *chain,
			 const struct km_record *r)
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
	       r->offset, ts_type(b), ts, r->key_len, r->value_len, seq);
	print_header_keys(b, chain, r);
	if (km_batch_is_control(b))
		print_control(b, r);
	putchar('\n');
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
	rc = km_records_begin(&it, b);
	/* Bounded: each record takes at least one byte of the batch. */
	for (uint32_t i = 0; rc == 0 && i <= km_batch_size(b); i++) {
		rc = km_records_next(&it, &r);
		if (rc > 0) {
			print_record(b, chain, &r);
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

/* kmirrord's direct writes (log.direct.io) fill the block an open
 * segment's data ends in with zeros (iouring_log/log_dio.c's
 * KM_DIO_BLOCK); a seal or a close cuts them. */
#define DIO_BLOCK 4096u

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return false;
	return true;
}

static void note_stop(const char *path, uint64_t pos, int rc)
{
	fflush(stdout);
	fprintf(stderr, PROG ": %s: no batch at position %" PRIu64 ": %s\n",
		path, pos, km_strerror(rc));
}

/* The bytes from the first unframeable one to the end of the file: Kafka's
 * "fileRecords.sizeInBytes - validBytes". Reads the rest to count it, so it
 * is right for pipes and files that are still growing. Fewer than a block
 * of zeros up to a block's end is an open segment's padding, and said so:
 * Kafka's tool calls it a record of size 0 and stops. Why the scan stopped
 * (@rc) is an error only when it is not that padding. */
static int report_trailing(struct seg *s, int rc)
{
	uint64_t stop = s->buf_pos + s->at;
	uint64_t invalid = s->len - s->at;
	bool zero = all_zero(s->buf->mem + s->at, s->len - s->at);
	const char *name = strrchr(s->path, '/');
	bool padding;
	ssize_t n = 1;

	/* Bounded by the file size: each pass reads at least one byte. */
	while (n > 0) {
		s->at = s->len;
		n = fill(s, 0);
		if (n > 0) {
			invalid += (uint64_t)n;
			zero = zero && all_zero(s->buf->mem, (size_t)n);
		}
	}
	if (n < 0)
		return (int)n;
	name = name != NULL ? name + 1 : s->path;
	padding = invalid > 0 && zero && invalid < DIO_BLOCK &&
		  (s->buf_pos + s->len) % DIO_BLOCK == 0;
	if (!padding && rc < 0)
		note_stop(s->path, stop, rc);
	if (padding)
		printf("Found %" PRIu64 " bytes of zeros at the end of %s: an "
		       "open segment's direct-write padding, cut when it is "
		       "sealed or closed\n", invalid, name);
	else if (invalid > 0) /* Kafka names the file by file.getName */
		printf("Found %" PRIu64 " invalid bytes at the end of %s\n",
		       invalid, name);
	return 0;
}

/* True if km_batch_parse() framed a batch (and filled the view): it is
 * valid, or only its CRC or header counts are wrong, which Kafka still
 * prints. Anything else (length
 * below 49 or over the maximum, magic not 2) ends the scan, as Kafka's
 * FileLogInputStream stops there too. */
static bool framed(int rc)
{
	return rc > 0 || rc == KM_EBADCRC || rc == KM_EBATCHHDR;
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
		if (!framed(rc))
			return report_trailing(s, rc);
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
