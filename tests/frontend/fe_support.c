/* C helpers for the front-end tests: see fe_support.h. */
#include "fe_support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/errors.h"
#include "dataplane/serve/local_write.h"
#include "dataplane/serve/part.h"
#include "iouring_log/log.h"

struct fe_parts {
	struct km_part_table table;
	struct km_part_ops ops;
	struct km_local_write **lws;
	uint64_t *calls;
	uint32_t *marker_fails;	/* write_marker calls still to refuse */
	uint64_t *marker_calls;
	int64_t next_pid;
};

static int produce(void *ctx, struct km_part *p, const struct km_chain *c,
		   struct km_chain_cur cur, uint32_t len, int16_t acks,
		   km_part_produced_fn done, void *arg)
{
	struct fe_parts *t = ctx;
	uint32_t i = (uint32_t)(p - t->table.parts);

	if (km_part_get_mode(p) != KM_PART_WRITABLE)
		return KM_EMIRRORED;
	if (t->lws[i] == NULL)
		return KM_EPARTOFFLINE;
	t->calls[i]++;
	return km_local_write_submit(t->lws[i], c, cur, len, acks, done, arg);
}

static int write_marker(void *ctx, struct km_part *p, int64_t pid,
			int16_t epoch, bool commit, km_part_produced_fn done,
			void *arg)
{
	struct fe_parts *t = ctx;
	uint32_t i = (uint32_t)(p - t->table.parts);

	if (km_part_get_mode(p) != KM_PART_WRITABLE)
		return KM_EMIRRORED;
	if (t->lws[i] == NULL)
		return KM_EPARTOFFLINE;
	t->marker_calls[i]++;
	if (t->marker_fails[i] > 0) {
		t->marker_fails[i]--;
		return -EAGAIN; /* the owner's ring full */
	}
	return km_local_write_marker(t->lws[i], pid, epoch, commit, 0,
				     1700000000000LL, done, arg);
}

static int alloc_pid(void *ctx, int64_t *pid, int16_t *epoch)
{
	struct fe_parts *t = ctx;

	*pid = t->next_pid++;
	*epoch = 0;
	return 0;
}

struct fe_parts *fe_parts_new(uint32_t n, int64_t first_pid)
{
	struct fe_parts *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return NULL;
	t->table.parts = calloc(n, sizeof(*t->table.parts));
	t->lws = calloc(n, sizeof(*t->lws));
	t->calls = calloc(n, sizeof(*t->calls));
	t->marker_fails = calloc(n, sizeof(*t->marker_fails));
	t->marker_calls = calloc(n, sizeof(*t->marker_calls));
	t->table.n = t->table.cap = n;
	t->ops.produce = produce;
	t->ops.alloc_pid = alloc_pid;
	t->ops.write_marker = write_marker;
	t->ops.ctx = t;
	t->next_pid = first_pid;
	if (!t->table.parts || !t->lws || !t->calls || !t->marker_fails ||
	    !t->marker_calls) {
		fe_parts_free(t);
		return NULL;
	}
	return t;
}

void fe_parts_set(struct fe_parts *t, uint32_t i, const char *topic,
		  int32_t partition, int writable, struct km_log *log,
		  struct km_local_write *lw)
{
	struct km_part *p = &t->table.parts[i];

	snprintf(p->topic, sizeof(p->topic), "%s", topic);
	p->partition = partition;
	p->owner = 0;
	p->log = log;
	atomic_store(&p->mode, writable ? KM_PART_WRITABLE : KM_PART_MIRROR);
	atomic_store(&p->error, 0);
	t->lws[i] = lw;
	if (log != NULL) { /* as the owner publishes it (worker.c) */
		uint8_t id[KM_WIRE_UUID_BYTES];

		km_log_topic_id(log, id);
		km_part_topic_id_publish(&p->stats.topic_id, id);
	}
	/* The entries set so far, sorted: tests set them before serving. */
	if (km_part_table_publish(&t->table) < 0)
		abort();
}

const struct km_part_table *fe_parts_table(struct fe_parts *t)
{
	return &t->table;
}

const struct km_part_ops *fe_parts_ops(struct fe_parts *t)
{
	return &t->ops;
}

uint64_t fe_parts_produce_calls(const struct fe_parts *t, uint32_t i)
{
	return t->calls[i];
}

void fe_parts_set_internal(struct fe_parts *t, uint32_t i, int internal)
{
	t->table.parts[i].internal = internal != 0;
}

void fe_parts_set_error(struct fe_parts *t, uint32_t i, int err)
{
	atomic_store(&t->table.parts[i].error, err);
}

void fe_parts_free(struct fe_parts *t)
{
	if (t == NULL)
		return;
	km_part_table_fini(&t->table);
	free(t->table.parts);
	free(t->lws);
	free(t->calls);
	free(t->marker_fails);
	free(t->marker_calls);
	free(t);
}

static void on_outcome(void *arg, const struct km_part_produced *res)
{
	struct fe_outcome *o = arg;

	o->done++;
	o->err = res->err;
	o->base_offset = res->base_offset;
	o->log_start = res->log_start;
	o->durable_at_done = km_log_durable_offset(o->log);
	o->appended_at_done = km_log_appended_offset(o->log);
}

int fe_lw_submit(struct km_local_write *lw, const void *records, uint32_t len,
		 int16_t acks, struct fe_outcome *out)
{
	struct iovec iov = { (void *)records, len };
	struct km_chain ch = { &iov, 1 };

	return km_local_write_submit(lw, &ch, km_chain_start(&ch), len, acks,
				     on_outcome, out);
}

int fe_lw_submit_split(struct km_local_write *lw, const void *records,
		       uint32_t len, uint32_t pieces, int16_t acks,
		       struct fe_outcome *out)
{
	struct iovec iov[16];
	struct km_chain ch = { iov, 0 };
	uint32_t at = 0;

	if (pieces == 0 || pieces > 16 || pieces > len)
		return -EINVAL;
	/* Uneven pieces, the last one taking the rest. */
	for (uint32_t i = 0; i < pieces; i++) {
		uint32_t n = i + 1 == pieces ? len - at : (len / pieces) - i;

		iov[i].iov_base = (char *)records + at;
		iov[i].iov_len = n;
		at += n;
	}
	ch.n_iov = pieces;
	return km_local_write_submit(lw, &ch, km_chain_start(&ch), len, acks,
				     on_outcome, out);
}

int fe_lw_adopt(struct km_local_write *lw, void *records, uint32_t len,
		int16_t acks, struct fe_outcome *out, void (*release)(void *))
{
	return km_local_write_adopt(lw, records, len, acks, on_outcome, out,
				    release);
}

int fe_lw_marker(struct km_local_write *lw, int64_t pid, int16_t epoch,
		 bool commit, struct fe_outcome *out)
{
	return km_local_write_marker(lw, pid, epoch, commit, 0,
				     1700000000000LL, on_outcome, out);
}

void fe_parts_fail_markers(struct fe_parts *t, uint32_t i, uint32_t n)
{
	t->marker_fails[i] = n;
}

uint64_t fe_parts_marker_calls(const struct fe_parts *t, uint32_t i)
{
	return t->marker_calls[i];
}
