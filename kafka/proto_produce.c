/* Produce (key 0), v3-7 (Produce{Request,Response}.json); non-flexible.
 *
 * Request: TransactionalId NULLABLE_STRING (v3+), Acks int16, TimeoutMs
 * int32, TopicData [Name STRING, PartitionData [Index int32, Records
 * (nullable int32-length bytes)]].
 * Response: Responses [Name STRING, PartitionResponses [Index int32,
 * ErrorCode int16, BaseOffset int64, LogAppendTimeMs int64 (v2+),
 * LogStartOffset int64 v5+]], ThrottleTimeMs int32 (v1+, last).
 */
#include "kafka/proto.h"

#include "common/errors.h"

int km_produce_req_begin(struct km_produce_req_iter *it, struct km_wire_rd *r,
			 int16_t version)
{
	int rc = km_proto_check(KM_API_PRODUCE, version);

	km_wire_name_set_null(&it->transactional_id);
	it->acks = 0;
	it->timeout_ms = 0;
	it->version = version;
	it->cur.rd = r;
	it->cur.topics_left = it->cur.parts_left = 0;
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	km_wire_rd_name(r, false, true, &it->transactional_id);
	km_wire_rd_i16(r, &it->acks);
	km_wire_rd_i32(r, &it->timeout_ms);
	return km_proto_cursor_begin(&it->cur, r);
}

int km_produce_req_next_partition(struct km_produce_req_iter *it,
				  struct km_produce_part *out)
{
	struct km_wire_rd *r = it->cur.rd;
	int rc = km_proto_cursor_next(&it->cur);

	if (rc <= 0)
		return rc < 0 ? rc : km_wire_rd_end(r);
	km_wire_rd_i32(r, &out->partition);
	/* "Records ... bytes, nullableVersions 0+". */
	if (km_wire_rd_bytes(r, false, true, &out->records) < 0)
		return r->err;
	return 1;
}

int km_produce_req_enc_begin(struct km_proto_enc *e, struct km_wire_wr *w,
			     int16_t version,
			     const struct km_wire_name *transactional_id,
			     int16_t acks, int32_t timeout_ms)
{
	int rc = km_proto_check(KM_API_PRODUCE, version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	km_wire_wr_name(w, false, true, transactional_id);
	km_wire_wr_i16(w, acks);
	km_wire_wr_i32(w, timeout_ms);
	return km_proto_enc_topics(e, w, version);
}

int km_produce_req_enc_topic(struct km_proto_enc *e,
			     const struct km_wire_name *topic)
{
	return km_proto_enc_topic(e, topic);
}

int km_produce_req_enc_partition(struct km_proto_enc *e, int32_t partition,
				 const void *records, int32_t records_len)
{
	struct km_wire_wr *w = e->w;

	km_proto_enc_part(e);
	km_wire_wr_i32(w, partition);
	if (records == NULL && records_len > 0)
		return km_wire_wr_external(w, false, records_len) < 0 ? w->err
								       : 0;
	return km_wire_wr_bytes(w, false, true, records, records_len);
}

int km_produce_req_enc_end(struct km_proto_enc *e)
{
	return km_proto_enc_end(e);
}

/* ---- response ---- */

static int rd_resp_part(struct km_wire_rd *r, int16_t version, void *parts,
			uint32_t i)
{
	struct km_produce_resp_part *p =
		&((struct km_produce_resp_part *)parts)[i];

	p->log_start_offset = -1;
	km_wire_rd_i32(r, &p->partition);
	km_wire_rd_i16(r, &p->error_code);
	km_wire_rd_i64(r, &p->base_offset);
	km_wire_rd_i64(r, &p->log_append_time_ms);
	if (version >= 5)
		km_wire_rd_i64(r, &p->log_start_offset);
	return r->err;
}

static int wr_resp_part(struct km_wire_wr *w, int16_t version,
			const void *parts, uint32_t i)
{
	const struct km_produce_resp_part *p =
		&((const struct km_produce_resp_part *)parts)[i];

	km_wire_wr_i32(w, p->partition);
	km_wire_wr_i16(w, p->error_code);
	km_wire_wr_i64(w, p->base_offset);
	km_wire_wr_i64(w, p->log_append_time_ms);
	if (version >= 5)
		km_wire_wr_i64(w, p->log_start_offset);
	return w->err;
}

int km_produce_resp_encode(struct km_wire_wr *w, int16_t version,
			   const struct km_produce_resp *m)
{
	int rc = km_proto_check(KM_API_PRODUCE, version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	km_proto_wr_topics(w, version, false, m->topics, m->n_topics,
			   m->parts, m->n_parts, wr_resp_part);
	km_wire_wr_i32(w, m->throttle_time_ms);
	return w->err;
}

int km_produce_resp_decode(struct km_wire_rd *r, int16_t version,
			   struct km_produce_resp *m)
{
	int rc = km_proto_check(KM_API_PRODUCE, version);
	struct km_proto_topics_out out = {
		m->topics, m->topics_max, &m->n_topics,
		m->parts, m->parts_max, &m->n_parts,
	};

	m->n_topics = m->n_parts = 0;
	m->throttle_time_ms = 0;
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	if (km_proto_rd_topics(r, version, false, &out, rd_resp_part) < 0)
		return r->err;
	km_wire_rd_i32(r, &m->throttle_time_ms);
	return km_wire_rd_end(r);
}
