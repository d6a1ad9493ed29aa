/* The .log written with O_DIRECT (log.direct.io): each batch is copied once
 * into one of the worker's aligned write buffers (log_dio_pool.c), which
 * starts with the partial block the file ends in (kept in memory,
 * dio_tail) and is written whole blocks at a time, zero padded. The page
 * cache is bypassed: buffered writes with fdatasync cost this disk 12x the
 * CPU per byte (issue 18). Readers and recovery keep using the buffered fd
 * (the kernel keeps it coherent with direct writes). Durability is as for
 * buffered writes: appended after the write completes, durable after the
 * fdatasync (still needed for metadata and the device's cache). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "iouring_log/log_pvt.h"

/* What the process's logs do, for status: 0 none open yet, else a
 * KM_LOG_DIO_* value (the first refusal is logged once). */
static _Atomic int dio_mode;

int km_log_direct_io_mode(void)
{
	return atomic_load_explicit(&dio_mode, memory_order_relaxed);
}

/* By path: the log's directory descriptor is shed between operations
 * (log_files.c), and a write may come after. */
static int open_direct(struct km_log *log)
{
	char path[PATH_MAX];

	km_segment_path(path, log->dir, log_active(log)->base_offset, ".log");
	log->dio_fd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
	return log->dio_fd < 0 ? -errno : 0;
}

/* tmpfs takes O_DIRECT since Linux 6.6, but there is no device to bypass
 * the page cache for: a direct write there is one more copy. Treated as
 * refusing it, as older kernels and some FUSE filesystems do (EINVAL). */
static bool in_memory(struct km_log *log)
{
	struct statfs sf;

	return fstatfs(log->dir_fd, &sf) == 0 &&
	       (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC);
}

int km_log_dio_probe(struct km_log *log)
{
	int rc, was = KM_LOG_DIO_NONE;

	log->dio_fd = -1;
	log->dio_tail_end = UINT64_MAX;
	log->dio_on = false;
	if (!log->cfg.direct_io) {
		(void)atomic_compare_exchange_strong(&dio_mode, &was,
						     KM_LOG_DIO_OFF);
		return 0;
	}
	rc = in_memory(log) ? -EINVAL : open_direct(log);
	if (rc == -EINVAL) {
		if (atomic_exchange(&dio_mode, KM_LOG_DIO_REFUSED) !=
		    KM_LOG_DIO_REFUSED)
			KM_INFO("log", "log.direct.io: the filesystem of %s "
				"is in memory or refuses O_DIRECT; its "
				"logs are written buffered", log->dir);
		return 0;
	}
	if (rc < 0)
		return rc;
	log->dio_on = true;
	if (atomic_compare_exchange_strong(&dio_mode, &was, KM_LOG_DIO_ON))
		KM_INFO("log", "log.direct.io: .log files are written with "
			"O_DIRECT (%s is the first)", log->dir);
	return 0;
}

void km_log_dio_forget(struct km_log *log)
{
	/* Readers wait for the lock's holder: none is copying. */
	km_log_dio_release(log);
	if (log->dio_fd >= 0)
		close(log->dio_fd); /* writes in flight hold the file */
	log->dio_fd = -1;
	log->dio_tail_end = UINT64_MAX;
}

/* The partial block before at: remembered, or read back (after an open or
 * a structural change, when no write is in flight). */
static int load_tail(struct km_log *log, struct km_segment *seg, uint64_t at)
{
	uint64_t blk = at & ~(uint64_t)(KM_DIO_BLOCK - 1);
	size_t want = (size_t)(at - blk), got = 0;

	if (want == 0 || log->dio_tail_end == at)
		return 0;
	while (got < want) {
		ssize_t n = pread(seg->log_fd, log->dio_tail + got, want - got,
				  (off_t)(blk + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		got += (size_t)n;
	}
	log->dio_tail_end = at;
	return 0;
}

/* A new write for the data from file position at on. */
static struct log_write *start(struct km_log *log, struct km_segment *seg,
			       uint64_t at)
{
	struct km_dio_chunk *chunk;
	struct log_write *w;
	uint32_t carry = (uint32_t)(at % KM_DIO_BLOCK);
	int rc = load_tail(log, seg, at);

	if (rc < 0) {
		km_log_set_error(log, rc);
		return NULL;
	}
	/* km_log_dio_room checked there is one (unless mmap fails). */
	if ((chunk = km_dio_get(log->ring)) == NULL) {
		km_log_set_error(log, -ENOMEM);
		return NULL;
	}
	w = km_log_write_new(log, seg);
	KM_ASSERT(w != NULL); /* km_log_dio_room checked */
	w->chunk = chunk;
	w->pos = at - carry;
	w->bytes = carry;
	w->end_offset = log->leo;
	memcpy(w->chunk->buf, log->dio_tail, carry);
	return w;
}

/* The newest write, if it still waits for the one before it and ends
 * where the data goes on (at): it takes more data instead of a new write
 * that would wait too. So appends arriving while a write is in flight
 * coalesce into one write, rather than each waiting for the last. */
static struct log_write *reopen_held(struct km_log *log,
				     struct km_segment *seg, uint64_t at)
{
	struct log_write *w;

	if (log->w_count == 0)
		return NULL;
	w = &log->writes[(log->w_head + log->w_count - 1) % KM_LOG_WRITES_MAX];
	if (!w->held || w->fd != seg->log_fd || w->pos + w->bytes != at ||
	    w->bytes >= KM_DIO_CHUNK_BYTES)
		return NULL;
	w->held = false;
	log->filling = w;
	return w;
}

/* The write the data at file position at goes into: the one being
 * filled, a held one reopened, or a new one (NULL: the log failed). */
static struct log_write *writer(struct km_log *log, struct km_segment *seg,
				uint64_t at)
{
	struct log_write *w = log->filling;

	if (log->error != 0)
		return NULL;
	if (w != NULL && w->fd != seg->log_fd) {
		(void)km_log_dio_close(log);
		w = NULL;
	}
	if (w == NULL)
		w = reopen_held(log, seg, at);
	if (w == NULL)
		w = start(log, seg, at);
	return w;
}

static void seal_staged(struct km_log *log);

/* Bytes [done, done + n) of a batch to dst; with crc, the part of them in
 * the CRC range (attributes on) extends *crc, read back while in cache. */
static void put(uint8_t *dst, const uint8_t *src, uint32_t n, uint32_t done,
		uint32_t *crc)
{
	uint32_t plain = 0;

	if (crc == NULL) {
		memcpy(dst, src, n);
		return;
	}
	if (done < KM_BATCH_OFF_ATTRIBUTES) {
		plain = KM_BATCH_OFF_ATTRIBUTES - done;
		if (plain > n)
			plain = n;
		memcpy(dst, src, plain);
	}
	if (n > plain)
		*crc = km_crc32c_copy(*crc, dst + plain, src + plain, n - plain);
}

/* Copy b into write buffers: its header from hdr (where a map or a local
 * placement is), the rest from the chain. A full buffer is sealed and
 * submitted, or with staged only sealed (km_log_dio_commit submits it). */
static void copy_in(struct km_log *log, struct km_segment *seg,
		    const struct km_batch *b, uint32_t *crc, bool staged)
{
	struct km_chain_cur cur = b->start;
	uint32_t size = km_batch_size(b), done = 0;
	uint64_t at = seg->size_bytes;

	while (done < size) {
		const struct iovec *v = &b->chain->iov[cur.seg];
		const uint8_t *src = (const uint8_t *)v->iov_base + cur.off;
		size_t take = v->iov_len - cur.off;
		struct log_write *w = writer(log, seg, at);

		if (w == NULL)
			return; /* the log failed: nothing more is written */
		if (done < KM_BATCH_HEADER_BYTES) {
			src = b->hdr + done;
			if (take > KM_BATCH_HEADER_BYTES - done)
				take = KM_BATCH_HEADER_BYTES - done;
		}
		if (take > size - done)
			take = size - done;
		if (take > KM_DIO_CHUNK_BYTES - w->bytes)
			take = KM_DIO_CHUNK_BYTES - w->bytes;
		put(w->chunk->buf + w->bytes, src, (uint32_t)take, done, crc);
		w->bytes += (uint32_t)take;
		done += (uint32_t)take;
		at += take;
		/* A batch split over writes shows its offsets with its last. */
		w->end_offset = done == size ? km_batch_last_offset(b) + 1 : log->leo;
		(void)km_chain_advance(b->chain, &cur, take);
		if (w->bytes == KM_DIO_CHUNK_BYTES && staged)
			seal_staged(log);
		else if (w->bytes == KM_DIO_CHUNK_BYTES)
			(void)km_log_dio_close(log);
	}
}

void km_log_dio_add(struct km_log *log, struct km_segment *seg,
		    const struct km_batch *b)
{
	copy_in(log, seg, b, NULL, false);
}

int km_log_dio_stage(struct km_log *log, struct km_segment *seg,
		     const struct km_batch *b, struct km_dio_mark *m)
{
	struct log_write *w;
	uint32_t crc = 0;

	/* A write of the segment before a roll is no part of this batch. */
	if (log->filling != NULL && log->filling->fd != seg->log_fd)
		(void)km_log_dio_close(log);
	w = log->w_count == 0 ? NULL
		: &log->writes[(log->w_head + log->w_count - 1) % KM_LOG_WRITES_MAX];
	*m = (struct km_dio_mark){ log->filling, w, log->w_count,
				   w ? w->bytes : 0, w ? w->end_offset : -1,
				   w ? w->held : false, log->dio_tail_end };
	copy_in(log, seg, b, &crc, true);
	if (log->error != 0 || crc != km_batch_crc(b)) {
		km_log_dio_undo(log, m);
		return log->error != 0 ? log->error : KM_EBADCRC;
	}
	return 0;
}

static int submit(struct km_log *log, struct log_write *w)
{
	int rc = log->dio_fd >= 0 ? 0 : open_direct(log);

	w->held = false;
	if (rc == 0)
		rc = km_uring_write(log->ring, log->dio_fd, w->chunk->buf,
				    w->io_bytes, w->pos, w->chunk->index,
				    &w->io);
	if (rc < 0)
		km_log_write_done(&w->io, rc, 0); /* fails the log */
	return rc;
}

static uint32_t slot_of(const struct km_log *log, const struct log_write *w)
{
	return (uint32_t)(w - log->writes);
}

/* The write queued just before w, if it is still in the ring. */
static struct log_write *prev_of(struct km_log *log, struct log_write *w)
{
	uint32_t i = slot_of(log, w);

	if (i == log->w_head)
		return NULL;
	return &log->writes[(i + KM_LOG_WRITES_MAX - 1) % KM_LOG_WRITES_MAX];
}

/* The write being filled is complete: padded to whole blocks, its partial
 * last block remembered. @return it, no longer log->filling. */
static struct log_write *seal(struct km_log *log)
{
	struct log_write *w = log->filling;
	uint32_t part;

	log->filling = NULL;
	w->io.fn = km_log_write_done;
	w->io_bytes = (w->bytes + KM_DIO_BLOCK - 1) & ~(KM_DIO_BLOCK - 1);
	memset(w->chunk->buf + w->bytes, 0, w->io_bytes - w->bytes);
	part = w->bytes % KM_DIO_BLOCK;
	memcpy(log->dio_tail, w->chunk->buf + w->bytes - part, part);
	log->dio_tail_end = w->pos + w->bytes;
	return w;
}

/* A full buffer of a batch not checked yet: sealed, not submitted. Its
 * end is a block's (the buffer is whole blocks), so dio_tail is as it was
 * and km_log_dio_undo need only restore dio_tail_end. */
static void seal_staged(struct km_log *log)
{
	struct log_write *w = seal(log);

	w->held = true;
	w->staged = true;
}

/* Submit a sealed write, or hold it for the one before it, which ends in
 * the same block (two writes of one block in flight land in any order). */
static int release(struct km_log *log, struct log_write *w)
{
	struct log_write *prev = prev_of(log, w);

	if (prev != NULL && !prev->done &&
	    (prev->pos + prev->bytes) % KM_DIO_BLOCK != 0) {
		w->held = true;
		return 0;
	}
	return submit(log, w);
}

int km_log_dio_close(struct km_log *log)
{
	if (log->filling == NULL)
		return 0;
	return release(log, seal(log));
}

void km_log_dio_commit(struct km_log *log, const struct km_dio_mark *m)
{
	uint32_t from = m->last != NULL ? m->w_count - 1 : m->w_count;

	for (uint32_t i = from; i < log->w_count; i++) {
		struct log_write *w =
			&log->writes[(log->w_head + i) % KM_LOG_WRITES_MAX];

		if (!w->staged)
			continue;
		w->staged = false;
		w->held = false;
		(void)release(log, w);
	}
}

void km_log_dio_undo(struct km_log *log, const struct km_dio_mark *m)
{
	/* Nothing of the batch was submitted: its new writes are dropped,
	 * the write it went on in (still unsubmitted) cut back. */
	while (log->w_count > m->w_count) {
		struct log_write *w = &log->writes[(log->w_head + log->w_count - 1) %
						   KM_LOG_WRITES_MAX];

		km_dio_put(log->ring, w->chunk);
		w->chunk = NULL;
		w->staged = false;
		log->w_count--;
	}
	if (m->last != NULL) {
		m->last->bytes = m->last_bytes;
		m->last->end_offset = m->last_end;
		m->last->held = m->last_held;
		m->last->staged = false;
	}
	log->filling = m->filling;
	log->dio_tail_end = m->tail_end;
}

void km_log_dio_release(struct km_log *log)
{
	for (uint32_t i = 0; i < KM_DIO_TAIL_SLOTS; i++)
		km_dio_tail_drop(log->ring, &log->tails[i]);
}

/* Logs whose write state is in use, for status (km_log_awake_count). */
static _Atomic uint64_t n_awake;

uint64_t km_log_awake_count(void)
{
	return atomic_load_explicit(&n_awake, memory_order_relaxed);
}

void km_log_wake(struct km_log *log)
{
	if (log->awake)
		return;
	log->awake = true;
	log->idle_leo = INT64_MIN; /* the next tick starts the idle clock */
	atomic_fetch_add_explicit(&n_awake, 1, memory_order_relaxed);
}

void km_log_sleep(struct km_log *log)
{
	if (!log->awake)
		return;
	log->awake = false;
	atomic_fetch_sub_explicit(&n_awake, 1, memory_order_relaxed);
}

/* Give the write state back: the tail cache's buffers to the pool (which
 * unregisters and drops those beyond the few it keeps warm), and the
 * pages of the tail block and of the write ring to the kernel (zero when
 * touched again, as at the log's first write). The tail block is then
 * read back from the file by the next write's start (load_tail). */
#define RING_PAGES_BYTES \
	((sizeof(((struct km_log *)0)->writes) + KM_DIO_BLOCK - 1) & \
	 ~(size_t)(KM_DIO_BLOCK - 1))
_Static_assert(offsetof(struct km_log, writes) + RING_PAGES_BYTES <=
		       sizeof(struct km_log),
	       "the ring's pages are the log's own");

static void shed(struct km_log *log)
{
	km_log_dio_release(log);
	log->dio_tail_end = UINT64_MAX;
	log->w_head = 0;
	(void)madvise(log->dio_tail, sizeof(log->dio_tail), MADV_DONTNEED);
	(void)madvise(log->writes, RING_PAGES_BYTES, MADV_DONTNEED);
	km_log_sleep(log);
}

uint64_t km_log_idle_due(const struct km_log *log, uint64_t now_ms)
{
	if (!log->awake)
		return UINT64_MAX;
	/* The idle clock starts at a tick: one that has not started it yet
	 * (the end moved after the last) is due within a second. */
	if (km_log_busy(log) || log->idle_leo != log->leo)
		return now_ms + 1000;
	return log->idle_since_ms + KM_LOG_IDLE_MS;
}

void km_log_idle_check(struct km_log *log, uint64_t now_ms)
{
	if (!log->awake)
		return;
	if (km_log_busy(log) || log->idle_leo != log->leo) {
		log->idle_leo = log->leo;
		log->idle_since_ms = now_ms;
		return;
	}
	if (now_ms - log->idle_since_ms >= KM_LOG_IDLE_MS)
		shed(log);
}

/* w's buffer becomes the newest tail slot's (as many as the cache's budget
 * allows; beyond, the pool takes back the longest kept, any partition's). */
static void keep_tail(struct km_log *log, struct log_write *w, bool ok)
{
	uint32_t max = (uint32_t)(log->cfg.tail_cache_bytes / KM_DIO_CHUNK_BYTES);
	struct km_dio_tail *t = &log->tails[log->dio_tail_next];
	uint32_t seq;

	km_dio_tail_drop(log->ring, t);
	if (!ok || max == 0) {
		km_dio_put(log->ring, w->chunk);
		return;
	}
	if (max > KM_DIO_CHUNKS_MAX / 2)
		max = KM_DIO_CHUNKS_MAX / 2; /* half the pool stays for writes */
	log->dio_tail_next = (log->dio_tail_next + 1) % KM_DIO_TAIL_SLOTS;
	seq = atomic_load_explicit(&t->seq, memory_order_relaxed);
	atomic_store_explicit(&t->seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	t->base = log_active(log)->base_offset;
	t->pos = w->pos;
	t->bytes = w->bytes;
	km_dio_keep(log->ring, w->chunk, t, max);
	atomic_store_explicit(&t->seq, seq + 2, memory_order_release);
}

bool km_log_dio_read(const struct km_log *log, const struct km_segment *s,
		     void *buf, size_t len, uint64_t pos)
{
	for (uint32_t i = 0; i < KM_DIO_TAIL_SLOTS; i++) {
		const struct km_dio_tail *t = &log->tails[i];
		uint32_t s1 = atomic_load_explicit(&t->seq, memory_order_acquire);
		struct km_dio_chunk *c = __atomic_load_n(&t->chunk, __ATOMIC_RELAXED);
		uint64_t at = __atomic_load_n(&t->pos, __ATOMIC_RELAXED);
		uint32_t n = __atomic_load_n(&t->bytes, __ATOMIC_RELAXED);

		if ((s1 & 1) || c == NULL ||
		    __atomic_load_n(&t->base, __ATOMIC_RELAXED) != s->base_offset ||
		    pos < at || pos + len > at + n)
			continue;
		/* A seqlock read: the copy counts only if no change began. */
		memcpy(buf, c->buf + (pos - at), len);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&t->seq, memory_order_relaxed) == s1)
			return true;
	}
	return false;
}

void km_log_dio_done(struct km_log *log, struct log_write *w, bool ok)
{
	uint32_t next = (slot_of(log, w) + 1) % KM_LOG_WRITES_MAX;
	bool in_ring = (next + KM_LOG_WRITES_MAX - log->w_head) %
			       KM_LOG_WRITES_MAX < log->w_count;

	keep_tail(log, w, ok);
	w->chunk = NULL;
	if (in_ring && log->writes[next].held && !log->writes[next].staged)
		(void)submit(log, &log->writes[next]);
}

int km_log_dio_room(struct km_log *log, uint32_t size)
{
	uint32_t chunks = (size + KM_DIO_BLOCK) / KM_DIO_CHUNK_BYTES + 2;

	if (KM_LOG_WRITES_MAX - log->w_count < chunks + 1 ||
	    km_dio_available(log->ring) < chunks)
		return -EAGAIN;
	return 0;
}

int km_log_dio_cut(struct km_log *log, bool *cut)
{
	struct km_segment *seg = log_active(log);
	struct stat st;

	*cut = false;
	if (!log->dio_on)
		return 0;
	if (fstat(seg->log_fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size <= seg->size_bytes)
		return 0;
	if (ftruncate(seg->log_fd, (off_t)seg->size_bytes) < 0)
		return -errno;
	*cut = true;
	if (seg->reserved_bytes > seg->size_bytes)
		seg->reserved_bytes = seg->size_bytes;
	return 0;
}

int km_log_dio_trim(struct km_log *log)
{
	bool cut;
	int rc = km_log_dio_cut(log, &cut);

	/* fsync, not fdatasync: the smaller size must stick, or a sealed
	 * segment would keep zeros that no recovery scans. */
	if (rc == 0 && cut && fsync(log_active(log)->log_fd) < 0)
		rc = -errno;
	return rc;
}
