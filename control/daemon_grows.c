/* The synced groups in status and metrics. A row's "offset" is the one
 * committed here now, read with OffsetFetch from kmirrord's own listener
 * (the answer a consumer of the group gets), not the one the last sync
 * stored: after a failover the group commits here and the sync has ended,
 * so the sync's figure would freeze. "synced_offset" keeps that one. A
 * partition that no longer follows the source (stopped, or failed back
 * from another host) says "stopped": its offsets are this cluster's own. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/errors.h"
#include "control/daemon_pvt.h"
#include "control/kclient.h"
#include "kafka/proto_group.h"

#define LIVE_TIMEOUT_MS 1000
#define OFFFETCH_VERSION 3 /* the first with a null Topics (all) and v2's error */

#define LOAD(p, f) atomic_load_explicit(&(p)->stats.f, memory_order_relaxed)

/* Committed here: the partitions of one group, from one OffsetFetch. */
struct live {
	struct km_proto_topic *topics;
	struct km_offfetch_resp_part *parts;
	struct km_offfetch_resp m;
	int rc;
};

static int enc_offfetch(struct km_wire_wr *w, int16_t v, const void *m)
{
	return km_offfetch_req_encode(w, v, m);
}

/* Our own listener: a wildcard one is reached on loopback. */
static void self_addr(const struct km_daemon *d, struct km_config_addr *a)
{
	const char *h = d->cfg->listener.host;

	*a = d->cfg->listener;
	if (h[0] == '\0' || strcmp(h, "0.0.0.0") == 0 || strcmp(h, "::") == 0)
		snprintf(a->host, sizeof(a->host), "127.0.0.1");
	a->port = d->kafka_port;
}

/* OffsetFetch of every partition of group on c; l->rc says how it went. */
static void live_fetch(struct km_daemon *d, struct km_kclient *c,
		       const char *group, struct live *l)
{
	uint32_t n = d->table.n + 1;
	struct km_offfetch_req q = { .all_topics = true };
	struct km_wire_rd r;

	l->topics = calloc(n, sizeof(*l->topics));
	l->parts = calloc(n, sizeof(*l->parts));
	l->m = (struct km_offfetch_resp){ .topics = l->topics, .topics_max = n,
					  .parts = l->parts, .parts_max = n };
	km_wire_name_set(&q.group_id, group);
	l->rc = l->topics && l->parts ? 0 : -ENOMEM;
	if (l->rc == 0 &&
	    (l->rc = km_kclient_call(c, KM_API_OFFSET_FETCH, OFFFETCH_VERSION,
				     enc_offfetch, &q, &r)) == 0 &&
	    (l->rc = km_offfetch_resp_decode(&r, OFFFETCH_VERSION, &l->m)) == 0 &&
	    l->m.error_code != 0)
		l->rc = KM_ESOURCE;
}

static void live_free(struct live *l)
{
	free(l->topics);
	free(l->parts);
}

/* The offset committed here for topic:partition (-1: none), or why not. */
static int live_offset(const struct live *l, const char *topic,
		       int32_t partition, int64_t *out)
{
	*out = -1;
	if (l->rc < 0)
		return l->rc;
	for (uint32_t t = 0; t < l->m.n_topics; t++) {
		if (strcmp(l->topics[t].name.s, topic) != 0)
			continue;
		for (uint32_t k = l->topics[t].first;
		     k < l->topics[t].first + l->topics[t].count; k++)
			if (l->parts[k].partition == partition &&
			    l->parts[k].error_code == 0)
				*out = l->parts[k].committed_offset;
	}
	return 0;
}

/* Does the partition still take the source's data and groups? */
static bool follows(const struct km_daemon *d, const char *topic, int32_t part)
{
	const struct km_part *p = km_part_find(&d->table, topic, part);
	uint32_t i = p ? (uint32_t)(p - d->table.parts) : 0;
	enum km_mstate st = p ? d->mstates[i].state : KM_MSTATE_STOPPED;

	return p != NULL && d->mirrored[i] && d->mstates[i].source[0] == '\0' &&
	       (st == KM_MSTATE_MIRRORING || st == KM_MSTATE_PAUSED ||
		st == KM_MSTATE_FAILED);
}

static const char *sync_word(const struct km_daemon *d,
			     const struct km_daemon_gsync *g,
			     const struct km_group_sync_part *sp)
{
	if (sp != NULL ? !follows(d, sp->topic, sp->partition) : d->gsync_ended)
		return "stopped";
	if (g->rc < 0)
		return km_strerror(g->rc);
	if (g->s.active)
		return "held: members here";
	/* Not "synced": -1 equal to -1 reads as a group in step. */
	return sp == NULL || sp->source_offset < 0 ? "no offsets on the source"
						   : "synced";
}

/* A synced group's partition: what the source held at the last sync,
 * what that sync stored here, what is committed here now and its lag
 * behind our log end. */
static json_t *group_row(struct km_daemon *d, const struct km_daemon_gsync *g,
			 const struct km_group_sync_part *sp,
			 const struct live *l, uint64_t now)
{
	struct km_part *p = sp ? km_part_find(&d->table, sp->topic, sp->partition)
			       : NULL;
	int64_t leo = p ? LOAD(p, leo) : -1, here = -1;
	char name[KM_WIRE_NAME_BYTES_MAX + 16] = "-";
	int lrc = sp ? live_offset(l, sp->topic, sp->partition, &here) : 0;
	json_t *row;

	if (sp)
		snprintf(name, sizeof(name), "%s:%d", sp->topic, sp->partition);
	row = json_pack("{s:s, s:s, s:I, s:I, s:I, s:s, s:I, s:I}", "group",
			g->s.group, "partition", name, "source_offset",
			(json_int_t)(sp ? sp->source_offset : -1), "offset",
			(json_int_t)here, "lag",
			(json_int_t)(here >= 0 && leo > here ? leo - here : 0),
			"sync", sync_word(d, g, sp), "synced_offset",
			(json_int_t)(sp ? sp->stored : -1), "synced_ms_ago",
			(json_int_t)(now - g->at_ms));
	if (row != NULL && lrc < 0)
		json_object_set_new(row, "offset_error", json_string(km_strerror(lrc)));
	return row;
}

/* Every synced group's committed offsets here, over one connection. */
static struct live *live_all(struct km_daemon *d)
{
	struct live *all = calloc(d->n_gsync ? d->n_gsync : 1, sizeof(*all));
	struct km_config_addr self;
	struct km_kclient c;
	int rc;

	if (all == NULL)
		return NULL;
	self_addr(d, &self);
	rc = d->n_gsync ? km_kclient_open_plain(&c, &self, LIVE_TIMEOUT_MS)
			 : -ENOENT;
	for (uint32_t i = 0; i < d->n_gsync; i++) {
		if (rc == 0)
			live_fetch(d, &c, d->gsync[i].s.group, &all[i]);
		else
			all[i].rc = rc;
	}
	if (rc == 0)
		km_kclient_close(&c);
	return all;
}

/* The group's rows: the partitions synced, then those committed here
 * that the source never had (a group's first commit after the failover,
 * source_offset -1). malloc'd, *n of them; NULL on no memory. */
static struct km_group_sync_part *rows_of(const struct km_daemon_gsync *g,
					  const struct live *l, uint32_t *n)
{
	uint32_t extra = l->rc == 0 ? l->m.n_parts : 0;
	struct km_group_sync_part *all = calloc(g->s.n_parts + extra + 1, sizeof(*all));

	*n = 0;
	if (all == NULL)
		return NULL;
	if (g->s.n_parts > 0) /* parts is NULL before the first answer */
		memcpy(all, g->s.parts, g->s.n_parts * sizeof(*all));
	*n = g->s.n_parts;
	for (uint32_t t = 0; extra > 0 && t < l->m.n_topics; t++)
		for (uint32_t k = l->topics[t].first;
		     k < l->topics[t].first + l->topics[t].count; k++) {
			bool synced = false;

			for (uint32_t j = 0; !synced && j < g->s.n_parts; j++)
				synced = g->s.parts[j].partition == l->parts[k].partition &&
					 strcmp(g->s.parts[j].topic, l->topics[t].name.s) == 0;
			if (synced || l->parts[k].committed_offset < 0)
				continue;
			snprintf(all[*n].topic, sizeof(all[*n].topic), "%s",
				 l->topics[t].name.s);
			all[*n].partition = l->parts[k].partition;
			all[*n].source_offset = all[*n].stored = -1;
			(*n)++;
		}
	return all;
}

json_t *km_daemon_groups_status(struct km_daemon *d, uint64_t now)
{
	json_t *rows = json_array();
	struct live *l = live_all(d);

	for (uint32_t i = 0; rows != NULL && l != NULL && i < d->n_gsync; i++) {
		const struct km_daemon_gsync *g = &d->gsync[i];
		uint32_t n;
		struct km_group_sync_part *all = rows_of(g, &l[i], &n);

		if (n == 0)
			json_array_append_new(rows, group_row(d, g, NULL, &l[i], now));
		for (uint32_t k = 0; k < n; k++)
			json_array_append_new(rows, group_row(d, g, &all[k], &l[i], now));
		free(all);
	}
	for (uint32_t i = 0; l != NULL && i < d->n_gsync; i++)
		live_free(&l[i]);
	free(l);
	return rows;
}

static void metric_head(FILE *f, const char *name, const char *type,
			const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A group id as a Prometheus label value: \\, \" and \\n escaped. */
static void put_group(FILE *f, const char *g)
{
	for (; *g != '\0'; g++) {
		if (*g == '\\' || *g == '"')
			fputc('\\', f);
		if (*g == '\n')
			fputs("\\n", f);
		else
			fputc(*g, f);
	}
}

/* One gauge over every synced group's rows: which 0 the offset committed
 * here, 1 the source's at the last sync, 2 the lag of the one here. */
static void group_gauge(FILE *f, struct km_daemon *d, const struct live *l,
			const char *name, int which)
{
	for (uint32_t i = 0; i < d->n_gsync; i++) {
		const struct km_daemon_gsync *g = &d->gsync[i];
		uint32_t n;
		struct km_group_sync_part *all = rows_of(g, &l[i], &n);

		for (uint32_t k = 0; k < n; k++) {
			const struct km_group_sync_part *sp = &all[k];
			struct km_part *p = km_part_find(&d->table, sp->topic,
							 sp->partition);
			int64_t here, v;

			if (live_offset(&l[i], sp->topic, sp->partition, &here) < 0 &&
			    which != 1)
				continue; /* unknown: no sample rather than a wrong one */
			v = which == 0 ? here : which == 1 ? sp->source_offset
			    : here >= 0 && p && LOAD(p, leo) > here ? LOAD(p, leo) - here : 0;
			fprintf(f, "%s{group=\"", name);
			put_group(f, g->s.group);
			fprintf(f, "\",topic=\"%s\",partition=\"%d\"} %" PRId64 "\n",
				sp->topic, sp->partition, v);
		}
		free(all);
	}
}

char *km_daemon_groups_metrics(struct km_daemon *d)
{
	struct live *l = live_all(d);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = l ? open_memstream(&buf, &len) : NULL;

	if (f != NULL) {
		metric_head(f, "kmirror_group_committed_offset", "gauge",
			    "Offset committed here for a synced group (-1 none), as OffsetFetch answers.");
		group_gauge(f, d, l, "kmirror_group_committed_offset", 0);
		metric_head(f, "kmirror_group_source_offset", "gauge",
			    "Offset the source held at the group's last sync.");
		group_gauge(f, d, l, "kmirror_group_source_offset", 1);
		metric_head(f, "kmirror_group_lag", "gauge",
			    "Log end here minus the offset committed here.");
		group_gauge(f, d, l, "kmirror_group_lag", 2);
		metric_head(f, "kmirror_group_sync_errors_total", "counter",
			    "Offset syncs of the group from the source that failed.");
		for (uint32_t i = 0; i < d->n_gsync; i++) {
			fprintf(f, "kmirror_group_sync_errors_total{group=\"");
			put_group(f, d->gsync[i].s.group);
			fprintf(f, "\"} %" PRIu64 "\n", d->gsync[i].errors);
		}
		metric_head(f, "kmirror_group_list_errors_total", "counter",
			    "ListGroups of the source that failed (groups patterns, groups.include).");
		fprintf(f, "kmirror_group_list_errors_total %" PRIu64 "\n",
			d->gsync_list_errors);
		fclose(f);
	}
	for (uint32_t i = 0; l != NULL && i < d->n_gsync; i++)
		live_free(&l[i]);
	free(l);
	return buf;
}
