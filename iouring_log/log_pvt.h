/* Internals shared by the log*.c files; not for inclusion elsewhere. */
#ifndef KM_IOURING_LOG_LOG_PVT_H
#define KM_IOURING_LOG_LOG_PVT_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#include "iouring_log/log.h"

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

struct km_log {
	struct km_log_config cfg;
	char dir[PATH_MAX];
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

	struct log_write writes[KM_LOG_WRITES_MAX]; /* FIFO ring */
	uint32_t w_head, w_count;
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

	struct log_epoch epochs[KM_LOG_EPOCHS_MAX];
	uint32_t n_epochs;
	/* What leader-epoch-checkpoint holds, and whether writing it waits
	 * for the end of a recovery (log_epoch.c). */
	struct log_epoch file_epochs[KM_LOG_EPOCHS_MAX];
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
bool km_log_clean_marker_exists(struct km_log *log);

/* log_retain.c: the DeleteRecords start kept across an open */
#define KM_LOG_START_FILE "log-start-offset"
void km_log_start_load(struct km_log *log);

/* log_io.c */
int km_log_queue_flush(struct km_log *log, int fd, int64_t target);
void km_log_set_error(struct km_log *log, int err);

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
