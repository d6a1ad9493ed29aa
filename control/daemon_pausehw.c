/* A paused partition has no fetcher, so nothing in the workers learns the
 * source's high watermark any more, and status showed a stale SOURCE_HW
 * and LAG 0 while the source moved on. The control loop asks the source
 * itself for the partitions paused while following source.bootstrap.servers:
 * Metadata for their leaders, then ListOffsets (latest: the high watermark)
 * at each leader, once a second, one short connection per question. A
 * source that does not answer is asked again after PAUSED_HW_RETRY_MS, and
 * every wait is bounded by PAUSED_HW_TIMEOUT_MS, so the control thread
 * (kmirrorctl's answers) is never held long. A resumed partition's new
 * fetcher publishes its own figure. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/errors.h"
#include "control/daemon_pvt.h"
#include "control/kclient.h"

#define PAUSED_HW_EVERY_MS 1000
#define PAUSED_HW_RETRY_MS 5000
#define PAUSED_HW_TIMEOUT_MS 500
#define META_VERSION 1
#define LISTOFF_VERSION 1
#define BROKERS_MAX 64u
#define PARTS_MAX 16384u
#define NODES_MAX 65536u

struct meta_arrays {
	struct km_wire_name names[KM_CONFIG_TOPICS_MAX];
	struct km_metadata_broker brokers[BROKERS_MAX];
	struct km_metadata_topic topics[KM_CONFIG_TOPICS_MAX];
	struct km_metadata_part parts[PARTS_MAX];
	int32_t nodes[NODES_MAX];
	struct km_metadata_resp m;
};

static int enc_meta(struct km_wire_wr *w, int16_t v, const void *m)
{
	return km_metadata_req_encode(w, v, m);
}

static int enc_listoff(struct km_wire_wr *w, int16_t v, const void *m)
{
	return km_listoffsets_req_encode(w, v, m);
}

static bool paused_here(const struct km_daemon *d, uint32_t i)
{
	return d->mirrored[i] && d->mstates[i].state == KM_MSTATE_PAUSED &&
	       d->mstates[i].source[0] == '\0';
}

/* Metadata for the topics of the paused partitions, from the first
 * bootstrap address that answers, into a->m. */
static int ask_leaders(const struct km_daemon *d, struct meta_arrays *a)
{
	struct km_metadata_req q = { .topics = a->names,
				     .topics_max = KM_CONFIG_TOPICS_MAX };
	int rc = -ENOTCONN;

	for (uint32_t i = 0; i < d->table.n &&
			     q.n_topics < (int32_t)KM_CONFIG_TOPICS_MAX; i++) {
		const char *t = d->table.parts[i].topic;
		bool named = false;

		for (int32_t k = 0; k < q.n_topics && !named; k++)
			named = strcmp(a->names[k].s, t) == 0;
		if (paused_here(d, i) && !named)
			km_wire_name_set(&a->names[q.n_topics++], t);
	}
	a->m = (struct km_metadata_resp){
		.brokers = a->brokers, .brokers_max = BROKERS_MAX,
		.topics = a->topics, .topics_max = KM_CONFIG_TOPICS_MAX,
		.parts = a->parts, .parts_max = PARTS_MAX,
		.nodes = a->nodes, .nodes_max = NODES_MAX,
	};
	for (uint32_t b = 0; rc < 0 && b < d->cfg->bootstrap_count; b++) {
		struct km_kclient c;
		struct km_wire_rd r;

		if ((rc = km_kclient_open(&c, &d->cfg->bootstrap[b],
					  PAUSED_HW_TIMEOUT_MS)) < 0)
			continue;
		if ((rc = km_kclient_call(&c, KM_API_METADATA, META_VERSION,
					  enc_meta, &q, &r)) == 0)
			rc = km_metadata_resp_decode(&r, META_VERSION, &a->m);
		km_kclient_close(&c);
	}
	return rc;
}

/* The address of partition p's leader in a->m: 0, or KM_ESOURCE. */
static int leader_of(const struct meta_arrays *a, const struct km_part *p,
		     struct km_config_addr *out)
{
	const struct km_metadata_resp *m = &a->m;

	for (uint32_t t = 0; t < m->n_topics; t++) {
		const struct km_metadata_topic *mt = &m->topics[t];

		if (mt->error_code != 0 || strcmp(mt->name.s, p->topic) != 0)
			continue;
		for (uint32_t k = mt->first; k < mt->first + mt->count; k++) {
			if (m->parts[k].partition != p->partition ||
			    m->parts[k].error_code != 0)
				continue;
			for (uint32_t b = 0; b < m->n_brokers; b++) {
				if (m->brokers[b].node_id != m->parts[k].leader_id)
					continue;
				snprintf(out->host, sizeof(out->host), "%.*s",
					 (int)m->brokers[b].host.len,
					 m->brokers[b].host.s);
				out->port = (uint16_t)m->brokers[b].port;
				return 0;
			}
		}
	}
	return KM_ESOURCE;
}

/* ListOffsets (latest) for p at its leader: its high watermark. */
static int ask_hw(const struct km_part *p, const struct km_config_addr *leader,
		  int64_t *hw)
{
	struct km_proto_topic topic = { .first = 0, .count = 1 };
	struct km_listoffsets_req_part qp = { .partition = p->partition,
					      .current_leader_epoch = -1,
					      .timestamp = -1,
					      .max_num_offsets = 1 };
	struct km_listoffsets_req q = { .replica_id = -1, .topics = &topic,
					.topics_max = 1, .n_topics = 1,
					.parts = &qp, .parts_max = 1,
					.n_parts = 1 };
	struct km_proto_topic rt;
	struct km_listoffsets_resp_part rp;
	struct km_listoffsets_resp m = { .topics = &rt, .topics_max = 1,
					 .parts = &rp, .parts_max = 1 };
	struct km_kclient c;
	struct km_wire_rd r;
	int rc;

	km_wire_name_set(&topic.name, p->topic);
	if ((rc = km_kclient_open(&c, leader, PAUSED_HW_TIMEOUT_MS)) < 0)
		return rc;
	if ((rc = km_kclient_call(&c, KM_API_LIST_OFFSETS, LISTOFF_VERSION,
				  enc_listoff, &q, &r)) == 0)
		rc = km_listoffsets_resp_decode(&r, LISTOFF_VERSION, &m);
	km_kclient_close(&c);
	if (rc == 0 && (m.n_parts != 1 || rp.error_code != 0))
		rc = KM_ESOURCE;
	if (rc == 0)
		*hw = rp.offset;
	return rc;
}

/* From the control loop: every PAUSED_HW_EVERY_MS while a partition is
 * paused. */
void km_daemon_watch_paused_hw(struct km_daemon *d)
{
	uint64_t now = km_clock_ms();
	struct meta_arrays *a;
	bool any = false, failed = false;

	for (uint32_t i = 0; i < d->table.n && !any; i++)
		any = paused_here(d, i);
	if (!any || now < d->paused_hw_next_ms)
		return;
	if ((a = malloc(sizeof(*a))) == NULL)
		return;
	failed = ask_leaders(d, a) < 0;
	for (uint32_t i = 0; i < d->table.n && !failed; i++) {
		struct km_part *p = &d->table.parts[i];
		struct km_config_addr leader;
		int64_t hw;

		if (!paused_here(d, i))
			continue;
		if (leader_of(a, p, &leader) == 0 && ask_hw(p, &leader, &hw) == 0)
			atomic_store_explicit(&p->stats.source_hw, hw,
					      memory_order_relaxed);
		else
			failed = true;
	}
	free(a);
	d->paused_hw_next_ms = km_clock_ms() + (failed ? PAUSED_HW_RETRY_MS
						       : PAUSED_HW_EVERY_MS);
}
