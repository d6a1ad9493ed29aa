/* __transaction_state records and their replay (dataplane/group/txnlog.h). */
#include "dataplane/group/txnlog.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "common/km_limits.h"
#include "common/log.h"
#include "iouring_log/log.h"
#include "kafka/batch.h"
#include "kafka/records.h"

/* Batches the load reads at a time. */

int km_txnlog_build(void *buf, size_t cap, const char *txn_id,
		    const struct km_txnrec_value *v, int64_t now_ms)
{
	uint8_t k[4 + KM_TXNREC_NAME_MAX];
	struct km_batch_spec spec = { 0, -1, 0, -1, -1, -1 };
	struct km_record_spec rec;
	int kl = km_txnrec_key_encode(k, sizeof(k), txn_id);
	uint8_t *val = (uint8_t *)buf + KM_TXNLOG_BATCH_MAX;
	int vl = -1;

	if (kl < 0)
		return kl;
	if (cap < KM_TXNLOG_BUILD_BYTES)
		return KM_ENOSPACE;
	/* The value is staged above the largest batch: the batch is
	 * written from buf up, below what it reads. */
	if (v != NULL &&
	    (vl = km_txnrec_value_encode(val, KM_TXNLOG_BATCH_MAX, v)) < 0)
		return vl;
	rec = (struct km_record_spec){ k, kl, v != NULL ? val : NULL, vl,
				       now_ms, NULL, 0 };
	return km_records_build(buf, KM_TXNLOG_BATCH_MAX, &spec, &rec, 1);
}

struct load {
	km_txnlog_fn fn;
	void *arg;
	struct km_txnrec_value v;
	uint8_t key[4 + KM_TXNREC_NAME_MAX];
	uint8_t val[KM_TXNLOG_BATCH_MAX];
};

static int apply_record(struct load *x, const struct km_batch *b,
			const struct km_record *r, int64_t offset)
{
	char id[KM_TXNREC_NAME_MAX + 1];
	int rc;

	if (r->key_len < 0 || (size_t)r->key_len > sizeof(x->key) ||
	    (r->value_len >= 0 && (size_t)r->value_len > sizeof(x->val)))
		return -EBADMSG;
	km_chain_copy(b->chain, r->key, x->key, (size_t)r->key_len);
	if ((rc = km_txnrec_key_decode(x->key, (size_t)r->key_len, id)) < 0)
		return rc;
	if (r->value_len < 0) {
		x->fn(x->arg, id, NULL, offset);
		return 0;
	}
	km_chain_copy(b->chain, r->value, x->val, (size_t)r->value_len);
	if ((rc = km_txnrec_value_decode(x->val, (size_t)r->value_len,
					 &x->v)) < 0)
		return rc;
	x->fn(x->arg, id, &x->v, offset);
	return 0;
}

static int apply_batch(struct load *x, const struct km_batch *b)
{
	struct km_records_iter it;
	struct km_record r;
	int n = 0, rc;

	if (km_batch_is_control(b))
		return 0;
	if ((rc = km_records_begin(&it, b)) < 0)
		return rc;
	while ((rc = km_records_next(&it, &r)) > 0) {
		int err = apply_record(x, b, &r, r.offset);


		if (err < 0)
			KM_WARN("txn", "%s-0: record at offset %" PRId64
				" skipped: %s", KM_TXNLOG_TOPIC,
				r.offset, km_strerror(err));
		n += err == 0;
	}
	return rc < 0 ? rc : n;
}

static int replay_batch(void *arg, const struct km_batch *b)
{
	return apply_batch(arg, b);
}

int km_txnlog_load(struct km_log *log, km_txnlog_fn fn, void *arg)
{
	struct load *x = malloc(sizeof(*x)); /* a value holds many names */
	int n;

	if (x == NULL)
		return -ENOMEM;
	x->fn = fn;
	x->arg = arg;
	n = km_log_replay(log, "txn", replay_batch, x);
	free(x);
	return n;
}

static void note_max(void *arg, const char *txn_id,
		     const struct km_txnrec_value *v, int64_t offset)
{
	int64_t *max = arg;

	(void)txn_id;
	(void)offset;
	if (v == NULL)
		return;
	if (v->producer_id > *max)
		*max = v->producer_id;
	if (v->prev_producer_id > *max)
		*max = v->prev_producer_id;
	if (v->next_producer_id > *max)
		*max = v->next_producer_id;
}

int km_txnlog_max_pid(struct km_log *log, int64_t *max)
{
	int rc;

	*max = -1;
	rc = km_txnlog_load(log, note_max, max);
	return rc < 0 ? rc : 0;
}
