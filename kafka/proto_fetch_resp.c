/* Fetch response (key 1), v4-11 (FetchResponse.json); v12-13 decoded for
 * a client of a source (flexible from v12: compact arrays, strings and
 * records, tagged fields ending each struct, which hold DivergingEpoch,
 * CurrentLeader and SnapshotId, skipped; TopicId uuid instead of Topic
 * from v13). The encoder, for the front end, stays at v4-11.
 *
 * ThrottleTimeMs int32, ErrorCode int16 v7+, SessionId int32 v7+,
 * Responses [Topic STRING, Partitions [PartitionIndex int32, ErrorCode
 * int16, HighWatermark int64, LastStableOffset int64 (v4+), LogStartOffset
 * int64 v5+, AbortedTransactions [ProducerId int64, FirstOffset int64]
 * (v4+, nullable), PreferredReadReplica int32 v11+, Records (nullable
 * int32-length bytes)]].
 *
 * Decoded with a cursor: the records stay in the chain for km_batch_parse.
 * Encoded as a stream whose records may stay outside the writer's buffer.
 */
#include "kafka/proto.h"

#include "common/errors.h"
#include "common/km_assert.h"

int km_fetch_resp_begin(struct km_fetch_resp_iter *it, struct km_wire_rd *r,
			int16_t version, struct km_fetch_aborted *aborted,
			uint32_t aborted_max)
{
	int rc = km_proto_client_check(KM_API_FETCH, version);

	it->throttle_time_ms = 0;
	it->error_code = 0;
	it->session_id = 0;
	it->version = version;
	it->aborted = aborted;
	it->aborted_max = aborted_max;
	it->cur.rd = r;
	it->cur.topics_left = it->cur.parts_left = 0;
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	km_wire_rd_i32(r, &it->throttle_time_ms);
	if (version >= 7) {
		km_wire_rd_i16(r, &it->error_code);
		km_wire_rd_i32(r, &it->session_id);
	}
	if (version >= 12)
		return km_proto_cursor_begin_flex(&it->cur, r, version >= 13);
	return km_proto_cursor_begin(&it->cur, r);
}

static int rd_aborted(struct km_fetch_resp_iter *it, struct km_fetch_part *p)
{
	struct km_wire_rd *r = it->cur.rd;
	bool flex = it->version >= 12;

	/* "AbortedTransactions ... nullableVersions 4+". */
	if (km_wire_rd_array(r, flex, true, &p->n_aborted) < 0)
		return r->err;
	if (p->n_aborted > 0 && (uint32_t)p->n_aborted > it->aborted_max)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t i = 0; i < p->n_aborted; i++) {
		km_wire_rd_i64(r, &it->aborted[i].producer_id);
		km_wire_rd_i64(r, &it->aborted[i].first_offset);
		if (flex)
			km_wire_rd_tags(r);
	}
	p->aborted = p->n_aborted > 0 ? it->aborted : NULL;
	return r->err;
}

int km_fetch_resp_next_partition(struct km_fetch_resp_iter *it,
				 struct km_fetch_part *out)
{
	struct km_wire_rd *r = it->cur.rd;
	int rc = km_proto_cursor_next(&it->cur);
	bool flex = it->version >= 12;

	if (rc < 0)
		return rc;
	if (rc == 0 && flex && km_wire_rd_tags(r) < 0)
		return r->err;
	if (rc == 0)
		return km_wire_rd_end(r);
	out->log_start_offset = -1;
	out->preferred_read_replica = -1;
	out->aborted = NULL;
	km_wire_rd_i32(r, &out->partition);
	km_wire_rd_i16(r, &out->error_code);
	km_wire_rd_i64(r, &out->high_watermark);
	km_wire_rd_i64(r, &out->last_stable_offset);
	if (it->version >= 5)
		km_wire_rd_i64(r, &out->log_start_offset);
	if (rd_aborted(it, out) < 0)
		return r->err;
	if (it->version >= 11)
		km_wire_rd_i32(r, &out->preferred_read_replica);
	/* "RecordSet ... records, nullableVersions 0+". */
	if (km_wire_rd_bytes(r, flex, true, &out->records) < 0)
		return r->err;
	if (flex && km_wire_rd_tags(r) < 0)
		return r->err;
	return 1;
}

/* ---- encoder ---- */

int km_fetch_resp_enc_begin(struct km_proto_enc *e, struct km_wire_wr *w,
			    int16_t version, int32_t throttle_time_ms,
			    int16_t error_code, int32_t session_id)
{
	int rc = km_proto_check(KM_API_FETCH, version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	km_wire_wr_i32(w, throttle_time_ms);
	if (version >= 7) {
		km_wire_wr_i16(w, error_code);
		km_wire_wr_i32(w, session_id);
	}
	return km_proto_enc_topics(e, w, version);
}

int km_fetch_resp_enc_topic(struct km_proto_enc *e,
			    const struct km_wire_name *topic)
{
	return km_proto_enc_topic(e, topic);
}

/* Records: copied, external (records NULL, a writer gap), or null. */
static int wr_records(struct km_wire_wr *w, const void *records,
		      int32_t records_len)
{
	if (records == NULL && records_len > 0)
		return km_wire_wr_external(w, false, records_len) < 0 ? w->err
								       : 0;
	return km_wire_wr_bytes(w, false, true, records, records_len);
}

int km_fetch_resp_enc_partition(struct km_proto_enc *e,
				const struct km_fetch_part *p,
				const void *records, int32_t records_len)
{
	struct km_wire_wr *w = e->w;

	km_proto_enc_part(e);
	km_wire_wr_i32(w, p->partition);
	km_wire_wr_i16(w, p->error_code);
	km_wire_wr_i64(w, p->high_watermark);
	km_wire_wr_i64(w, p->last_stable_offset);
	if (e->version >= 5)
		km_wire_wr_i64(w, p->log_start_offset);
	km_wire_wr_array(w, false, true, p->n_aborted);
	for (int32_t i = 0; i < p->n_aborted && w->err == 0; i++) {
		km_wire_wr_i64(w, p->aborted[i].producer_id);
		km_wire_wr_i64(w, p->aborted[i].first_offset);
	}
	if (e->version >= 11)
		km_wire_wr_i32(w, p->preferred_read_replica);
	return wr_records(w, records, records_len);
}

int km_fetch_resp_enc_end(struct km_proto_enc *e)
{
	return km_proto_enc_end(e);
}
