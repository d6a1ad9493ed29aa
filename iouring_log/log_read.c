/* The read path: whole batches from an offset (Fetch, the dump tool),
 * offsets by timestamp (ListOffsets), aborted transactions (read_committed).
 *
 * Threading: any thread, while the owner appends, flushes, rolls, truncates
 * and resets (only km_log_close needs the readers gone). Two mechanisms,
 * because the structure of the log changes rarely and its contents with
 * every batch:
 *
 * 1. The structure - log->segs, n_segs, a segment's fds and base offset -
 *    changes only under log->seg_lock, a pthread rwlock. A reader holds it
 *    shared for one call. The owner takes it exclusively only to change
 *    what a reader could be standing on: to show a new segment after a
 *    roll, to delete or cut segments in a truncation, to replace them all
 *    in a reset (and, when retention comes, to delete the oldest ones;
 *    nothing else is needed for readers in flight). An index mapping is unmapped only under it, or after it:
 *    a seal (in a roll, lock not held) publishes the read-only maps that
 *    replace the writable ones and retires the old ones (segment.h); the
 *    roll's taking the lock afterwards is the grace period after which
 *    they can go, since every read that could have loaded them has ended.
 *    The slow parts of a roll (waiting for writes, fdatasync, the seal's
 *    msync and fsyncs, the snapshot, creating the next segment's files)
 *    thus run before it takes the lock, and a truncation works out its cut
 *    by reading first. Appending a batch never takes it. It prefers
 *    writers, so readers in a tight loop cannot hold a roll back.
 * 2. What grows per batch is published with release stores after what it
 *    covers and loaded here with acquire: the appended offset, stored after
 *    the segment's readable bytes, which are stored once the write
 *    completed; index and time-index entry counts, stored after the entry's
 *    bytes; .txnindex bytes, stored after the pwrite. A reader loads the
 *    appended offset first and then, per segment, the readable bytes, and
 *    reads no batch header past them. Index entries are added when a batch
 *    is queued, before it is written, so a position from the index is
 *    checked against the readable bytes too. Fields only the owner may read
 *    (size_bytes, the active segment's max_timestamp) are not used here.
 *
 * Batches are returned only below the bound passed in, capped at the
 * appended offset: Fetch passes the durable offset (the high watermark).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/endian.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "iouring_log/log_pvt.h"
#include "kafka/control.h"

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

/* The segment's .log: closed for a cold partition (log_files.c), it is
 * opened for this call. */
static int log_fd(const struct km_segment *s)
{
	return km_log_reader_fd(s, ".log", s->log_fd);
}

static int read_hdr(const struct km_log *log, const struct km_segment *s,
		    uint64_t pos, struct walk_hdr *w)
{
	uint8_t h[WALK_HDR_BYTES];
	ssize_t n = km_log_dio_read(log, s, h, sizeof(h), pos)
			    ? (ssize_t)sizeof(h)
			    : pread(log_fd(s), h, sizeof(h), (off_t)pos);

	if (n < 0)
		return -errno;
	if (n != (ssize_t)sizeof(h))
		return KM_ECORRUPT;
	decode_hdr(h, w);
	return w->size > KM_BATCH_LOG_OVERHEAD ? 0 : KM_ECORRUPT;
}

static void read_lock(struct km_log *log)
{
	/* Fails only on misuse (EDEADLK) or 2^30 readers (EAGAIN). */
	KM_ASSERT(pthread_rwlock_rdlock(&log->seg_lock) == 0);
	km_log_reader_begin(log);
}

static void read_unlock(struct km_log *log)
{
	km_log_reader_end();
	KM_ASSERT(pthread_rwlock_unlock(&log->seg_lock) == 0);
}

uint32_t km_log_find_segment(const struct km_log *log, int64_t offset)
{
	uint32_t lo = 0, hi = log->n_segs;

	/* The last segment whose base is <= offset (0 if none is). */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (log->segs[mid].base_offset <= offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == 0 ? 0 : lo - 1;
}

/* Position of the first batch in s holding an offset >= offset with
 * maxTimestamp >= ts whose header lies below end (the readable bytes), or
 * end if none does. The walk goes from batch to batch, each size read from
 * a header below end, so it never parses bytes a write is still filling. */
static int find_batch(const struct km_log *log, const struct km_segment *s, uint64_t end, int64_t offset,
		      int64_t ts, uint64_t *pos, struct walk_hdr *w)
{
	int rc;

	for (*pos = km_segment_lookup(s, offset); *pos + WALK_HDR_BYTES <= end;
	     *pos += w->size) {
		if ((rc = read_hdr(log, s, *pos, w)) < 0)
			return rc;
		if (w->last >= offset && w->max_ts >= ts)
			return 0;
	}
	*pos = end;
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

/* Whole batches from pos that start below upto and end at or below end
 * (the readable bytes): at least the first, then as many as fit max_bytes. */
static int copy_batches(const struct km_log *log, const struct km_segment *s, uint64_t pos, uint64_t end,
			uint32_t first_size, int64_t upto, uint32_t max_bytes,
			uint8_t *buf, size_t cap, struct km_log_read_result *out)
{
	size_t want = max_bytes > first_size ? max_bytes : first_size;
	size_t len = 0;
	int rc;

	if (first_size > cap)
		return KM_ENOSPACE;
	want = want < cap ? want : cap;
	if (want > end - pos)
		want = end - pos;
	/* The tail cache first: what was just written is not in the page
	 * cache after a direct write. */
	if (!km_log_dio_read(log, s, buf, want, pos) &&
	    (rc = pread_all(log_fd(s), buf, want, pos)) < 0)
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

/* km_log_read with the segment lock held. */
static int read_locked(struct km_log *log, int64_t offset, int64_t upto,
		       uint32_t max_bytes, void *buf, size_t cap,
		       struct km_log_read_result *out)
{
	/* Before any readable bytes are loaded (see the top). */
	int64_t appended = km_log_appended_offset(log);
	struct walk_hdr w;
	uint64_t pos;
	int rc;

	upto = upto < appended ? upto : appended;
	if (offset < log_start(log) || offset > upto)
		return -ERANGE;
	for (uint32_t i = km_log_find_segment(log, offset);
	     i < log->n_segs && offset < upto; i++) {
		const struct km_segment *s = &log->segs[i];
		uint64_t end = km_segment_readable(s);

		if ((rc = find_batch(log, s, end, offset, INT64_MIN, &pos, &w)) < 0)
			return rc;
		if (pos < end)
			return w.base >= upto ? 0
					      : copy_batches(log, s, pos, end, w.size,
							     upto, max_bytes,
							     buf, cap, out);
	}
	return 0;
}

int km_log_read(struct km_log *log, int64_t offset, int64_t upto,
		uint32_t max_bytes, void *buf, size_t cap,
		struct km_log_read_result *out)
{
	int rc;

	memset(out, 0, sizeof(*out));
	out->first_offset = -1;
	out->next_offset = offset;
	read_lock(log);
	rc = read_locked(log, offset, upto, max_bytes, buf, cap, out);
	read_unlock(log);
	return rc;
}

static int time_locked(struct km_log *log, int64_t ts, int64_t *offset)
{
	int64_t appended = km_log_appended_offset(log);
	struct walk_hdr w;
	uint64_t pos;
	int rc;

	for (uint32_t i = 0; i < log->n_segs; i++) {
		const struct km_segment *s = &log->segs[i];
		uint64_t end = km_segment_readable(s);

		/* Sealed segments only: the active one's maximum moves with
		 * every append, and only the owner may read it. */
		if (i + 1 < log->n_segs && s->max_timestamp < ts)
			continue;
		rc = find_batch(log, s, end, km_segment_time_lookup(s, ts), ts, &pos,
				&w);
		if (rc < 0)
			return rc;
		if (pos < end) {
			/* Readable but not yet appended: not there yet. */
			if (w.base < appended)
				*offset = w.base;
			return 0;
		}
	}
	return 0;
}

int km_log_offset_for_time(struct km_log *log, int64_t ts, int64_t *offset)
{
	int rc;

	*offset = -1;
	read_lock(log);
	rc = time_locked(log, ts, offset);
	read_unlock(log);
	return rc;
}

/* In s, from the time index's last entry (the largest timestamp indexed:
 * no batch before it has a larger one) to the readable end, the first
 * appended batch whose maxTimestamp is above *ts. */
static int max_in_segment(const struct km_log *log, const struct km_segment *s,
			  int64_t appended,
			  int64_t *ts, int64_t *base)
{
	uint64_t end = km_segment_readable(s), pos;
	struct walk_hdr w;
	int rc;

	pos = km_segment_lookup(s, km_segment_time_lookup(s, INT64_MAX));
	for (; pos + WALK_HDR_BYTES <= end; pos += w.size) {
		if ((rc = read_hdr(log, s, pos, &w)) < 0)
			return rc;
		if (w.base >= appended)
			break;
		if (w.max_ts > *ts) {
			*ts = w.max_ts;
			*base = w.base;
		}
	}
	return 0;
}

int km_log_max_timestamp(struct km_log *log, int64_t *ts, int64_t *base_offset)
{
	int64_t appended;
	int rc = 0;

	*ts = -1;
	*base_offset = -1;
	read_lock(log);
	appended = km_log_appended_offset(log);
	for (uint32_t i = 0; rc == 0 && i < log->n_segs; i++) {
		const struct km_segment *s = &log->segs[i];

		/* A sealed segment's maximum is fixed: skip one that
		 * cannot hold a larger timestamp than found. */
		if (i + 1 < log->n_segs && s->max_timestamp <= *ts)
			continue;
		rc = max_in_segment(log, s, appended, ts, base_offset);
	}
	read_unlock(log);
	return rc;
}

static int txns_locked(struct km_log *log, int64_t from, int64_t upto,
		       struct km_aborted_txn *out, uint32_t max)
{
	uint32_t found = 0;

	for (uint32_t i = km_log_find_segment(log, from); i < log->n_segs; i++) {
		const struct km_segment *s = &log->segs[i];
		int n;

		/* No early stop at upto: the entry sits with the marker,
		 * which may be in a later segment (Kafka's
		 * collectAbortedTxns goes on until an entry's
		 * lastStableOffset reaches the bound). */
		/* Loaded once, before the fd (the owner sets the fd first):
		 * a second load could see an entry appended since, and
		 * read it from the fd of a file that had none (EBADF, seen
		 * once in log_concurrent under ASan). */
		uint64_t end = __atomic_load_n(&s->txn_bytes, __ATOMIC_ACQUIRE);
		int fd = end != 0 ? km_log_reader_fd(s, ".txnindex", s->txn_fd)
				  : -1;

		if (fd < 0 && end != 0)
			return fd;
		n = end == 0 ? 0
			     : km_segment_txn_read_fd(fd, end, from, upto,
						      out + (found < max ? found : max),
						      found < max ? max - found : 0);
		if (n < 0)
			return n;
		found += (uint32_t)n;
	}
	return (int)found;
}

int km_log_aborted_txns(struct km_log *log, int64_t from, int64_t upto,
			struct km_aborted_txn *out, uint32_t max)
{
	int rc;

	read_lock(log);
	rc = txns_locked(log, from, upto, out, max);
	read_unlock(log);
	return rc;
}

/* ---- the latest barrier for a cluster id (failback, R5) ---- */

/* Control batches are one small record; anything bigger is not a barrier
 * of ours and is not read whole. */
#define BARRIER_BATCH_MAX 1024u

/* Is the control batch at pos (size bytes) a MIRROR_PID_RESET naming
 * cluster_id? */
static bool is_barrier_for(const struct km_segment *s, uint64_t pos,
			   uint32_t size, const char *cluster_id)
{
	uint8_t buf[BARRIER_BATCH_MAX];
	struct iovec iov = { buf, size };
	struct km_chain ch = { &iov, 1 };
	struct km_chain_cur cur = { 0, 0 };
	struct km_batch b;
	struct km_ctrl c;

	if (size > sizeof(buf) || pread_all(log_fd(s), buf, size, pos) < 0 ||
	    km_batch_parse(&b, &ch, cur, size) <= 0 || km_ctrl_parse(&b, &c) < 0)
		return false;
	return c.type == KM_CTRL_MIRROR_PID_RESET &&
	       strcmp(c.cluster_id, cluster_id) == 0;
}

/* The last matching barrier of s below upto, or -1. Walks headers only:
 * one pread of the header per batch, and of the batch for control ones. */
static int barrier_in_segment(const struct km_segment *s, int64_t upto,
			      const char *cluster_id, int64_t *found)
{
	uint64_t end = km_segment_readable(s);
	uint8_t h[WALK_HDR_BYTES];
	struct walk_hdr w;
	int rc;

	*found = -1;
	for (uint64_t pos = 0; pos + WALK_HDR_BYTES <= end; pos += w.size) {
		if ((rc = pread_all(log_fd(s), h, sizeof(h), pos)) < 0)
			return rc;
		decode_hdr(h, &w);
		if (w.size <= KM_BATCH_LOG_OVERHEAD || w.base >= upto)
			return w.size <= KM_BATCH_LOG_OVERHEAD ? KM_ECORRUPT : 0;
		if ((km_load_be16(h + KM_BATCH_OFF_ATTRIBUTES) &
		     KM_BATCH_ATTR_CONTROL) &&
		    is_barrier_for(s, pos, w.size, cluster_id))
			*found = w.base;
	}
	return 0;
}

int km_log_find_barrier(struct km_log *log, const char *cluster_id,
			int64_t upto, int64_t *offset)
{
	int rc = 0;

	*offset = -1;
	read_lock(log);
	/* Loaded before any readable bytes (see the top). */
	int64_t appended = km_log_appended_offset(log);

	upto = upto < appended ? upto : appended;
	for (uint32_t i = log->n_segs; rc == 0 && *offset < 0 && i-- > 0;)
		rc = barrier_in_segment(&log->segs[i], upto, cluster_id, offset);
	read_unlock(log);
	return rc;
}
