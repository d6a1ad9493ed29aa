/* The front-end's pipeline: connections, request framing, and the slots
 * that keep responses in request order while their handlers finish out of
 * order. What a request means is frontend_dispatch.c's; a handler whose
 * response holds more than its encoded bytes, or waits on time, hooks its
 * slot (struct fe_slot_ops in frontend_pvt.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "dataplane/net/snet.h"
#include "dataplane/serve/frontend_pvt.h"

/* Frames handled per connection per call (STYLE 13); the rest wait for the
 * next receive, send callback or tick. */
#define FRAMES_PER_TURN 32u

static void on_accept(struct km_net_conn *c);
static void on_recv(struct km_net_conn *c, const struct km_chain *data,
		    const uint32_t *buf_ids);
static void on_close(struct km_net_conn *c, int reason);
static void process_frames(struct fe_conn *fc);
static void slots_release(struct fe_conn *fc);

const struct km_net_handler km_frontend_conn_handler = {
	.on_connect = NULL,
	.on_accept = on_accept,
	.on_recv = on_recv,
	.on_close = on_close,
};

uint64_t km_frontend_now_ms(void)
{
	return km_clock_ms();
}

/* ---- connections ---- */

static struct fe_conn *conn_alloc(struct km_frontend *fe,
				  struct km_net *net)
{
	for (uint32_t i = 0; i < fe->conns_max; i++) {
		struct fe_conn *fc = &fe->conns[i];

		if (fc->used)
			continue;
		fc->used = true;
		fc->closing = false;
		fc->id = ++fe->next_id;
		fc->pending_ops = 0;
		fc->client_id[0] = '\0';
		km_kframe_init(&fc->kf, net, fe->limits.frame_bytes_max);
		fc->held = NULL;
		fc->tail = 0;
		fc->s_head = fc->s_count = 0;
		fc->send_blocked = false;
		fe->conns_used++;
		return fc;
	}
	return NULL;
}

/* A closed connection is reused only once every Produce outcome it awaits
 * has come back: the outcomes write into its slots. */
void km_frontend_conn_maybe_free(struct fe_conn *fc)
{
	if (!fc->used || fc->c != NULL || fc->pending_ops > 0)
		return;
	fc->used = false;
	fc->fe->conns_used--;
}

static int conn_vfail(struct fe_conn *fc, const char *fmt, va_list ap)
{
	char why[256];

	vsnprintf(why, sizeof(why), fmt, ap);
	KM_WARN("frontend", "connection %u (client id \"%s\"): %s; closing it",
		fc->id, fc->client_id, why);
	if (fc->c != NULL && !fc->closing) {
		fc->closing = true;
		km_net_abort(fc->c);
	}
	return -ECONNABORTED;
}

int km_frontend_conn_fail(struct fe_conn *fc, const char *fmt, ...)
{
	va_list ap;
	int rc;

	fc->fe->st.protocol_errors++;
	va_start(ap, fmt);
	rc = conn_vfail(fc, fmt, ap);
	va_end(ap);
	return rc;
}

int km_frontend_conn_drop(struct fe_conn *fc, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = conn_vfail(fc, fmt, ap);
	va_end(ap);
	return rc;
}

/* As Kafka's InetAddress.toString() of the client: "/127.0.0.1". */
static void set_client_host(struct fe_conn *fc, const struct km_net_conn *c)
{
	struct sockaddr_in a;
	char ip[INET_ADDRSTRLEN];

	fc->client_host[0] = '\0';
	if (km_net_conn_peer(c, &a) == 0 &&
	    inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip)) != NULL)
		snprintf(fc->client_host, sizeof(fc->client_host), "/%s", ip);
}

/* Who the client is and what its listener asks of it: a client
 * certificate names it on TLS listeners (Kafka's SSL principal). */
static void set_listener(struct fe_conn *fc, const struct fe_listener *fl,
			 struct km_net_conn *c)
{
	enum km_secproto p = fl->cfg.protocol;

	fc->listener = (uint8_t)(fl - fl->fe->lsns);
	fc->protocol = p;
	fc->sasl_required = p == KM_SEC_SASL_PLAINTEXT || p == KM_SEC_SASL_SSL;
	if (km_snet_conn_principal(c, fc->principal,
				   sizeof(fc->principal)) <= 0)
		snprintf(fc->principal, sizeof(fc->principal), "%s",
			 KM_FRONTEND_PRINCIPAL_ANONYMOUS);
}

static void on_accept(struct km_net_conn *c)
{
	struct fe_listener *fl = km_net_conn_ctx(c);
	struct km_frontend *fe = fl->fe;
	struct fe_conn *fc = conn_alloc(fe, c->net);

	if (fc == NULL) {
		fe->st.refused++;
		KM_WARN("frontend", "%u connections open (the limit): a new "
			"one is reset", fe->conns_max);
		km_net_conn_set_ctx(c, &fe->refused);
		km_net_abort(c);
		return;
	}
	fc->c = c;
	km_net_conn_set_ctx(c, fc);
	set_client_host(fc, c);
	set_listener(fc, fl, c);
	fc->close_after = false;
	km_frontend_sasl_conn_open(fc, fc->sasl_required);
	fe->st.accepts++;
	fe->st.conns++;
	KM_DEBUG("frontend", "connection %u accepted on %s as %s", fc->id,
		 fl->cfg.name, fc->principal);
}

static void on_recv(struct km_net_conn *c, const struct km_chain *data,
		    const uint32_t *buf_ids)
{
	struct fe_conn *fc = km_net_conn_ctx(c);

	if (fc->closing) {
		km_net_release(c->net, buf_ids, data->n_iov);
		return;
	}
	if (km_kframe_push(&fc->kf, data, buf_ids) < 0) {
		km_frontend_conn_fail(fc, "more than %u receive buffers of requests "
			     "queued", (unsigned)KM_KFRAME_SEGS_MAX);
		return;
	}
	process_frames(fc);
}

static void on_close(struct km_net_conn *c, int reason)
{
	struct fe_conn *fc = km_net_conn_ctx(c);

	if (fc == &fc->fe->refused)
		return; /* turned away at accept */
	KM_DEBUG("frontend", "connection %u closed: %s", fc->id,
		 reason ? km_strerror(reason) : "by the client");
	fc->c = NULL;
	fc->fe->st.closes++;
	fc->fe->st.conns--;
	km_kframe_reset(&fc->kf);
	fc->held = NULL;
	km_frontend_rx_closed(fc);
	slots_release(fc);
	km_frontend_groups_conn_closed(fc);
	km_frontend_sasl_conn_closed(fc);
	km_frontend_conn_maybe_free(fc);
}

/* ---- slots and the response ring ---- */

static struct fe_slot *slot_at(struct fe_conn *fc, uint32_t i)
{
	return &fc->slots[(fc->s_head + i) % KM_FRONTEND_PIPELINE];
}

/* As local_write.c's ring: reservations are freed oldest first, so the
 * free space is [tail, end) + [0, oldest), or [tail, oldest) once
 * wrapped. */
static int buf_alloc(struct fe_conn *fc, uint32_t len, uint32_t *off)
{
	uint32_t cap = fc->fe->conn_buf_bytes, oldest;

	if (fc->s_count == 0) {
		*off = 0;
	} else {
		oldest = slot_at(fc, 0)->off;
		if (fc->tail >= oldest && cap - fc->tail >= len)
			*off = fc->tail;
		else if (fc->tail >= oldest && len < oldest)
			*off = 0;
		else if (fc->tail < oldest && oldest - fc->tail > len)
			*off = fc->tail;
		else
			return -ENOBUFS;
	}
	KM_ASSERT_HOT(*off + len <= cap);
	fc->tail = *off + len;
	return 0;
}

int km_frontend_slot_open(struct fe_conn *fc, const struct km_reqhdr *h, uint32_t bound,
		 uint32_t *slot)
{
	uint32_t len = (bound + 7u) & ~7u, off, idx;
	struct fe_slot *s;

	if (len > fc->fe->conn_buf_bytes)
		return km_frontend_conn_fail(fc, "a %s response of %u bytes would not "
				    "fit the %u of a connection",
				    km_proto_api_name(h->api_key), len,
				    fc->fe->conn_buf_bytes);
	if (fc->s_count == KM_FRONTEND_PIPELINE || buf_alloc(fc, len, &off) < 0)
		return FE_WAIT;
	idx = (fc->s_head + fc->s_count++) % KM_FRONTEND_PIPELINE;
	s = &fc->slots[idx];
	memset(s, 0, sizeof(*s));
	s->state = FE_SLOT_PENDING;
	s->api_key = h->api_key;
	s->api_version = h->api_version;
	s->corr = h->correlation_id;
	s->off = off;
	s->cap = len;
	*slot = idx;
	return 0;
}

void km_frontend_slot_begin(struct fe_conn *fc, uint32_t slot, struct km_wire_wr *w)
{
	struct fe_slot *s = &fc->slots[slot];

	km_wire_wr_init(w, fc->buf + s->off, s->data_off ? s->data_off : s->cap);
	km_proto_resp_begin(w, s->api_key, s->api_version, s->corr);
}

int km_frontend_slot_finish(struct fe_conn *fc, uint32_t slot, struct km_wire_wr *w,
		   bool trim)
{
	struct fe_slot *s = &fc->slots[slot];
	int n = km_wire_wr_frame_end(w);

	if (n < 0)
		return km_frontend_conn_fail(fc, "encoding a %s v%d response: %s",
				    km_proto_api_name(s->api_key), s->api_version,
				    km_strerror(n));
	s->len = (uint32_t)w->pos;
	if (trim) {
		/* Only the newest reservation can shrink. */
		KM_ASSERT(slot_at(fc, fc->s_count - 1) == s);
		s->cap = (s->len + 7u) & ~7u;
		fc->tail = s->off + s->cap;
	}
	s->state = FE_SLOT_READY;
	km_frontend_send_ready(fc);
	return 0;
}

static void on_sent(struct km_net_conn *c, void *arg, int res);

/* A connection to end after its last answer (a failed SASL exchange, as
 * Kafka sends its error and then closes): once nothing is left to hand to
 * the network, a graceful close flushes what is queued. */
static void maybe_close_after(struct fe_conn *fc)
{
	if (!fc->close_after || fc->c == NULL || fc->closing)
		return;
	for (uint32_t i = 0; i < fc->s_count; i++)
		if (slot_at(fc, i)->state == FE_SLOT_PENDING ||
		    slot_at(fc, i)->state == FE_SLOT_READY)
			return;
	fc->closing = true;
	km_net_close(fc->c);
}

void km_frontend_conn_close_after(struct fe_conn *fc)
{
	fc->close_after = true;
	maybe_close_after(fc);
}

/* Hand READY responses to the network, oldest first, stopping at the first
 * one still in process: responses leave in request order. */
void km_frontend_send_ready(struct fe_conn *fc)
{
	struct iovec iov[2 * KM_FRONTEND_GAPS_MAX + 1];

	for (uint32_t i = 0; i < fc->s_count; i++) {
		struct fe_slot *s = slot_at(fc, i);
		int n = 1, rc;

		if (fc->c == NULL || fc->closing || s->state == FE_SLOT_PENDING)
			return;
		if (s->state != FE_SLOT_READY)
			continue;
		iov[0].iov_base = fc->buf + s->off;
		iov[0].iov_len = s->len;
		if (s->ops != NULL && s->ops->iovec != NULL)
			n = s->ops->iovec(fc, s, iov, fc->fe->iov_max);
		if (n < 0) {
			km_frontend_conn_fail(fc, "%s response: %s",
				     km_proto_api_name(s->api_key), km_strerror(n));
			return;
		}
		rc = km_net_send(fc->c, iov, (uint32_t)n, on_sent, s);
		fc->send_blocked = rc == -EAGAIN;
		if (rc < 0)
			return; /* -EAGAIN: after a send callback; -EPIPE: ending */
		s->state = FE_SLOT_QUEUED;
	}
	maybe_close_after(fc);
}

static void slot_release(struct fe_conn *fc, struct fe_slot *s)
{
	const struct fe_slot_ops *ops = s->ops;

	s->ops = NULL;
	if (ops != NULL && ops->release != NULL)
		ops->release(fc, s);
}

/* On close: no send callback will pop the slots left, and a reused
 * connection starts with an empty ring. Produce slots still awaiting
 * outcomes keep their bytes (km_frontend_conn_maybe_free). */
static void slots_release(struct fe_conn *fc)
{
	for (uint32_t i = 0; i < fc->s_count; i++)
		slot_release(fc, slot_at(fc, i));
}

static void pop_sent(struct fe_conn *fc)
{
	while (fc->s_count > 0 && slot_at(fc, 0)->state == FE_SLOT_SENT) {
		slot_release(fc, slot_at(fc, 0));
		fc->s_head = (fc->s_head + 1) % KM_FRONTEND_PIPELINE;
		fc->s_count--;
	}
	if (fc->s_count == 0)
		fc->tail = 0;
}

static void on_sent(struct km_net_conn *c, void *arg, int res)
{
	struct fe_conn *fc = km_net_conn_ctx(c);
	struct fe_slot *s = arg;

	KM_ASSERT(s->state == FE_SLOT_QUEUED);
	s->state = FE_SLOT_SENT;
	if (res > 0)
		fc->fe->st.bytes_out += (uint64_t)res;
	pop_sent(fc);
	if (fc->c == NULL || fc->closing)
		return;
	km_frontend_send_ready(fc);
	process_frames(fc);
}

static void take_frames(struct fe_conn *fc)
{
	for (uint32_t n = 0; n < FRAMES_PER_TURN; n++) {
		const struct km_kframe_frame *fr = fc->held;
		int rc;

		if (fc->c == NULL || fc->closing || fc->close_after)
			return;
		if (fr == NULL) {
			if (fc->s_count == KM_FRONTEND_PIPELINE)
				return;
			rc = km_kframe_next(&fc->kf, &fr);
			if (rc == 0)
				return;
			if (rc < 0) {
				km_frontend_conn_fail(fc, "request frame: %s (limit %u "
					     "bytes)", km_strerror(rc),
					     fc->fe->limits.frame_bytes_max);
				return;
			}
		}
		rc = km_frontend_dispatch(fc, fr, fc->held == NULL);
		if (rc == FE_WAIT) {
			fc->held = fr;
			return;
		}
		fc->held = NULL;
		km_kframe_release(&fc->kf);
	}
}

/* Every path that queues or takes request bytes ends here, so the
 * connection's share of the receive pool follows its queue. */
static void process_frames(struct fe_conn *fc)
{
	take_frames(fc);
	km_frontend_rx_update(fc);
}

/* ---- the loop ---- */

/* Hooked slots first: a parked response that completes is then sent with
 * the others, and its slot may make room for a held frame. Callbacks never
 * run inside km_net_* calls (net.h), so the ring holds still while we walk
 * it, unless a hook fails the connection. */
void km_frontend_conn_tick(struct fe_conn *fc, uint64_t now_ms)
{
	for (uint32_t i = 0; i < fc->s_count; i++) {
		struct fe_slot *s = slot_at(fc, i);

		if (fc->c == NULL || fc->closing)
			return;
		if (s->ops != NULL && s->ops->tick != NULL)
			s->ops->tick(fc, s, now_ms);
	}
	if (fc->c == NULL || fc->closing)
		return;
	if (fc->send_blocked)
		km_frontend_send_ready(fc);
	process_frames(fc);
	km_frontend_rx_tick(fc, now_ms);
}

uint64_t km_frontend_conn_deadline(const struct fe_conn *fc)
{
	uint64_t next = km_frontend_rx_deadline(fc);

	for (uint32_t i = 0; i < fc->s_count; i++) {
		const struct fe_slot *s =
			&fc->slots[(fc->s_head + i) % KM_FRONTEND_PIPELINE];
		uint64_t d;

		if (s->ops == NULL || s->ops->deadline == NULL)
			continue;
		d = s->ops->deadline(fc, s);
		if (d < next)
			next = d;
	}
	return next;
}
