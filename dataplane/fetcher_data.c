/* Fetch session: the Fetch request, its response, and the batches it
 * carries: verified (km_batch_parse), mapped (R1), appended (R6) straight
 * from the receive buffers, with the next Fetch sent while they are being
 * written. See fetcher.h. */
#include "dataplane/fetcher_pvt.h"

#include <string.h>

#include "common/endian.h"
#include "common/errors.h"
#include "common/log.h"

/* Parse-and-append rounds per call (STYLE 13): the rest of a large
 * response waits for the next step. */
#define DRAIN_ROUNDS 16u
/* read_uncommitted responses carry none (Kafka sends null); a source that
 * sends more than this fails the decode, and with it the session. */
#define ABORTED_MAX 256u

int km_fetcher_enc_fetch(struct km_fetcher *f, struct km_wire_wr *w)
{
	struct km_proto_topic t;
	struct km_fetch_req_part p;
	struct km_fetch_req m;

	memset(&t, 0, sizeof(t));
	km_wire_name_set(&t.name, f->cfg.topic);
	t.count = 1;
	p.partition = f->cfg.partition;
	p.current_leader_epoch = -1; /* no epoch fencing: any leader serves */
	p.fetch_offset = f->next_offset;
	p.log_start_offset = -1;     /* a consumer, not a follower */
	p.partition_max_bytes = f->max_bytes;
	memset(&m, 0, sizeof(m));
	m.replica_id = -1;
	m.max_wait_ms = f->cfg.max_wait_ms;
	m.min_bytes = 1;
	m.max_bytes = f->max_bytes;
	m.isolation_level = 0;	     /* read_uncommitted: all up to the HW */
	m.session_id = 0;	     /* no fetch session (KIP-227) */
	m.session_epoch = -1;
	m.topics = &t;
	m.topics_max = m.n_topics = 1;
	m.parts = &p;
	m.parts_max = m.n_parts = 1;
	km_wire_name_set(&m.rack_id, "");
	km_fetcher_req_begin(f, w, KM_API_FETCH, f->stats.v_fetch);
	f->inflight_offset = f->next_offset;
	return km_fetch_req_encode(w, f->stats.v_fetch, &m);
}

/* ---- batches ---- */

/* Rejected (bad length, magic, CRC, header, a cut first batch): counted,
 * refetched from next_offset; the same offset corrupt again and again
 * fails the session instead of refetching forever. */
static void reject_corrupt(struct km_fetcher *f, const char *why)
{
	KM_WARN("fetcher", "%s-%d: batch at offset %lld rejected: %s; "
		"refetching", f->cfg.topic, (int)f->cfg.partition,
		(long long)f->next_offset, why);
	f->stats.corrupt++;
	f->stats.errors[KM_FETCHER_ERR_CORRUPT]++;
	f->rec_left = 0;
	if (f->corrupt_offset != f->next_offset) {
		f->corrupt_offset = f->next_offset;
		f->corrupt_streak = 0;
	}
	if (++f->corrupt_streak >= KM_FETCHER_CORRUPT_MAX)
		km_fetcher_fail(f, "batch at offset %lld of %s-%d corrupt %u "
				"times in a row: %s", (long long)f->next_offset,
				f->cfg.topic, (int)f->cfg.partition,
				f->corrupt_streak, why);
}

/* Frame and verify the next batch of the records span.
 * @return its size (> 0), 0 if the span ends inside it, or a KM_E* code. */
static int frame_batch(struct km_fetcher *f, struct km_batch *b)
{
	const struct km_chain *ch = &f->frame->chain;
	uint8_t lo[KM_BATCH_LOG_OVERHEAD];
	uint32_t max = f->rec_left < f->cfg.batch_bytes_max
			       ? f->rec_left
			       : f->cfg.batch_bytes_max;
	int32_t blen;

	if (f->rec_left < KM_BATCH_LOG_OVERHEAD)
		return 0;
	km_chain_copy(ch, f->rec_cur, lo, sizeof(lo));
	blen = (int32_t)km_load_be32(lo + KM_BATCH_OFF_LENGTH);
	if (blen >= KM_BATCH_LENGTH_MIN &&
	    (uint64_t)blen + KM_BATCH_LOG_OVERHEAD > f->rec_left)
		return 0;
	return km_batch_parse(b, ch, f->rec_cur, max);
}

/* R6 within the response, then R1. @return true to append the batch. */
static bool accept_batch(struct km_fetcher *f, struct km_batch *b)
{
	int64_t base = km_batch_base_offset(b);
	int64_t last = km_batch_last_offset(b);
	int rc;

	if (f->resp_batches++ > 0 && base <= f->resp_last) {
		km_fetcher_fail(f, "%s-%d: offsets go backwards in a Fetch "
				"response: batch %lld..%lld after offset %lld",
				f->cfg.topic, (int)f->cfg.partition,
				(long long)base, (long long)last,
				(long long)f->resp_last);
		return false;
	}
	f->resp_last = last;
	if (last < f->next_offset)
		return false; /* before the offset asked: mirrored already */
	rc = km_batch_map_pid(b);
	if (rc < 0) {
		km_fetcher_fail(f, "batch at offset %lld of %s-%d: %s",
				(long long)base, f->cfg.topic,
				(int)f->cfg.partition, km_strerror(rc));
		return false;
	}
	f->next_offset = last + 1;
	return true;
}

/* Frame up to KM_FETCHER_BURST batches of the span into f->batches. */
static void parse_batches(struct km_fetcher *f)
{
	f->n_batches = f->n_done = 0;
	while (f->n_batches < KM_FETCHER_BURST && f->rec_left > 0 &&
	       !f->failed) {
		struct km_batch *b = &f->batches[f->n_batches];
		int rc = frame_batch(f, b);

		if (rc == 0 && f->resp_batches == 0) {
			/* KIP-74: the first batch always comes whole. */
			reject_corrupt(f, "the first batch is cut short");
		} else if (rc == 0) {
			f->rec_left = 0; /* a cut last batch: refetched */
		} else if (rc == KM_EBATCHMAX) {
			km_fetcher_fail(f, "the batch at offset %lld of %s-%d "
					"is larger than batch.max.bytes (%u)",
					(long long)f->next_offset, f->cfg.topic,
					(int)f->cfg.partition,
					f->cfg.batch_bytes_max);
		} else if (rc < 0) {
			reject_corrupt(f, km_strerror(rc));
		} else {
			km_chain_advance(&f->frame->chain, &f->rec_cur,
					 (uint32_t)rc);
			f->rec_left -= (uint32_t)rc;
			if (accept_batch(f, b))
				f->n_batches++;
			continue;
		}
		return;
	}
}

/* Hand the parsed batches to the log. @return how many it took, or < 0
 * (the session FAILED; nothing of this call was written). */
static int submit(struct km_fetcher *f)
{
	struct km_log_append_result res;
	struct km_batch *b = f->batches + f->n_done;
	int rc = km_log_append_burst(f->log, b, f->n_batches - f->n_done,
				     KM_ORIGIN_MIRROR, &res);

	if (rc < 0) {
		km_fetcher_fail(f, "log append at offset %lld of %s-%d: %s",
				(long long)km_batch_base_offset(b), f->cfg.topic,
				(int)f->cfg.partition, km_strerror(rc));
		return rc;
	}
	for (int i = 0; i < rc; i++)
		f->stats.bytes += km_batch_size(&b[i]);
	f->stats.batches += res.appended;
	f->stats.duplicates += res.duplicates;
	if (rc > 0)
		f->wait_offset = km_batch_last_offset(&b[rc - 1]);
	f->n_done += (uint32_t)rc;
	return rc;
}

bool km_fetcher_appends_pending(const struct km_fetcher *f)
{
	return f->frame != NULL && f->wait_offset >= 0 &&
	       km_log_appended_offset(f->log) <= f->wait_offset &&
	       km_log_error(f->log) == 0;
}

/* No more batches will be parsed from the held frame. */
static bool parsing_over(const struct km_fetcher *f)
{
	return f->rec_left == 0 || f->failed || f->stopped || f->dropping ||
	       f->conn == NULL;
}

/* The whole response is parsed, so the next offset is known: ask for it
 * now, while the log is still writing (the pipelining of fetcher.h). */
static void ask_next_fetch(struct km_fetcher *f)
{
	if (f->fetch_asked || f->rec_left != 0 || f->failed || f->stopped ||
	    f->dropping || f->conn == NULL)
		return;
	f->fetch_asked = true;
	km_fetcher_want(f, KM_FREQ_FETCH, 0);
}

bool km_fetcher_drain(struct km_fetcher *f)
{
	for (uint32_t i = 0; i < DRAIN_ROUNDS && !f->failed && !f->stopped;
	     i++) {
		if (f->n_done < f->n_batches) {
			if (submit(f) < 0)
				break;
			if (f->n_done < f->n_batches)
				return false; /* queue full: step() retries */
		}
		if (parsing_over(f))
			break;
		parse_batches(f);
	}
	if (!parsing_over(f))
		return false; /* more of the span next step */
	ask_next_fetch(f);
	/* The log writes from these buffers: keep them until it has. */
	if (km_fetcher_appends_pending(f))
		return false;
	km_kframe_release(&f->kf);
	f->frame = NULL;
	f->rec_left = 0;
	f->n_batches = f->n_done = 0;
	f->wait_offset = -1;
	return true;
}

/* ---- the response ---- */

/* Position p at our partition. @return 1, 0 if absent, or a wire error. */
static int our_partition(const struct km_fetcher *f,
			 struct km_fetch_resp_iter *it, struct km_fetch_part *p)
{
	for (uint32_t i = 0; i < KM_WIRE_ARRAY_COUNT_MAX_DEFAULT; i++) {
		int rc = km_fetch_resp_next_partition(it, p);

		if (rc != 1)
			return rc;
		if (p->partition == f->cfg.partition &&
		    strcmp(it->cur.topic.s, f->cfg.topic) == 0)
			return 1;
	}
	return 0;
}

/* Hold the frame: the log appends straight from its buffers. */
static void hold(struct km_fetcher *f, const struct km_kframe_frame *fr,
		 const struct km_fetch_part *p)
{
	f->frame = fr;
	f->rec_cur = p->records.cur;
	f->rec_left = p->records.len > 0 ? (uint32_t)p->records.len : 0;
	f->resp_batches = 0;
	f->resp_last = -1;
	f->n_batches = f->n_done = 0;
	f->wait_offset = -1;
	f->fetch_asked = false;
}

bool km_fetcher_on_fetch(struct km_fetcher *f, const struct km_kframe_frame *fr,
			 struct km_wire_rd *r)
{
	struct km_fetch_aborted aborted[ABORTED_MAX];
	struct km_fetch_resp_iter it;
	struct km_fetch_part p;
	int rc = km_fetch_resp_begin(&it, r, f->inflight_ver, aborted,
				     ABORTED_MAX);

	if (rc == 0 && it.error_code) { /* v7+: the whole request failed */
		km_fetcher_kafka_error(f, "Fetch", KM_FREQ_FETCH, it.error_code);
		return false;
	}
	if (rc == 0)
		rc = our_partition(f, &it, &p);
	if (rc < 0) {
		km_fetcher_protocol_error(f, "Fetch v%d answer: %s",
					  (int)f->inflight_ver, km_strerror(rc));
		return false;
	}
	if (rc == 0) {
		km_fetcher_fail(f, "Fetch v%d: partition missing",
				(int)f->inflight_ver);
		return false;
	}
	f->stats.fetches++;
	f->proto_streak = 0;
	if (p.high_watermark >= 0)
		f->stats.high_watermark = p.high_watermark;
	if (p.log_start_offset >= 0)
		f->stats.log_start_offset = p.log_start_offset;
	if (p.error_code) {
		km_fetcher_kafka_error(f, "Fetch", KM_FREQ_FETCH, p.error_code);
		return false;
	}
	if (f->inflight_offset != f->next_offset) {
		km_fetcher_want(f, KM_FREQ_FETCH, 0); /* asked before a reset */
		return false;
	}
	f->err_streak = 0;
	f->backoff_ms = f->cfg.backoff_ms;
	hold(f, fr, &p);
	km_fetcher_drain(f);
	return true;
}
