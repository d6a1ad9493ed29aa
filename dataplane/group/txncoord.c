/* Transaction coordinator logic: see txncoord.h. */
#include "dataplane/group/txncoord.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/proto.h"
#include "kafka/txnrec.h"

/* Kafka bumps to a new producer id rather than reach Short.MaxValue
 * (TransactionMetadata.isEpochExhausted: epoch >= Short.MaxValue - 1). */
#define EPOCH_LAST (INT16_MAX - 1)

struct txn {
	bool used;
	char id[KM_TXNCOORD_NAME_MAX + 1];
	int64_t pid;
	int16_t epoch;
	int64_t last_pid;	/* before the last bump: a retried init */
	int16_t last_epoch;
	enum km_txn_state state;
	int32_t timeout_ms;
	int64_t start_ms;	/* when it went Ongoing */
	struct km_txn_part *parts;
	uint32_t n_parts;
	/* Persistence (km_txncoord_take_dirty): changed since its last
	 * record; a record of it is being written (its producer waits);
	 * forgotten once its tombstone is durable. */
	bool dirty;
	uint32_t pending;	/* records in flight */
	bool dead;
	int64_t last_ms;	/* its last record's time (wall clock) */
};

struct km_txncoord {
	struct km_txncoord_config cfg;
	struct txn *txns;
	struct km_txn_part *parts; /* ids_max * parts_max */
};

int km_txncoord_create(const struct km_txncoord_config *cfg,
		       struct km_txncoord **out)
{
	struct km_txncoord *c;

	if (cfg->ids_max == 0 || cfg->parts_max == 0 || cfg->alloc_pid == NULL)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	c->cfg = *cfg;
	c->txns = calloc(cfg->ids_max, sizeof(*c->txns));
	c->parts = calloc((size_t)cfg->ids_max * cfg->parts_max,
			  sizeof(*c->parts));
	if (c->txns == NULL || c->parts == NULL) {
		km_txncoord_destroy(c);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < cfg->ids_max; i++)
		c->txns[i].parts = &c->parts[(size_t)i * cfg->parts_max];
	*out = c;
	return 0;
}

void km_txncoord_destroy(struct km_txncoord *c)
{
	if (c == NULL)
		return;
	free(c->txns);
	free(c->parts);
	free(c);
}

static struct txn *find(const struct km_txncoord *c, const char *id)
{
	for (uint32_t i = 0; i < c->cfg.ids_max; i++)
		if (c->txns[i].used && strcmp(c->txns[i].id, id) == 0)
			return &c->txns[i];
	return NULL;
}

/* A free slot. A finished id is not taken over: it would come back from
 * the log at a restart (transactional.id.expiration.ms forgets it, with a
 * tombstone, km_txncoord_expire_id). */
static struct txn *slot_for_new(struct km_txncoord *c)
{
	for (uint32_t i = 0; i < c->cfg.ids_max; i++)
		if (!c->txns[i].used)
			return &c->txns[i];
	return NULL;
}

static bool prepared(const struct txn *t)
{
	return t->state == KM_TXN_PREPARE_COMMIT ||
	       t->state == KM_TXN_PREPARE_ABORT;
}

/* The next epoch of t's producer, or a new producer id at 0 once the
 * epoch is exhausted. A fence keeps the producer id whatever the epoch:
 * its abort markers must end that producer's transaction (Kafka's
 * prepareFenceProducerEpoch may reach Short.MaxValue).
 * @return 0 or the allocator's error. */
static int bump(struct km_txncoord *c, struct txn *t, bool fence)
{
	int16_t ignored;
	int rc;

	t->last_pid = t->pid;
	t->last_epoch = t->epoch;
	if (t->epoch < EPOCH_LAST || (fence && t->epoch < INT16_MAX)) {
		t->epoch++;
		return 0;
	}
	rc = c->cfg.alloc_pid(c->cfg.alloc_ctx, &t->pid, &ignored);
	t->epoch = 0;
	return rc;
}

static void fill_markers(const struct txn *t, struct km_txn_markers *m)
{
	m->transactional_id = t->id;
	m->producer_id = t->pid;
	m->producer_epoch = t->epoch;
	m->commit = t->state == KM_TXN_PREPARE_COMMIT;
	m->parts = t->parts;
	m->n_parts = t->n_parts;
}

static void no_markers(struct km_txn_markers *m)
{
	memset(m, 0, sizeof(*m));
}

static int16_t new_id(struct km_txncoord *c, const char *txn_id,
		      int32_t timeout_ms, int64_t *pid, int16_t *epoch)
{
	struct txn *t = slot_for_new(c);
	int16_t ignored;

	if (t == NULL)
		return KM_KERR_POLICY_VIOLATION;
	memset(t, 0, offsetof(struct txn, parts)); /* parts: the slot's own */
	t->dirty = false;
	t->pending = 0;
	t->dead = false;
	if (c->cfg.alloc_pid(c->cfg.alloc_ctx, &t->pid, &ignored) < 0)
		return KM_KERR_COORDINATOR_NOT_AVAILABLE;
	t->used = true;
	strcpy(t->id, txn_id);
	t->last_pid = -1;
	t->last_epoch = -1;
	t->n_parts = 0;
	t->state = KM_TXN_EMPTY;
	t->timeout_ms = timeout_ms;
	t->start_ms = -1;
	t->dirty = true;
	*pid = t->pid;
	*epoch = t->epoch;
	return 0;
}

/* KIP-360: the expected pair must be the current one or, for a retried
 * init whose answer was lost, the one before the last bump. */
static bool expected_ok(const struct txn *t, int64_t pid, int16_t epoch)
{
	if (pid < 0 && epoch < 0)
		return true;
	return (pid == t->pid && epoch == t->epoch) ||
	       (pid == t->last_pid && epoch == t->last_epoch);
}

int16_t km_txncoord_init_pid(struct km_txncoord *c, const char *txn_id,
			     int32_t timeout_ms, int64_t expect_pid,
			     int16_t expect_epoch, int64_t now_ms,
			     int64_t *pid, int16_t *epoch,
			     struct km_txn_markers *markers)
{
	struct txn *t;

	no_markers(markers);
	if (timeout_ms <= 0 || timeout_ms > KM_TXNCOORD_TIMEOUT_MAX_MS)
		return KM_KERR_INVALID_TRANSACTION_TIMEOUT;
	if (strlen(txn_id) > KM_TXNCOORD_NAME_MAX)
		return KM_KERR_INVALID_REQUEST;
	t = find(c, txn_id);
	if (t == NULL) {
		int16_t err = new_id(c, txn_id, timeout_ms, pid, epoch);

		if (err == 0)
			find(c, txn_id)->last_ms = now_ms;
		return err;
	}
	if (prepared(t) || t->pending)
		return KM_KERR_CONCURRENT_TRANSACTIONS;
	if (!expected_ok(t, expect_pid, expect_epoch))
		return KM_KERR_PRODUCER_FENCED;
	if (expect_pid >= 0 && expect_pid == t->last_pid &&
	    expect_epoch == t->last_epoch && t->state != KM_TXN_ONGOING) {
		*pid = t->pid; /* the lost answer, again */
		*epoch = t->epoch;
		return 0;
	}
	if (bump(c, t, t->state == KM_TXN_ONGOING) < 0)
		return KM_KERR_COORDINATOR_NOT_AVAILABLE;
	t->dirty = true;
	if (t->state == KM_TXN_ONGOING) {
		t->state = KM_TXN_PREPARE_ABORT;
		fill_markers(t, markers);
		return KM_KERR_CONCURRENT_TRANSACTIONS;
	}
	t->state = KM_TXN_EMPTY;
	t->n_parts = 0;
	t->timeout_ms = timeout_ms;
	*pid = t->pid;
	*epoch = t->epoch;
	return 0;
}

/* The checks every request of an open producer starts with. */
static int16_t producer_check(const struct txn *t, int64_t pid, int16_t epoch)
{
	if (t == NULL || t->pid != pid)
		return KM_KERR_INVALID_PRODUCER_ID_MAPPING;
	if (t->epoch != epoch)
		return KM_KERR_PRODUCER_FENCED;
	return prepared(t) || t->pending ? KM_KERR_CONCURRENT_TRANSACTIONS : 0;
}

static bool holds(const struct txn *t, const char *topic, int32_t partition)
{
	for (uint32_t i = 0; i < t->n_parts; i++)
		if (t->parts[i].partition == partition &&
		    strcmp(t->parts[i].topic, topic) == 0)
			return true;
	return false;
}

int16_t km_txncoord_add_partition(struct km_txncoord *c, const char *txn_id,
				  int64_t pid, int16_t epoch,
				  const char *topic, int32_t partition,
				  int64_t now_ms)
{
	struct txn *t = find(c, txn_id);
	int16_t err = producer_check(t, pid, epoch);
	struct km_txn_part *p;

	if (err != 0)
		return err;
	if (strlen(topic) > KM_TXNCOORD_NAME_MAX)
		return KM_KERR_INVALID_REQUEST;
	if (t->state != KM_TXN_ONGOING) {
		t->n_parts = 0;
		t->start_ms = now_ms;
		t->dirty = true;
	}
	if (!holds(t, topic, partition)) {
		if (t->n_parts == c->cfg.parts_max)
			return KM_KERR_INVALID_REQUEST;
		p = &t->parts[t->n_parts++];
		strcpy(p->topic, topic);
		p->partition = partition;
		t->dirty = true;
	}
	t->state = KM_TXN_ONGOING;
	return 0;
}

/* EndTxn when the transaction is not Ongoing: a retry of the decision
 * already taken is NONE, anything else INVALID_TXN_STATE. */
static int16_t end_not_ongoing(const struct txn *t, bool commit)
{
	if ((commit && t->state == KM_TXN_COMPLETE_COMMIT) ||
	    (!commit && t->state == KM_TXN_COMPLETE_ABORT))
		return 0;
	return KM_KERR_INVALID_TXN_STATE;
}

int16_t km_txncoord_end(struct km_txncoord *c, const char *txn_id,
			int64_t pid, int16_t epoch, bool commit,
			struct km_txn_markers *markers)
{
	struct txn *t = find(c, txn_id);
	int16_t err = producer_check(t, pid, epoch);

	no_markers(markers);
	/* Only a decision already taken can be the wrong one: an Ongoing
	 * id whose record is being written is merely busy. */
	if (err == KM_KERR_CONCURRENT_TRANSACTIONS && prepared(t) &&
	    (t->state == KM_TXN_PREPARE_COMMIT) != commit)
		return KM_KERR_INVALID_TXN_STATE;
	if (err != 0)
		return err;
	if (t->state != KM_TXN_ONGOING)
		return end_not_ongoing(t, commit);
	t->state = commit ? KM_TXN_PREPARE_COMMIT : KM_TXN_PREPARE_ABORT;
	t->dirty = true;
	fill_markers(t, markers);
	return 0;
}

int km_txncoord_markers_written(struct km_txncoord *c, const char *txn_id)
{
	struct txn *t = find(c, txn_id);

	if (t == NULL)
		return -ENOENT;
	if (!prepared(t))
		return -EINVAL;
	t->state = t->state == KM_TXN_PREPARE_COMMIT ? KM_TXN_COMPLETE_COMMIT
						     : KM_TXN_COMPLETE_ABORT;
	t->n_parts = 0; /* Kafka's Complete* records name none */
	t->dirty = true;
	return 0;
}

int km_txncoord_expire(struct km_txncoord *c, int64_t now_ms,
		       struct km_txn_markers *markers)
{
	no_markers(markers);
	for (uint32_t i = 0; i < c->cfg.ids_max; i++) {
		struct txn *t = &c->txns[i];

		if (!t->used || t->state != KM_TXN_ONGOING || t->pending ||
		    now_ms - t->start_ms <= t->timeout_ms)
			continue;
		if (bump(c, t, true) < 0)
			continue; /* tried again on the next call */
		t->state = KM_TXN_PREPARE_ABORT;
		t->dirty = true;
		fill_markers(t, markers);
		return 1;
	}
	return 0;
}

bool km_txncoord_may_write(const struct km_txncoord *c, int64_t pid,
			   int16_t epoch, const char *topic,
			   int32_t partition)
{
	for (uint32_t i = 0; i < c->cfg.ids_max; i++) {
		const struct txn *t = &c->txns[i];

		if (t->used && t->pid == pid)
			return t->epoch == epoch &&
			       t->state == KM_TXN_ONGOING &&
			       holds(t, topic, partition);
	}
	return false;
}

int km_txncoord_state(const struct km_txncoord *c, const char *txn_id)
{
	const struct txn *t = find(c, txn_id);

	return t == NULL ? -ENOENT : (int)t->state;
}

/* ---- persistence (frontend_txnlog.c) ---- */

bool km_txncoord_take_dirty(struct km_txncoord *c, const char *txn_id,
			    int64_t now_ms)
{
	struct txn *t = find(c, txn_id);

	if (t == NULL || !t->dirty)
		return false;
	t->dirty = false;
	t->last_ms = now_ms;
	return true;
}

int km_txncoord_set_pending(struct km_txncoord *c, const char *txn_id,
			    bool pending)
{
	struct txn *t = find(c, txn_id);

	if (t == NULL)
		return -ENOENT;
	if (pending)
		t->pending++;
	else if (t->pending > 0)
		t->pending--;
	return 0;
}

/* Kafka groups a record's partitions under their topic: the topics in the
 * order the transaction met them, each with its partitions. */
static void record_parts(const struct txn *t, struct km_txnrec_value *v)
{
	v->n_parts = 0;
	for (uint32_t i = 0; i < t->n_parts; i++) {
		bool seen = false;

		for (uint32_t k = 0; k < i && !seen; k++)
			seen = strcmp(t->parts[k].topic, t->parts[i].topic) == 0;
		for (uint32_t k = i; !seen && k < t->n_parts; k++) {
			if (strcmp(t->parts[k].topic, t->parts[i].topic) != 0)
				continue;
			strcpy(v->parts[v->n_parts].topic, t->parts[k].topic);
			v->parts[v->n_parts++].partition = t->parts[k].partition;
		}
	}
}

int km_txncoord_record(const struct km_txncoord *c, const char *txn_id,
		       struct km_txnrec_value *v)
{
	const struct txn *t = find(c, txn_id);

	if (t == NULL)
		return -ENOENT;
	if (t->dead)
		return 1;
	if (t->n_parts > KM_TXNREC_PARTS_MAX)
		return -E2BIG;
	memset(v, 0, offsetof(struct km_txnrec_value, parts));
	v->producer_id = t->pid;
	v->producer_epoch = t->epoch;
	v->timeout_ms = t->timeout_ms;
	v->status = (int8_t)t->state; /* the same ids as TransactionState */
	record_parts(t, v);
	v->last_update_ms = t->last_ms;
	v->start_ms = t->state == KM_TXN_EMPTY ? -1 : t->start_ms;
	v->prev_producer_id = -1;
	v->next_producer_id = -1;
	return 0;
}

/* A record's status as a state here: Kafka's PrepareEpochFence is an
 * abort under a fencing epoch; Dead, the id forgotten. */
static int restore_state(int8_t status)
{
	switch (status) {
	case KM_TXNREC_EMPTY:
	case KM_TXNREC_ONGOING:
	case KM_TXNREC_PREPARE_COMMIT:
	case KM_TXNREC_PREPARE_ABORT:
	case KM_TXNREC_COMPLETE_COMMIT:
	case KM_TXNREC_COMPLETE_ABORT:
		return status;
	case KM_TXNREC_PREPARE_EPOCH_FENCE:
		return KM_TXN_PREPARE_ABORT;
	default:
		return -1;
	}
}

int km_txncoord_restore(struct km_txncoord *c, const char *txn_id,
			const struct km_txnrec_value *v)
{
	struct txn *t = find(c, txn_id);
	int state = v ? restore_state(v->status) : -1;

	if (state < 0 || (v != NULL && v->n_parts > c->cfg.parts_max)) {
		if (t != NULL)
			t->used = false; /* a tombstone, Dead */
		return v == NULL || v->status == KM_TXNREC_DEAD ? 0 : -EINVAL;
	}
	if (strlen(txn_id) > KM_TXNCOORD_NAME_MAX)
		return -EINVAL;
	if (t == NULL && (t = slot_for_new(c)) == NULL)
		return -ENOSPC;
	memset(t, 0, offsetof(struct txn, parts));
	t->dirty = t->dead = false;
	t->pending = 0;
	t->used = true;
	strcpy(t->id, txn_id);
	t->pid = v->producer_id;
	t->epoch = v->producer_epoch;
	t->last_pid = -1;
	t->last_epoch = -1;
	t->state = (enum km_txn_state)state;
	t->timeout_ms = v->timeout_ms;
	t->start_ms = v->start_ms;
	t->last_ms = v->last_update_ms;
	t->n_parts = v->n_parts;
	for (uint32_t i = 0; i < v->n_parts; i++) {
		strcpy(t->parts[i].topic, v->parts[i].topic);
		t->parts[i].partition = v->parts[i].partition;
	}
	return 0;
}

int km_txncoord_prepared(const struct km_txncoord *c, uint32_t *cursor,
			 struct km_txn_markers *markers)
{
	for (; *cursor < c->cfg.ids_max; (*cursor)++) {
		const struct txn *t = &c->txns[*cursor];

		if (t->used && prepared(t) && !t->pending) {
			fill_markers(t, markers);
			(*cursor)++;
			return 1;
		}
	}
	no_markers(markers);
	return 0;
}

const char *km_txncoord_expire_id(struct km_txncoord *c, int64_t now_ms,
				  int64_t expiration_ms)
{
	for (uint32_t i = 0; i < c->cfg.ids_max; i++) {
		struct txn *t = &c->txns[i];

		if (!t->used || t->pending || t->dead ||
		    (t->state != KM_TXN_EMPTY &&
		     t->state != KM_TXN_COMPLETE_COMMIT &&
		     t->state != KM_TXN_COMPLETE_ABORT) ||
		    now_ms - t->last_ms <= expiration_ms)
			continue;
		t->dead = true;
		return t->id;
	}
	return NULL;
}

int km_txncoord_forget(struct km_txncoord *c, const char *txn_id)
{
	struct txn *t = find(c, txn_id);

	if (t == NULL || !t->dead)
		return t == NULL ? -ENOENT : -EINVAL;
	t->used = false;
	return 0;
}

const char *km_txncoord_next_id(const struct km_txncoord *c, uint32_t *cursor)
{
	for (; *cursor < c->cfg.ids_max; (*cursor)++)
		if (c->txns[*cursor].used && !c->txns[*cursor].dead)
			return c->txns[(*cursor)++].id;
	return NULL;
}

int64_t km_txncoord_max_pid(const struct km_txncoord *c)
{
	int64_t max = -1;

	for (uint32_t i = 0; i < c->cfg.ids_max; i++)
		if (c->txns[i].used && c->txns[i].pid > max)
			max = c->txns[i].pid;
	return max;
}

int16_t km_txncoord_verify(const struct km_txncoord *c, const char *txn_id,
			   int64_t pid, int16_t epoch, const char *topic,
			   int32_t partition)
{
	const struct txn *t = find(c, txn_id);
	int16_t err = producer_check(t, pid, epoch);

	if (err != 0)
		return err;
	return t->state == KM_TXN_ONGOING && holds(t, topic, partition)
		       ? 0 : KM_KERR_INVALID_TXN_STATE;
}
