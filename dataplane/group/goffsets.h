/* Committed consumer-group offsets: the in-memory table the group
 * coordinator answers OffsetFetch from, and its durable form, records in the
 * internal partition `__consumer_offsets-0` (kafka/gorec.h formats, Kafka's
 * own), which is an ordinary writable partition log.
 *
 * The table is a function of the log: replaying every record in offset
 * order (the last value of a key wins, a null value deletes it) rebuilds it,
 * which is what km_goffsets_load does at start. To keep the partition small
 * the owner of the table compacts by re-appending every live commit as fresh
 * records (km_goffsets_build_all) and letting retention delete the whole
 * segments below where that copy starts: the copy holds every key the old
 * segments could still decide.
 *
 * One thread uses a table (the front-end's worker). Memory: a key is
 * allocated when first committed (the table grows with the keys, as the
 * log does) and reused by later commits of it; building batches allocates
 * nothing (km_goffsets_build_all, for tests and tools, does).
 */
#ifndef KM_DATAPLANE_GOFFSETS_H
#define KM_DATAPLANE_GOFFSETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kafka/gorec.h"

#ifdef __cplusplus
extern "C" {
#endif

struct km_log;
struct km_batch;

#define KM_GOFFSETS_TOPIC "__consumer_offsets"

/* One committed offset. */
struct km_goffset {
	int64_t offset;
	int32_t leader_epoch;	/* -1: none */
	int64_t commit_ts;
	uint16_t metadata_len;
	char *metadata;		/* metadata_len bytes, NUL-terminated */
	int64_t log_offset;	/* of the record that set it; -1: put */
};

/* A commit to build into records: value NULL deletes the key. */
struct km_goffsets_commit {
	const char *group;
	const char *topic;
	int32_t partition;
	const struct km_gorec_value *value;
};

struct km_goffsets; /* opaque */

int km_goffsets_create(struct km_goffsets **out);
void km_goffsets_destroy(struct km_goffsets *t);

/**
 * Set (v != NULL) or delete (v == NULL) one commit in the table.
 * @return 0, KM_EGOREC (a name over KM_GOREC_NAME_MAX, metadata over
 *         KM_GOREC_METADATA_MAX), -ENOMEM.
 */
int km_goffsets_put(struct km_goffsets *t, const char *group,
		    const char *topic, int32_t partition,
		    const struct km_gorec_value *v);

/** The commit, or NULL. */
const struct km_goffset *km_goffsets_get(const struct km_goffsets *t,
					 const char *group, const char *topic,
					 int32_t partition);

/** Calls fn for every commit of group (every group if NULL), in no
 *  particular order; fn must not change the table. @return how many. */
typedef void (*km_goffsets_fn)(void *arg, const char *group,
			       const char *topic, int32_t partition,
			       const struct km_goffset *o);
uint32_t km_goffsets_each(const struct km_goffsets *t, const char *group,
			  km_goffsets_fn fn, void *arg);

/** Live commits in the table. */
uint32_t km_goffsets_count(const struct km_goffsets *t);

/**
 * Apply one batch of the partition (replay): each record's key and value.
 * Group-metadata keys (version 2) are skipped. A transactional batch's
 * commits (TxnOffsetCommit) are pending: not in the table until its
 * producer's COMMIT marker, dropped by its ABORT (Kafka's
 * OffsetMetadataManager); a marker batch applies km_goffsets_end_txn, other
 * control batches nothing. The batch's base offset must be its offset in
 * the log: a pending commit goes in at its COMMIT only over a commit older
 * in the log.
 * @return records applied, or KM_EGOREC / KM_ECOMPRESSED for a record this
 *         table cannot read (the caller logs it with the offset; the rest
 *         of the log still replays).
 */
int km_goffsets_apply_batch(struct km_goffsets *t, const struct km_batch *b);

/**
 * The COMMIT (commit) or ABORT marker of producer_id: its pending commits
 * go into the table (each over a commit older in the log) or are dropped.
 * @return how many pending commits it ended, or -ENOMEM.
 */
int km_goffsets_end_txn(struct km_goffsets *t, int64_t producer_id,
			bool commit);

/** Does an open transaction hold a commit of this key (OffsetFetch's
 *  UNSTABLE_OFFSET_COMMIT)? */
bool km_goffsets_pending(const struct km_goffsets *t, const char *group,
			 const char *topic, int32_t partition);

/** Pending commits of every open transaction. */
uint32_t km_goffsets_pending_count(const struct km_goffsets *t);

/**
 * Rebuild the table from the log, [log start, appended offset). Any thread
 * that may read the log (km_log_read).
 * @return records applied, or a negative code from reading the log. A batch
 *         that cannot be read as commits is logged and skipped.
 */
int km_goffsets_load(struct km_goffsets *t, struct km_log *log);

/** At most the bytes of the batch km_goffsets_build writes for these
 *  commits (what a limit on a write's size is checked against). */
size_t km_goffsets_batch_bytes(const struct km_goffsets_commit *c, uint32_t n);

/**
 * Bytes km_goffsets_build needs in buf for these commits: the batch, and
 * the room it is built in (the records' keys and values, staged at the end
 * of buf). */
size_t km_goffsets_build_size(const struct km_goffsets_commit *c, uint32_t n);

/**
 * One uncompressed batch (producer id -1) holding a record per commit,
 * timestamped now_ms, written into buf; allocates nothing.
 * @return bytes written (at most km_goffsets_batch_bytes), KM_ENOSPACE (cap
 *         below km_goffsets_build_size may be too little), KM_EGOREC.
 */
int km_goffsets_build(void *buf, size_t cap, const struct km_goffsets_commit *c,
		      uint32_t n, int64_t now_ms);

/** km_goffsets_build as a transactional batch of producer_id at
 *  producer_epoch (baseSequence -1), for TxnOffsetCommit. */
int km_goffsets_build_txn(void *buf, size_t cap,
			  const struct km_goffsets_commit *c, uint32_t n,
			  int64_t now_ms, int64_t producer_id,
			  int16_t producer_epoch);

/**
 * Every live commit of the table as batches of at most max_records records,
 * back to back in a new buffer (*out, *out_len; free() it), for compaction.
 * @return how many batches, or -ENOMEM / KM_EGOREC.
 */
int km_goffsets_build_all(const struct km_goffsets *t, uint32_t max_records,
			  int64_t now_ms, uint8_t **out, size_t *out_len);

#ifdef __cplusplus
}
#endif

#endif
