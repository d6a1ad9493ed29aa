/* The control socket protocol, shared by the server (ctlsock.c) and the
 * kmirrorctl client: one JSON object per line each way (UTF-8, '\n' ends a
 * line, at most KM_CTLPROTO_LINE_BYTES_MAX bytes before it).
 *
 * Request:  {"cmd":VERB, ARGS..., "id":ANY?}
 *   status    -
 *   metrics   -
 *   start     "partitions":[P...] (>= 1), "truncate_to":INT>=0?, "from_start":BOOL?
 *             (truncate_to and from_start exclude each other)
 *   stop      "partitions":[P...] | "all":true, "mode":"truncate"|"abort"?,
 *             "planned":BOOL?, "timeout_ms":INT 0..INT32_MAX? (with planned:
 *             wait until caught up with the source, progress lines meanwhile)
 *   failback  "partitions":[P...] (>= 1), "source":"HOST:PORT",
 *             "truncate_to":INT>=0?, "from_start":BOOL? (as start)
 *   pause     "partitions":[P...] | "all":true
 *   resume    "partitions":[P...] | "all":true
 *   throttle  "rate":INT>=0 (bytes per second, 0: no cap), "topic":TOPIC?
 *             (a topic with a cap in topic.mirror.throttle.bytes.per.sec;
 *             without it, the host's cap)
 *   P is "TOPIC" (every partition) or "TOPIC:PARTITION" (PARTITION a
 *   decimal int32 >= 0). Keys not listed for a verb are refused.
 * Progress: {"progress":{...}, "id":ANY?}  zero or more, before the final line.
 * Final:    {"ok":true, FIELDS..., "id":ANY?}
 *           {"ok":false, "error":{"code":INT, "name":"KM_E...", "message":STR},
 *            "id":ANY?}
 * "id" is echoed if the request carried one. Blank lines are skipped; a
 * last request without '\n' counts when the client shuts its side.
 * Errors of the protocol itself: KM_ECTLJSON (not JSON), KM_ECTLREQ (not
 * an object, no cmd, bad or unknown argument), KM_ECTLCMD (unknown verb
 * or none registered), KM_ECTLLINE (line over the limit: the rest of it
 * is skipped), KM_ECTLBUSY (too many clients: the connection is closed).
 */
#ifndef KM_CONTROL_CTLPROTO_H
#define KM_CONTROL_CTLPROTO_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest line accepted either way by the server (64 KiB, the input buffer
 * of each client); kmirrorctl accepts replies up to
 * KM_CTLPROTO_REPLY_BYTES_MAX (metrics text may be long). */
#define KM_CTLPROTO_LINE_BYTES_MAX (64u * 1024)
#define KM_CTLPROTO_REPLY_BYTES_MAX (64u * 1024 * 1024)
#define KM_CTLPROTO_TOPIC_BYTES_MAX 250u /* Kafka's 249 chars + NUL */
/* The highest throttle rate (KM_CONFIG_THROTTLE_MAX: a TiB/s). */
#define KM_CTLPROTO_RATE_MAX (1ll << 40)

enum km_ctlproto_verb {
	KM_CTL_STATUS = 0,
	KM_CTL_START,
	KM_CTL_STOP,
	KM_CTL_FAILBACK,
	KM_CTL_PAUSE,
	KM_CTL_RESUME,
	KM_CTL_METRICS,
	KM_CTL_THROTTLE,
	KM_CTL_VERB_COUNT,
};

/** The verb's name ("status"...), or NULL out of range. */
const char *km_ctlproto_verb_name(enum km_ctlproto_verb verb);

/** @return the verb for name, or KM_ECTLCMD. */
int km_ctlproto_verb_parse(const char *name);

/**
 * Parse "TOPIC" or "TOPIC:PARTITION". TOPIC follows Kafka's rule: 1..249
 * chars of [A-Za-z0-9._-], not "." or "..".
 * @param topic      receives TOPIC, NUL-terminated (KM_CTLPROTO_TOPIC_BYTES_MAX).
 * @param partition  receives PARTITION, or -1 when absent.
 * @return 0, or KM_ECTLREQ with a reason in err (may be NULL).
 */
int km_ctlproto_partition_parse(const char *s, char *topic, int32_t *partition,
				char *err, size_t err_len);

/** Parse "HOST:PORT" (port 1..65535; "[v6]:PORT" allowed). 0 or KM_ECTLREQ. */
int km_ctlproto_hostport_check(const char *s, char *err, size_t err_len);

/**
 * Check a request object against the schema above.
 * @return the verb (>= 0); KM_ECTLREQ (not an object, no string cmd, a bad
 *         or unknown argument) or KM_ECTLCMD (unknown verb), with a message
 *         naming the offending key in err.
 */
int km_ctlproto_validate(const json_t *req, char *err, size_t err_len);

/** "KM_ECTLREQ", "ENOENT"..., never NULL ("UNKNOWN" if unnamed). */
const char *km_ctlproto_error_name(int code);

/** A new {"ok":false,"error":{...}} object; message NULL = km_strerror. */
json_t *km_ctlproto_error(int code, const char *message);

#ifdef __cplusplus
}
#endif

#endif
