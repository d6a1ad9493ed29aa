/* Which partitions kmirrord serves: the mirrored topics with the partition
 * counts the source reports, local.topics, and every partition directory
 * already in data.dir (served read-only when nothing else claims it). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "common/log.h"
#include "control/daemon_pvt.h"
#include "control/srcmeta.h"

#define SOURCE_TIMEOUT_MS 5000
#define SOURCE_RETRY_MS 1000

static bool parse_dir(const char *name, char *topic, size_t cap,
		      int32_t *partition);

/* The partitions found, and a hash of them by topic and partition (index
 * + 1, 0 empty), so that adding 10,000 does not compare each with all
 * before it (issue 17). */
struct plan {
	struct km_part *parts;
	bool *mirrored;
	uint32_t n, cap;
	uint32_t *slot;
	uint32_t n_slot; /* a power of 2, over twice n */
};

static uint32_t plan_hash(const char *topic, int32_t partition)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (const unsigned char *c = (const unsigned char *)topic; *c; c++)
		h = (h ^ *c) * 16777619u;
	return h ^ ((uint32_t)partition * 0x9E3779B1u);
}

/* Where (topic, partition) is, or the empty slot it would take. */
static uint32_t *plan_slot(const struct plan *p, const char *topic,
			   int32_t partition)
{
	uint32_t i = plan_hash(topic, partition) & (p->n_slot - 1);

	for (;; i = (i + 1) & (p->n_slot - 1)) {
		const struct km_part *q;

		if (p->slot[i] == 0)
			return &p->slot[i];
		q = &p->parts[p->slot[i] - 1];
		if (q->partition == partition && strcmp(q->topic, topic) == 0)
			return &p->slot[i];
	}
}

static int plan_grow_slots(struct plan *p)
{
	uint32_t n = p->n_slot ? p->n_slot * 2 : 256;
	uint32_t *old = p->slot;

	if ((p->slot = calloc(n, sizeof(*p->slot))) == NULL) {
		p->slot = old;
		return -ENOMEM;
	}
	free(old);
	p->n_slot = n;
	for (uint32_t i = 0; i < p->n; i++)
		*plan_slot(p, p->parts[i].topic, p->parts[i].partition) = i + 1;
	return 0;
}

static int plan_add(struct plan *p, const char *topic, int32_t partition,
		    bool mirrored, enum km_part_mode mode)
{
	if ((p->n + 1) * 2 > p->n_slot && plan_grow_slots(p) < 0)
		return -ENOMEM;
	if (*plan_slot(p, topic, partition) != 0)
		return 0;
	if (p->n == p->cap) {
		uint32_t cap = p->cap ? p->cap * 2 : 64;
		struct km_part *np = realloc(p->parts, cap * sizeof(*np));
		bool *nm = np ? realloc(p->mirrored, cap * sizeof(*nm)) : NULL;

		if (np)
			p->parts = np;
		if (nm == NULL)
			return -ENOMEM;
		p->mirrored = nm;
		p->cap = cap;
	}
	memset(&p->parts[p->n], 0, sizeof(p->parts[p->n]));
	snprintf(p->parts[p->n].topic, sizeof(p->parts[p->n].topic), "%s",
		 topic);
	p->parts[p->n].partition = partition;
	atomic_init(&p->parts[p->n].mode, mode);
	p->mirrored[p->n++] = mirrored;
	*plan_slot(p, topic, partition) = p->n;
	return 0;
}

/* Wait for a signal up to ms; true if one came (the caller stops). */
static bool signalled(int sig_fd, int ms)
{
	struct pollfd pfd = { .fd = sig_fd, .events = POLLIN };

	return poll(&pfd, 1, ms) > 0;
}

/* The source must know every mirrored topic before mirroring starts (a
 * topic created later would otherwise start from the wrong place); wait
 * for it, saying what is missing. */
static int ask_source(struct km_daemon *d, struct km_srcmeta *m)
{
	uint32_t wait_ms = SOURCE_RETRY_MS;
	char err[512];

	for (;;) {
		uint32_t missing = 0;
		int rc = km_srcmeta_fetch(d->cfg, SOURCE_TIMEOUT_MS, m, err,
					  sizeof(err));

		for (uint32_t i = 0; rc == 0 && i < d->cfg->topics_count; i++)
			if (m->partitions[i] == 0) {
				KM_WARN("daemon", "topic %s: not on the source yet; retrying",
					d->cfg->topics[i]);
				missing++;
			}
		if (rc == 0 && missing == 0)
			return 0;
		if (rc < 0)
			KM_WARN("daemon", "%s; retrying in %u ms", err,
				(unsigned)wait_ms);
		if (signalled(d->sig_fd, (int)wait_ms))
			return KM_ESHUTDOWN;
		/* A refused certificate or password needs someone to act:
		 * back off as the partitions' FAILED retries do (issue 16). */
		if (rc == KM_ETLS || rc == KM_EAUTH || rc == KM_ESASLMECH)
			wait_ms = wait_ms * 2 > 60000 ? 60000 : wait_ms * 2;
		else
			wait_ms = SOURCE_RETRY_MS;
	}
}

/* Partitions of topic already in data.dir (a restart), or 0. */
static uint32_t local_partitions(const struct km_daemon *d, const char *topic)
{
	DIR *dir = opendir(d->cfg->data_dir);
	char t[KM_WIRE_NAME_BYTES_MAX + 1];
	struct dirent *e;
	int32_t part;
	uint32_t n = 0;

	while (dir != NULL && (e = readdir(dir)) != NULL)
		if (parse_dir(e->d_name, t, sizeof(t), &part) &&
		    strcmp(t, topic) == 0 && (uint32_t)part + 1 > n)
			n = (uint32_t)part + 1;
	if (dir != NULL)
		closedir(dir);
	return n;
}

/* On a restart every mirrored topic is already on disk: a source that is
 * down (after a failover, typically) must not keep the partitions from
 * being served. Ask it once, and fall back on what the disk holds. */
static bool all_local(const struct km_daemon *d, struct km_srcmeta *m)
{
	for (uint32_t t = 0; t < d->cfg->topics_count; t++)
		if ((m->partitions[t] = local_partitions(d, d->cfg->topics[t])) == 0)
			return false;
	return true;
}

static int discover(struct km_daemon *d, struct km_srcmeta *m)
{
	struct km_srcmeta local;
	char err[512];
	int rc;

	if (!all_local(d, &local))
		return ask_source(d, m);
	rc = km_srcmeta_fetch(d->cfg, SOURCE_TIMEOUT_MS, m, err, sizeof(err));
	for (uint32_t t = 0; rc == 0 && t < d->cfg->topics_count; t++)
		if (m->partitions[t] < local.partitions[t])
			m->partitions[t] = local.partitions[t];
	if (rc < 0) {
		KM_WARN("daemon", "%s; serving the partitions in data.dir, and "
			"their fetch sessions keep retrying", err);
		*m = local;
	}
	return 0;
}

static int add_mirrored(struct km_daemon *d, struct plan *p)
{
	struct km_srcmeta *m;
	int rc;

	if (d->cfg->topics_count == 0)
		return 0;
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return -ENOMEM;
	rc = discover(d, m);
	for (uint32_t t = 0; rc == 0 && t < d->cfg->topics_count; t++)
		for (uint32_t i = 0; rc == 0 && i < m->partitions[t]; i++)
			rc = plan_add(p, d->cfg->topics[t], (int32_t)i, true,
				      KM_PART_MIRROR);
	if (rc == 0 && m->cluster_id[0] != '\0') {
		snprintf(d->source_cluster_id, sizeof(d->source_cluster_id),
			 "%s", m->cluster_id);
		KM_INFO("daemon", "source cluster %s: %u topics to mirror",
			m->cluster_id, d->cfg->topics_count);
	}
	free(m);
	return rc;
}

static int add_local(struct km_daemon *d, struct plan *p)
{
	int rc = 0;

	for (uint32_t t = 0; rc == 0 && t < d->cfg->local_topics_count; t++)
		for (uint32_t i = 0; rc == 0 && i < d->cfg->local_partitions[t];
		     i++)
			rc = plan_add(p, d->cfg->local_topics[t], (int32_t)i,
				      false, KM_PART_WRITABLE);
	/* Committed offsets of the groups served here (issue 7). */
	if (rc == 0 && (rc = plan_add(p, KM_CONFIG_OFFSETS_TOPIC, 0, false,
				      KM_PART_WRITABLE)) == 0)
		p->parts[p->n - 1].internal = true;
	/* The transaction coordinator's log (issue 20). */
	if (rc == 0 && (rc = plan_add(p, KM_CONFIG_TXN_TOPIC, 0, false,
				      KM_PART_WRITABLE)) == 0)
		p->parts[p->n - 1].internal = true;
	return rc;
}

/* "<topic>-<partition>" with Kafka's topic characters. */
static bool parse_dir(const char *name, char *topic, size_t cap,
		      int32_t *partition)
{
	const char *dash = strrchr(name, '-');
	size_t n = dash ? (size_t)(dash - name) : 0;
	char *end;
	long v;

	if (n == 0 || n >= cap || dash[1] == '\0' || !isdigit((unsigned char)dash[1]))
		return false;
	v = strtol(dash + 1, &end, 10);
	if (*end != '\0' || v < 0 || v > INT32_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && name[i] != '.' &&
		    name[i] != '_' && name[i] != '-')
			return false;
	memcpy(topic, name, n);
	topic[n] = '\0';
	*partition = (int32_t)v;
	return true;
}

static int add_existing(struct km_daemon *d, struct plan *p)
{
	DIR *dir = opendir(d->cfg->data_dir);
	struct dirent *e;
	char topic[KM_WIRE_NAME_BYTES_MAX + 1];
	int32_t part;
	int rc = 0;

	if (dir == NULL)
		return -errno;
	/* A discovered topic's partitions are mirrored even while the
	 * source is down at a restart: their fetchers keep trying. */
	while (rc == 0 && (e = readdir(dir)) != NULL)
		if (e->d_type == DT_DIR &&
		    parse_dir(e->d_name, topic, sizeof(topic), &part))
			rc = plan_add(p, topic, part,
				      km_daemon_discovers(d, topic),
				      KM_PART_MIRROR);
	closedir(dir);
	return rc;
}

static int cmp_part(const void *a, const void *b)
{
	const struct km_part *x = a, *y = b;
	int c = strcmp(x->topic, y->topic);

	return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

/* Room for the partitions discovery may add while the workers run: the
 * entries never move (fetchers and logs point at them), so the table is
 * allocated once. */
static uint32_t capacity(const struct km_daemon *d, uint32_t n)
{
	uint32_t max = d->cfg->partitions_max;

	if (max == 0)
		return n > 1024 ? 2 * n : n + 1024;
	if (max < n)
		KM_WARN("daemon", "partitions.max=%u, but %u partitions are "
			"listed or in data.dir: serving them, adding none",
			max, n);
	return max > n ? max : n;
}

/* Sort the table (the start's order: topic ids, logs), keeping `mirrored`
 * in step, with room for cap entries; then publish its view. */
static int finish(struct km_daemon *d, struct plan *p)
{
	uint32_t cap = capacity(d, p->n);
	struct km_part *np;

	for (uint32_t i = 0; i < p->n; i++)
		p->parts[i].owner = p->mirrored[i]; /* carried through qsort */
	qsort(p->parts, p->n, sizeof(*p->parts), cmp_part);
	if ((np = realloc(p->parts, cap * sizeof(*np))) == NULL)
		return -ENOMEM;
	p->parts = np;
	memset(np + p->n, 0, (cap - p->n) * sizeof(*np));
	d->mirrored = calloc(cap, sizeof(bool));
	d->rates = calloc(cap, sizeof(*d->rates));
	d->caught_up_ms = calloc(cap, sizeof(*d->caught_up_ms));
	if (d->mirrored == NULL || d->rates == NULL || d->caught_up_ms == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->n; i++) {
		d->mirrored[i] = p->parts[i].owner != 0;
		atomic_init(&p->parts[i].stats.source_hw, -1);
		atomic_init(&p->parts[i].stats.source_start, -1);
		atomic_init(&p->parts[i].stats.source_lso, -1);
		atomic_init(&p->parts[i].stats.data_loss_from, -1);
		atomic_init(&p->parts[i].stats.data_loss_to, -1);
	}
	free(p->mirrored);
	d->table.parts = p->parts;
	d->table.n = p->n;
	d->table.cap = cap;
	km_daemon_assign_owners(d);
	return km_part_table_publish(&d->table);
}

/* The source's topics that topics.include takes, as it lists them now: a
 * source that does not answer leaves them to the refreshes. */
static int add_discovered(struct km_daemon *d, struct plan *p)
{
	struct km_srcmeta_list l;
	char err[512];
	int rc = 0;

	if (d->cfg->topics_include[0] == '\0')
		return 0;
	if (km_srcmeta_list(d->cfg, SOURCE_TIMEOUT_MS, &l, err,
			    sizeof(err)) < 0) {
		KM_WARN("daemon", "topics.include: %s; the topics it takes "
			"are mirrored once the source answers", err);
		return 0;
	}
	for (uint32_t t = 0; rc == 0 && t < l.n; t++)
		for (uint32_t i = 0; rc == 0 && l.topics[t].error_code == 0 &&
				     km_daemon_discovers(d, l.topics[t].name) &&
				     i < l.topics[t].partitions; i++)
			rc = plan_add(p, l.topics[t].name, (int32_t)i, true,
				      KM_PART_MIRROR);
	if (d->source_cluster_id[0] == '\0' && l.cluster_id[0] != '\0')
		snprintf(d->source_cluster_id, sizeof(d->source_cluster_id),
			 "%s", l.cluster_id);
	km_srcmeta_list_free(&l);
	return rc;
}

int km_daemon_find_parts(struct km_daemon *d)
{
	struct plan p = { 0 };
	int rc;

	if ((rc = add_mirrored(d, &p)) == 0 && (rc = add_discovered(d, &p)) == 0 &&
	    (rc = add_local(d, &p)) == 0)
		rc = add_existing(d, &p);
	free(p.slot);
	if (rc == 0)
		return finish(d, &p);
	free(p.parts);
	free(p.mirrored);
	return rc;
}
