/* The partitions a kmirrord serves, as the Kafka front-end and the control
 * thread see them.
 *
 * One struct km_part per partition, created before the workers start and
 * never freed while they run. Its log belongs to one worker, the owner
 * (DESIGN: one writer per partition): only the owner appends, rolls,
 * truncates. Any thread may read the log through the read path
 * (km_log_read, km_log_offset_for_time, km_log_aborted_txns, the published
 * offsets), which is safe against the owner's concurrent changes.
 *
 * The mode decides who may write: a MIRROR partition takes batches only
 * from its fetcher and refuses Produce with POLICY_VIOLATION ("mirrored
 * partition: writes are refused until it is stopped"); a WRITABLE
 * partition takes local Produce (CLIENT validation, R2).
 *
 * Writes from a front-end go through struct km_part_ops, never straight to
 * the log: the front-end may run on a worker that does not own the
 * partition, and then the write travels to the owner as a message.
 */
#ifndef KM_DATAPLANE_PART_H
#define KM_DATAPLANE_PART_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/chain.h"
#include "iouring_log/log.h"
#include "kafka/wire.h"

struct km_tconfig;
struct km_admin_job;

#ifdef __cplusplus
extern "C" {
#endif

enum km_part_mode {
	KM_PART_MIRROR = 0,   /* fetcher writes; Produce refused */
	KM_PART_WRITABLE = 1, /* local Produce accepted */
};

/* Fetch session state as published for status (enum km_fetcher_state + 1;
 * 0 while the partition has no fetcher). */
enum km_part_fetch {
	KM_PART_FETCH_NONE = 0,
	KM_PART_FETCH_CONNECTING = 1,
	KM_PART_FETCH_MIRRORING = 2,
	KM_PART_FETCH_FAILED = 3,
	KM_PART_FETCH_NOSPACE = 4,	/* FAILED for disk space: waits for it */
};

/* The owner's word on a partition's source for the control thread (issue
 * 21), rewritten only when it changes: what the fetcher's note says while
 * it is not FAILED (km_fetcher_note: "" = nothing to say), and the source
 * identity the fetcher holds to ("" and all zero = not known yet). A
 * sequence count guards it: the owner makes seq odd, writes, makes it
 * even (km_part_source_publish); a reader copies between two equal even
 * loads (km_part_source_read). */
struct km_part_source_view {
	char note[320];			/* KM_FETCHER_REASON_BYTES */
	char cluster_id[KM_WIRE_NAME_BYTES_MAX + 1];
	uint8_t topic_id[KM_WIRE_UUID_BYTES];
};

struct km_part_source {
	_Atomic uint32_t seq;
	struct km_part_source_view v;
	uint64_t pub_gen;		/* owner only: km_fetcher_pub_gen()
					   last published, 0 = none */
};

/** Owner: replace what the source block says. */
static inline void km_part_source_publish(struct km_part_source *s,
					  const struct km_part_source_view *v)
{
	uint32_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);

	atomic_store_explicit(&s->seq, seq + 1, memory_order_relaxed);
	/* The odd count is visible before any byte of v changes. */
	atomic_thread_fence(memory_order_release);
	s->v = *v;
	/* Every byte of v is visible before the even count. */
	atomic_store_explicit(&s->seq, seq + 2, memory_order_release);
}

/** Any thread: copy it out. @return false if the owner kept rewriting it
 *  (out is then all empty); tries a bounded number of times (STYLE 13). */
static inline bool km_part_source_read(const struct km_part_source *s,
				       struct km_part_source_view *out)
{
	for (int i = 0; i < 64; i++) {
		uint32_t a = atomic_load_explicit(&s->seq, memory_order_acquire);

		if (a & 1u)
			continue;
		*out = s->v;
		/* The copy is done before seq is looked at again. */
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&s->seq, memory_order_relaxed) == a)
			return true;
	}
	memset(out, 0, sizeof(*out));
	return false;
}

/* The topic id the partition's log holds (partition.metadata), for the
 * front end's Metadata v10+: the owner may replace it (the source's, once
 * learned) while another worker's front end reads it, so it is published
 * as the source block is, a sequence count around the copy. All zero
 * until the log is open. */
struct km_part_topic_id {
	_Atomic uint32_t seq;
	uint8_t id[KM_WIRE_UUID_BYTES];
};

/** Owner: publish id if it is not what is published. */
static inline void km_part_topic_id_publish(struct km_part_topic_id *t,
					    const uint8_t id[KM_WIRE_UUID_BYTES])
{
	uint32_t seq = atomic_load_explicit(&t->seq, memory_order_relaxed);

	if (memcmp(t->id, id, sizeof(t->id)) == 0)
		return;
	atomic_store_explicit(&t->seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	memcpy(t->id, id, sizeof(t->id));
	atomic_store_explicit(&t->seq, seq + 2, memory_order_release);
}

/** Any thread: copy it out (all zero if the owner kept rewriting it). */
static inline void km_part_topic_id_read(const struct km_part_topic_id *t,
					 uint8_t out[KM_WIRE_UUID_BYTES])
{
	for (int i = 0; i < 64; i++) {
		uint32_t a = atomic_load_explicit(&t->seq, memory_order_acquire);

		if (a & 1u)
			continue;
		memcpy(out, t->id, KM_WIRE_UUID_BYTES);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&t->seq, memory_order_relaxed) == a)
			return;
	}
	memset(out, 0, KM_WIRE_UUID_BYTES);
}

/* Figures the owner publishes for the control thread (status, metrics),
 * refreshed every worker tick with relaxed stores: a snapshot, not a
 * transaction. `reason` is written before fetch_state turns FAILED or
 * NOSPACE (release) and never after. */
struct km_part_stats {
	_Atomic int64_t log_start;
	_Atomic int64_t leo;
	_Atomic int64_t hw;		/* durable offset */
	_Atomic int64_t lso;
	_Atomic int64_t source_hw;	/* -1: not known yet */
	_Atomic int64_t source_start;	/* -1: not known yet */
	_Atomic uint64_t mirrored_bytes;
	_Atomic uint64_t mirrored_batches;
	_Atomic uint64_t duplicates;
	_Atomic uint64_t corrupt;
	_Atomic uint64_t reconnects;
	_Atomic uint64_t produced_bytes; /* local Produce */
	_Atomic uint64_t disk_bytes;	/* .log bytes on disk */
	/* The log's producer state: what R2 reports and never refuses, and
	 * the barriers (R3) it applied, since the log was opened. */
	_Atomic uint64_t sequence_gaps;
	_Atomic uint64_t epoch_regressions;
	_Atomic uint64_t barriers_applied;
	/* mirror.offset.reset=earliest restarts of the log, and the offsets
	 * the source deleted before they were mirrored (the gaps). */
	_Atomic uint64_t offset_resets;
	_Atomic uint64_t offsets_skipped;
	/* For the operator's graphs (issue 19 item 10, metrics): the
	 * source's LSO as the fetcher last saw it (-1: not known), what Fetch
	 * answers brought (duplicates too) against the records the log took,
	 * the times the source's log start passed our log end, and when
	 * (km_clock_ms) the log end last reached the source's high
	 * watermark (0: not since the log was opened). */
	_Atomic int64_t source_lso;
	_Atomic uint64_t fetched_bytes;
	_Atomic uint64_t fetched_records;
	_Atomic uint64_t mirrored_records;
	_Atomic uint64_t caught_up_ms;
	_Atomic int fetch_state;	/* enum km_part_fetch */
	char reason[320];	/* KM_FETCHER_REASON_BYTES */
	struct km_part_source source;
	struct km_part_topic_id topic_id;
	/* FAILED by a cause that may pass (km_fetcher_transient): written
	 * with `reason`, before fetch_state turns FAILED. */
	_Atomic int fetch_transient;
	/* Data-loss events (the source's log start past our log end) since
	 * the log was opened, and the offsets the last one lost (-1: none). */
	_Atomic uint64_t data_loss_events;
	_Atomic int64_t data_loss_from;
	_Atomic int64_t data_loss_to;
	/* Fetch responses that named the partition, since its log was
	 * opened: a planned stop waits for one that comes after our log end
	 * reached source_hw, so that the HW it compares is a fresh one. */
	_Atomic uint64_t fetch_answers;
	/* Compaction of a writable compacted partition (km_log_clean). */
	_Atomic uint64_t cleaner_runs;
	_Atomic uint64_t cleaner_bytes_removed;
};

struct km_part {
	char topic[KM_WIRE_NAME_BYTES_MAX + 1];
	int32_t partition;
	uint32_t owner;		/* index of the owning worker */
	struct km_log *log;	/* NULL until the owner has opened it */
	_Atomic int mode;	/* enum km_part_mode */
	bool internal;		/* __consumer_offsets: written by the group
				 * coordinator only; clients may read it */
	/* Whole segments below this offset may go (the coordinator's
	 * compaction point; 0: none). Any thread stores, the owner reads. */
	_Atomic int64_t retain_below;
	_Atomic int error;	/* a KM_E* / -errno that took it offline, or 0 */
	struct km_part_stats stats;
	/* The topic's configs synced from the source (tconfig.h): set on a
	 * mirrored topic's first partition before the workers start, NULL
	 * elsewhere; the control thread frees it after they end. */
	struct km_tconfig *tconfig;
	/* Its topic was deleted (DeleteTopics): in no view published after.
	 * The control thread's alone. */
	bool deleted;
	/* Its index in the owner's partitions (the owner's alone): found by
	 * index, not by a scan (issue 17). */
	uint32_t wslot;
};

/* A sorted view of the table: the entries by (topic, partition), so that a
 * topic's partitions are contiguous and partition i of a topic sits at
 * its first + i. A new view is published whole when partitions are added
 * (topic discovery, control/daemon_discover.c); a reader takes one view
 * with km_part_index_get and uses it for the whole request. Views are
 * never freed while the workers run (the retired list): an addition is an
 * operator's event, rare, and a few pointers each. */
struct km_part_index {
	uint32_t n;
	struct km_part_index *retired;	/* the view this one replaced */
	struct km_part *p[];
};

/* All partitions. The entries live in `parts` (cap of them, allocated
 * once: a struct km_part never moves, fetchers and logs keep pointers to
 * it); the control thread fills parts[n] and publishes a new index that
 * names it. Only the control thread reads n; every other thread reads the
 * index. */
struct km_part_table {
	struct km_part *parts;
	uint32_t n;
	uint32_t cap;
	_Atomic(struct km_part_index *) index;
};

/** Control thread: publish the sorted view of parts[0, n) but the
 *  deleted ones. The entries
 *  must be filled first; readers see them from the store on.
 *  @return 0 or -ENOMEM (the previous view stays). */
int km_part_table_publish(struct km_part_table *t);
/** Free every view (no reader may run). */
void km_part_table_fini(struct km_part_table *t);

/** The current view (never NULL once published: an empty one before). */
static inline const struct km_part_index *
km_part_index_get(const struct km_part_table *t)
{
	static const struct km_part_index empty = { 0, NULL };
	const struct km_part_index *ix =
		atomic_load_explicit(&t->index, memory_order_acquire);

	return ix != NULL ? ix : &empty;
}

/** The partition, or NULL. Binary search; any thread. */
struct km_part *km_part_find(const struct km_part_table *t, const char *topic,
			     int32_t partition);

/** Partitions of topic in view ix: *first (ix->p + k) and the count (0 if
 *  the topic is unknown). */
uint32_t km_part_topic(const struct km_part_index *ix, const char *topic,
		       struct km_part *const **first);

/** The first partition of topic in the current view, or NULL. */
static inline struct km_part *km_part_topic_first(const struct km_part_table *t,
						  const char *topic)
{
	struct km_part *const *first;

	return km_part_topic(km_part_index_get(t), topic, &first) ? first[0]
								  : NULL;
}

static inline enum km_part_mode km_part_get_mode(const struct km_part *p)
{
	return (enum km_part_mode)atomic_load_explicit(&p->mode,
						       memory_order_acquire);
}

/* Outcome of one partition's Produce, reported on the calling thread. */
struct km_part_produced {
	int err;		/* 0, or a KM_E* / -errno (the front-end maps it
				 * to a Kafka error code) */
	int64_t base_offset;	/* offset given to the batch (or to the
				 * original, for a duplicate) */
	int64_t log_start;
	int64_t log_append_time; /* the broker time a LogAppendTime topic
				  * gave the batches, else -1 */
};

/** Called once per produce, on the thread that called ops->produce, from
 *  its worker loop (never from inside ops->produce). */
typedef void (*km_part_produced_fn)(void *arg,
				    const struct km_part_produced *res);

/* What a front-end needs from the daemon for writes. */
struct km_part_ops {
	/**
	 * Append one partition's records (the Produce request's records
	 * bytes, already bounds-checked but not validated) to p with CLIENT
	 * origin, asynchronously. The records are len bytes of chain c from
	 * cur, in place in the request's receive buffers: borrowed for the
	 * call only. The callee copies them once before it returns (into the
	 * owner's writer, or into the message to the owner), so the caller
	 * may release the buffers on return. done runs once the batch is
	 * appended and, when acks == -1, durable (R6), or when it failed.
	 * @return 0 (done will run), or a negative code (it will not):
	 *         KM_EWRITEREFUSED-class errors for a MIRROR partition, -ENOMEM.
	 */
	int (*produce)(void *ctx, struct km_part *p, const struct km_chain *c,
		       struct km_chain_cur cur, uint32_t len, int16_t acks,
		       km_part_produced_fn done, void *arg);
	/**
	 * A new producer id for an idempotent producer (InitProducerId with a
	 * null transactional id): above every positive id any partition has
	 * seen (R4 step 6), and never handed out twice, restarts included.
	 * @return 0 and *pid, *epoch, or a negative code.
	 */
	int (*alloc_pid)(void *ctx, int64_t *pid, int16_t *epoch);
	/**
	 * The transaction coordinator's COMMIT (commit) or ABORT marker of
	 * producer_id at producer_epoch, appended to p by its owner after
	 * what was produced to it before, answered through done once
	 * durable (km_local_write_marker). NULL: the daemon coordinates no
	 * transactions (transactional ids are refused).
	 * @return 0 (done will run), or a negative code (it will not).
	 */
	int (*write_marker)(void *ctx, struct km_part *p, int64_t producer_id,
			    int16_t producer_epoch, bool commit,
			    km_part_produced_fn done, void *arg);
	void *ctx;
	/**
	 * Hand an Admin topic call (dataplane/serve/admin.h) to the control
	 * thread, which owns the partition table; it sets job->done when
	 * answered. NULL: topics are not created or deleted here.
	 * @return 0 (done will be set), or a negative code (it will not).
	 */
	int (*admin)(void *ctx, struct km_admin_job *job);
};

#ifdef __cplusplus
}
#endif

#endif
