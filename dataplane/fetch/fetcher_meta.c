/* A partition's leader (from its session's Metadata), where it starts
 * (ListOffsets), and what OFFSET_OUT_OF_RANGE means. See fetcher.h. */
#include "dataplane/fetch/fetcher_pvt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/errors.h"
#include "common/log.h"
#include "common/uuid.h"

/* ---- Metadata ---- */

/* Our topic as the answer names it (without error), or NULL with *err. */
static const struct km_metadata_topic *
find_topic(const struct km_fetcher *f, const struct km_metadata_resp *m,
	   int16_t *err)
{
	*err = KM_KERR_UNKNOWN_TOPIC_OR_PARTITION;
	for (uint32_t t = 0; t < m->n_topics; t++) {
		const struct km_metadata_topic *tp = &m->topics[t];

		if (tp->name.len < 0 || strcmp(tp->name.s, f->cfg.topic) != 0)
			continue;
		if (tp->error_code) {
			*err = tp->error_code;
			return NULL;
		}
		return tp;
	}
	return NULL;
}

/* Our partition of topic tp, or NULL. */
static const struct km_metadata_part *
find_part(const struct km_fetcher *f, const struct km_metadata_resp *m,
	  const struct km_metadata_topic *tp)
{
	for (uint32_t i = tp->first; i < tp->first + tp->count; i++)
		if (m->parts[i].partition == f->cfg.partition)
			return &m->parts[i];
	return NULL;
}

/* ---- source identity (issue 21) ---- */

static bool id_given(const uint8_t id[KM_WIRE_UUID_BYTES])
{
	static const uint8_t zero[KM_WIRE_UUID_BYTES];

	return memcmp(id, zero, KM_WIRE_UUID_BYTES) != 0;
}

/* An id the answer gives where the partition held none: it holds this one
 * from now on, and the owner persists it. */
static void learn(struct km_fetcher *f, const char *what, const char *id)
{
	km_fetcher_published_changed(f);
	KM_INFO("fetcher", "%s-%d: source %s %s (first seen at %s:%u; every "
		"later answer must name it)", f->cfg.topic,
		(int)f->cfg.partition, what, id, f->sess->target.host,
		(unsigned)f->sess->target.port);
}

/* The cluster behind the address is another one: a splice of two
 * clusters' offsets into one log is refused (FAILED, nothing appended). */
static bool same_cluster(struct km_fetcher *f, const struct km_metadata_resp *m)
{
	const struct km_wire_name *id = &m->cluster_id;

	if (id->len <= 0) /* v0-1, or a null ClusterId: nothing to compare */
		return true;
	if (f->cluster_id[0] == '\0') {
		memcpy(f->cluster_id, id->s, (size_t)id->len + 1);
		learn(f, "cluster id", f->cluster_id);
		return true;
	}
	if (strcmp(f->cluster_id, id->s) == 0)
		return true;
	km_fetcher_fail(f, "source cluster id changed: log %.80s-%d mirrors "
			"%.64s, source at %.48s:%u now reports %.64s; refusing "
			"to append (KM_ESOURCEID; to mirror the new source from "
			"scratch: kmirrorctl start %.80s:%d --from-start)",
			f->cfg.topic, (int)f->cfg.partition, f->cluster_id,
			f->sess->target.host, (unsigned)f->sess->target.port,
			id->s, f->cfg.topic, (int)f->cfg.partition);
	return false;
}

/* partition.metadata names the source topic's id, as the source's own
 * partition directory does, before anything is appended from it: Kafka
 * sets a log whose id is not its topic's aside as "-stray". A no-op once
 * written; a failed write fails the partition rather than append under
 * another id. */
static bool record_topic_id(struct km_fetcher *f, const char *id)
{
	int rc = km_log_set_topic_id(f->log, f->topic_id);

	if (rc >= 0)
		return true;
	km_fetcher_fail(f, "%.80s-%d: cannot record source topic id %s in "
			"partition.metadata: %s", f->cfg.topic,
			(int)f->cfg.partition, id, km_strerror(rc));
	return false;
}

/* The topic was deleted and made again (a new topic id, KIP-516): its
 * offsets start over and are not the ones the log holds. */
static bool same_topic(struct km_fetcher *f, const struct km_metadata_topic *tp)
{
	char had[KM_UUID_CHARS + 1], now[KM_UUID_CHARS + 1];

	if (!id_given(tp->topic_id)) /* below v10, or Uuid.ZERO_UUID */
		return true;
	km_uuid_encode(tp->topic_id, now);
	if (!id_given(f->topic_id)) {
		memcpy(f->topic_id, tp->topic_id, sizeof(f->topic_id));
		learn(f, "topic id", now);
		return record_topic_id(f, now);
	}
	if (memcmp(f->topic_id, tp->topic_id, sizeof(f->topic_id)) == 0)
		return record_topic_id(f, now);
	km_uuid_encode(f->topic_id, had);
	km_fetcher_fail(f, "source topic id changed: log %.80s-%d mirrors "
			"topic id %s, source at %.48s:%u now reports %s (the "
			"topic was made again?); refusing to append "
			"(KM_ESOURCEID; to mirror the new topic from scratch: "
			"kmirrorctl start %.80s:%d --from-start)", f->cfg.topic,
			(int)f->cfg.partition, had, f->sess->target.host,
			(unsigned)f->sess->target.port, now, f->cfg.topic,
			(int)f->cfg.partition);
	return false;
}

/* ---- notes ---- */

void km_fetcher_set_note(struct km_fetcher *f, enum km_fetcher_note_kind kind,
			 const char *text)
{
	f->note_kind = kind;
	snprintf(f->note, sizeof(f->note), "%s", text);
	km_fetcher_published_changed(f);
}

/* UNKNOWN_TOPIC_OR_PARTITION: say it once, when it starts (tp: the
 * topic, if the source has it); the retries follow the leader backoff. */
static void note_missing(struct km_fetcher *f, const struct km_metadata_topic *tp)
{
	char text[KM_FETCHER_REASON_BYTES];

	if (f->note_kind == KM_FNOTE_NO_PARTITION)
		return;
	if (tp != NULL)
		snprintf(text, sizeof(text), "source has no partition %.80s-%d "
			 "(topic %.80s has %u partitions at %.48s:%u); "
			 "retrying", f->cfg.topic, (int)f->cfg.partition,
			 f->cfg.topic,
			 tp->count, f->sess->target.host,
			 (unsigned)f->sess->target.port);
	else
		snprintf(text, sizeof(text), "source has no partition %.80s-%d "
			 "(no topic %.80s at %.48s:%u); retrying", f->cfg.topic,
			 (int)f->cfg.partition, f->cfg.topic,
			 f->sess->target.host, (unsigned)f->sess->target.port);
	km_fetcher_set_note(f, KM_FNOTE_NO_PARTITION, text);
	KM_WARN("fetcher", "%s-%d: %s (Metadata at most every %u ms)",
		f->cfg.topic, (int)f->cfg.partition, text,
		f->cfg.backoff_max_ms);
}

static void note_found(struct km_fetcher *f)
{
	if (f->note_kind != KM_FNOTE_NO_PARTITION)
		return;
	KM_INFO("fetcher", "%s-%d: source at %s:%u has the partition again",
		f->cfg.topic, (int)f->cfg.partition, f->sess->target.host,
		(unsigned)f->sess->target.port);
	km_fetcher_set_note(f, KM_FNOTE_NONE, "");
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
	const struct km_metadata_topic *tp;
	const struct km_metadata_part *p = NULL;
	int16_t err;

	f->stats.metadata_refreshes++;
	if (!same_cluster(f, m))
		return 0;
	tp = find_topic(f, m, &err);
	if (tp != NULL && !same_topic(f, tp))
		return 0;
	if (tp != NULL && (p = find_part(f, m, tp)) != NULL)
		err = part_error(p);
	if (!err && !set_leader(f, m, p->leader_id))
		err = KM_KERR_LEADER_NOT_AVAILABLE;
	if (err == KM_KERR_UNKNOWN_TOPIC_OR_PARTITION)
		note_missing(f, tp);
	else
		note_found(f);
	return err;
}

/* ---- ListOffsets ---- */

/* The source deleted offsets [end, start) before we had them: a data-loss
 * event, counted and said at ERROR whatever mirror.offset.reset does
 * about it, so that earliest never hides it. */
static void data_loss(struct km_fetcher *f, int64_t end, int64_t start)
{
	f->stats.data_loss_events++;
	f->stats.data_loss_from = end;
	f->stats.data_loss_to = start - 1;
	KM_ERROR("fetcher", "%s-%d: data loss: offsets %lld to %lld were "
		 "deleted at the source before they were mirrored (%lld "
		 "offsets lost; its log now starts at %lld); %s",
		 f->cfg.topic, (int)f->cfg.partition, (long long)end,
		 (long long)start - 1, (long long)(start - end),
		 (long long)start,
		 f->cfg.offset_reset_earliest
			 ? "mirror.offset.reset=earliest: the log restarts "
			   "empty there"
			 : "mirror.offset.reset=none: FAILED, the log keeps "
			   "what it has");
}

/* Below the source's log start: FAILED, or restart the log there. */
static void behind_source(struct km_fetcher *f, int64_t start, int64_t hw)
{
	int64_t end = km_log_end_offset(f->log);
	int rc;

	data_loss(f, end, start);
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
	f->stats.offsets_skipped += (uint64_t)(start - end);
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
