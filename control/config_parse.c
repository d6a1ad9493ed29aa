/* Value parsers for kmirrord's configuration keys. Every failure writes
 * "WHERE: KEY: invalid value "VALUE": DETAIL" and returns KM_ECFGVALUE. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "control/cluster_id.h"
#include "control/config_pvt.h"

/* Longest list entry looked at: a 253-char host plus scheme and port. */
#define ITEM_BYTES_MAX 512u

void km_config_errf(char *err, size_t err_len, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || err_len == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, err_len, fmt, ap);
	va_end(ap);
}

void km_config_show(char *dst, size_t cap, const char *s)
{
	size_t o = 0, k;

	KM_ASSERT(cap >= 8);
	for (k = 0; s[k] != '\0' && k < 80 && o + 5 < cap; k++) {
		unsigned char c = (unsigned char)s[k];

		if (c < 0x20 || c == 0x7f)
			o += (size_t)snprintf(dst + o, cap - o, "\\x%02x", c);
		else
			dst[o++] = (char)c;
	}
	if (s[k] != '\0' && o + 4 < cap) {
		memcpy(dst + o, "...", 3);
		o += 3;
	}
	dst[o] = '\0';
}

int km_config_bad(const struct km_config_ctx *c, const char *fmt, ...)
{
	char shown[400], detail[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	km_config_show(shown, sizeof(shown), c->value);
	km_config_errf(c->err, c->err_len, "%s: %s: invalid value \"%s\": %s",
		       c->where, c->key, shown, detail);
	return KM_ECFGVALUE;
}

struct unit {
	const char *name;
	uint64_t mult;
};

static const struct unit plain_units[] = { { "", 1 } };
static const struct unit byte_units[] = {
	{ "", 1 },	     { "k", 1ull << 10 }, { "kib", 1ull << 10 },
	{ "m", 1ull << 20 }, { "mib", 1ull << 20 }, { "g", 1ull << 30 },
	{ "gib", 1ull << 30 },
};
static const struct unit ms_units[] = {
	{ "", 1 }, { "ms", 1 }, { "s", 1000 }, { "min", 60000 }, { "h", 3600000 },
};

static int unit_error(const struct km_config_ctx *c,
		      enum km_config_units units, const char *suffix)
{
	static const char *const ambiguous[] = { "kb", "mb", "gb", "tb" };

	if (units == KM_CONFIG_UNITS_PLAIN)
		return km_config_bad(c, "not a whole number");
	if (units == KM_CONFIG_UNITS_BYTES) {
		for (size_t i = 0; i < 4; i++)
			if (strcasecmp(suffix, ambiguous[i]) == 0)
				return km_config_bad(c,
					"\"%s\" is ambiguous: use K, M or G (powers of 1024) or a plain number of bytes",
					suffix);
		return km_config_bad(c,
			"unknown unit \"%s\" (use a number of bytes, or K, KiB, M, MiB, G or GiB)",
			suffix);
	}
	return km_config_bad(c,
		"unknown unit \"%s\" (use a number of milliseconds, or ms, s, min or h)",
		suffix);
}

static int find_unit(enum km_config_units units, const char *suffix,
		     uint64_t *mult)
{
	const struct unit *t = plain_units;
	size_t n = 1;

	if (units == KM_CONFIG_UNITS_BYTES) {
		t = byte_units;
		n = sizeof(byte_units) / sizeof(byte_units[0]);
	} else if (units == KM_CONFIG_UNITS_MS) {
		t = ms_units;
		n = sizeof(ms_units) / sizeof(ms_units[0]);
	}
	for (size_t i = 0; i < n; i++) {
		if (strcasecmp(suffix, t[i].name) == 0) {
			*mult = t[i].mult;
			return 0;
		}
	}
	return -ENOENT;
}

int km_config_parse_uint(const struct km_config_ctx *c,
			 enum km_config_units units, uint64_t min, uint64_t max,
			 uint64_t *out)
{
	const char *p = c->value;
	uint64_t n = 0, mult = 1;

	if (*p == '+')
		p++;
	if (*p == '-')
		return km_config_bad(c, "must be between %" PRIu64 " and %" PRIu64,
				     min, max);
	if (!isdigit((unsigned char)*p))
		return km_config_bad(c, "not a whole number");
	for (; isdigit((unsigned char)*p); p++) {
		uint64_t d = (uint64_t)(*p - '0');

		if (n > (UINT64_MAX - d) / 10)
			return km_config_bad(c, "number too large");
		n = n * 10 + d;
	}
	if (*p == '.' || *p == ',')
		return km_config_bad(c, "not a whole number");
	while (*p == ' ' || *p == '\t')
		p++;
	if (find_unit(units, p, &mult) < 0)
		return unit_error(c, units, p);
	if (n > UINT64_MAX / mult)
		return km_config_bad(c, "number too large");
	n *= mult;
	if (n < min || n > max)
		return km_config_bad(c, "must be between %" PRIu64 " and %" PRIu64,
				     min, max);
	*out = n;
	return 0;
}

int km_config_parse_enum(const struct km_config_ctx *c,
			 const char *const *names, uint32_t n, int *out)
{
	char expected[256];
	size_t o = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (strcasecmp(c->value, names[i]) == 0) {
			*out = (int)i;
			return 0;
		}
	}
	expected[0] = '\0';
	for (uint32_t i = 0; i < n && o < sizeof(expected); i++)
		o += (size_t)snprintf(expected + o, sizeof(expected) - o, "%s%s",
				      i == 0 ? "" : i + 1 == n ? " or " : ", ",
				      names[i]);
	return km_config_bad(c, "expected %s", expected);
}

static bool has_control_char(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

int km_config_parse_path(const struct km_config_ctx *c, char *dst, size_t cap)
{
	size_t n = strlen(c->value);

	if (n >= cap)
		return km_config_bad(c, "longer than %zu bytes%s", cap - 1,
				     cap == KM_CONFIG_SOCKET_BYTES_MAX
					     ? " (the limit of a Unix socket path)"
					     : "");
	if (has_control_char(c->value))
		return km_config_bad(c, "contains a control character");
	memcpy(dst, c->value, n + 1);
	return 0;
}

/* Call fn on each comma-separated entry, blanks around it trimmed. */
typedef int (*item_fn)(const struct km_config_ctx *c, const char *item,
		       uint32_t index, void *arg);

static int for_each_item(const struct km_config_ctx *c, uint32_t max,
			 item_fn fn, void *arg, uint32_t *count)
{
	const char *p = c->value;
	char item[ITEM_BYTES_MAX];
	uint32_t i;
	int rc;

	for (i = 0; p != NULL; i++) {
		const char *comma = strchr(p, ',');
		const char *end = comma != NULL ? comma : p + strlen(p);

		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		if (end == p)
			return km_config_bad(c, "empty entry in the list");
		if ((size_t)(end - p) >= sizeof(item))
			return km_config_bad(c, "entry %u is longer than %u bytes",
					     i + 1, ITEM_BYTES_MAX - 1);
		if (i == max)
			return km_config_bad(c, "more than %u entries", max);
		memcpy(item, p, (size_t)(end - p));
		item[end - p] = '\0';
		if ((rc = fn(c, item, i, arg)) < 0)
			return rc;
		p = comma != NULL ? comma + 1 : NULL;
	}
	*count = i;
	return 0;
}

bool km_config_host_is_any(const char *host)
{
	return host[0] == '\0' || strcmp(host, "0.0.0.0") == 0 ||
	       strcmp(host, "::") == 0;
}

static bool valid_host_name(const char *h, size_t n)
{
	if (n == 0 || n >= KM_CONFIG_HOST_BYTES_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)h[i]) && h[i] != '.' &&
		    h[i] != '-' && h[i] != '_')
			return false;
	return h[0] != '-' && h[0] != '.';
}

/* "PLAINTEXT://" is accepted (Kafka's listener form); other schemes are not. */
static int strip_scheme(const struct km_config_ctx *c, const char **item)
{
	const char *sep = strstr(*item, "://");

	if (sep == NULL)
		return 0;
	if (sep - *item != 9 || strncasecmp(*item, "PLAINTEXT", 9) != 0)
		return km_config_bad(c,
			"\"%s\": %s takes host:port (PLAINTEXT:// at most); %s",
			*item, c->key,
			strcmp(c->key, "source.bootstrap.servers") == 0
				? "TLS and SASL to the source are set by "
				  "source.security.protocol"
				: "this address serves plaintext only");
	*item = sep + 3;
	return 0;
}

/* Split host and port; the host is checked afterwards. */
static int split_host_port(const struct km_config_ctx *c, const char *item,
			   const char **host, size_t *host_len,
			   const char **port)
{
	const char *colon;

	if (item[0] == '[') {
		const char *close = strchr(item, ']');
		char v6[64];
		unsigned char buf[16];

		if (close == NULL)
			return km_config_bad(c, "\"%s\": missing ']' after the IPv6 address", item);
		*host = item + 1;
		*host_len = (size_t)(close - item - 1);
		if (*host_len >= sizeof(v6))
			return km_config_bad(c, "\"%s\": not an IPv6 address", item);
		memcpy(v6, *host, *host_len);
		v6[*host_len] = '\0';
		if (inet_pton(AF_INET6, v6, buf) != 1)
			return km_config_bad(c, "\"%s\": not an IPv6 address", item);
		colon = close + 1;
		if (*colon != ':')
			return km_config_bad(c, "\"%s\": no port (expected host:port)", item);
	} else {
		colon = strrchr(item, ':');
		if (colon == NULL)
			return km_config_bad(c, "\"%s\": no port (expected host:port)", item);
		*host = item;
		*host_len = (size_t)(colon - item);
		if (memchr(item, ':', *host_len) != NULL)
			return km_config_bad(c, "\"%s\": an IPv6 address needs brackets, e.g. [::1]:9092", item);
		if (*host_len > 0 && !valid_host_name(item, *host_len))
			return km_config_bad(c, "\"%s\": not a valid host name", item);
	}
	*port = colon + 1;
	return 0;
}

static int parse_port(const struct km_config_ctx *c, const char *item,
		      const char *p, uint32_t min, uint16_t *port)
{
	uint32_t v = 0;
	size_t n = strlen(p);

	if (n == 0 || n > 5 || strspn(p, "0123456789") != n)
		return km_config_bad(c, "\"%s\": port must be a number from %u to 65535",
				     item, min);
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (uint32_t)(p[i] - '0');
	if (v < min || v > 65535)
		return km_config_bad(c, "\"%s\": port must be a number from %u to 65535",
				     item, min);
	*port = (uint16_t)v;
	return 0;
}

struct addr_arg {
	enum km_config_addr_kind kind;
	struct km_config_addr *out;
};

static int addr_store(const struct km_config_ctx *c, const char *item,
		      uint32_t index, void *arg)
{
	struct addr_arg *a = arg;
	struct km_config_addr *dst = &a->out[index];
	const char *host = NULL, *port = NULL;
	size_t host_len = 0;
	int rc;

	if ((rc = strip_scheme(c, &item)) < 0 ||
	    (rc = split_host_port(c, item, &host, &host_len, &port)) < 0)
		return rc;
	if (host_len == 0 && a->kind != KM_CONFIG_ADDR_LISTENER)
		return km_config_bad(c, "\"%s\": missing host", item);
	memcpy(dst->host, host, host_len);
	dst->host[host_len] = '\0';
	/* The syntax is Kafka's, brackets and all, but the kernel backend's
	 * listener and every fetch session take IPv4 only (DPDK's endpoint
	 * is IPv4 by design): refuse here, by name, what would otherwise
	 * fail at start as an unreachable host. */
	if (item[0] == '[')
		return km_config_bad(c, "\"%s\": IPv6 is not supported yet "
			"(use an IPv4 address%s or a host name)", item,
			a->kind == KM_CONFIG_ADDR_LISTENER ? ", 0.0.0.0 for all," : "");
	if (a->kind == KM_CONFIG_ADDR_ADVERTISED &&
	    km_config_host_is_any(dst->host))
		return km_config_bad(c,
			"\"%s\": clients cannot connect to a wildcard address; name this host",
			item);
	return parse_port(c, item, port,
			  a->kind == KM_CONFIG_ADDR_LISTENER ? 0 : 1, &dst->port);
}

int km_config_parse_addrs(const struct km_config_ctx *c,
			  enum km_config_addr_kind kind,
			  struct km_config_addr *out, uint32_t max,
			  uint32_t *count)
{
	struct addr_arg a = { kind, out };

	if (max == 1 && strchr(c->value, ',') != NULL)
		return km_config_bad(c, "only one listener is supported");
	return for_each_item(c, max, addr_store, &a, count);
}

/* ---- listeners: NAME://host:port (Kafka's EndPoint syntax) ---- */

struct lsn_arg {
	enum km_config_addr_kind kind;
	struct km_config_listener *out;
};

/* The name before "://" (Kafka normalises it to upper case); none is
 * PLAINTEXT, kmirror's older host:port form. */
static int listener_name(const struct km_config_ctx *c, const char *item,
			 char *name, const char **rest)
{
	const char *sep = strstr(item, "://");
	size_t n = sep != NULL ? (size_t)(sep - item) : 0;

	*rest = sep != NULL ? sep + 3 : item;
	if (sep == NULL) {
		snprintf(name, KM_CONFIG_LISTENER_NAME_BYTES, "PLAINTEXT");
		return 0;
	}
	if (n == 0 || n >= KM_CONFIG_LISTENER_NAME_BYTES)
		return km_config_bad(c, "\"%s\": a listener name of 1 to %u "
				     "characters before ://", item,
				     KM_CONFIG_LISTENER_NAME_BYTES - 1);
	for (size_t i = 0; i < n; i++) {
		if (!isalnum((unsigned char)item[i]) && item[i] != '_' &&
		    item[i] != '-')
			return km_config_bad(c, "\"%s\": a listener name is "
					     "letters, digits, _ and -", item);
		name[i] = (char)toupper((unsigned char)item[i]);
	}
	name[n] = '\0';
	return 0;
}

static int listener_store(const struct km_config_ctx *c, const char *item,
			  uint32_t index, void *arg)
{
	struct lsn_arg *a = arg;
	struct km_config_listener *l = &a->out[index];
	struct addr_arg aa = { a->kind, &l->addr };
	const char *rest;
	int rc;

	memset(l, 0, sizeof(*l));
	if ((rc = listener_name(c, item, l->name, &rest)) < 0 ||
	    (rc = addr_store(c, rest, 0, &aa)) < 0)
		return rc;
	for (uint32_t i = 0; i < index; i++) {
		if (strcmp(a->out[i].name, l->name) == 0)
			return km_config_bad(c, "listener name %s appears twice "
					     "(each listener needs its own)",
					     l->name);
		if (a->kind == KM_CONFIG_ADDR_LISTENER && l->addr.port != 0 &&
		    a->out[i].addr.port == l->addr.port)
			return km_config_bad(c, "port %u appears twice (each "
					     "listener needs its own)",
					     (unsigned)l->addr.port);
	}
	return 0;
}

int km_config_parse_listeners(const struct km_config_ctx *c,
			      enum km_config_addr_kind kind,
			      struct km_config_listener *out, uint32_t max,
			      uint32_t *count)
{
	struct lsn_arg a = { kind, out };

	return for_each_item(c, max, listener_store, &a, count);
}

static const char *const sec_protocols[] = {
	"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL",
};

int km_config_protocol_of(const char *name, int *out)
{
	for (int i = 0; i < 4; i++)
		if (strcasecmp(name, sec_protocols[i]) == 0) {
			*out = i;
			return 0;
		}
	return KM_ECFGVALUE;
}

const char *km_config_protocol_name(int p)
{
	return p >= 0 && p < 4 ? sec_protocols[p] : "?";
}

static int map_store(const struct km_config_ctx *c, const char *item,
		     uint32_t index, void *arg)
{
	struct km_config_protocol_map *m = &((struct km_config_protocol_map *)
						     arg)[index];
	const char *colon = strchr(item, ':');
	size_t n = colon != NULL ? (size_t)(colon - item) : 0;

	if (n == 0 || n >= sizeof(m->name))
		return km_config_bad(c, "\"%s\": expected NAME:PROTOCOL", item);
	for (size_t i = 0; i < n; i++)
		m->name[i] = (char)toupper((unsigned char)item[i]);
	m->name[n] = '\0';
	if (km_config_protocol_of(colon + 1, &m->protocol) < 0)
		return km_config_bad(c, "\"%s\": the protocol is PLAINTEXT, "
				     "SSL, SASL_PLAINTEXT or SASL_SSL", item);
	return 0;
}

int km_config_parse_protocol_map(const struct km_config_ctx *c,
				 struct km_config_protocol_map *out,
				 uint32_t max, uint32_t *count)
{
	return for_each_item(c, max, map_store, out, count);
}

/* Kafka's Topic.validate(): legal characters, length, not "." or "..". */
static int topic_item(const struct km_config_ctx *c, const char *item,
		      uint32_t index, void *arg)
{
	char (*topics)[KM_CONFIG_TOPIC_BYTES_MAX] = arg;
	size_t n = strlen(item);

	if (n > KM_CONFIG_TOPIC_BYTES_MAX - 1)
		return km_config_bad(c, "topic %u is longer than 249 characters",
				     index + 1);
	if (strcmp(item, ".") == 0 || strcmp(item, "..") == 0)
		return km_config_bad(c, "a topic name cannot be \".\" or \"..\"");
	if (strcmp(item, KM_CONFIG_OFFSETS_TOPIC) == 0)
		return km_config_bad(c, "topic \"%s\" is kmirrord's own (the "
				     "committed offsets of its groups)", item);
	if (strcmp(item, KM_CONFIG_TXN_TOPIC) == 0)
		return km_config_bad(c, "topic \"%s\" is kmirrord's own (the "
				     "transaction coordinator's log)", item);
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)item[i]) && item[i] != '.' &&
		    item[i] != '_' && item[i] != '-')
			return km_config_bad(c,
				"topic \"%s\" contains a character other than ASCII alphanumerics, '.', '_' and '-'",
				item);
	for (uint32_t i = 0; i < index; i++)
		if (strcmp(topics[i], item) == 0)
			return km_config_bad(c, "topic \"%s\" is listed twice", item);
	memcpy(topics[index], item, n + 1);
	return 0;
}

int km_config_parse_topics(const struct km_config_ctx *c,
			   char (*topics)[KM_CONFIG_TOPIC_BYTES_MAX],
			   uint32_t *count)
{
	return for_each_item(c, KM_CONFIG_TOPICS_MAX, topic_item, topics, count);
}

/* A group id or pattern: Kafka allows any characters but the list's comma. */
static int group_item(const struct km_config_ctx *c, const char *item,
		      uint32_t index, void *arg)
{
	char (*groups)[KM_CONFIG_GROUP_BYTES_MAX] = arg;
	size_t n = strlen(item);

	if (n > KM_CONFIG_GROUP_BYTES_MAX - 1)
		return km_config_bad(c, "group %u is longer than %u bytes",
				     index + 1, KM_CONFIG_GROUP_BYTES_MAX - 1);
	for (uint32_t i = 0; i < index; i++)
		if (strcmp(groups[i], item) == 0)
			return km_config_bad(c, "group \"%s\" is listed twice", item);
	memcpy(groups[index], item, n + 1);
	return 0;
}

int km_config_parse_groups(const struct km_config_ctx *c,
			   char (*groups)[KM_CONFIG_GROUP_BYTES_MAX],
			   uint32_t *count)
{
	return for_each_item(c, KM_CONFIG_GROUPS_MAX, group_item, groups, count);
}

struct local_arg {
	char (*topics)[KM_CONFIG_TOPIC_BYTES_MAX];
	uint32_t *partitions;
};

/* NAME:PARTITIONS; the name obeys the same rules as `topics`. */
static int local_item(const struct km_config_ctx *c, const char *item,
		      uint32_t index, void *arg)
{
	struct local_arg *a = arg;
	const char *colon = strrchr(item, ':');
	char name[KM_CONFIG_TOPIC_BYTES_MAX + 16];
	char *end;
	unsigned long n;

	if (colon == NULL || colon == item || (size_t)(colon - item) >= sizeof(name))
		return km_config_bad(c, "\"%s\" is not NAME:PARTITIONS", item);
	errno = 0;
	n = strtoul(colon + 1, &end, 10);
	if (colon[1] == '\0' || *end != '\0' || errno != 0 || n < 1 ||
	    n > KM_CONFIG_LOCAL_PARTS_MAX)
		return km_config_bad(c, "partitions of \"%.*s\" must be 1 to %u",
				     (int)(colon - item), item,
				     KM_CONFIG_LOCAL_PARTS_MAX);
	memcpy(name, item, (size_t)(colon - item));
	name[colon - item] = '\0';
	a->partitions[index] = (uint32_t)n;
	return topic_item(c, name, index, a->topics);
}

int km_config_parse_local_topics(const struct km_config_ctx *c,
				 char (*topics)[KM_CONFIG_TOPIC_BYTES_MAX],
				 uint32_t *partitions, uint32_t *count)
{
	struct local_arg a = { topics, partitions };

	return for_each_item(c, KM_CONFIG_TOPICS_MAX, local_item, &a, count);
}

int km_config_parse_limit(const struct km_config_ctx *c,
			  enum km_config_units units, int64_t *out)
{
	uint64_t v;
	int rc;

	if (strcmp(c->value, "-1") == 0) {
		*out = -1;
		return 0;
	}
	if ((rc = km_config_parse_uint(c, units, 0, INT64_MAX, &v)) == 0)
		*out = (int64_t)v;
	return rc;
}

struct limit_arg {
	enum km_config_units units;
	struct km_config_topic_value *out;
};

/* NAME:LIMIT; the name obeys the same rules as `topics`. */
static int limit_item(const struct km_config_ctx *c, const char *item,
		      uint32_t index, void *arg)
{
	struct limit_arg *a = arg;
	const char *colon = strrchr(item, ':');
	struct km_config_ctx sub = *c;
	char name[KM_CONFIG_TOPIC_BYTES_MAX + 16];
	char (*topic)[KM_CONFIG_TOPIC_BYTES_MAX] = &a->out[index].topic;
	int rc;

	if (colon == NULL || colon == item ||
	    (size_t)(colon - item) >= sizeof(name))
		return km_config_bad(c, "\"%s\" is not TOPIC:VALUE", item);
	memcpy(name, item, (size_t)(colon - item));
	name[colon - item] = '\0';
	sub.value = colon + 1;
	if ((rc = km_config_parse_limit(&sub, a->units, &a->out[index].value)) < 0)
		return rc;
	return topic_item(c, name, 0, topic);
}

int km_config_parse_topic_limits(const struct km_config_ctx *c,
				 enum km_config_units units,
				 struct km_config_topic_value *out,
				 uint32_t *count)
{
	struct limit_arg a = { units, out };

	return for_each_item(c, KM_CONFIG_TOPICS_MAX, limit_item, &a, count);
}

static int parse_prefix(const struct km_config_ctx *c, const char *p,
			uint32_t *be)
{
	size_t n = strlen(p);
	uint32_t bits = 0;

	if (n == 0 || n > 2 || strspn(p, "0123456789") != n)
		return km_config_bad(c, "not a netmask (255.255.255.0 or a prefix length such as 24)");
	for (size_t i = 0; i < n; i++)
		bits = bits * 10 + (uint32_t)(p[i] - '0');
	if (bits > 32)
		return km_config_bad(c, "a prefix length is 0 to 32");
	*be = htonl(bits == 0 ? 0 : ~0u << (32 - bits));
	return 0;
}

int km_config_parse_ipv4(const struct km_config_ctx *c, bool is_mask,
			 uint32_t *be)
{
	struct in_addr a;
	uint32_t h;

	if (is_mask && strchr(c->value, '.') == NULL)
		return parse_prefix(c, c->value + (c->value[0] == '/'), be);
	if (inet_pton(AF_INET, c->value, &a) != 1)
		return km_config_bad(c, is_mask
			? "not a netmask (255.255.255.0 or a prefix length such as 24)"
			: "not an IPv4 address (a dotted quad such as 10.0.0.2)");
	h = ntohl(a.s_addr);
	if (is_mask && (~h & (~h + 1)) != 0)
		return km_config_bad(c, "not a contiguous netmask");
	if (!is_mask && (h == 0 || h == UINT32_MAX || (h >> 28) == 0xe ||
			 (h >> 24) == 127))
		return km_config_bad(c, "not a unicast address for a port");
	*be = a.s_addr;
	return 0;
}

static int hex_value(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

int km_config_parse_mac(const struct km_config_ctx *c, uint8_t mac[6])
{
	const char *v = c->value;
	uint8_t m[6];

	if (strlen(v) != 17)
		return km_config_bad(c, "expected six hex bytes such as 02:00:00:00:00:01");
	for (int i = 0; i < 6; i++) {
		int hi = hex_value(v[3 * i]), lo = hex_value(v[3 * i + 1]);

		if (hi < 0 || lo < 0 || (i < 5 && v[3 * i + 2] != ':'))
			return km_config_bad(c, "expected six hex bytes such as 02:00:00:00:00:01");
		m[i] = (uint8_t)(hi << 4 | lo);
	}
	if (m[0] & 1)
		return km_config_bad(c, "a multicast address (odd first byte) cannot be a port's address");
	if ((m[0] | m[1] | m[2] | m[3] | m[4] | m[5]) == 0)
		return km_config_bad(c, "the all-zero address is not a port's address");
	memcpy(mac, m, 6);
	return 0;
}

/* [DDDD:]BB:DD.F with hex fields, as DPDK's PCI bus parses it. */
static bool is_pci_address(const char *v)
{
	size_t n = strlen(v), at = 0;
	size_t lens[3] = { 4, 2, 2 };
	char seps[3] = { ':', ':', '.' };

	if (n != 7 && n != 12)
		return false;
	for (int f = n == 12 ? 0 : 1; f < 3; f++) {
		for (size_t i = 0; i < lens[f]; i++)
			if (!isxdigit((unsigned char)v[at++]))
				return false;
		if (v[at++] != seps[f])
			return false;
	}
	return v[at] >= '0' && v[at] <= '7';
}

/* A DPDK vdev: driver name (net_... or eth_...) then ",key=value" args. */
static bool is_vdev(const char *v)
{
	size_t name = strcspn(v, ",");

	if (strncmp(v, "net_", 4) != 0 && strncmp(v, "eth_", 4) != 0)
		return false;
	if (name <= 4)
		return false;
	for (size_t i = 0; i < name; i++)
		if (!isalnum((unsigned char)v[i]) && v[i] != '_')
			return false;
	for (const char *p = v + name; *p != '\0'; p++)
		if (!isgraph((unsigned char)*p))
			return false;
	return true;
}

int km_config_parse_dpdk_port(const struct km_config_ctx *c, char *dst,
			      size_t cap)
{
	if (strlen(c->value) >= cap)
		return km_config_bad(c, "longer than %zu bytes", cap - 1);
	if (!is_pci_address(c->value) && !is_vdev(c->value))
		return km_config_bad(c,
			"expected a PCI address (0000:01:00.0) or a DPDK vdev (net_af_packet0,iface=veth0)");
	strcpy(dst, c->value);
	return 0;
}

int km_config_parse_eal_args(const struct km_config_ctx *c, char *dst,
			     size_t cap)
{
	const char *v = c->value;
	uint32_t words = 0;

	if (strlen(v) >= cap)
		return km_config_bad(c, "longer than %zu bytes", cap - 1);
	for (size_t i = 0; v[i] != '\0'; i++) {
		if (v[i] == '"' || v[i] == '\'')
			return km_config_bad(c, "quotes are not supported: arguments are split at blanks");
		if (v[i] != '\t' && ((unsigned char)v[i] < 0x20 || v[i] == 0x7f))
			return km_config_bad(c, "contains a control character");
		if (v[i] != ' ' && v[i] != '\t' &&
		    (i == 0 || v[i - 1] == ' ' || v[i - 1] == '\t'))
			words++;
	}
	if (words + 1 > KM_CONFIG_EAL_ARGC_MAX)
		return km_config_bad(c, "more than %u arguments",
				     KM_CONFIG_EAL_ARGC_MAX - 1);
	strcpy(dst, v);
	return 0;
}

int km_config_parse_cluster_id(const struct km_config_ctx *c, char *dst,
			       size_t cap)
{
	KM_ASSERT(cap > KM_CLUSTER_ID_BYTES_MAX);
	if (!km_cluster_id_is_valid(c->value))
		return km_config_bad(c,
			"a cluster id is 1 to %u characters from A-Z, a-z, 0-9, '.', '_' and '-'",
			KM_CLUSTER_ID_BYTES_MAX);
	strcpy(dst, c->value);
	return 0;
}

/* A config name of config.sync.exclude: checked as groups are, worded for
 * what it is. */
static int config_name_item(const struct km_config_ctx *c, const char *item,
			    uint32_t index, void *arg)
{
	char (*names)[KM_CONFIG_GROUP_BYTES_MAX] = arg;
	size_t n = strlen(item);

	if (n > KM_CONFIG_GROUP_BYTES_MAX - 1)
		return km_config_bad(c, "name %u is longer than %u bytes",
				     index + 1, KM_CONFIG_GROUP_BYTES_MAX - 1);
	for (uint32_t i = 0; i < index; i++)
		if (strcmp(names[i], item) == 0)
			return km_config_bad(c, "\"%s\" is listed twice", item);
	memcpy(names[index], item, n + 1);
	return 0;
}

int km_config_parse_config_names(const struct km_config_ctx *c,
				 char (*names)[KM_CONFIG_GROUP_BYTES_MAX],
				 uint32_t *count)
{
	return for_each_item(c, KM_CONFIG_GROUPS_MAX, config_name_item, names,
			     count);
}

/* NAME:compact|delete; the name obeys the same rules as `topics`. */
static int policy_item(const struct km_config_ctx *c, const char *item,
		       uint32_t index, void *arg)
{
	struct km_config_topic_value *out = arg;
	const char *colon = strrchr(item, ':');
	char name[KM_CONFIG_TOPIC_BYTES_MAX + 16];

	if (colon == NULL || colon == item ||
	    (size_t)(colon - item) >= sizeof(name))
		return km_config_bad(c, "\"%s\" is not TOPIC:POLICY", item);
	if (strcmp(colon + 1, "compact") != 0 &&
	    strcmp(colon + 1, "delete") != 0)
		return km_config_bad(c, "\"%s\": the policy is compact or "
				     "delete", item);
	memcpy(name, item, (size_t)(colon - item));
	name[colon - item] = '\0';
	out[index].value = strcmp(colon + 1, "compact") == 0;
	return topic_item(c, name, 0, &out[index].topic);
}

int km_config_parse_topic_policies(const struct km_config_ctx *c,
				   struct km_config_topic_value *out,
				   uint32_t *count)
{
	return for_each_item(c, KM_CONFIG_TOPICS_MAX, policy_item, out, count);
}
