/* What an operator graphs and alerts on (issue 19 item 10): a
 * partition's state as one gauge per state, its lag behind the source in
 * offsets (high watermark against our log end, the source's last stable
 * offset against ours) and in time, and the sync errors per kind. Status
 * takes its lag from the same km_daemon_lag(), so the two never disagree
 * on what lag means.
 *
 * Time lag is Kafka's own measure of a follower in time: 0 while our log
 * end has reached the source's high watermark as last seen, else the time
 * since it last had (a follower's lastCaughtUpTime, which
 * replica.lag.time.max.ms bounds). It needs no clock of the source's and
 * no record timestamps, which producers set as they like. The workers
 * note the moment every tick while a fetcher runs; the control thread
 * does for paused partitions, whose high watermark it asks itself
 * (daemon_pausehw.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/daemon_pvt.h"

#define LOAD(p, f) atomic_load_explicit(&(p)->stats.f, memory_order_relaxed)

/* Every state a partition can show, for its gauges: the set is fixed so
 * that a partition that leaves a state has that series go to 0. */
static const char *const states[] = {
	"CONNECTING", "MIRRORING", "PAUSED", "FAILED", "STOPPING",
	"STOPPED", "PREPARING", "WRITABLE", "SERVING",
};

static const char *const sync_kinds[KM_DAEMON_SYNC_KINDS] = {
	[KM_DAEMON_SYNC_GROUPS] = "groups",
};

static bool follows(const struct km_daemon *d, uint32_t i)
{
	return d->mirrored[i] && (d->mstates[i].state == KM_MSTATE_MIRRORING ||
				  d->mstates[i].state == KM_MSTATE_PAUSED);
}

void km_daemon_lag(struct km_daemon *d, uint32_t i, uint64_t now,
		   struct km_daemon_lag *out)
{
	const struct km_part *p = &d->table.parts[i];
	int64_t leo = LOAD(p, leo), src = LOAD(p, source_hw);
	int64_t lso = LOAD(p, lso), src_lso = LOAD(p, source_lso);
	uint64_t seen = LOAD(p, caught_up_ms);

	*out = (struct km_daemon_lag){ .follows = follows(d, i), .offsets = -1,
				       .stable = -1, .ms = -1 };
	if (!out->follows || src < 0)
		return;
	out->offsets = src > leo ? src - leo : 0;
	/* The fetcher's LSO is of its last Fetch answer: a paused partition
	 * has none newer, so only a running fetcher's is compared. */
	if (src_lso >= 0 && d->mstates[i].state == KM_MSTATE_MIRRORING)
		out->stable = src_lso > lso ? src_lso - lso : 0;
	if (out->offsets == 0)
		d->caught_up_ms[i] = now;
	if (d->caught_up_ms[i] > seen)
		seen = d->caught_up_ms[i];
	/* Never caught up since kmirrord started: since then (Kafka starts
	 * a follower's clock when the replica is made). */
	if (seen == 0 || seen < d->started_ms)
		seen = d->started_ms;
	out->ms = out->offsets == 0 || now < seen ? 0 : (int64_t)(now - seen);
}

void km_daemon_watch_lag(struct km_daemon *d)
{
	uint64_t now = km_daemon_now_ms();
	struct km_daemon_lag lag;

	for (uint32_t i = 0; i < d->table.n; i++)
		km_daemon_lag(d, i, now, &lag);
}

static void label(FILE *f, const char *name, const struct km_part *p)
{
	fprintf(f, "%s{topic=\"%s\",partition=\"%d\"", name, p->topic,
		p->partition);
}

static void emit_states(FILE *f, const struct km_daemon *d)
{
	fprintf(f, "# HELP kmirror_partition_state 1 for the partition's "
		"state, as kmirrorctl status shows it; 0 for the others.\n"
		"# TYPE kmirror_partition_state gauge\n");
	for (uint32_t i = 0; i < d->table.n; i++) {
		const struct km_part *p = &d->table.parts[i];
		const char *now = km_daemon_state_name(d, i);

		if (p->deleted)
			continue;
		for (size_t s = 0; s < sizeof(states) / sizeof(states[0]); s++) {
			label(f, "kmirror_partition_state", p);
			fprintf(f, ",state=\"%s\"} %d\n", states[s],
				strcmp(now, states[s]) == 0);
		}
	}
}

enum lag_kind { LAG_OFFSETS, LAG_STABLE, LAG_TIME };

/* A lag gauge: only partitions that follow a source and whose figure is
 * known have a sample (a stopped partition lags nothing). */
static void emit_lag(FILE *f, struct km_daemon *d, uint64_t now,
		     enum lag_kind k, const char *name, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
	for (uint32_t i = 0; i < d->table.n; i++) {
		struct km_daemon_lag lag;
		int64_t v;

		if (d->table.parts[i].deleted)
			continue;
		km_daemon_lag(d, i, now, &lag);
		v = k == LAG_OFFSETS ? lag.offsets
		    : k == LAG_STABLE ? lag.stable : lag.ms;
		if (v < 0)
			continue;
		label(f, name, &d->table.parts[i]);
		if (k == LAG_TIME)
			fprintf(f, "} %" PRId64 ".%03" PRId64 "\n", v / 1000,
				v % 1000);
		else
			fprintf(f, "} %" PRId64 "\n", v);
	}
}

static void emit_sync_errors(FILE *f, const struct km_daemon *d)
{
	fprintf(f, "# HELP kmirror_sync_errors_total Sync rounds from the "
		"source that failed, per kind of sync (groups: one per group "
		"and attempt).\n# TYPE kmirror_sync_errors_total counter\n");
	for (int k = 0; k < KM_DAEMON_SYNC_KINDS; k++)
		fprintf(f, "kmirror_sync_errors_total{kind=\"%s\"} %" PRIu64 "\n",
			sync_kinds[k], d->sync_errors[k]);
	fprintf(f, "# HELP kmirror_mirror_loops_refused_total Partitions made "
		"FAILED because their source mirrors, directly or up its chain, "
		"from this cluster.\n# TYPE kmirror_mirror_loops_refused_total "
		"counter\nkmirror_mirror_loops_refused_total %" PRIu64 "\n",
		d->loops_refused);
}

char *km_daemon_part_metrics(struct km_daemon *d)
{
	uint64_t now = km_daemon_now_ms();
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (f == NULL)
		return NULL;
	emit_states(f, d);
	emit_lag(f, d, now, LAG_OFFSETS, "kmirror_partition_offset_lag",
		 "Source high watermark minus our log end offset, while the "
		 "partition follows a source (mirroring or paused).");
	emit_lag(f, d, now, LAG_STABLE, "kmirror_partition_stable_offset_lag",
		 "Source last stable offset minus ours, while mirroring.");
	emit_lag(f, d, now, LAG_TIME, "kmirror_partition_time_lag_seconds",
		 "0 while the log end has reached the source high watermark, "
		 "else the time since it last had (Kafka's follower lag time).");
	emit_sync_errors(f, d);
	fclose(f);
	return buf;
}
