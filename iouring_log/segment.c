#include "iouring_log/segment.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/endian.h"
#include "common/km_assert.h"

/* The [pub] fields of struct km_segment (segment.h): the owner stores them
 * with release once what they cover is in place; readers on other threads
 * load them with acquire. The owner's own reads stay plain. */
#define PUBLISH(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELEASE)
#define PUBLISHED(field) __atomic_load_n(&(field), __ATOMIC_ACQUIRE)

static const char *const suffixes[4] = { ".log", ".index", ".timeindex",
					 ".txnindex" };

void km_segment_path(char *out, const char *dir, int64_t base,
		     const char *suffix)
{
	snprintf(out, PATH_MAX, "%s/%020lld%s", dir, (long long)base, suffix);
}

static int open_file(int dir_fd, int64_t base, const char *suffix, int flags)
{
	char name[64];
	int fd;

	snprintf(name, sizeof(name), "%020lld%s", (long long)base, suffix);
	fd = openat(dir_fd, name, flags | O_RDWR | O_CLOEXEC, 0644);
	return fd < 0 ? -errno : fd;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Both index mappings of a segment, at one length. */
struct maps {
	uint8_t *index;
	uint8_t *time;
	uint32_t len;
};

static void unmap_pair(const struct maps *m)
{
	if (m->index != NULL)
		munmap(m->index, m->len);
	if (m->time != NULL)
		munmap(m->time, m->len);
}

/* Point readers at m: a reader that loads a pointer sees the mapping. */
static void set_maps(struct km_segment *s, const struct maps *m)
{
	PUBLISH(s->index_map, m->index);
	PUBLISH(s->time_map, m->time);
	s->map_bytes = m->len;
}

void km_segment_drop_retired(struct km_segment *s)
{
	struct maps old = { s->retired_index_map, s->retired_time_map,
			    s->retired_bytes };

	unmap_pair(&old);
	s->retired_index_map = s->retired_time_map = NULL;
	s->retired_bytes = 0;
}

/* Only with no reader on the segment (write lock held, or not shared). */
static void unmap(struct km_segment *s)
{
	struct maps old = { s->index_map, s->time_map, s->map_bytes };
	static const struct maps none = { NULL, NULL, 0 };

	set_maps(s, &none);
	unmap_pair(&old);
	km_segment_drop_retired(s);
}

static bool no_space(int err)
{
	return err == ENOSPC || err == EDQUOT;
}

/* Size both index files to len, sparse: Kafka's setLength. Blocks come a
 * page at a time ahead of the entries (alloc_entries), so a segment that
 * stays small - most of them, with many quiet partitions - takes a page or
 * two rather than index_bytes_max. Extending a file's length takes no
 * space, so a full disk never shrinks the index. */
static int size_pair(const struct km_segment *s, uint32_t len)
{
	struct stat st[2];

	if (fstat(s->index_fd, &st[0]) < 0 || fstat(s->time_fd, &st[1]) < 0)
		return -errno;
	/* Never cut entries a reopened file holds past len. */
	if ((uint64_t)st[0].st_size < len && ftruncate(s->index_fd, len) < 0)
		return -errno;
	if ((uint64_t)st[1].st_size < len && ftruncate(s->time_fd, len) < 0)
		return -errno;
	return 0;
}

/* Map both indexes at len bytes into m; writable maps size the files. */
static int map_pair(struct km_segment *s, uint32_t len, bool writable,
		    struct maps *m)
{
	int prot = PROT_READ | (writable ? PROT_WRITE : 0);
	int rc;

	*m = (struct maps){ NULL, NULL, len };
	if (len == 0)
		return 0;
	/* Read-only: map what is there (entries are counted from each
	 * file's own size); never pad the shorter file. Writable: stores
	 * land only in blocks alloc_entries allocated, which starts again
	 * from 0 for this mapping. */
	if (writable) {
		if ((rc = size_pair(s, len)) < 0)
			return rc;
		s->index_alloc = s->time_alloc = 0;
	}
	m->index = mmap(NULL, len, prot, MAP_SHARED, s->index_fd, 0);
	m->time = mmap(NULL, len, prot, MAP_SHARED, s->time_fd, 0);
	if (m->index == MAP_FAILED || m->time == MAP_FAILED) {
		int err = -errno;

		m->index = m->index == MAP_FAILED ? NULL : m->index;
		m->time = m->time == MAP_FAILED ? NULL : m->time;
		unmap_pair(m);
		*m = (struct maps){ NULL, NULL, 0 };
		return err;
	}
	return 0;
}

/* Map a segment no reader can see yet (or under the write lock). */
static int map_indexes(struct km_segment *s, uint32_t len, bool writable)
{
	struct maps m;
	int rc = map_pair(s, len, writable, &m);

	if (rc == 0)
		set_maps(s, &m);
	return rc;
}

/* The .txnindex exists only once the segment holds an aborted
 * transaction, as with Kafka's TransactionIndex: open it if it is there;
 * a new segment removes one a crash left at its name (the O_TRUNC of the
 * other files). */
static int open_txn_file(struct km_segment *s, int flags)
{
	char name[64];

	if (flags & O_TRUNC) {
		snprintf(name, sizeof(name), "%020lld%s",
			 (long long)s->base_offset, suffixes[3]);
		return unlinkat(s->dir_fd, name, 0) < 0 && errno != ENOENT
			       ? -errno : 0;
	}
	s->txn_fd = open_file(s->dir_fd, s->base_offset, suffixes[3], 0);
	if (s->txn_fd == -ENOENT)
		s->txn_fd = -1;
	return s->txn_fd < -1 ? s->txn_fd : 0;
}

static int open_files(struct km_segment *s, int dir_fd, int64_t base, int flags)
{
	int *fds[3] = { &s->log_fd, &s->index_fd, &s->time_fd };
	int err;

	memset(s, 0, sizeof(*s));
	s->log_fd = s->index_fd = s->time_fd = s->txn_fd = -1;
	s->dir_fd = dir_fd;
	s->base_offset = base;
	s->next_offset = base;
	s->max_timestamp = -1;
	s->max_timestamp_offset = base;
	for (int i = 0; i < 3; i++) {
		*fds[i] = open_file(dir_fd, base, suffixes[i], flags);
		if (*fds[i] < 0) {
			err = *fds[i];
			goto fail;
		}
	}
	if ((err = open_txn_file(s, flags)) == 0)
		return 0;
fail:
	if (s->txn_fd < 0)
		s->txn_fd = -1;
	km_segment_close(s);
	return err;
}

/* A cold partition gives its descriptors back (log_files.c); its maps,
 * reservations and sizes stay, so reopening the same files is all it takes
 * to go on. */
void km_segment_files_close(struct km_segment *s)
{
	close_fd(&s->log_fd);
	close_fd(&s->index_fd);
	close_fd(&s->time_fd);
	close_fd(&s->txn_fd);
	s->dir_fd = -1;
}

/* Between the operations that need them, a segment keeps its .log only:
 * the indexes are written and read through their maps, which stay valid
 * once their descriptors are closed (log_files.c). */
void km_segment_files_shed(struct km_segment *s)
{
	close_fd(&s->index_fd);
	close_fd(&s->time_fd);
	close_fd(&s->txn_fd);
	s->dir_fd = -1;
}

int km_segment_files_reopen(struct km_segment *s, int dir_fd)
{
	int *fds[3] = { &s->log_fd, &s->index_fd, &s->time_fd };
	bool had_log = s->log_fd >= 0;
	int rc = 0;

	s->dir_fd = dir_fd;
	for (int i = 0; i < 3 && rc == 0; i++)
		if (*fds[i] < 0 && (*fds[i] = open_file(dir_fd, s->base_offset,
							suffixes[i], 0)) < 0)
			rc = *fds[i];
	/* Without entries there is no .txnindex to look up (the first one
	 * makes it: km_segment_txn_append). */
	if (rc == 0 && s->txn_fd < 0 && PUBLISHED(s->txn_bytes) > 0)
		rc = open_txn_file(s, 0);
	if (rc < 0 && had_log) /* writes in flight may use it */
		km_segment_files_shed(s);
	else if (rc < 0)
		km_segment_files_close(s);
	return rc;
}

int km_segment_create(struct km_segment *s, int dir_fd, int64_t base,
		      uint32_t index_bytes_max)
{
	int rc = open_files(s, dir_fd, base, O_CREAT | O_TRUNC);

	if (rc < 0)
		return rc;
	s->active = true;
	rc = map_indexes(s, index_bytes_max, true);
	/* The new names must survive a crash as well as their contents. */
	if (rc == 0 && fsync(dir_fd) < 0)
		rc = -errno;
	if (rc < 0)
		km_segment_close(s);
	return rc;
}

/* Entry accessors take the map a caller loaded, so that a reader uses one
 * mapping and one entry count it loaded together. */
static int64_t index_offset(const struct km_segment *s, const uint8_t *map,
			    uint32_t i)
{
	return s->base_offset +
	       (int32_t)km_load_be32(map + i * KM_INDEX_ENTRY_BYTES);
}

static uint32_t index_position(const uint8_t *map, uint32_t i)
{
	return km_load_be32(map + i * KM_INDEX_ENTRY_BYTES + 4);
}

static int64_t time_ts(const uint8_t *map, uint32_t i)
{
	return (int64_t)km_load_be64(map + i * KM_TIMEINDEX_ENTRY_BYTES);
}

static int64_t time_offset(const struct km_segment *s, const uint8_t *map,
			   uint32_t i)
{
	return s->base_offset +
	       (int32_t)km_load_be32(map + i * KM_TIMEINDEX_ENTRY_BYTES + 8);
}

/* Sizes on disk decide entry counts; the newest time entry seeds the max. */
static int load_sizes(struct km_segment *s, uint32_t *map_len)
{
	struct stat st[4];
	int fds[4] = { s->log_fd, s->index_fd, s->time_fd, s->txn_fd };

	memset(&st[3], 0, sizeof(st[3])); /* no .txnindex: no entries */
	for (int i = 0; i < 4; i++)
		if (fds[i] >= 0 && fstat(fds[i], &st[i]) < 0)
			return -errno;
	s->size_bytes = (uint64_t)st[0].st_size;
	km_segment_set_readable(s, s->size_bytes);
	s->reserved_bytes = s->size_bytes;
	PUBLISH(s->index_entries,
		(uint32_t)(st[1].st_size / KM_INDEX_ENTRY_BYTES));
	PUBLISH(s->time_entries,
		(uint32_t)(st[2].st_size / KM_TIMEINDEX_ENTRY_BYTES));
	PUBLISH(s->txn_bytes, (uint64_t)st[3].st_size -
				      (uint64_t)st[3].st_size %
					      KM_TXNINDEX_ENTRY_BYTES);
	*map_len = (uint32_t)(st[1].st_size > st[2].st_size ? st[1].st_size
							    : st[2].st_size);
	return 0;
}

int km_segment_open(struct km_segment *s, int dir_fd, int64_t base,
		    uint32_t index_bytes_max, bool active)
{
	uint32_t len;
	bool trimmed;
	int rc = open_files(s, dir_fd, base, O_CREAT);

	if (rc < 0)
		return rc;
	if ((rc = load_sizes(s, &len)) < 0)
		goto out_close;
	s->active = active;
	trimmed = len < index_bytes_max;
	if (active && trimmed)
		len = index_bytes_max;
	/* A crashed active segment leaves its index files at their full
	 * length behind; the caller resets and rebuilds them from the .log.
	 * Their last "entry" is then a hole, which a read would fill with a
	 * page on tmpfs: only a trimmed file's is read. */
	if ((rc = map_indexes(s, len, active)) < 0)
		goto out_close;
	if (s->time_entries > 0 && (trimmed || !active)) {
		s->max_timestamp = time_ts(s->time_map, s->time_entries - 1);
		s->max_timestamp_offset =
			time_offset(s, s->time_map, s->time_entries - 1);
	}
	return 0;
out_close:
	km_segment_close(s);
	return rc;
}

/* Shrink both index files to their entries and map them read-only. The
 * new maps are published before the old ones go: with retire, the old ones
 * are kept for readers that loaded them (see km_segment_drop_retired),
 * otherwise no reader may be using the segment. Shrinking the files under
 * an old map is safe for readers: they read published entries only, which
 * the new sizes still hold. */
static int trim_indexes(struct km_segment *s, bool retire, bool sync)
{
	uint32_t ilen = s->index_entries * KM_INDEX_ENTRY_BYTES;
	uint32_t tlen = s->time_entries * KM_TIMEINDEX_ENTRY_BYTES;
	struct maps old = { s->index_map, s->time_map, s->map_bytes }, m;
	int rc;

	/* Without sync the caller fsyncs the files later: a page written
	 * through a shared map is dirty in the page cache from that write
	 * on, so the fsync covers it as the msync would. */
	if (sync && s->index_map != NULL &&
	    msync(s->index_map, s->map_bytes, MS_SYNC) < 0)
		return -errno;
	if (sync && s->time_map != NULL &&
	    msync(s->time_map, s->map_bytes, MS_SYNC) < 0)
		return -errno;
	if ((rc = map_pair(s, ilen > tlen ? ilen : tlen, false, &m)) < 0)
		return rc;
	set_maps(s, &m);
	if (retire) {
		KM_ASSERT(s->retired_index_map == NULL);
		KM_ASSERT(s->retired_time_map == NULL);
		s->retired_index_map = old.index;
		s->retired_time_map = old.time;
		s->retired_bytes = old.len;
	} else {
		unmap_pair(&old);
	}
	if (ftruncate(s->index_fd, ilen) < 0 || ftruncate(s->time_fd, tlen) < 0)
		return -errno;
	return 0;
}

/* The blocks a seal reserved past the data and could not punch: ext4
 * punches nothing past i_size, where KEEP_SIZE reservations lie once every
 * write has landed. A truncate to the data's end frees them - only then,
 * since under a write still in flight it would move i_size. */
static void give_back_tail(struct km_segment *s)
{
	if (s->tail_reserved && s->log_fd >= 0 &&
	    PUBLISHED(s->readable_bytes) == s->size_bytes &&
	    ftruncate(s->log_fd, (off_t)s->size_bytes) == 0)
		s->tail_reserved = false;
}

void km_segment_close(struct km_segment *s)
{
	if (s->active && s->index_fd >= 0)
		(void)trim_indexes(s, false, true);
	give_back_tail(s);
	/* Give back fallocate'd blocks past the end of the data. */
	if (s->log_fd >= 0 && s->reserved_bytes > s->size_bytes)
		(void)ftruncate(s->log_fd, (off_t)s->size_bytes);
	/* Nothing stays readable (a failed structural change may leave the
	 * closed segment in the log's array). */
	PUBLISH(s->index_entries, 0);
	PUBLISH(s->time_entries, 0);
	PUBLISH(s->txn_bytes, 0);
	km_segment_set_readable(s, 0);
	unmap(s);
	close_fd(&s->log_fd);
	close_fd(&s->index_fd);
	close_fd(&s->time_fd);
	close_fd(&s->txn_fd);
	s->active = false;
}

int km_segment_delete(struct km_segment *s, int dir_fd)
{
	int64_t base = s->base_offset;
	int rc = 0;

	s->active = false; /* no point trimming what is deleted */
	km_segment_close(s);
	for (int i = 0; i < 4; i++) {
		char name[64];

		snprintf(name, sizeof(name), "%020lld%s", (long long)base,
			 suffixes[i]);
		if (unlinkat(dir_fd, name, 0) < 0 && errno != ENOENT)
			rc = -errno;
	}
	return rc;
}

bool km_segment_index_full(const struct km_segment *s)
{
	return (s->index_entries + 1) * KM_INDEX_ENTRY_BYTES > s->map_bytes ||
	       (s->time_entries + 1) * KM_TIMEINDEX_ENTRY_BYTES > s->map_bytes;
}

/* Blocks in fd up to end bytes (capped at the mapping), from *alloc on,
 * in KM_SEGMENT_INDEX_STEP_BYTES steps. A filesystem without fallocate
 * cannot promise them: its stores fault on a full disk as Kafka's do. */
static int alloc_entries(const struct km_segment *s, int fd, uint32_t *alloc,
			 uint64_t end)
{
	uint64_t to;

	if (end > s->map_bytes)
		end = s->map_bytes;
	if (end <= *alloc)
		return 0;
	to = (end + KM_SEGMENT_INDEX_STEP_BYTES - 1) &
	     ~(uint64_t)(KM_SEGMENT_INDEX_STEP_BYTES - 1);
	if (to > s->map_bytes)
		to = s->map_bytes;
	if (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)*alloc,
		      (off_t)(to - *alloc)) < 0) {
		if (errno != EOPNOTSUPP)
			return -errno;
		to = s->map_bytes;
	}
	*alloc = (uint32_t)to;
	return 0;
}

/* What the next batch may store (one offset entry, one time entry) and
 * what a seal then adds (one time entry), capped at the mapping. */
static uint64_t index_end(const struct km_segment *s)
{
	uint64_t e = (uint64_t)(s->index_entries + 1) * KM_INDEX_ENTRY_BYTES;

	return e < s->map_bytes ? e : s->map_bytes;
}

static uint64_t time_end(const struct km_segment *s)
{
	uint64_t e = (uint64_t)(s->time_entries + 2) * KM_TIMEINDEX_ENTRY_BYTES;

	return e < s->map_bytes ? e : s->map_bytes;
}

/* Blocks for what the next batch and a seal may store. */
static int reserve_indexes(struct km_segment *s)
{
	int rc = alloc_entries(s, s->index_fd, &s->index_alloc, index_end(s));

	if (rc == 0)
		rc = alloc_entries(s, s->time_fd, &s->time_alloc, time_end(s));
	return rc;
}

bool km_segment_index_due(const struct km_segment *s)
{
	return s->active &&
	       (index_end(s) > s->index_alloc || time_end(s) > s->time_alloc);
}

/* TimeIndex.maybeAppend: only a timestamp above the last entry's (or above
 * -1 when empty) is recorded. */
static void time_maybe_append(struct km_segment *s, int64_t ts, int64_t offset)
{
	uint8_t *e;

	if (ts <= (s->time_entries > 0 ? time_ts(s->time_map, s->time_entries - 1)
				       : -1))
		return;
	e = s->time_map + s->time_entries * KM_TIMEINDEX_ENTRY_BYTES;
	km_store_be64(e, (uint64_t)ts);
	km_store_be32(e + 8, (uint32_t)(offset - s->base_offset));
	PUBLISH(s->time_entries, s->time_entries + 1); /* after its bytes */
}

int km_segment_index_batch(struct km_segment *s, int64_t base_offset,
			   int64_t last_offset, int64_t max_timestamp,
			   uint64_t position, uint32_t size_bytes,
			   uint32_t interval_bytes)
{
	int rc;

	KM_ASSERT(s->active);
	KM_ASSERT(base_offset >= s->next_offset);
	KM_ASSERT(last_offset - s->base_offset <= INT32_MAX);
	if (max_timestamp > s->max_timestamp) {
		s->max_timestamp = max_timestamp;
		s->max_timestamp_offset = last_offset;
	}
	if (s->bytes_since_index > interval_bytes) {
		uint8_t *e;

		if (km_segment_index_full(s))
			return -ENOSPC;
		/* Callers that did not reserve (a rebuild, the cleaner). */
		if ((rc = reserve_indexes(s)) < 0)
			return rc;
		e = s->index_map + s->index_entries * KM_INDEX_ENTRY_BYTES;
		km_store_be32(e, (uint32_t)(last_offset - s->base_offset));
		km_store_be32(e + 4, (uint32_t)position);
		PUBLISH(s->index_entries, s->index_entries + 1);
		time_maybe_append(s, s->max_timestamp, s->max_timestamp_offset);
		s->bytes_since_index = 0;
	}
	s->bytes_since_index += size_bytes;
	s->next_offset = last_offset + 1;
	return 0;
}

static int seal(struct km_segment *s, bool sync)
{
	int rc;

	KM_ASSERT(s->active);
	/* Appends reserved this entry's blocks already; a rebuilt segment
	 * that never took an entry did not. */
	if ((rc = reserve_indexes(s)) < 0)
		return rc;
	if (s->max_timestamp >= 0 && !km_segment_index_full(s))
		time_maybe_append(s, s->max_timestamp, s->max_timestamp_offset);
	if ((rc = trim_indexes(s, true, sync)) < 0)
		return rc;
	/* Give back the blocks reserved past the data; KEEP_SIZE leaves the
	 * file size (and writes still in flight below it) alone. */
	if (s->reserved_bytes > s->size_bytes &&
	    fallocate(s->log_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)s->size_bytes,
		      (off_t)(s->reserved_bytes - s->size_bytes)) < 0 &&
	    errno != EOPNOTSUPP)
		return -errno;
	if (s->reserved_bytes > s->size_bytes)
		s->tail_reserved = true;
	s->reserved_bytes = s->size_bytes;
	give_back_tail(s);
	s->active = false;
	if (sync && (fsync(s->index_fd) < 0 || fsync(s->time_fd) < 0 ||
	    (s->txn_fd >= 0 && fsync(s->txn_fd) < 0)))
		return -errno;
	return 0;
}

int km_segment_seal(struct km_segment *s)
{
	return seal(s, true);
}

int km_segment_seal_nosync(struct km_segment *s)
{
	return seal(s, false);
}

uint64_t km_segment_lookup(const struct km_segment *s, int64_t target)
{
	/* Count first: every mapping published since holds that many. */
	uint32_t lo = 0, hi = PUBLISHED(s->index_entries);
	const uint8_t *map = PUBLISHED(s->index_map);

	/* Binary search for the last entry with offset <= target. */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (index_offset(s, map, mid) <= target)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == 0 ? 0 : index_position(map, lo - 1);
}

int64_t km_segment_time_lookup(const struct km_segment *s, int64_t ts)
{
	uint32_t lo = 0, hi = PUBLISHED(s->time_entries);
	const uint8_t *map = PUBLISHED(s->time_map);

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (time_ts(map, mid) <= ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == 0 ? s->base_offset : time_offset(s, map, lo - 1);
}

uint64_t km_segment_step_next(uint64_t step, uint64_t elapsed_ms, uint64_t max)
{
	uint64_t min = KM_SEGMENT_STEP_MIN_BYTES < max ? KM_SEGMENT_STEP_MIN_BYTES
						       : max;

	if (step == 0)
		return min;
	if (elapsed_ms < KM_SEGMENT_STEP_FAST_MS)
		step *= 2;
	else if (elapsed_ms > KM_SEGMENT_STEP_SLOW_MS)
		step /= 2;
	return step < min ? min : step > max ? max : step;
}

/* fallocate *want bytes at from, or, if the disk cannot hold that, only
 * need: a step the disk cannot hold says nothing of the batch, and the disk
 * should fill up to its last batch. @return 0 (*want reserved), 1 (no
 * fallocate on this filesystem), or -errno. */
static int alloc_step(int fd, uint64_t from, uint64_t need, uint64_t *want)
{
	if (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)*want) == 0)
		return 0;
	if (errno == EOPNOTSUPP)
		return 1;
	if (!no_space(errno) || *want == need)
		return -errno;
	*want = need;
	if (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)need) == 0)
		return 0;
	return errno == EOPNOTSUPP ? 1 : -errno;
}

/* Size a step to the filesystem: at most a quarter of what is free above
 * keep_free, so that near full the steps shrink to what each batch needs
 * (no preallocation): a near-full disk is shared by every partition, and
 * a step one of them reserved and does not fill is lost to the others
 * until its segment seals. @return 0, or -ENOSPC if not even need fits
 * above keep_free. */
static int size_step(int fd, uint64_t need, uint64_t keep_free, uint64_t *want)
{
	struct statvfs sv;
	uint64_t avail, room;

	if (fstatvfs(fd, &sv) < 0)
		return 0; /* no figure: the fallocate decides */
	avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (avail < need + keep_free)
		return -ENOSPC;
	room = (avail - keep_free) / 4;
	if (*want > room)
		*want = room > need ? room : need;
	return 0;
}

int km_segment_reserve(struct km_segment *s, uint64_t end, uint64_t chunk_bytes,
		       uint64_t keep_free)
{
	uint64_t need, want;
	int rc;

	if (s->active && (rc = reserve_indexes(s)) < 0)
		return rc;
	if (end <= s->reserved_bytes)
		return 0;
	need = end - s->reserved_bytes;
	want = need < chunk_bytes ? chunk_bytes : need;
	/* Once per step, not per append: a step covers many batches while
	 * the disk has room. */
	if ((rc = size_step(s->log_fd, need, keep_free, &want)) < 0)
		return rc;
	/* A filesystem without fallocate (rc 1) gets no early ENOSPC, only
	 * the write's own; remember that and stop asking. */
	if ((rc = alloc_step(s->log_fd, s->reserved_bytes, need, &want)) < 0)
		return rc;
	s->reserved_bytes += want;
	return 0;
}

/* The first entry makes the file. Its name is made durable at once:
 * recovery rebuilds entries only for the segments it rescans, so a sealed
 * segment's must not lose its name in a crash. */
static int create_txn_file(struct km_segment *s)
{
	int fd = open_file(s->dir_fd, s->base_offset, suffixes[3], O_CREAT);

	if (fd < 0)
		return fd;
	if (fsync(s->dir_fd) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	/* Readers use it only after txn_bytes (published later) says so. */
	s->txn_fd = fd;
	return 0;
}

int km_segment_txn_append(struct km_segment *s, const struct km_aborted_txn *t)
{
	uint8_t e[KM_TXNINDEX_ENTRY_BYTES];
	ssize_t n;
	int rc;

	km_store_be16(e, 0);
	km_store_be64(e + 2, (uint64_t)t->producer_id);
	km_store_be64(e + 10, (uint64_t)t->first_offset);
	km_store_be64(e + 18, (uint64_t)t->last_offset);
	km_store_be64(e + 26, (uint64_t)t->last_stable_offset);
	if (s->txn_fd < 0 && (rc = create_txn_file(s)) < 0)
		return rc;
	n = pwrite(s->txn_fd, e, sizeof(e), (off_t)s->txn_bytes);
	if (n < 0)
		return -errno;
	if (n != (ssize_t)sizeof(e))
		return -EIO;
	PUBLISH(s->txn_bytes, s->txn_bytes + sizeof(e)); /* after the pwrite */
	return 0;
}

static void decode_txn(const uint8_t *e, struct km_aborted_txn *t)
{
	t->producer_id = (int64_t)km_load_be64(e + 2);
	t->first_offset = (int64_t)km_load_be64(e + 10);
	t->last_offset = (int64_t)km_load_be64(e + 18);
	t->last_stable_offset = (int64_t)km_load_be64(e + 26);
}

int km_segment_txn_read(const struct km_segment *s, int64_t from, int64_t to,
			struct km_aborted_txn *out, uint32_t max)
{
	return km_segment_txn_read_fd(s->txn_fd, PUBLISHED(s->txn_bytes), from,
				      to, out, max);
}

int km_segment_txn_read_fd(int fd, uint64_t end, int64_t from, int64_t to,
			   struct km_aborted_txn *out, uint32_t max)
{
	uint8_t buf[KM_TXNINDEX_ENTRY_BYTES * 64];
	uint32_t found = 0;

	for (uint64_t pos = 0; pos < end; pos += sizeof(buf)) {
		size_t want = end - pos < sizeof(buf) ? end - pos : sizeof(buf);
		ssize_t n = pread(fd, buf, want, (off_t)pos);

		if (n < 0)
			return -errno;
		for (ssize_t i = 0; i + KM_TXNINDEX_ENTRY_BYTES <= n;
		     i += KM_TXNINDEX_ENTRY_BYTES) {
			struct km_aborted_txn t;

			decode_txn(buf + i, &t);
			if (t.last_offset < from || t.first_offset >= to)
				continue;
			if (found < max)
				out[found] = t;
			found++;
		}
	}
	return (int)found;
}

/* Entries in [0, n) are kept: those with offset < next_offset. */
static uint32_t count_below(const struct km_segment *s, bool time,
			    int64_t next_offset)
{
	uint32_t n = time ? s->time_entries : s->index_entries;

	while (n > 0 && (time ? time_offset(s, s->time_map, n - 1)
			      : index_offset(s, s->index_map, n - 1)) >=
				next_offset)
		n--;
	return n;
}

/* No entry left: the file goes, so that the directory is the one of a
 * segment that never held the abort (what recovery's "same as a log fed
 * only what is kept" needs; Kafka's truncateTo keeps an empty file, which
 * it reads the same). Under the write lock or before any reader. */
static int drop_txn_file(struct km_segment *s)
{
	char name[64];

	PUBLISH(s->txn_bytes, 0);
	if (ftruncate(s->txn_fd, 0) < 0)
		return -errno;
	close_fd(&s->txn_fd);
	snprintf(name, sizeof(name), "%020lld%s", (long long)s->base_offset,
		 suffixes[3]);
	return unlinkat(s->dir_fd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
}

int km_segment_txn_truncate(struct km_segment *s, int64_t next_offset)
{
	uint8_t e[KM_TXNINDEX_ENTRY_BYTES];
	uint64_t keep = 0;

	if (s->txn_fd < 0) /* never held an entry */
		return 0;
	/* Entries are in marker order, so the kept ones are a prefix. */
	while (keep < s->txn_bytes) {
		struct km_aborted_txn t;

		if (pread(s->txn_fd, e, sizeof(e), (off_t)keep) != (ssize_t)sizeof(e))
			return -EIO;
		decode_txn(e, &t);
		if (t.last_offset >= next_offset)
			break;
		keep += sizeof(e);
	}
	if (keep == 0)
		return drop_txn_file(s);
	if (ftruncate(s->txn_fd, (off_t)keep) < 0)
		return -errno;
	PUBLISH(s->txn_bytes, keep);
	return 0;
}

int km_segment_truncate(struct km_segment *s, uint64_t pos, int64_t next_offset)
{
	/* Under the log's write lock: no reader sees the steps in between. */
	if (ftruncate(s->log_fd, (off_t)pos) < 0)
		return -errno;
	s->size_bytes = pos;
	km_segment_set_readable(s, pos);
	s->reserved_bytes = pos;
	PUBLISH(s->index_entries, count_below(s, false, next_offset));
	PUBLISH(s->time_entries, count_below(s, true, next_offset));
	s->next_offset = next_offset;
	s->bytes_since_index = 0;
	s->max_timestamp =
		s->time_entries ? time_ts(s->time_map, s->time_entries - 1) : -1;
	s->max_timestamp_offset =
		s->time_entries ? time_offset(s, s->time_map, s->time_entries - 1)
				: s->base_offset;
	if (!s->active) {
		int rc = trim_indexes(s, false, true);

		if (rc < 0)
			return rc;
	}
	return km_segment_txn_truncate(s, next_offset);
}

void km_segment_reset_indexes(struct km_segment *s)
{
	KM_ASSERT(s->active);
	PUBLISH(s->index_entries, 0);
	PUBLISH(s->time_entries, 0);
	s->bytes_since_index = 0;
	s->max_timestamp = -1;
	s->max_timestamp_offset = s->base_offset;
	s->next_offset = s->base_offset;
}
