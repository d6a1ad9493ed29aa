/* The read path: whole batches from an offset (Fetch, the dump tool),
 * offsets by timestamp (ListOffsets), aborted transactions (read_committed).
 * Any batch starting below the bound passed in is whole on disk: callers
 * bound reads by the durable or appended offset. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/endian.h"
#include "common/errors.h"
#include "iouring_log/log_pvt.h"

/* The header fields a walk needs: through maxTimestamp. */
#define WALK_HDR_BYTES (KM_BATCH_OFF_MAX_TIMESTAMP + 8)

struct walk_hdr {
	int64_t base;
	int64_t last;
	int64_t max_ts;
	uint32_t size;
};

static void decode_hdr(const uint8_t *h, struct walk_hdr *w)
{
	w->base = (int64_t)km_load_be64(h + KM_BATCH_OFF_BASE_OFFSET);
	w->size = km_load_be32(h + KM_BATCH_OFF_LENGTH) + KM_BATCH_LOG_OVERHEAD;
	w->last = w->base +
		  (int32_t)km_load_be32(h + KM_BATCH_OFF_LAST_OFFSET_DELTA);
	w->max_ts = (int64_t)km_load_be64(h + KM_BATCH_OFF_MAX_TIMESTAMP);
}

static int read_hdr(const struct km_segment *s, uint64_t pos,
		    struct walk_hdr *w)
{
	uint8_t h[WALK_HDR_BYTES];
	ssize_t n = pread(s->log_fd, h, sizeof(h), (off_t)pos);

	if (n < 0)
		return -errno;
	if (n != (ssize_t)sizeof(h))
		return KM_ECORRUPT;
	decode_hdr(h, w);
	return w->size > KM_BATCH_LOG_OVERHEAD ? 0 : KM_ECORRUPT;
}

/* Position of the first batch in s holding an offset >= offset with
 * maxTimestamp >= ts, or s->size_bytes if none. */
static int find_batch(const struct km_segment *s, int64_t offset, int64_t ts,
		      uint64_t *pos, struct walk_hdr *w)
{
	int rc;

	for (*pos = km_segment_lookup(s, offset); *pos < s->size_bytes;
	     *pos += w->size) {
		if ((rc = read_hdr(s, *pos, w)) < 0)
			return rc;
		if (w->last >= offset && w->max_ts >= ts)
			return 0;
	}
	return 0;
}

static int pread_all(int fd, void *buf, size_t len, uint64_t pos)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got,
				  (off_t)(pos + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : KM_ECORRUPT;
		got += (size_t)n;
	}
	return 0;
}

/* Whole batches from pos that start below upto: at least the first, then
 * as many as fit max_bytes. */
static int copy_batches(const struct km_segment *s, uint64_t pos,
			uint32_t first_size, int64_t upto, uint32_t max_bytes,
			uint8_t *buf, size_t cap, struct km_log_read_result *out)
{
	size_t want = max_bytes > first_size ? max_bytes : first_size;
	size_t len = 0;
	int rc;

	if (first_size > cap)
		return KM_ENOSPACE;
	want = want < cap ? want : cap;
	if (want > s->size_bytes - pos)
		want = s->size_bytes - pos;
	if ((rc = pread_all(s->log_fd, buf, want, pos)) < 0)
		return rc;
	while (len + WALK_HDR_BYTES <= want) {
		struct walk_hdr w;

		decode_hdr(buf + len, &w);
		if (w.base >= upto || len + w.size > want ||
		    (out->batches > 0 && len + w.size > max_bytes))
			break;
		if (out->batches++ == 0)
			out->first_offset = w.base;
		out->next_offset = w.last + 1;
		len += w.size;
	}
	out->bytes = (uint32_t)len;
	return 0;
}

int km_log_read(struct km_log *log, int64_t offset, int64_t upto,
		uint32_t max_bytes, void *buf, size_t cap,
		struct km_log_read_result *out)
{
	int64_t appended = km_log_appended_offset(log);
	struct walk_hdr w;
	uint64_t pos;
	int rc;

	memset(out, 0, sizeof(*out));
	out->first_offset = -1;
	out->next_offset = offset;
	upto = upto < appended ? upto : appended;
	if (offset < log->start_offset || offset > upto)
		return -ERANGE;
	for (uint32_t i = km_log_find_segment(log, offset);
	     i < log->n_segs && offset < upto; i++) {
		struct km_segment *s = &log->segs[i];

		if ((rc = find_batch(s, offset, INT64_MIN, &pos, &w)) < 0)
			return rc;
		if (pos < s->size_bytes)
			return w.base >= upto ? 0
					      : copy_batches(s, pos, w.size, upto,
							     max_bytes, buf, cap,
							     out);
	}
	return 0;
}

int km_log_offset_for_time(struct km_log *log, int64_t ts, int64_t *offset)
{
	struct walk_hdr w;
	uint64_t pos;
	int rc;

	*offset = -1;
	for (uint32_t i = 0; i < log->n_segs; i++) {
		struct km_segment *s = &log->segs[i];

		if (s->max_timestamp < ts && i + 1 < log->n_segs)
			continue;
		rc = find_batch(s, km_segment_time_lookup(s, ts), ts, &pos, &w);
		if (rc < 0)
			return rc;
		if (pos < s->size_bytes) {
			*offset = w.base;
			return 0;
		}
	}
	return 0;
}

int km_log_aborted_txns(struct km_log *log, int64_t from, int64_t upto,
			struct km_aborted_txn *out, uint32_t max)
{
	uint32_t found = 0;

	for (uint32_t i = km_log_find_segment(log, from); i < log->n_segs; i++) {
		struct km_segment *s = &log->segs[i];
		int n;

		/* No early stop at upto: the entry sits with the marker,
		 * which may be in a later segment (Kafka's
		 * collectAbortedTxns goes on until an entry's
		 * lastStableOffset reaches the bound). */
		n = km_segment_txn_read(s, from, upto, out + (found < max ? found : max),
					found < max ? max - found : 0);
		if (n < 0)
			return n;
		found += (uint32_t)n;
	}
	return (int)found;
}
