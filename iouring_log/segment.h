/* One log segment: `<base>.log` plus its `.index`, `.timeindex` and
 * `.txnindex`, named by the 20-digit zero-padded base offset (Kafka's
 * LogFileUtils), in Kafka's byte formats (spec §3):
 *   .index      8-byte entries: relativeOffset int32 | position int32
 *   .timeindex  12-byte entries: timestamp int64 | relativeOffset int32
 *   .txnindex   34-byte entries: version int16 (0) | producerId int64 |
 *               firstOffset int64 | lastOffset int64 | lastStableOffset int64
 *
 * The .log is written by the owner's io_uring (log.c); this module keeps the
 * indexes and the files. The active segment's offset and time indexes are
 * sized to index_bytes_max and memory-mapped, as Kafka does (its
 * AbstractIndex's RandomAccessFile.setLength: a sparse file), and trimmed
 * to their entries when the segment stops being active. Their blocks are
 * allocated a page at a time ahead of the entries (km_segment_reserve), so
 * that a store into the map cannot fault on a full disk. The
 * .txnindex is made only when the segment's first aborted transaction is
 * recorded (Kafka's TransactionIndex); a segment without one has none.
 */
#ifndef KM_IOURING_LOG_SEGMENT_H
#define KM_IOURING_LOG_SEGMENT_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
	KM_INDEX_ENTRY_BYTES = 8,
	KM_TIMEINDEX_ENTRY_BYTES = 12,
	KM_TXNINDEX_ENTRY_BYTES = 34,
	KM_SEGMENT_NAME_DIGITS = 20,
	/* Index blocks are allocated in steps of this many bytes. */
	KM_SEGMENT_INDEX_STEP_BYTES = 4096,
};

/* The .log's reservation steps (km_segment_step_next). */
#define KM_SEGMENT_STEP_MIN_BYTES (64ull << 10)
#define KM_SEGMENT_STEP_FAST_MS 1000u
#define KM_SEGMENT_STEP_SLOW_MS 4000u

/* One .txnindex entry (AbortedTxn). */
struct km_aborted_txn {
	int64_t producer_id;
	int64_t first_offset;
	int64_t last_offset;
	int64_t last_stable_offset;
};

/* Fields are private to iouring_log/; the log embeds segments by value.
 *
 * Threading (log.h): the owner changes every field. Readers on other
 * threads read the fields marked [pub] while the owner appends: the owner
 * stores them with release after what they cover is in place (entry bytes,
 * file bytes, a new mapping), readers load them with acquire
 * (km_segment_published_*; GCC builtins, since this header is also C++).
 * base_offset and the fds change only under the log's write lock, but
 * txn_fd: the owner sets it once, before it first publishes txn_bytes,
 * and readers use it only when txn_bytes is not 0. */
struct km_segment {
	int64_t base_offset;
	int64_t next_offset;	  /* last offset in the segment + 1 */
	int log_fd;
	int index_fd;
	int time_fd;
	int txn_fd;		  /* -1 until the first aborted transaction */
	int dir_fd;		  /* the log's (borrowed), to make the .txnindex */
	uint64_t size_bytes;	  /* .log bytes appended (some maybe in flight) */
	uint64_t readable_bytes;  /* [pub] .log bytes whose writes completed */
	uint64_t reserved_bytes;  /* .log blocks reserved with fallocate */
	/* Bytes from the start of each index file whose blocks are allocated
	 * (km_segment_reserve); 0 after an open, which allocates again what
	 * is there (fallocate of allocated blocks takes no space). */
	uint32_t index_alloc;
	uint32_t time_alloc;
	uint8_t *index_map;	  /* [pub] */
	uint8_t *time_map;	  /* [pub] */
	uint32_t map_bytes;	  /* mapping length of each index */
	uint32_t index_entries;	  /* [pub] */
	uint32_t time_entries;	  /* [pub] */
	uint32_t bytes_since_index;
	int64_t max_timestamp;	  /* largest batch maxTimestamp so far */
	int64_t max_timestamp_offset;
	uint64_t txn_bytes;	  /* [pub] */
	/* Mappings a seal replaced: a reader may still be using them, so they
	 * are unmapped by km_segment_drop_retired() after a grace period. */
	uint8_t *retired_index_map;
	uint8_t *retired_time_map;
	uint32_t retired_bytes;
	bool active;
	bool tail_reserved;	  /* sealed with blocks reserved past the data */
};

/** Publish that the .log bytes below end are written (owner thread). */
static inline void km_segment_set_readable(struct km_segment *s, uint64_t end)
{
	/* Release: a reader that loads end also sees the completed write. */
	__atomic_store_n(&s->readable_bytes, end, __ATOMIC_RELEASE);
}

/** .log bytes any thread may read: every write below them has completed. */
static inline uint64_t km_segment_readable(const struct km_segment *s)
{
	return __atomic_load_n(&s->readable_bytes, __ATOMIC_ACQUIRE);
}

/** "<dir>/<20-digit base><suffix>" into out (PATH_MAX). */
void km_segment_path(char *out, const char *dir, int64_t base,
		     const char *suffix);

/**
 * Create the four files of a new, empty, active segment (existing ones are
 * truncated) and map its indexes at index_bytes_max (sparse files).
 * @return 0 or -errno.
 */
int km_segment_create(struct km_segment *s, int dir_fd, int64_t base,
		      uint32_t index_bytes_max);

/**
 * Open an existing segment's files. Indexes are mapped as they are on disk
 * (entries = file size / entry size); with active, they are extended to
 * index_bytes_max for appends (sparse, as at create; never below what
 * they hold).
 * @return 0 or -errno.
 */
int km_segment_open(struct km_segment *s, int dir_fd, int64_t base,
		    uint32_t index_bytes_max, bool active);

/** Unmap (retired maps too) and close. Trims the indexes first if the
 *  segment was active. No reader may be using the segment. */
void km_segment_close(struct km_segment *s);

/** Close the segment's files but keep it as it is: maps, sizes and
 *  reservations (log_files.c). No read or write may be using them. */
void km_segment_files_close(struct km_segment *s);

/** Open again what km_segment_files_close or km_segment_files_shed
 *  closed, in dir_fd (which the segment borrows). @return 0, or -errno
 *  with the segment's files as they were before. */
int km_segment_files_reopen(struct km_segment *s, int dir_fd);

/** Close the index files' descriptors (the maps stay) and forget the
 *  directory's; the .log's stays (log_files.c). km_segment_files_reopen
 *  opens them again. No read or write may be using them. */
void km_segment_files_shed(struct km_segment *s);

/** True if the next km_segment_reserve allocates index blocks, which
 *  needs the index files' descriptors. */
bool km_segment_index_due(const struct km_segment *s);

/** Remove the segment's four files (closing it first). @return 0 or -errno. */
int km_segment_delete(struct km_segment *s, int dir_fd);

/**
 * Index one batch appended at position with size bytes, Kafka's
 * LogSegment.append rule: when more than interval_bytes were appended since
 * the last entry, add (lastOffset, position) to .index and, if the max
 * timestamp grew, (maxTimestamp, its offset) to .timeindex.
 * @return 0, or -ENOSPC if the offset index is full (the caller rolls first,
 *         see km_segment_index_full).
 */
int km_segment_index_batch(struct km_segment *s, int64_t base_offset,
			   int64_t last_offset, int64_t max_timestamp,
			   uint64_t position, uint32_t size_bytes,
			   uint32_t interval_bytes);

/** True if the next index entry would not fit. */
bool km_segment_index_full(const struct km_segment *s);

/**
 * Make the segment inactive: final time-index entry (Kafka's
 * onBecomeInactiveSegment), indexes trimmed to their entries and synced,
 * .log reservation released and synced. Readers may use the segment
 * meanwhile: the writable index maps are replaced by read-only ones and
 * kept as retired until km_segment_drop_retired(). @return 0 or -errno.
 */
int km_segment_seal(struct km_segment *s);

/** km_segment_seal without its msyncs and fsyncs: for a caller that
 *  fsyncs index_fd, time_fd and txn_fd (if >= 0) itself, many segments'
 *  at once (a log's batched close, log_close.c), before it relies on
 *  them. @return 0 or -errno. */
int km_segment_seal_nosync(struct km_segment *s);

/** Unmap the maps a seal retired, once no reader can be using them. */
void km_segment_drop_retired(struct km_segment *s);

/**
 * Byte position in .log of the last indexed batch with offset <= target:
 * where a scan for target starts. 0 if none. Any thread (published entries
 * only); an entry may name a batch whose write has not completed yet.
 */
uint64_t km_segment_lookup(const struct km_segment *s, int64_t target);

/**
 * Offset to start a scan from for the first record with timestamp >= ts:
 * the time index's last entry with timestamp <= ts, else base_offset.
 * Any thread, as km_segment_lookup.
 */
int64_t km_segment_time_lookup(const struct km_segment *s, int64_t ts);

/**
 * The .log's next reservation step after one of step bytes that lasted
 * elapsed_ms (step 0: the segment's first): doubled, up to max, when it
 * lasted less than KM_SEGMENT_STEP_FAST_MS; halved, down to
 * KM_SEGMENT_STEP_MIN_BYTES (or max if smaller), when it lasted more than
 * KM_SEGMENT_STEP_SLOW_MS; else the same. So a partition holds about a
 * second of its own writes ahead, between those bounds: a quiet one 64 KiB
 * at most, a busy one the full step (fewer, larger extents).
 */
uint64_t km_segment_step_next(uint64_t step, uint64_t elapsed_ms, uint64_t max);

/**
 * Ensure .log blocks are reserved up to end (fallocate KEEP_SIZE, in steps
 * of chunk_bytes but at most a quarter of the free space, and never less
 * than end needs: near full, exactly that), so a write below end cannot
 * fail for space, leaving keep_free bytes of the filesystem free (0: none).
 * Free space is measured (fstatvfs) only when blocks must be reserved,
 * never when end is already reserved. An active segment's index files get
 * blocks first for the entries the batch and a seal may add (a page at a
 * time; not held to keep_free: two pages per some MiB of data).
 * @return 0, or -errno (-ENOSPC, -EDQUOT: not even what end needs fits,
 *         above keep_free; nothing was written, the segment is unchanged).
 */
int km_segment_reserve(struct km_segment *s, uint64_t end, uint64_t chunk_bytes,
		       uint64_t keep_free);

/** Append one .txnindex entry (synchronous pwrite: aborts are rare),
 *  making the file (and syncing the directory) at the first one. */
int km_segment_txn_append(struct km_segment *s, const struct km_aborted_txn *t);

/**
 * Aborted transactions in this segment whose lastOffset >= from and
 * firstOffset < to. Any thread: only published entries are read.
 * @return how many matched; at most max are written to out; or -errno.
 */
int km_segment_txn_read(const struct km_segment *s, int64_t from, int64_t to,
			struct km_aborted_txn *out, uint32_t max);
/** The same, from fd: a .txnindex of this segment the caller opened,
 *  whose first end bytes (txn_bytes as the caller loaded it, before it
 *  chose fd) are published entries. */
int km_segment_txn_read_fd(int fd, uint64_t end, int64_t from, int64_t to,
			   struct km_aborted_txn *out, uint32_t max);

/**
 * Cut the segment at .log position pos holding offsets below next_offset:
 * .log truncated, index entries at or past the cut dropped, .txnindex
 * entries with lastOffset >= next_offset dropped. @return 0 or -errno.
 */
int km_segment_truncate(struct km_segment *s, uint64_t pos, int64_t next_offset);

/** Drop .txnindex entries with lastOffset >= next_offset (the file goes
 *  with its last entry). @return 0 or -errno. */
int km_segment_txn_truncate(struct km_segment *s, int64_t next_offset);

/** Drop all index entries (before a rebuild by rescanning the .log). */
void km_segment_reset_indexes(struct km_segment *s);

#ifdef __cplusplus
}
#endif

#endif
