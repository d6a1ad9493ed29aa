/* Topic config sync from the source (issue 19 item 2).
 *
 * Every config.sync.interval.ms (and once right after start) the control
 * thread asks the source, in one DescribeConfigs per few topics, for every
 * config of each mirrored topic that still follows it (MIRRORING, PAUSED,
 * FAILED; a stopped topic keeps what it last synced, as the group offsets
 * do). It keeps the source's own topic settings (ConfigSource
 * DYNAMIC_TOPIC_CONFIG, what `kafka-configs --alter` set) but for the names
 * config.sync.exclude lists, and:
 *   - hands them to the front end (the topic's struct km_tconfig), whose
 *     DescribeConfigs shows them as the topic's own;
 *   - applies those kmirror behaves by to each partition's log, through
 *     its owner (km_worker_set_limits): retention.ms, retention.bytes,
 *     segment.bytes, and cleanup.policy without `delete` turning time and
 *     size retention off, as Kafka does for a compacted topic; and
 *     max.message.bytes and message.timestamp.type, which the partition's
 *     local writer applies to client batches once it is writable;
 *   - keeps them in the topic's first partition directory
 *     (kmirror.configs), so that a restart after a failover, with the
 *     source gone, still has them.
 * A per-topic setting in kmirrord's config file (topic.retention.ms,
 * topic.retention.bytes) wins over the synced value: the operator named
 * that topic. kmirrord-wide settings are the broker's defaults, which a
 * topic's own value overrides in Kafka too.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/errors.h"
#include "common/log.h"
#include "control/daemon_pvt.h"
#include "control/kclient.h"
#include "control/props.h"
#include "common/km_limits.h"
#include "kafka/batch.h"
#include "dataplane/serve/tconfig.h"

#define SYNC_TIMEOUT_MS 3000
#define DCONFIGS_VERSION 1	/* every Kafka since 1.1 answers it */
#define TOPICS_PER_CALL 8u
#define ENTRIES_PER_TOPIC 128u
#define LIMITS_TIMEOUT_MS 10000
#define CONFIGS_FILE "kmirror.configs"

static int enc_dconfigs(struct km_wire_wr *w, int16_t v, const void *m)
{
	return km_dconfigs_req_encode(w, v, m);
}

/* Does the partition still follow source.bootstrap.servers? */
static bool follows(const struct km_daemon *d, uint32_t i)
{
	enum km_mstate st = d->mstates[i].state;

	return d->mirrored[i] && d->mstates[i].source[0] == '\0' &&
	       (st == KM_MSTATE_MIRRORING || st == KM_MSTATE_PAUSED ||
		st == KM_MSTATE_FAILED);
}

static bool excluded(const struct km_config *cfg, const char *name)
{
	for (uint32_t i = 0; i < cfg->config_sync_exclude_count; i++)
		if (strcmp(cfg->config_sync_exclude[i], name) == 0)
			return true;
	return false;
}

static bool file_override(const struct km_config_topic_value *v, uint32_t n,
			  const char *topic)
{
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(v[i].topic, topic) == 0)
			return true;
	return false;
}

static bool synced_i64(struct km_tconfig *t, const char *name, int64_t *out)
{
	char v[KM_TCONFIG_VALUE_BYTES], *end;
	long long x;

	if (!km_tconfig_get(t, name, v, sizeof(v)))
		return false;
	errno = 0;
	x = strtoll(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0')
		return false;
	*out = x;
	return true;
}

/* max.message.bytes and message.timestamp.type, for local Produce once
 * the partition is writable (local_write.c): a client that fails over
 * meets the limits and timestamps the source topic gave it. */
static void client_rules(struct km_tconfig *t, struct km_log_config *lc)
{
	char type[KM_TCONFIG_VALUE_BYTES];
	int64_t v;

	lc->client_batch_bytes_max = 0;
	if (synced_i64(t, "max.message.bytes", &v) && v > 0 && v <= UINT32_MAX)
		lc->client_batch_bytes_max = (uint32_t)v;
	lc->client_log_append_time =
		km_tconfig_get(t, "message.timestamp.type", type, sizeof(type)) &&
		strcmp(type, "LogAppendTime") == 0;
}

/* What partition i's log is to use: kmirrord's config for the topic (lc
 * on entry), with the synced values laid over it where the file names no
 * value of the topic's own. */
void km_daemon_configs_limits(const struct km_daemon *d, uint32_t i,
			      struct km_log_config *lc)
{
	const struct km_config *cfg = d->cfg;
	const struct km_part *p = &d->table.parts[i];
	char policy[KM_TCONFIG_VALUE_BYTES] = "";
	int64_t ms = lc->retention_ms, bytes = lc->retention_bytes, v;
	struct km_part *first;
	bool compact_only;

	/* A topic being created: its partition 0 is not published yet. */
	if ((first = km_part_topic_first(&d->table, p->topic)) == NULL)
		first = (struct km_part *)p;
	if (first->tconfig == NULL)
		return;
	compact_only = km_tconfig_get(first->tconfig, "cleanup.policy", policy,
				      sizeof(policy)) &&
		       strstr(policy, "delete") == NULL;
	if (synced_i64(first->tconfig, "retention.ms", &v) && v >= -1)
		ms = v;
	if (synced_i64(first->tconfig, "retention.bytes", &v) && v >= -1)
		bytes = v;
	if (compact_only) /* Kafka deletes a compacted topic by no age or size */
		ms = bytes = -1;
	if (!file_override(cfg->topic_retention_ms, cfg->topic_retention_ms_count,
			   p->topic))
		lc->retention_ms = ms;
	if (!file_override(cfg->topic_retention_bytes,
			   cfg->topic_retention_bytes_count, p->topic))
		lc->retention_bytes = bytes;
	/* A compacted source topic is compacted here once writable
	 * (log_clean.c), unless topic.cleanup.policy names the topic. */
	if (policy[0] != '\0' &&
	    !file_override(cfg->topic_cleanup_policy,
			   cfg->topic_cleanup_policy_count, p->topic))
		lc->compact = strstr(policy, "compact") != NULL;
	if (synced_i64(first->tconfig, "delete.retention.ms", &v) && v >= 0)
		lc->delete_retention_ms = v;
	if (synced_i64(first->tconfig, "segment.bytes", &v) && v >= 1024 &&
	    v <= INT32_MAX)
		lc->segment_bytes = (uint64_t)v;
	client_rules(first->tconfig, lc);
}

/* ---- kmirror.configs: what was synced, across restarts ---- */

static void configs_path(const struct km_daemon *d, const struct km_part *first,
			 char *out, size_t cap)
{
	char dir[4096];

	km_daemon_part_dir(d, first, dir, sizeof(dir));
	snprintf(out, cap, "%s/%s", dir, CONFIGS_FILE);
}

/* The rename lasts once the directory holding it is synced. */
static int sync_dir(const char *path)
{
	char dir[4200];
	char *slash;
	int fd, rc = 0;

	snprintf(dir, sizeof(dir), "%s", path);
	if ((slash = strrchr(dir, '/')) != NULL)
		*slash = '\0';
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	if (fsync(fd) != 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* Written whole to a temporary file, synced, renamed over the old one: a
 * crash leaves either set, never a mix. */
static int save_file(const struct km_daemon *d, const struct km_part *first,
		     const struct km_tconfig_entry *e, uint32_t n)
{
	return km_daemon_configs_save(d, first, e, n,
				      "topic configs synced from the source");
}

int km_daemon_configs_save(const struct km_daemon *d,
			   const struct km_part *first,
			   const struct km_tconfig_entry *e, uint32_t n,
			   const char *what)
{
	char path[4200], tmp[4210], k[2 * KM_TCONFIG_NAME_BYTES],
		v[2 * KM_TCONFIG_VALUE_BYTES];
	FILE *f;
	int rc = 0;

	configs_path(d, first, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if ((f = fopen(tmp, "w")) == NULL)
		return -errno;
	fprintf(f, "# %s (kmirrord)\n", what);
	for (uint32_t i = 0; i < n; i++) {
		km_props_escape(k, sizeof(k), e[i].name, 1);
		km_props_escape(v, sizeof(v), e[i].value, 0);
		fprintf(f, "%s=%s\n", k, v);
	}
	if (fflush(f) != 0 || fsync(fileno(f)) != 0)
		rc = -errno;
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
	return rc < 0 ? rc : sync_dir(path);
}

struct loaded {
	struct km_tconfig_entry *e;
	uint32_t n;
};

static int load_pair(void *arg, const char *key, const char *value,
		     uint32_t line)
{
	struct loaded *l = arg;

	(void)line;
	if (l->n == KM_TCONFIG_ENTRIES_MAX)
		return 0;
	snprintf(l->e[l->n].name, sizeof(l->e[l->n].name), "%s", key);
	snprintf(l->e[l->n].value, sizeof(l->e[l->n].value), "%s", value);
	l->n++;
	return 0;
}

static void load_file(const struct km_daemon *d, struct km_part *first)
{
	struct loaded l = { calloc(KM_TCONFIG_ENTRIES_MAX, sizeof(*l.e)), 0 };
	char path[4200], *text = NULL;
	size_t len = 0;
	FILE *f;

	configs_path(d, first, path, sizeof(path));
	if (l.e == NULL || (f = fopen(path, "r")) == NULL) {
		free(l.e);
		return;
	}
	text = malloc(64 * 1024);
	if (text != NULL)
		len = fread(text, 1, 64 * 1024, f);
	fclose(f);
	if (text != NULL &&
	    km_props_parse(text, len, load_pair, &l, NULL, NULL) == 0 && l.n > 0) {
		km_tconfig_replace(first->tconfig, l.e, l.n);
		KM_INFO("daemon", "topic %s: %u config(s) %s, from %s",
			first->topic, l.n,
			d->mirrored[first - d->table.parts]
				? "synced before" : "given at its creation",
			CONFIGS_FILE);
	}
	free(text);
	free(l.e);
}

int km_daemon_configs_init(struct km_daemon *d)
{
	/* One store per topic (partitions of a topic are adjacent): comparing
	 * with the previous partition's store alone gave every other
	 * partition one of its own, 20 KiB each. */
	const char *had = NULL;

	for (uint32_t i = 0; i < d->table.n; i++) {
		struct km_part *p = &d->table.parts[i];
		int rc;

		if ((!d->mirrored[i] && !km_daemon_created(d, p)) ||
		    (had != NULL && strcmp(had, p->topic) == 0))
			continue;
		if ((rc = km_tconfig_new(&p->tconfig)) < 0)
			return rc;
		load_file(d, p);
		had = p->topic;
	}
	return 0;
}

bool km_daemon_created(const struct km_daemon *d, const struct km_part *p)
{
	struct km_part zero;
	char path[4200];

	/* A created topic's configs are in its partition 0's directory. */
	memset(&zero, 0, sizeof(zero));
	snprintf(zero.topic, sizeof(zero.topic), "%s", p->topic);
	configs_path(d, &zero, path, sizeof(path));
	return !d->mirrored[p - d->table.parts] && access(path, F_OK) == 0;
}

int km_daemon_configs_add(struct km_daemon *d, uint32_t i)
{
	struct km_part *first = km_part_topic_first(&d->table,
						    d->table.parts[i].topic);
	int rc;

	if (!d->mirrored[i] || first == NULL || first->tconfig != NULL)
		return 0;
	if ((rc = km_tconfig_new(&first->tconfig)) < 0)
		return rc;
	load_file(d, first);
	return 0;
}

void km_daemon_configs_free(struct km_daemon *d)
{
	for (uint32_t i = 0; d->table.parts != NULL && i < d->table.n; i++) {
		km_tconfig_free(d->table.parts[i].tconfig);
		d->table.parts[i].tconfig = NULL;
	}
}

/* ---- the round ---- */

/* Give every open partition of the topic starting at table entry t its
 * new limits, through its owner. */
static void apply_topic(struct km_daemon *d, uint32_t t)
{
	const char *topic = d->table.parts[t].topic;

	for (uint32_t i = t; i < d->table.n &&
			     strcmp(d->table.parts[i].topic, topic) == 0; i++) {
		struct km_part *p = &d->table.parts[i];
		struct km_worker_reply r;
		struct km_log_config lc;
		struct km_log_limits l;
		int rc;

		if (p->log == NULL)
			continue;
		km_config_log_config(d->cfg, p->topic, p->partition, &lc);
		km_daemon_configs_limits(d, i, &lc);
		l = (struct km_log_limits){ lc.retention_ms, lc.retention_bytes,
					    lc.segment_bytes, true, lc.compact,
					    lc.delete_retention_ms,
					    lc.min_cleanable_ratio,
					    lc.client_batch_bytes_max,
					    lc.client_log_append_time };
		if ((rc = km_worker_set_limits(d->workers[p->owner], p, &l, &r)) < 0 ||
		    (rc = km_worker_wait(d->ctl_efd, &r, LIMITS_TIMEOUT_MS)) < 0)
			KM_WARN("daemon", "partition %s-%d: synced configs: %s",
				p->topic, p->partition, km_strerror(rc));
	}
}

/* One line for the log: name=value, ... */
static void describe(const struct km_tconfig_entry *e, uint32_t n, char *out,
		     size_t cap)
{
	size_t len = 0;

	out[0] = '\0';
	for (uint32_t i = 0; i < n && len < cap; i++)
		len += (size_t)snprintf(out + len, cap - len, "%s%s=%s",
					i ? ", " : "", e[i].name, e[i].value);
	if (n == 0)
		snprintf(out, cap, "none");
}

/* A result's entries the sync keeps: the source topic's own values. */
static uint32_t keep(const struct km_config *cfg, const struct km_dconfigs_resp *m,
		     const struct km_dconfigs_dresult *res,
		     struct km_tconfig_entry *out)
{
	uint32_t n = 0;

	/* A value the decoder cut (it keeps KM_WIRE_NAME_BYTES_MAX bytes) is
	 * left out rather than synced wrong. */
	for (uint32_t k = res->first; k < res->first + res->n_configs &&
				      n < KM_TCONFIG_ENTRIES_MAX; k++) {
		const struct km_dconfigs_dentry *e = &m->entries[k];

		if (e->source != KM_CONFIG_SOURCE_TOPIC || e->value.len < 0 ||
		    e->sensitive || excluded(cfg, e->name.s) ||
		    e->name.len >= (int16_t)KM_TCONFIG_NAME_BYTES ||
		    e->value.len >= (int16_t)KM_WIRE_NAME_BYTES_MAX)
			continue;
		memcpy(out[n].name, e->name.s, (size_t)e->name.len + 1);
		memcpy(out[n].value, e->value.s, (size_t)e->value.len + 1);
		n++;
	}
	return n;
}

/* One topic's answer: store, persist and apply it if it changed. */
static void take_result(struct km_daemon *d, const struct km_dconfigs_resp *m,
			const struct km_dconfigs_dresult *res,
			struct km_tconfig_entry *tmp)
{
	char line[1024];
	struct km_part *first;
	uint32_t n, t;
	int rc;

	if ((first = km_part_topic_first(&d->table, res->name.s)) == NULL ||
	    first->tconfig == NULL)
		return;
	if (res->error_code != 0) {
		KM_WARN("daemon", "topic %s: config sync: the source answered %s",
			res->name.s, km_kerr_name(res->error_code));
		d->csync_errors++;
		return;
	}
	n = keep(d->cfg, m, res, tmp);
	if (km_tconfig_replace(first->tconfig, tmp, n) != 1)
		return;
	km_tconfig_copy(first->tconfig, tmp, KM_TCONFIG_ENTRIES_MAX);
	describe(tmp, n, line, sizeof(line));
	KM_INFO("daemon", "topic %s: configs synced from the source: %s",
		first->topic, line);
	if ((rc = save_file(d, first, tmp, n)) < 0)
		KM_WARN("daemon", "topic %s: %s: %s", first->topic, CONFIGS_FILE,
			km_strerror(rc));
	t = (uint32_t)(first - d->table.parts);
	apply_topic(d, t);
}

struct call_arrays {
	struct km_dconfigs_resource res[TOPICS_PER_CALL];
	struct km_dconfigs_dresult results[TOPICS_PER_CALL];
	struct km_dconfigs_dentry entries[TOPICS_PER_CALL * ENTRIES_PER_TOPIC];
	struct km_dconfigs_dsyn syns[64];
	struct km_tconfig_entry tmp[KM_TCONFIG_ENTRIES_MAX];
};

/* One DescribeConfigs for the topics at table entries first[0..n). */
static int ask(struct km_daemon *d, struct km_kclient *c, struct call_arrays *a,
	       const uint32_t *first, uint32_t n)
{
	struct km_dconfigs_req req = { .resources = a->res,
				       .resources_max = TOPICS_PER_CALL,
				       .n_resources = n };
	struct km_dconfigs_resp m = {
		.results = a->results, .results_max = TOPICS_PER_CALL,
		.entries = a->entries,
		.entries_max = TOPICS_PER_CALL * ENTRIES_PER_TOPIC,
		.synonyms = a->syns, .synonyms_max = 64,
	};
	struct km_wire_rd r;
	int rc;

	for (uint32_t k = 0; k < n; k++) {
		a->res[k] = (struct km_dconfigs_resource){
			.type = KM_CONFIG_RESOURCE_TOPIC, .n_keys = -1 };
		km_wire_name_set(&a->res[k].name, d->table.parts[first[k]].topic);
	}
	if ((rc = km_kclient_call(c, KM_API_DESCRIBE_CONFIGS, DCONFIGS_VERSION,
				  enc_dconfigs, &req, &r)) < 0 ||
	    (rc = km_dconfigs_resp_decode(&r, DCONFIGS_VERSION, &m)) < 0)
		return rc;
	for (uint32_t k = 0; k < m.n_results; k++)
		take_result(d, &m, &m.results[k], a->tmp);
	return 0;
}

static int open_source(const struct km_daemon *d, struct km_kclient *c)
{
	int rc = -ENOENT;

	for (uint32_t i = 0; i < d->cfg->bootstrap_count; i++)
		if ((rc = km_kclient_open(c, &d->cfg->bootstrap[i],
					  SYNC_TIMEOUT_MS)) == 0)
			return 0;
	return rc;
}

/* The first table entry of each topic that follows the source. */
static uint32_t topics_to_sync(const struct km_daemon *d, uint32_t *out)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < d->table.n; i++) {
		struct km_part *first;

		if (!follows(d, i) ||
		    (first = km_part_topic_first(&d->table,
						 d->table.parts[i].topic)) == NULL ||
		    first->tconfig == NULL)
			continue;
		if (n == 0 || out[n - 1] != (uint32_t)(first - d->table.parts))
			out[n++] = (uint32_t)(first - d->table.parts);
	}
	return n;
}

static int run_round(struct km_daemon *d)
{
	uint32_t *topics = calloc(d->table.n ? d->table.n : 1, sizeof(*topics));
	struct call_arrays *a = malloc(sizeof(*a));
	struct km_kclient c;
	bool speaks = false;
	uint32_t n;
	int rc = -ENOMEM;

	if (topics == NULL || a == NULL)
		goto out;
	if ((n = topics_to_sync(d, topics)) == 0) {
		rc = 0;
		goto out;
	}
	if ((rc = open_source(d, &c)) < 0)
		goto out;
	rc = km_kclient_supports(&c, KM_API_DESCRIBE_CONFIGS, DCONFIGS_VERSION,
				 &speaks);
	if (rc == 0 && !speaks && !d->csync_unsupported)
		KM_INFO("daemon", "config sync: the source serves no "
			"DescribeConfigs v%d; topic configs are not synced",
			DCONFIGS_VERSION);
	d->csync_unsupported = rc == 0 && !speaks;
	for (uint32_t k = 0; rc == 0 && speaks && k < n; k += TOPICS_PER_CALL)
		rc = ask(d, &c, a, topics + k,
			 n - k < TOPICS_PER_CALL ? n - k : TOPICS_PER_CALL);
	km_kclient_close(&c);
out:
	free(topics);
	free(a);
	return rc;
}

void km_daemon_sync_configs(struct km_daemon *d)
{
	uint64_t now = km_clock_ms();
	int rc;

	if (d->cfg->config_sync_interval_ms == 0 || d->cfg->bootstrap_count == 0 ||
	    now < d->csync_next_ms)
		return;
	d->csync_next_ms = now + d->cfg->config_sync_interval_ms;
	rc = run_round(d);
	d->csync_rounds++;
	/* Said once per change: a source that is down stays quiet after. */
	if (rc < 0 && rc != d->csync_rc)
		KM_WARN("daemon", "config sync from the source failed: %s (the "
			"configs here stay as last synced)", km_strerror(rc));
	if (rc < 0)
		d->csync_errors++;
	d->csync_rc = rc;
}

json_t *km_daemon_configs_status(const struct km_daemon *d)
{
	const char *last = d->csync_rounds == 0 ? "not run yet"
			   : d->csync_unsupported ? "the source serves no DescribeConfigs"
			   : d->csync_rc < 0 ? km_strerror(d->csync_rc) : "ok";

	return json_pack("{s:I, s:I, s:I, s:s}", "interval_ms",
			 (json_int_t)d->cfg->config_sync_interval_ms, "rounds",
			 (json_int_t)d->csync_rounds, "errors",
			 (json_int_t)d->csync_errors, "last", last);
}
