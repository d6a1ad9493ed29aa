/* The Kafka front-end: connections, request framing and dispatch, and the
 * in-order response pipeline. See frontend.h; the slots and the response
 * ring are described in frontend_pvt.h. */
#include "dataplane/serve/frontend.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "dataplane/serve/frontend_pvt.h"

#define FRAME_BYTES_DEFAULT (8u << 20)
#define CONNS_DEFAULT 64u
#define CONN_BUF_DEFAULT (256u << 10)
#define PARTS_DEFAULT 1024u
#define FETCH_BUF_DEFAULT (4u << 20)
#define FETCH_BUFS_DEFAULT 4u
#define IOV_DEFAULT 16u
/* Topics a request may name beyond the table's own (unknown ones). */
#define EXTRA_TOPICS 64u
/* Frames handled per connection per call (STYLE 13); the rest wait for the
 * next receive, send callback or tick. */
#define FRAMES_PER_TURN 32u

static void on_accept(struct km_net_conn *c);
static void on_recv(struct km_net_conn *c, const struct km_chain *data,
		    const uint32_t *buf_ids);
static void on_close(struct km_net_conn *c, int reason);
static void process_frames(struct fe_conn *fc);
static void slots_release(struct fe_conn *fc);

static const struct km_net_handler fe_handler = {
	.on_connect = NULL,
	.on_accept = on_accept,
	.on_recv = on_recv,
	.on_close = on_close,
};

uint64_t fe_now_ms(void)
{
	return km_clock_ms();
}

/* ---- create / destroy ---- */

static int check_config(const struct km_frontend_config *cfg)
{
	if (cfg->net == NULL || cfg->parts == NULL || cfg->ops == NULL ||
	    cfg->ops->produce == NULL || cfg->ops->alloc_pid == NULL ||
	    cfg->cluster_id == NULL || cfg->advertised_host == NULL ||
	    cfg->advertised_host[0] == '\0' || cfg->node_id < 0)
		return -EINVAL;
	if (strlen(cfg->cluster_id) > KM_WIRE_NAME_BYTES_MAX ||
	    strlen(cfg->advertised_host) > KM_WIRE_NAME_BYTES_MAX)
		return -EINVAL;
	/* km_wire_frame_parse: "at most INT32_MAX - 4". */
	if (cfg->frame_bytes_max > INT32_MAX - KM_WIRE_SIZE_BYTES)
		return -EINVAL;
	/* A response with records needs 3 iovecs: head, records, tail. */
	if (cfg->send_iov_max != 0 && cfg->send_iov_max < 3)
		return -EINVAL;
	if (cfg->fetch_buf_bytes != 0 &&
	    cfg->fetch_buf_bytes < KM_BATCH_HEADER_BYTES)
		return -EINVAL;
	return 0;
}

static uint32_t or_default(uint32_t v, uint32_t def)
{
	return v != 0 ? v : def;
}

/* Distinct topics of the sorted table, and the bytes of a Metadata answer
 * naming every partition (response header, broker, topics, partitions). */
static uint32_t table_topics(const struct km_part_table *t, uint32_t *bound)
{
	uint32_t n = 0;

	*bound = 512;
	for (uint32_t i = 0; i < t->n; i++) {
		if (i == 0 || strcmp(t->parts[i].topic, t->parts[i - 1].topic)) {
			n++;
			*bound += 16 + (uint32_t)strlen(t->parts[i].topic);
		}
		*bound += 40;
	}
	return n;
}

static void set_limits(struct km_frontend *fe,
		       const struct km_frontend_config *cfg)
{
	uint32_t tt, md_bound;
	uint32_t iov = or_default(cfg->send_iov_max, IOV_DEFAULT);

	fe->limits = km_wire_limits_default;
	fe->limits.frame_bytes_max =
		or_default(cfg->frame_bytes_max, FRAME_BYTES_DEFAULT);
	fe->conns_max = or_default(cfg->conns_max, CONNS_DEFAULT);
	fe->parts_max = or_default(cfg->parts_max, PARTS_DEFAULT);
	tt = table_topics(fe->table, &md_bound);
	md_bound += 2 * KM_WIRE_NAME_BYTES_MAX;
	fe->topics_max = tt + EXTRA_TOPICS < fe->parts_max ? tt + EXTRA_TOPICS
							   : fe->parts_max;
	fe->md_topics_max = tt > fe->parts_max ? tt : fe->parts_max;
	fe->conn_buf_bytes = or_default(cfg->conn_buf_bytes, CONN_BUF_DEFAULT);
	if (fe->conn_buf_bytes < md_bound)
		fe->conn_buf_bytes = (md_bound + 4095) & ~4095u;
	/* A response never needs more than head + (records, next) * gaps. */
	fe->iov_max = iov < 2 * KM_FRONTEND_GAPS_MAX + 1
			      ? iov : 2 * KM_FRONTEND_GAPS_MAX + 1;
	fe->gaps_max = (iov - 1) / 2 < KM_FRONTEND_GAPS_MAX ? (iov - 1) / 2
							    : KM_FRONTEND_GAPS_MAX;
	fe->fetch_buf_bytes = or_default(cfg->fetch_buf_bytes, FETCH_BUF_DEFAULT);
	fe->n_fbufs = or_default(cfg->fetch_bufs, FETCH_BUFS_DEFAULT);
	fe->staging_bytes = fe->limits.frame_bytes_max;
}

static int alloc_fetch(struct km_frontend *fe, struct fe_conn *fc)
{
	struct fe_fetch *f = calloc(1, sizeof(*f));

	fc->fetch = f;
	if (f == NULL)
		return -ENOMEM;
	f->topics = calloc(fe->topics_max, sizeof(*f->topics));
	f->parts = calloc(fe->parts_max, sizeof(*f->parts));
	f->res = calloc(fe->parts_max, sizeof(*f->res));
	return f->topics && f->parts && f->res ? 0 : -ENOMEM;
}

static int alloc_conns(struct km_frontend *fe)
{
	fe->conns = calloc(fe->conns_max, sizeof(*fe->conns));
	if (fe->conns == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < fe->conns_max; i++) {
		struct fe_conn *fc = &fe->conns[i];

		fc->fe = fe;
		fc->buf = malloc(fe->conn_buf_bytes);
		if (fc->buf == NULL || alloc_fetch(fe, fc) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int alloc_buffers(struct km_frontend *fe)
{
	uint32_t n = fe->table->n > 0 ? fe->table->n : 1;

	fe->fbufs = calloc(fe->n_fbufs, sizeof(*fe->fbufs));
	if (fe->fbufs == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < fe->n_fbufs; i++)
		if ((fe->fbufs[i].mem = malloc(fe->fetch_buf_bytes)) == NULL)
			return -ENOMEM;
	fe->staging = malloc(fe->staging_bytes);
	fe->names = calloc(fe->parts_max, sizeof(*fe->names));
	fe->md_topics = calloc(fe->md_topics_max, sizeof(*fe->md_topics));
	fe->md_parts = calloc(n, sizeof(*fe->md_parts));
	fe->md_seen = calloc(n, sizeof(*fe->md_seen));
	fe->lo_topics = calloc(fe->topics_max, sizeof(*fe->lo_topics));
	fe->lo_req = calloc(fe->parts_max, sizeof(*fe->lo_req));
	fe->lo_resp = calloc(fe->parts_max, sizeof(*fe->lo_resp));
	fe->ab_tmp = calloc(KM_FRONTEND_ABORTED_MAX, sizeof(*fe->ab_tmp));
	if (!fe->staging || !fe->names || !fe->md_topics || !fe->md_parts ||
	    !fe->md_seen || !fe->lo_topics || !fe->lo_req || !fe->lo_resp ||
	    !fe->ab_tmp)
		return -ENOMEM;
	return 0;
}

static void free_all(struct km_frontend *fe)
{
	for (uint32_t i = 0; fe->conns != NULL && i < fe->conns_max; i++) {
		struct fe_conn *fc = &fe->conns[i];

		free(fc->buf);
		if (fc->fetch != NULL) {
			free(fc->fetch->topics);
			free(fc->fetch->parts);
			free(fc->fetch->res);
			free(fc->fetch);
		}
	}
	for (uint32_t i = 0; fe->fbufs != NULL && i < fe->n_fbufs; i++)
		free(fe->fbufs[i].mem);
	free(fe->conns);
	free(fe->fbufs);
	free(fe->staging);
	free(fe->names);
	free(fe->md_topics);
	free(fe->md_parts);
	free(fe->md_seen);
	free(fe->lo_topics);
	free(fe->lo_req);
	free(fe->lo_resp);
	free(fe->ab_tmp);
	fe_groups_free(fe);
	free(fe);
}

int km_frontend_create(const struct km_frontend_config *cfg,
		       struct km_frontend **out)
{
	struct km_frontend *fe;
	int rc = check_config(cfg);

	if (rc < 0)
		return rc;
	fe = calloc(1, sizeof(*fe));
	if (fe == NULL)
		return -ENOMEM;
	fe->net = cfg->net;
	fe->table = cfg->parts;
	fe->ops = cfg->ops;
	fe->node_id = cfg->node_id;
	fe->worker_id = cfg->worker_id;
	fe->refused.fe = fe;
	fe->refused.closing = true;
	fe->adv_port = cfg->advertised_port;
	snprintf(fe->cluster_id, sizeof(fe->cluster_id), "%s", cfg->cluster_id);
	snprintf(fe->host, sizeof(fe->host), "%s", cfg->advertised_host);
	set_limits(fe, cfg);
	if ((rc = alloc_conns(fe)) < 0 || (rc = alloc_buffers(fe)) < 0 ||
	    (rc = fe_groups_init(fe, cfg)) < 0) {
		free_all(fe);
		return rc;
	}
	*out = fe;
	return 0;
}

void km_frontend_destroy(struct km_frontend *fe)
{
	if (fe == NULL)
		return;
	if (fe->lsn != NULL)
		km_net_unlisten(fe->lsn);
	for (uint32_t i = 0; i < fe->conns_max; i++)
		KM_ASSERT(fe->conns[i].c == NULL); /* km_frontend_idle() first */
	free_all(fe);
}

int km_frontend_listen(struct km_frontend *fe, const char *ipv4,
		       uint16_t port)
{
	int rc;

	if (fe->lsn != NULL)
		return -EALREADY;
	rc = km_net_listen(fe->net, ipv4, port, &fe_handler, fe, &fe->lsn);
	if (rc < 0) {
		fe->lsn = NULL;
		return rc;
	}
	fe->port = km_net_listener_port(fe->lsn);
	if (fe->adv_port == 0)
		fe->adv_port = fe->port;
	KM_INFO("frontend", "Kafka clients on %s:%u, advertised as %s:%u "
		"(node %d, cluster %s, %u partitions)", ipv4, fe->port,
		fe->host, fe->adv_port, (int)fe->node_id, fe->cluster_id,
		fe->table->n);
	return 0;
}

uint16_t km_frontend_port(const struct km_frontend *fe)
{
	return fe->port;
}

void km_frontend_get_stats(const struct km_frontend *fe,
			   struct km_frontend_stats *out)
{
	*out = fe->st;
}

/* ---- Fetch records buffers ---- */

uint8_t *fe_fbuf_get(struct km_frontend *fe)
{
	for (uint32_t i = 0; i < fe->n_fbufs; i++)
		if (!fe->fbufs[i].used) {
			fe->fbufs[i].used = true;
			return fe->fbufs[i].mem;
		}
	return NULL;
}

bool fe_fbuf_available(const struct km_frontend *fe)
{
	for (uint32_t i = 0; i < fe->n_fbufs; i++)
		if (!fe->fbufs[i].used)
			return true;
	return false;
}

void fe_fbuf_put(struct km_frontend *fe, uint8_t *mem)
{
	uint32_t i = 0;

	while (i < fe->n_fbufs && fe->fbufs[i].mem != mem)
		i++;
	KM_ASSERT(i < fe->n_fbufs);
	KM_ASSERT(fe->fbufs[i].used);
	fe->fbufs[i].used = false;
}

/* ---- connections ---- */

static struct fe_conn *conn_alloc(struct km_frontend *fe)
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
		km_kframe_init(&fc->kf, fe->net, fe->limits.frame_bytes_max);
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
void fe_conn_maybe_free(struct fe_conn *fc)
{
	if (!fc->used || fc->c != NULL || fc->pending_ops > 0)
		return;
	fc->used = false;
	fc->fe->conns_used--;
}

int fe_conn_fail(struct fe_conn *fc, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	fc->fe->st.protocol_errors++;
	KM_WARN("frontend", "connection %u (client id \"%s\"): %s; closing it",
		fc->id, fc->client_id, why);
	if (fc->c != NULL && !fc->closing) {
		fc->closing = true;
		km_net_abort(fc->c);
	}
	return -ECONNABORTED;
}

static void on_accept(struct km_net_conn *c)
{
	struct km_frontend *fe = km_net_conn_ctx(c);
	struct fe_conn *fc = conn_alloc(fe);

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
	fe->st.accepts++;
	fe->st.conns++;
	KM_DEBUG("frontend", "connection %u accepted", fc->id);
}

static void on_recv(struct km_net_conn *c, const struct km_chain *data,
		    const uint32_t *buf_ids)
{
	struct fe_conn *fc = km_net_conn_ctx(c);

	if (fc->closing) {
		km_net_release(fc->fe->net, buf_ids, data->n_iov);
		return;
	}
	if (km_kframe_push(&fc->kf, data, buf_ids) < 0) {
		fe_conn_fail(fc, "more than %u receive buffers of requests "
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
	slots_release(fc);
	fe_groups_conn_closed(fc);
	fe_conn_maybe_free(fc);
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

int fe_slot_open(struct fe_conn *fc, const struct km_reqhdr *h, uint32_t bound,
		 uint32_t *slot)
{
	uint32_t len = (bound + 7u) & ~7u, off, idx;
	struct fe_slot *s;

	if (len > fc->fe->conn_buf_bytes)
		return fe_conn_fail(fc, "a %s response of %u bytes would not "
				    "fit the %u of a connection",
				    fe_api_name(h->api_key), len,
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

void fe_slot_begin(struct fe_conn *fc, uint32_t slot, struct km_wire_wr *w)
{
	struct fe_slot *s = &fc->slots[slot];

	km_wire_wr_init(w, fc->buf + s->off, s->data_off ? s->data_off : s->cap);
	km_proto_resp_begin(w, s->api_key, s->api_version, s->corr);
}

int fe_slot_finish(struct fe_conn *fc, uint32_t slot, struct km_wire_wr *w,
		   bool trim)
{
	struct fe_slot *s = &fc->slots[slot];
	int n = km_wire_wr_frame_end(w);

	if (n < 0)
		return fe_conn_fail(fc, "encoding a %s v%d response: %s",
				    fe_api_name(s->api_key), s->api_version,
				    km_strerror(n));
	s->len = (uint32_t)w->pos;
	if (trim) {
		/* Only the newest reservation can shrink. */
		KM_ASSERT(slot_at(fc, fc->s_count - 1) == s);
		s->cap = (s->len + 7u) & ~7u;
		fc->tail = s->off + s->cap;
	}
	s->state = FE_SLOT_READY;
	fe_send_ready(fc);
	return 0;
}

static void on_sent(struct km_net_conn *c, void *arg, int res);

/* Hand READY responses to the network, oldest first, stopping at the first
 * one still in process: responses leave in request order. */
void fe_send_ready(struct fe_conn *fc)
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
			fe_conn_fail(fc, "%s response: %s",
				     fe_api_name(s->api_key), km_strerror(n));
			return;
		}
		rc = km_net_send(fc->c, iov, (uint32_t)n, on_sent, s);
		fc->send_blocked = rc == -EAGAIN;
		if (rc < 0)
			return; /* -EAGAIN: after a send callback; -EPIPE: ending */
		s->state = FE_SLOT_QUEUED;
	}
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
 * outcomes keep their bytes (fe_conn_maybe_free). */
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
	fe_send_ready(fc);
	process_frames(fc);
}

/* ---- requests ---- */

static void note_client(struct fe_conn *fc, const struct km_reqhdr *h)
{
	size_t n;

	if (fc->client_id[0] != '\0' || h->client_id.len <= 0)
		return;
	/* Only logged: cut to what the connection keeps. */
	n = (size_t)h->client_id.len < sizeof(fc->client_id) - 1
		    ? (size_t)h->client_id.len : sizeof(fc->client_id) - 1;
	memcpy(fc->client_id, h->client_id.s, n);
	fc->client_id[n] = '\0';
}

static int dispatch(struct fe_conn *fc, const struct km_reqhdr *h,
		    struct km_wire_rd *r)
{
	switch (h->api_key) {
	case KM_API_API_VERSIONS:
		return fe_handle_apiversions(fc, h, r, false);
	case KM_API_METADATA:
		return fe_handle_metadata(fc, h, r);
	case KM_API_LIST_OFFSETS:
		return fe_handle_listoffsets(fc, h, r);
	case KM_API_FETCH:
		return fe_handle_fetch(fc, h, r);
	case KM_API_PRODUCE:
		return fe_handle_produce(fc, h, r);
	case KM_API_INIT_PRODUCER_ID:
		return fe_handle_initpid(fc, h, r);
	case KM_API_KMIRROR_BARRIER:
		return fe_handle_barrier(fc, h, r);
	case KM_API_OFFSET_COMMIT:
	case KM_API_OFFSET_FETCH:
	case KM_API_FIND_COORDINATOR:
	case KM_API_JOIN_GROUP:
	case KM_API_HEARTBEAT:
	case KM_API_LEAVE_GROUP:
	case KM_API_SYNC_GROUP:
	case KM_API_DESCRIBE_GROUPS:
	case KM_API_LIST_GROUPS:
		return fe_handle_group(fc, h, r);
	default:
		return fe_conn_fail(fc, "API key %d v%d is not served",
				    h->api_key, h->api_version);
	}
}

/* Decode the header and hand the body to its API. @return 0 (done with the
 * frame), FE_WAIT, or a negative code (the connection failed). */
static int handle_frame(struct fe_conn *fc, const struct km_kframe_frame *fr)
{
	struct km_frontend *fe = fc->fe;
	struct km_wire_rd r;
	struct km_reqhdr h;
	int rc;

	km_wire_rd_init(&r, &fr->chain, fr->body, fr->body_len, &fe->limits);
	rc = km_reqhdr_decode(&r, &h);
	if (rc == KM_EWIREAPIKEY || rc == KM_EWIREVERSION || rc == 0)
		note_client(fc, &h);
	if (fc->held == NULL) {
		if (rc != KM_EWIREAPIKEY && h.api_key >= 0 &&
		    h.api_key < KM_FRONTEND_API_KEYS)
			fe->st.requests[h.api_key]++;
		else if (rc == KM_EWIREAPIKEY)
			fe->st.requests_other++;
	}
	if (rc == KM_EWIREAPIKEY)
		return fe_conn_fail(fc, "unsupported API key %d (v%d)",
				    h.api_key, h.api_version);
	if (rc == KM_EWIREVERSION && h.api_key == KM_API_API_VERSIONS)
		return fe_handle_apiversions(fc, &h, &r, true);
	if (rc == KM_EWIREVERSION)
		return fe_conn_fail(fc, "unsupported %s version %d (key %d)",
				    fe_api_name(h.api_key), h.api_version,
				    h.api_key);
	if (rc < 0)
		return fe_conn_fail(fc, "malformed request header: %s",
				    km_strerror(rc));
	return dispatch(fc, &h, &r);
}

static void process_frames(struct fe_conn *fc)
{
	for (uint32_t n = 0; n < FRAMES_PER_TURN; n++) {
		const struct km_kframe_frame *fr = fc->held;
		int rc;

		if (fc->c == NULL || fc->closing)
			return;
		if (fr == NULL) {
			if (fc->s_count == KM_FRONTEND_PIPELINE)
				return;
			rc = km_kframe_next(&fc->kf, &fr);
			if (rc == 0)
				return;
			if (rc < 0) {
				fe_conn_fail(fc, "request frame: %s (limit %u "
					     "bytes)", km_strerror(rc),
					     fc->fe->limits.frame_bytes_max);
				return;
			}
		}
		rc = handle_frame(fc, fr);
		if (rc == FE_WAIT) {
			fc->held = fr;
			return;
		}
		fc->held = NULL;
		km_kframe_release(&fc->kf);
	}
}

/* ---- the loop ---- */

/* Hooked slots first: a parked response that completes is then sent with
 * the others, and its slot may make room for a held frame. Callbacks never
 * run inside km_net_* calls (net.h), so the ring holds still while we walk
 * it, unless a hook fails the connection. */
static void conn_tick(struct fe_conn *fc, uint64_t now_ms)
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
		fe_send_ready(fc);
	process_frames(fc);
}

static uint64_t conn_deadline(const struct fe_conn *fc)
{
	uint64_t next = UINT64_MAX;

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

/* Both scans stop at the last slot in use (conn_alloc fills from the
 * bottom): the worker ticks the front-end every turn, and a polled fetch
 * network turns it often. */
void km_frontend_tick(struct km_frontend *fe, uint64_t now_ms)
{
	uint32_t left = fe->conns_used;

	fe_groups_tick(fe, now_ms);
	for (uint32_t i = 0; i < fe->conns_max && left > 0; i++) {
		struct fe_conn *fc = &fe->conns[i];

		if (!fc->used)
			continue;
		left--;
		if (fc->c == NULL || fc->closing)
			continue;
		conn_tick(fc, now_ms);
	}
}

uint64_t km_frontend_next_deadline_ms(const struct km_frontend *fe)
{
	uint64_t next = fe_groups_deadline(fe);
	uint32_t left = fe->conns_used;

	for (uint32_t i = 0; i < fe->conns_max && left > 0; i++) {
		const struct fe_conn *fc = &fe->conns[i];
		uint64_t d;

		if (!fc->used)
			continue;
		left--;
		if (fc->c == NULL || fc->closing)
			continue;
		d = conn_deadline(fc);
		if (d < next)
			next = d;
	}
	return next;
}

void km_frontend_stop(struct km_frontend *fe)
{
	if (fe->lsn != NULL) {
		km_net_unlisten(fe->lsn);
		fe->lsn = NULL;
	}
	for (uint32_t i = 0; i < fe->conns_max; i++) {
		struct fe_conn *fc = &fe->conns[i];

		if (fc->used && fc->c != NULL && !fc->closing) {
			fc->closing = true;
			km_net_abort(fc->c);
		}
	}
}

bool km_frontend_idle(const struct km_frontend *fe)
{
	return fe->conns_used == 0;
}
