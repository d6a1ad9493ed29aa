/* kmirrord's configuration keys: the table of every key (name, kind, field,
 * range) and, for each, how its text is applied to struct km_config and
 * how its value is written back, and the effective configuration printed
 * from it (km_config_format). Value parsers are in config_parse.c,
 * loading in config.c, the checks between keys in config_check.c. */
#include <errno.h>
#include <regex.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "control/config_pvt.h"
#include "control/namefilter.h"
#include "kafka/batch.h"
#include "kafka/sasl.h"

static const char *const net_modes[] = { "kernel", "dpdk" };
static const char *const stop_modes[] = { "truncate", "abort" };
static const char *const resets[] = { "none", "earliest" };
static const char *const flushes[] = { "interval", "always" };
static const char *const levels[] = { "error", "warn", "info", "debug" };
static const char *const booleans[] = { "false", "true" };

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

struct key_def {
	const char *name;
	enum kind kind;
	size_t off;
	enum km_config_units units;
	uint64_t min, max;
	const char *const *names;
	uint32_t names_count;
	int (*apply)(const struct km_config_ctx *c);
	void (*format)(const struct km_config *cfg, struct km_config_sink *s);
};

/* ---- custom keys ---- */

#define CFG(c) ((c)->cfg)

static int apply_data_dir(const struct km_config_ctx *c)
{
	return km_config_parse_path(c, CFG(c)->data_dir, sizeof(CFG(c)->data_dir));
}

static void format_data_dir(const struct km_config *cfg,
			    struct km_config_sink *s)
{
	km_config_emit_escaped(s, cfg->data_dir);
}

static int apply_bootstrap(const struct km_config_ctx *c)
{
	return km_config_parse_addrs(c, KM_CONFIG_ADDR_BOOTSTRAP,
				     CFG(c)->bootstrap, KM_CONFIG_BOOTSTRAP_MAX,
				     &CFG(c)->bootstrap_count);
}

static void format_bootstrap(const struct km_config *cfg,
			     struct km_config_sink *s)
{
	for (uint32_t i = 0; i < cfg->bootstrap_count; i++) {
		km_config_emit(s, "%s", i == 0 ? "" : ",");
		km_config_emit_addr(s, &cfg->bootstrap[i]);
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

static void format_local_topics(const struct km_config *cfg,
				struct km_config_sink *s)
{
	for (uint32_t i = 0; i < cfg->local_topics_count; i++)
		km_config_emit(s, "%s%s:%u", i == 0 ? "" : ",", cfg->local_topics[i],
		      cfg->local_partitions[i]);
}

static void format_topics(const struct km_config *cfg, struct km_config_sink *s)
{
	for (uint32_t i = 0; i < cfg->topics_count; i++)
		km_config_emit(s, "%s%s", i == 0 ? "" : ",", cfg->topics[i]);
}

static int apply_filter(const struct km_config_ctx *c, char *dst, size_t cap)
{
	struct km_namefilter f;
	char why[256];

	if (km_namefilter_compile(&f, c->value, why, sizeof(why)) < 0)
		return km_config_bad(c, "a comma-separated list of POSIX "
				     "extended regular expressions, each "
				     "matching a whole name: %s", why);
	km_namefilter_free(&f);
	snprintf(dst, cap, "%s", c->value);
	return 0;
}

static int apply_topics_include(const struct km_config_ctx *c)
{
	return apply_filter(c, CFG(c)->topics_include,
			    sizeof(CFG(c)->topics_include));
}

static void format_topics_include(const struct km_config *cfg,
				  struct km_config_sink *s)
{
	km_config_emit_escaped(s, cfg->topics_include);
}

static int apply_topics_exclude(const struct km_config_ctx *c)
{
	return apply_filter(c, CFG(c)->topics_exclude,
			    sizeof(CFG(c)->topics_exclude));
}

static void format_topics_exclude(const struct km_config *cfg,
				  struct km_config_sink *s)
{
	km_config_emit_escaped(s, cfg->topics_exclude);
}

static int apply_groups(const struct km_config_ctx *c)
{
	return km_config_parse_groups(c, CFG(c)->groups, &CFG(c)->groups_count);
}

static void format_groups(const struct km_config *cfg, struct km_config_sink *s)
{
	for (uint32_t i = 0; i < cfg->groups_count; i++)
		km_config_emit(s, "%s%s", i == 0 ? "" : ",", cfg->groups[i]);
}

/* Checked here (namefilter.h), so that a typo fails at start rather than
 * syncing nothing. */
static int apply_group_re(const struct km_config_ctx *c, char *dst)
{
	return apply_filter(c, dst, KM_CONFIG_GROUP_RE_BYTES_MAX);
}

static int apply_groups_include(const struct km_config_ctx *c)
{
	return apply_group_re(c, CFG(c)->groups_include);
}

static int apply_groups_exclude(const struct km_config_ctx *c)
{
	return apply_group_re(c, CFG(c)->groups_exclude);
}

static void format_groups_include(const struct km_config *cfg,
				  struct km_config_sink *s)
{
	km_config_emit_escaped(s, cfg->groups_include);
}

static void format_groups_exclude(const struct km_config *cfg,
				  struct km_config_sink *s)
{
	km_config_emit_escaped(s, cfg->groups_exclude);
}

static int apply_listeners(const struct km_config_ctx *c)
{
	return km_config_parse_listeners(c, KM_CONFIG_ADDR_LISTENER,
					 CFG(c)->listeners,
					 KM_CONFIG_LISTENERS_MAX,
					 &CFG(c)->listeners_count);
}

static void format_listener_list(const struct km_config_listener *l,
				 uint32_t n, bool adv, struct km_config_sink *s)
{
	for (uint32_t i = 0; i < n; i++) {
		km_config_emit(s, "%s%s://", i ? "," : "", l[i].name);
		km_config_emit_addr(s, adv ? &l[i].advertised : &l[i].addr);
	}
}

static void format_listeners(const struct km_config *cfg,
			     struct km_config_sink *s)
{
	if (cfg->listeners_count == 0) {
		km_config_emit(s, "PLAINTEXT://");
		km_config_emit_addr(s, &cfg->listener);
		return;
	}
	format_listener_list(cfg->listeners, cfg->listeners_count, false, s);
}

static int apply_advertised(const struct km_config_ctx *c)
{
	int rc = km_config_parse_listeners(c, KM_CONFIG_ADDR_ADVERTISED,
					   CFG(c)->adv_given,
					   KM_CONFIG_LISTENERS_MAX,
					   &CFG(c)->adv_given_count);

	CFG(c)->advertised_set = rc == 0;
	return rc;
}

/* What was given, by name (the others advertise their own address). */
static void format_advertised(const struct km_config *cfg,
			      struct km_config_sink *s)
{
	struct km_config_listener l[KM_CONFIG_LISTENERS_MAX];

	if (!cfg->advertised_set)
		return;
	for (uint32_t i = 0; i < cfg->adv_given_count; i++) {
		l[i] = cfg->adv_given[i];
		l[i].advertised = l[i].addr;
	}
	format_listener_list(l, cfg->adv_given_count, true, s);
}

static int apply_control_socket(const struct km_config_ctx *c)
{
	return km_config_parse_path(c, CFG(c)->control_socket,
				    sizeof(CFG(c)->control_socket));
}

static void format_control_socket(const struct km_config *cfg,
				  struct km_config_sink *s)
{
	km_config_emit_escaped(s, cfg->control_socket);
}

static int apply_cluster_id(const struct km_config_ctx *c)
{
	int rc = km_config_parse_cluster_id(c, CFG(c)->cluster_id,
					    sizeof(CFG(c)->cluster_id));

	CFG(c)->cluster_id_configured = rc == 0;
	return rc;
}

static void format_cluster_id(const struct km_config *cfg,
			      struct km_config_sink *s)
{
	km_config_emit(s, "%s", cfg->cluster_id);
}

static int apply_eal_args(const struct km_config_ctx *c)
{
	return km_config_parse_eal_args(c, CFG(c)->dpdk.eal_args,
					sizeof(CFG(c)->dpdk.eal_args));
}

static void format_eal_args(const struct km_config *cfg,
			    struct km_config_sink *s)
{
	km_config_emit_escaped(s, cfg->dpdk.eal_args);
}

static int apply_dpdk_port(const struct km_config_ctx *c)
{
	return km_config_parse_dpdk_port(c, CFG(c)->dpdk.port,
					 sizeof(CFG(c)->dpdk.port));
}

static void format_dpdk_port(const struct km_config *cfg,
			     struct km_config_sink *s)
{
	km_config_emit(s, "%s", cfg->dpdk.port);
}

static int apply_dpdk_ip(const struct km_config_ctx *c)
{
	return km_config_parse_ipv4(c, false, &CFG(c)->dpdk.ip_be);
}

static void format_dpdk_ip(const struct km_config *cfg,
			   struct km_config_sink *s)
{
	if (cfg->dpdk.ip_be != 0)
		km_config_emit_ipv4(s, cfg->dpdk.ip_be);
}

static int apply_dpdk_netmask(const struct km_config_ctx *c)
{
	return km_config_parse_ipv4(c, true, &CFG(c)->dpdk.netmask_be);
}

static void format_dpdk_netmask(const struct km_config *cfg,
				struct km_config_sink *s)
{
	km_config_emit_ipv4(s, cfg->dpdk.netmask_be);
}

static int apply_dpdk_gateway(const struct km_config_ctx *c)
{
	return km_config_parse_ipv4(c, false, &CFG(c)->dpdk.gateway_be);
}

static void format_dpdk_gateway(const struct km_config *cfg,
				struct km_config_sink *s)
{
	if (cfg->dpdk.gateway_be != 0)
		km_config_emit_ipv4(s, cfg->dpdk.gateway_be);
}

static int apply_dpdk_mac(const struct km_config_ctx *c)
{
	int rc = km_config_parse_mac(c, CFG(c)->dpdk.mac);

	CFG(c)->dpdk.mac_set = rc == 0;
	return rc;
}

static void format_dpdk_mac(const struct km_config *cfg,
			    struct km_config_sink *s)
{
	const uint8_t *m = cfg->dpdk.mac;

	if (cfg->dpdk.mac_set)
		km_config_emit(s, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2],
		      m[3], m[4], m[5]);
}

static int apply_flush(const struct km_config_ctx *c)
{
	int v, rc = km_config_parse_enum(c, flushes, 2, &v);

	if (rc == 0)
		CFG(c)->flush_always = v == 1;
	return rc;
}

static void format_flush(const struct km_config *cfg, struct km_config_sink *s)
{
	km_config_emit(s, "%s", flushes[cfg->flush_always ? 1 : 0]);
}

static int apply_retention_ms(const struct km_config_ctx *c)
{
	return km_config_parse_limit(c, KM_CONFIG_UNITS_MS, &CFG(c)->retention_ms);
}

static void format_retention_ms(const struct km_config *cfg,
				struct km_config_sink *s)
{
	km_config_emit(s, "%" PRId64, cfg->retention_ms);
}

static int apply_retention_bytes(const struct km_config_ctx *c)
{
	return km_config_parse_limit(c, KM_CONFIG_UNITS_BYTES,
				     &CFG(c)->retention_bytes);
}

static void format_retention_bytes(const struct km_config *cfg,
				   struct km_config_sink *s)
{
	km_config_emit(s, "%" PRId64, cfg->retention_bytes);
}

static int apply_topic_retention_ms(const struct km_config_ctx *c)
{
	return km_config_parse_topic_limits(c, KM_CONFIG_UNITS_MS,
					    CFG(c)->topic_retention_ms,
					    &CFG(c)->topic_retention_ms_count);
}

static void format_limits(const struct km_config_topic_value *v, uint32_t n,
			  struct km_config_sink *s)
{
	for (uint32_t i = 0; i < n; i++)
		km_config_emit(s, "%s%s:%" PRId64, i == 0 ? "" : ",", v[i].topic,
		      v[i].value);
}

static void format_topic_retention_ms(const struct km_config *cfg,
				      struct km_config_sink *s)
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
					 struct km_config_sink *s)
{
	format_limits(cfg->topic_retention_bytes,
		      cfg->topic_retention_bytes_count, s);
}

static int apply_metrics_listener(const struct km_config_ctx *c)
{
	uint32_t n;
	int rc = km_config_parse_addrs(c, KM_CONFIG_ADDR_LISTENER,
				       &CFG(c)->metrics_listener, 1, &n);

	CFG(c)->metrics_listener_set = rc == 0;
	return rc;
}

static void format_metrics_listener(const struct km_config *cfg,
				    struct km_config_sink *s)
{
	if (cfg->metrics_listener_set)
		km_config_emit_addr(s, &cfg->metrics_listener);
}

static int apply_topic_throttle(const struct km_config_ctx *c)
{
	struct km_config *cfg = CFG(c);
	int rc = km_config_parse_topic_limits(c, KM_CONFIG_UNITS_BYTES,
					      cfg->topic_throttle,
					      &cfg->topic_throttle_count);

	for (uint32_t i = 0; rc == 0 && i < cfg->topic_throttle_count; i++)
		if (cfg->topic_throttle[i].value >
		    (int64_t)KM_CONFIG_THROTTLE_MAX)
			return km_config_bad(c, "%s: at most %llu bytes per "
					     "second", cfg->topic_throttle[i].topic,
					     (unsigned long long)
					     KM_CONFIG_THROTTLE_MAX);
	return rc;
}

static void format_topic_throttle(const struct km_config *cfg,
				  struct km_config_sink *s)
{
	format_limits(cfg->topic_throttle, cfg->topic_throttle_count, s);
}

/* A list replaces the default one, as MM2's config.properties.exclude
 * does; "none" excludes nothing (an empty value is the default list, as
 * for every key), and no Kafka config is called that. */
static int apply_config_sync_exclude(const struct km_config_ctx *c)
{
	if (strcasecmp(c->value, "none") == 0) {
		CFG(c)->config_sync_exclude_count = 0;
		return 0;
	}
	return km_config_parse_config_names(c, CFG(c)->config_sync_exclude,
					    &CFG(c)->config_sync_exclude_count);
}

static void format_config_sync_exclude(const struct km_config *cfg,
				       struct km_config_sink *s)
{
	if (cfg->config_sync_exclude_count == 0)
		km_config_emit(s, "none");
	for (uint32_t i = 0; i < cfg->config_sync_exclude_count; i++)
		km_config_emit(s, "%s%s", i == 0 ? "" : ",",
			       cfg->config_sync_exclude[i]);
}

static int apply_topic_cleanup_policy(const struct km_config_ctx *c)
{
	return km_config_parse_topic_policies(c, CFG(c)->topic_cleanup_policy,
					      &CFG(c)->topic_cleanup_policy_count);
}

static void format_topic_cleanup_policy(const struct km_config *cfg,
					struct km_config_sink *s)
{
	for (uint32_t i = 0; i < cfg->topic_cleanup_policy_count; i++)
		km_config_emit(s, "%s%s:%s", i == 0 ? "" : ",",
			       cfg->topic_cleanup_policy[i].topic,
			       cfg->topic_cleanup_policy[i].value ? "compact"
								   : "delete");
}

/* Kafka's topic setting is a double in [0, 1]. */
static int apply_min_cleanable_ratio(const struct km_config_ctx *c)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(c->value, &end);
	if (end == c->value || *end != '\0' || errno != 0 || !(v >= 0.0) ||
	    v > 1.0)
		return km_config_bad(c, "a ratio from 0 to 1, such as 0.5");
	CFG(c)->min_cleanable_ratio = v;
	return 0;
}

static void format_min_cleanable_ratio(const struct km_config *cfg,
				       struct km_config_sink *s)
{
	km_config_emit(s, "%.17g", cfg->min_cleanable_ratio);
}

/* ---- security to the source (issue 16) ---- */

static const char *const protocols[] = { "PLAINTEXT", "SSL", "SASL_PLAINTEXT",
					 "SASL_SSL" };

#define PATH_KEY(f, field)                                                     \
	static int apply_##f(const struct km_config_ctx *c)                    \
	{                                                                      \
		return km_config_parse_path(c, CFG(c)->field,                  \
					    sizeof(CFG(c)->field));            \
	}                                                                      \
	static void format_##f(const struct km_config *cfg,                    \
			       struct km_config_sink *s)                       \
	{                                                                      \
		km_config_emit_escaped(s, cfg->field);                         \
	}

PATH_KEY(ssl_ca, source_ssl_ca)
PATH_KEY(ssl_cert, source_ssl_cert)
PATH_KEY(ssl_key, source_ssl_key)
PATH_KEY(ssl_key_password_file, source_ssl_key_password_file)
PATH_KEY(sasl_username, source_sasl_username)
PATH_KEY(sasl_password_file, source_sasl_password_file)

/* Kafka's values: https (the broker's certificate must name the host it
 * was reached by) or empty (not checked) - written "none" here, since an
 * empty value restores a key's default in kmirrord.conf. */
static int apply_ssl_endpoint(const struct km_config_ctx *c)
{
	bool https = strcasecmp(c->value, "https") == 0;

	if (!https && strcasecmp(c->value, "none") != 0)
		return km_config_bad(c, "https, or none for no host name "
				     "check (an empty value is the default, "
				     "https)");
	CFG(c)->source_ssl_verify_host = https;
	return 0;
}

static void format_ssl_endpoint(const struct km_config *cfg,
				struct km_config_sink *s)
{
	km_config_emit(s, "%s", cfg->source_ssl_verify_host ? "https" : "none");
}

static int apply_sasl_mechanism(const struct km_config_ctx *c)
{
	enum km_sasl_mech m;

	if (km_sasl_mech_parse(c->value, &m) < 0)
		return km_config_bad(c, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512");
	CFG(c)->source_sasl_mechanism = (int)m;
	return 0;
}

static void format_sasl_mechanism(const struct km_config *cfg,
				  struct km_config_sink *s)
{
	km_config_emit(s, "%s", km_sasl_mech_name(
					(enum km_sasl_mech)cfg->source_sasl_mechanism));
}

/* ---- security on kmirrord's listeners (issue 16) ---- */

PATH_KEY(lsn_ssl_cert, ssl_cert)
PATH_KEY(lsn_ssl_key, ssl_key)
PATH_KEY(lsn_ssl_key_password_file, ssl_key_password_file)
PATH_KEY(lsn_ssl_ca, ssl_ca)

static const char *const client_auths[] = { "none", "requested", "required" };

static int apply_protocol_map(const struct km_config_ctx *c)
{
	return km_config_parse_protocol_map(c, CFG(c)->protocol_map,
					    KM_CONFIG_PROTOCOL_MAP_MAX,
					    &CFG(c)->protocol_map_count);
}

static void format_protocol_map(const struct km_config *cfg,
				struct km_config_sink *s)
{
	for (uint32_t i = 0; i < cfg->protocol_map_count; i++)
		km_config_emit(s, "%s%s:%s", i ? "," : "",
			       cfg->protocol_map[i].name,
			       km_config_protocol_name(
				       cfg->protocol_map[i].protocol));
}

/* ---- SASL on the listener (issue 16) ---- */

PATH_KEY(sasl_users_file, sasl_users_file)

/* A comma-separated list of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512. */
static int apply_sasl_enabled(const struct km_config_ctx *c)
{
	char list[256], *save = NULL;
	uint32_t mask = 0;
	enum km_sasl_mech m;

	if (snprintf(list, sizeof(list), "%s", c->value) >= (int)sizeof(list))
		return km_config_bad(c, "too long");
	for (char *t = strtok_r(list, ", ", &save); t != NULL;
	     t = strtok_r(NULL, ", ", &save)) {
		if (km_sasl_mech_parse(t, &m) < 0)
			return km_config_bad(c, "\"%s\" is not PLAIN, "
					     "SCRAM-SHA-256 or SCRAM-SHA-512 "
					     "(kmirrord has no GSSAPI or "
					     "OAUTHBEARER)", t);
		mask |= 1u << m;
	}
	if (mask == 0)
		return km_config_bad(c, "no mechanism");
	CFG(c)->sasl_enabled_mechanisms = mask;
	return 0;
}

static void format_sasl_enabled(const struct km_config *cfg,
				struct km_config_sink *s)
{
	bool first = true;

	for (int m = KM_SASL_PLAIN; m <= KM_SASL_SCRAM_SHA_512; m++)
		if (cfg->sasl_enabled_mechanisms & (1u << m)) {
			km_config_emit(s, "%s%s", first ? "" : ",",
				       km_sasl_mech_name((enum km_sasl_mech)m));
			first = false;
		}
}

/* ---- authorization (issue 16, ACLs) ---- */

/* Kafka's authorizers, whose semantics dataplane/serve/acl.h follows; a
 * broker's server.properties line works as it is. */
static const char *const authorizers[] = {
	"org.apache.kafka.metadata.authorizer.StandardAuthorizer",
	"kafka.security.authorizer.AclAuthorizer",
};

static int apply_authorizer(const struct km_config_ctx *c)
{
	for (size_t i = 0; i < sizeof(authorizers) / sizeof(authorizers[0]); i++)
		if (strcmp(c->value, authorizers[i]) == 0)
			return km_config_parse_path(
				c, CFG(c)->authorizer_class_name,
				sizeof(CFG(c)->authorizer_class_name));
	return km_config_bad(c, "kmirrord authorizes as Kafka's %s (also "
			     "accepted: %s)", authorizers[0], authorizers[1]);
}

static void format_authorizer(const struct km_config *cfg,
			      struct km_config_sink *s)
{
	km_config_emit_escaped(s, cfg->authorizer_class_name);
}

PATH_KEY(acls_file, acls_file)
PATH_KEY(super_users, super_users)

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
	CUSTOM("topics.include", topics_include),
	CUSTOM("topics.exclude", topics_exclude),
	NUMBER("metadata.refresh.interval.ms", K_U32,
	       metadata_refresh_interval_ms, KM_CONFIG_UNITS_MS, 100, INT32_MAX),
	NUMBER("partitions.max", K_U32, partitions_max, KM_CONFIG_UNITS_PLAIN,
	       0, KM_CONFIG_PARTITIONS_MAX),
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
	NUMBER("group.sync.stop.timeout.ms", K_U32, group_sync_stop_timeout_ms,
	       KM_CONFIG_UNITS_MS, 0, 600000),
	NUMBER("group.initial.rebalance.delay.ms", K_U32,
	       group_initial_rebalance_delay_ms, KM_CONFIG_UNITS_MS, 0,
	       INT32_MAX),
	NUMBER("group.min.session.timeout.ms", K_U32,
	       group_min_session_timeout_ms, KM_CONFIG_UNITS_MS, 1, INT32_MAX),
	NUMBER("group.max.session.timeout.ms", K_U32,
	       group_max_session_timeout_ms, KM_CONFIG_UNITS_MS, 1, INT32_MAX),
	NUMBER("socket.request.max.bytes", K_U32, request_bytes_max,
	       KM_CONFIG_UNITS_BYTES, 1024, INT32_MAX - 4),
	NUMBER("listener.request.timeout.ms", K_U32, request_timeout_ms,
	       KM_CONFIG_UNITS_MS, 100, INT32_MAX),
	ENUM("log.level", log_level, levels),
	CUSTOM("metrics.listener", metrics_listener),
	NUMBER("mirror.throttle.bytes.per.sec", K_U64, throttle_bytes_per_sec,
	       KM_CONFIG_UNITS_BYTES, 0, KM_CONFIG_THROTTLE_MAX),
	CUSTOM("topic.mirror.throttle.bytes.per.sec", topic_throttle),
	NUMBER("mirror.source.unavailable.ms", K_U32, source_unavailable_ms,
	       KM_CONFIG_UNITS_MS, 0, INT32_MAX),
	NUMBER("mirror.failed.retry.initial.backoff.ms", K_U32,
	       failed_retry_initial_backoff_ms, KM_CONFIG_UNITS_MS, 1,
	       INT32_MAX),
	NUMBER("mirror.failed.retry.max.backoff.ms", K_U32,
	       failed_retry_max_backoff_ms, KM_CONFIG_UNITS_MS, 1, INT32_MAX),
	NUMBER("mirror.failed.retry.max.attempts", K_U32,
	       failed_retry_max_attempts, KM_CONFIG_UNITS_PLAIN, 0, INT32_MAX),
	CUSTOM("groups.include", groups_include),
	CUSTOM("groups.exclude", groups_exclude),
	NUMBER("config.sync.interval.ms", K_U32, config_sync_interval_ms,
	       KM_CONFIG_UNITS_MS, 0, INT32_MAX),
	CUSTOM("config.sync.exclude", config_sync_exclude),
	CUSTOM("topic.cleanup.policy", topic_cleanup_policy),
	NUMBER("delete.retention.ms", K_U64, delete_retention_ms,
	       KM_CONFIG_UNITS_MS, 0, INT64_MAX),
	NUMBER("log.cleaner.dedupe.buffer.size", K_U64, cleaner_map_bytes,
	       KM_CONFIG_UNITS_BYTES, 1u << 16, 1ull << 40),
	CUSTOM("min.cleanable.dirty.ratio", min_cleanable_ratio),
	ENUM("source.security.protocol", source_security_protocol, protocols),
	CUSTOM("source.ssl.ca.location", ssl_ca),
	CUSTOM("source.ssl.certificate.location", ssl_cert),
	CUSTOM("source.ssl.key.location", ssl_key),
	CUSTOM("source.ssl.key.password.file", ssl_key_password_file),
	CUSTOM("source.ssl.endpoint.identification.algorithm", ssl_endpoint),
	CUSTOM("source.sasl.mechanism", sasl_mechanism),
	CUSTOM("source.sasl.username", sasl_username),
	CUSTOM("source.sasl.password.file", sasl_password_file),
	NUMBER("transaction.ids.max", K_U32, txn_ids_max,
	       KM_CONFIG_UNITS_PLAIN, 1, 1u << 20),
	NUMBER("transactional.id.expiration.ms", K_U64, txn_id_expiration_ms,
	       KM_CONFIG_UNITS_MS, 1, INT32_MAX),
	ENUM("auto.create.topics.enable", auto_create_topics, booleans),
	NUMBER("num.partitions", K_U32, num_partitions, KM_CONFIG_UNITS_PLAIN, 1,
	       1u << 20),
	CUSTOM("listener.security.protocol.map", protocol_map),
	CUSTOM("ssl.certificate.location", lsn_ssl_cert),
	CUSTOM("ssl.key.location", lsn_ssl_key),
	CUSTOM("ssl.key.password.file", lsn_ssl_key_password_file),
	CUSTOM("ssl.ca.location", lsn_ssl_ca),
	ENUM("ssl.client.auth", ssl_client_auth, client_auths),
	CUSTOM("sasl.enabled.mechanisms", sasl_enabled),
	CUSTOM("sasl.users.file", sasl_users_file),
	NUMBER("connections.max.reauth.ms", K_U64, connections_max_reauth_ms,
	       KM_CONFIG_UNITS_MS, 0, INT64_MAX),
	CUSTOM("authorizer.class.name", authorizer),
	CUSTOM("acls.file", acls_file),
	ENUM("acls.sync", acls_sync, booleans),
	NUMBER("acls.sync.interval.ms", K_U32, acls_sync_interval_ms,
	       KM_CONFIG_UNITS_MS, 1000, INT32_MAX),
	CUSTOM("super.users", super_users),
	ENUM("allow.everyone.if.no.acl.found", allow_everyone_if_no_acl_found,
	     booleans),
	NUMBER("max.incremental.fetch.session.cache.slots", K_U32,
	       fetch_session_slots, KM_CONFIG_UNITS_PLAIN, 0, 1u << 20),
	/* 1..575 are refused by config_check.c (IPv4's minimum MTU). */
	NUMBER("dpdk.mtu", K_U32, dpdk.mtu, KM_CONFIG_UNITS_PLAIN, 0, 9000),
	ENUM("log.direct.io", log_direct_io, booleans),
	NUMBER("log.tail.cache.bytes", K_U64, log_tail_cache_bytes,
	       KM_CONFIG_UNITS_BYTES, 0, INT64_MAX),
};

_Static_assert(sizeof(keys) / sizeof(keys[0]) == KM_CONFIG_KEYS_COUNT,
	       "KM_CONFIG_KEYS_COUNT in config_pvt.h counts the table");

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
			   struct km_config_sink *s)
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
		km_config_emit(s, "%s", k->names[e]);
		break;
	case K_U32:
		memcpy(&v32, field, sizeof(v32));
		km_config_emit(s, "%" PRIu32, v32);
		break;
	case K_I32:
		memcpy(&i32, field, sizeof(i32));
		km_config_emit(s, "%" PRId32, i32);
		break;
	case K_U64:
		memcpy(&v64, field, sizeof(v64));
		km_config_emit(s, "%" PRIu64, v64);
		break;
	case K_CUSTOM:
		k->format(cfg, s);
		break;
	}
}

int km_config_key_find(const char *name)
{
	for (uint32_t i = 0; i < KM_CONFIG_KEYS_COUNT; i++)
		if (strcmp(keys[i].name, name) == 0)
			return (int)i;
	return KM_ECFGKEY;
}

const char *km_config_key_name(uint32_t i)
{
	KM_ASSERT(i < KM_CONFIG_KEYS_COUNT);
	return keys[i].name;
}

int km_config_key_apply(uint32_t i, const struct km_config_ctx *c)
{
	KM_ASSERT(i < KM_CONFIG_KEYS_COUNT);
	return keys[i].kind == K_CUSTOM ? keys[i].apply(c)
					: apply_generic(&keys[i], c);
}

void km_config_key_format(uint32_t i, const struct km_config *cfg,
			  struct km_config_sink *s)
{
	KM_ASSERT(i < KM_CONFIG_KEYS_COUNT);
	format_generic(&keys[i], cfg, s);
}

/* The effective configuration: every key in table order. */
int km_config_format(const struct km_config *cfg, char *buf, size_t cap)
{
	struct km_config_sink s = { buf, cap, 0 };

	for (uint32_t i = 0; i < KM_CONFIG_KEYS_COUNT; i++) {
		const char *name = km_config_key_name(i);
		size_t mark = s.len;

		km_config_emit(&s, "%s=", name);
		km_config_key_format(i, cfg, &s);
		if (s.len == mark + strlen(name) + 1)
			s.len = mark; /* unset, no default: left out */
		else
			km_config_emit(&s, "\n");
	}
	if (s.len >= cap)
		return -ENOSPC;
	buf[s.len] = '\0';
	return (int)s.len;
}
