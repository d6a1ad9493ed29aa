/* A partition's records in a Fetch response: verified (km_batch_parse),
 * mapped (R1), appended (R6) straight from the receive buffers of the
 * session's held frame. See fetcher.h. */
#include "dataplane/fetch/fetcher_pvt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/endian.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/log.h"

/* Parse-and-append rounds per call (STYLE 13): the rest of a large span
 * waits for the next step. */
#define DRAIN_ROUNDS 16u

/* ---- batches ---- */

/* Rejected (bad length, magic, CRC, header, a cut first batch): counted,
 * refetched from next_offset; the same offset corrupt again and again
 * fails the partition instead of refetching forever. */
static void reject_corrupt(struct km_fetcher *f, const char *why)
{
	KM_WARN("fetcher", "%s-%d: batch at offset %lld rejected: %s; "
		"refetching", f->cfg.topic, (int)f->cfg.partition,
		(long long)f->next_offset, why);
	f->stats.corrupt++;
	f->stats.errors[KM_FETCHER_ERR_CORRUPT]++;
	km_fetcher_touch(f, true);
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
	const struct km_chain *ch = &f->sess->frame->chain;
	uint8_t lo[KM_BATCH_LOG_OVERHEAD];
	const uint8_t *p;
	uint32_t max = f->rec_left < f->cfg.batch_bytes_max
			       ? f->rec_left
			       : f->cfg.batch_bytes_max;
	int32_t blen;

	if (f->rec_left < KM_BATCH_LOG_OVERHEAD)
		return 0;
	/* Read in place when contiguous: glibc's AVX-512 memcpy writes 12
	 * bytes with a masked store, which no load is forwarded from. */
	p = km_chain_contig(ch, f->rec_cur, sizeof(lo));
	if (p == NULL) {
		km_chain_copy(ch, f->rec_cur, lo, sizeof(lo));
		p = lo;
	}
	blen = (int32_t)km_load_be32(p + KM_BATCH_OFF_LENGTH);
	if (blen >= KM_BATCH_LENGTH_MIN &&
	    (uint64_t)blen + KM_BATCH_LOG_OVERHEAD > f->rec_left)
		return 0;
	/* A direct-writing log checks the CRC on its copy, while the bytes
	 * are in cache: one read of them from memory instead of two. */
	if (km_log_verifies_crc(f->log))
		return km_batch_frame(b, ch, f->rec_cur, max);
	return km_batch_parse(b, ch, f->rec_cur, max);
}

/* A batch not where the offsets say it should be: its baseOffset (outside
 * the CRC) may be damaged. Nothing of it or after it in the span is
 * appended; the offset is refetched after a backoff that doubles each
 * time, and the same offset wrong again and again fails the partition
 * (a stored damage never heals, one on the way does). */
static void bad_offset(struct km_fetcher *f, int64_t base, int64_t last,
		       const char *why)
{
	int64_t want = f->next_offset;
	char text[KM_FETCHER_REASON_BYTES];
	uint32_t shift, delay;

	f->stats.errors[KM_FETCHER_ERR_BASE_OFFSET]++;
	km_fetcher_touch(f, true);
	f->rec_left = 0;
	if (f->badoff_offset != want) {
		f->badoff_offset = want;
		f->badoff_streak = 0;
	}
	if (++f->badoff_streak >= KM_FETCHER_CORRUPT_MAX) {
		km_fetcher_fail(f, "%s-%d: expected a batch at offset %lld, the "
				"source sent %lld..%lld (%s) %u times in a row: "
				"a damaged baseOffset; refusing to append (%s)",
				f->cfg.topic, (int)f->cfg.partition,
				(long long)want, (long long)base,
				(long long)last, why, f->badoff_streak,
				km_strerror(KM_EBASEOFFSET));
		return;
	}
	/* Written whole into the next Fetch even in a KIP-227 session: if the
	 * broker's session holds another fetch offset than ours, only a Fetch
	 * naming ours puts it right (a Fetch built but not sent did that until
	 * km_fsess_inc_unsent; this stays for any other way in). */
	f->fs_offset = -1;
	shift = f->badoff_streak - 1;
	delay = f->cfg.backoff_ms << shift;
	if (delay > f->cfg.backoff_max_ms || delay >> shift != f->cfg.backoff_ms)
		delay = f->cfg.backoff_max_ms;
	f->ready_at_ms = km_fetcher_now_ms() + delay;
	snprintf(text, sizeof(text), "expected a batch at offset %lld, the "
		 "source sent %lld..%lld (%s): a damaged baseOffset? nothing "
		 "appended; refetching (%u of %d)", (long long)want,
		 (long long)base, (long long)last, why, f->badoff_streak,
		 KM_FETCHER_CORRUPT_MAX);
	km_fetcher_set_note(f, KM_FNOTE_BASE_OFFSET, text);
	KM_WARN("fetcher", "%s-%d: %s in %u ms", f->cfg.topic,
		(int)f->cfg.partition, text, delay);
}

/* base != next_offset: a gap R6 keeps (compaction, or the fetch offset in
 * one), else why not. Kafka serves whole batches from the one holding the
 * fetch offset and, read_uncommitted, none at or past the high watermark
 * of the same answer; source batches never overlap. */
static const char *misplaced(const struct km_fetcher *f, int64_t base,
			     int64_t last)
{
	if (base > f->next_offset)
		return f->resp_hw >= 0 && last >= f->resp_hw
			       ? "past the source's high watermark" : NULL;
	if (last < f->next_offset)
		return "wholly below it";
	return f->resp_batches == 1 ? "overlapping the log end"
				    : "going backwards in the response";
}

/* The first batch holds offsets below the fetch offset while the log is
 * empty: the source's log start is inside that batch (DeleteRecords, e.g.
 * Kafka Streams purging a repartition topic), and the fetch began there -
 * mirror.offset.reset=earliest restarted the log there, or a log that
 * never had a record started where the source does. As Kafka's followers
 * do (Partition.appendRecordsToFollowerOrFutureReplica on
 * UnexpectedAppendOffsetException), the empty log restarts at the batch's
 * base offset and takes it whole. @return 1 if it did, 0 if this is not
 * that case, -1 if the restart failed (FAILED). */
static int restart_inside(struct km_fetcher *f, int64_t base, int64_t last)
{
	int64_t end = km_log_end_offset(f->log);
	int rc;

	if (f->resp_batches != 1 || base >= f->next_offset ||
	    last < f->next_offset || f->next_offset < end ||
	    end != km_log_start_offset(f->log))
		return 0;
	rc = km_log_reset_to(f->log, base);
	if (rc < 0) {
		km_fetcher_fail(f, "%s-%d: restarting the empty log at %lld, "
				"the base of the batch holding the source's log "
				"start %lld: %s", f->cfg.topic,
				(int)f->cfg.partition, (long long)base,
				(long long)f->next_offset, km_strerror(rc));
		return -1;
	}
	/* Those offsets were not lost after all. */
	if (base < end && f->stats.offsets_skipped >= (uint64_t)(end - base))
		f->stats.offsets_skipped -= (uint64_t)(end - base);
	KM_INFO("fetcher", "%s-%d: the source's log start %lld is inside the "
		"batch %lld..%lld: the empty log restarts at %lld", f->cfg.topic,
		(int)f->cfg.partition, (long long)f->next_offset,
		(long long)base, (long long)last, (long long)base);
	f->next_offset = base;
	return 1;
}

/* A framed batch's recordsCount (a negative one counts none). */
static uint64_t records_of(const struct km_batch *b)
{
	int32_t n = km_batch_records_count(b);

	return n > 0 ? (uint64_t)n : 0;
}

/* R6 within the span, then R1. @return true to append the batch. */
static bool accept_batch(struct km_fetcher *f, struct km_batch *b)
{
	int64_t base = km_batch_base_offset(b);
	int64_t last = km_batch_last_offset(b);
	const char *why;
	int rc;

	f->resp_batches++;
	/* The one compare the hot path pays: the batch is where expected. */
	if (base != f->next_offset) {
		rc = restart_inside(f, base, last);
		if (rc < 0)
			return false;
		if (rc == 0 && (why = misplaced(f, base, last)) != NULL) {
			bad_offset(f, base, last, why);
			return false;
		}
	}
	f->resp_last = last;
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

/* One parsed step of the span: @return false to stop parsing. */
static bool parse_one(struct km_fetcher *f)
{
	struct km_batch *b = &f->batches[f->n_batches];
	int rc = frame_batch(f, b);

	if (rc == 0 && f->resp_batches == 0) {
		/* KIP-74: the first batch always comes whole. */
		reject_corrupt(f, "the first batch is cut short");
	} else if (rc == 0) {
		f->rec_left = 0; /* a cut last batch: refetched */
	} else if (rc == KM_EBATCHMAX) {
		km_fetcher_fail(f, "the batch at offset %lld of %s-%d is "
				"larger than batch.max.bytes (%u)",
				(long long)f->next_offset, f->cfg.topic,
				(int)f->cfg.partition, f->cfg.batch_bytes_max);
	} else if (rc < 0) {
		reject_corrupt(f, km_strerror(rc));
	} else {
		/* By value: one store the next parse's read is forwarded
		 * from (km_chain_next). */
		f->rec_cur = km_chain_next(&f->sess->frame->chain, f->rec_cur,
					   (uint32_t)rc);
		f->rec_left -= (uint32_t)rc;
		f->stats.fetched_bytes += (uint64_t)rc;
		f->stats.fetched_records += records_of(b);
		if (accept_batch(f, b))
			f->n_batches++;
		return true;
	}
	return false;
}

/* Frame up to KM_FETCHER_BURST batches of the span into f->batches. */
static void parse_batches(struct km_fetcher *f)
{
	f->n_batches = f->n_done = 0;
	while (f->n_batches < KM_FETCHER_BURST && f->rec_left > 0 &&
	       !f->failed && !f->stopped)
		if (!parse_one(f))
			return;
}

/* Hand the parsed batches to the log. @return how many it took, or < 0
 * (the partition FAILED; nothing of this call was written). */
static int submit(struct km_fetcher *f)
{
	struct km_log_append_result res;
	struct km_batch *b = f->batches + f->n_done;
	uint64_t bytes = 0;
	int rc = km_log_append_burst(f->log, b, f->n_batches - f->n_done,
				     KM_ORIGIN_MIRROR, &res);

	if (rc == KM_EBADCRC) {
		/* Checked by the log as it copied (km_batch_frame): nothing of
		 * it was written. It and the batches parsed after it are
		 * refetched, as a parse that found it would have. */
		f->next_offset = km_batch_base_offset(b);
		f->n_batches = f->n_done;
		reject_corrupt(f, km_strerror(rc));
		return rc;
	}
	if (rc < 0) {
		/* A full disk is waited out (fetcher.h), not a failure of
		 * the mirror; either way the reason names the batch refused
		 * and where the log stands. */
		f->no_space = km_log_is_space_error(rc);
		km_fetcher_fail(f, "log append of offsets %lld..%lld of %s-%d "
				"(log end %lld, durable %lld): %s%s",
				(long long)km_batch_base_offset(b),
				(long long)km_batch_last_offset(b), f->cfg.topic,
				(int)f->cfg.partition,
				(long long)km_log_end_offset(f->log),
				(long long)km_log_durable_offset(f->log),
				km_strerror(rc),
				!f->no_space ? "" : rc == -EDQUOT ? " (EDQUOT)"
								  : " (ENOSPC)");
		return rc;
	}
	for (int i = 0; i < rc; i++) {
		bytes += km_batch_size(&b[i]);
		/* Records count as written only in batches the log took,
		 * not in the duplicates it skipped below its end. */
		if (res.first_offset >= 0 &&
		    km_batch_base_offset(&b[i]) >= res.first_offset &&
		    km_batch_base_offset(&b[i]) <= res.last_offset)
			f->stats.records += records_of(&b[i]);
	}
	f->stats.bytes += bytes;
	f->stats.batches += res.appended;
	f->stats.duplicates += res.duplicates;
	if (rc > 0)
		f->wait_offset = km_batch_last_offset(&b[rc - 1]);
	f->n_done += (uint32_t)rc;
	return rc;
}

bool km_fetcher_appends_pending(const struct km_fetcher *f)
{
	return f->in_frame && f->wait_offset >= 0 &&
	       km_log_appended_offset(f->log) <= f->wait_offset &&
	       km_log_error(f->log) == 0;
}

/* No more batches will be parsed from the held frame. */
static bool parsing_over(const struct km_fetcher *f)
{
	return f->rec_left == 0 || f->failed || f->stopped;
}

/* A cap (throttle.h) still owed for what was fetched: the next Fetch
 * waits. Unset caps cost a load each. */
static bool throttled(const struct km_fetcher *f)
{
	uint64_t now;

	if (!km_throttle_on(f->cfg.throttle) &&
	    !km_throttle_on(f->cfg.topic_throttle))
		return false;
	now = km_throttle_now_us();
	return km_throttle_wait_ms(f->cfg.throttle, now) > 0 ||
	       km_throttle_wait_ms(f->cfg.topic_throttle, now) > 0;
}

bool km_fetcher_fetchable(const struct km_fetcher *f, uint64_t now)
{
	if (f->phase != KM_FP_FETCH || f->ready_at_ms > now ||
	    f->ask_slot >= 0 || throttled(f))
		return false;
	/* Its next offset is known once its span is parsed and queued. */
	return !f->in_frame ||
	       (f->rec_left == 0 && f->n_done == f->n_batches);
}

bool km_fetcher_drain(struct km_fetcher *f)
{
	KM_ASSERT(f->in_frame);
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
	/* The log writes from these buffers: keep them until it has. */
	if (km_fetcher_appends_pending(f))
		return false;
	f->in_frame = false;
	f->rec_left = 0;
	f->n_batches = f->n_done = 0;
	f->wait_offset = -1;
	if (f->note_kind == KM_FNOTE_BASE_OFFSET &&
	    f->next_offset > f->badoff_offset) {
		KM_INFO("fetcher", "%s-%d: the batch at offset %lld came as "
			"expected; mirroring on", f->cfg.topic,
			(int)f->cfg.partition, (long long)f->badoff_offset);
		km_fetcher_set_note(f, KM_FNOTE_NONE, "");
		f->badoff_streak = 0;
	}
	return true;
}

/* ---- its partition of the response ---- */

/* Append from the frame: the log writes straight from its buffers. */
static void hold(struct km_fetcher *f, const struct km_fetch_part *p)
{
	f->in_frame = true;
	f->rec_cur = p->records.cur;
	f->rec_left = (uint32_t)p->records.len;
	f->resp_batches = 0;
	f->resp_last = -1;
	f->resp_hw = p->high_watermark;
	f->n_batches = f->n_done = 0;
	f->wait_offset = -1;
}

void km_fetcher_on_fetch(struct km_fetcher *f, const struct km_fetch_part *p,
			 const struct km_kframe_frame *fr)
{
	(void)fr;
	f->stats.fetches++;
	km_fetcher_touch(f, false);
	if (p->high_watermark >= 0)
		f->stats.high_watermark = p->high_watermark;
	if (p->log_start_offset >= 0)
		f->stats.log_start_offset = p->log_start_offset;
	if (p->last_stable_offset >= 0)
		f->stats.last_stable_offset = p->last_stable_offset;
	if (p->error_code) {
		km_fetcher_kafka_error(f, "Fetch", KM_FREQ_FETCH, p->error_code);
		return;
	}
	if (f->inflight_offset != f->next_offset)
		return; /* asked before a reset: ask again */
	f->err_streak = 0;
	f->backoff_ms = f->cfg.backoff_ms;
	/* A good Fetch ends transient trouble, and a retry's probation. */
	f->trouble_ms = 0;
	f->attempt = false;
	if (f->note_kind == KM_FNOTE_UNAVAILABLE)
		km_fetcher_set_note(f, KM_FNOTE_NONE, "");
	if (p->records.len > 0)
		hold(f, p);
}
