/* Internals shared by the pstate*.c files; not for inclusion elsewhere.
 *
 * pstate.c applies the rules (R2, R3) and holds the public API;
 * pstate_table.c stores the producer entries by id; pstate_txn.c keeps the
 * transactions behind the LSO; pstate_codec.c reads and writes snapshots.
 */
#ifndef KM_IOURING_LOG_PSTATE_PVT_H
#define KM_IOURING_LOG_PSTATE_PVT_H

#include <assert.h>

#include "iouring_log/pstate.h"

/* producerId -1 is "no producer" (RecordBatch.NO_PRODUCER_ID); it is never
 * stored. */
#define NO_PID ((int64_t)-1)

/* Kafka's BatchMetadata, with the first sequence and offset kept rather than
 * recomputed from offsetDelta. */
struct batch_md {
	int32_t first_seq;
	int32_t last_seq;
	int64_t first_offset;
	int64_t last_offset;
	int64_t timestamp;
};

/* Kafka's ProducerStateEntry. In the table, a slot is free while used is
 * 0, so that zeroed memory is an empty table: km_pstate_init writes no
 * slot, and a partition whose producers never came holds no page of it. */
struct entry {
	int64_t producer_id;
	int64_t last_timestamp;
	int64_t txn_first_offset; /* -1: no open transaction */
	int32_t coordinator_epoch;
	int16_t epoch;
	uint8_t batch_head; /* oldest remembered batch */
	uint8_t batch_count;
	bool used;	    /* the table's: a producer's slot */
	struct batch_md batches[KM_PSTATE_BATCHES];
};
static_assert(KM_PSTATE_BATCHES < UINT8_MAX, "ring indexes fit uint8_t");

/* One transaction, open (marker_offset -1) or decided. */
struct txn {
	int64_t first_offset;
	int64_t producer_id;
	int64_t marker_offset;
};

struct km_pstate {
	struct entry *table;
	struct txn *txns;
	uint32_t producers_max;
	uint32_t txns_max;
	uint32_t table_mask;
	uint32_t table_shift; /* 64 - log2(table capacity) */
	uint32_t count;
	uint32_t txn_head;
	uint32_t txn_len;
	int64_t max_positive_pid;
	int64_t next_offset;
	struct km_pstate_stats stats;
};

static inline void note_pid(struct km_pstate *ps, int64_t pid)
{
	if (pid > ps->max_positive_pid)
		ps->max_positive_pid = pid;
}

static inline bool entry_txn_open(const struct entry *e)
{
	return e->txn_first_offset >= 0;
}

static inline const struct batch_md *entry_newest(const struct entry *e)
{
	if (e->batch_count == 0)
		return NULL;
	return &e->batches[(e->batch_head + e->batch_count - 1) %
			   KM_PSTATE_BATCHES];
}

/* pstate_table.c: producer entries and the hash table that holds them */
void km_pstate_entry_fresh(struct entry *e, int64_t pid);
void km_pstate_entry_set_epoch(struct entry *e, int16_t epoch);
void km_pstate_entry_add_batch(struct entry *e, int16_t epoch,
			       const struct batch_md *md);
const struct batch_md *km_pstate_entry_find_dup(const struct entry *e,
						int16_t epoch,
						int32_t first_seq,
						int32_t last_seq);
void km_pstate_entry_info(const struct entry *e, struct km_producer_info *out);
uint32_t km_pstate_table_log2_cap(uint32_t producers_max);
struct entry *km_pstate_table_find(const struct km_pstate *ps, int64_t pid);
void km_pstate_table_insert(struct km_pstate *ps, const struct entry *e);
void km_pstate_table_commit(struct km_pstate *ps, struct entry *slot,
			    const struct entry *e);
uint32_t km_pstate_table_expire_negative(struct km_pstate *ps);

/* pstate_txn.c: the transactions, a ring in first-offset order */
void km_pstate_txns_push(struct km_pstate *ps, int64_t first_offset,
			 int64_t pid);
void km_pstate_txns_retire(struct km_pstate *ps, int64_t hw);
bool km_pstate_txns_make_room(struct km_pstate *ps, int64_t hw);
void km_pstate_txns_complete(struct km_pstate *ps, const struct entry *e,
			     bool aborted, int64_t marker_offset,
			     struct km_pstate_result *res);
void km_pstate_txns_drop_open_negative(struct km_pstate *ps, int64_t offset);

#endif
