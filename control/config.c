/* kmirrord's configuration: the key table, loading and the checks between
 * keys. Value parsers are in config_parse.c; see config.h for the rules. */
#include "control/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "control/config_pvt.h"
#include "iouring_log/log.h"
#include "control/props.h"

static const char *const net_modes[] = { "kernel", "dpdk" };
static const char *const stop_modes[] = { "truncate", "abort" };
static const char *const resets[] = { "none", "earliest" };
static const char *const flushes[] = { "interval", "always" };
static const char *const levels[] = { "error", "warn", "info", "debug" };

_Static_assert(KM_LOG_ERROR == 0 && KM_LOG_DEBUG == 3, "levels[] order");
_Static_assert(sizeof(enum km_config_net_mode) == sizeof(int), "enum as int");
_Static_assert(sizeof(enum km_config_stop_mode) == sizeof(int), "enum as int");
_Static_assert(sizeof(enum km_config_offset_reset) == sizeof(int), "enum as int");
_Static_assert(sizeof(enum km_log_level) == sizeof(int), "enum as int");

enum kind {
	K_U32,	  /* uint32_t field, with units and a range */
	K_U64,	  /* uint64_t field */
	K_I32,	  /* int32_t field */
	K_ENUM,	  /* an enum field (int-sized), from names[] */
	K_CUSTOM, /* apply() and format() */
};

struct sink {
	char *buf;
	size_t cap;
	size_t len;
};

struct key_def {
	const char *name;
	enum kind kind;
	size_t off;
	enum km_config_units units;
	uint64_t min, max;
	const char *const *names;
	uint32_t names_count;
	int (*apply)(const struct km_config_ctx *c);
	void (*format)(const struct km_config *cfg, struct sink *s);
};

/* ---- formatting ---- */

static void sinkf(struct sink *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void sinkf(struct sink *s, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(s->len < s->cap ? s->buf + s->len : NULL,
		      s->len < s->cap ? s->cap - s->len : 0, fmt, ap);
	va_end(ap);
	KM_ASSERT(n >= 0);
	s->len += (size_t)n;
}

static void sink_escaped(struct sink *s, const char *value)
{
	bool room = s->len < s->cap;

	s->len += km_props_escape(room ? s->buf + s->len : NULL,
				  room ? s->cap - s->len : 0, value, 0);
}

static void format_addr(struct sink *s, const struct km_config_addr *a)
{
	if (strchr(a->host, ':') != NULL)
		sinkf(s, "[%s]:%u", a->host, a->port);
	else
		sinkf(s, "%s:%u", a->host, a->port);
}

static void format_ipv4(struct sink *s, uint32_t be)
{
	char text[INET_ADDRSTRLEN];
	struct in_addr a = { .s_addr = be };

	inet_ntop(AF_INET, &a, text, sizeof(text));
	sinkf(s, "%s", text);
}

/* ---- custom keys ---- */

#define CFG(c) ((c)->cfg)

static int apply_data_dir(const struct km_config_ctx *c)
{
	return km_config_parse_path(c, CFG(c)->data_dir, sizeof(CFG(c)->data_dir));
}

static void format_data_dir(const struct km_config *cfg, struct sink *s)
{
	sink_escaped(s, cfg->data_dir);
}

static int apply_bootstrap(const struct km_config_ctx *c)
{
	return km_config_parse_addrs(c, KM_CONFIG_ADDR_BOOTSTRAP,
				     CFG(c)->bootstrap, KM_CONFIG_BOOTSTRAP_MAX,
				     &CFG(c)->bootstrap_count);
}

static void format_bootstrap(const struct km_config *cfg, struct sink *s)
{
	for (uint32_t i = 0; i < cfg->bootstrap_count; i++) {
		sinkf(s, "%s", i == 0 ? "" : ",");
		format_addr(s, &cfg->bootstrap[i]);
	}
}

static int apply_topics(const struct km_config_ctx *c)
{
	return km_config_parse_topics(c, CFG(c)->topics, &CFG(c)->topics_count);
}

static int apply_local_topics(const struct km_config_ctx *c)
{
	return km_config_parse_local_topics(c, CFG(c)->local_topics,
					    CFG(c)->local_partitions,
					    &CFG(c)->local_topics_count);
}

static void format_local_topics(const struct km_config *cfg, struct sink *s)
{
	for (uint32_t i = 0; i < cfg->local_topics_count; i++)
		sinkf(s, "%s%s:%u", i == 0 ? "" : ",", cfg->local_topics[i],
		      cfg->local_partitions[i]);
}

static void format_topics(const struct km_config *cfg, struct sink *s)
{
	for (uint32_t i = 0; i < cfg->topics_count; i++)
		sinkf(s, "%s%s", i == 0 ? "" : ",", cfg->topics[i]);
}

static int apply_groups(const struct km_config_ctx *c)
{
	return km_config_parse_groups(c, CFG(c)->groups, &CFG(c)->groups_count);
}

static void format_groups(const struct km_config *cfg, struct sink *s)
{
	for (uint32_t i = 0; i < cfg->groups_count; i++)
		sinkf(s, "%s%s", i == 0 ? "" : ",", cfg->groups[i]);
}

static int apply_listeners(const struct km_config_ctx *c)
{
	uint32_t n;

	return km_config_parse_addrs(c, KM_CONFIG_ADDR_LISTENER,
				     &CFG(c)->listener, 1, &n);
}

static void format_listeners(const struct km_config *cfg, struct sink *s)
{
	sinkf(s, "PLAINTEXT://");
	format_addr(s, &cfg->listener);
}

static int apply_advertised(const struct km_config_ctx *c)
{
	uint32_t n;
	int rc = km_config_parse_addrs(c, KM_CONFIG_ADDR_ADVERTISED,
				       &CFG(c)->advertised, 1, &n);

	CFG(c)->advertised_set = rc == 0;
	return rc;
}

static void format_advertised(const struct km_config *cfg, struct sink *s)
{
	if (!cfg->advertised_set)
		return;
	sinkf(s, "PLAINTEXT://");
	format_addr(s, &cfg->advertised);
}

static int apply_control_socket(const struct km_config_ctx *c)
{
	return km_config_parse_path(c, CFG(c)->control_socket,
				    sizeof(CFG(c)->control_socket));
}

static void format_control_socket(const struct km_config *cfg, struct sink *s)
{
	sink_escaped(s, cfg->control_socket);
}

static int apply_cluster_id(const struct km_config_ctx *c)
{
	int rc = km_config_parse_cluster_id(c, CFG(c)->cluster_id,
					    sizeof(CFG(c)->cluster_id));

	CFG(c)->cluster_id_configured = rc == 0;
	return rc;
}

static void format_cluster_id(const struct km_config *cfg, struct sink *s)
{
	sinkf(s, "%s", cfg->cluster_id);
}

static int apply_eal_args(const struct km_config_ctx *c)
{
	return km_config_parse_eal_args(c, CFG(c)->dpdk.eal_args,
					sizeof(CFG(c)->dpdk.eal_args));
}

static void format_eal_args(const struct km_config *cfg, struct sink *s)
{
	sink_escaped(s, cfg->dpdk.eal_args);
}

static int apply_dpdk_port(const struct km_config_ctx *c)
{
	return km_config_parse_dpdk_port(c, CFG(c)->dpdk.port,
					 sizeof(CFG(c)->dpdk.port));
}

static void format_dpdk_port(const struct km_config *cfg, struct sink *s)
{
	sinkf(s, "%s", cfg->dpdk.port);
}

static int apply_dpdk_ip(const struct km_config_ctx *c)
{
	return km_config_parse_ipv4(c, false, &CFG(c)->dpdk.ip_be);
}

static void format_dpdk_ip(const struct km_config *cfg, struct sink *s)
{
	if (cfg->dpdk.ip_be != 0)
		format_ipv4(s, cfg->dpdk.ip_be);
}

static int apply_dpdk_netmask(const struct km_config_ctx *c)
{
	return km_config_parse_ipv4(c, true, &CFG(c)->dpdk.netmask_be);
}

static void format_dpdk_netmask(const struct km_config *cfg, struct sink *s)
{
	format_ipv4(s, cfg->dpdk.netmask_be);
}

static int apply_dpdk_gateway(const struct km_config_ctx *c)
{
	return km_config_parse_ipv4(c, false, &CFG(c)->dpdk.gateway_be);
}

static void format_dpdk_gateway(const struct km_config *cfg, struct sink *s)
{
	if (cfg->dpdk.gateway_be != 0)
		format_ipv4(s, cfg->dpdk.gateway_be);
}

static int apply_dpdk_mac(const struct km_config_ctx *c)
{
	int rc = km_config_parse_mac(c, CFG(c)->dpdk.mac);

	CFG(c)->dpdk.mac_set = rc == 0;
	return rc;
}

static void format_dpdk_mac(const struct km_config *cfg, struct sink *s)
{
	const uint8_t *m = cfg->dpdk.mac;

	if (cfg->dpdk.mac_set)
		sinkf(s, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2],
		      m[3], m[4], m[5]);
}

static int apply_flush(const struct km_config_ctx *c)
{
	int v, rc = km_config_parse_enum(c, flushes, 2, &v);

	if (rc == 0)
		CFG(c)->flush_always = v == 1;
	return rc;
}

static void format_flush(const struct km_config *cfg, struct sink *s)
{
	sinkf(s, "%s", flushes[cfg->flush_always ? 1 : 0]);
}

static int apply_retention_ms(const struct km_config_ctx *c)
{
	return km_config_parse_limit(c, KM_CONFIG_UNITS_MS, &CFG(c)->retention_ms);
}

static void format_retention_ms(const struct km_config *cfg, struct sink *s)
{
	sinkf(s, "%" PRId64, cfg->retention_ms);
}

static int apply_retention_bytes(const struct km_config_ctx *c)
{
	return km_config_parse_limit(c, KM_CONFIG_UNITS_BYTES,
				     &CFG(c)->retention_bytes);
}

static void format_retention_bytes(const struct km_config *cfg, struct sink *s)
{
	sinkf(s, "%" PRId64, cfg->retention_bytes);
}

static int apply_topic_retention_ms(const struct km_config_ctx *c)
{
	return km_config_parse_topic_limits(c, KM_CONFIG_UNITS_MS,
					    CFG(c)->topic_retention_ms,
					    &CFG(c)->topic_retention_ms_count);
}

static void format_limits(const struct km_config_topic_value *v, uint32_t n,
			  struct sink *s)
{
	for (uint32_t i = 0; i < n; i++)
		sinkf(s, "%s%s:%" PRId64, i == 0 ? "" : ",", v[i].topic,
		      v[i].value);
}

static void format_topic_retention_ms(const struct km_config *cfg,
				      struct sink *s)
{
	format_limits(cfg->topic_retention_ms, cfg->topic_retention_ms_count, s);
}

static int apply_topic_retention_bytes(const struct km_config_ctx *c)
{
	return km_config_parse_topic_limits(c, KM_CONFIG_UNITS_BYTES,
					    CFG(c)->topic_retention_bytes,
					    &CFG(c)->topic_retention_bytes_count);
}

static void format_topic_retention_bytes(const struct km_config *cfg,
					 struct sink *s)
{
	format_limits(cfg->topic_retention_bytes,
		      cfg->topic_retention_bytes_count, s);
}

/* ---- the table: every key, in README order ---- */

#define OFF(field) offsetof(struct km_config, field)
#define CUSTOM(n, f) { .name = n, .kind = K_CUSTOM, .apply = apply_##f, .format = format_##f }
#define NUMBER(n, k, field, u, lo, hi) \
	{ .name = n, .kind = k, .off = OFF(field), .units = u, .min = lo, .max = hi }
#define ENUM(n, field, table) \
	{ .name = n, .kind = K_ENUM, .off = OFF(field), .names = table, \
	  .names_count = sizeof(table) / sizeof(table[0]) }

static const struct key_def keys[] = {
	CUSTOM("data.dir", data_dir),
	CUSTOM("source.bootstrap.servers", bootstrap),
	CUSTOM("topics", topics),
	CUSTOM("local.topics", local_topics),
	CUSTOM("listeners", listeners),
	CUSTOM("advertised.listeners", advertised),
	CUSTOM("control.socket", control_socket),
	CUSTOM("cluster.id", cluster_id),
	NUMBER("node.id", K_I32, node_id, KM_CONFIG_UNITS_PLAIN, 0, INT32_MAX),
	NUMBER("workers", K_U32, workers, KM_CONFIG_UNITS_PLAIN, 1,
	       KM_CONFIG_WORKERS_MAX),
	ENUM("net.mode", net_mode, net_modes),
	CUSTOM("dpdk.eal.args", eal_args),
	CUSTOM("dpdk.port", dpdk_port),
	CUSTOM("dpdk.ip", dpdk_ip),
	CUSTOM("dpdk.netmask", dpdk_netmask),
	CUSTOM("dpdk.gateway", dpdk_gateway),
	CUSTOM("dpdk.mac", dpdk_mac),
	/* Kafka's int range; the log needs at least 1 KiB. */
	NUMBER("segment.bytes", K_U64, segment_bytes, KM_CONFIG_UNITS_BYTES,
	       1024, INT32_MAX),
	CUSTOM("flush", flush),
	NUMBER("flush.ms", K_U32, flush_interval_ms, KM_CONFIG_UNITS_MS, 0,
	       INT32_MAX),
	NUMBER("flush.bytes", K_U64, flush_bytes, KM_CONFIG_UNITS_BYTES, 1,
	       INT64_MAX),
	ENUM("stop.mode", stop_mode, stop_modes),
	ENUM("mirror.offset.reset", offset_reset, resets),
	NUMBER("fetch.max.bytes", K_U32, fetch_bytes_max, KM_CONFIG_UNITS_BYTES,
	       1024, INT32_MAX),
	NUMBER("fetch.max.wait.ms", K_U32, fetch_wait_ms_max, KM_CONFIG_UNITS_MS,
	       0, INT32_MAX),
	NUMBER("batch.max.bytes", K_U32, batch_bytes_max, KM_CONFIG_UNITS_BYTES,
	       KM_BATCH_HEADER_BYTES, KM_BATCH_BYTES_MAX),
	CUSTOM("retention.ms", retention_ms),
	CUSTOM("retention.bytes", retention_bytes),
	CUSTOM("topic.retention.ms", topic_retention_ms),
	CUSTOM("topic.retention.bytes", topic_retention_bytes),
	NUMBER("disk.free.min.bytes", K_U64, disk_free_min_bytes,
	       KM_CONFIG_UNITS_BYTES, 0, INT64_MAX),
	CUSTOM("groups", groups),
	NUMBER("group.sync.interval.ms", K_U32, group_sync_interval_ms,
	       KM_CONFIG_UNITS_MS, 100, INT32_MAX),
	NUMBER("group.initial.rebalance.delay.ms", K_U32,
	       group_initial_rebalance_delay_ms, KM_CONFIG_UNITS_MS, 0,
	       INT32_MAX),
	NUMBER("group.min.session.timeout.ms", K_U32,
	       group_min_session_timeout_ms, KM_CONFIG_UNITS_MS, 1, INT32_MAX),
	NUMBER("group.max.session.timeout.ms", K_U32,
	       group_max_session_timeout_ms, KM_CONFIG_UNITS_MS, 1, INT32_MAX),
	ENUM("log.level", log_level, levels),
};

#define KEYS_COUNT (sizeof(keys) / sizeof(keys[0]))

static int apply_generic(const struct key_def *k, const struct km_config_ctx *c)
{
	char *field = (char *)c->cfg + k->off;
	uint64_t v;
	int e, rc;

	if (k->kind == K_ENUM) {
		if ((rc = km_config_parse_enum(c, k->names, k->names_count, &e)) == 0)
			memcpy(field, &e, sizeof(e));
		return rc;
	}
	if ((rc = km_config_parse_uint(c, k->units, k->min, k->max, &v)) < 0)
		return rc;
	if (k->kind == K_U32) {
		uint32_t v32 = (uint32_t)v;

		memcpy(field, &v32, sizeof(v32));
	} else if (k->kind == K_I32) {
		int32_t i32 = (int32_t)v;

		memcpy(field, &i32, sizeof(i32));
	} else {
		memcpy(field, &v, sizeof(v));
	}
	return 0;
}

static void format_generic(const struct key_def *k, const struct km_config *cfg,
			   struct sink *s)
{
	const char *field = (const char *)cfg + k->off;
	uint32_t v32;
	int32_t i32;
	uint64_t v64;
	int e;

	switch (k->kind) {
	case K_ENUM:
		memcpy(&e, field, sizeof(e));
		KM_ASSERT(e >= 0 && (uint32_t)e < k->names_count);
		sinkf(s, "%s", k->names[e]);
		break;
	case K_U32:
		memcpy(&v32, field, sizeof(v32));
		sinkf(s, "%" PRIu32, v32);
		break;
	case K_I32:
		memcpy(&i32, field, sizeof(i32));
		sinkf(s, "%" PRId32, i32);
		break;
	case K_U64:
		memcpy(&v64, field, sizeof(v64));
		sinkf(s, "%" PRIu64, v64);
		break;
	case K_CUSTOM:
		k->format(cfg, s);
		break;
	}
}

/* ---- defaults and derived values ---- */

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
	cfg->disk_free_min_bytes = 256ull << 20;
	cfg->group_sync_interval_ms = 5000;
	/* Kafka's broker defaults. */
	cfg->group_initial_rebalance_delay_ms = 3000;
	cfg->group_min_session_timeout_ms = 6000;
	cfg->group_max_session_timeout_ms = 1800000;
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
}

/* One worker per online core, as the design wants. */
uint32_t km_config_default_workers(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return 1;
	return n > (long)KM_CONFIG_WORKERS_MAX ? KM_CONFIG_WORKERS_MAX : (uint32_t)n;
}

static int check_local(const struct km_config *cfg, const char *origin,
		       char *err, size_t err_len)
{
	for (uint32_t i = 0; i < cfg->local_topics_count; i++)
		for (uint32_t j = 0; j < cfg->topics_count; j++)
			if (strcmp(cfg->local_topics[i], cfg->topics[j]) == 0) {
				km_config_errf(err, err_len,
					       "%s: topic \"%s\" is in both topics (mirrored) and local.topics (writable)",
					       origin, cfg->topics[j]);
				return KM_ECFGMISSING;
			}
	return 0;
}

static int check_groups(const struct km_config *cfg, const char *origin,
			char *err, size_t err_len)
{
	if (cfg->group_min_session_timeout_ms > cfg->group_max_session_timeout_ms) {
		km_config_errf(err, err_len,
			       "%s: group.min.session.timeout.ms=%u is above group.max.session.timeout.ms=%u",
			       origin, cfg->group_min_session_timeout_ms,
			       cfg->group_max_session_timeout_ms);
		return KM_ECFGMISSING;
	}
	if (cfg->groups_count > 0 && cfg->bootstrap_count == 0) {
		km_config_errf(err, err_len,
			       "%s: groups is set but source.bootstrap.servers is not (offsets are synced from the source)",
			       origin);
		return KM_ECFGMISSING;
	}
	return 0;
}

static int check_sources(const struct km_config *cfg, const char *origin,
			 char *err, size_t err_len)
{
	int rc;

	if ((rc = check_local(cfg, origin, err, err_len)) < 0)
		return rc;
	if (cfg->data_dir[0] == '\0') {
		km_config_errf(err, err_len, "%s: data.dir is required", origin);
		return KM_ECFGMISSING;
	}
	if (cfg->topics_count > 0 && cfg->bootstrap_count == 0) {
		km_config_errf(err, err_len,
			       "%s: topics is set but source.bootstrap.servers is not (a mirroring host needs both; a host that only serves local partitions sets neither)",
			       origin);
		return KM_ECFGMISSING;
	}
	if (cfg->bootstrap_count > 0 && cfg->topics_count == 0) {
		km_config_errf(err, err_len,
			       "%s: source.bootstrap.servers is set but topics is not (a mirroring host needs both; a host that only serves local partitions sets neither)",
			       origin);
		return KM_ECFGMISSING;
	}
	return check_groups(cfg, origin, err, err_len);
}

/* net.mode=dpdk gives each worker one queue pair of the port, and most
 * ports (and vdevs by default) have one: an unset `workers` is then 1, not
 * one per core. More workers need as many queue pairs, which the port
 * set-up checks (it names the vdev argument that adds them). */
static void dpdk_workers(struct km_config *cfg, bool workers_set)
{
	if (!workers_set)
		cfg->workers = 1;
}

static int check_dpdk(struct km_config *cfg, bool workers_set,
		      const char *origin, char *err, size_t err_len)
{
	const struct km_config_dpdk *d = &cfg->dpdk;
	char ip[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN], mask[INET_ADDRSTRLEN];

	if (cfg->net_mode != KM_CONFIG_NET_DPDK)
		return 0; /* dpdk.* are checked one by one, then ignored */
	dpdk_workers(cfg, workers_set);
	if (d->port[0] == '\0' || d->ip_be == 0) {
		km_config_errf(err, err_len, "%s: net.mode=dpdk needs %s", origin,
			       d->port[0] == '\0' ? "dpdk.port" : "dpdk.ip");
		return KM_ECFGMISSING;
	}
	if (d->gateway_be == 0 ||
	    (d->gateway_be & d->netmask_be) == (d->ip_be & d->netmask_be))
		return 0;
	inet_ntop(AF_INET, &d->ip_be, ip, sizeof(ip));
	inet_ntop(AF_INET, &d->gateway_be, gw, sizeof(gw));
	inet_ntop(AF_INET, &d->netmask_be, mask, sizeof(mask));
	km_config_errf(err, err_len,
		       "%s: dpdk.gateway %s is not in the subnet of dpdk.ip %s with dpdk.netmask %s",
		       origin, gw, ip, mask);
	return KM_ECFGMISSING;
}

static int derive(struct km_config *cfg, const char *origin, char *err,
		  size_t err_len)
{
	if (cfg->control_socket[0] == '\0') {
		int n = snprintf(cfg->control_socket, sizeof(cfg->control_socket),
				 "%s/%s", cfg->data_dir,
				 KM_CONFIG_SOCKET_DEFAULT_NAME);

		if (n < 0 || (size_t)n >= sizeof(cfg->control_socket)) {
			km_config_errf(err, err_len,
				       "%s: the default control.socket (data.dir + \"/%s\") is longer than %u bytes, the limit of a Unix socket path; set control.socket",
				       origin, KM_CONFIG_SOCKET_DEFAULT_NAME,
				       KM_CONFIG_SOCKET_BYTES_MAX - 1);
			return KM_ECFGMISSING;
		}
	}
	if (!cfg->advertised_set) {
		cfg->advertised = cfg->listener;
		if (km_config_host_is_any(cfg->listener.host) &&
		    gethostname(cfg->advertised.host,
				sizeof(cfg->advertised.host)) < 0)
			strcpy(cfg->advertised.host, "localhost");
		cfg->advertised.host[sizeof(cfg->advertised.host) - 1] = '\0';
	}
	return 0;
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
	struct raw_value raw[KEYS_COUNT];
	char *err;
	size_t err_len;
};

static int find_key(const char *name)
{
	for (size_t i = 0; i < KEYS_COUNT; i++)
		if (strcmp(keys[i].name, name) == 0)
			return (int)i;
	return -1;
}

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
	for (size_t i = 0; i < KEYS_COUNT; i++) {
		uint32_t d = distance(name, keys[i].name);

		if (d < best_d) {
			best_d = d;
			best = keys[i].name;
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
			       "%s: unknown key \"%s\" (the dpdk keys are dpdk.eal.args, dpdk.port, dpdk.ip, dpdk.netmask, dpdk.gateway and dpdk.mac)",
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
	int k = find_key(key);
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

	for (size_t i = 0; i < KEYS_COUNT && rc == 0; i++) {
		const struct raw_value *r = &l->raw[i];
		struct km_config_ctx c;

		if (r->value == NULL || r->value[0] == '\0')
			continue; /* unset, or reset to the default */
		where_of(l, r, where, sizeof(where));
		c = (struct km_config_ctx){ l->cfg, l->err, l->err_len, where,
					    keys[i].name, r->value };
		rc = keys[i].kind == K_CUSTOM ? keys[i].apply(&c)
					      : apply_generic(&keys[i], &c);
	}
	return rc;
}

/* The key was given a non-empty value (an empty one means the default). */
static bool raw_set(const struct loader *l, const char *key)
{
	const char *v = l->raw[find_key(key)].value;

	return v != NULL && v[0] != '\0';
}

int km_config_load(struct km_config *cfg, const char *path,
		   const char *const *sets, uint32_t sets_count, char *err,
		   size_t err_len)
{
	struct loader *l = calloc(1, sizeof(*l));
	const char *origin = path != NULL ? path : "kmirrord";
	int rc = 0;

	KM_ASSERT(sets_count <= KM_CONFIG_SETS_MAX);
	if (l == NULL)
		return -ENOMEM;
	*l = (struct loader){ .cfg = cfg, .path = path, .err = err,
			      .err_len = err_len };
	km_config_errf(err, err_len, "%s", "");
	km_config_defaults(cfg);
	if (path != NULL)
		rc = load_file(l);
	for (uint32_t i = 0; i < sets_count && rc == 0; i++)
		rc = load_set(l, sets[i]);
	if (rc == 0)
		rc = apply_all(l);
	if (rc == 0)
		rc = check_sources(cfg, origin, err, err_len);
	if (rc == 0)
		rc = check_dpdk(cfg, raw_set(l, "workers"), origin, err,
				err_len);
	if (rc == 0)
		rc = derive(cfg, origin, err, err_len);
	for (size_t i = 0; i < KEYS_COUNT; i++)
		free(l->raw[i].value);
	free(l);
	return rc;
}

static int arg_value(int argc, const char *const *argv, int *i,
		     const char *flag, const char **out)
{
	size_t n = strlen(flag);
	const char *a = argv[*i];

	if (strncmp(a, flag, n) != 0)
		return 0;
	if (a[n] == '=') {
		*out = a + n + 1;
		return 1;
	}
	if (a[n] != '\0')
		return 0;
	if (*i + 1 >= argc)
		return -1;
	*out = argv[++*i];
	return 1;
}

int km_config_load_args(struct km_config *cfg, int argc,
			const char *const *argv, char *err, size_t err_len)
{
	const char *sets[KM_CONFIG_SETS_MAX], *path = NULL, *v = NULL;
	uint32_t n = 0;
	int m;

	for (int i = 1; i < argc; i++) {
		if ((m = arg_value(argc, argv, &i, "--config", &v)) > 0) {
			path = v;
		} else if (m == 0 && (m = arg_value(argc, argv, &i, "--set", &v)) > 0) {
			if (n == KM_CONFIG_SETS_MAX) {
				km_config_errf(err, err_len, "more than %u --set flags",
					       KM_CONFIG_SETS_MAX);
				return KM_ECFGSYNTAX;
			}
			sets[n++] = v;
		} else {
			km_config_errf(err, err_len, "%s %s: %s", argv[i],
				       m < 0 ? "needs a value" : "is not an option",
				       KM_CONFIG_USAGE);
			return KM_ECFGSYNTAX;
		}
	}
	return km_config_load(cfg, path, sets, n, err, err_len);
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
	if (strcmp(topic, KM_CONFIG_OFFSETS_TOPIC) == 0) {
		/* Committed offsets go only by compaction (the coordinator
		 * rewrites what is live), never by age or size; small
		 * segments let that free space early. */
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

int km_config_format(const struct km_config *cfg, char *buf, size_t cap)
{
	struct sink s = { buf, cap, 0 };

	for (size_t i = 0; i < KEYS_COUNT; i++) {
		size_t mark = s.len;

		sinkf(&s, "%s=", keys[i].name);
		format_generic(&keys[i], cfg, &s);
		if (s.len == mark + strlen(keys[i].name) + 1)
			s.len = mark; /* unset, no default: left out */
		else
			sinkf(&s, "\n");
	}
	if (s.len >= cap)
		return -ENOSPC;
	buf[s.len] = '\0';
	return (int)s.len;
}
