/* kmirrord's configuration: the defaults, loading a file and --set values
 * (the last value of a key wins) and what the daemon derives from the
 * result. The keys are in config_keys.c, their value parsers in
 * config_parse.c, the checks between keys in config_check.c; see config.h
 * for the rules. */
#include "control/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "control/config_pvt.h"
#include "iouring_log/log.h"
#include "control/props.h"
#include "kafka/sasl.h"

/* ---- defaults ---- */

void km_config_defaults(struct km_config *cfg)
{
	struct km_log_config log;

	km_log_config_defaults(&log, "", "", 0);
	memset(cfg, 0, sizeof(*cfg));
	cfg->listener.port = 9092; /* Kafka's PLAINTEXT://:9092 */
	cfg->node_id = 1;
	cfg->workers = km_config_default_workers();
	cfg->net_mode = KM_CONFIG_NET_KERNEL;
	cfg->retention_ms = -1;
	cfg->retention_bytes = -1;
	cfg->delete_retention_ms = (uint64_t)log.delete_retention_ms;
	cfg->cleaner_map_bytes = log.cleaner_map_bytes;
	cfg->min_cleanable_ratio = log.min_cleanable_ratio;
	cfg->disk_free_min_bytes = 256ull << 20;
	cfg->group_sync_interval_ms = 5000;
	/* MirrorMaker 2's topics.exclude keeps Kafka's internal topics out. */
	snprintf(cfg->topics_exclude, sizeof(cfg->topics_exclude), "__.*");
	cfg->metadata_refresh_interval_ms = 30000;
	cfg->group_sync_stop_timeout_ms = 2000;
	/* Kafka's broker defaults. */
	cfg->group_initial_rebalance_delay_ms = 3000;
	cfg->group_min_session_timeout_ms = 6000;
	cfg->group_max_session_timeout_ms = 1800000;
	cfg->txn_ids_max = 1024;
	cfg->txn_id_expiration_ms = 604800000; /* Kafka's 7 days */
	cfg->request_bytes_max = 100u << 20;
	cfg->request_timeout_ms = 30000;
	cfg->dpdk.netmask_be = htonl(0xffffff00u);
	cfg->segment_bytes = log.segment_bytes;
	cfg->flush_interval_ms = log.flush_interval_ms;
	cfg->flush_bytes = log.flush_bytes;
	cfg->flush_always = log.flush_always;
	cfg->stop_mode = KM_CONFIG_STOP_TRUNCATE;
	cfg->log_level = KM_LOG_INFO;
	cfg->offset_reset = KM_CONFIG_RESET_NONE;
	cfg->fetch_bytes_max = 52428800; /* Kafka consumer's fetch.max.bytes */
	cfg->fetch_wait_ms_max = 500;	 /* ... and fetch.max.wait.ms */
	cfg->batch_bytes_max = log.batch_bytes_max;
	cfg->source_unavailable_ms = 300000;
	cfg->failed_retry_initial_backoff_ms = 1000;
	cfg->failed_retry_max_backoff_ms = 60000;
	cfg->failed_retry_max_attempts = 0;
	cfg->num_partitions = 1; /* Kafka's num.partitions */
	cfg->fetch_session_slots = 1000; /* Kafka's default */
	cfg->log_direct_io = 1;
	cfg->log_tail_cache_bytes = log.tail_cache_bytes;
	cfg->config_sync_interval_ms = 600000; /* MM2's sync.topic.configs */
	km_config_sync_exclude_defaults(cfg);
	cfg->source_ssl_verify_host = true; /* Kafka's https default */
	/* Kafka's default is GSSAPI, which kmirrord does not speak. */
	cfg->sasl_enabled_mechanisms = 1u << KM_SASL_SCRAM_SHA_256 |
				       1u << KM_SASL_SCRAM_SHA_512;
	cfg->acls_sync_interval_ms = 600000; /* MM2's sync.topic.acls */
}

bool km_config_authorizes(const struct km_config *cfg)
{
	return cfg->authorizer_class_name[0] != '\0' ||
	       cfg->acls_file[0] != '\0' || cfg->acls_sync != 0;
}

/* What the KIP-1279 prototype keeps from a mirror by default: replication
 * throttles and durability settings of the source's own replicas, and the
 * timestamp bounds a mirror must not apply to records it copies. */
void km_config_sync_exclude_defaults(struct km_config *cfg)
{
	static const char *const names[] = {
		"follower.replication.throttled.replicas",
		"leader.replication.throttled.replicas",
		"min.insync.replicas",
		"unclean.leader.election.enable",
		"message.timestamp.before.max.ms",
		"message.timestamp.after.max.ms",
	};

	cfg->config_sync_exclude_count = sizeof(names) / sizeof(names[0]);
	for (uint32_t i = 0; i < cfg->config_sync_exclude_count; i++)
		snprintf(cfg->config_sync_exclude[i],
			 sizeof(cfg->config_sync_exclude[i]), "%s", names[i]);
}

/* One worker per online core, as the design wants. */
uint32_t km_config_default_workers(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return 1;
	return n > (long)KM_CONFIG_WORKERS_MAX ? KM_CONFIG_WORKERS_MAX : (uint32_t)n;
}

/* ---- loading ---- */

/* The last raw value seen for each key (last wins), applied at the end so
 * an early bad value that a later one replaces is never an error. */
struct raw_value {
	char *value;
	uint32_t line;
	bool from_set;
};

struct loader {
	struct km_config *cfg;
	const char *path;
	struct raw_value raw[KM_CONFIG_KEYS_COUNT];
	char *err;
	size_t err_len;
};

/* Edit distance, for "did you mean"; names longer than 63 are not tried. */
static uint32_t distance(const char *a, const char *b)
{
	uint32_t row[64], prev, la = (uint32_t)strlen(a), lb = (uint32_t)strlen(b);

	if (la > 63 || lb > 63)
		return UINT32_MAX;
	for (uint32_t j = 0; j <= lb; j++)
		row[j] = j;
	for (uint32_t i = 1; i <= la; i++) {
		prev = row[0];
		row[0] = i;
		for (uint32_t j = 1; j <= lb; j++) {
			uint32_t sub = prev + (a[i - 1] != b[j - 1]);
			uint32_t best = row[j] + 1 < row[j - 1] + 1 ? row[j] + 1 : row[j - 1] + 1;

			prev = row[j];
			row[j] = sub < best ? sub : best;
		}
	}
	return row[lb];
}

/* Kafka broker names an operator might bring along. */
static const char *const kafka_names[][2] = {
	{ "log.dirs", "data.dir" },
	{ "log.dir", "data.dir" },
	{ "bootstrap.servers", "source.bootstrap.servers" },
	{ "log.segment.bytes", "segment.bytes" },
	{ "log.flush.interval.ms", "flush.ms" },
	{ "broker.id", "node.id" },
	{ "message.max.bytes", "batch.max.bytes" },
	{ "auto.offset.reset", "mirror.offset.reset" },
};

static const char *suggest(const char *name)
{
	const char *best = NULL;
	uint32_t best_d = 3; /* suggest only within two edits */

	for (size_t i = 0; i < sizeof(kafka_names) / sizeof(kafka_names[0]); i++)
		if (strcmp(name, kafka_names[i][0]) == 0)
			return kafka_names[i][1];
	for (uint32_t i = 0; i < KM_CONFIG_KEYS_COUNT; i++) {
		uint32_t d = distance(name, km_config_key_name(i));

		if (d < best_d) {
			best_d = d;
			best = km_config_key_name(i);
		}
	}
	return best;
}

static int unknown_key(const struct loader *l, const char *where,
		       const char *name)
{
	const char *hint = name[0] != '\0' ? suggest(name) : NULL;
	char shown[400];

	km_config_show(shown, sizeof(shown), name);
	if (name[0] == '\0')
		km_config_errf(l->err, l->err_len, "%s: empty key", where);
	else if (hint != NULL)
		km_config_errf(l->err, l->err_len,
			       "%s: unknown key \"%s\" (did you mean \"%s\"?)",
			       where, shown, hint);
	else if (strncmp(name, "dpdk.", 5) == 0)
		km_config_errf(l->err, l->err_len,
			       "%s: unknown key \"%s\" (the dpdk keys are dpdk.eal.args, dpdk.port, dpdk.ip, dpdk.netmask, dpdk.gateway, dpdk.mac and dpdk.mtu)",
			       where, shown);
	else
		km_config_errf(l->err, l->err_len, "%s: unknown key \"%s\"", where,
			       shown);
	return KM_ECFGKEY;
}

static void where_of(const struct loader *l, const struct raw_value *r,
		     char *dst, size_t cap)
{
	if (r->from_set)
		snprintf(dst, cap, "--set");
	else
		snprintf(dst, cap, "%s:%" PRIu32, l->path, r->line);
}

static int remember(struct loader *l, const char *key, const char *value,
		    uint32_t line, bool from_set)
{
	struct raw_value probe = { NULL, line, from_set };
	char where[KM_CONFIG_PATH_BYTES_MAX + 16];
	int k = km_config_key_find(key);
	char *copy;

	if (k < 0) {
		where_of(l, &probe, where, sizeof(where));
		return unknown_key(l, where, key);
	}
	if (!from_set && l->raw[k].value != NULL)
		KM_WARN("config", "%s:%" PRIu32 ": %s set again (also at line %" PRIu32 "); the last value wins",
			l->path, line, key, l->raw[k].line);
	if ((copy = strdup(value)) == NULL)
		return -ENOMEM;
	free(l->raw[k].value);
	l->raw[k] = (struct raw_value){ copy, line, from_set };
	return 0;
}

static int on_pair(void *arg, const char *key, const char *value, uint32_t line)
{
	return remember(arg, key, value, line, false);
}

/* Read until EOF or cap bytes. */
static int read_all(int fd, char *buf, size_t cap, size_t *len)
{
	size_t n = 0;

	while (n < cap) {
		ssize_t r = read(fd, buf + n, cap - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*len = n;
	return 0;
}

/* Any readable file, pipes included (`--config <(...)`), up to the limit. */
static int read_config_file(struct loader *l, char **text, size_t *len)
{
	int fd = open(l->path, O_RDONLY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		rc = -errno;
	else if ((*text = malloc(KM_CONFIG_FILE_BYTES_MAX + 1)) == NULL)
		rc = -ENOMEM;
	else
		rc = read_all(fd, *text, KM_CONFIG_FILE_BYTES_MAX + 1, len);
	if (fd >= 0)
		close(fd);
	if (rc == 0 && *len > KM_CONFIG_FILE_BYTES_MAX)
		rc = -EFBIG;
	if (rc < 0)
		km_config_errf(l->err, l->err_len, "cannot read %s: %s", l->path,
			       rc == -EFBIG ? "larger than 1 MiB" : km_strerror(rc));
	return rc;
}

static int load_file(struct loader *l)
{
	const char *what = "";
	uint32_t line = 0;
	char *text = NULL;
	size_t len = 0;
	int rc;

	if ((rc = read_config_file(l, &text, &len)) < 0) {
		free(text);
		return rc;
	}
	rc = km_props_parse(text, len, on_pair, l, &line, &what);
	free(text);
	if (rc == KM_ECFGSYNTAX)
		km_config_errf(l->err, l->err_len, "%s:%" PRIu32 ": %s", l->path,
			       line, what);
	return rc;
}

static void trim(const char **s, const char **end)
{
	while (*s < *end && (**s == ' ' || **s == '\t'))
		(*s)++;
	while (*end > *s && ((*end)[-1] == ' ' || (*end)[-1] == '\t'))
		(*end)--;
}

static int load_set(struct loader *l, const char *set)
{
	const char *eq = strchr(set, '='), *k = set, *kend = eq, *v, *vend;
	char shown[400];
	char *key, *value;
	int rc;

	km_config_show(shown, sizeof(shown), set);
	if (eq == NULL) {
		km_config_errf(l->err, l->err_len,
			       "--set \"%s\": expected key=value", shown);
		return KM_ECFGSYNTAX;
	}
	v = eq + 1;
	vend = v + strlen(v);
	trim(&k, &kend);
	trim(&v, &vend);
	key = strndup(k, (size_t)(kend - k));
	value = strndup(v, (size_t)(vend - v));
	rc = key == NULL || value == NULL ? -ENOMEM
					  : remember(l, key, value, 0, true);
	free(key);
	free(value);
	return rc;
}

static int apply_all(struct loader *l)
{
	char where[KM_CONFIG_PATH_BYTES_MAX + 16];
	int rc = 0;

	for (uint32_t i = 0; i < KM_CONFIG_KEYS_COUNT && rc == 0; i++) {
		const struct raw_value *r = &l->raw[i];
		struct km_config_ctx c;

		if (r->value == NULL || r->value[0] == '\0')
			continue; /* unset, or reset to the default */
		where_of(l, r, where, sizeof(where));
		c = (struct km_config_ctx){ l->cfg, l->err, l->err_len, where,
					    km_config_key_name(i), r->value };
		rc = km_config_key_apply(i, &c);
	}
	return rc;
}

/* The key was given a non-empty value (an empty one means the default). */
static bool raw_set(const struct loader *l, const char *key)
{
	const char *v = l->raw[km_config_key_find(key)].value;

	return v != NULL && v[0] != '\0';
}

int km_config_load(struct km_config *cfg, const char *path,
		   const char *const *sets, uint32_t sets_count, char *err,
		   size_t err_len)
{
	struct loader *l = calloc(1, sizeof(*l));
	/* Without a file there is nothing to name (every value came from
	 * --set), and the program printing the message names itself. */
	char prefix[KM_CONFIG_PATH_BYTES_MAX + 2];
	int rc = 0;

	KM_ASSERT(sets_count <= KM_CONFIG_SETS_MAX);
	if (l == NULL)
		return -ENOMEM;
	*l = (struct loader){ .cfg = cfg, .path = path, .err = err,
			      .err_len = err_len };
	km_config_errf(err, err_len, "%s", "");
	snprintf(prefix, sizeof(prefix), "%s%s", path != NULL ? path : "",
		 path != NULL ? ": " : "");
	km_config_defaults(cfg);
	if (path != NULL)
		rc = load_file(l);
	for (uint32_t i = 0; i < sets_count && rc == 0; i++)
		rc = load_set(l, sets[i]);
	if (rc == 0)
		rc = apply_all(l);
	if (rc == 0)
		rc = km_config_check(cfg, raw_set(l, "workers"), prefix, err,
				     err_len);
	if (rc == 0)
		rc = km_config_derive(cfg, prefix, err, err_len);
	for (uint32_t i = 0; i < KM_CONFIG_KEYS_COUNT; i++)
		free(l->raw[i].value);
	free(l);
	return rc;
}

/* A topic's override, else the default. */
static int64_t limit_of(const struct km_config_topic_value *v, uint32_t n,
			const char *topic, int64_t dflt)
{
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(v[i].topic, topic) == 0)
			return v[i].value;
	return dflt;
}

void km_config_log_config(const struct km_config *cfg, const char *topic,
			  int32_t partition, struct km_log_config *out)
{
	KM_ASSERT(cfg->data_dir[0] != '\0');
	KM_ASSERT(partition >= 0);
	km_log_config_defaults(out, cfg->data_dir, topic, partition);
	out->segment_bytes = cfg->segment_bytes;
	out->flush_interval_ms = cfg->flush_interval_ms;
	out->flush_bytes = cfg->flush_bytes;
	out->flush_always = cfg->flush_always;
	out->batch_bytes_max = cfg->batch_bytes_max;
	out->retention_ms = limit_of(cfg->topic_retention_ms,
				     cfg->topic_retention_ms_count, topic,
				     cfg->retention_ms);
	out->retention_bytes = limit_of(cfg->topic_retention_bytes,
					cfg->topic_retention_bytes_count, topic,
					cfg->retention_bytes);
	out->compact = limit_of(cfg->topic_cleanup_policy,
				cfg->topic_cleanup_policy_count, topic, 0) == 1;
	out->delete_retention_ms = (int64_t)cfg->delete_retention_ms;
	out->cleaner_map_bytes = cfg->cleaner_map_bytes;
	out->min_cleanable_ratio = cfg->min_cleanable_ratio;
	out->direct_io = cfg->log_direct_io != 0;
	out->tail_cache_bytes = cfg->log_tail_cache_bytes;
	if (strcmp(topic, KM_CONFIG_OFFSETS_TOPIC) == 0 ||
	    strcmp(topic, KM_CONFIG_TXN_TOPIC) == 0) {
		/* Committed offsets and transactions go only by compaction
		 * (the coordinator rewrites what is live), never by age or
		 * size; small segments let that free space early. */
		out->retention_ms = -1;
		out->retention_bytes = -1;
		if (out->segment_bytes > KM_CONFIG_OFFSETS_SEGMENT_BYTES)
			out->segment_bytes = KM_CONFIG_OFFSETS_SEGMENT_BYTES;
	}
}

int km_config_eal_argv(const struct km_config *cfg, const char *prog,
		       char *buf, size_t buf_len, char **argv, uint32_t max)
{
	size_t pn = strlen(prog), an = strlen(cfg->dpdk.eal_args);
	uint32_t argc = 0;
	char *p;

	if (max < 1 || pn + an + 2 > buf_len)
		return -ENOSPC;
	memcpy(buf, prog, pn + 1);
	argv[argc++] = buf;
	p = buf + pn + 1;
	memcpy(p, cfg->dpdk.eal_args, an + 1);
	for (char *q = p; *q != '\0'; q++) {
		bool blank = *q == ' ' || *q == '\t';

		if (blank)
			*q = '\0';
		else if (q == p || q[-1] == '\0') {
			if (argc == max)
				return -ENOSPC;
			argv[argc++] = q;
		}
	}
	return (int)argc;
}

