/* Offset sync from the source (issue 7). Every group.sync.interval.ms the
 * control thread asks the source, for each group `groups` names,
 * FindCoordinator then OffsetFetch for the mirrored partitions that still
 * follow the source (MIRRORING, PAUSED, FAILED; not after a stop, nor one
 * failed back from another host), and hands the answer to the front-end's
 * group coordinator, which stores it only while the group has no members
 * here (km_frontend_group_sync). Offsets are identical on both sides: no
 * translation. The last answer per group stays for status.
 *
 * Patterns (fnmatch(3), e.g. `app-*`) are matched against ListGroups of
 * each source.bootstrap.servers address. */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/errors.h"
#include "common/log.h"
#include "control/daemon_pvt.h"
#include "control/kclient.h"
#include "kafka/proto_group.h"

#define SYNC_TIMEOUT_MS 3000
#define FINDCOORD_VERSION 1
#define OFFFETCH_VERSION 3
#define LISTGROUPS_VERSION 1
#define LIST_MAX 1024u

static int enc_findcoord(struct km_wire_wr *w, int16_t v, const void *m)
{
	return km_findcoord_req_encode(w, v, m);
}

static int enc_offfetch(struct km_wire_wr *w, int16_t v, const void *m)
{
	return km_offfetch_req_encode(w, v, m);
}

static int enc_listgroups(struct km_wire_wr *w, int16_t v, const void *m)
{
	return km_listgroups_req_encode(w, v, m);
}

/* Does the partition still follow source.bootstrap.servers? */
static bool follows(const struct km_daemon *d, uint32_t i)
{
	enum km_mstate st = d->mstates[i].state;

	return d->mirrored[i] && d->mstates[i].source[0] == '\0' &&
	       (st == KM_MSTATE_MIRRORING || st == KM_MSTATE_PAUSED ||
		st == KM_MSTATE_FAILED);
}

/* The group's coordinator on the source. */
static int find_coordinator(struct km_daemon *d, const char *group,
			    struct km_config_addr *out)
{
	struct km_findcoord_req q = { .key_type = 0 };
	struct km_findcoord_resp m;
	int rc = -ENOTCONN;

	km_wire_name_set(&q.key, group);
	for (uint32_t b = 0; rc < 0 && b < d->cfg->bootstrap_count; b++) {
		struct km_kclient c;
		struct km_wire_rd r;

		if ((rc = km_kclient_open(&c, &d->cfg->bootstrap[b], SYNC_TIMEOUT_MS)) < 0)
			continue;
		if ((rc = km_kclient_call(&c, KM_API_FIND_COORDINATOR, FINDCOORD_VERSION,
					  enc_findcoord, &q, &r)) == 0 &&
		    (rc = km_findcoord_resp_decode(&r, FINDCOORD_VERSION, &m)) == 0 &&
		    m.error_code != 0)
			rc = KM_ESOURCE;
		km_kclient_close(&c);
	}
	if (rc == 0) {
		snprintf(out->host, sizeof(out->host), "%.*s",
			 (int)sizeof(out->host) - 1, m.host.s);
		out->port = (uint16_t)m.port;
	}
	return rc;
}

/* The request's topics: every partition that follows the source. */
static void fill_request(struct km_daemon *d, struct km_offfetch_req *q)
{
	for (uint32_t i = 0; i < d->table.n; i++) {
		const struct km_part *p = &d->table.parts[i];
		struct km_proto_topic *t = q->n_topics ? &q->topics[q->n_topics - 1] : NULL;

		if (!follows(d, i) || q->n_parts == q->parts_max)
			continue;
		if (t == NULL || strcmp(t->name.s, p->topic) != 0) {
			if (q->n_topics == q->topics_max)
				continue;
			t = &q->topics[q->n_topics++];
			km_wire_name_set(&t->name, p->topic);
			t->first = q->n_parts;
			t->count = 0;
		}
		q->parts[q->n_parts++] = p->partition;
		t->count++;
	}
}

/* OffsetFetch on the coordinator, into s (parts allocated). */
static int fetch_offsets(struct km_daemon *d, const struct km_config_addr *coord,
			 struct km_group_sync *s)
{
	uint32_t n = d->table.n ? d->table.n : 1;
	struct km_proto_topic *qt = calloc(n, sizeof(*qt)), *rt = calloc(n, sizeof(*rt));
	int32_t *qp = calloc(n, sizeof(*qp));
	struct km_offfetch_resp_part *rp = calloc(n, sizeof(*rp));
	struct km_offfetch_req q = { .topics = qt, .topics_max = n, .parts = qp, .parts_max = n };
	struct km_offfetch_resp m = { .topics = rt, .topics_max = n, .parts = rp, .parts_max = n };
	struct km_kclient c;
	struct km_wire_rd r;
	int rc = qt && rt && qp && rp ? 0 : -ENOMEM;

	km_wire_name_set(&q.group_id, s->group);
	if (rc == 0)
		fill_request(d, &q);
	if (rc == 0 && (rc = km_kclient_open(&c, coord, SYNC_TIMEOUT_MS)) == 0) {
		if ((rc = km_kclient_call(&c, KM_API_OFFSET_FETCH, OFFFETCH_VERSION,
					  enc_offfetch, &q, &r)) == 0 &&
		    (rc = km_offfetch_resp_decode(&r, OFFFETCH_VERSION, &m)) == 0 &&
		    m.error_code != 0)
			rc = KM_ESOURCE;
		km_kclient_close(&c);
	}
	s->parts = rc == 0 ? calloc(m.n_parts ? m.n_parts : 1, sizeof(*s->parts)) : NULL;
	s->n_parts = 0;
	for (uint32_t t = 0; s->parts != NULL && t < m.n_topics; t++)
		for (uint32_t k = rt[t].first; k < rt[t].first + rt[t].count; k++) {
			struct km_group_sync_part *sp = &s->parts[s->n_parts];

			if (rp[k].error_code != 0 || rp[k].committed_offset < 0)
				continue;
			snprintf(sp->topic, sizeof(sp->topic), "%s", rt[t].name.s);
			sp->partition = rp[k].partition;
			sp->source_offset = rp[k].committed_offset;
			sp->leader_epoch = rp[k].committed_leader_epoch;
			s->n_parts++;
		}
	if (rc == 0 && s->parts == NULL)
		rc = -ENOMEM;
	free(qt);
	free(rt);
	free(qp);
	free(rp);
	return rc;
}

static struct km_daemon_gsync *gsync_slot(struct km_daemon *d, const char *group)
{
	struct km_daemon_gsync *n;

	for (uint32_t i = 0; i < d->n_gsync; i++)
		if (strcmp(d->gsync[i].s.group, group) == 0)
			return &d->gsync[i];
	if ((n = realloc(d->gsync, (d->n_gsync + 1) * sizeof(*n))) == NULL)
		return NULL;
	d->gsync = n;
	n = &d->gsync[d->n_gsync++];
	memset(n, 0, sizeof(*n));
	snprintf(n->s.group, sizeof(n->s.group), "%s", group);
	return n;
}

static void sync_group(struct km_daemon *d, const char *group)
{
	struct km_daemon_gsync *g = gsync_slot(d, group);
	struct km_group_sync s = { .parts = NULL };
	struct km_config_addr coord;
	struct km_worker_reply reply = { .done = 0 };
	int rc;

	if (g == NULL)
		return;
	snprintf(s.group, sizeof(s.group), "%s", group);
	if ((rc = find_coordinator(d, group, &coord)) == 0 &&
	    (rc = fetch_offsets(d, &coord, &s)) == 0 &&
	    (rc = km_worker_group_sync(d->workers[0], &s, &reply)) == 0)
		rc = km_worker_wait(d->ctl_efd, &reply, SYNC_TIMEOUT_MS * 2);
	if (rc == -ETIMEDOUT && !atomic_load(&reply.done))
		return; /* s is the worker's until it answers: leak, not reuse */
	if (rc < 0 && rc != g->rc)
		KM_WARN("groups", "group %s: offset sync from the source: %s",
			group, km_strerror(rc));
	g->rc = rc;
	g->at_ms = km_clock_ms();
	if (rc == 0) {
		free(g->s.parts);
		g->s = s;
	} else {
		free(s.parts);
	}
}

static bool is_pattern(const char *g)
{
	return strpbrk(g, "*?[") != NULL;
}

/* Groups on the source matching the patterns, from ListGroups of every
 * bootstrap address; calls sync_group once per distinct id. */
static void sync_patterns(struct km_daemon *d)
{
	static struct km_listgroups_group gs[LIST_MAX];
	struct km_listgroups_req q = { .n_states = 0 };

	for (uint32_t b = 0; b < d->cfg->bootstrap_count; b++) {
		struct km_listgroups_resp m = { .groups = gs, .groups_max = LIST_MAX };
		struct km_kclient c;
		struct km_wire_rd r;
		int rc = km_kclient_open(&c, &d->cfg->bootstrap[b], SYNC_TIMEOUT_MS);

		if (rc < 0)
			continue;
		if ((rc = km_kclient_call(&c, KM_API_LIST_GROUPS, LISTGROUPS_VERSION,
					  enc_listgroups, &q, &r)) == 0)
			rc = km_listgroups_resp_decode(&r, LISTGROUPS_VERSION, &m);
		km_kclient_close(&c);
		for (uint32_t i = 0; rc == 0 && i < m.n_groups; i++)
			for (uint32_t k = 0; k < d->cfg->groups_count; k++)
				if (is_pattern(d->cfg->groups[k]) &&
				    fnmatch(d->cfg->groups[k], gs[i].group_id.s, 0) == 0) {
					sync_group(d, gs[i].group_id.s);
					break;
				}
	}
}

static bool any_follows(const struct km_daemon *d)
{
	for (uint32_t i = 0; i < d->table.n; i++)
		if (follows(d, i))
			return true;
	return false;
}

/* Once per group.sync.interval.ms, from the control loop. Once no
 * partition follows the source (all stopped), the sync has ended: the last
 * answers stay in status, marked so. */
void km_daemon_sync_groups(struct km_daemon *d)
{
	uint64_t now = km_clock_ms();
	bool patterns = false;

	if (d->cfg->groups_count == 0 || now < d->gsync_next_ms)
		return;
	d->gsync_next_ms = now + d->cfg->group_sync_interval_ms;
	d->gsync_ended = !any_follows(d);
	if (d->gsync_ended)
		return;
	for (uint32_t k = 0; k < d->cfg->groups_count; k++) {
		if (is_pattern(d->cfg->groups[k]))
			patterns = true;
		else
			sync_group(d, d->cfg->groups[k]);
	}
	if (patterns)
		sync_patterns(d);
}

void km_daemon_groups_free(struct km_daemon *d)
{
	for (uint32_t i = 0; i < d->n_gsync; i++)
		free(d->gsync[i].s.parts);
	free(d->gsync);
	d->gsync = NULL;
	d->n_gsync = 0;
}
