/* The cleaner's batch rules (Kafka's Cleaner.cleanInto with
 * MemoryRecords.filterTo): the key map from the dirty section, and one
 * segment in -> one segment out. What stays and why is in log.h
 * (km_log_clean); the byte layout of a rewritten batch is Kafka's
 * MemoryRecordsBuilder's: the original base offset, lastOffsetDelta,
 * producer fields and leader epoch, the base timestamp the delete horizon
 * when one is set (else the first kept record's timestamp), timestamp
 * deltas from it, a new CRC. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/varint.h"
#include "iouring_log/log_clean_pvt.h"

/* Decompressed records of one batch at most (a bomb stops there). */
#define INFLATE_BYTES_MAX (64u << 20)

/* The records of b in contiguous bytes: its own, or decompressed. */
static int batch_records(struct km_cleaner *c, const struct km_batch *b,
			 const uint8_t **recs, uint32_t *len)
{
	uint32_t n = km_batch_size(b) - KM_BATCH_HEADER_BYTES;
	int rc;

	KM_ASSERT(b->base != NULL); /* a scan's chain is one buffer */
	if (km_batch_codec(b) == KM_CODEC_NONE) {
		*recs = b->base + KM_BATCH_HEADER_BYTES;
		*len = n;
		return 0;
	}
	if (c->inflate == NULL &&
	    (rc = km_inflate_create(INFLATE_BYTES_MAX, &c->inflate)) < 0)
		return rc;
	rc = km_inflate_records(c->inflate, km_batch_codec(b),
				b->base + KM_BATCH_HEADER_BYTES, n, recs);
	if (rc < 0)
		return rc;
	*len = (uint32_t)rc;
	return 0;
}

/* Map the keys of one data batch's records at or after from. */
static int map_batch(struct km_cleaner *c, const struct km_batch *b,
		     int64_t from)
{
	const uint8_t *p;
	uint32_t len, at = 0;
	struct km_clean_rec r;
	int rc = batch_records(c, b, &p, &len);

	while (rc == 0 && at < len) {
		int64_t off;

		if ((rc = km_log_clean_rec_parse(p + at, len - at, &r)) < 0)
			return rc;
		at += r.size;
		off = km_batch_base_offset(b) + r.offset_delta;
		rc = 0;
		if (r.key_len >= 0 && off >= from)
			rc = km_log_clean_map_put(&c->map, r.key,
						  (uint32_t)r.key_len, off);
	}
	return rc;
}

int km_log_clean_map_segment(struct km_cleaner *c, struct km_segment *seg,
			     int64_t from)
{
	struct log_scan sc;
	struct km_batch b;
	uint64_t pos;
	bool keep;
	struct km_aborted_txn e;
	int rc = km_log_scan_init(&sc, c->log, seg, 0, seg->size_bytes);

	while (rc == 0 && (rc = km_log_scan_next(&sc, &b, &pos)) > 0) {
		int64_t last = km_batch_last_offset(&b);

		if (km_batch_is_control(&b)) {
			rc = km_log_clean_txn_on_control(&c->txn, &b, &keep, &e);
			rc = rc < 0 ? rc : 0;
		} else if ((rc = km_log_clean_txn_on_batch(&c->txn, &b)) == 0)
			rc = map_batch(c, &b, from);
		else if (rc == 1)
			rc = 0; /* aborted data: not mapped */
		if (rc == 0 && last >= from && last > c->map.latest)
			c->map.latest = last;
	}
	km_log_scan_fini(&sc);
	/* Past a gap at the segment's end too, as Kafka fast-forwards. */
	if (rc == 0 && seg->next_offset - 1 > c->map.latest)
		c->map.latest = seg->next_offset - 1;
	return rc;
}

/* What one pass of a batch decides (Kafka's RecordFilter). */
struct verdict {
	bool control;
	bool drop_records;  /* discardBatchRecords */
	bool retain_empty;  /* the producer's last batch */
	bool empty_txn;	    /* containsMarkerForEmptyTxn */
	int64_t horizon;    /* the batch's delete horizon, or -1 */
};

/* Kept for producer state: the last data batch of a producer the state
 * knows, or its last control batch when it wrote no data. Every id but -1
 * is a producer here (mirrored ids are negative, R1). */
static bool last_of_producer(struct km_cleaner *c, const struct km_batch *b)
{
	struct km_producer_info p;
	int64_t pid = km_batch_producer_id(b);

	if (pid == -1 || km_pstate_get(c->log->ps, pid, &p) < 0)
		return false;
	if (p.batch_count > 0)
		return km_batch_last_offset(b) == p.last_offset;
	return km_batch_is_control(b) &&
	       km_batch_producer_epoch(b) == p.epoch;
}

static bool keep_record(const struct km_cleaner *c, const struct km_batch *b,
			const struct verdict *v, const struct km_clean_rec *r)
{
	int64_t off = km_batch_base_offset(b) + r->offset_delta;

	if (v->drop_records)
		return false;
	if (v->control || off > c->map.latest || r->key_len < 0)
		return true;
	if (off < km_log_clean_map_get(&c->map, r->key, (uint32_t)r->key_len))
		return false;
	return r->value_len >= 0 || v->horizon < 0 || c->now_ms < v->horizon;
}

/* Count what stays: *kept records, *all of them, *tombstones among them. */
static int filter(struct km_cleaner *c, const struct km_batch *b,
		  const struct verdict *v, const uint8_t *p, uint32_t len,
		  uint32_t *kept, bool *tombstones)
{
	struct km_clean_rec r;
	uint32_t at = 0;
	int rc;

	*kept = 0;
	*tombstones = false;
	while (at < len) {
		if ((rc = km_log_clean_rec_parse(p + at, len - at, &r)) < 0)
			return rc;
		at += r.size;
		c->st->records_read++;
		if (keep_record(c, b, v, &r)) {
			(*kept)++;
			*tombstones |= r.value_len < 0;
		}
	}
	return 0;
}

static void finish_header(uint8_t *o, uint32_t total, int16_t attrs,
			  int64_t base_ts, int64_t max_ts, int32_t count)
{
	km_store_be32(o + KM_BATCH_OFF_LENGTH, total - KM_BATCH_LOG_OVERHEAD);
	km_store_be16(o + KM_BATCH_OFF_ATTRIBUTES, (uint16_t)attrs);
	km_store_be64(o + KM_BATCH_OFF_BASE_TIMESTAMP, (uint64_t)base_ts);
	km_store_be64(o + KM_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)max_ts);
	km_store_be32(o + KM_BATCH_OFF_RECORDS_COUNT, (uint32_t)count);
	km_store_be32(o + KM_BATCH_OFF_CRC,
		      km_crc32c_update(0, o + KM_BATCH_OFF_ATTRIBUTES,
				       total - KM_BATCH_OFF_ATTRIBUTES));
}

/* DefaultRecordBatch.writeEmptyHeader. @return its size. */
static uint32_t empty_batch(const struct km_batch *b, uint8_t *o)
{
	int16_t keep = KM_BATCH_ATTR_LOG_APPEND_TIME |
		       KM_BATCH_ATTR_TRANSACTIONAL | KM_BATCH_ATTR_CONTROL;

	memcpy(o, b->hdr, KM_BATCH_HEADER_BYTES);
	finish_header(o, KM_BATCH_HEADER_BYTES, km_batch_attributes(b) & keep,
		      -1, km_batch_max_timestamp(b), 0);
	return KM_BATCH_HEADER_BYTES;
}

static int out_room(struct km_cleaner *c, size_t need)
{
	uint8_t *n;

	if (need <= c->out_cap)
		return 0;
	if ((n = realloc(c->out, need)) == NULL)
		return -ENOMEM;
	c->out = n;
	c->out_cap = need;
	return 0;
}

/* The kept records, re-encoded from base_ts; *max_ts their largest. */
static uint32_t put_records(struct km_cleaner *c, const struct km_batch *b,
			    const struct verdict *v, const uint8_t *p,
			    uint32_t len, int64_t *base_ts, int64_t *max_ts)
{
	uint8_t *o = c->out + KM_BATCH_HEADER_BYTES;
	struct km_clean_rec r;
	uint32_t at = 0, w = 0;

	while (at < len && km_log_clean_rec_parse(p + at, len - at, &r) > 0) {
		int64_t ts = km_batch_base_timestamp(b) + r.ts_delta;
		uint8_t tsv[10];
		int tn;

		at += r.size;
		if (!keep_record(c, b, v, &r))
			continue;
		if (*base_ts == INT64_MIN)
			*base_ts = ts;
		*max_ts = ts > *max_ts ? ts : *max_ts;
		tn = km_varint_encode_s64(tsv, ts - *base_ts);
		w += (uint32_t)km_varint_encode_s32(
			o + w, (int32_t)(1 + (uint32_t)tn + r.rest_len));
		o[w++] = (uint8_t)r.attributes;
		memcpy(o + w, tsv, (size_t)tn);
		w += (uint32_t)tn;
		memcpy(o + w, r.rest, r.rest_len);
		w += r.rest_len;
	}
	return w;
}

/* The batch rebuilt with its kept records. @return its size or a code. */
static int rebuild(struct km_cleaner *c, const struct km_batch *b,
		   const struct verdict *v, const uint8_t *p, uint32_t len,
		   uint32_t kept, int64_t horizon)
{
	int64_t base_ts = horizon >= 0 ? horizon : INT64_MIN, max_ts = -1;
	int16_t attrs = km_batch_attributes(b) &
			~(KM_BATCH_ATTR_CODEC_MASK | KM_BATCH_ATTR_DELETE_HORIZON);
	uint32_t w;
	int rc;

	/* A record grows by at most 9 (timestamp) + 4 (length) bytes. */
	if ((rc = out_room(c, KM_BATCH_HEADER_BYTES + (size_t)len +
				      13u * (size_t)kept)) < 0)
		return rc;
	memcpy(c->out, b->hdr, KM_BATCH_HEADER_BYTES);
	w = put_records(c, b, v, p, len, &base_ts, &max_ts);
	if (km_batch_is_log_append_time(b))
		max_ts = km_batch_max_timestamp(b);
	if (horizon >= 0)
		attrs |= KM_BATCH_ATTR_DELETE_HORIZON;
	finish_header(c->out, KM_BATCH_HEADER_BYTES + w, attrs, base_ts, max_ts,
		      (int32_t)kept);
	return (int)(KM_BATCH_HEADER_BYTES + w);
}

static int put_batch(struct km_cleaner *c, struct km_segment *out,
		     const uint8_t *p, uint32_t len)
{
	int64_t base = (int64_t)km_load_be64(p + KM_BATCH_OFF_BASE_OFFSET);
	int64_t last = base + (int32_t)km_load_be32(
				      p + KM_BATCH_OFF_LAST_OFFSET_DELTA);
	int64_t max_ts = (int64_t)km_load_be64(p + KM_BATCH_OFF_MAX_TIMESTAMP);
	uint32_t done = 0;
	int rc;

	while (done < len) {
		ssize_t n = pwrite(out->log_fd, p + done, len - done,
				   (off_t)(out->size_bytes + done));

		if (n < 0 && errno != EINTR)
			return -errno;
		done += n > 0 ? (uint32_t)n : 0;
	}
	rc = km_segment_index_batch(out, base, last, max_ts, out->size_bytes,
				    len, c->log->cfg.index_interval_bytes);
	out->size_bytes += len;
	km_segment_set_readable(out, out->size_bytes);
	c->st->bytes_written += len;
	if (rc == 0 && (km_load_be16(p + KM_BATCH_OFF_ATTRIBUTES) &
			KM_BATCH_ATTR_DELETE_HORIZON)) {
		int64_t h = (int64_t)km_load_be64(p + KM_BATCH_OFF_BASE_TIMESTAMP);

		if (h >= c->now_ms && h < c->horizon_min)
			c->horizon_min = h;
	}
	return rc;
}

/* Kafka's checkBatchRetention: what the transaction tracking and the
 * producer state say of the whole batch. */
static int judge(struct km_cleaner *c, const struct km_batch *b,
		 struct km_segment *out, struct verdict *v)
{
	struct km_aborted_txn e;
	bool keep_entry = false;
	int discard, rc;

	memset(v, 0, sizeof(*v));
	v->control = km_batch_is_control(b);
	v->horizon = km_batch_has_delete_horizon(b) ? km_batch_base_timestamp(b)
						    : -1;
	discard = v->control
		? km_log_clean_txn_on_control(&c->txn, b, &keep_entry, &e)
		: km_log_clean_txn_on_batch(&c->txn, b);
	if (discard < 0)
		return discard;
	if (keep_entry && (rc = km_segment_txn_append(out, &e)) < 0)
		return rc;
	v->drop_records = v->control ? discard && v->horizon >= 0 &&
					       v->horizon <= c->now_ms
				     : discard;
	v->retain_empty = last_of_producer(c, b);
	v->empty_txn = discard && v->control;
	return 0;
}

/* A horizon is set the first time a batch with tombstones (or a marker
 * whose transaction has no data left) is cleaned, then kept. */
static int64_t horizon_to_set(const struct km_cleaner *c,
			      const struct verdict *v, bool tombstones)
{
	if (v->horizon < 0 && (tombstones || v->empty_txn))
		return c->now_ms + c->log->cfg.delete_retention_ms;
	return v->horizon;
}

static int clean_batch(struct km_cleaner *c, const struct km_batch *b,
		       struct km_segment *out)
{
	struct verdict v;
	const uint8_t *p;
	uint32_t len, kept;
	bool tombstones;
	int64_t horizon;
	int rc;

	if ((rc = judge(c, b, out, &v)) < 0 ||
	    (rc = batch_records(c, b, &p, &len)) < 0 ||
	    (rc = filter(c, b, &v, p, len, &kept, &tombstones)) < 0)
		return rc;
	c->st->records_kept += kept;
	c->changed |= kept != (uint32_t)km_batch_records_count(b) ||
		      horizon_to_set(c, &v, tombstones) != v.horizon;
	if (kept == 0 && !v.retain_empty) {
		c->changed = true;
		c->st->batches_removed++;
		return 0;
	}
	if (kept == 0) {
		if ((rc = out_room(c, KM_BATCH_HEADER_BYTES)) < 0)
			return rc;
		c->st->batches_emptied++;
		return put_batch(c, out, c->out, empty_batch(b, c->out));
	}
	horizon = horizon_to_set(c, &v, tombstones);
	if (horizon == v.horizon &&
	    kept == (uint32_t)km_batch_records_count(b))
		return put_batch(c, out, b->base, km_batch_size(b));
	rc = rebuild(c, b, &v, p, len, kept, horizon);
	return rc < 0 ? rc : put_batch(c, out, c->out, (uint32_t)rc);
}

int km_log_clean_segment(struct km_cleaner *c, struct km_segment *in,
			 struct km_segment *out)
{
	struct log_scan sc;
	struct km_batch b;
	uint64_t pos;
	int rc = km_log_scan_init(&sc, c->log, in, 0, in->size_bytes);

	while (rc == 0 && (rc = km_log_scan_next(&sc, &b, &pos)) > 0) {
		c->st->bytes_read += km_batch_size(&b);
		rc = clean_batch(c, &b, out);
	}
	km_log_scan_fini(&sc);
	return rc;
}
