/* Internals shared by the log*.c files; not for inclusion elsewhere. */
#ifndef KM_IOURING_LOG_LOG_PVT_H
#define KM_IOURING_LOG_LOG_PVT_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#include "iouring_log/log.h"
#include "iouring_log/log_dio.h"

/* iovecs one queued write can carry; more segments start another write. */
#define KM_LOG_WRITE_IOV_MAX 32
/* Writes in flight per log; when all are busy, appends return short. */
#define KM_LOG_WRITES_MAX 64
/* Pending group syncs (one in flight, the rest waiting for their writes). */
#define KM_LOG_FLUSHES_MAX 8
/* Present while the log is closed cleanly (the partition's own). */
#define CLEAN_MARKER ".kafka_cleanshutdown"
/* Snapshots considered when picking a starting point. */
#define KM_LOG_SNAPSHOTS_MAX 256
/* Leader epochs remembered for leader-epoch-checkpoint. */
#define KM_LOG_EPOCHS_MAX 256
/* Present while a km_log_reset_to is under way: "<offset>\n". Its rename
 * into place commits the reset; an open that finds it finishes the reset. */
#define RESET_MARKER ".kmirror_reset"

struct km_log;

struct log_write {
	struct km_io_req io; /* first: the CQE's user_data is this struct */
	struct km_log *log;
	int fd;
	uint64_t pos;
	uint32_t bytes;
	uint32_t n_iov;
	int64_t end_offset; /* last offset written + 1 */
	bool done;
	/* Direct I/O (log_dio.c): the write's buffer, whose first bytes are
	 * the partial block before pos + the data (pos is then that block's
	 * start); the bytes submitted, padded with zeros to whole blocks; and
	 * whether it waits for the write before it, which ends in the same
	 * block, to complete (two writes of one block in flight could land
	 * in either order). chunk is NULL for a buffered write. */
	struct km_dio_chunk *chunk;
	uint32_t io_bytes;
	bool held;
	/* Sealed while the batch it holds part of is unchecked (its CRC is
	 * checked as it is copied, km_log_dio_stage): submitted only by
	 * km_log_dio_commit. */
	bool staged;
	struct iovec iov[KM_LOG_WRITE_IOV_MAX];
};

struct log_flush {
	int fd;
	int64_t target; /* offsets below are durable once the sync completes */
};

struct log_epoch {
	int32_t epoch;
	int64_t start_offset;
};

/* Field order is memory (issue 17): the log lives in a lazily backed
 * mapping (log.c), where a quiet partition pays for each page it touches.
 * The scalars come first, then the arrays, each of which a quiet partition
 * touches at its head only: an idle log holds two pages of it. The write
 * state - the direct-I/O tail block and the ring of writes - takes whole
 * pages of its own at the end, which an idle log gives back (km_log_idle_check,
 * log_dio.c): a partition that once wrote a lot keeps none of it. */
struct km_log {
	struct km_log_config cfg;
	int dir_fd;
	struct km_uring *ring;

	/* The read path's view of the segments (log_read.c): readers hold
	 * seg_lock shared for one read; the owner holds it exclusively only
	 * while it changes segs, n_segs, a segment's fds or base, or unmaps
	 * what a reader could be using (roll, truncate, reset). */
	pthread_rwlock_t seg_lock;
	struct km_segment *segs; /* ascending base offsets; last is active */
	uint32_t n_segs;
	_Atomic int64_t start_offset; /* stored under seg_lock, loaded anywhere */
	int64_t leo; /* owner's log end offset */
	/* Published for other threads: release-stored after the covered bytes
	 * are written (appended) or synced (durable); readers load-acquire. */
	_Atomic int64_t appended;
	_Atomic int64_t durable;
	int error; /* sticky: first failed write/sync/reserve */

	uint32_t w_head, w_count; /* the ring of writes[] */
	struct log_write *filling; /* newest, still taking batches */

	struct log_flush flushes[KM_LOG_FLUSHES_MAX]; /* FIFO ring */
	uint32_t f_head, f_count;
	bool f_in_flight;
	struct km_io_req flush_io;
	uint64_t unflushed_bytes;
	uint64_t last_flush_ms;
	/* The owner's hook on an append (km_log_set_touch): its loop visits
	 * only logs with something to do. */
	void (*touch)(void *arg);
	void *touch_arg;

	struct km_pstate *ps;
	void *ps_mem;
	uint8_t *snap_buf;
	size_t snap_cap;

	uint32_t n_epochs;
	uint32_t n_file_epochs;
	bool epochs_deferred;
	/* What partition.metadata names (metadata_read: it names one). */
	uint8_t topic_id[16];
	bool metadata_read;
	/* Epoch stamped on CLIENT/CONTROL batches: chosen above every epoch in
	 * the log at the first local write after mirrored data (R6). */
	int32_t local_epoch;
	bool local_epoch_chosen;
	/* Compaction (log_clean.c): offsets below clean_dirty were cleaned
	 * with a key map covering them (0 after an open: all is dirty); the
	 * earliest delete horizon a kept batch carries (INT64_MAX: none). */
	int64_t clean_dirty;
	int64_t clean_horizon;
	/* The .log's reservation step and when it was last taken (reserve in
	 * log_io.c): 0 until the first write after an open. */
	uint64_t step_bytes;
	uint64_t step_ms;
	size_t map_bytes; /* the log's one mapping (log.c), this struct first */
	/* Direct I/O (log_dio.c): whether the .log is written with O_DIRECT
	 * (cfg.direct_io and the filesystem takes it), the active segment's
	 * O_DIRECT fd (-1: to open; closed at each structural change), and
	 * where the partial last block of what is queued ends (dio_tail
	 * holds it from the block start; UINT64_MAX: not loaded, read back
	 * from the file when needed). The file may hold zeros past the data
	 * up to the block's end until a seal or close cuts them. */
	bool dio_on;
	int dio_fd;
	/* The tail cache: the buffers of the newest completed writes, which
	 * km_log_read copies from rather than read the disk; dio_tail_next is
	 * the slot the next completed write takes. */
	struct km_dio_tail tails[KM_DIO_TAIL_SLOTS];
	uint32_t dio_tail_next;
	uint64_t dio_tail_end;
	/* The write state in use (km_log_write_new made a write since the
	 * last shed), and the log end and time a tick last saw it move: a
	 * tick that finds it still KM_LOG_IDLE_MS later sheds it. */
	bool awake;
	int64_t idle_leo;
	uint64_t idle_since_ms;
	/* Open files (log_files.c): the owner thread's LRU of logs holding
	 * their files, how many they hold, and whether they are closed. */
	struct km_log *lru_prev, *lru_next;
	bool lru_in;
	bool files_closed;
	bool files_shed; /* only the .logs open (log_files.c) */
	uint32_t files_held;
	/* The partition directory (malloc'd: a path is tens of bytes, and a
	 * PATH_MAX array here would put the arrays' heads a page apart more). */
	char *dir;

	/* Leader epochs, then what leader-epoch-checkpoint holds, and whether
	 * writing it waits for the end of a recovery (log_epoch.c). */
	struct log_epoch epochs[KM_LOG_EPOCHS_MAX];
	struct log_epoch file_epochs[KM_LOG_EPOCHS_MAX];
	/* The write state, in pages of its own that an idle log gives back:
	 * the partial last block (direct I/O), then the ring of writes. */
	_Alignas(KM_DIO_BLOCK) uint8_t dio_tail[KM_DIO_BLOCK];
	_Alignas(KM_DIO_BLOCK) struct log_write writes[KM_LOG_WRITES_MAX];
};

static inline struct km_segment *log_active(struct km_log *log)
{
	return &log->segs[log->n_segs - 1];
}

/* The owner, around a structural change: waits for reads in progress. */
void km_log_lock_segments(struct km_log *log);
void km_log_unlock_segments(struct km_log *log);

static inline int64_t log_start(const struct km_log *log)
{
	return atomic_load_explicit(&log->start_offset, memory_order_acquire);
}

uint64_t km_log_now_ms(void);
/* log.c: give back everything the log holds (its files, maps, memory). */
void km_log_free(struct km_log *log);
bool km_log_clean_marker_exists(struct km_log *log);

/* log_retain.c: the DeleteRecords start kept across an open */
#define KM_LOG_START_FILE "log-start-offset"
void km_log_start_load(struct km_log *log);

/* log_files.c: the owner, before it uses the log's files (reopened if a
 * budget closed them) and after an open; before the log is freed; from
 * its loop, to close cold logs' files once over the budget. */
int km_log_files_need(struct km_log *log);
/* The same for appends and flushes: the .logs only (see log_files.c). */
int km_log_files_need_write(struct km_log *log);
void km_log_files_track(struct km_log *log);
void km_log_files_forget(struct km_log *log);
/* A log being closed: out of the LRU, so that no eviction closes the
 * files its close still syncs. */
void km_log_files_pin(struct km_log *log);
void km_log_files_trim(void);
/* Readers, around one call under the segment lock: the segment's file of
 * that suffix, open_fd if it is open, else one opened for this call. */
void km_log_reader_begin(const struct km_log *log);
void km_log_reader_end(void);
int km_log_reader_fd(const struct km_segment *s, const char *suffix,
		     int open_fd);

/* log_io.c */
int km_log_queue_flush(struct km_log *log, int fd, int64_t target);
void km_log_set_error(struct km_log *log, int err);

/* log_io.c: a new write in the ring, being filled, at seg's end. */
struct log_write *km_log_write_new(struct km_log *log, struct km_segment *seg);
void km_log_write_done(struct km_io_req *req, int res, uint32_t flags);

/* log_dio.c: the direct-I/O write path */
/* At open: decide dio_on (logged once per process if refused). */
int km_log_dio_probe(struct km_log *log);
/* Copy b (at the active segment's end) into write buffers. */
void km_log_dio_add(struct km_log *log, struct km_segment *seg,
		    const struct km_batch *b);
/* What km_log_dio_stage changed, for km_log_dio_commit or _undo. */
struct km_dio_mark {
	struct log_write *filling; /* log->filling before */
	struct log_write *last;	   /* the newest write before, or NULL */
	uint32_t w_count;
	uint32_t last_bytes;
	int64_t last_end;
	bool last_held;
	uint64_t tail_end;
};
/* Copy b (crc_pending, at the active segment's end) into write buffers
 * and check its CRC on the copy, block by block as it is copied; hdr is
 * written over the bytes' header (a producer-id map made there). Nothing
 * of it is submitted before km_log_dio_commit; km_log_dio_undo takes it
 * all back. @return 0, KM_EBADCRC (undone), or the log's error. */
int km_log_dio_stage(struct km_log *log, struct km_segment *seg,
		     const struct km_batch *b, struct km_dio_mark *m);
void km_log_dio_commit(struct km_log *log, const struct km_dio_mark *m);
void km_log_dio_undo(struct km_log *log, const struct km_dio_mark *m);
/* Close the write being filled: submit it, or hold it for the one before. */
int km_log_dio_close(struct km_log *log);
/* w completed: give its buffer back, submit the write held for it. */
void km_log_dio_done(struct km_log *log, struct log_write *w, bool ok);
/* -EAGAIN if the pool or the ring cannot take a batch of size bytes now. */
int km_log_dio_room(struct km_log *log, uint32_t size);
/* Structural change: forget the O_DIRECT fd and the tail block. */
void km_log_dio_forget(struct km_log *log);
/* Copy len bytes at pos of segment s from the tail cache, if it holds
 * them all (any thread). @return true if it did. */
bool km_log_dio_read(const struct km_log *log, const struct km_segment *s,
		     void *buf, size_t len, uint64_t pos);
/* Give the tail cache's buffers back (close). */
void km_log_dio_release(struct km_log *log);
/* A write is being made (km_log_write_new): the write state is in use. */
void km_log_wake(struct km_log *log);
/* The owner's tick: a log whose end has not moved and that has nothing
 * queued or in flight for KM_LOG_IDLE_MS gives back its write state - its
 * tail cache's buffers, the tail block and the write ring's pages - which
 * the next append loads again (the tail block read back from the file). */
void km_log_idle_check(struct km_log *log, uint64_t now_ms);
/* Before the log is freed: no longer counted as awake. */
void km_log_sleep(struct km_log *log);
/* Writes drained: cut the zeros past the active segment's data (fsync'd).
 * @return 0 or -errno. */
int km_log_dio_trim(struct km_log *log);
/* The same without the fsync: *cut says whether the size changed (the
 * caller fsyncs the .log before relying on it). */
int km_log_dio_cut(struct km_log *log, bool *cut);

/* log_recover.c */
int km_log_recover(struct km_log *log, struct km_log_recovery *rec);
/* Offsets of "<20 digits><suffix>" files in the dir, ascending: the max
 * newest of them (the oldest if oldest), and in *total (if not NULL) how
 * many there are. @return how many are in out, or -errno. */
int km_log_list_files(struct km_log *log, const char *suffix, int64_t *out,
		      uint32_t max, bool oldest, uint32_t *total);
/* Called for each batch a rebuild replays, with what it did to the state. */
typedef void (*km_log_replay_fn)(void *ctx, const struct km_batch *b,
				 const struct km_pstate_result *pr);
/* Rebuild ps from the newest usable snapshot at or below snap_max, then
 * replay the log up to upto. */
int km_log_rebuild_pstate(struct km_log *log, struct km_pstate *ps,
			  int64_t snap_max, int64_t upto, km_log_replay_fn fn,
			  void *ctx, int64_t *snapshot_offset);

/* log_snap.c: producer snapshots, "<offset>.snapshot" */
int km_log_snap_write(struct km_log *log, int64_t offset);
/* A roll encodes its snapshot before the batch changes the state, and
 * writes those len bytes of log->snap_buf once the segment is sealed. */
int km_log_snap_write_encoded(struct km_log *log, int64_t offset, size_t len);
int km_log_snap_list(struct km_log *log, int64_t *out, uint32_t max);
int km_log_snap_load(struct km_log *log, struct km_pstate *ps, int64_t offset);
int km_log_snap_delete(struct km_log *log, int64_t offset);
int km_log_snap_drop_after(struct km_log *log, int64_t offset);
void km_log_snap_drop_before(struct km_log *log, int64_t start);

/* log_read.c */
uint32_t km_log_find_segment(const struct km_log *log, int64_t offset);

/* log_scan.c: reading batches back from a segment's .log */
struct log_scan {
	struct km_log *log;
	struct km_segment *seg;
	uint64_t pos;	   /* file position of the next batch */
	uint64_t end;	   /* stop here */
	uint8_t *buf;
	size_t cap;
	size_t have;	   /* bytes in buf from buf_pos */
	uint64_t buf_pos;
	struct km_chain chain;
	struct iovec iov;
};
int km_log_scan_init(struct log_scan *sc, struct km_log *log,
		     struct km_segment *seg, uint64_t pos, uint64_t end);
int km_log_scan_next(struct log_scan *sc, struct km_batch *b, uint64_t *pos);
void km_log_scan_fini(struct log_scan *sc);

/* log_epoch.c: leader-epoch-checkpoint and partition.metadata */
int km_log_epoch_note(struct km_log *log, int32_t epoch, int64_t offset);
int km_log_epoch_truncate(struct km_log *log, int64_t end_offset);
int km_log_epoch_clear(struct km_log *log);
/* While deferred, changes stay in memory; ending it writes the file if it
 * differs (a rescan that rebuilds the same epochs writes nothing: on a
 * full disk it could not). @return 0 or -errno. */
int km_log_epoch_defer(struct km_log *log, bool defer);
int km_log_epoch_load(struct km_log *log);
int km_log_write_metadata(struct km_log *log);
int km_log_write_text_atomic(struct km_log *log, const char *name,
			     const char *text, size_t len);

/* log_reset.c: finish a reset a crash interrupted (RESET_MARKER), before
 * the segments are opened. @return 0 (also when there was none) or error. */
int km_log_reset_redo(struct km_log *log);

/* log_clean_swap.c: finish or roll back a segment swap a crash
 * interrupted, before the segments are opened. @return 0 or -errno. */
int km_log_clean_redo(struct km_log *log);

#endif
