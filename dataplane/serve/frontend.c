/* The Kafka front-end's lifecycle: create, listen, the loop's tick and
 * deadline over the connections, stop, destroy; everything it allocates
 * (STYLE 9). See frontend.h; the pipeline is frontend_conn.c, the dispatch
 * frontend_dispatch.c, the slots and response ring are described in
 * frontend_pvt.h. */
#include "dataplane/serve/frontend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/km_assert.h"
#include "common/log.h"
#include "dataplane/net/snet.h"
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

/* Distinct topics of the table, and the bytes of a Metadata answer
 * naming every partition (response header, broker, topics, partitions),
 * room included for the partitions discovery may add up to the table's
 * capacity (each a topic of its own, at most the longest name). */
static uint32_t table_topics(const struct km_part_table *t, uint32_t *bound)
{
	const struct km_part_index *ix = km_part_index_get(t);
	uint32_t n = 0, extra = t->cap > ix->n ? t->cap - ix->n : 0;

	*bound = 512;
	for (uint32_t i = 0; i < ix->n; i++) {
		if (i == 0 || strcmp(ix->p[i]->topic, ix->p[i - 1]->topic)) {
			n++;
			*bound += 16 + (uint32_t)strlen(ix->p[i]->topic);
		}
		*bound += 40;
	}
	*bound += extra * (56 + KM_WIRE_NAME_BYTES_MAX);
	return n + extra;
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
	uint32_t n = fe->table->cap > 0 ? fe->table->cap : 1;

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
	fe->md_ids = calloc(fe->parts_max, sizeof(*fe->md_ids));
	fe->lo_topics = calloc(fe->topics_max, sizeof(*fe->lo_topics));
	fe->lo_req = calloc(fe->parts_max, sizeof(*fe->lo_req));
	fe->lo_resp = calloc(fe->parts_max, sizeof(*fe->lo_resp));
	fe->ab_tmp = calloc(KM_FRONTEND_ABORTED_MAX, sizeof(*fe->ab_tmp));
	fe->dc_res = calloc(fe->topics_max, sizeof(*fe->dc_res));
	fe->admin_jobs = calloc(KM_FRONTEND_ADMIN_JOBS, sizeof(*fe->admin_jobs));
	if (!fe->admin_jobs)
		return -ENOMEM;
	if (!fe->staging || !fe->names || !fe->md_topics || !fe->md_parts ||
	    !fe->md_seen || !fe->md_ids || !fe->lo_topics || !fe->lo_req || !fe->lo_resp ||
	    !fe->ab_tmp || !fe->dc_res)
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
	free(fe->md_ids);
	free(fe->md_topics);
	free(fe->md_parts);
	free(fe->md_seen);
	free(fe->lo_topics);
	free(fe->lo_req);
	free(fe->lo_resp);
	free(fe->ab_tmp);
	free(fe->dc_res);
	free(fe->admin_jobs);
	km_frontend_groups_free(fe);
	km_frontend_txn_free(fe);
	km_frontend_txnoff_free(fe);
	km_frontend_sasl_free(fe);
	km_frontend_fsess_free(fe);
	free(fe);
}

/* Stop accepting on every listener. */
static void unlisten_all(struct km_frontend *fe)
{
	for (uint32_t i = 0; i < fe->n_lsns; i++)
		if (fe->lsns[i].lsn != NULL) {
			km_net_unlisten(fe->lsns[i].lsn);
			fe->lsns[i].lsn = NULL;
		}
	fe->lsn = NULL;
}

/* KIP-227 sessions: the slots, and partition entries for 64 per session
 * on average (at least 4 requests' worth; at most 1 Mi, 56 MiB). */
static int fsess_init(struct km_frontend *fe,
		      const struct km_frontend_config *cfg)
{
	uint32_t slots = cfg->fetch_session_slots == KM_FRONTEND_FSESS_NONE
				 ? 0 : or_default(cfg->fetch_session_slots,
						  KM_FRONTEND_FSESS_DEFAULT);
	uint64_t ents = (uint64_t)slots * 64u;

	if (ents > (1u << 20))
		ents = 1u << 20;
	if (ents < 4ull * fe->parts_max)
		ents = 4ull * fe->parts_max;
	return km_frontend_fsess_init(fe, slots, (uint32_t)ents);
}

int km_frontend_create(const struct km_frontend_config *cfg,
		       struct km_frontend **out)
{
	struct km_frontend *fe;
	int rc = check_config(cfg);

	if (rc < 0)
		return rc;
	km_frontend_dispatch_check();
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
	fe->broker_log = cfg->broker_log;
	fe->upstream = cfg->upstream;
	fe->auto_create_topics = cfg->auto_create_topics;
	fe->acls = cfg->acls;
	if (fe->broker_log.segment_bytes == 0)
		km_log_config_defaults(&fe->broker_log, NULL, NULL, 0);
	fe->broker_log.data_dir = fe->broker_log.topic = NULL;
	set_limits(fe, cfg);
	km_frontend_rx_init(fe, cfg);
	fe->staging_bytes = fe->limits.frame_bytes_max;
	if ((rc = alloc_conns(fe)) < 0 || (rc = alloc_buffers(fe)) < 0 ||
	    (rc = km_frontend_groups_init(fe, cfg)) < 0 ||
	    (rc = km_frontend_txn_init(fe, cfg->txn_ids_max,
					   cfg->txn_id_expiration_ms)) < 0 ||
	    (rc = km_frontend_txnoff_init(fe)) < 0 ||
	    (rc = km_frontend_sasl_init(fe, &cfg->sasl)) < 0 ||
	    (rc = fsess_init(fe, cfg)) < 0) {
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
	unlisten_all(fe);
	for (uint32_t i = 0; i < fe->conns_max; i++)
		KM_ASSERT(fe->conns[i].c == NULL); /* km_frontend_idle() first */
	free_all(fe);
}

/* Kafka's default for a listener: a client's address for us is the one
 * the daemon advertises, the port the one bound. */
int km_frontend_listen(struct km_frontend *fe, const char *ipv4,
		       uint16_t port)
{
	struct km_frontend_listener l = {
		.name = "PLAINTEXT", .protocol = KM_SEC_PLAINTEXT,
		.advertised_port = fe->adv_port,
	};
	int rc;

	if (fe->n_lsns > 0)
		return -EALREADY;
	rc = km_frontend_listen_as(fe, &l, ipv4, port);
	return rc < 0 ? rc : 0;
}

static int listen_on(struct km_frontend *fe, struct fe_listener *fl,
		     const char *ipv4, uint16_t port)
{
	struct km_net *net = fl->cfg.net != NULL ? fl->cfg.net : fe->net;

	if (fl->cfg.net != NULL && fl->cfg.tls != NULL)
		return -EOPNOTSUPP;
	if (km_snet_is(net)) /* a plaintext listener passes through */
		return km_snet_listen(net, ipv4, port, fl->cfg.tls,
				      &km_frontend_conn_handler, fl, &fl->lsn);
	if (fl->cfg.tls != NULL)
		return -EOPNOTSUPP;
	return km_net_listen(net, ipv4, port, &km_frontend_conn_handler, fl,
			     &fl->lsn);
}

int km_frontend_listen_as(struct km_frontend *fe,
			  const struct km_frontend_listener *l,
			  const char *ipv4, uint16_t port)
{
	struct fe_listener *fl;
	int rc;

	if (fe->n_lsns == KM_FRONTEND_LISTENERS_MAX)
		return -ENOBUFS;
	fl = &fe->lsns[fe->n_lsns];
	*fl = (struct fe_listener){ .fe = fe, .cfg = *l };
	if (fl->cfg.advertised_host[0] == '\0')
		snprintf(fl->cfg.advertised_host,
			 sizeof(fl->cfg.advertised_host), "%s", fe->host);
	if ((rc = listen_on(fe, fl, ipv4, port)) < 0) {
		fl->lsn = NULL;
		return rc;
	}
	fl->port = km_net_listener_port(fl->lsn);
	if (fl->cfg.advertised_port == 0)
		fl->cfg.advertised_port = fl->port;
	if (fe->n_lsns == 0) {
		fe->lsn = fl->lsn;
		fe->port = fl->port;
		fe->adv_port = fl->cfg.advertised_port;
	}
	KM_INFO("frontend", "Kafka clients on %s %s:%u (%s), advertised as "
		"%s:%u (node %d, cluster %s, %u partitions)", fl->cfg.name,
		ipv4, fl->port, km_secproto_name(fl->cfg.protocol),
		fl->cfg.advertised_host, fl->cfg.advertised_port,
		(int)fe->node_id, fe->cluster_id,
		km_part_index_get(fe->table)->n);
	return (int)fe->n_lsns++;
}

uint16_t km_frontend_port(const struct km_frontend *fe)
{
	return fe->port;
}

uint16_t km_frontend_listener_port(const struct km_frontend *fe, uint32_t i)
{
	return i < fe->n_lsns ? fe->lsns[i].port : 0;
}

const char *km_frontend_adv_host(const struct fe_conn *fc)
{
	const struct km_frontend *fe = fc->fe;

	return fc->listener < fe->n_lsns
		       ? fe->lsns[fc->listener].cfg.advertised_host : fe->host;
}

uint16_t km_frontend_adv_port(const struct fe_conn *fc)
{
	const struct km_frontend *fe = fc->fe;

	if (fc->listener < fe->n_lsns)
		return fe->lsns[fc->listener].cfg.advertised_port;
	return fe->adv_port ? fe->adv_port : fe->port;
}


void km_frontend_get_stats(const struct km_frontend *fe,
			   struct km_frontend_stats *out)
{
	*out = fe->st;
	out->rx_bufs_charged = fe->rx.charged;
}

/* ---- Fetch records buffers ---- */

uint8_t *km_frontend_fbuf_get(struct km_frontend *fe)
{
	for (uint32_t i = 0; i < fe->n_fbufs; i++)
		if (!fe->fbufs[i].used) {
			fe->fbufs[i].used = true;
			return fe->fbufs[i].mem;
		}
	return NULL;
}

bool km_frontend_fbuf_available(const struct km_frontend *fe)
{
	for (uint32_t i = 0; i < fe->n_fbufs; i++)
		if (!fe->fbufs[i].used)
			return true;
	return false;
}

void km_frontend_fbuf_put(struct km_frontend *fe, uint8_t *mem)
{
	uint32_t i = 0;

	while (i < fe->n_fbufs && fe->fbufs[i].mem != mem)
		i++;
	KM_ASSERT(i < fe->n_fbufs);
	KM_ASSERT(fe->fbufs[i].used);
	fe->fbufs[i].used = false;
}

/* ---- the loop ---- */

/* Both scans stop at the last slot in use (conn_alloc fills from the
 * bottom): the worker ticks the front-end every turn, and a polled fetch
 * network turns it often. */
void km_frontend_tick(struct km_frontend *fe, uint64_t now_ms)
{
	uint32_t left = fe->conns_used;

	km_frontend_groups_tick(fe, now_ms);
	km_frontend_txn_tick(fe, now_ms);
	for (uint32_t i = 0; i < fe->conns_max && left > 0; i++) {
		struct fe_conn *fc = &fe->conns[i];

		if (!fc->used)
			continue;
		left--;
		if (fc->c == NULL || fc->closing)
			continue;
		km_frontend_conn_tick(fc, now_ms);
	}
}

uint64_t km_frontend_next_deadline_ms(const struct km_frontend *fe)
{
	uint64_t next = km_frontend_groups_deadline(fe);
	uint32_t left = fe->conns_used;

	for (uint32_t i = 0; i < fe->conns_max && left > 0; i++) {
		const struct fe_conn *fc = &fe->conns[i];
		uint64_t d;

		if (!fc->used)
			continue;
		left--;
		if (fc->c == NULL || fc->closing)
			continue;
		d = km_frontend_conn_deadline(fc);
		if (d < next)
			next = d;
	}
	return next;
}

void km_frontend_stop(struct km_frontend *fe)
{
	km_frontend_txn_stop(fe);
	unlisten_all(fe);
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
