/* Control socket verbs served by the daemon: status and metrics (the
 * state machine verbs come with the control issue). Figures are the
 * snapshots the workers publish in each struct km_part_stats. */
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "common/log.h"
#include "control/daemon_pvt.h"

/* Each listener: its name, security protocol, bound port and the
 * address clients are told (advertised). */
static json_t *listeners_rows(const struct km_daemon *d)
{
	json_t *rows = json_array();

	for (uint32_t i = 0; rows != NULL && i < d->cfg->listeners_count; i++) {
		const struct km_config_listener *l = &d->cfg->listeners[i];
		char adv[KM_CONFIG_HOST_BYTES_MAX + 8];

		snprintf(adv, sizeof(adv), "%s:%u", l->advertised.host,
			 l->advertised.port ? l->advertised.port
					    : d->listener_ports[i]);
		json_array_append_new(rows, json_pack(
			"{s:s, s:s, s:i, s:s}", "name", l->name, "protocol",
			km_secproto_name((enum km_secproto)l->protocol), "port",
			(int)d->listener_ports[i], "advertised", adv));
	}
	return rows;
}

#define LOAD(p, f) atomic_load_explicit(&(p)->stats.f, memory_order_relaxed)

static const char *fetch_state_name(int st)
{
	switch (st) {
	case KM_PART_FETCH_CONNECTING:
		return "CONNECTING";
	case KM_PART_FETCH_MIRRORING:
		return "MIRRORING";
	case KM_PART_FETCH_FAILED:
		return "FAILED";
	case KM_PART_FETCH_NOSPACE: /* the disk watch pauses it (daemon_disk.c) */
		return "PAUSED";
	default:
		return "SERVING";
	}
}

/* What an operator calls the partition's state. */
static const char *state_name(const struct km_daemon *d, uint32_t i)
{
	const struct km_part *p = &d->table.parts[i];
	bool mirrored = d->mirrored[i];
	int st = atomic_load_explicit(&p->stats.fetch_state,
				      memory_order_acquire);

	if (atomic_load_explicit(&p->error, memory_order_relaxed) != 0)
		return "FAILED";
	if (d->mstates[i].state != KM_MSTATE_MIRRORING)
		return km_mstate_name(d->mstates[i].state);
	if (!mirrored)
		return km_part_get_mode(p) == KM_PART_WRITABLE ? "WRITABLE"
							      : "SERVING";
	return fetch_state_name(st);
}

/* Rates over the interval since the previous status call (at least
 * 200 ms, so that back-to-back calls do not give noise). */
static void rate(struct km_rate *r, uint64_t bytes, int64_t leo, uint64_t now)
{
	double dt = (double)(now - r->at_ms) / 1000.0;

	if (r->at_ms != 0 && now < r->at_ms + 200)
		return;
	/* A counter that went back (a new fetcher starts its count again, a
	 * stop cuts the log) restarts the rate at 0, never a negative or
	 * wrapped figure. */
	if (r->at_ms != 0) {
		r->bytes_per_sec = bytes >= r->bytes
					   ? (double)(bytes - r->bytes) / dt : 0;
		r->records_per_sec = leo >= r->leo
					     ? (double)(leo - r->leo) / dt : 0;
	}
	r->bytes = bytes;
	r->leo = leo;
	r->at_ms = now;
}

/* Data-loss events, and the offsets the last one lost: columns an
 * operator sees without reading the log (once there was one). */
static void data_loss_status(const struct km_part *p, json_t *row)
{
	uint64_t n = LOAD(p, data_loss_events);
	char text[128];

	if (n == 0)
		return;
	json_object_set_new(row, "data_loss_events", json_integer((json_int_t)n));
	snprintf(text, sizeof(text), "offsets %" PRId64 " to %" PRId64
		 " (%" PRId64 ") deleted at the source unmirrored",
		 (int64_t)LOAD(p, data_loss_from), (int64_t)LOAD(p, data_loss_to),
		 (int64_t)(LOAD(p, data_loss_to) - LOAD(p, data_loss_from) + 1));
	json_object_set_new(row, "data_loss", json_string(text));
}

static json_t *part_row(struct km_daemon *d, uint32_t i, uint64_t now)
{
	struct km_part *p = &d->table.parts[i];
	int64_t leo = LOAD(p, leo), src = LOAD(p, source_hw);
	uint64_t bytes = LOAD(p, mirrored_bytes) + LOAD(p, produced_bytes);
	char name[KM_WIRE_NAME_BYTES_MAX + 16];
	json_t *row;

	snprintf(name, sizeof(name), "%s:%d", p->topic, p->partition);
	row = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:i}", "partition",
			name, "state", state_name(d, i), "leo",
			(json_int_t)leo, "hw", (json_int_t)LOAD(p, hw), "lso",
			(json_int_t)LOAD(p, lso), "log_start",
			(json_int_t)LOAD(p, log_start), "worker", (int)p->owner);
	if (row == NULL)
		return NULL;
	/* Lag means something only while the partition follows a source;
	 * metrics takes it from the same place. */
	struct km_daemon_lag lag;

	km_daemon_lag(d, i, now, &lag);
	json_object_set_new(row, "lag", lag.offsets >= 0 ? json_integer(lag.offsets)
							 : json_null());
	rate(&d->rates[i], bytes, leo, now);
	json_object_set_new(row, "disk_bytes",
			    json_integer((json_int_t)LOAD(p, disk_bytes)));
	json_object_set_new(row, "records_per_sec",
			    json_integer((json_int_t)d->rates[i].records_per_sec));
	json_object_set_new(row, "bytes_per_sec",
			    json_integer((json_int_t)d->rates[i].bytes_per_sec));
	if (d->mirrored[i]) {
		if (d->mstates[i].source[0] != '\0')
			json_object_set_new(row, "source",
					    json_string(d->mstates[i].source));
		json_object_set_new(row, "source_hw", json_integer(src));
		json_object_set_new(row, "source_lso",
				    json_integer(LOAD(p, source_lso)));
		json_object_set_new(row, "time_lag_ms", lag.ms >= 0
				    ? json_integer(lag.ms) : json_null());
		json_object_set_new(row, "corrupt",
				    json_integer((json_int_t)LOAD(p, corrupt)));
		json_object_set_new(row, "reconnects",
				    json_integer((json_int_t)LOAD(p, reconnects)));
		json_object_set_new(row, "offsets_skipped",
				    json_integer((json_int_t)LOAD(p, offsets_skipped)));
		data_loss_status(p, row);
	}
	km_daemon_retry_status(d, i, row);
	if (km_daemon_disk_held(d, i)) {
		char why[512];

		km_daemon_disk_part_reason(d, i, why, sizeof(why));
		json_object_set_new(row, "reason", json_string(why));
	}
	/* A loop found after the fetcher failed for its symptom (the source
	 * cluster id it now meets) is the cause to show (daemon_loop.c). */
	if (strcmp(state_name(d, i), "FAILED") == 0)
		json_object_set_new(row, "reason",
				    json_string(p->stats.reason[0] &&
						!strstr(d->mstates[i].failed_reason,
							"mirror loop")
						? p->stats.reason
						: d->mstates[i].failed_reason));
	km_daemon_source_status(d, i, state_name(d, i), row);
	return row;
}

const char *km_daemon_state_name(const struct km_daemon *d, uint32_t i)
{
	return state_name(d, i);
}

static int on_status(void *ctx, const json_t *req, json_t *resp)
{
	struct km_daemon *d = ctx;
	uint64_t now = km_daemon_now_ms();
	json_t *rows = json_array();

	(void)req;
	if (rows == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < d->table.n; i++) {
		json_t *row;

		if (d->table.parts[i].internal || d->table.parts[i].deleted)
			continue; /* shown with the groups; gone (DeleteTopics) */
		row = part_row(d, i, now);

		if (row == NULL || json_array_append_new(rows, row) < 0) {
			json_decref(rows);
			return -ENOMEM;
		}
	}
	json_object_set_new(resp, "cluster_id", json_string(d->cfg->cluster_id));
	json_object_set_new(resp, "node_id", json_integer(d->cfg->node_id));
	json_object_set_new(resp, "kafka_port", json_integer(d->kafka_port));
	json_object_set_new(resp, "listeners", listeners_rows(d));
	if (d->http_fd >= 0) /* metrics.listener */
		json_object_set_new(resp, "metrics_port", json_integer(d->http_port));
	if (d->source_cluster_id[0] != '\0')
		json_object_set_new(resp, "source_cluster_id",
				    json_string(d->source_cluster_id));
	if (d->source_tls[0] != '\0')
		json_object_set_new(resp, "source_tls", json_string(d->source_tls));
	json_object_set_new(resp, "uptime_s",
			    json_integer((json_int_t)((now - d->started_ms) / 1000)));
	json_object_set_new(resp, "disk", json_pack("{s:I, s:I, s:b}",
		"data_dir_free_bytes", (json_int_t)d->disk_free,
		"free_min_bytes", (json_int_t)d->cfg->disk_free_min_bytes,
		"mirroring_paused", km_daemon_disk_pausing(d)));
	json_object_set_new(resp, "partitions", rows);
	json_object_set_new(resp, "groups", km_daemon_groups_status(d, now));
	json_object_set_new(resp, "config_sync", km_daemon_configs_status(d));
	json_object_set_new(resp, "acls", km_daemon_acls_status(d));
	km_daemon_net_status(d, resp);
	km_daemon_throttle_status(d, resp);
	km_daemon_scale_status(d, resp);
	return 0;
}

/* ---- metrics: Prometheus text exposition format ---------------------- */

struct text {
	char *buf;
	size_t len, cap;
};

static void emit(struct text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void emit(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(t->buf ? t->buf + t->len : NULL,
			      t->buf ? t->cap - t->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if (t->buf != NULL && t->len + (size_t)n < t->cap) {
			t->len += (size_t)n;
			return;
		}
		char *nb = realloc(t->buf, t->cap * 2 + (size_t)n + 4096);

		if (nb == NULL)
			return;
		t->buf = nb;
		t->cap = t->cap * 2 + (size_t)n + 4096;
	}
}

struct metric {
	const char *name;
	const char *type;
	const char *help;
	size_t off;	/* into struct km_part_stats; an _Atomic 64-bit */
	bool is_signed;
};

#define M(n, t, h, f, s) { n, t, h, offsetof(struct km_part_stats, f), s }
static const struct metric metrics[] = {
	M("kmirror_partition_log_start_offset", "gauge", "First offset kept (moves with retention).", log_start, true),
	M("kmirror_partition_log_end_offset", "gauge", "Log end offset (LEO).", leo, true),
	M("kmirror_partition_disk_bytes", "gauge", "Bytes of the partition's .log segments.", disk_bytes, false),
	M("kmirror_partition_high_watermark", "gauge", "Durable offset served to clients.", hw, true),
	M("kmirror_partition_last_stable_offset", "gauge", "Last stable offset.", lso, true),
	M("kmirror_partition_source_high_watermark", "gauge", "Source high watermark (-1 unknown).", source_hw, true),
	M("kmirror_partition_mirrored_bytes_total", "counter", "Batch bytes mirrored.", mirrored_bytes, false),
	M("kmirror_partition_mirrored_batches_total", "counter", "Batches mirrored.", mirrored_batches, false),
	M("kmirror_partition_duplicate_batches_total", "counter", "Mirrored batches skipped below the log end.", duplicates, false),
	M("kmirror_partition_corrupt_batches_total", "counter", "Batches rejected as corrupt.", corrupt, false),
	M("kmirror_partition_reconnects_total", "counter", "Fetch session reconnects.", reconnects, false),
	M("kmirror_partition_produced_bytes_total", "counter", "Bytes written by local producers.", produced_bytes, false),
	M("kmirror_partition_producer_sequence_gaps_total", "counter", "Mirrored batches whose sequence does not follow their producer's (reported, appended), since the log was opened.", sequence_gaps, false),
	M("kmirror_partition_producer_epoch_regressions_total", "counter", "Mirrored batches with an older producer epoch (reported, appended), since the log was opened.", epoch_regressions, false),
	M("kmirror_partition_offset_resets_total", "counter", "Log restarts at the source's log start (mirror.offset.reset=earliest).", offset_resets, false),
	M("kmirror_partition_offsets_skipped_total", "counter", "Offsets the source deleted before they were mirrored: the gaps those restarts left.", offsets_skipped, false),
	M("kmirror_partition_barriers_applied_total", "counter", "MIRROR_PID_RESET barriers applied to the producer state, since the log was opened.", barriers_applied, false),
	M("kmirror_partition_source_last_stable_offset", "gauge", "Source last stable offset, from the last Fetch answer (-1 unknown).", source_lso, true),
	M("kmirror_partition_fetched_bytes_total", "counter", "Batch bytes that came in Fetch answers (duplicates too).", fetched_bytes, false),
	M("kmirror_partition_fetched_records_total", "counter", "Records in the batches that came in Fetch answers (duplicates too).", fetched_records, false),
	M("kmirror_partition_mirrored_records_total", "counter", "Records in the batches mirrored (written to the log).", mirrored_records, false),
	M("kmirror_partition_data_loss_events_total", "counter", "Times the source's log start was found past our log end (offsets deleted before they were mirrored), whatever mirror.offset.reset did.", data_loss_events, false),
	M("kmirror_partition_data_loss_last_from_offset", "gauge", "First offset the last data-loss event lost (-1: none).", data_loss_from, true),
	M("kmirror_partition_data_loss_last_to_offset", "gauge", "Last offset the last data-loss event lost (-1: none).", data_loss_to, true),
	M("kmirror_partition_cleaner_runs_total", "counter", "Compaction passes that rewrote segments (cleanup.policy=compact, writable partitions).", cleaner_runs, false),
	M("kmirror_partition_cleaner_bytes_removed_total", "counter", "Bytes compaction removed from the partition's segments.", cleaner_bytes_removed, false),
};

static int64_t stat_value(const struct km_part *p, const struct metric *m)
{
	const void *f = (const char *)&p->stats + m->off;

	if (m->is_signed)
		return atomic_load_explicit((const _Atomic int64_t *)f,
					    memory_order_relaxed);
	return (int64_t)atomic_load_explicit((const _Atomic uint64_t *)f,
					     memory_order_relaxed);
}

static void emit_metric(struct text *t, const struct km_daemon *d,
			const struct metric *m)
{
	emit(t, "# HELP %s %s\n# TYPE %s %s\n", m->name, m->help, m->name,
	     m->type);
	for (uint32_t i = 0; i < d->table.n; i++) {
		const struct km_part *p = &d->table.parts[i];

		if (p->deleted)
			continue;
		emit(t, "%s{topic=\"%s\",partition=\"%d\"} %" PRId64 "\n",
		     m->name, p->topic, p->partition, stat_value(p, m));
	}
}

/* FAILED as a gauge: an alert on it needs no parsing of status reasons
 * (a topic made again at the source, a gap it cannot serve, ...). */
static void emit_failed(struct text *t, const struct km_daemon *d)
{
	emit(t, "# HELP kmirror_partition_failed 1 while the partition is "
		"FAILED (kmirrorctl status gives the reason).\n"
		"# TYPE kmirror_partition_failed gauge\n");
	for (uint32_t i = 0; i < d->table.n; i++) {
		const struct km_part *p = &d->table.parts[i];

		if (p->deleted)
			continue;
		emit(t, "kmirror_partition_failed{topic=\"%s\",partition=\"%d\"} "
		     "%d\n", p->topic, p->partition,
		     strcmp(state_name(d, i), "FAILED") == 0);
	}
}

/* The retries of transient FAILED partitions (daemon_retry.c). */
static void emit_retries(struct text *t, const struct km_daemon *d)
{
	emit(t, "# HELP kmirror_partition_failed_retries_total Retries of a "
		"partition FAILED by a transient cause, since kmirrord "
		"started.\n# TYPE kmirror_partition_failed_retries_total "
		"counter\n");
	for (uint32_t i = 0; i < d->table.n; i++) {
		const struct km_part *p = &d->table.parts[i];

		if (p->deleted)
			continue;
		emit(t, "kmirror_partition_failed_retries_total{topic=\"%s\","
		     "partition=\"%d\"} %" PRIu64 "\n", p->topic, p->partition,
		     d->retries[i].total);
	}
}

char *km_daemon_metrics_text(struct km_daemon *d, size_t *len)
{
	struct text t = { 0 };
	char *net, *parts;

	emit(&t, "# HELP kmirror_up 1 while kmirrord serves.\n"
		 "# TYPE kmirror_up gauge\nkmirror_up 1\n");
	emit(&t, "# HELP kmirror_data_dir_free_bytes Free bytes on data.dir "
		 "(measured once a second).\n"
		 "# TYPE kmirror_data_dir_free_bytes gauge\n"
		 "kmirror_data_dir_free_bytes %" PRIu64 "\n"
		 "# HELP kmirror_disk_paused 1 while mirroring is paused for free "
		 "space (disk.free.min.bytes, or a full disk).\n"
		 "# TYPE kmirror_disk_paused gauge\nkmirror_disk_paused %d\n",
	     d->disk_free, km_daemon_disk_pausing(d) ? 1 : 0);
	for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++)
		emit_metric(&t, d, &metrics[i]);
	emit_failed(&t, d);
	emit_retries(&t, d);
	if ((net = km_daemon_net_metrics(d)) != NULL)
		emit(&t, "%s", net);
	free(net);
	if ((net = km_daemon_throttle_metrics(d)) != NULL)
		emit(&t, "%s", net);
	free(net);
	if ((net = km_daemon_groups_metrics(d)) != NULL)
		emit(&t, "%s", net);
	free(net);
	if ((parts = km_daemon_part_metrics(d)) != NULL)
		emit(&t, "%s", parts);
	free(parts);
	if ((parts = km_daemon_acls_metrics(d)) != NULL)
		emit(&t, "%s", parts);
	free(parts);
	if ((parts = km_daemon_scale_metrics(d)) != NULL)
		emit(&t, "%s", parts);
	free(parts);
	*len = t.len;
	return t.buf;
}

static int on_metrics(void *ctx, const json_t *req, json_t *resp)
{
	size_t len;
	char *text = km_daemon_metrics_text(ctx, &len);

	(void)req;
	if (text == NULL)
		return -ENOMEM;
	json_object_set_new(resp, "text", json_stringn(text, len));
	free(text);
	return 0;
}

int km_daemon_ctl_open(struct km_daemon *d)
{
	int rc = km_ctlsock_open(&d->ctl, d->cfg->control_socket, 16);

	if (rc < 0) {
		KM_ERROR("daemon", "control.socket %s: %s", d->cfg->control_socket,
			 km_strerror(rc));
		return rc;
	}
	km_ctlsock_register(d->ctl, KM_CTL_STATUS, on_status, d);
	km_ctlsock_register(d->ctl, KM_CTL_METRICS, on_metrics, d);
	km_ctlsock_register(d->ctl, KM_CTL_STOP, km_daemon_on_stop, d);
	km_ctlsock_register(d->ctl, KM_CTL_START, km_daemon_on_start, d);
	km_ctlsock_register(d->ctl, KM_CTL_FAILBACK, km_daemon_on_failback, d);
	km_ctlsock_register(d->ctl, KM_CTL_PAUSE, km_daemon_on_pause, d);
	km_ctlsock_register(d->ctl, KM_CTL_RESUME, km_daemon_on_resume, d);
	km_ctlsock_register(d->ctl, KM_CTL_THROTTLE, km_daemon_on_throttle, d);
	KM_INFO("daemon", "control socket %s", d->cfg->control_socket);
	return 0;
}
