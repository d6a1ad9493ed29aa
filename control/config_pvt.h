/* Private to control/config*.c: the key table (config_keys.c), the value
 * parsers it uses (config_parse.c), the text writer of km_config_format()
 * (config_format.c) and the checks between keys (config_check.c), for the
 * loader (config.c). Not for direct inclusion elsewhere. */
#ifndef KM_CONTROL_CONFIG_PVT_H
#define KM_CONTROL_CONFIG_PVT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control/config.h"

/* The value being applied and where it came from, for error messages. */
struct km_config_ctx {
	struct km_config *cfg;
	char *err;
	size_t err_len;
	const char *where; /* "FILE:LINE" or "--set" */
	const char *key;
	const char *value;
};

enum km_config_units {
	KM_CONFIG_UNITS_PLAIN = 0, /* digits only */
	KM_CONFIG_UNITS_BYTES = 1, /* K, KiB, M, MiB, G, GiB (x1024) */
	KM_CONFIG_UNITS_MS = 2,	   /* ms, s, min, h */
};

/* Which host:port rules apply. */
enum km_config_addr_kind {
	KM_CONFIG_ADDR_BOOTSTRAP = 0,  /* host required, port 1..65535 */
	KM_CONFIG_ADDR_LISTENER = 1,   /* "" host = all addresses, port 0 ok */
	KM_CONFIG_ADDR_ADVERTISED = 2, /* a host clients can reach */
};

/** Write "WHERE: KEY: invalid value "VALUE": DETAIL". @return KM_ECFGVALUE */
int km_config_bad(const struct km_config_ctx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/** Write a formatted message to err (NULL-safe). */
void km_config_errf(char *err, size_t err_len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/** Copy s into dst for a message: non-printables as \xNN, cut at 80. */
void km_config_show(char *dst, size_t cap, const char *s);

int km_config_parse_uint(const struct km_config_ctx *c,
			 enum km_config_units units, uint64_t min, uint64_t max,
			 uint64_t *out);
/* Case-insensitive; *out = index into names. */
int km_config_parse_enum(const struct km_config_ctx *c,
			 const char *const *names, uint32_t n, int *out);
int km_config_parse_path(const struct km_config_ctx *c, char *dst,
			 size_t cap);
int km_config_parse_addrs(const struct km_config_ctx *c,
			  enum km_config_addr_kind kind,
			  struct km_config_addr *out, uint32_t max,
			  uint32_t *count);
/* listeners, advertised.listeners: NAME://host:port, a bare host:port
 * named PLAINTEXT; names unique, and ports for listeners. */
int km_config_parse_listeners(const struct km_config_ctx *c,
			      enum km_config_addr_kind kind,
			      struct km_config_listener *out, uint32_t max,
			      uint32_t *count);
/* listener.security.protocol.map: NAME:PROTOCOL,... */
int km_config_parse_protocol_map(const struct km_config_ctx *c,
				 struct km_config_protocol_map *out,
				 uint32_t max, uint32_t *count);
/* PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL (any case) as 0..3. */
int km_config_protocol_of(const char *name, int *out);
const char *km_config_protocol_name(int p);
int km_config_parse_topics(const struct km_config_ctx *c,
			   char (*topics)[KM_CONFIG_TOPIC_BYTES_MAX],
			   uint32_t *count);
/* local.topics: NAME:PARTITIONS,... */
int km_config_parse_groups(const struct km_config_ctx *c,
			   char (*groups)[KM_CONFIG_GROUP_BYTES_MAX],
			   uint32_t *count);
/* Topic config names (config.sync.exclude), up to KM_CONFIG_GROUPS_MAX. */
int km_config_parse_config_names(const struct km_config_ctx *c,
				 char (*names)[KM_CONFIG_GROUP_BYTES_MAX],
				 uint32_t *count);
int km_config_parse_local_topics(const struct km_config_ctx *c,
				 char (*topics)[KM_CONFIG_TOPIC_BYTES_MAX],
				 uint32_t *partitions, uint32_t *count);
/* An IPv4 address (unicast unless is_mask); a mask may be "24" or "/24". */
/* -1 (none) or a number with units (retention.ms, retention.bytes). */
int km_config_parse_limit(const struct km_config_ctx *c,
			  enum km_config_units units, int64_t *out);
/* NAME:LIMIT entries (topic.retention.ms, topic.retention.bytes). */
int km_config_parse_topic_limits(const struct km_config_ctx *c,
				 enum km_config_units units,
				 struct km_config_topic_value *out,
				 uint32_t *count);
int km_config_parse_ipv4(const struct km_config_ctx *c, bool is_mask,
			 uint32_t *be);
/* NAME:compact or NAME:delete entries (topic.cleanup.policy): value 1 for
 * compact, 0 for delete. */
int km_config_parse_topic_policies(const struct km_config_ctx *c,
				   struct km_config_topic_value *out,
				   uint32_t *count);
int km_config_parse_mac(const struct km_config_ctx *c, uint8_t mac[6]);
int km_config_parse_dpdk_port(const struct km_config_ctx *c, char *dst,
			      size_t cap);
int km_config_parse_eal_args(const struct km_config_ctx *c, char *dst,
			     size_t cap);
int km_config_parse_cluster_id(const struct km_config_ctx *c, char *dst,
			       size_t cap);

/** Is host a wildcard ("", 0.0.0.0, ::)? */
bool km_config_host_is_any(const char *host);

/* ---- the key table (config_keys.c) ---- */

/* Keys in the table; config_keys.c asserts the count at compile time, so
 * the loader can size its per-key arrays with it. */
#define KM_CONFIG_KEYS_COUNT 91u

/** @return the index of the key called name, or KM_ECFGKEY. */
int km_config_key_find(const char *name);

/** The name of key i (i < KM_CONFIG_KEYS_COUNT); static storage. */
const char *km_config_key_name(uint32_t i);

/** Parse c->value into key i's field(s) of c->cfg.
 * @return 0, or KM_ECFGVALUE (message in c->err). */
int km_config_key_apply(uint32_t i, const struct km_config_ctx *c);

/* Text being built: what does not fit in buf is counted in len but not
 * written, so the caller sees len >= cap and can say -ENOSPC. */
struct km_config_sink {
	char *buf;
	size_t cap;
	size_t len;
};

/** Append key i's value as properties text; nothing when the key is unset
 * and has no default. */
void km_config_key_format(uint32_t i, const struct km_config *cfg,
			  struct km_config_sink *s);

/* ---- the text writer (config_format.c) ---- */

void km_config_emit(struct km_config_sink *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* value with the properties escapes, so reading it back gives value. */
void km_config_emit_escaped(struct km_config_sink *s, const char *value);
/* host:port, an IPv6 host in brackets. */
void km_config_emit_addr(struct km_config_sink *s,
			 const struct km_config_addr *a);
/* be is in network byte order. */
void km_config_emit_ipv4(struct km_config_sink *s, uint32_t be);

/* ---- checks between keys (config_check.c) ---- */

/**
 * Once every key is applied: what one key demands of another (data.dir,
 * topics with source.bootstrap.servers, net.mode=dpdk with its keys...).
 * workers_set tells whether `workers` was given, since net.mode=dpdk
 * changes its default. Messages start with prefix ("FILE: " or "").
 * @return 0, or KM_ECFGMISSING.
 */
int km_config_check(struct km_config *cfg, bool workers_set,
		    const char *prefix, char *err, size_t err_len);

/**
 * Fill the values that default from other keys: control.socket from
 * data.dir, the advertised address from listeners. Messages as
 * km_config_check()'s.
 * @return 0, or KM_ECFGMISSING (the default control.socket is too long).
 */
int km_config_derive(struct km_config *cfg, const char *prefix, char *err,
		     size_t err_len);

#endif
