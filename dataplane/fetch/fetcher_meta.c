/* A partition's leader (from its session's Metadata), where it starts
 * (ListOffsets), and what OFFSET_OUT_OF_RANGE means. See fetcher.h. */
#include "dataplane/fetch/fetcher_pvt.h"

#include <errno.h>
#include <string.h>

#include "common/errors.h"

/* ---- Metadata ---- */

/* Our partition, or NULL with *err (topic error or not there). */
static const struct km_metadata_part *
find_part(const struct km_fetcher *f, const struct km_metadata_resp *m,
	  int16_t *err)
{
	*err = KM_KERR_UNKNOWN_TOPIC_OR_PARTITION;
	for (uint32_t t = 0; t < m->n_topics; t++) {
		const struct km_metadata_topic *tp = &m->topics[t];

		if (strcmp(tp->name.s, f->cfg.topic) != 0)
			continue;
		if (tp->error_code) {
			*err = tp->error_code;
			return NULL;
		}
		for (uint32_t i = tp->first; i < tp->first + tp->count; i++)
			if (m->parts[i].partition == f->cfg.partition)
				return &m->parts[i];
	}
	return NULL;
}

static bool port_ok(int32_t port)
{
	return port > 0 && port <= UINT16_MAX;
}

/* Record the leader's address. @return false if Metadata names none. */
static bool set_leader(struct km_fetcher *f, const struct km_metadata_resp *m,
		       int32_t id)
{
	struct km_fetcher_stats *s = &f->stats;

	for (uint32_t i = 0; i < m->n_brokers; i++) {
		const struct km_metadata_broker *b = &m->brokers[i];

		if (b->node_id != id || b->host.len <= 0 || !port_ok(b->port))
			continue;
		if (s->leader_id >= 0 &&
		    (s->leader_id != id || s->leader.port != b->port ||
		     strcmp(s->leader.host, b->host.s) != 0))
			s->leader_changes++;
		s->leader_id = id;
		memcpy(s->leader.host, b->host.s, (size_t)b->host.len + 1);
		s->leader.port = (uint16_t)b->port;
		return true;
	}
	return false;
}

/* The partition's error, with what Kafka clients ignore taken out. */
static int16_t part_error(const struct km_metadata_part *p)
{
	/* A follower being down does not stop its leader from serving. */
	if (p->error_code == KM_KERR_REPLICA_NOT_AVAILABLE && p->leader_id >= 0)
		return 0;
	if (p->error_code == 0 && p->leader_id < 0)
		return KM_KERR_LEADER_NOT_AVAILABLE;
	return p->error_code;
}

int16_t km_fetcher_on_metadata(struct km_fetcher *f,
			       const struct km_metadata_resp *m)
{
	const struct km_metadata_part *p;
	int16_t err;

	f->stats.metadata_refreshes++;
	if (m->cluster_id.len > 0)
		memcpy(f->cluster_id, m->cluster_id.s,
		       (size_t)m->cluster_id.len + 1);
	p = find_part(f, m, &err);
	if (p != NULL)
		err = part_error(p);
	if (!err && !set_leader(f, m, p->leader_id))
		err = KM_KERR_LEADER_NOT_AVAILABLE;
	return err;
}

/* ---- ListOffsets ---- */

/* Below the source's log start: FAILED, or restart the log there. */
static void behind_source(struct km_fetcher *f, int64_t start, int64_t hw)
{
	int64_t end = km_log_end_offset(f->log);
	int rc;

	if (!f->cfg.offset_reset_earliest) {
		km_fetcher_fail(f, "OFFSET_OUT_OF_RANGE for %s-%d: the source "
				"log now starts at offset %lld, past our log "
				"end %lld (source high watermark %lld); set "
				"mirror.offset.reset=earliest to continue from "
				"%lld", f->cfg.topic, (int)f->cfg.partition,
				(long long)start, (long long)end,
				(long long)hw, (long long)start);
		return;
	}
	rc = km_log_reset_to(f->log, start);
	if (rc < 0) {
		km_fetcher_fail(f, "mirror.offset.reset=earliest: resetting "
				"the log of %s-%d from %lld to %lld: %s",
				f->cfg.topic, (int)f->cfg.partition,
				(long long)end, (long long)start,
				km_strerror(rc));
		return;
	}
	f->stats.log_resets++;
	f->next_offset = start;
	f->phase = KM_FP_FETCH;
}

/* OFFSET_OUT_OF_RANGE, with the source's log start and high watermark in
 * hand. Runs with no frame held, so no append of ours is in flight. */
static void resolve_oor(struct km_fetcher *f, int64_t start, int64_t hw)
{
	int64_t want = f->next_offset;

	f->oor = false;
	if (want > hw) {
		km_fetcher_fail(f, "OFFSET_OUT_OF_RANGE for %s-%d: our log "
				"end %lld is above the source high watermark "
				"%lld (source log start %lld): the source lost "
				"data, and mirrored data is never truncated "
				"silently", f->cfg.topic, (int)f->cfg.partition,
				(long long)km_log_end_offset(f->log),
				(long long)hw, (long long)start);
		return;
	}
	f->phase = KM_FP_FETCH;
	if (want >= start) {
		/* In range again (a leader change raced the Fetch). */
		f->ready_at_ms = km_fetcher_now_ms() + km_fetcher_backoff(f);
		return;
	}
	if (km_log_end_offset(f->log) == km_log_start_offset(f->log)) {
		/* Nothing mirrored yet: start where the source does. */
		f->next_offset = start;
		return;
	}
	behind_source(f, start, hw);
}

void km_fetcher_on_listoffsets(struct km_fetcher *f,
			       const struct km_listoffsets_resp_part *p,
			       enum km_freq req, int16_t version)
{
	if (p == NULL) {
		km_fetcher_fail(f, "ListOffsets v%d: partition missing",
				(int)version);
		return;
	}
	if (p->error_code) {
		km_fetcher_kafka_error(f, "ListOffsets", req, p->error_code);
		return;
	}
	f->err_streak = 0;
	f->ready_at_ms = 0;
	if (req == KM_FREQ_LATEST) {
		f->stats.high_watermark = p->offset;
		resolve_oor(f, f->oor_start, p->offset);
		return;
	}
	f->stats.log_start_offset = p->offset;
	if (f->oor) {
		f->oor_start = p->offset;
		f->lo_want = KM_FREQ_LATEST;
		return;
	}
	/* An empty log: from the source's start, or our end if later. */
	f->next_offset = p->offset > km_log_end_offset(f->log)
				 ? p->offset
				 : km_log_end_offset(f->log);
	f->phase = KM_FP_FETCH;
}
