/* A fetch session's connection: connecting, sending the next request,
 * framing and dispatching answers, and what a lost connection, a timeout,
 * a protocol violation or a stall do. See fsess.h. */
#include "dataplane/fetch/fetcher_pvt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "dataplane/net/snet.h"

static void on_connect(struct km_net_conn *c, int res);
static void on_recv(struct km_net_conn *c, const struct km_chain *data,
		    const uint32_t *buf_ids);
static void on_close(struct km_net_conn *c, int reason);

static const struct km_net_handler fsess_handler = {
	.on_connect = on_connect,
	.on_accept = NULL,
	.on_recv = on_recv,
	.on_close = on_close,
};

/* ---- partitions of the session ---- */

void km_fsess_count(struct km_fsess *s, enum km_fetcher_err kind)
{
	for (struct km_fetcher *f = s->members; f != NULL; f = f->next) {
		f->stats.errors[kind]++;
		km_fetcher_touch(f, false);
	}
	s->look = true;
}

void km_fsess_fail_all(struct km_fsess *s, const char *fmt, ...)
{
	char why[KM_FETCHER_REASON_BYTES];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	for (struct km_fetcher *f = s->members; f != NULL; f = f->next)
		km_fetcher_fail(f, "%s", why);
	km_fsess_drop(s, false);
}

void km_fsess_unask(struct km_fetcher *f)
{
	if (f->ask_slot >= 0 && f->sess != NULL) {
		f->sess->asked[f->ask_slot] = NULL;
		f->sess->fetch_due = true;
		/* Asked for Metadata or offsets and not given them. */
		if (f->phase == KM_FP_META || f->phase == KM_FP_OFFSETS)
			f->sess->pre_due = true;
	}
	f->ask_slot = -1;
}

static void unask_all(struct km_fsess *s)
{
	for (uint32_t i = 0; i < s->n_asked; i++)
		if (s->asked[i] != NULL)
			s->asked[i]->ask_slot = -1;
	s->n_asked = 0;
	s->pre_due = s->fetch_due = true;
	for (struct km_fetcher *f = s->members; f != NULL; f = f->next)
		f->in_meta = false;
}

/* ---- connecting ---- */

bool km_fsess_can_send(const struct km_fsess *s)
{
	return s->conn != NULL && s->phase == KM_FPH_READY && !s->dropping &&
	       !s->closed && s->inflight == KM_FREQ_NONE && !s->send_busy;
}

bool km_fsess_ready(const struct km_fsess *s)
{
	return s->conn != NULL && s->phase == KM_FPH_READY && !s->dropping &&
	       !s->closed && s->versions_known;
}

/* Pinned: its broker. Discovery: the next of Metadata's brokers, then
 * the bootstrap list, in rotation. */
static void choose_target(struct km_fsess *s)
{
	uint32_t n = s->n_brokers + s->n_bootstrap;
	uint32_t i;

	if (s->pinned) {
		s->target = s->pin;
		return;
	}
	i = s->rr++ % n;
	s->target = i < s->n_brokers ? s->brokers[i].addr
				     : s->bootstrap[i - s->n_brokers];
}

/* Fresh framing for a connection (correlation ids restart); a frame larger
 * than the whole budget could never complete. */
static void frame_init(struct km_fsess *s)
{
	uint64_t frame_max = s->budget_bytes < INT32_MAX - KM_WIRE_SIZE_BYTES
				     ? s->budget_bytes
				     : INT32_MAX - KM_WIRE_SIZE_BYTES;

	km_kframe_init(&s->kf, s->pool->net, (uint32_t)frame_max);
}

static void count_reconnects(struct km_fsess *s)
{
	for (struct km_fetcher *f = s->members; f != NULL; f = f->next) {
		if (f->opened_once)
			f->stats.reconnects++;
		f->opened_once = true;
	}
}

void km_fsess_open(struct km_fsess *s)
{
	int rc = 0;

	choose_target(s);
	count_reconnects(s);
	s->stats.connects++;
	s->phase = KM_FPH_CONNECT;
	if (s->pinned)
		memcpy(s->target_ip, s->pin_ip, sizeof(s->target_ip));
	else
		rc = km_fetcher_resolve(s->pool, s->target.host, s->target_ip);
	if (rc == 0) {
		frame_init(s);
		rc = km_net_connect(s->pool->net, s->target_ip, s->target.port,
				    &fsess_handler, s, &s->conn);
		/* TLS checks the certificate against the name, not the IP. */
		if (rc == 0)
			km_snet_conn_set_host(s->conn, s->target.host);
	}
	if (rc < 0) {
		s->conn = NULL;
		s->connect_failed = true;
		s->closed = true;
	}
}

/* A refused certificate or password: the partitions FAIL, naming the
 * broker and the cause, as transient failures, so that the daemon retries
 * them with its backoff (an operator may fix the broker's users or
 * certificates meanwhile) and never persists them FAILED (issue 16). */
static void fail_security(struct km_fsess *s, int res, const char *why)
{
	for (struct km_fetcher *f = s->members; f != NULL; f = f->next) {
		km_fetcher_fail(f, "%s: %s", km_strerror(res), why);
		f->transient = true;
	}
	km_fsess_drop(s, false);
}

static void on_connect(struct km_net_conn *c, int res)
{
	struct km_fsess *s = km_net_conn_ctx(c);

	if (res < 0) {
		/* The handle is dead; no on_close follows. */
		s->conn = NULL;
		s->closed = true;
		s->connect_failed = !s->dropping;
		if (!s->dropping && (res == KM_ETLS || res == KM_EAUTH ||
				     res == KM_ESASLMECH))
			fail_security(s, res, km_snet_conn_why(c));
		return;
	}
	s->phase = KM_FPH_READY;
}

static void on_recv(struct km_net_conn *c, const struct km_chain *data,
		    const uint32_t *buf_ids)
{
	struct km_fsess *s = km_net_conn_ctx(c);

	/* Frames are handled from km_fsess_pool_step, never from here. */
	if (km_kframe_push(&s->kf, data, buf_ids) < 0)
		s->overflow = true; /* more segments than kframe holds */
}

static void on_close(struct km_net_conn *c, int reason)
{
	struct km_fsess *s = km_net_conn_ctx(c);

	s->conn = NULL;
	s->closed = true;
	if (s->dropping)
		return;
	s->lost = true;
	KM_WARN("fsess", "connection to %s:%u lost (%u partitions): %s; "
		"reconnecting", s->target.host, (unsigned)s->target.port,
		s->n_members, reason ? km_strerror(reason)
				     : "closed by the source");
}

void km_fsess_drop(struct km_fsess *s, bool refresh)
{
	s->refresh |= refresh;
	if (s->conn == NULL || s->dropping)
		return;
	s->dropping = true;
	km_net_abort(s->conn);
}

/* Once the connection is gone every partition asks Metadata on the next
 * one before it fetches: the cause may be a leader change, and the cluster
 * behind the address may have been replaced, which only Metadata names
 * (issue 21). */
static void reset_members(struct km_fsess *s)
{
	for (struct km_fetcher *f = s->members; f != NULL; f = f->next)
		km_fetcher_need_leader(f, 0);
}

static uint32_t sess_backoff(struct km_fsess *s)
{
	uint32_t b = s->backoff_ms;

	s->backoff_ms = b * 2 > s->backoff_max_ms ? s->backoff_max_ms : b * 2;
	return b;
}

void km_fsess_conn_gone(struct km_fsess *s)
{
	bool refresh = s->refresh || s->lost || s->connect_failed;

	KM_ASSERT(s->frame == NULL);
	KM_ASSERT(s->conn == NULL);
	km_kframe_reset(&s->kf);
	if (s->lost) {
		s->stats.disconnects++;
		km_fsess_count(s, KM_FETCHER_ERR_DISCONNECT);
	}
	if (s->connect_failed) {
		s->stats.connect_errors++;
		km_fsess_count(s, KM_FETCHER_ERR_CONNECT);
	}
	/* Never of use: the broker may be gone; discovery asks another. */
	if (s->pinned && !s->healthy && refresh)
		s->handover = true;
	unask_all(s);
	reset_members(s);
	/* The answer to the last Fetch may be lost with the connection: the
	 * next one closes the session and opens another. */
	km_fsess_inc_reset(s, true);
	s->phase = KM_FPH_IDLE;
	s->dropping = s->closed = s->lost = s->connect_failed = false;
	s->refresh = s->healthy = s->versions_known = s->overflow = false;
	s->send_busy = false;
	s->inflight = KM_FREQ_NONE;
	s->retry_at_ms = km_fetcher_now_ms() + sess_backoff(s);
}

/* ---- errors of the connection ---- */

/* A source that breaks the protocol (garbage, a bad size, a wrong
 * correlation id, a malformed answer) may be a transient fault on the way:
 * log it, drop the connection and reconnect with backoff; the same fault
 * KM_FETCHER_PROTO_MAX times in a row without a good Fetch answer between
 * fails the session's partitions, as repeated corruption does. */
void km_fsess_protocol_error(struct km_fsess *s, const char *fmt, ...)
{
	char what[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	km_fsess_count(s, KM_FETCHER_ERR_PROTOCOL);
	if (++s->proto_streak >= KM_FETCHER_PROTO_MAX) {
		km_fsess_fail_all(s, "source %s:%u broke the protocol %u times "
				  "in a row, last: %s", s->target.host,
				  (unsigned)s->target.port, s->proto_streak,
				  what);
		return;
	}
	KM_WARN("fsess", "source %s:%u (%u partitions): %s; reconnecting",
		s->target.host, (unsigned)s->target.port, s->n_members, what);
	km_fsess_drop(s, true);
}

/* A response outgrew the receive buffers the session may hold (buffers
 * only partly filled): halve MaxBytes and refetch on a new connection. */
static void stall(struct km_fsess *s)
{
	uint32_t size = 0;

	km_fsess_count(s, KM_FETCHER_ERR_STALL);
	if (s->max_bytes <= KM_FETCHER_MAX_BYTES_MIN) {
		km_kframe_peek_size(&s->kf, &size);
		km_fsess_fail_all(s, "a %u-byte response does not fit the %u "
				  "receive buffers of %u bytes this session "
				  "may hold, even with Fetch MaxBytes %d", size,
				  s->budget_bufs, s->pool->cfg.rx_buf_bytes,
				  (int)s->max_bytes);
		return;
	}
	s->max_bytes /= 2;
	if (s->max_bytes < KM_FETCHER_MAX_BYTES_MIN)
		s->max_bytes = KM_FETCHER_MAX_BYTES_MIN;
	km_fsess_drop(s, false);
}

static void frame_error(struct km_fsess *s, int rc)
{
	uint32_t size = 0;

	if (rc != KM_EWIREFRAMEMAX) {
		km_fsess_protocol_error(s, "response framing: %s",
					km_strerror(rc));
		return;
	}
	/* Either a record batch larger than every buffer this session may
	 * hold, or a bogus size: the same answer KM_FETCHER_PROTO_MAX times
	 * fails the partitions with both explanations. */
	km_kframe_peek_size(&s->kf, &size);
	km_fsess_protocol_error(s, "a %u-byte response exceeds the %llu bytes "
				"of receive buffers this session may hold (a "
				"bogus size, or a record batch too large for "
				"these buffers)", size,
				(unsigned long long)s->budget_bytes);
}

static void check_timeout(struct km_fsess *s)
{
	uint64_t limit = s->request_timeout_ms;

	if (s->inflight == KM_FREQ_NONE || s->frame || s->dropping ||
	    s->conn == NULL)
		return;
	if (s->inflight == KM_FREQ_FETCH)
		limit += (uint64_t)s->max_wait_ms;
	if (km_fetcher_now_ms() - s->sent_at_ms <= limit)
		return;
	km_fsess_count(s, KM_FETCHER_ERR_TIMEOUT);
	KM_WARN("fsess", "source %s:%u did not answer within %llu ms; "
		"reconnecting", s->target.host, (unsigned)s->target.port,
		(unsigned long long)limit);
	km_fsess_drop(s, true);
}

/* ---- sending ---- */

static void on_sent(struct km_net_conn *c, void *arg, int res)
{
	struct km_fsess *s = arg;

	(void)c;
	(void)res; /* a failed send ends the connection: on_close says why */
	s->send_busy = false;
}

static void count_request(struct km_fsess *s, enum km_freq r)
{
	s->stats.requests++;
	if (r == KM_FREQ_FETCH) {
		s->stats.fetch_requests++;
		s->stats.fetch_partitions += s->fs_written;
		if (s->frame != NULL)
			s->stats.fetch_pipelined++;
	} else if (r == KM_FREQ_METADATA) {
		s->stats.metadata_requests++;
	} else if (r == KM_FREQ_EARLIEST || r == KM_FREQ_LATEST) {
		s->stats.listoffsets_requests++;
	}
}

void km_fsess_send(struct km_fsess *s)
{
	uint64_t now = km_fetcher_now_ms();
	struct km_wire_wr w;
	enum km_freq r;
	int rc;

	if (!km_fsess_can_send(s) || (r = km_fsess_choose(s, now)) ==
					     KM_FREQ_NONE)
		return;
	rc = km_fsess_encode(s, &w, r);
	if (rc == 0)
		rc = km_kframe_req_send(&s->kf, s->conn, &w, on_sent, s);
	if (rc < 0 && r == KM_FREQ_FETCH)
		km_fsess_inc_unsent(s);
	if (rc < 0)
		unask_all(s);
	if (rc == -EAGAIN || rc == -EPIPE)
		return; /* queue full: the next step retries; ending: on_close */
	if (rc < 0) {
		km_fsess_fail_all(s, "cannot encode a request: %s",
				  km_strerror(rc));
		return;
	}
	s->send_busy = true;
	s->inflight = r;
	s->sent_at_ms = now;
	s->sent_us = km_throttle_now_us();
	count_request(s, r);
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

/* @return true if the frame is held (partitions appending from it). */
static bool dispatch(struct km_fsess *s, enum km_freq req,
		     const struct km_kframe_frame *fr, struct km_wire_rd *r)
{
	switch (req) {
	case KM_FREQ_APIVERSIONS:
		km_fsess_on_apiversions(s, fr, r);
		return false;
	case KM_FREQ_METADATA:
		km_fsess_on_metadata(s, r);
		return false;
	case KM_FREQ_EARLIEST:
	case KM_FREQ_LATEST:
		km_fsess_on_listoffsets(s, r);
		return false;
	case KM_FREQ_FETCH:
		return km_fsess_on_fetch(s, fr, r);
	case KM_FREQ_NONE:
	default:
		return false;
	}
}

/* One response frame; it stays held only if partitions append from it. */
static void handle_frame(struct km_fsess *s, const struct km_kframe_frame *fr)
{
	enum km_freq req = s->inflight;
	struct km_wire_rd r;
	int32_t corr = 0;
	int rc;

	km_wire_rd_init(&r, &fr->chain, fr->body, fr->body_len,
			&km_wire_limits_default);
	/* The cap is on the network: the whole answer, length prefix
	 * included, whatever of it is mirrored (throttle.h). */
	km_throttle_charge(s->throttle, 4u + (uint64_t)fr->body_len, s->sent_us,
			   km_throttle_now_us());
	if (req == KM_FREQ_NONE)
		km_fsess_protocol_error(s, "a response with no request in "
					"flight");
	else if ((rc = km_resphdr_decode(&r, api_key(req), s->inflight_ver,
					 &corr)) < 0)
		km_fsess_protocol_error(s, "response header: %s",
					km_strerror(rc));
	else if (corr != s->corr)
		km_fsess_protocol_error(s, "response correlation id %d, "
					"expected %d", (int)corr, (int)s->corr);
	if (s->dropping) {
		km_kframe_release(&s->kf);
		return;
	}
	s->inflight = KM_FREQ_NONE;
	s->stats.responses++;
	if (!dispatch(s, req, fr, &r))
		km_kframe_release(&s->kf);
	km_fsess_send(s);
}

static int pump(struct km_fsess *s)
{
	int moved = 0;

	for (uint32_t i = 0; i < KM_FETCHER_FRAMES_PER_PUMP; i++) {
		const struct km_kframe_frame *fr;
		int rc;

		if (s->frame || s->dropping || s->conn == NULL || s->closed)
			break;
		rc = km_kframe_next(&s->kf, &fr);
		if (rc == 0) {
			if (km_kframe_buffers(&s->kf) >= s->budget_bufs)
				stall(s);
			break;
		}
		if (rc < 0) {
			frame_error(s, rc);
			break;
		}
		handle_frame(s, fr);
		moved = 1;
	}
	return moved;
}

int km_fsess_conn_step(struct km_fsess *s)
{
	int moved = 0;

	if (s->closed && s->frame == NULL) {
		km_fsess_conn_gone(s);
		moved = 1;
	}
	if (s->conn == NULL) {
		if (s->phase != KM_FPH_IDLE || s->frame != NULL || s->closed ||
		    km_fetcher_now_ms() < s->retry_at_ms)
			return moved;
		km_fsess_open(s);
		return 1;
	}
	if (s->overflow && !s->dropping) {
		stall(s);
		return 1;
	}
	check_timeout(s);
	km_fsess_start_waiting(s);
	km_fsess_send(s);
	return pump(s) | moved;
}
