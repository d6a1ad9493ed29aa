/* Fetch session for one source partition: life cycle, connections, request
 * sending, response dispatch and the Kafka error policy. See fetcher.h. */
#include "dataplane/fetcher_pvt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/km_limits.h"
#include "common/log.h"

static void on_connect(struct km_net_conn *c, int res);
static void on_recv(struct km_net_conn *c, const struct km_chain *data,
		    const uint32_t *buf_ids);
static void on_close(struct km_net_conn *c, int reason);

static const struct km_net_handler fetcher_handler = {
	.on_connect = on_connect,
	.on_accept = NULL,
	.on_recv = on_recv,
	.on_close = on_close,
};

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

void km_fetcher_fail(struct km_fetcher *f, const char *fmt, ...)
{
	va_list ap;

	if (f->failed)
		return;
	va_start(ap, fmt);
	vsnprintf(f->reason, sizeof(f->reason), fmt, ap);
	va_end(ap);
	f->failed = true;
	f->state = KM_FETCHER_FAILED;
	f->next = KM_FREQ_NONE;
	if (f->conn) {
		f->dropping = true;
		km_net_abort(f->conn);
	}
}

void km_fetcher_drop(struct km_fetcher *f)
{
	if (f->conn == NULL || f->dropping)
		return;
	f->dropping = true;
	f->next = KM_FREQ_NONE;
	km_net_abort(f->conn);
}

/* A source that breaks the protocol (garbage, a bad size, a wrong
 * correlation id, a malformed answer) may be a transient fault on the way:
 * log it, drop the connection and reconnect with backoff; the same fault
 * KM_FETCHER_PROTO_MAX times in a row without a good Fetch answer between
 * fails the session, as repeated corruption does. */
void km_fetcher_protocol_error(struct km_fetcher *f, const char *fmt, ...)
{
	char what[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	f->stats.errors[KM_FETCHER_ERR_PROTOCOL]++;
	if (++f->proto_streak >= KM_FETCHER_PROTO_MAX) {
		km_fetcher_fail(f, "source %s:%u broke the protocol %u times in "
				"a row, last: %s", f->target.host,
				(unsigned)f->target.port, f->proto_streak, what);
		return;
	}
	KM_WARN("fetcher", "%s-%d: source %s:%u: %s; reconnecting",
		f->cfg.topic, (int)f->cfg.partition, f->target.host,
		(unsigned)f->target.port, what);
	f->need_metadata = true;
	km_fetcher_drop(f);
}

uint32_t km_fetcher_backoff(struct km_fetcher *f)
{
	uint32_t b = f->backoff_ms;

	f->backoff_ms = b * 2 > f->cfg.backoff_max_ms ? f->cfg.backoff_max_ms
						      : b * 2;
	return b;
}

/* An IPv4 literal, or "localhost" (which every resolver maps there). */
static bool literal_ipv4(const char *host, char ipv4[KM_FETCHER_IPV4_BYTES])
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

int km_fetcher_resolve(const struct km_fetcher *f, const char *host,
		       char ipv4[KM_FETCHER_IPV4_BYTES])
{
	if (literal_ipv4(host, ipv4))
		return 0;
	if (f->cfg.resolve == NULL)
		return -EINVAL;
	return f->cfg.resolve(f->cfg.resolve_ctx, host, ipv4);
}

/* ---- init ---- */

static bool config_ok(const struct km_fetcher_config *cfg)
{
	char ip[KM_FETCHER_IPV4_BYTES];

	if (cfg->n_bootstrap == 0 || cfg->n_bootstrap > KM_FETCHER_BOOTSTRAP_MAX)
		return false;
	if (!cfg->topic[0] || cfg->partition < 0 || cfg->scratch == NULL)
		return false;
	if (cfg->rx_buf_bytes == 0 || cfg->rx_bufs_max == 0)
		return false;
	for (uint32_t i = 0; i < cfg->n_bootstrap; i++) {
		const struct km_fetcher_addr *a = &cfg->bootstrap[i];

		if (!a->host[0] || a->port == 0)
			return false;
		/* Without a resolver only literals can ever be reached. */
		if (cfg->resolve == NULL && !literal_ipv4(a->host, ip))
			return false;
	}
	return true;
}

/* Receive budget and the clamped MaxBytes: one response queued behind a
 * held one must still fit (fetcher.h). */
static void set_budget(struct km_fetcher *f)
{
	uint64_t half;

	f->budget_bufs = f->cfg.rx_bufs_max < KM_KFRAME_SEGS_MAX
				 ? f->cfg.rx_bufs_max
				 : KM_KFRAME_SEGS_MAX;
	f->budget_bytes = (uint64_t)f->budget_bufs * f->cfg.rx_buf_bytes;
	half = f->budget_bytes / 2 - KM_FETCHER_RESP_OVERHEAD;
	f->max_bytes = (uint64_t)f->cfg.max_bytes < half ? f->cfg.max_bytes
							 : (int32_t)half;
	f->stats.max_bytes = f->max_bytes;
}

/* Fresh framing for a connection (correlation ids restart); a frame larger
 * than the whole budget could never complete. */
static void frame_init(struct km_fetcher *f)
{
	uint64_t frame_max = f->budget_bytes < INT32_MAX - KM_WIRE_SIZE_BYTES
				     ? f->budget_bytes
				     : INT32_MAX - KM_WIRE_SIZE_BYTES;

	km_kframe_init(&f->kf, f->net, (uint32_t)frame_max);
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

int km_fetcher_init(struct km_fetcher *f, const struct km_fetcher_config *cfg,
		    struct km_net *net, struct km_log *log)
{
	uint32_t bufs;

	if (!net || !log || !config_ok(cfg))
		return -EINVAL;
	bufs = cfg->rx_bufs_max < KM_KFRAME_SEGS_MAX ? cfg->rx_bufs_max
						     : KM_KFRAME_SEGS_MAX;
	if ((uint64_t)bufs * cfg->rx_buf_bytes < KM_FETCHER_BUDGET_MIN)
		return -EINVAL;
	memset(f, 0, sizeof(*f));
	f->cfg = *cfg;
	config_defaults(&f->cfg);
	f->net = net;
	f->log = log;
	f->phase = KM_FPH_IDLE;
	f->state = KM_FETCHER_CONNECTING;
	f->need_metadata = true;
	f->v_api_ask = 3; /* the highest kafka/proto.h speaks */
	f->next_offset = -1;
	f->corrupt_offset = -1;
	f->wait_offset = -1;
	f->backoff_ms = f->cfg.backoff_ms;
	f->stats.high_watermark = -1;
	f->stats.log_start_offset = -1;
	f->stats.leader_id = -1;
	f->stats.v_apiversions = f->stats.v_metadata = -1;
	f->stats.v_listoffsets = f->stats.v_fetch = -1;
	set_budget(f);
	frame_init(f);
	return 0;
}

/* ---- connections ---- */

/* The leader if it is known and trusted, else the next broker of the
 * rotation: Metadata's brokers, then the bootstrap list. */
static void choose_target(struct km_fetcher *f)
{
	uint32_t n = f->n_brokers + f->cfg.n_bootstrap;
	uint32_t i;

	if (!f->need_metadata && f->stats.leader_id >= 0) {
		f->target = f->stats.leader;
		return;
	}
	i = f->rr++ % n;
	f->target = i < f->n_brokers ? f->brokers[i].addr
				     : f->cfg.bootstrap[i - f->n_brokers];
}

static void schedule_connect(struct km_fetcher *f)
{
	uint64_t now = km_fetcher_now_ms();

	f->phase = KM_FPH_IDLE;
	if (f->failed || f->stopped)
		return;
	f->state = KM_FETCHER_CONNECTING;
	f->retry_at_ms = f->quick_reconnect ? now : now + km_fetcher_backoff(f);
	f->quick_reconnect = false;
}

/* The connection and every response byte are gone (no frame held). */
static void conn_gone(struct km_fetcher *f)
{
	KM_ASSERT(f->frame == NULL);
	km_kframe_reset(&f->kf);
	f->dropping = false;
	f->send_busy = false;
	f->inflight = KM_FREQ_NONE;
	f->next = KM_FREQ_NONE;
	schedule_connect(f);
}

static void connect_failed(struct km_fetcher *f)
{
	f->conn = NULL;
	f->stats.errors[KM_FETCHER_ERR_CONNECT]++;
	f->need_metadata = true; /* the leader may have moved */
	conn_gone(f);
}

static bool target_is_leader(const struct km_fetcher *f)
{
	return f->stats.leader_id >= 0 && f->target.port == f->stats.leader.port &&
	       strcmp(f->target.host, f->stats.leader.host) == 0;
}

static void open_conn(struct km_fetcher *f)
{
	int rc;

	choose_target(f);
	if (f->opened_once)
		f->stats.reconnects++;
	f->opened_once = true;
	f->phase = KM_FPH_CONNECT;
	/* Straight to the leader Metadata named: no Metadata again there. */
	f->target_leader = !f->need_metadata && target_is_leader(f);
	rc = km_fetcher_resolve(f, f->target.host, f->target_ip);
	if (rc < 0 && rc != -EAGAIN && target_is_leader(f)) {
		km_fetcher_fail(f, "leader %d at %s:%u: %s (not an IPv4 "
				"address, and no resolver maps it)",
				(int)f->stats.leader_id, f->target.host,
				(unsigned)f->target.port, km_strerror(rc));
		return;
	}
	if (rc == 0) {
		frame_init(f);
		rc = km_net_connect(f->net, f->target_ip, f->target.port,
				    &fetcher_handler, f, &f->conn);
	}
	if (rc < 0)
		connect_failed(f);
}

static void on_connect(struct km_net_conn *c, int res)
{
	struct km_fetcher *f = km_net_conn_ctx(c);

	if (res < 0) {
		connect_failed(f);
		return;
	}
	f->phase = KM_FPH_READY;
	if (f->failed || f->stopped) {
		f->dropping = true;
		km_net_abort(c);
		return;
	}
	km_fetcher_want(f, KM_FREQ_APIVERSIONS, 0);
}

static void on_close(struct km_net_conn *c, int reason)
{
	struct km_fetcher *f = km_net_conn_ctx(c);

	f->conn = NULL;
	f->phase = KM_FPH_IDLE;
	if (!f->dropping && !f->failed && !f->stopped) {
		KM_WARN("fetcher", "%s-%d: connection to %s:%u lost: %s; "
			"reconnecting", f->cfg.topic, (int)f->cfg.partition,
			f->target.host, (unsigned)f->target.port,
			reason ? km_strerror(reason) : "closed by the source");
		f->stats.errors[KM_FETCHER_ERR_DISCONNECT]++;
		f->need_metadata = true;
	}
	if (!f->failed)
		f->state = KM_FETCHER_CONNECTING;
	f->send_busy = false;
	f->inflight = KM_FREQ_NONE;
	f->next = KM_FREQ_NONE;
	/* Writes may still read the held frame: km_fetcher_drain() releases
	 * it once they are done, then step_frame() calls conn_gone. A
	 * handler that was running finishes first (handle_frame). */
	if (f->frame == NULL && !f->in_handler)
		conn_gone(f);
}

/* ---- sending ---- */

bool km_fetcher_can_send(const struct km_fetcher *f)
{
	return f->conn != NULL && f->phase == KM_FPH_READY && !f->dropping &&
	       !f->failed && !f->stopped && f->inflight == KM_FREQ_NONE &&
	       !f->send_busy;
}

void km_fetcher_req_begin(struct km_fetcher *f, struct km_wire_wr *w,
			  int16_t api, int16_t version)
{
	km_kframe_req_begin(&f->kf, w, f->req, sizeof(f->req), api, version,
			    KM_FETCHER_CLIENT_ID, &f->corr);
	f->inflight_ver = version;
}

static void on_sent(struct km_net_conn *c, void *arg, int res)
{
	struct km_fetcher *f = arg;

	(void)c;
	(void)res; /* a failed send ends the connection: on_close says why */
	f->send_busy = false;
}

static int encode(struct km_fetcher *f, struct km_wire_wr *w,
		  enum km_freq r)
{
	switch (r) {
	case KM_FREQ_APIVERSIONS:
		return km_fetcher_enc_apiversions(f, w);
	case KM_FREQ_METADATA:
		return km_fetcher_enc_metadata(f, w);
	case KM_FREQ_EARLIEST:
		return km_fetcher_enc_listoffsets(f, w, -2);
	case KM_FREQ_LATEST:
		return km_fetcher_enc_listoffsets(f, w, -1);
	case KM_FREQ_FETCH:
		return km_fetcher_enc_fetch(f, w);
	case KM_FREQ_NONE:
	default:
		KM_ASSERT(!"no request to encode");
		return -EINVAL;
	}
}

static void try_send(struct km_fetcher *f)
{
	enum km_freq r = f->next;
	struct km_wire_wr w;
	int rc;

	if (r == KM_FREQ_NONE || !km_fetcher_can_send(f) ||
	    km_fetcher_now_ms() < f->next_at_ms)
		return;
	rc = encode(f, &w, r);
	if (rc == 0)
		rc = km_kframe_req_send(&f->kf, f->conn, &w, on_sent, f);
	if (rc == -EAGAIN || rc == -EPIPE)
		return; /* queue full: step() retries; ending: on_close */
	if (rc < 0) {
		km_fetcher_fail(f, "cannot encode a request: %s",
				km_strerror(rc));
		return;
	}
	f->send_busy = true;
	f->inflight = r;
	f->next = KM_FREQ_NONE;
	f->sent_at_ms = km_fetcher_now_ms();
	if (r == KM_FREQ_FETCH && km_fetcher_appends_pending(f))
		f->stats.fetch_pipelined++;
}

void km_fetcher_want(struct km_fetcher *f, enum km_freq r,
		     uint32_t delay_ms)
{
	if (f->failed || f->stopped)
		return;
	f->next = r;
	f->next_at_ms = km_fetcher_now_ms() + delay_ms;
	if (delay_ms == 0)
		try_send(f);
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

void km_fetcher_kafka_error(struct km_fetcher *f, const char *api,
			    enum km_freq req, int16_t err)
{
	enum km_fetcher_err kind;
	enum km_fetcher_action act = classify(err, &kind);

	if (act == KM_FACT_FAIL) {
		km_fetcher_fail(f, "%s for %s-%d: %s (Kafka error %d)", api,
				f->cfg.topic, (int)f->cfg.partition,
				km_kerr_name(err), (int)err);
		return;
	}
	f->stats.errors[kind]++;
	if (act == KM_FACT_OUT_OF_RANGE) {
		f->oor = true;
		km_fetcher_want(f, KM_FREQ_EARLIEST, 0);
		return;
	}
	if (act == KM_FACT_REFRESH) {
		f->need_metadata = true;
		f->state = KM_FETCHER_CONNECTING; /* finding the leader */
	}
	/* This broker keeps answering with errors: ask another one. */
	if (++f->err_streak >= KM_FETCHER_ROTATE_AFTER) {
		f->err_streak = 0;
		f->need_metadata = true;
		km_fetcher_drop(f);
		return;
	}
	km_fetcher_want(f, act == KM_FACT_REFRESH ? KM_FREQ_METADATA : req,
			km_fetcher_backoff(f));
}

void km_fetcher_start_fetching(struct km_fetcher *f)
{
	int64_t end = km_log_end_offset(f->log);

	f->state = KM_FETCHER_MIRRORING;
	if (!f->oor && end > km_log_start_offset(f->log)) {
		f->next_offset = end; /* R6: resume at the log end */
		km_fetcher_want(f, KM_FREQ_FETCH, 0);
		return;
	}
	/* An empty log starts where the source does; an interrupted
	 * OFFSET_OUT_OF_RANGE check starts over. */
	km_fetcher_want(f, KM_FREQ_EARLIEST, 0);
}

/* ---- receiving ---- */

static int16_t api_key(enum km_freq r)
{
	switch (r) {
	case KM_FREQ_APIVERSIONS:
		return KM_API_API_VERSIONS;
	case KM_FREQ_METADATA:
		return KM_API_METADATA;
	case KM_FREQ_EARLIEST:
	case KM_FREQ_LATEST:
		return KM_API_LIST_OFFSETS;
	case KM_FREQ_FETCH:
	case KM_FREQ_NONE:
	default:
		return KM_API_FETCH;
	}
}

/* One response frame; it stays held only if a Fetch response's batches are
 * being appended from it. */
static void handle_frame(struct km_fetcher *f, const struct km_kframe_frame *fr)
{
	enum km_freq req = f->inflight;
	struct km_wire_rd r;
	int32_t corr = 0;
	bool held = false;
	int rc;

	km_wire_rd_init(&r, &fr->chain, fr->body, fr->body_len,
			&km_wire_limits_default);
	if (req == KM_FREQ_NONE)
		km_fetcher_fail(f, "a response with no request in flight");
	else if ((rc = km_resphdr_decode(&r, api_key(req), f->inflight_ver,
					 &corr)) < 0)
		km_fetcher_protocol_error(f, "response header: %s",
					  km_strerror(rc));
	else if (corr != f->corr)
		km_fetcher_protocol_error(f, "response correlation id %d, "
					  "expected %d", (int)corr, (int)f->corr);
	if (f->failed || f->dropping) {
		km_kframe_release(&f->kf);
		return;
	}
	f->inflight = KM_FREQ_NONE;
	f->in_handler = true;
	if (req == KM_FREQ_APIVERSIONS)
		km_fetcher_on_apiversions(f, fr, &r);
	else if (req == KM_FREQ_METADATA)
		km_fetcher_on_metadata(f, &r);
	else if (req == KM_FREQ_FETCH)
		held = km_fetcher_on_fetch(f, fr, &r);
	else
		km_fetcher_on_listoffsets(f, &r, req);
	f->in_handler = false;
	if (!held)
		km_kframe_release(&f->kf);
	/* The connection ended while the handler ran (on_close deferred). */
	if (f->conn == NULL && f->frame == NULL)
		conn_gone(f);
}

/* A response outgrew the receive buffers the session may hold (buffers
 * only partly filled): halve MaxBytes and refetch on a new connection. */
static void stall(struct km_fetcher *f)
{
	uint32_t size = 0;

	f->stats.errors[KM_FETCHER_ERR_STALL]++;
	if (f->max_bytes <= KM_FETCHER_MAX_BYTES_MIN) {
		km_kframe_peek_size(&f->kf, &size);
		km_fetcher_fail(f, "a %u-byte response does not fit the %u "
				"receive buffers of %u bytes this session may "
				"hold, even with Fetch MaxBytes %d", size,
				f->budget_bufs, f->cfg.rx_buf_bytes,
				(int)f->max_bytes);
		return;
	}
	f->max_bytes /= 2;
	if (f->max_bytes < KM_FETCHER_MAX_BYTES_MIN)
		f->max_bytes = KM_FETCHER_MAX_BYTES_MIN;
	f->stats.max_bytes = f->max_bytes;
	km_fetcher_drop(f);
}

static void frame_error(struct km_fetcher *f, int rc)
{
	uint32_t size = 0;

	if (rc != KM_EWIREFRAMEMAX) {
		km_fetcher_protocol_error(f, "response framing: %s",
					  km_strerror(rc));
		return;
	}
	/* Either a record batch larger than every buffer this session may
	 * hold, or a bogus size: the same answer KM_FETCHER_PROTO_MAX times
	 * fails the session with both explanations. */
	km_kframe_peek_size(&f->kf, &size);
	km_fetcher_protocol_error(f, "a %u-byte response exceeds the %llu bytes "
				  "of receive buffers this session may hold (a "
				  "bogus size, or a record batch too large for "
				  "these buffers)", size,
				  (unsigned long long)f->budget_bytes);
}

static void pump(struct km_fetcher *f)
{
	for (uint32_t i = 0; i < KM_FETCHER_FRAMES_PER_PUMP; i++) {
		const struct km_kframe_frame *fr;
		int rc;

		if (f->frame || f->in_handler || f->failed || f->stopped ||
		    f->dropping || f->conn == NULL)
			return;
		rc = km_kframe_next(&f->kf, &fr);
		if (rc == 0) {
			if (km_kframe_buffers(&f->kf) >= f->budget_bufs)
				stall(f);
			return;
		}
		if (rc < 0) {
			frame_error(f, rc);
			return;
		}
		handle_frame(f, fr);
	}
}

static void on_recv(struct km_net_conn *c, const struct km_chain *data,
		    const uint32_t *buf_ids)
{
	struct km_fetcher *f = km_net_conn_ctx(c);

	if (km_kframe_push(&f->kf, data, buf_ids) < 0) {
		stall(f); /* more segments than kframe holds */
		return;
	}
	pump(f);
}

/* ---- driving ---- */

static void check_timeout(struct km_fetcher *f)
{
	uint64_t limit = f->cfg.request_timeout_ms;

	if (f->inflight == KM_FREQ_NONE || f->frame || f->dropping ||
	    f->conn == NULL)
		return;
	if (f->inflight == KM_FREQ_FETCH)
		limit += (uint64_t)f->cfg.max_wait_ms;
	if (km_fetcher_now_ms() - f->sent_at_ms <= limit)
		return;
	f->stats.errors[KM_FETCHER_ERR_TIMEOUT]++;
	KM_WARN("fetcher", "%s-%d: source %s:%u did not answer within %llu ms; "
		"reconnecting", f->cfg.topic, (int)f->cfg.partition,
		f->target.host, (unsigned)f->target.port,
		(unsigned long long)limit);
	f->need_metadata = true;
	km_fetcher_drop(f);
}

/* The held frame: append more, and once released, the connection may be
 * gone (reconnect) and the next frames may be handled. */
static int step_frame(struct km_fetcher *f)
{
	uint32_t done = f->n_done;
	bool released = km_fetcher_drain(f);

	if (!released)
		return f->n_done != done;
	if (f->conn == NULL)
		conn_gone(f);
	return 1;
}

int km_fetcher_step(struct km_fetcher *f)
{
	int moved = 0;

	if (f->frame)
		moved = step_frame(f);
	if (f->failed || f->stopped) {
		if (f->conn == NULL && f->frame == NULL &&
		    km_kframe_buffers(&f->kf) > 0)
			km_kframe_reset(&f->kf);
		return -1;
	}
	if (f->conn == NULL && f->frame == NULL && f->phase == KM_FPH_IDLE) {
		if (km_fetcher_now_ms() < f->retry_at_ms)
			return moved;
		open_conn(f);
		return 1;
	}
	check_timeout(f);
	if (f->next != KM_FREQ_NONE && km_fetcher_can_send(f) &&
	    km_fetcher_now_ms() >= f->next_at_ms) {
		try_send(f);
		moved = 1;
	}
	pump(f);
	return moved;
}

void km_fetcher_cut(struct km_fetcher *f)
{
	if (f->conn == NULL || f->dropping)
		return;
	f->stats.errors[KM_FETCHER_ERR_DISCONNECT]++;
	f->need_metadata = true;
	km_fetcher_drop(f);
}

void km_fetcher_stop(struct km_fetcher *f)
{
	if (!f->failed && !f->stopped)
		snprintf(f->reason, sizeof(f->reason), "stopped");
	f->stopped = true;
	f->next = KM_FREQ_NONE;
	if (f->conn && !f->dropping) {
		f->dropping = true;
		km_net_abort(f->conn);
	}
}

const char *km_fetcher_reason(const struct km_fetcher *f)
{
	return f->reason;
}

bool km_fetcher_idle(const struct km_fetcher *f)
{
	return f->conn == NULL && f->frame == NULL &&
	       km_kframe_buffers(&f->kf) == 0;
}
