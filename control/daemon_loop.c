/* Loop detection (issue 19 item 7): before mirroring from a kmirror host,
 * ask it which clusters it mirrors from (its DescribeConfigs of itself,
 * kmirror.source.cluster.ids); if our own cluster id is one, mirroring
 * from it would copy our data back into us. A source that is not kmirror
 * (no KmirrorBarrier in ApiVersions) cannot mirror at all: no loop.
 *
 * The list is transitive: each answer is kept (d->upstream, by the
 * source's cluster id) and our front end names it after that source, so
 * a host names every cluster up its chain and a ring of any length shows
 * our id to whoever would close it (A <- C <- B <- A: A asks C, which
 * names B and, from B's answer, A).
 *
 * Asked at start, per distinct source, for the partitions about to fetch,
 * and again at every metadata refresh (metadata.refresh.interval.ms) for
 * the partitions mirroring, so that a ring closed later (a source not
 * answering at our start, a chain that grew since) is seen too. A loop
 * makes them FAILED (their fetchers stopped), persisted with a reason
 * naming both cluster ids, so neither a restart nor the retries fetch
 * again; `start` and `failback` ask the same question and refuse
 * (daemon_start.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "common/log.h"
#include "control/daemon_pvt.h"
#include "control/upstream.h"
#include "dataplane/serve/tconfig.h"

#define ASK_TIMEOUT_MS 2000 /* once, before mirroring: a slow source delays it little */

void km_daemon_loop_reason(const struct km_daemon *d, uint32_t i,
			   const struct km_config_addr *a,
			   const struct km_upstream_answer *ans, char *out,
			   size_t cap)
{
	snprintf(out, cap, "%.200s-%d: mirror loop refused: the source %.256s:%u "
		 "(cluster %.64s) is a kmirror host that mirrors from this "
		 "cluster (%.64s); mirroring from it would copy our data back "
		 "into us", d->table.parts[i].topic, d->table.parts[i].partition,
		 a->host, a->port, ans->cluster_id, d->cfg->cluster_id);
}

/* Will partition i fetch at start (start_fetchers' own test), or is it
 * fetching now? The same state, with or without its fetcher yet. Once
 * running, a FAILED one is asked too: a ring closed on a mirrored log
 * usually trips the source cluster id check first (the log mirrors
 * another cluster than the one now answering), and the loop is the cause
 * the operator has to undo, so it becomes the reason. */
static bool asks(const struct km_daemon *d, uint32_t i, bool running)
{
	const struct km_mstate_rec *ms = &d->mstates[i];

	return d->mirrored[i] &&
	       (ms->state == KM_MSTATE_MIRRORING ||
		(running && ms->state == KM_MSTATE_FAILED &&
		 strstr(ms->failed_reason, "mirror loop") == NULL));
}

/* Running: its fetcher goes first (tried again at the next refresh if the
 * owner does not answer); a FAILED one has none. */
static void fail(struct km_daemon *d, uint32_t i, const char *why,
		 bool running)
{
	struct km_mstate_rec *ms = &d->mstates[i];
	char dir[4096];

	if (running && ms->state == KM_MSTATE_MIRRORING &&
	    km_daemon_pause_fetch(d, i) < 0)
		return;
	ms->state = KM_MSTATE_FAILED;
	snprintf(ms->failed_reason, sizeof(ms->failed_reason), "%s", why);
	d->loops_refused++;
	KM_ERROR("daemon", "%s", why);
	km_daemon_part_dir(d, &d->table.parts[i], dir, sizeof(dir));
	if (km_mstate_save(dir, ms) < 0)
		KM_ERROR("daemon", "partition %s-%d: cannot persist FAILED",
			 d->table.parts[i].topic, d->table.parts[i].partition);
}

/* The answer for partition i's source: its failback source, else the
 * first source.bootstrap.servers address that answers. false: none did
 * (the fetch sessions will say why). */
static bool ask(const struct km_daemon *d, uint32_t i,
	       struct km_config_addr *a, struct km_upstream_answer *ans)
{
	const struct km_part *p = &d->table.parts[i];
	const char *s = d->mstates[i].source;

	if (s[0] != '\0')
		return km_daemon_parse_source(s, a) == 0 &&
		       km_upstream_ask(a, p->topic, p->partition,
				       d->cfg->cluster_id, ASK_TIMEOUT_MS, ans) == 0;
	for (uint32_t k = 0; k < d->cfg->bootstrap_count; k++) {
		*a = d->cfg->bootstrap[k];
		if (km_upstream_ask(a, p->topic, p->partition, d->cfg->cluster_id,
				    ASK_TIMEOUT_MS, ans) == 0)
			return true;
	}
	return false;
}

/* The kmirror sources heard in one round and what each mirrors from. */
struct heard {
	struct km_tconfig_entry e[KM_TCONFIG_ENTRIES_MAX];
	uint32_t n;
};

static void hear(struct heard *h, const struct km_upstream_answer *ans)
{
	if (!ans->kmirror || ans->cluster_id[0] == '\0' ||
	    strlen(ans->cluster_id) >= KM_TCONFIG_NAME_BYTES ||
	    h->n == KM_TCONFIG_ENTRIES_MAX)
		return;
	for (uint32_t k = 0; k < h->n; k++)
		if (strcmp(h->e[k].name, ans->cluster_id) == 0)
			return;
	snprintf(h->e[h->n].name, KM_TCONFIG_NAME_BYTES, "%s", ans->cluster_id);
	snprintf(h->e[h->n].value, KM_TCONFIG_VALUE_BYTES, "%s",
		 ans->mirrors_from);
	h->n++;
}

/* One round over the partitions that ask; the configured source is asked
 * once for all of them. */
static void round_of(struct km_daemon *d, bool running, struct heard *h)
{
	struct km_upstream_answer ans, cfg_ans;
	struct km_config_addr a, cfg_a;
	bool cfg_asked = false, cfg_ok = false;
	char why[sizeof(d->mstates[0].failed_reason)];

	for (uint32_t i = 0; i < d->table.n; i++) {
		bool ok;

		if (!asks(d, i, running))
			continue;
		if (d->mstates[i].source[0] != '\0') {
			ok = ask(d, i, &a, &ans);
		} else {
			if (!cfg_asked)
				cfg_ok = ask(d, i, &cfg_a, &cfg_ans);
			cfg_asked = true;
			ok = cfg_ok;
			a = cfg_a;
			ans = cfg_ans;
		}
		if (ok)
			hear(h, &ans);
		if (!ok || !km_upstream_mirrors_from(&ans, d->cfg->cluster_id))
			continue;
		km_daemon_loop_reason(d, i, &a, &ans, why, sizeof(why));
		fail(d, i, why, running);
	}
}

static void check(struct km_daemon *d, bool running)
{
	struct heard *h = calloc(1, sizeof(*h));

	if (h == NULL)
		return; /* asked again at the next refresh */
	round_of(d, running, h);
	/* Nothing heard (no source answered, or none is kmirror): what the
	 * front end names stays what it was, rather than forget a chain
	 * over one unanswered round. */
	if (h->n > 0)
		(void)km_tconfig_replace(d->upstream, h->e, h->n);
	free(h);
}

void km_daemon_refuse_loops(struct km_daemon *d)
{
	check(d, false);
}

void km_daemon_recheck_loops(struct km_daemon *d)
{
	check(d, true);
}
