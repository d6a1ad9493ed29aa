/* Offset sync from the source (issue 7). Every group.sync.interval.ms the
 * control thread asks the source, for each group `groups` names,
 * FindCoordinator then OffsetFetch for the mirrored partitions that still
 * follow the source (MIRRORING, PAUSED, FAILED; not after a stop, nor one
 * failed back from another host), and hands the answer to the front-end's
 * group coordinator, which stores it only while the group has no members
 * here (km_frontend_group_sync). Offsets are identical on both sides: no
 * translation. The last answer per group stays for status.
 *
 * A stop does one last round for the partitions it stopped, once their
 * logs are final up to the cut and before they take writes: a group that
 * committed since the last interval would otherwise resume here where the
 * interval before left it, or at its auto.offset.reset. That round is
 * capped at each cut and bounded by group.sync.stop.timeout.ms in all, so
 * a source that is down cannot hold the failover; the stop's reply says
 * what it synced or why it could not.
 *
 * Patterns (fnmatch(3), e.g. `app-*`) and groups.include (an ERE matching
 * the whole id) are matched against ListGroups of each
 * source.bootstrap.servers address; groups.exclude (an ERE too) wins over
 * both and over ids `groups` names. */
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

/* One round of questions to the source: the periodic one (the partitions
 * that follow it; SYNC_TIMEOUT_MS per connection) or a stop's. */
struct round {
	const bool *only;	/* per table entry, or NULL: those that follow */
	const int64_t *cut;	/* per table entry, with only: the stop's cut */
	uint64_t deadline_ms;	/* km_clock_ms(); 0: none */
	json_t *rows;		/* the stop's report, or NULL */
	uint32_t groups, failed, parts;
	int first_rc;		/* of the first group that failed */
};

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

/* A connection within the round's deadline (the later calls on it too). */
static int open_conn(const struct round *r, struct km_kclient *c,
		     const struct km_config_addr *a)
{
	uint64_t now = km_clock_ms();

	if (r->deadline_ms == 0)
		return km_kclient_open(c, a, SYNC_TIMEOUT_MS);
	if (now >= r->deadline_ms)
		return -ETIMEDOUT;
	return km_kclient_open(c, a, r->deadline_ms - now < SYNC_TIMEOUT_MS
					     ? (int)(r->deadline_ms - now)
					     : SYNC_TIMEOUT_MS);
}

/* The group's coordinator on the source. */
static int find_coordinator(struct km_daemon *d, const struct round *rd,
			    const char *group, struct km_config_addr *out)
{
	struct km_findcoord_req q = { .key_type = 0 };
	struct km_findcoord_resp m;
	int rc = -ENOTCONN;

	km_wire_name_set(&q.key, group);
	for (uint32_t b = 0; rc < 0 && b < d->cfg->bootstrap_count; b++) {
		struct km_kclient c;
		struct km_wire_rd r;

		if ((rc = open_conn(rd, &c, &d->cfg->bootstrap[b])) < 0)
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

/* The request's topics: the round's partitions. */
static void fill_request(struct km_daemon *d, const struct round *rd,
			 struct km_offfetch_req *q)
{
	for (uint32_t i = 0; i < d->table.n; i++) {
		const struct km_part *p = &d->table.parts[i];
		struct km_proto_topic *t = q->n_topics ? &q->topics[q->n_topics - 1] : NULL;

		if (!(rd->only ? rd->only[i] : follows(d, i)) ||
		    q->n_parts == q->parts_max)
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

/* A stop's round: nothing past the partition's cut. */
static void cap_at_cut(const struct km_daemon *d, const struct round *rd,
		       struct km_group_sync_part *sp)
{
	const struct km_part *p = km_part_find(&d->table, sp->topic, sp->partition);

	if (rd->cut == NULL || p == NULL)
		return;
	sp->at_stop = true;
	sp->cut = rd->cut[p - d->table.parts];
}

/* OffsetFetch on the coordinator, into s (parts allocated). */
static int fetch_offsets(struct km_daemon *d, const struct round *rd,
			 const struct km_config_addr *coord,
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
		fill_request(d, rd, &q);
	if (rc == 0 && (rc = open_conn(rd, &c, coord)) == 0) {
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
			cap_at_cut(d, rd, sp);
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

/* Was sp's partition in the round's question? */
static bool asked(const struct km_daemon *d, const struct round *rd,
		  const struct km_group_sync_part *sp)
{
	const struct km_part *p = km_part_find(&d->table, sp->topic, sp->partition);
	uint32_t i = p ? (uint32_t)(p - d->table.parts) : 0;

	return p == NULL || (rd->only ? rd->only[i] : follows(d, i));
}

/* The answer replaces the rows of the partitions the round asked about;
 * the others (stopped since, or not in a stop's round) stay in status with
 * their last sync. Takes s->parts. */
static void slot_merge(const struct km_daemon *d, const struct round *rd,
		       struct km_daemon_gsync *g, struct km_group_sync *s)
{
	struct km_group_sync_part *all;
	uint32_t n = 0;

	for (uint32_t i = 0; i < g->s.n_parts; i++)
		if (!asked(d, rd, &g->s.parts[i]))
			g->s.parts[n++] = g->s.parts[i];
	all = realloc(g->s.parts, (n + s->n_parts + 1) * sizeof(*all));
	if (all == NULL) {
		free(g->s.parts);
		g->s = *s; /* only the answer, then */
		return;
	}
	memcpy(all + n, s->parts, s->n_parts * sizeof(*all));
	free(s->parts);
	g->s.parts = all;
	g->s.n_parts = n + s->n_parts;
	g->s.active = s->active;
}

/* What a stop's round did for one group: its rows and a progress line. */
static void stop_report(struct km_daemon *d, struct round *rd, const char *group,
			const struct km_group_sync *s, int rc)
{
	char msg[512], name[KM_WIRE_NAME_BYTES_MAX + 16];
	int len = snprintf(msg, sizeof(msg), "group %s: ", group);
	json_t *prog;

	rd->groups++;
	if (rc < 0) {
		rd->failed++;
		rd->first_rc = rd->failed == 1 ? rc : rd->first_rc;
		snprintf(msg + len, sizeof(msg) - (size_t)len, "last offset sync "
			 "from the source failed: %s", km_strerror(rc));
		json_array_append_new(rd->rows, json_pack("{s:s, s:s, s:s}",
			"group", group, "partition", "-", "sync", km_strerror(rc)));
	} else if (s->active) {
		snprintf(msg + len, sizeof(msg) - (size_t)len, "held: members "
			 "here, its offsets here are its own");
		json_array_append_new(rd->rows, json_pack("{s:s, s:s, s:s}",
			"group", group, "partition", "-", "sync",
			"held: members here"));
	} else if (s->n_parts == 0) {
		snprintf(msg + len, sizeof(msg) - (size_t)len, "no offsets "
			 "committed on the source for these partitions");
	}
	for (uint32_t k = 0; rc == 0 && !s->active && k < s->n_parts; k++) {
		const struct km_group_sync_part *sp = &s->parts[k];

		snprintf(name, sizeof(name), "%s:%d", sp->topic, sp->partition);
		json_array_append_new(rd->rows, json_pack(
			"{s:s, s:s, s:I, s:I, s:I, s:s}", "group", group,
			"partition", name, "source_offset", (json_int_t)sp->source_offset,
			"offset", (json_int_t)sp->stored, "previous",
			(json_int_t)sp->previous, "sync", "synced"));
		if (len < (int)sizeof(msg))
			len += snprintf(msg + len, sizeof(msg) - (size_t)len,
					"%s%s at %lld", k ? ", " : "", name,
					(long long)sp->stored);
		rd->parts++;
	}
	if ((prog = json_pack("{s:s}", "message", msg)) != NULL)
		km_ctlsock_progress(d->ctl, d->stop_token, prog);
	json_decref(prog);
	if (rc < 0)
		KM_WARN("groups", "%s", msg);
	else
		KM_INFO("groups", "stop: %s", msg);
}

static void sync_group(struct km_daemon *d, struct round *rd, const char *group)
{
	struct km_daemon_gsync *g = gsync_slot(d, group);
	struct km_group_sync s = { .parts = NULL };
	struct km_config_addr coord;
	struct km_worker_reply reply = { .done = 0 };
	int rc;

	if (g == NULL)
		return;
	snprintf(s.group, sizeof(s.group), "%s", group);
	if ((rc = find_coordinator(d, rd, group, &coord)) == 0 &&
	    (rc = fetch_offsets(d, rd, &coord, &s)) == 0 &&
	    (rc = km_worker_group_sync(d->workers[0], &s, &reply)) == 0)
		rc = km_worker_wait(d->ctl_efd, &reply, SYNC_TIMEOUT_MS * 2);
	if (rc < 0) /* metrics: kmirror_sync_errors_total{kind="groups"} */
		d->sync_errors[KM_DAEMON_SYNC_GROUPS]++;
	if (rc == -ETIMEDOUT && !atomic_load(&reply.done)) {
		struct km_group_sync none = { .parts = NULL };

		if (rd->rows != NULL)
			stop_report(d, rd, group, &none, rc);
		return; /* s is the worker's until it answers: leak, not reuse */
	}
	if (rd->rows != NULL)
		stop_report(d, rd, group, &s, rc);
	else if (rc < 0 && rc != g->rc)
		KM_WARN("groups", "group %s: offset sync from the source: %s",
			group, km_strerror(rc));
	g->rc = rc;
	g->errors += rc < 0;
	g->at_ms = km_clock_ms();
	if (rc == 0)
		slot_merge(d, rd, g, &s);
	else
		free(s.parts);
}

static bool is_pattern(const char *g)
{
	return strpbrk(g, "*?[") != NULL;
}

/* groups.include / groups.exclude, compiled for one round. */
struct filters {
	struct km_namefilter inc, exc;
};

static void filters_init(const struct km_daemon *d, struct filters *f)
{
	char why[256];

	/* Checked when the configuration was loaded: these compile. */
	if (km_namefilter_compile(&f->inc, d->cfg->groups_include, why,
				  sizeof(why)) < 0)
		f->inc.n = 0;
	if (km_namefilter_compile(&f->exc, d->cfg->groups_exclude, why,
				  sizeof(why)) < 0)
		f->exc.n = 0;
}

static void filters_free(struct filters *f)
{
	km_namefilter_free(&f->inc);
	km_namefilter_free(&f->exc);
}

static bool excluded(const struct filters *f, const char *group)
{
	return km_namefilter_match(&f->exc, group);
}

static bool named(const struct km_daemon *d, const char *group)
{
	for (uint32_t k = 0; k < d->cfg->groups_count; k++)
		if (!is_pattern(d->cfg->groups[k]) &&
		    strcmp(d->cfg->groups[k], group) == 0)
			return true;
	return false;
}

/* A listed group: matched by a `groups` pattern or groups.include, not
 * excluded, and not one `groups` names (synced already). */
static bool listed_wanted(const struct km_daemon *d, const struct filters *f,
			  const char *group)
{
	bool match = km_namefilter_match(&f->inc, group);

	for (uint32_t k = 0; !match && k < d->cfg->groups_count; k++)
		match = is_pattern(d->cfg->groups[k]) &&
			fnmatch(d->cfg->groups[k], group, 0) == 0;
	return match && !excluded(f, group) && !named(d, group);
}

/* Groups on the source the patterns or groups.include pick, from
 * ListGroups of every bootstrap address; calls sync_group once per id. */
static void sync_listed(struct km_daemon *d, struct round *rd,
			const struct filters *f)
{
	static struct km_listgroups_group gs[LIST_MAX];
	struct km_listgroups_req q = { .n_states = 0 };

	for (uint32_t b = 0; b < d->cfg->bootstrap_count; b++) {
		struct km_listgroups_resp m = { .groups = gs, .groups_max = LIST_MAX };
		struct km_kclient c;
		struct km_wire_rd r;
		int rc = open_conn(rd, &c, &d->cfg->bootstrap[b]);

		if (rc == 0) {
			if ((rc = km_kclient_call(&c, KM_API_LIST_GROUPS,
						  LISTGROUPS_VERSION, enc_listgroups,
						  &q, &r)) == 0)
				rc = km_listgroups_resp_decode(&r, LISTGROUPS_VERSION, &m);
			km_kclient_close(&c);
		}
		if (rc < 0) {
			d->gsync_list_errors++;
			continue;
		}
		for (uint32_t i = 0; i < m.n_groups; i++)
			if (listed_wanted(d, f, gs[i].group_id.s))
				sync_group(d, rd, gs[i].group_id.s);
	}
}

/* Every group `groups` names or matches, or groups.include picks, once;
 * none that groups.exclude matches. */
static void run_round(struct km_daemon *d, struct round *rd)
{
	bool list = d->cfg->groups_include[0] != '\0';
	struct filters f;

	filters_init(d, &f);
	for (uint32_t k = 0; k < d->cfg->groups_count; k++) {
		if (is_pattern(d->cfg->groups[k]))
			list = true;
		else if (!excluded(&f, d->cfg->groups[k]))
			sync_group(d, rd, d->cfg->groups[k]);
	}
	if (list)
		sync_listed(d, rd, &f);
	filters_free(&f);
}

/* Is any group to be synced at all? */
static bool any_wanted(const struct km_daemon *d)
{
	return d->cfg->groups_count > 0 || d->cfg->groups_include[0] != '\0';
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
	struct round rd = { .only = NULL };

	if (!any_wanted(d) || now < d->gsync_next_ms)
		return;
	d->gsync_next_ms = now + d->cfg->group_sync_interval_ms;
	d->gsync_ended = !any_follows(d);
	if (d->gsync_ended)
		return;
	run_round(d, &rd);
}

/* The stop's reply: "group_sync" says what the round did in a line, the
 * "groups" rows per group and partition. */
static void stop_summary(const struct round *rd, json_t *resp)
{
	char line[400];

	if (rd->failed > 0)
		snprintf(line, sizeof(line), "failed for %u of %u group%s: %s "
			 "(their offsets here stay as last synced)", rd->failed,
			 rd->groups, rd->groups == 1 ? "" : "s",
			 km_strerror(rd->first_rc));
	else if (rd->groups == 0)
		snprintf(line, sizeof(line), "no group of `groups` or groups.include on the source");
	else
		snprintf(line, sizeof(line), "%u partition%s of %u group%s synced",
			 rd->parts, rd->parts == 1 ? "" : "s", rd->groups,
			 rd->groups == 1 ? "" : "s");
	json_object_set_new(resp, "group_sync", json_string(line));
	if (json_array_size(rd->rows) > 0)
		json_object_set(resp, "groups", rd->rows);
}

void km_daemon_sync_groups_at_stop(struct km_daemon *d, const bool *stopped,
				   const int64_t *cut, json_t *resp)
{
	bool *only = calloc(d->table.n ? d->table.n : 1, sizeof(*only));
	struct round rd = { .only = only, .cut = cut, .rows = json_array() };
	bool any = false;

	/* A partition failed back from another host follows that host, not
	 * the source whose groups these are. */
	for (uint32_t i = 0; only != NULL && i < d->table.n; i++) {
		only[i] = stopped[i] && d->mstates[i].source[0] == '\0';
		any |= only[i];
	}
	if (any_wanted(d) && any && rd.rows != NULL &&
	    d->cfg->group_sync_stop_timeout_ms > 0) {
		rd.deadline_ms = km_clock_ms() + d->cfg->group_sync_stop_timeout_ms;
		run_round(d, &rd);
		stop_summary(&rd, resp);
	} else if (any_wanted(d) && any) {
		json_object_set_new(resp, "group_sync", json_string(
			only == NULL || rd.rows == NULL ? "not done: out of memory"
			: "not done (group.sync.stop.timeout.ms=0)"));
	}
	json_decref(rd.rows);
	free(only);
}

void km_daemon_groups_free(struct km_daemon *d)
{
	for (uint32_t i = 0; i < d->n_gsync; i++)
		free(d->gsync[i].s.parts);
	free(d->gsync);
	d->gsync = NULL;
	d->n_gsync = 0;
}
