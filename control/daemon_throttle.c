/* mirror.throttle.bytes.per.sec on the control thread (issue 19 item 8):
 * the buckets every worker's fetch sessions share (the host's, then one
 * per topic.mirror.throttle.bytes.per.sec entry), handed to each fetcher,
 * and their figures in status and metrics: the cap, the rate now (the
 * bytes the bucket was charged between two looks: what came from the
 * source, the host's whole answers or a topic's record sets, which is
 * what the cap holds; the mirrored bytes are the partitions' own), the time
 * Fetches were held back, and the source's own throttling (KIP-219
 * throttle_time_ms, counted on the host's bucket); and kmirrorctl
 * throttle, which changes a cap at once. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/errors.h"
#include "common/log.h"
#include "control/daemon_pvt.h"

int km_daemon_throttle_init(struct km_daemon *d)
{
	const struct km_config *c = d->cfg;
	uint32_t n = 1 + c->topic_throttle_count;

	d->throttles = calloc(n, sizeof(*d->throttles));
	d->throttle_rates = calloc(n, sizeof(*d->throttle_rates));
	if (d->throttles == NULL || d->throttle_rates == NULL)
		return -ENOMEM;
	d->n_throttles = n;
	/* The host's bucket always exists: it counts the source's throttling
	 * even when kmirrord caps nothing itself. */
	km_throttle_init(&d->throttles[0], c->throttle_bytes_per_sec);
	for (uint32_t i = 0; i < c->topic_throttle_count; i++) {
		int64_t v = c->topic_throttle[i].value;

		km_throttle_init(&d->throttles[1 + i], v > 0 ? (uint64_t)v : 0);
	}
	if (c->throttle_bytes_per_sec > 0)
		KM_INFO("daemon", "fetches capped at %" PRIu64 " bytes/s",
			c->throttle_bytes_per_sec);
	return 0;
}

void km_daemon_throttle_free(struct km_daemon *d)
{
	free(d->throttles);
	free(d->throttle_rates);
	d->throttles = NULL;
	d->throttle_rates = NULL;
	d->n_throttles = 0;
}

void km_daemon_throttle_fill(const struct km_daemon *d, const char *topic,
			     struct km_fetcher_config *fc)
{
	const struct km_config *c = d->cfg;

	if (d->throttles == NULL)
		return;
	fc->throttle = &d->throttles[0];
	for (uint32_t i = 0; i < c->topic_throttle_count; i++)
		if (strcmp(c->topic_throttle[i].topic, topic) == 0 &&
		    c->topic_throttle[i].value > 0)
			fc->topic_throttle = &d->throttles[1 + i];
}

/* The scope of bucket k: "host" or "topic:NAME". */
static void scope_of(const struct km_daemon *d, uint32_t k, char *out,
		     size_t cap)
{
	if (k == 0)
		snprintf(out, cap, "host");
	else
		snprintf(out, cap, "topic:%s",
			 d->cfg->topic_throttle[k - 1].topic);
}

/* Bytes received from the source that bucket k was charged. */
static uint64_t covered_bytes(const struct km_daemon *d, uint32_t k)
{
	struct km_throttle_stats st;

	km_throttle_get_stats(&d->throttles[k], &st);
	return st.received_bytes;
}

/* Bytes per second since the last look at least a second ago: a capped
 * mirror moves in steps of KM_THROTTLE_CHUNK_US worth per session, which
 * a shorter window would alias into a rate swinging around the cap.
 * Counters never go down. */
static double current_rate(struct km_daemon *d, uint32_t k)
{
	struct km_rate *r = &d->throttle_rates[k];
	uint64_t now = km_daemon_now_ms(), bytes = covered_bytes(d, k);

	if (r->at_ms != 0 && now < r->at_ms + 1000)
		return r->bytes_per_sec;
	if (r->at_ms != 0)
		r->bytes_per_sec = bytes >= r->bytes
			? (double)(bytes - r->bytes) * 1000.0 /
				  (double)(now - r->at_ms) : 0;
	r->bytes = bytes;
	r->at_ms = now;
	return r->bytes_per_sec;
}

void km_daemon_throttle_status(struct km_daemon *d, json_t *resp)
{
	json_t *rows = json_array();

	for (uint32_t k = 0; rows != NULL && k < d->n_throttles; k++) {
		struct km_throttle_stats st;
		char scope[KM_CONFIG_TOPIC_BYTES_MAX + 8];
		json_t *row;

		km_throttle_get_stats(&d->throttles[k], &st);
		scope_of(d, k, scope, sizeof(scope));
		row = json_pack("{s:s, s:I, s:I, s:I}", "throttle", scope,
				"limit_bytes_per_sec", (json_int_t)st.rate,
				"bytes_per_sec",
				(json_int_t)current_rate(d, k),
				"throttled_ms", (json_int_t)st.throttled_ms);
		if (row != NULL && k == 0) {
			json_object_set_new(row, "source_throttle_ms",
				json_integer((json_int_t)st.source_throttle_ms));
			json_object_set_new(row, "source_throttles",
				json_integer((json_int_t)st.source_throttles));
		}
		json_array_append_new(rows, row);
	}
	json_object_set_new(resp, "throttle", rows);
}

static void metric_head(FILE *f, const char *name, const char *type,
			const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One line per bucket: what 0 its cap, 1 its rate now, 2 its held ms,
 * 3 the bytes it was charged. */
static void metric_rows(FILE *f, struct km_daemon *d, const char *name,
			int what)
{
	for (uint32_t k = 0; k < d->n_throttles; k++) {
		struct km_throttle_stats st;
		char scope[KM_CONFIG_TOPIC_BYTES_MAX + 8];
		uint64_t v;

		km_throttle_get_stats(&d->throttles[k], &st);
		scope_of(d, k, scope, sizeof(scope));
		v = what == 0 ? st.rate
		    : what == 1 ? (uint64_t)current_rate(d, k)
		    : what == 2 ? st.throttled_ms : st.received_bytes;
		fprintf(f, "%s{scope=\"%s\"} %" PRIu64 "\n", name, scope, v);
	}
}

char *km_daemon_throttle_metrics(struct km_daemon *d)
{
	struct km_throttle_stats st;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (f == NULL)
		return NULL;
	metric_head(f, "kmirror_throttle_limit_bytes_per_sec", "gauge",
		    "The fetch rate cap (mirror.throttle.bytes.per.sec, per topic: topic.mirror.throttle.bytes.per.sec); 0: none.");
	metric_rows(f, d, "kmirror_throttle_limit_bytes_per_sec", 0);
	metric_head(f, "kmirror_throttle_bytes_per_sec", "gauge",
		    "Bytes received from the source per second under the cap (host: the fetch sessions' answers whole, framing and batches not mirrored included; topic: its partitions' record sets as received), over the second or more since the previous look.");
	metric_rows(f, d, "kmirror_throttle_bytes_per_sec", 1);
	metric_head(f, "kmirror_throttle_throttled_ms_total", "counter",
		    "Milliseconds the cap held the next Fetch back.");
	metric_rows(f, d, "kmirror_throttle_throttled_ms_total", 2);
	metric_head(f, "kmirror_throttle_received_bytes_total", "counter",
		    "Bytes received from the source that the cap counts (as kmirror_throttle_bytes_per_sec), whether a cap is set or not.");
	metric_rows(f, d, "kmirror_throttle_received_bytes_total", 3);
	km_throttle_get_stats(&d->throttles[0], &st);
	metric_head(f, "kmirror_source_throttle_ms_total", "counter",
		    "Milliseconds the source asked to wait (Fetch throttle_time_ms, its quotas), waited before the next request.");
	fprintf(f, "kmirror_source_throttle_ms_total %" PRIu64 "\n",
		st.source_throttle_ms);
	metric_head(f, "kmirror_source_throttles_total", "counter",
		    "Fetch answers of the source that carried a throttle time.");
	fprintf(f, "kmirror_source_throttles_total %" PRIu64 "\n",
		st.source_throttles);
	fclose(f);
	return buf;
}

/* kmirrorctl throttle RATE [--topic T]: a cap changes at once (each
 * bucket's rate is an atomic the sessions read at every check); a topic
 * must have a cap from the configuration, as its fetchers hold the bucket
 * they were given. */
int km_daemon_on_throttle(void *ctx, const json_t *req, json_t *resp)
{
	struct km_daemon *d = ctx;
	const char *topic = json_string_value(json_object_get(req, "topic"));
	uint64_t rate = (uint64_t)json_integer_value(json_object_get(req, "rate"));
	struct km_throttle_stats was;
	char scope[KM_CONFIG_TOPIC_BYTES_MAX + 8], msg[512];
	uint32_t k = 0;

	for (uint32_t i = 0; topic != NULL && i < d->cfg->topic_throttle_count; i++)
		if (strcmp(d->cfg->topic_throttle[i].topic, topic) == 0)
			k = 1 + i;
	if (topic != NULL && k == 0) {
		snprintf(msg, sizeof(msg), "topic %.250s has no cap in "
			 "topic.mirror.throttle.bytes.per.sec: a topic's cap can "
			 "be changed here, not added", topic);
		json_object_set_new(resp, "message", json_string(msg));
		return KM_EUNKNOWNPART;
	}
	km_throttle_get_stats(&d->throttles[k], &was);
	km_throttle_set_rate(&d->throttles[k], rate);
	scope_of(d, k, scope, sizeof(scope));
	KM_INFO("daemon", "throttle %s: %" PRIu64 " bytes/s (was %" PRIu64 ")",
		scope, rate, was.rate);
	json_object_set_new(resp, "throttle", json_string(scope));
	json_object_set_new(resp, "limit_bytes_per_sec",
			    json_integer((json_int_t)rate));
	json_object_set_new(resp, "was", json_integer((json_int_t)was.rate));
	return 0;
}
