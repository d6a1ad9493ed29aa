/* Loop detection (issue 19 item 7): before mirroring from a kmirror host,
 * ask it which clusters it mirrors from (its DescribeConfigs of itself,
 * kmirror.source.cluster.ids); if our own cluster id is one, mirroring
 * from it would copy our data back into us. A source that is not kmirror
 * (no KmirrorBarrier in ApiVersions) cannot mirror at all: no loop.
 *
 * Asked once at start, per distinct source, for the partitions about to
 * fetch: a loop makes them FAILED, persisted with a reason naming both
 * cluster ids, so neither the restart nor the fetcher retries it; `start`
 * and `failback` ask the same question and refuse (daemon_start.c). Only
 * a direct loop is seen (A from B, B from A), not a longer ring.
 */
#include <stdio.h>
#include <string.h>

#include "common/errors.h"
#include "common/log.h"
#include "control/daemon_pvt.h"
#include "control/upstream.h"

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

/* Will partition i fetch at start? (start_fetchers' own test.) */
static bool will_fetch(const struct km_daemon *d, uint32_t i)
{
	return d->mirrored[i] && d->mstates[i].state == KM_MSTATE_MIRRORING;
}

static void fail(struct km_daemon *d, uint32_t i, const char *why)
{
	struct km_mstate_rec *ms = &d->mstates[i];
	char dir[4096];

	ms->state = KM_MSTATE_FAILED;
	snprintf(ms->failed_reason, sizeof(ms->failed_reason), "%s", why);
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

void km_daemon_refuse_loops(struct km_daemon *d)
{
	struct km_upstream_answer ans, cfg_ans;
	struct km_config_addr a, cfg_a;
	bool cfg_asked = false, cfg_ok = false;
	char why[sizeof(d->mstates[0].failed_reason)];

	for (uint32_t i = 0; i < d->table.n; i++) {
		bool ok;

		if (!will_fetch(d, i))
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
		if (!ok || !km_upstream_mirrors_from(&ans, d->cfg->cluster_id))
			continue;
		km_daemon_loop_reason(d, i, &a, &ans, why, sizeof(why));
		fail(d, i, why);
	}
}
