/* Shared by the committed-offsets files of the front-end: the store side
 * (frontend_offsets.c: tables, the write ring, writes, compaction, the
 * offset sync) and the handlers (frontend_offcommit.c: OffsetCommit,
 * OffsetFetch), which fill the same request tables.
 */
#ifndef KM_DATAPLANE_SERVE_FRONTEND_OFFSETS_PVT_H
#define KM_DATAPLANE_SERVE_FRONTEND_OFFSETS_PVT_H

#include "dataplane/serve/frontend_group_pvt.h"
#include "kafka/proto_group.h"

enum fe_owrite_kind {
	OW_COMMIT = 0,	/* an OffsetCommit, or one batch of a sync */
	OW_COMPACT,	/* compaction's copy: nothing to apply */
};

/* One write in flight, in submit order in the write ring. */
struct fe_owrite {
	struct km_frontend *fe;
	enum fe_owrite_kind kind;
	bool done;		/* outcome in: reclaimed in order */
	uint32_t off;		/* its batch: ring[off, off + len) */
	uint32_t len;
	uint32_t prev_tail;	/* the byte ring's tail before it */
	uint32_t n;		/* commits in the batch */
	fe_owrite_fn fn;
	void *arg;
	bool compact_first;	/* compaction: the copy starts here */
	bool compact_last;	/* ... and is whole once this is durable */
	bool txn;		/* TxnOffsetCommit: a transactional batch */
	int64_t pid;		/* ... of this producer and epoch */
	int16_t epoch;
};

/* The tables of the handlers (one request at a time) and the rings. */
struct fe_omem {
	uint32_t commits_max;
	struct km_goffsets_commit *commits;	/* commits_max */
	struct km_gorec_value *values;		/* commits_max */
	struct km_offcommit_req_part *oc_parts;	/* parts_max */
	int16_t *oc_errs;			/* parts_max */
	int32_t *of_parts;			/* parts_max */
	struct km_proto_topic *of_topics;	/* topics_max */
	struct km_offfetch_resp_part *of_resp;	/* parts_max */
	struct fe_owrite *writes;		/* KM_GOFFSETS_WRITES_MAX */
	uint32_t w_head;
	uint32_t w_count;
	uint8_t *ring;				/* KM_GOFFSETS_WRITE_RING_BYTES */
	uint32_t tail;
	/* The sync in progress (the daemon waits for each one's answer). */
	struct {
		bool active;
		uint32_t left;		/* batches given, outcome not yet in */
		int err;		/* the first failure */
		km_frontend_sync_fn done;
		void *arg;
	} sync;
};

/* The write ring (frontend_offsets.c), for a handler that builds its own
 * write: take a write of len bytes (-EAGAIN: the rings are full, wait),
 * build the commits into it, submit it; drop it if it was not submitted. */
int km_frontend_offsets_wr_new(struct km_frontend *fe, size_t len,
			       enum fe_owrite_kind kind,
			       struct fe_owrite **out);
void km_frontend_offsets_wr_drop(struct fe_omem *om, struct fe_owrite *o);
int km_frontend_offsets_wr_build(struct km_frontend *fe, struct fe_owrite *o,
				 const struct km_goffsets_commit *c,
				 uint32_t n);
int km_frontend_offsets_wr_submit(struct km_frontend *fe,
				  struct fe_owrite *o);

#endif
