/* The control protocol's schema and checks (ctlproto.h has the format). */
#include "control/ctlproto.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"

static const char *const verb_names[KM_CTL_VERB_COUNT] = {
	"status", "start", "stop", "failback", "pause", "resume", "metrics",
	"throttle",
};

/* Argument keys; each verb allows a subset (ctlproto.h). */
enum {
	ARG_PARTITIONS = 1u << 0,
	ARG_ALL = 1u << 1,
	ARG_TRUNCATE_TO = 1u << 2,
	ARG_FROM_START = 1u << 3,
	ARG_MODE = 1u << 4,
	ARG_SOURCE = 1u << 5,
	ARG_RATE = 1u << 6,
	ARG_TOPIC = 1u << 7,
	ARG_PLANNED = 1u << 8,
	ARG_TIMEOUT_MS = 1u << 9,
};

static const unsigned verb_args[KM_CTL_VERB_COUNT] = {
	[KM_CTL_STATUS] = 0,
	[KM_CTL_START] = ARG_PARTITIONS | ARG_TRUNCATE_TO | ARG_FROM_START,
	[KM_CTL_STOP] = ARG_PARTITIONS | ARG_ALL | ARG_MODE | ARG_PLANNED |
			ARG_TIMEOUT_MS,
	[KM_CTL_FAILBACK] = ARG_PARTITIONS | ARG_SOURCE | ARG_TRUNCATE_TO |
			    ARG_FROM_START,
	[KM_CTL_PAUSE] = ARG_PARTITIONS | ARG_ALL,
	[KM_CTL_RESUME] = ARG_PARTITIONS | ARG_ALL,
	[KM_CTL_METRICS] = 0,
	[KM_CTL_THROTTLE] = ARG_RATE | ARG_TOPIC,
};

const char *km_ctlproto_verb_name(enum km_ctlproto_verb verb)
{
	if ((unsigned)verb >= KM_CTL_VERB_COUNT)
		return NULL;
	return verb_names[verb];
}

int km_ctlproto_verb_parse(const char *name)
{
	for (int i = 0; i < KM_CTL_VERB_COUNT; i++)
		if (strcmp(name, verb_names[i]) == 0)
			return i;
	return KM_ECTLCMD;
}

static bool topic_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

/* Kafka's Topic.validate: length 1..249, legal chars, not "." or "..". */
int km_ctlproto_partition_parse(const char *s, char *topic, int32_t *partition,
				char *err, size_t err_len)
{
	const char *colon = strchr(s, ':');
	size_t n = colon ? (size_t)(colon - s) : strlen(s);

	if (n == 0 || n >= KM_CTLPROTO_TOPIC_BYTES_MAX)
		goto bad_topic;
	for (size_t i = 0; i < n; i++)
		if (!topic_char(s[i]))
			goto bad_topic;
	if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
		goto bad_topic;
	memcpy(topic, s, n);
	topic[n] = '\0';
	*partition = -1;
	if (colon) {
		char *end;
		long v;

		errno = 0;
		v = strtol(colon + 1, &end, 10);
		if (colon[1] < '0' || colon[1] > '9' || *end != '\0' ||
		    errno != 0 || v > INT32_MAX) {
			if (err)
				snprintf(err, err_len,
					 "bad partition in '%s': want TOPIC[:PARTITION], PARTITION a number 0..2147483647",
					 s);
			return KM_ECTLREQ;
		}
		*partition = (int32_t)v;
	}
	return 0;
bad_topic:
	if (err)
		snprintf(err, err_len,
			 "bad topic in '%.300s': want 1..249 chars of [A-Za-z0-9._-]",
			 s);
	return KM_ECTLREQ;
}

int km_ctlproto_hostport_check(const char *s, char *err, size_t err_len)
{
	const char *colon = strrchr(s, ':');
	char *end;
	long port;
	size_t hlen;

	if (colon == NULL)
		goto bad;
	hlen = (size_t)(colon - s);
	if (hlen == 0 || hlen > 255)
		goto bad;
	if (s[0] != '[' && memchr(s, ':', hlen) != NULL)
		goto bad; /* an IPv6 literal needs brackets */
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || errno != 0 ||
	    port < 1 || port > 65535)
		goto bad;
	return 0;
bad:
	if (err)
		snprintf(err, err_len,
			 "bad address '%.300s': want HOST:PORT, PORT 1..65535", s);
	return KM_ECTLREQ;
}

static int check_partitions(const json_t *v, char *err, size_t err_len)
{
	char topic[KM_CTLPROTO_TOPIC_BYTES_MAX];
	int32_t part;
	size_t i;
	json_t *e;

	if (!json_is_array(v) || json_array_size(v) == 0) {
		snprintf(err, err_len,
			 "\"partitions\" must be a non-empty array of \"TOPIC[:PARTITION]\" strings");
		return KM_ECTLREQ;
	}
	json_array_foreach(v, i, e) {
		if (!json_is_string(e)) {
			snprintf(err, err_len,
				 "\"partitions\"[%zu] is not a string", i);
			return KM_ECTLREQ;
		}
		if (km_ctlproto_partition_parse(json_string_value(e), topic,
						&part, err, err_len) < 0)
			return KM_ECTLREQ;
	}
	return 0;
}

/* A topic name alone (no partition). */
static int topic_arg(const char *s, char *err, size_t err_len)
{
	char topic[KM_CTLPROTO_TOPIC_BYTES_MAX];
	int32_t part;

	if (km_ctlproto_partition_parse(s, topic, &part, err, err_len) < 0)
		return KM_ECTLREQ;
	if (part >= 0) {
		snprintf(err, err_len, "\"topic\" is a topic, not '%.300s'", s);
		return KM_ECTLREQ;
	}
	return ARG_TOPIC;
}

/* One argument's type and value; returns its ARG_ bit, or KM_ECTLREQ. */
static int check_arg(const char *key, const json_t *v, char *err,
		     size_t err_len)
{
	if (strcmp(key, "partitions") == 0)
		return check_partitions(v, err, err_len) < 0 ? KM_ECTLREQ
							     : ARG_PARTITIONS;
	if (strcmp(key, "all") == 0 && json_is_true(v))
		return ARG_ALL;
	if (strcmp(key, "from_start") == 0 && json_is_boolean(v))
		return ARG_FROM_START;
	if (strcmp(key, "truncate_to") == 0 && json_is_integer(v) &&
	    json_integer_value(v) >= 0)
		return ARG_TRUNCATE_TO;
	if (strcmp(key, "mode") == 0 && json_is_string(v) &&
	    (strcmp(json_string_value(v), "truncate") == 0 ||
	     strcmp(json_string_value(v), "abort") == 0))
		return ARG_MODE;
	if (strcmp(key, "planned") == 0 && json_is_boolean(v))
		return ARG_PLANNED;
	if (strcmp(key, "timeout_ms") == 0 && json_is_integer(v) &&
	    json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX)
		return ARG_TIMEOUT_MS;
	if (strcmp(key, "source") == 0 && json_is_string(v))
		return km_ctlproto_hostport_check(json_string_value(v), err,
						  err_len) < 0
			       ? KM_ECTLREQ
			       : ARG_SOURCE;
	if (strcmp(key, "rate") == 0 && json_is_integer(v) &&
	    json_integer_value(v) >= 0 &&
	    json_integer_value(v) <= KM_CTLPROTO_RATE_MAX)
		return ARG_RATE;
	if (strcmp(key, "topic") == 0 && json_is_string(v))
		return topic_arg(json_string_value(v), err, err_len);
	if (strcmp(key, "all") == 0)
		snprintf(err, err_len, "\"all\" must be true");
	else if (strcmp(key, "truncate_to") == 0)
		snprintf(err, err_len, "\"truncate_to\" must be an integer >= 0");
	else if (strcmp(key, "mode") == 0)
		snprintf(err, err_len,
			 "\"mode\" must be \"truncate\" or \"abort\"");
	else if (strcmp(key, "from_start") == 0)
		snprintf(err, err_len, "\"from_start\" must be a boolean");
	else if (strcmp(key, "source") == 0)
		snprintf(err, err_len, "\"source\" must be a \"HOST:PORT\" string");
	else if (strcmp(key, "rate") == 0)
		snprintf(err, err_len, "\"rate\" must be an integer 0..%llu "
			 "(bytes per second)", (unsigned long long)KM_CTLPROTO_RATE_MAX);
	else if (strcmp(key, "topic") == 0)
		snprintf(err, err_len, "\"topic\" must be a topic name string");
	else if (strcmp(key, "planned") == 0)
		snprintf(err, err_len, "\"planned\" must be a boolean");
	else if (strcmp(key, "timeout_ms") == 0)
		snprintf(err, err_len, "\"timeout_ms\" must be an integer 0..2147483647");
	else
		snprintf(err, err_len, "unknown argument \"%.200s\"", key);
	return KM_ECTLREQ;
}

static int check_combination(const json_t *req, int verb, unsigned seen,
			     char *err, size_t err_len)
{
	bool need_parts = verb == KM_CTL_START || verb == KM_CTL_FAILBACK ||
			  verb == KM_CTL_STOP || verb == KM_CTL_PAUSE ||
			  verb == KM_CTL_RESUME;

	if ((seen & ARG_PARTITIONS) && (seen & ARG_ALL)) {
		snprintf(err, err_len, "give \"partitions\" or \"all\", not both");
		return KM_ECTLREQ;
	}
	if (need_parts && !(seen & (ARG_PARTITIONS | ARG_ALL))) {
		snprintf(err, err_len, "%s needs \"partitions\"%s",
			 verb_names[verb],
			 (verb_args[verb] & ARG_ALL) ? " or \"all\":true" : "");
		return KM_ECTLREQ;
	}
	if ((seen & ARG_TRUNCATE_TO) &&
	    json_is_true(json_object_get(req, "from_start"))) {
		snprintf(err, err_len,
			 "\"truncate_to\" and \"from_start\" exclude each other");
		return KM_ECTLREQ;
	}
	if ((seen & ARG_TIMEOUT_MS) &&
	    !json_is_true(json_object_get(req, "planned"))) {
		snprintf(err, err_len, "\"timeout_ms\" goes with \"planned\":true");
		return KM_ECTLREQ;
	}
	if (verb == KM_CTL_FAILBACK && !(seen & ARG_SOURCE)) {
		snprintf(err, err_len, "failback needs \"source\":\"HOST:PORT\"");
		return KM_ECTLREQ;
	}
	if (verb == KM_CTL_THROTTLE && !(seen & ARG_RATE)) {
		snprintf(err, err_len, "throttle needs \"rate\"");
		return KM_ECTLREQ;
	}
	return 0;
}

int km_ctlproto_validate(const json_t *req, char *err, size_t err_len)
{
	const char *key;
	json_t *v, *cmd;
	unsigned seen = 0;
	int verb;

	if (!json_is_object(req)) {
		snprintf(err, err_len, "request is not a JSON object");
		return KM_ECTLREQ;
	}
	cmd = json_object_get(req, "cmd");
	if (!json_is_string(cmd)) {
		snprintf(err, err_len, "request has no string \"cmd\"");
		return KM_ECTLREQ;
	}
	verb = km_ctlproto_verb_parse(json_string_value(cmd));
	if (verb < 0) {
		snprintf(err, err_len, "unknown cmd \"%.200s\"",
			 json_string_value(cmd));
		return KM_ECTLCMD;
	}
	json_object_foreach((json_t *)req, key, v) {
		int bit;

		if (strcmp(key, "cmd") == 0 || strcmp(key, "id") == 0)
			continue;
		bit = check_arg(key, v, err, err_len);
		if (bit < 0)
			return bit;
		if (bit != 0 && !(verb_args[verb] & (unsigned)bit)) {
			snprintf(err, err_len, "%s takes no \"%.200s\"",
				 verb_names[verb], key);
			return KM_ECTLREQ;
		}
		seen |= (unsigned)bit;
	}
	if (check_combination(req, verb, seen, err, err_len) < 0)
		return KM_ECTLREQ;
	return verb;
}

#define KM_NAME(c) { c, #c }
static const struct {
	int code;
	const char *name;
} km_names[] = {
	KM_NAME(KM_EBATCHLEN),
	KM_NAME(KM_EBATCHMAX),
	KM_NAME(KM_EBADMAGIC),
	KM_NAME(KM_EBADCRC),
	KM_NAME(KM_EBATCHHDR),
	KM_NAME(KM_EBATCHCOUNT),
	KM_NAME(KM_ERECOFFSET),
	KM_NAME(KM_EINFLATE),
	KM_NAME(KM_EINFLATEMAX),
	KM_NAME(KM_EPIDMAX),
	KM_NAME(KM_EVARINT),
	KM_NAME(KM_ERECORD),
	KM_NAME(KM_ERECCOUNT),
	KM_NAME(KM_ECOMPRESSED),
	KM_NAME(KM_ENOTCONTROL),
	KM_NAME(KM_ECTRLKEY),
	KM_NAME(KM_ECTRLVALUE),
	KM_NAME(KM_ECLUSTERID),
	KM_NAME(KM_ENOSPACE),
	KM_NAME(KM_EDUPLICATE),
	KM_NAME(KM_EPRODUCERFENCED),
	KM_NAME(KM_EOUTOFORDERSEQ),
	KM_NAME(KM_EINVALIDTXNSTATE),
	KM_NAME(KM_ECOORDFENCED),
	KM_NAME(KM_ETXNOPEN),
	KM_NAME(KM_EPSTATEFULL),
	KM_NAME(KM_ESNAPSHOT),
	KM_NAME(KM_EOFFSET),
	KM_NAME(KM_ESEGMENTS),
	KM_NAME(KM_ECORRUPT),
	KM_NAME(KM_EWIRETRUNC),
	KM_NAME(KM_EWIRENEGLEN),
	KM_NAME(KM_EWIRESTRLEN),
	KM_NAME(KM_EWIREARRAY),
	KM_NAME(KM_EWIREVARINT),
	KM_NAME(KM_EWIRETAGS),
	KM_NAME(KM_EWIREFRAMELEN),
	KM_NAME(KM_EWIREFRAMEMAX),
	KM_NAME(KM_EWIREAPIKEY),
	KM_NAME(KM_EWIREVERSION),
	KM_NAME(KM_EWIRECAPACITY),
	KM_NAME(KM_EWIRETRAILING),
	KM_NAME(KM_EWIREVALUE),
	KM_NAME(KM_ECFGSYNTAX),
	KM_NAME(KM_ECFGKEY),
	KM_NAME(KM_ECFGVALUE),
	KM_NAME(KM_ECFGMISSING),
	KM_NAME(KM_EMETAPROPS),
	KM_NAME(KM_EMETAMISMATCH),
	KM_NAME(KM_EDATADIRLOCK),
	KM_NAME(KM_ERESOLVE),
	KM_NAME(KM_ECTLJSON),
	KM_NAME(KM_ECTLREQ),
	KM_NAME(KM_ECTLCMD),
	KM_NAME(KM_ECTLLINE),
	KM_NAME(KM_ECTLBUSY),
	KM_NAME(KM_EMIRRORED),
	KM_NAME(KM_EUNKNOWNPART),
	KM_NAME(KM_EPARTOFFLINE),
	KM_NAME(KM_ESOURCE),
	KM_NAME(KM_EWORKERQ),
	KM_NAME(KM_ESHUTDOWN),
	KM_NAME(KM_ESOURCEID),
	KM_NAME(KM_EBASEOFFSET),
	KM_NAME(KM_EGOREC),
	KM_NAME(KM_ETLS),
	KM_NAME(KM_EAUTH),
	KM_NAME(KM_ESASLMECH),
};

const char *km_ctlproto_error_name(int code)
{
	const char *n;

	for (size_t i = 0; i < sizeof(km_names) / sizeof(km_names[0]); i++)
		if (km_names[i].code == code)
			return km_names[i].name;
	if (code < 0 && code > -4096) {
		n = strerrorname_np(-code);
		if (n != NULL)
			return n;
	}
	return "UNKNOWN";
}

json_t *km_ctlproto_error(int code, const char *message)
{
	return json_pack("{s:b, s:{s:i, s:s, s:s}}", "ok", 0, "error", "code",
			 code, "name", km_ctlproto_error_name(code), "message",
			 message ? message : km_strerror(code));
}
