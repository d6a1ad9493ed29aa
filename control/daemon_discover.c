/* Topic discovery on the control thread (issue 19 item 1): every
 * metadata.refresh.interval.ms the source's topic listing is read, and
 *  - a topic `topics` names or topics.include takes (topics.exclude not)
 *    that the table lacks is mirrored from the start of the source's log;
 *  - partitions added to a followed topic (kafka-topics --alter
 *    --partitions) are mirrored the same way;
 *  - a topic that is no longer listed stops being fetched: its partitions
 *    turn FAILED with the reason, their logs kept and served (never
 *    deleted here: the operator decides, `stop` makes them writable).
 *
 * A new partition takes the next free entry of the table (the entries
 * never move), its log is opened by its owner, the table's sorted view is
 * published with it, then its fetcher starts. A topic with a partition
 * failed over (STOPPED, a failback source, local) is not followed, and
 * once every mirrored partition has been stopped nothing new is added: a
 * failed-over host does not start mirroring its old primary again because
 * a topic appeared there.
 *
 * The listing is one blocking Metadata call (LIST_TIMEOUT_MS per address)
 * on the control loop, as the group sync's calls are.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "common/log.h"
#include "control/daemon_pvt.h"
#include "control/srcmeta.h"

#define LIST_TIMEOUT_MS 2000
#define OPEN_TIMEOUT_MS 60000

int km_daemon_discover_init(struct km_daemon *d)
{
	char why[256];
	int rc;

	/* Validated when the config was read: a failure here is memory. */
	if ((rc = km_namefilter_compile(&d->include, d->cfg->topics_include,
					why, sizeof(why))) < 0 ||
	    (rc = km_namefilter_compile(&d->exclude, d->cfg->topics_exclude,
					why, sizeof(why))) < 0) {
		KM_ERROR("daemon", "topics.include/topics.exclude: %s", why);
		return rc;
	}
	d->discover_next_ms = km_daemon_now_ms() +
			      d->cfg->metadata_refresh_interval_ms;
	return 0;
}

void km_daemon_discover_fini(struct km_daemon *d)
{
	km_namefilter_free(&d->include);
	km_namefilter_free(&d->exclude);
}

bool km_daemon_discovers(const struct km_daemon *d, const char *topic)
{
	/* Our own group offsets live in __consumer_offsets: never the
	 * source's, whatever the expressions say. */
	if (d->include.n == 0 || strcmp(topic, KM_CONFIG_OFFSETS_TOPIC) == 0 ||
	    strcmp(topic, KM_CONFIG_TXN_TOPIC) == 0)
		return false;
	for (uint32_t i = 0; i < d->cfg->local_topics_count; i++)
		if (strcmp(topic, d->cfg->local_topics[i]) == 0)
			return false;
	return km_namefilter_match(&d->include, topic) &&
	       !km_namefilter_match(&d->exclude, topic);
}

static bool listed(const struct km_daemon *d, const char *topic)
{
	for (uint32_t i = 0; i < d->cfg->topics_count; i++)
		if (strcmp(topic, d->cfg->topics[i]) == 0)
			return true;
	return km_daemon_discovers(d, topic);
}

/* Mirrored from the configured source, and mirroring (or about to). */
static bool follows(const struct km_daemon *d, uint32_t i)
{
	const struct km_mstate_rec *ms = &d->mstates[i];

	return d->mirrored[i] && ms->source[0] == '\0' &&
	       (ms->state == KM_MSTATE_MIRRORING ||
		ms->state == KM_MSTATE_PAUSED || ms->state == KM_MSTATE_FAILED);
}

/* -1: the table does not have the topic; 0: some partition of it does
 * not follow the source; 1: every partition does. */
static int topic_follows(const struct km_daemon *d, const char *topic)
{
	int have = -1;

	for (uint32_t i = 0; i < d->table.n; i++)
		if (strcmp(d->table.parts[i].topic, topic) == 0) {
			if (!follows(d, i))
				return 0;
			have = 1;
		}
	return have;
}

/* Some partition was mirrored and none follows the source any more. */
static bool failed_over(const struct km_daemon *d)
{
	bool mirrors = false;

	for (uint32_t i = 0; i < d->table.n; i++) {
		if (follows(d, i))
			return false;
		mirrors |= d->mstates[i].role == KM_MSTATE_ROLE_MIRROR;
	}
	return mirrors;
}

void km_daemon_fill_entry(struct km_daemon *d, uint32_t i, const char *topic,
		       int32_t partition)
{
	struct km_part *p = &d->table.parts[i];

	memset(p, 0, sizeof(*p));
	snprintf(p->topic, sizeof(p->topic), "%s", topic);
	p->partition = partition;
	atomic_init(&p->mode, KM_PART_MIRROR);
	p->owner = km_daemon_pick_owner(d, true);
	atomic_init(&p->stats.source_hw, -1);
	atomic_init(&p->stats.source_start, -1);
	d->mirrored[i] = true;
	memset(&d->rates[i], 0, sizeof(d->rates[i]));
	d->caught_up_ms[i] = 0;
	memset(&d->retries[i], 0, sizeof(d->retries[i]));
	memset(&d->mstates[i], 0, sizeof(d->mstates[i]));
	memset(&d->sources[i], 0, sizeof(d->sources[i]));
	memset(&d->disk_holds[i], 0, sizeof(d->disk_holds[i]));
	d->mstates[i].last_mirrored_offset = -1;
	d->mstates[i].prepare_truncate_to = -1;
}

/* Entry i's log, opened by its owner with the topic's id. */
static int open_entry(struct km_daemon *d, uint32_t i)
{
	struct km_part *p = &d->table.parts[i];
	uint8_t (*ids)[16] = calloc(d->table.n, sizeof(*ids));
	struct km_log_config lc;
	struct km_worker_reply r;
	int rc;

	if (ids == NULL)
		return -ENOMEM;
	if ((rc = km_daemon_topic_ids(d, ids)) == 0) {
		km_config_log_config(d->cfg, p->topic, p->partition, &lc);
		memcpy(lc.topic_id, ids[i], sizeof(lc.topic_id));
		rc = km_worker_open(d->workers[p->owner], p, &lc, &r);
	}
	free(ids);
	if (rc == 0)
		rc = km_worker_wait(d->ctl_efd, &r, OPEN_TIMEOUT_MS);
	if (rc < 0)
		KM_ERROR("daemon", "partition %s-%d: discovered at the source, "
			 "but its log cannot be opened: %s", p->topic,
			 p->partition, r.msg[0] ? r.msg : km_strerror(rc));
	return rc;
}

static int add_part(struct km_daemon *d, const char *topic, int32_t partition)
{
	uint32_t i = d->table.n;
	int rc;

	if (i == d->table.cap)
		return -ENOSPC;
	km_daemon_fill_entry(d, i, topic, partition);
	d->table.n = i + 1;
	if ((rc = open_entry(d, i)) < 0) {
		/* The owner keeps nothing of a failed open: the entry is free. */
		d->table.n = i;
		return rc;
	}
	if ((rc = km_part_table_publish(&d->table)) < 0)
		return rc; /* opened, not served: a restart serves it */
	km_daemon_settle_role(d, i);
	if ((rc = km_daemon_configs_add(d, i)) < 0)
		KM_WARN("daemon", "partition %s-%d: its topic's synced configs: "
			"%s", topic, partition, km_strerror(rc));
	if ((rc = km_daemon_record_role(d, i)) < 0)
		KM_WARN("daemon", "partition %s-%d: cannot record its role: %s",
			topic, partition, km_strerror(rc));
	KM_INFO("daemon", "partition %s-%d: discovered at the source; "
		"mirroring it from the start of the source's log", topic,
		partition);
	if (!km_daemon_disk_hold(d, i))
		km_daemon_start_fetch(d, i);
	return 0;
}

/* The partitions of listed topic t that the table lacks. */
static void add_missing(struct km_daemon *d, const struct km_srcmeta_topic *t,
			bool adding_topics)
{
	int follows_now = topic_follows(d, t->name);

	if (t->error_code != 0 || !listed(d, t->name) || follows_now == 0 ||
	    (follows_now < 0 && !adding_topics))
		return;
	for (uint32_t k = 0; k < t->partitions; k++) {
		int rc;

		if (km_part_find(&d->table, t->name, (int32_t)k) != NULL)
			continue;
		rc = add_part(d, t->name, (int32_t)k);
		if (rc == -ENOSPC && !d->discover_full) {
			KM_ERROR("daemon", "topic %s: partition %u and later "
				 "are not mirrored: the table is full "
				 "(partitions.max=%u); raise it and restart",
				 t->name, k, d->table.cap);
			d->discover_full = true;
		}
		if (rc < 0)
			return;
	}
}

static bool in_listing(const struct km_srcmeta_list *l, const char *topic)
{
	for (uint32_t t = 0; t < l->n; t++)
		if (strcmp(l->topics[t].name, topic) == 0)
			return l->topics[t].error_code !=
			       KM_KERR_UNKNOWN_TOPIC_OR_PARTITION;
	return false;
}

/* A followed partition whose topic the source no longer lists. */
static void mark_gone(struct km_daemon *d, uint32_t i)
{
	struct km_mstate_rec *ms = &d->mstates[i];
	struct km_part *p = &d->table.parts[i];
	char dir[4096];

	if (ms->state == KM_MSTATE_MIRRORING && km_daemon_pause_fetch(d, i) < 0)
		return; /* tried again at the next listing */
	ms->state = KM_MSTATE_FAILED;
	snprintf(ms->failed_reason, sizeof(ms->failed_reason),
		 "the topic was deleted at the source (its Metadata no longer "
		 "lists it): the log is kept and served; `kmirrorctl stop` "
		 "makes it writable");
	km_daemon_part_dir(d, p, dir, sizeof(dir));
	if (km_mstate_save(dir, ms) < 0)
		KM_ERROR("daemon", "partition %s-%d: cannot persist FAILED",
			 p->topic, p->partition);
	KM_ERROR("daemon", "partition %s-%d: %s", p->topic, p->partition,
		 ms->failed_reason);
}

static void drop_gone(struct km_daemon *d, const struct km_srcmeta_list *l)
{
	for (uint32_t i = 0; i < d->table.n; i++) {
		const struct km_mstate_rec *ms = &d->mstates[i];

		if (follows(d, i) && ms->state != KM_MSTATE_FAILED &&
		    !in_listing(l, d->table.parts[i].topic))
			mark_gone(d, i);
	}
}

void km_daemon_discover(struct km_daemon *d)
{
	struct km_srcmeta_list l;
	uint64_t now = km_daemon_now_ms();
	char err[512];
	uint32_t before = d->table.n;
	bool adding;

	if (d->cfg->bootstrap_count == 0 || now < d->discover_next_ms)
		return;
	d->discover_next_ms = now + d->cfg->metadata_refresh_interval_ms;
	km_daemon_recheck_loops(d);
	if (km_srcmeta_list(d->cfg, LIST_TIMEOUT_MS, &l, err, sizeof(err)) < 0) {
		KM_DEBUG("daemon", "topic discovery: %s", err);
		return;
	}
	/* Another cluster behind the same address is no listing of ours. */
	if (d->source_cluster_id[0] != '\0' && l.cluster_id[0] != '\0' &&
	    strcmp(l.cluster_id, d->source_cluster_id) != 0) {
		KM_WARN("daemon", "topic discovery: the source now reports "
			"cluster id %s, not %s: nothing added or dropped",
			l.cluster_id, d->source_cluster_id);
		km_srcmeta_list_free(&l);
		return;
	}
	adding = !failed_over(d);
	for (uint32_t t = 0; t < l.n; t++)
		add_missing(d, &l.topics[t], adding);
	drop_gone(d, &l);
	km_srcmeta_list_free(&l);
	if (d->table.n > before)
		KM_INFO("daemon", "topic discovery: %u partitions added (%u "
			"served)", d->table.n - before, d->table.n);
}
