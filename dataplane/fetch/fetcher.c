/* A mirrored partition inside a fetch session: life cycle, failure and the
 * Kafka error policy. See fetcher.h. */
#include "dataplane/fetch/fetcher_pvt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>

#include "common/clock.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/km_limits.h"
#include "common/log.h"

static const char *const err_names[KM_FETCHER_ERR_KINDS] = {
	[KM_FETCHER_ERR_NOT_LEADER] = "not_leader",
	[KM_FETCHER_ERR_LEADER_NOT_AVAILABLE] = "leader_not_available",
	[KM_FETCHER_ERR_UNKNOWN_TOPIC] = "unknown_topic",
	[KM_FETCHER_ERR_LEADER_EPOCH] = "leader_epoch",
	[KM_FETCHER_ERR_RETRIABLE] = "retriable",
	[KM_FETCHER_ERR_OUT_OF_RANGE] = "offset_out_of_range",
	[KM_FETCHER_ERR_CONNECT] = "connect",
	[KM_FETCHER_ERR_DISCONNECT] = "disconnect",
	[KM_FETCHER_ERR_TIMEOUT] = "timeout",
	[KM_FETCHER_ERR_CORRUPT] = "corrupt",
	[KM_FETCHER_ERR_STALL] = "stall",
	[KM_FETCHER_ERR_PROTOCOL] = "protocol",
	[KM_FETCHER_ERR_BASE_OFFSET] = "base_offset",
};

const char *km_fetcher_err_name(enum km_fetcher_err kind)
{
	if ((unsigned)kind >= KM_FETCHER_ERR_KINDS)
		return "unknown";
	return err_names[kind];
}

uint64_t km_fetcher_now_ms(void)
{
	return km_clock_ms();
}

void km_fetcher_published_changed(struct km_fetcher *f)
{
	/* Process-wide, so that a fetcher set up again in the same memory
	 * never repeats a value its owner already published. Rare (init, a
	 * note, an id learned): never per batch. */
	static _Atomic uint64_t gen;

	f->pub_gen = atomic_fetch_add_explicit(&gen, 1, memory_order_relaxed) + 1;
}

void km_fetcher_fail(struct km_fetcher *f, const char *fmt, ...)
{
	va_list ap;

	if (f->failed || f->stopped)
		return;
	va_start(ap, fmt);
	vsnprintf(f->reason, sizeof(f->reason), fmt, ap);
	va_end(ap);
	f->failed = true;
	f->state = KM_FETCHER_FAILED;
	f->phase = KM_FP_DONE;
	f->in_meta = false;
	km_fsess_unask(f);
	km_fetcher_touch(f, true);
}

uint32_t km_fetcher_backoff(struct km_fetcher *f)
{
	uint32_t b = f->backoff_ms;
	uint32_t max = f->cfg.backoff_max_ms;

	f->backoff_ms = b * 2 > max ? max : b * 2;
	return b;
}

bool km_fetcher_literal_ipv4(const char *host,
			     char ipv4[KM_FETCHER_IPV4_BYTES])
{
	struct in_addr a;

	if (inet_pton(AF_INET, host, &a) == 1) {
		snprintf(ipv4, KM_FETCHER_IPV4_BYTES, "%s", host);
		return true;
	}
	if (strcmp(host, "localhost") == 0) {
		snprintf(ipv4, KM_FETCHER_IPV4_BYTES, "127.0.0.1");
		return true;
	}
	return false;
}

int km_fetcher_resolve(const struct km_fsess_pool *p, const char *host,
		       char ipv4[KM_FETCHER_IPV4_BYTES])
{
	if (km_fetcher_literal_ipv4(host, ipv4))
		return 0;
	if (p->cfg.resolve == NULL)
		return -EINVAL;
	return p->cfg.resolve(p->cfg.resolve_ctx, host, ipv4);
}

/* ---- init ---- */

static bool config_ok(const struct km_fetcher_config *cfg,
		      const struct km_fsess_pool *p)
{
	char ip[KM_FETCHER_IPV4_BYTES];

	if (cfg->n_bootstrap == 0 || cfg->n_bootstrap > KM_FETCHER_BOOTSTRAP_MAX)
		return false;
	if (!cfg->topic[0] || cfg->partition < 0)
		return false;
	for (uint32_t i = 0; i < cfg->n_bootstrap; i++) {
		const struct km_fetcher_addr *a = &cfg->bootstrap[i];

		if (!a->host[0] || a->port == 0)
			return false;
		/* Without a resolver only literals can ever be reached. */
		if (p->cfg.resolve == NULL &&
		    !km_fetcher_literal_ipv4(a->host, ip))
			return false;
	}
	return true;
}

static void config_defaults(struct km_fetcher_config *c)
{
	if (c->max_wait_ms <= 0)
		c->max_wait_ms = 50;
	if (c->max_bytes <= 0)
		c->max_bytes = 1 << 20;
	if (c->batch_bytes_max == 0 || c->batch_bytes_max > KM_BATCH_BYTES_MAX)
		c->batch_bytes_max = KM_BATCH_BYTES_MAX;
	if (c->backoff_ms == 0)
		c->backoff_ms = 50;
	if (c->backoff_max_ms == 0)
		c->backoff_max_ms = 2000;
	if (c->backoff_max_ms < c->backoff_ms)
		c->backoff_max_ms = c->backoff_ms;
	if (c->request_timeout_ms == 0)
		c->request_timeout_ms = 30000;
}

static void stats_init(struct km_fetcher_stats *s)
{
	memset(s, 0, sizeof(*s));
	s->high_watermark = -1;
	s->log_start_offset = -1;
	s->last_stable_offset = -1;
	s->leader_id = -1;
	s->data_loss_from = s->data_loss_to = -1;
	s->v_apiversions = s->v_metadata = -1;
	s->v_listoffsets = s->v_fetch = -1;
}

int km_fetcher_init(struct km_fetcher *f, const struct km_fetcher_config *cfg,
		    struct km_fsess_pool *pool, struct km_log *log)
{
	uint64_t half;

	if (!pool || !log || !config_ok(cfg, pool))
		return -EINVAL;
	/* All but the batch array, read only below n_batches: its 26 KiB
	 * stay unbacked for a quiet partition in fresh zeroed memory
	 * (worker.c maps each fetcher). */
	memset(f, 0, offsetof(struct km_fetcher, batches));
	f->cfg = *cfg;
	config_defaults(&f->cfg);
	f->pool = pool;
	f->log = log;
	f->state = KM_FETCHER_CONNECTING;
	f->phase = KM_FP_META;
	f->ask_slot = -1;
	f->next_offset = -1;
	f->inflight_offset = -1;
	f->corrupt_offset = -1;
	f->badoff_offset = -1;
	f->resp_hw = -1;
	f->wait_offset = -1;
	/* The source the log mirrors, if the owner knows it already. */
	memcpy(f->cluster_id, f->cfg.source_cluster_id, sizeof(f->cluster_id));
	f->cluster_id[sizeof(f->cluster_id) - 1] = '\0';
	memcpy(f->topic_id, f->cfg.source_topic_id, sizeof(f->topic_id));
	km_fetcher_published_changed(f);
	f->backoff_ms = f->cfg.backoff_ms;
	f->attempt = f->cfg.retry_attempt;
	stats_init(&f->stats);
	/* What one partition alone may get of a session's budget. */
	half = (uint64_t)pool->cfg.rx_buf_bytes *
	       (pool->cfg.rx_bufs_max < KM_KFRAME_SEGS_MAX
			? pool->cfg.rx_bufs_max : KM_KFRAME_SEGS_MAX) / 2 -
	       KM_FETCHER_RESP_OVERHEAD;
	f->stats.max_bytes = (uint64_t)f->cfg.max_bytes < half
				     ? f->cfg.max_bytes : (int32_t)half;
	return km_fsess_attach(pool, f);
}

/* ---- the Kafka error policy ---- */

static enum km_fetcher_action classify(int16_t err, enum km_fetcher_err *kind)
{
	*kind = KM_FETCHER_ERR_RETRIABLE;
	switch (err) {
	case KM_KERR_NOT_LEADER_OR_FOLLOWER:
		*kind = KM_FETCHER_ERR_NOT_LEADER;
		return KM_FACT_REFRESH;
	case KM_KERR_LEADER_NOT_AVAILABLE:
		*kind = KM_FETCHER_ERR_LEADER_NOT_AVAILABLE;
		return KM_FACT_REFRESH;
	case KM_KERR_UNKNOWN_TOPIC_OR_PARTITION:
	case KM_KERR_UNKNOWN_TOPIC_ID:
	/* Fetch v13: the broker's log of the partition has another id than
	 * the one asked; Metadata says which (fetcher_meta.c decides). */
	case KM_KERR_INCONSISTENT_TOPIC_ID:
		*kind = KM_FETCHER_ERR_UNKNOWN_TOPIC;
		return KM_FACT_REFRESH;
	case KM_KERR_FENCED_LEADER_EPOCH:
	case KM_KERR_UNKNOWN_LEADER_EPOCH:
		*kind = KM_FETCHER_ERR_LEADER_EPOCH;
		return KM_FACT_REFRESH;
	case KM_KERR_REPLICA_NOT_AVAILABLE:
	case KM_KERR_BROKER_NOT_AVAILABLE:
	case KM_KERR_KAFKA_STORAGE_ERROR:
		return KM_FACT_REFRESH;
	case KM_KERR_UNKNOWN_SERVER_ERROR:
	case KM_KERR_REQUEST_TIMED_OUT:
	case KM_KERR_NETWORK_EXCEPTION:
	case KM_KERR_NOT_ENOUGH_REPLICAS:
	case KM_KERR_OFFSET_NOT_AVAILABLE:
	case KM_KERR_FETCH_SESSION_ID_NOT_FOUND:
	case KM_KERR_INVALID_FETCH_SESSION_EPOCH:
		return KM_FACT_RETRY;
	case KM_KERR_OFFSET_OUT_OF_RANGE:
		*kind = KM_FETCHER_ERR_OUT_OF_RANGE;
		return KM_FACT_OUT_OF_RANGE;
	default:
		return KM_FACT_FAIL;
	}
}

void km_fetcher_need_leader(struct km_fetcher *f, uint32_t delay_ms)
{
	if (f->phase == KM_FP_DONE)
		return;
	f->phase = KM_FP_META;
	f->state = KM_FETCHER_CONNECTING;
	f->ready_at_ms = km_fetcher_now_ms() + delay_ms;
	km_fetcher_touch(f, true);
}

void km_fetcher_kafka_error(struct km_fetcher *f, const char *api,
			    enum km_freq req, int16_t err)
{
	enum km_fetcher_err kind;
	enum km_fetcher_action act = classify(err, &kind);

	(void)req; /* the phase says which request comes again */
	if (act == KM_FACT_FAIL) {
		km_fetcher_fail(f, "%s for %s-%d: %s (Kafka error %d)", api,
				f->cfg.topic, (int)f->cfg.partition,
				km_kerr_name(err), (int)err);
		return;
	}
	f->stats.errors[kind]++;
	km_fetcher_touch(f, true);
	if (act == KM_FACT_OUT_OF_RANGE) {
		f->oor = true;
		f->phase = KM_FP_OFFSETS;
		f->lo_want = KM_FREQ_EARLIEST;
		f->ready_at_ms = 0;
		return;
	}
	if (act == KM_FACT_REFRESH)
		km_fetcher_need_leader(f, 0);
	/* Its broker keeps answering with errors: ask another one. */
	if (++f->err_streak >= KM_FETCHER_ROTATE_AFTER) {
		const struct km_fsess *was = f->sess;

		f->err_streak = 0;
		km_fetcher_need_leader(f, 0);
		km_fsess_rotate(f);
		if (f->sess == was && was->pinned) /* no other session free */
			f->ready_at_ms += km_fetcher_backoff(f);
		return;
	}
	f->ready_at_ms = km_fetcher_now_ms() + km_fetcher_backoff(f);
}

void km_fetcher_start(struct km_fetcher *f)
{
	int64_t end = km_log_end_offset(f->log);
	const struct km_fsess *s = f->sess;

	KM_ASSERT(f->phase == KM_FP_WAIT);
	f->stats.v_apiversions = s->v_apiversions;
	f->stats.v_metadata = s->v_metadata;
	f->stats.v_listoffsets = s->v_listoffsets;
	f->stats.v_fetch = s->v_fetch;
	f->state = KM_FETCHER_MIRRORING;
	f->ready_at_ms = 0;
	km_fetcher_touch(f, false);
	if (!f->oor && end > km_log_start_offset(f->log)) {
		f->next_offset = end; /* R6: resume at the log end */
		f->phase = KM_FP_FETCH;
		return;
	}
	/* An empty log starts where the source does; an interrupted
	 * OFFSET_OUT_OF_RANGE check starts over. */
	f->phase = KM_FP_OFFSETS;
	f->lo_want = KM_FREQ_EARLIEST;
	if (f->sess != NULL)
		f->sess->pre_due = true;
}

/* ---- transient trouble ---- */

/* The kinds that keep a partition CONNECTING and may pass by themselves;
 * the others have their own limits (corrupt, protocol, base offset) or
 * their own answer (offset out of range). A source that lacks the topic
 * answers, and km_fetcher_note() says so: not unavailable (a topic
 * deleted and made again must reach the topic id check, not a retry). */
static const enum km_fetcher_err trouble_kinds[] = {
	KM_FETCHER_ERR_NOT_LEADER,  KM_FETCHER_ERR_LEADER_NOT_AVAILABLE,
	KM_FETCHER_ERR_LEADER_EPOCH, KM_FETCHER_ERR_RETRIABLE,
	KM_FETCHER_ERR_CONNECT,	    KM_FETCHER_ERR_DISCONNECT,
	KM_FETCHER_ERR_TIMEOUT,
};

/* Errors are counted at many places (per partition, or on every member
 * of a session): comparing the counts finds new trouble without a hook
 * at each. */
static bool new_trouble(struct km_fetcher *f)
{
	bool any = false;

	for (size_t k = 0; k < sizeof(trouble_kinds) / sizeof(*trouble_kinds);
	     k++) {
		enum km_fetcher_err e = trouble_kinds[k];

		if (f->stats.errors[e] != f->seen[e]) {
			f->seen[e] = f->stats.errors[e];
			f->trouble_kind = e;
			any = true;
		}
	}
	return any;
}

/* Where the trouble is: the leader if known, else the first bootstrap. */
static const struct km_fetcher_addr *trouble_at(const struct km_fetcher *f)
{
	return f->stats.leader.host[0] ? &f->stats.leader : &f->cfg.bootstrap[0];
}

/* Status says why a CONNECTING partition waits (unless another note
 * does), until a good Fetch. */
static void note_trouble(struct km_fetcher *f)
{
	const struct km_fetcher_addr *a = trouble_at(f);
	char text[KM_FETCHER_REASON_BYTES], until[64] = "";

	if (f->note_kind != KM_FNOTE_NONE)
		return;
	if (f->cfg.unavailable_ms != 0)
		snprintf(until, sizeof(until), "; FAILED (transient) after %u ms",
			 f->cfg.unavailable_ms);
	snprintf(text, sizeof(text), "source unavailable: no good Fetch since "
		 "a %s error (%s %.60s:%u); reconnecting%s",
		 km_fetcher_err_name(f->trouble_kind),
		 f->stats.leader.host[0] ? "leader" : "bootstrap", a->host,
		 a->port, until);
	km_fetcher_set_note(f, KM_FNOTE_UNAVAILABLE, text);
}

static void fail_unavailable(struct km_fetcher *f, uint64_t now)
{
	const struct km_fetcher_addr *a = trouble_at(f);

	if (f->attempt)
		km_fetcher_fail(f, "source unavailable: a retry of %.200s-%d "
				"failed at its first error (%s, %s %.60s:%u)",
				f->cfg.topic, (int)f->cfg.partition,
				km_fetcher_err_name(f->trouble_kind),
				f->stats.leader.host[0] ? "leader" : "bootstrap",
				a->host, a->port);
	else
		km_fetcher_fail(f, "source unavailable: no good Fetch of "
				"%.200s-%d for %llu ms (last error: %s, %s "
				"%.60s:%u)", f->cfg.topic, (int)f->cfg.partition,
				(unsigned long long)(now - f->trouble_ms),
				km_fetcher_err_name(f->trouble_kind),
				f->stats.leader.host[0] ? "leader" : "bootstrap",
				a->host, a->port);
	f->transient = true;
}

void km_fetcher_watch(struct km_fetcher *f, uint64_t now)
{
	if (f->phase == KM_FP_DONE)
		return;
	if (new_trouble(f) && f->trouble_ms == 0) {
		f->trouble_ms = now;
		note_trouble(f);
	}
	if (f->trouble_ms == 0 || f->state == KM_FETCHER_MIRRORING)
		return;
	if (f->attempt || (f->cfg.unavailable_ms != 0 &&
			   now - f->trouble_ms >= f->cfg.unavailable_ms))
		fail_unavailable(f, now);
}

/* ---- stop ---- */

void km_fetcher_cut(struct km_fetcher *f)
{
	struct km_fsess *s = f->sess;

	if (s == NULL || s->conn == NULL || s->dropping)
		return;
	km_fsess_count(s, KM_FETCHER_ERR_DISCONNECT);
	km_fsess_drop(s, true);
}

void km_fetcher_stop(struct km_fetcher *f)
{
	if (!f->failed && !f->stopped)
		snprintf(f->reason, sizeof(f->reason), "stopped");
	f->stopped = true;
	f->phase = KM_FP_DONE;
	f->in_meta = false;
	km_fsess_unask(f);
	km_fetcher_touch(f, true);
}

const char *km_fetcher_reason(const struct km_fetcher *f)
{
	return f->reason;
}
