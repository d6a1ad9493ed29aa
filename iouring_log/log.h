/* A partition log in Kafka's on-disk format, appended through io_uring.
 *
 * Directory `<data.dir>/<topic>-<partition>` holds the segments (segment.h),
 * producer snapshots `<offset>.snapshot`, `leader-epoch-checkpoint`,
 * `partition.metadata`, and `.kafka_cleanshutdown` while the log is closed
 * cleanly (kept per partition here, so partitions open and close
 * independently).
 *
 * Threading: one owner thread (the partition's worker) appends, flushes,
 * rolls, truncates, resets and closes. The read path - km_log_read,
 * km_log_offset_for_time, km_log_aborted_txns - and km_log_start_offset,
 * km_log_appended_offset and km_log_durable_offset may be called from any
 * thread, concurrently with all of that except km_log_close (it needs the
 * readers gone). Appending never takes a lock: what grows per batch (the
 * offsets, a segment's written bytes, index entry counts, .txnindex bytes)
 * is published with release stores after what it covers is written, and
 * readers load it with acquire and read no further. The rare structural
 * changes (showing a new segment after a roll, cutting or deleting
 * segments, a reset) hold a writer-preferring rwlock that each read holds
 * shared for its duration, so no read ever touches a closed file or an
 * unmapped index (log_read.c has the details). The other functions are the
 * owner's.
 *
 * Offsets (R6): mirrored batches keep their offsets, gaps included; a batch
 * wholly below the log end is a duplicate and skipped; one that overlaps the
 * end is an error. Local (CLIENT/CONTROL) batches are assigned offsets from
 * the log end.
 */
#ifndef KM_IOURING_LOG_LOG_H
#define KM_IOURING_LOG_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "iouring_log/pstate.h"
#include "iouring_log/segment.h"
#include "iouring_log/uring.h"
#include "kafka/batch.h"

#ifdef __cplusplus
extern "C" {
#endif

struct km_log_config {
	const char *data_dir;	   /* the log dir; the partition dir goes in it */
	const char *topic;
	int32_t partition;
	uint64_t segment_bytes;	   /* roll size; Kafka's default 1 GiB */
	uint32_t index_interval_bytes; /* 4096 */
	uint32_t index_bytes_max;  /* per index file; 10 MiB */
	uint32_t flush_interval_ms; /* group fdatasync at least this often */
	uint64_t flush_bytes;	   /* ... or after this many bytes */
	bool flush_always;	   /* fdatasync after every append call */
	uint64_t prealloc_bytes;   /* fallocate step ahead of the write end */
	/* Bytes of the filesystem MIRROR and CLIENT appends leave free, for
	 * CONTROL batches and the files of a stop or recovery (1 MiB). */
	uint64_t keep_free_bytes;
	uint32_t batch_bytes_max;  /* largest batch accepted */
	uint32_t segments_max;	   /* segments the log can hold */
	/* The topic id partition.metadata is to name (Kafka's Uuid): the
	 * source topic's for a mirrored partition, one per topic otherwise.
	 * All zero: keep the file's, or draw a random one if there is none. */
	uint8_t topic_id[16];
	/* Local caps for km_log_retain_policy (-1: none). */
	int64_t retention_ms;
	int64_t retention_bytes;
	struct km_pstate_config pstate;
	/* Compaction (log_clean.c), for a topic whose cleanup.policy is
	 * compact: km_log_clean does nothing without it. */
	bool compact;
	int64_t delete_retention_ms;	/* delete.retention.ms: 1 day */
	uint64_t cleaner_map_bytes;	/* log.cleaner.dedupe.buffer.size */
	/* min.cleanable.dirty.ratio (0.5): a pass runs once the dirty
	 * section's bytes are more than this part of the cleanable ones. */
	double min_cleanable_ratio;
	/* The topic's rules for client writes, kept with the log's other
	 * topic settings as Kafka's LogConfig keeps them; the local writer
	 * (dataplane/serve/local_write.c) applies them, the log does not:
	 * a mirrored batch is the source's bytes and passes whatever they
	 * say (R6). */
	uint32_t client_batch_bytes_max; /* max.message.bytes; 0: none */
	bool client_log_append_time;	 /* message.timestamp.type */
	/* log.direct.io: write the .log with O_DIRECT from the worker's
	 * aligned buffers where the filesystem takes it (default); false, or
	 * a filesystem that refuses it (tmpfs), writes through the page
	 * cache. */
	bool direct_io;
	/* log.tail.cache.bytes: with direct I/O, the buffers of each
	 * partition's newest writes (its last two) are kept for km_log_read
	 * up to this many bytes per worker, the longest kept given back
	 * first; so serving consumers at the tail does not read the disk. */
	uint64_t tail_cache_bytes;
	/* KM_LOG_MARK_*: whether km_log_unmark_many took the clean-shutdown
	 * marker away already (default: the open looks itself). */
	int8_t marker;
};

/** Kafka's defaults, for the given dir/topic/partition. */
void km_log_config_defaults(struct km_log_config *cfg, const char *data_dir,
			    const char *topic, int32_t partition);

/* What opening the log found and did (R7). */
struct km_log_recovery {
	bool clean;		   /* clean-shutdown marker found: no scan */
	int64_t recovery_point;	   /* offset the scan started from */
	uint64_t bytes_scanned;
	uint32_t batches_scanned;
	uint64_t bytes_truncated;  /* torn or corrupt tail removed */
	int64_t truncated_at;	   /* offset of the cut, -1 if none */
	int corrupt_code;	   /* why the cut: KM_E* of the first bad batch */
	/* Not a torn tail: a valid batch follows the bad one (anywhere later
	 * in its file, or a later segment), or it is whole but out of order. */
	bool corrupt_mid_log;
	char corrupt_file[64];	   /* segment file name of the bad batch */
	uint64_t corrupt_position; /* its byte position in that file */
	int64_t snapshot_offset;   /* producer snapshot loaded, -1 if none */
	uint32_t batches_replayed; /* into producer state after the snapshot */
};

/* Per-append outcome. */
struct km_log_append_result {
	uint32_t appended;	   /* batches written */
	uint32_t duplicates;	   /* mirrored batches below the log end */
	int64_t first_offset;	   /* of the first batch written, or -1 */
	int64_t last_offset;	   /* of the last batch written, or -1 */
	/* A CLIENT duplicate (KM_EDUPLICATE): where the original went. */
	int64_t dup_first_offset;
	int64_t dup_last_offset;
	uint32_t barriers;	   /* MIRROR_PID_RESET batches applied */
	uint32_t barrier_expired;  /* producers they removed */
};

struct km_log; /* opaque */

/**
 * Open (creating if needed) the partition log and recover it (R7): with the
 * clean-shutdown marker, load without scanning; otherwise rescan from the
 * newest valid producer snapshot, verifying every batch's CRC and offsets,
 * truncate a torn or corrupt tail (logged with file and position), rebuild
 * the indexes and replay producer state. The marker is removed once open.
 *
 * @param ring  the owner's ring; it must outlive the log.
 * @param rec   filled with what recovery did (may be NULL).
 * @return 0 and *out, or -errno, or KM_ESNAPSHOT-class errors on I/O.
 */
int km_log_open(struct km_log **out, const struct km_log_config *cfg,
		struct km_uring *ring, struct km_log_recovery *rec);

/**
 * Name id in partition.metadata (Kafka's format, replaced atomically and
 * durably: tmp file, fsync, rename, directory fsync) unless it already
 * does. Kafka moves a log whose id is not its topic's aside as "-stray".
 * @return 1 if the file changed, 0 if it already named id, or -errno.
 */
int km_log_set_topic_id(struct km_log *log, const uint8_t id[16]);

/** The topic id partition.metadata names. */
void km_log_topic_id(const struct km_log *log, uint8_t out[16]);

/** The settings the log was opened with (data_dir and topic NULL: they
 *  were borrowed). Fixed while the log is open: any thread may read them. */
const struct km_log_config *km_log_config_get(const struct km_log *log);

/**
 * The topic id in <dir>/partition.metadata, for a caller that picks one id
 * per topic before the logs are open.
 * @return 1 and out; 0 if there is no file (or no dir); -EBADMSG if it is
 *         not Kafka's format; or -errno.
 */
int km_log_metadata_read(const char *dir, uint8_t out[16]);

/**
 * Close cleanly: wait for in-flight I/O, fdatasync, seal the active
 * segment's indexes, write a producer snapshot at the log end, and leave the
 * clean-shutdown marker. @return 0, or the first error (the log is freed
 * either way; without the marker the next open recovers).
 */
int km_log_close(struct km_log *log);

/**
 * Close n logs of one owner (one ring) cleanly, as km_log_close each, with
 * their syncs in flight together rather than one log after another: 10,000
 * partitions close in seconds, not minutes (log_close.c). Each log's
 * clean-shutdown marker is made durable only after everything it vouches
 * for is. @param rcs  if not NULL, each log's result (0 or its first
 * error: no marker, the next open recovers). @return 0 or the first
 * error. Every log is freed either way.
 */
int km_log_close_many(struct km_log **logs, uint32_t n, int *rcs);

/* What an open is told of the clean-shutdown marker (km_log_config
 * marker): KM_LOG_MARK_CHECK, the open looks for it and removes it itself;
 * the others, km_log_unmark_many already removed it durably and found it
 * there (WAS_CLEAN) or not. */
enum {
	KM_LOG_MARK_CHECK = 0,
	KM_LOG_MARK_WAS_CLEAN = 1,
	KM_LOG_MARK_WAS_UNCLEAN = 2,
};

struct km_log_unmark {
	const char *topic;
	int32_t partition;
	int8_t found; /* out: KM_LOG_MARK_WAS_CLEAN or _WAS_UNCLEAN */
};

/**
 * Before many logs of data_dir are opened: remove each one's clean-shutdown
 * marker and make the removals durable, their directories' fsyncs in
 * flight together (the opens then change files without syncing a
 * directory each). Pass each found as the log's cfg.marker. A partition
 * directory that does not exist yet is WAS_UNCLEAN (its open makes it).
 * @return 0, or -errno (a removal that may not be durable: open none).
 */
int km_log_unmark_many(const char *data_dir, struct km_log_unmark *u,
		       uint32_t n);

/** Free a log whose directory is gone (a deleted topic): in-flight I/O
 *  is waited for, nothing more is written. NULL not allowed. */
void km_log_abandon(struct km_log *log);

/**
 * Whether the log checks the CRC of a batch framed by km_batch_frame (CRC
 * unchecked) as it copies it into its direct-I/O write buffers, so that a
 * caller may frame with km_batch_frame: the bytes are then read from memory
 * once. Such a batch whose CRC fails is refused by km_log_append_burst with
 * KM_EBADCRC, nothing of it written and the log unchanged (batches before
 * it in the burst are appended). Any log takes such batches: one that
 * cannot check them as it copies checks them first.
 */
bool km_log_verifies_crc(const struct km_log *log);

/**
 * Append validated batches (km_batch_parse'd, already mapped for MIRROR) in
 * order. The batches' bytes are written from their chains without a copy, so
 * they must stay valid until km_log_appended_offset() passes their last
 * offset. CLIENT/CONTROL batches get baseOffset = log end and the log's
 * leader epoch written into their bytes.
 *
 * Space: each batch's blocks are reserved (fallocate, in steps of
 * prealloc_bytes, smaller ones when the disk cannot hold a step) before
 * producer state sees it. A batch the disk cannot hold (for MIRROR and
 * CLIENT: without leaving keep_free_bytes free) is refused with -ENOSPC
 * (or -EDQUOT) and the log unchanged and still appendable: the
 * batches before it are appended, whole, and it is retried once space is
 * back. The rare space failures after that point (the files of a segment
 * roll, or a write on a filesystem without fallocate) fail the log
 * instead, with that code as km_log_error(); km_log_clear_error() repairs
 * it once space is back, without a reopen.
 *
 * @return the number of batches consumed (appended or skipped as
 *         duplicates), <= n: when the write queue is full, or the next batch
 *         does not fit on the disk, the rest stay the caller's, to retry
 *         after km_uring_poll() (or once space is back). Or a negative code
 *         with no batch of the failing one written: KM_EOFFSET (mirrored
 *         offsets overlap or go backwards), producer-state errors
 *         (KM_EDUPLICATE with res->dup_* set, KM_EOUTOFORDERSEQ, ...),
 *         -ENOSPC / -EDQUOT (the first batch does not fit; not sticky),
 *         KM_EBADCRC (a km_batch_frame'd batch whose CRC fails; not
 *         sticky), or the sticky error of a failed log.
 */
int km_log_append_burst(struct km_log *log, struct km_batch *batches,
			uint32_t n, enum km_origin origin,
			struct km_log_append_result *res);

/** Drive time-based flushing, and give an idle log's write state back;
 *  call from the owner's loop (at least once a second for each log). */
void km_log_tick(struct km_log *log, uint64_t now_ms);

/* A log whose end has not moved for this long, with nothing queued or in
 * flight, gives back the memory its writes use (issue 17: an idle
 * partition's cost): its tail cache's buffers, the direct-I/O tail block
 * and the write ring's pages. The next append loads them again. */
#define KM_LOG_IDLE_MS 5000

/** When km_log_tick (with the same clock) gives this log's write state
 *  back if nothing moves it: for an owner that visits an idle log only at
 *  a deadline. UINT64_MAX if it holds none. */
uint64_t km_log_idle_due(const struct km_log *log, uint64_t now_ms);

/** Logs of the process whose write state is in use (written since their
 *  last idle shed); 0 once every log has been idle KM_LOG_IDLE_MS. */
uint64_t km_log_awake_count(void);

/** Have fn(arg) called (owner thread) after each append burst that added
 *  batches, so the owner need not look at idle logs: fn NULL for none. */
void km_log_set_touch(struct km_log *log, void (*fn)(void *arg), void *arg);

/** Something is pending: bytes not flushed yet, or writes or syncs queued
 *  or in flight (km_log_tick and the published offsets still move). */
bool km_log_busy(const struct km_log *log);

/** Queue an fdatasync of everything appended so far. @return 0 or error. */
int km_log_flush(struct km_log *log);

/** Wait until every queued write and sync has completed. @return 0 or error. */
int km_log_sync(struct km_log *log);

/* Offsets. The owner's log end offset (owner thread only), then the
 * published ones (any thread). */
int64_t km_log_end_offset(const struct km_log *log);	   /* LEO, owner view */
int64_t km_log_appended_offset(const struct km_log *log); /* written */
int64_t km_log_durable_offset(const struct km_log *log);  /* synced: the HW */
/** A process-wide count that moves after any log's durable offset moves
 *  on as appends are synced (not at recovery, a reset or a truncation):
 *  unchanged, no high watermark moved on. Any thread. */
uint64_t km_log_durable_gen(void);
int64_t km_log_start_offset(const struct km_log *log);

/** Last stable offset at the durable offset (R2). Owner thread. */
int64_t km_log_lso(struct km_log *log);

/** The sticky error after a failed write or sync, or 0. */
int km_log_error(const struct km_log *log);

/** True for the codes a full disk gives (-ENOSPC, -EDQUOT). */
bool km_log_is_space_error(int code);

/**
 * Take appends again after a sticky space error (km_log_is_space_error of
 * km_log_error()), once space may be back: wait for the log's I/O, cut
 * what was queued but never written (the log end goes back to the
 * appended offset; nothing durable is touched), finish or undo a segment
 * roll the disk stopped half-way, and rebuild producer state from the
 * log. Owner thread; readers see the cut as they see a truncation.
 * @return 0 (also without an error), the sticky error itself when it is
 *         not a space error (nothing done), or a negative code when the
 *         repair failed too (the log stays failed; call again later).
 */
int km_log_clear_error(struct km_log *log);

/** Producer state, for reads by the owner (status, stop). */
struct km_pstate *km_log_pstate(struct km_log *log);

/** True if the .log is written with O_DIRECT (log.direct.io, and the
 *  filesystem took it at open). */
bool km_log_direct_io(const struct km_log *log);

/* What the process's logs do, for status (km_log_direct_io_mode). */
enum {
	KM_LOG_DIO_NONE = 0,	/* no log opened yet */
	KM_LOG_DIO_ON = 1,	/* direct I/O */
	KM_LOG_DIO_OFF = 2,	/* log.direct.io=false */
	KM_LOG_DIO_REFUSED = 3, /* a filesystem refused O_DIRECT: buffered */
};
int km_log_direct_io_mode(void);

/** Partition directory path. */
const char *km_log_dir(const struct km_log *log);

/* Read path: any thread (see Threading above). */
struct km_log_read_result {
	uint32_t bytes;		/* whole batches copied into buf */
	uint32_t batches;
	int64_t first_offset;	/* base offset of the first batch, -1 if none */
	int64_t next_offset;	/* last offset copied + 1 */
};

/**
 * Copy whole batches holding offsets >= offset and below upto into buf, at
 * most max_bytes, but always the first batch even if larger (KIP-74), as
 * long as it fits cap. upto is capped at the appended offset. Index lookup,
 * then a scan. Any thread.
 * @return 0, or -ERANGE (offset below the log start or above upto), or
 *         KM_ENOSPACE (first batch larger than cap), or -errno from pread.
 */
int km_log_read(struct km_log *log, int64_t offset, int64_t upto,
		uint32_t max_bytes, void *buf, size_t cap,
		struct km_log_read_result *out);

/* One batch of a replay: @return the records it applied, or a negative
 * code (the batch is logged and skipped). */
typedef int (*km_log_batch_fn)(void *arg, const struct km_batch *b);

/**
 * Every batch from the log start to the appended offset, in order, to fn:
 * an internal partition's rebuild at start (log_replay.c). A batch fn
 * refuses is logged at WARN under who, with its offset, and skipped. Any
 * thread. @return the sum of fn's counts, or -ENOMEM / a read's error.
 */
int km_log_replay(struct km_log *log, const char *who, km_log_batch_fn fn,
		  void *arg);

/**
 * Offset of the first batch whose maxTimestamp >= ts (ListOffsets by time),
 * through the time index, among the batches below the appended offset;
 * *offset = -1 if none. Any thread. @return 0 or -errno.
 */
int km_log_offset_for_time(struct km_log *log, int64_t ts, int64_t *offset);

/**
 * The batch holding the log's largest maxTimestamp (ListOffsets' max
 * timestamp, -3), among the batches below the appended offset: the first
 * such batch, as Kafka takes the first segment with the largest
 * maxTimestampSoFar and its first batch of that maxTimestamp. *ts and
 * *base_offset are -1 if there is none. Any thread. @return 0 or -errno.
 */
int km_log_max_timestamp(struct km_log *log, int64_t *ts, int64_t *base_offset);

/**
 * Aborted transactions overlapping [from, upto), from the .txnindex files,
 * for read_committed Fetch. Any thread; an entry is listed from the moment
 * the owner appends its marker (before the marker's bytes are written).
 * @return how many (at most max written), or -errno.
 */
int km_log_aborted_txns(struct km_log *log, int64_t from, int64_t upto,
			struct km_aborted_txn *out, uint32_t max);

/**
 * The offset of the latest MIRROR_PID_RESET barrier below upto (capped at
 * the appended offset) whose SourceClusterId is cluster_id, or *offset = -1
 * (failback, R5: the point up to which a downstream's log and ours agree).
 * Walks batch headers from the newest segment back, reading whole only the
 * control batches: one pread per batch, for a rare operator's request. Any
 * thread. @return 0, or -errno / KM_ECORRUPT from the reads.
 */
int km_log_find_barrier(struct km_log *log, const char *cluster_id,
			int64_t upto, int64_t *offset);

/* Retention (log_retain.c): what may go. -1 disables a rule. */
struct km_log_retention {
	int64_t below_offset;	/* segments whose offsets are all below this
				   (the source's log start) */
	int64_t max_age_ms;	/* segments whose newest batch is older */
	int64_t max_bytes;	/* oldest segments while the log is bigger */
	int64_t now_ms;		/* wall clock, for max_age_ms */
};

struct km_log_retained {
	uint32_t segments;	/* deleted */
	uint64_t bytes;
	int64_t start;		/* the log start after it */
};

/* Segments one km_log_retain call deletes at most (bounded work per tick). */
#define KM_LOG_RETAIN_BURST 16u

/* The direct writer's buffer (log.direct.io): one write's most bytes, and
 * the unit the tail cache (tail_cache_bytes) keeps. Each write costs a
 * hand-off to an io_uring worker thread (ext4 takes no O_DIRECT write into
 * unwritten extents inline): 2 MiB rather than 1 MiB took 4-9% off
 * kmirrord's CPU per GB onto the disk (bench dio, issue 18). */
#define KM_LOG_DIO_BUFFER_BYTES (2u << 20)

/**
 * Delete the oldest whole segments that a rule names, in order, stopping at
 * the first one none names; never the active segment. The log start becomes
 * the first remaining segment's base offset; producer snapshots below it
 * go. Safe for readers on other threads. Owner thread.
 * @return 0, or -errno from unlinking (the segments left the log anyway).
 */
int km_log_retain(struct km_log *log, const struct km_log_retention *r,
		  struct km_log_retained *out);

/**
 * km_log_retain with the config's caps (retention_ms, retention_bytes) and
 * below_offset (the source's log start, or -1).
 */
int km_log_retain_policy(struct km_log *log, int64_t below_offset,
			 int64_t now_ms, struct km_log_retained *out);

/**
 * The wall-clock time (ms) from which km_log_retain_policy would delete the
 * oldest segment by age (retention_ms), or -1 if no time will: a single
 * segment (the active one stays), no age cap, no timestamp. Owner thread.
 */
int64_t km_log_retain_due(const struct km_log *log);

/**
 * DeleteRecords (Kafka's deleteRecordsBefore): the log start becomes
 * offset (it may lie inside a batch, as Kafka's does) and is kept in the
 * log's directory before it is used, so an open after a crash has it;
 * whole segments below it are deleted. An offset at or below the start
 * changes nothing. Owner thread.
 * @return 0 and *low (the log start now), -ERANGE for an offset below 0
 *         or above the durable offset (the HW), or -errno.
 */
int km_log_delete_records(struct km_log *log, int64_t offset, int64_t *low);

/* The settings a topic config synced from the source may change while the
 * log is open (issue 19): the retention caps and the roll size. */
struct km_log_limits {
	int64_t retention_ms;	/* -1: none */
	int64_t retention_bytes; /* -1: none */
	uint64_t segment_bytes;	/* next rolls; 1 KiB .. 2 GiB */
	/* With compaction_set, the next cleaning passes follow these too
	 * (km_log_set_compaction). */
	bool compaction_set;
	bool compact;
	int64_t delete_retention_ms;
	double min_cleanable_ratio;
	/* As km_log_config's: for the local writer's next batches. */
	uint32_t client_batch_bytes_max;
	bool client_log_append_time;
};

/**
 * Use l from now on: the next retention pass and the next roll follow it
 * (the active segment is not cut short). Owner thread.
 * @return 0, or -EINVAL for a segment size the log cannot take (or
 *         compaction settings km_log_set_compaction refuses).
 */
int km_log_set_limits(struct km_log *log, const struct km_log_limits *l);

/**
 * The topic's rules for client writes (km_log_config's client_*): the
 * largest client batch (0: no cap of the topic's own) and whether its
 * batches take the broker's time. Owner thread.
 */
void km_log_client_rules(const struct km_log *log, uint32_t *batch_bytes_max,
			 bool *log_append_time);

/** Bytes of the .log files (disk usage, for status). Owner thread. */
uint64_t km_log_size_bytes(const struct km_log *log);

/**
 * Truncate the log to below offset: segments, indexes, .txnindex entries,
 * snapshots and producer state rebuilt consistently. An offset inside a batch
 * cuts before that batch. Waits for in-flight I/O first.
 * @param removed_bytes, removed_batches  what was cut (may be NULL).
 * @return the new log end offset, or a negative code.
 */
int64_t km_log_truncate_to(struct km_log *log, int64_t offset,
			   uint64_t *removed_bytes, uint32_t *removed_batches);

/**
 * Make everything appended durable (km_log_flush, then km_log_sync: the
 * durable offset is the log end on return) and write a producer snapshot
 * at the log end (R4 step 4: after the barrier).
 * @return 0 or a negative code.
 */
int km_log_checkpoint(struct km_log *log);

/**
 * Drop every batch and restart the empty log at offset (Kafka's
 * truncateFullyAndStartAt): the source's log start moved past our end and
 * mirror.offset.reset=earliest says to continue from there. Segments,
 * indexes, snapshots, leader epochs and producer state go; the log start,
 * end, appended and durable offsets all become offset. Waits for in-flight
 * I/O first. Crash-safe: an open after a crash at any point finds the old
 * log whole or the new empty one (log_reset.c).
 * @return 0; -EINVAL (offset < 0; nothing changed); or a negative code from
 *         the I/O (the log is then failed).
 */
int km_log_reset_to(struct km_log *log, int64_t offset);

/**
 * R4 `truncate` cut: start from the LSO and move back until no transaction
 * is cut in half (c = min first offset of any transaction whose marker is at
 * or after c, repeated). @return the cut offset, or a negative code.
 */
int64_t km_log_clean_cut(struct km_log *log);

/* Compaction (log_clean.c). */
struct km_log_clean_stats {
	uint32_t segments;	/* rewritten */
	uint64_t bytes_read;
	uint64_t bytes_written;
	uint64_t records_read;
	uint64_t records_kept;
	uint32_t batches_removed;
	uint32_t batches_emptied; /* kept header-only for producer state */
	int64_t dirty_from;	/* the section the key map covers: */
	int64_t dirty_to;	/* [dirty_from, dirty_to) */
	int64_t clean_to;	/* segments below this were cleaned */
	bool map_full;		/* the map stopped short of dirty_to */
};

/**
 * Kafka's log compaction (LogCleaner / Cleaner) on the segments below the
 * active one whose offsets are all below the LSO: the latest record per key
 * stays; an older one goes; a tombstone (null value) and a transaction
 * marker whose transaction has no data left get a delete horizon (now +
 * delete_retention_ms, KIP-534: attributes bit 6, baseTimestamp) the first
 * time they are cleaned and go once it has passed; aborted transactional
 * data goes (its ABORT marker and .txnindex entry stay until it has); the
 * MIRROR_PID_RESET barrier and other control types always stay; the last
 * batch of each producer in producer state stays, emptied if need be.
 * Records without a key stay (Kafka drops them: it refuses them on a
 * compacted topic, kmirror's front end does not). Batches keep their
 * offsets, base offsets and producer fields; a rewritten one is
 * uncompressed with a new CRC. Each segment is rewritten to a new one with
 * new indexes and swapped in crash-safely (log_clean_swap.c) and safely
 * for readers on other threads (the segment lock, as retention).
 *
 * Runs when cfg.compact and the dirty section (offsets appended since the
 * last clean, below the cleanable end; whole segments counted) holds more
 * than min_cleanable_ratio of the cleanable bytes, or a delete horizon has
 * passed. The key map holds at most cleaner_map_bytes / 24 keys; when
 * full, the segments up to where it stopped are cleaned and the next call
 * goes on. Synchronous I/O on the owner thread.
 * @return 1 if segments were rewritten (out filled), 0 if there was
 *         nothing to do, or a negative code (the log is unchanged, or
 *         consistent with some segments cleaned).
 */
int km_log_clean(struct km_log *log, int64_t now_ms,
		 struct km_log_clean_stats *out);

/**
 * Follow a topic's cleanup settings from the next km_log_clean on (a
 * config synced from the source: cleanup.policy, delete.retention.ms,
 * min.cleanable.dirty.ratio). Owner thread.
 * @return 0, or -EINVAL (a negative retention, a ratio outside [0, 1]).
 */
int km_log_set_compaction(struct km_log *log, bool compact,
			  int64_t delete_retention_ms, double min_cleanable_ratio);

/* ---- open files of cold partitions (log_files.c) ---- */

struct km_log_files_stats {
	uint64_t max;	      /* the budget; 0: none */
	uint64_t held;	      /* descriptors the open logs hold (estimated) */
	uint64_t closed_logs; /* logs whose files are closed now */
	uint64_t releases;    /* times a cold log's files were closed */
	uint64_t reopens;     /* times they were opened again for a use */
	uint64_t sheds;	      /* times a log kept its .logs only */
	uint64_t unsheds;     /* times it opened its directory and indexes
			       * again (a roll, retention, a close...) */
};

/**
 * Descriptors all logs together may hold (0, the default: no bound). Past
 * it, each owner thread closes the files of its least recently used idle
 * logs (nothing queued, in flight or unflushed) and opens them again at
 * their next use; reads on other threads open what they need per call.
 * Any thread, at any time.
 */
void km_log_files_set_max(uint64_t fds);
void km_log_files_get_stats(struct km_log_files_stats *out);

#ifdef __cplusplus
}
#endif

#endif
