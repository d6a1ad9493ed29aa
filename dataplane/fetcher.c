/* Fetch session for one source partition: see fetcher.h. */
#include "dataplane/fetcher.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/endian.h"
#include "common/errors.h"
#include "kafka/proto.h"

#define CLIENT_ID "kmirror"
#define FRAME_BYTES_MAX (64u * 1024 * 1024)

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

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void set_failed(struct km_fetcher *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void set_failed(struct km_fetcher *f, const char *fmt, ...)
{
	va_list ap;

	if (f->phase == KM_FPH_FAILED)
		return;
	va_start(ap, fmt);
	vsnprintf(f->reason, sizeof(f->reason), fmt, ap);
	va_end(ap);
	f->phase = KM_FPH_FAILED;
	f->state = KM_FETCHER_FAILED;
	if (f->conn)
		km_net_abort(f->conn);
}

int km_fetcher_init(struct km_fetcher *f, const struct km_fetcher_config *cfg,
		    struct km_net *net, struct km_log *log)
{
	if (!cfg->host[0] || !cfg->topic[0] || !net || !log)
		return -EINVAL;
	memset(f, 0, sizeof(*f));
	f->cfg = *cfg;
	if (f->cfg.max_wait_ms <= 0)
		f->cfg.max_wait_ms = 50;
	if (f->cfg.max_bytes <= 0)
		f->cfg.max_bytes = 1 << 20;
	if (f->cfg.backoff_ms == 0)
		f->cfg.backoff_ms = 50;
	if (f->cfg.backoff_max_ms == 0)
		f->cfg.backoff_max_ms = 2000;
	f->net = net;
	f->log = log;
	f->phase = KM_FPH_IDLE;
	f->state = KM_FETCHER_CONNECTING;
	f->leader_id = -1;
	f->next_offset = -1;
	f->corrupt_offset = -1;
	f->high_watermark = -1;
	f->backoff_ms = f->cfg.backoff_ms;
	f->retry_at_ms = 0;
	f->wait_offset = -1;
	km_kframe_init(&f->kf, net, FRAME_BYTES_MAX);
	return 0;
}

/* The connection is gone or must go: come back after the backoff. */
static void schedule_retry(struct km_fetcher *f)
{
	if (f->phase == KM_FPH_FAILED)
		return;
	f->phase = KM_FPH_IDLE;
	f->state = KM_FETCHER_CONNECTING;
	f->retry_at_ms = now_ms() + f->backoff_ms;
	f->backoff_ms = f->backoff_ms * 2 > f->cfg.backoff_max_ms
				? f->cfg.backoff_max_ms
				: f->backoff_ms * 2;
}

/* Drop the connection; on_close (or the held frame's writes) then leads to
 * schedule_retry. */
static void drop_conn(struct km_fetcher *f)
{
	f->want_reconnect = true;
	if (f->conn)
		km_net_abort(f->conn);
}

static void on_sent(struct km_net_conn *c, void *arg, int res)
{
	struct km_fetcher *f = arg;

	(void)c;
	(void)res;
	f->send_busy = false;
}

/* ---- requests ---- */

static int send_req(struct km_fetcher *f, struct km_wire_wr *w)
{
	int rc = km_kframe_req_send(&f->kf, f->conn, w, on_sent, f);

	if (rc == 0)
		f->send_busy = true;
	return rc;
}

static int send_apiversions(struct km_fetcher *f)
{
	struct km_wire_wr w;
	struct km_apiversions_req m;

	km_wire_name_set_null(&m.sw_name);
	km_wire_name_set_null(&m.sw_version);
	km_kframe_req_begin(&f->kf, &w, f->req, sizeof(f->req),
			    KM_API_API_VERSIONS, 0, CLIENT_ID, &f->corr);
	km_apiversions_req_encode(&w, 0, &m);
	f->api_key = KM_API_API_VERSIONS;
	f->phase = KM_FPH_APIVERSIONS;
	return send_req(f, &w);
}

static int send_metadata(struct km_fetcher *f)
{
	struct km_wire_wr w;
	struct km_wire_name topic;
	struct km_metadata_req m;

	km_wire_name_set(&topic, f->cfg.topic);
	m.topics = &topic;
	m.topics_max = 1;
	m.n_topics = 1;
	m.allow_auto_topic_creation = false;
	km_kframe_req_begin(&f->kf, &w, f->req, sizeof(f->req), KM_API_METADATA,
			    2, CLIENT_ID, &f->corr);
	km_metadata_req_encode(&w, 2, &m);
	f->api_key = KM_API_METADATA;
	f->phase = KM_FPH_METADATA;
	return send_req(f, &w);
}

static int send_listoffsets(struct km_fetcher *f)
{
	struct km_wire_wr w;
	struct km_proto_topic t;
	struct km_listoffsets_req_part p = {f->cfg.partition, -1, -2, 1};
	struct km_listoffsets_req m;

	memset(&t, 0, sizeof(t));
	km_wire_name_set(&t.name, f->cfg.topic);
	t.first = 0;
	t.count = 1;
	memset(&m, 0, sizeof(m));
	m.replica_id = -1;
	m.topics = &t;
	m.topics_max = m.n_topics = 1;
	m.parts = &p;
	m.parts_max = m.n_parts = 1;
	km_kframe_req_begin(&f->kf, &w, f->req, sizeof(f->req),
			    KM_API_LIST_OFFSETS, 1, CLIENT_ID, &f->corr);
	km_listoffsets_req_encode(&w, 1, &m);
	f->api_key = KM_API_LIST_OFFSETS;
	f->phase = KM_FPH_LISTOFFSETS;
	return send_req(f, &w);
}

static int send_fetch(struct km_fetcher *f)
{
	struct km_wire_wr w;
	struct km_proto_topic t;
	struct km_fetch_req_part p;
	struct km_fetch_req m;

	memset(&t, 0, sizeof(t));
	km_wire_name_set(&t.name, f->cfg.topic);
	t.count = 1;
	p.partition = f->cfg.partition;
	p.current_leader_epoch = -1;
	p.fetch_offset = f->next_offset;
	p.log_start_offset = -1;
	p.partition_max_bytes = f->cfg.max_bytes;
	memset(&m, 0, sizeof(m));
	m.replica_id = -1;
	m.max_wait_ms = f->cfg.max_wait_ms;
	m.min_bytes = 1;
	m.max_bytes = f->cfg.max_bytes;
	m.isolation_level = 0;
	m.session_id = 0;
	m.session_epoch = -1;
	m.topics = &t;
	m.topics_max = m.n_topics = 1;
	m.parts = &p;
	m.parts_max = m.n_parts = 1;
	km_wire_name_set(&m.rack_id, "");
	km_kframe_req_begin(&f->kf, &w, f->req, sizeof(f->req), KM_API_FETCH, 4,
			    CLIENT_ID, &f->corr);
	km_fetch_req_encode(&w, 4, &m);
	f->api_key = KM_API_FETCH;
	f->phase = KM_FPH_FETCH;
	return send_req(f, &w);
}

/* Send the request the phase calls for; the send buffer is reused, so wait
 * for the previous send's callback first (step() retries). */
static void send_next(struct km_fetcher *f, enum km_fetch_phase next)
{
	int rc;

	f->phase = next;
	f->send_pending = true;
	if (!f->conn || f->send_busy)
		return; /* step() sends it */
	f->send_pending = false;
	switch (next) {
	case KM_FPH_APIVERSIONS:
		rc = send_apiversions(f);
		break;
	case KM_FPH_METADATA:
		rc = send_metadata(f);
		break;
	case KM_FPH_LISTOFFSETS:
		rc = send_listoffsets(f);
		break;
	case KM_FPH_FETCH:
		rc = send_fetch(f);
		break;
	default:
		return;
	}
	if (rc < 0)
		drop_conn(f);
}

/* ---- the partition error policy ---- */

static void partition_error(struct km_fetcher *f, const char *api, int16_t err)
{
	switch (err) {
	case KM_KERR_OFFSET_OUT_OF_RANGE:
		set_failed(f, "%s: OFFSET_OUT_OF_RANGE at offset %lld of %s-%d",
			   api, (long long)f->next_offset, f->cfg.topic,
			   (int)f->cfg.partition);
		break;
	case KM_KERR_TOPIC_AUTHORIZATION_FAILED:
	case KM_KERR_CLUSTER_AUTHORIZATION_FAILED:
		set_failed(f, "%s: %s", api, km_kerr_name(err));
		break;
	default:
		/* NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, unknown
		 * topic, ...: find the leader again. */
		drop_conn(f);
		break;
	}
}

/* ---- responses ---- */

static void on_apiversions(struct km_fetcher *f, struct km_wire_rd *r)
{
	struct km_api_range keys[64];
	struct km_apiversions_resp m = {0, keys, 64, 0, 0};
	int rc = km_apiversions_resp_decode(r, 0, &m);

	if (rc < 0 || m.error_code) {
		set_failed(f, "ApiVersions: %s / %s", km_strerror(rc),
			   km_kerr_name(m.error_code));
		return;
	}
	for (uint32_t i = 0; i < m.n_keys; i++)
		if (keys[i].api_key == KM_API_FETCH &&
		    keys[i].max_version < 4) {
			set_failed(f, "source speaks Fetch up to v%d, need v4",
				   keys[i].max_version);
			return;
		}
	send_next(f, KM_FPH_METADATA);
}

/* Our partition in a decoded Metadata response, or NULL (*err set). */
static const struct km_metadata_part *
find_part(const struct km_fetcher *f, const struct km_metadata_resp *m,
	  int16_t *err)
{
	*err = KM_KERR_UNKNOWN_TOPIC_OR_PARTITION;
	for (uint32_t t = 0; t < m->n_topics; t++) {
		const struct km_metadata_topic *tp = &m->topics[t];

		if (strcmp(tp->name.s, f->cfg.topic) != 0)
			continue;
		if (tp->error_code) {
			*err = tp->error_code;
			return NULL;
		}
		for (uint32_t i = tp->first; i < tp->first + tp->count; i++)
			if (m->parts[i].partition == f->cfg.partition)
				return &m->parts[i];
	}
	return NULL;
}

/* The session talks to the bootstrap broker only (for now). */
static bool leader_elsewhere(struct km_fetcher *f,
			     const struct km_metadata_resp *m)
{
	for (uint32_t b = 0; b < m->n_brokers; b++) {
		const struct km_metadata_broker *br = &m->brokers[b];

		if (br->node_id != f->leader_id || br->port == f->cfg.port)
			continue;
		set_failed(f, "leader %d at %s:%d is not the bootstrap broker "
			   "(not supported yet)", (int)f->leader_id, br->host.s,
			   (int)br->port);
		return true;
	}
	return false;
}

/* Resume from the log end, or ask the source where its log starts. */
static void start_fetching(struct km_fetcher *f)
{
	if (km_log_end_offset(f->log) > km_log_start_offset(f->log)) {
		f->next_offset = km_log_end_offset(f->log);
		f->state = KM_FETCHER_MIRRORING;
		send_next(f, KM_FPH_FETCH);
	} else {
		send_next(f, KM_FPH_LISTOFFSETS);
	}
}

static void on_metadata(struct km_fetcher *f, struct km_wire_rd *r)
{
	struct km_metadata_broker brokers[16];
	struct km_metadata_topic topics[4];
	struct km_metadata_part parts[256];
	int32_t nodes[1024];
	struct km_metadata_resp m = {
		.brokers = brokers, .brokers_max = 16,
		.topics = topics, .topics_max = 4,
		.parts = parts, .parts_max = 256,
		.nodes = nodes, .nodes_max = 1024,
	};
	const struct km_metadata_part *p;
	int16_t err;
	int rc = km_metadata_resp_decode(r, 2, &m);

	if (rc < 0) {
		set_failed(f, "Metadata: %s", km_strerror(rc));
		return;
	}
	if (m.cluster_id.len > 0)
		memcpy(f->cluster_id, m.cluster_id.s,
		       (size_t)m.cluster_id.len + 1);
	p = find_part(f, &m, &err);
	if (p != NULL && (p->error_code || p->leader_id < 0))
		err = p->error_code ? p->error_code
				    : KM_KERR_LEADER_NOT_AVAILABLE;
	else if (p != NULL)
		err = 0;
	if (err) {
		partition_error(f, "Metadata", err);
		return;
	}
	f->leader_id = p->leader_id;
	if (!leader_elsewhere(f, &m))
		start_fetching(f);
}

static void on_listoffsets(struct km_fetcher *f, struct km_wire_rd *r)
{
	struct km_proto_topic topics[4];
	struct km_listoffsets_resp_part parts[16];
	struct km_listoffsets_resp m;
	int rc;

	memset(&m, 0, sizeof(m));
	m.topics = topics;
	m.topics_max = 4;
	m.parts = parts;
	m.parts_max = 16;
	rc = km_listoffsets_resp_decode(r, 1, &m);
	if (rc < 0) {
		set_failed(f, "ListOffsets: %s", km_strerror(rc));
		return;
	}
	for (uint32_t i = 0; i < m.n_parts; i++) {
		if (parts[i].partition != f->cfg.partition)
			continue;
		if (parts[i].error_code) {
			partition_error(f, "ListOffsets", parts[i].error_code);
			return;
		}
		/* The log is empty: it starts where the source does (R6). */
		f->next_offset = parts[i].offset;
		f->state = KM_FETCHER_MIRRORING;
		send_next(f, KM_FPH_FETCH);
		return;
	}
	set_failed(f, "ListOffsets: partition %d missing",
		   (int)f->cfg.partition);
}

/* Corrupt (bad length, magic, CRC, header): reject, count, refetch from
 * its offset (next_offset stays); the same batch corrupt again and again
 * fails the session instead of refetching forever. */
static void reject_corrupt(struct km_fetcher *f, int rc)
{
	f->stats.corrupt++;
	f->rec_left = 0;
	if (f->corrupt_offset != f->next_offset) {
		f->corrupt_offset = f->next_offset;
		f->corrupt_streak = 0;
	}
	if (++f->corrupt_streak >= KM_FETCHER_CORRUPT_MAX)
		set_failed(f, "batch at offset %lld corrupt %u times in a row: %s",
			   (long long)f->next_offset, f->corrupt_streak,
			   km_strerror(rc < 0 ? rc : KM_ECORRUPT));
}

/* Parse up to KM_FETCHER_BURST whole batches from the records span. */
static void parse_batches(struct km_fetcher *f)
{
	const struct km_chain *ch = &f->frame->chain;

	f->n_batches = f->n_done = 0;
	while (f->n_batches < KM_FETCHER_BURST &&
	       f->rec_left >= KM_BATCH_LOG_OVERHEAD) {
		uint8_t lo[KM_BATCH_LOG_OVERHEAD];
		struct km_batch *b = &f->batches[f->n_batches];
		int32_t blen;
		uint32_t size;
		int rc;

		km_chain_copy(ch, f->rec_cur, lo, sizeof(lo));
		blen = (int32_t)km_load_be32(lo + KM_BATCH_OFF_LENGTH);
		if (blen >= KM_BATCH_LENGTH_MIN &&
		    (uint32_t)blen + KM_BATCH_LOG_OVERHEAD > f->rec_left) {
			f->rec_left = 0; /* partial last batch: refetch */
			break;
		}
		rc = km_batch_parse(b, ch, f->rec_cur, f->rec_left);
		if (rc <= 0) {
			reject_corrupt(f, rc);
			break;
		}
		size = (uint32_t)rc;
		km_chain_advance(ch, &f->rec_cur, size);
		f->rec_left -= size;
		if (km_batch_last_offset(b) < f->next_offset)
			continue; /* before what we asked for */
		if (km_batch_base_offset(b) < f->next_offset) {
			set_failed(f, "batch %lld..%lld overlaps offset %lld",
				   (long long)km_batch_base_offset(b),
				   (long long)km_batch_last_offset(b),
				   (long long)f->next_offset);
			return;
		}
		rc = km_batch_map_pid(b); /* R1 */
		if (rc < 0) {
			set_failed(f, "batch at offset %lld: %s",
				   (long long)km_batch_base_offset(b),
				   km_strerror(rc));
			return;
		}
		f->next_offset = km_batch_last_offset(b) + 1;
		f->wait_offset = km_batch_last_offset(b);
		f->n_batches++;
	}
}

/* Append what the held Fetch response has left; release it once written.
 * @return true if the frame is done (released). */
static bool append_more(struct km_fetcher *f)
{
	for (;;) {
		if (f->phase == KM_FPH_FAILED)
			break;
		if (f->n_done < f->n_batches) {
			struct km_log_append_result res;
			int rc = km_log_append_burst(
				f->log, f->batches + f->n_done,
				f->n_batches - f->n_done, KM_ORIGIN_MIRROR, &res);

			if (rc < 0) {
				set_failed(f, "log append at offset %lld: %s",
					   (long long)km_batch_base_offset(
						   &f->batches[f->n_done]),
					   km_strerror(rc));
				break;
			}
			for (int i = 0; i < rc; i++)
				f->stats.bytes +=
					km_batch_size(&f->batches[f->n_done + (uint32_t)i]);
			f->stats.batches += res.appended;
			f->stats.duplicates += res.duplicates;
			f->n_done += (uint32_t)rc;
			if (f->n_done < f->n_batches)
				return false; /* queue full: step() retries */
		}
		if (f->rec_left == 0 || f->want_reconnect || !f->conn)
			break;
		parse_batches(f);
	}
	/* Everything submitted (or abandoned): wait for the writes. */
	if (f->wait_offset >= 0 &&
	    km_log_appended_offset(f->log) <= f->wait_offset &&
	    km_log_error(f->log) == 0)
		return false;
	km_kframe_release(&f->kf);
	f->frame = NULL;
	f->wait_offset = -1;
	f->n_batches = f->n_done = 0;
	if (f->phase == KM_FPH_FAILED)
		return true;
	if (f->want_reconnect || !f->conn) {
		if (f->conn)
			return true; /* on_close follows */
		km_kframe_reset(&f->kf);
		schedule_retry(f);
		return true;
	}
	send_next(f, KM_FPH_FETCH);
	return true;
}

static void on_fetch(struct km_fetcher *f, struct km_wire_rd *r)
{
	struct km_fetch_aborted aborted[64];
	struct km_fetch_resp_iter it;
	struct km_fetch_part p;
	int rc = km_fetch_resp_begin(&it, r, 4, aborted, 64);

	if (rc < 0) {
		set_failed(f, "Fetch: %s", km_strerror(rc));
		return;
	}
	while ((rc = km_fetch_resp_next_partition(&it, &p)) == 1) {
		if (p.partition != f->cfg.partition ||
		    strcmp(it.cur.topic.s, f->cfg.topic) != 0)
			continue;
		f->stats.fetches++;
		if (p.error_code) {
			partition_error(f, "Fetch", p.error_code);
			return;
		}
		f->backoff_ms = f->cfg.backoff_ms;
		f->high_watermark = p.high_watermark;
		f->rec_cur = p.records.cur;
		f->rec_left = p.records.len > 0 ? (uint32_t)p.records.len : 0;
		f->phase = KM_FPH_APPEND;
		f->wait_offset = -1;
		f->n_batches = f->n_done = 0;
		/* The frame stays held: the log writes from its buffers. */
		append_more(f);
		return;
	}
	if (rc < 0)
		set_failed(f, "Fetch: %s", km_strerror(rc));
	else
		set_failed(f, "Fetch: partition %d missing",
			   (int)f->cfg.partition);
}

/* Handle the frames received; one Fetch frame may stay held. */
static void pump(struct km_fetcher *f)
{
	const struct km_kframe_frame *fr;
	int rc;

	while (f->phase != KM_FPH_APPEND && f->phase != KM_FPH_FAILED &&
	       !f->want_reconnect &&
	       (rc = km_kframe_next(&f->kf, &fr)) != 0) {
		struct km_wire_rd r;
		int32_t corr = 0;
		int16_t ver;

		if (rc < 0) {
			set_failed(f, "response framing: %s", km_strerror(rc));
			return;
		}
		ver = f->api_key == KM_API_FETCH	   ? 4
		      : f->api_key == KM_API_METADATA	   ? 2
		      : f->api_key == KM_API_LIST_OFFSETS ? 1
							   : 0;
		km_wire_rd_init(&r, &fr->chain, fr->body, fr->body_len,
				&km_wire_limits_default);
		rc = km_resphdr_decode(&r, f->api_key, ver, &corr);
		if (rc < 0 || corr != f->corr) {
			set_failed(f, "response header: %s, correlation %d "
				      "(expected %d)",
				   km_strerror(rc), (int)corr, (int)f->corr);
			return;
		}
		f->frame = fr;
		switch (f->api_key) {
		case KM_API_API_VERSIONS:
			on_apiversions(f, &r);
			break;
		case KM_API_METADATA:
			on_metadata(f, &r);
			break;
		case KM_API_LIST_OFFSETS:
			on_listoffsets(f, &r);
			break;
		case KM_API_FETCH:
			on_fetch(f, &r);
			break;
		default:
			break;
		}
		if (f->phase != KM_FPH_APPEND) {
			km_kframe_release(&f->kf);
			f->frame = NULL;
		}
	}
}

/* ---- connection callbacks ---- */

static void on_connect(struct km_net_conn *c, int res)
{
	struct km_fetcher *f = km_net_conn_ctx(c);

	if (res < 0) {
		f->conn = NULL;
		schedule_retry(f);
		return;
	}
	send_next(f, KM_FPH_APIVERSIONS);
}

static void on_recv(struct km_net_conn *c, const struct km_chain *data,
		    const uint32_t *buf_ids)
{
	struct km_fetcher *f = km_net_conn_ctx(c);

	if (km_kframe_push(&f->kf, data, buf_ids) < 0) {
		drop_conn(f);
		return;
	}
	pump(f);
}

static void on_close(struct km_net_conn *c, int reason)
{
	struct km_fetcher *f = km_net_conn_ctx(c);

	(void)reason;
	f->conn = NULL;
	f->send_busy = false;
	if (f->frame) {
		/* Writes may still read the held frame: append_more()
		 * releases it once they are done, then reconnects. */
		f->want_reconnect = true;
		return;
	}
	km_kframe_reset(&f->kf);
	schedule_retry(f);
}

/* ---- driving ---- */

int km_fetcher_step(struct km_fetcher *f)
{
	int rc;

	if (f->frame) {
		append_more(f);
		return 1;
	}
	if (f->phase == KM_FPH_FAILED) {
		if (!f->conn && f->kf.n_segs)
			km_kframe_reset(&f->kf);
		return -1;
	}
	if (f->phase == KM_FPH_IDLE && !f->conn) {
		if (now_ms() < f->retry_at_ms)
			return 0;
		if (f->stats.fetches > 0 || f->retry_at_ms != 0)
			f->stats.reconnects++;
		f->want_reconnect = false;
		f->send_pending = false;
		f->send_busy = false;
		km_kframe_init(&f->kf, f->net, FRAME_BYTES_MAX);
		f->phase = KM_FPH_CONNECT;
		rc = km_net_connect(f->net, f->cfg.host, f->cfg.port,
				    &fetcher_handler, f, &f->conn);
		if (rc < 0) {
			f->conn = NULL;
			if (rc == -EINVAL) {
				set_failed(f, "bad bootstrap host %s",
					   f->cfg.host);
				return -1;
			}
			schedule_retry(f);
		}
		return 1;
	}
	/* A request deferred behind a busy send buffer. */
	if (f->conn && f->send_pending && !f->send_busy &&
	    !f->want_reconnect) {
		send_next(f, f->phase);
		return 1;
	}
	if (f->conn && !f->want_reconnect)
		pump(f);
	return 0;
}

void km_fetcher_cut(struct km_fetcher *f)
{
	if (f->conn)
		drop_conn(f);
}

void km_fetcher_stop(struct km_fetcher *f)
{
	if (f->phase != KM_FPH_FAILED) {
		f->phase = KM_FPH_FAILED;
		snprintf(f->reason, sizeof(f->reason), "stopped");
	}
	if (f->conn)
		km_net_abort(f->conn);
}

bool km_fetcher_idle(const struct km_fetcher *f)
{
	return !f->conn && f->kf.n_segs == 0 && !f->frame;
}
