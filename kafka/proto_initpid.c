/* InitProducerId (key 22), v0-4 (InitProducerId{Request,Response}.json);
 * flexible from v2 (compact strings, tag sections, header v2 / v1).
 *
 * Request: TransactionalId NULLABLE_STRING, TransactionTimeoutMs int32,
 * ProducerId int64 v3+, ProducerEpoch int16 v3+.
 * Response: ThrottleTimeMs int32, ErrorCode int16, ProducerId int64,
 * ProducerEpoch int16.
 */
#include "kafka/proto.h"

#include "common/errors.h"

static bool flexible(int16_t version)
{
	return km_proto_is_flexible(KM_API_INIT_PRODUCER_ID, version);
}

int km_initpid_req_encode(struct km_wire_wr *w, int16_t version,
			  const struct km_initpid_req *m)
{
	bool flex = flexible(version);
	int rc = km_proto_check(KM_API_INIT_PRODUCER_ID, version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	km_wire_wr_name(w, flex, true, &m->transactional_id);
	km_wire_wr_i32(w, m->transaction_timeout_ms);
	if (version >= 3) {
		km_wire_wr_i64(w, m->producer_id);
		km_wire_wr_i16(w, m->producer_epoch);
	}
	if (flex)
		km_wire_wr_tags(w);
	return w->err;
}

int km_initpid_req_decode(struct km_wire_rd *r, int16_t version,
			  struct km_initpid_req *m)
{
	bool flex = flexible(version);
	int rc = km_proto_check(KM_API_INIT_PRODUCER_ID, version);

	km_wire_name_set_null(&m->transactional_id);
	m->transaction_timeout_ms = 0;
	m->producer_id = -1;
	m->producer_epoch = -1;
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	km_wire_rd_name(r, flex, true, &m->transactional_id);
	km_wire_rd_i32(r, &m->transaction_timeout_ms);
	if (version >= 3) {
		km_wire_rd_i64(r, &m->producer_id);
		km_wire_rd_i16(r, &m->producer_epoch);
	}
	if (flex)
		km_wire_rd_tags(r);
	return km_wire_rd_end(r);
}

int km_initpid_resp_encode(struct km_wire_wr *w, int16_t version,
			   const struct km_initpid_resp *m)
{
	int rc = km_proto_check(KM_API_INIT_PRODUCER_ID, version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	km_wire_wr_i32(w, m->throttle_time_ms);
	km_wire_wr_i16(w, m->error_code);
	km_wire_wr_i64(w, m->producer_id);
	km_wire_wr_i16(w, m->producer_epoch);
	if (flexible(version))
		km_wire_wr_tags(w);
	return w->err;
}

int km_initpid_resp_decode(struct km_wire_rd *r, int16_t version,
			   struct km_initpid_resp *m)
{
	int rc = km_proto_check(KM_API_INIT_PRODUCER_ID, version);

	m->throttle_time_ms = 0;
	m->error_code = 0;
	m->producer_id = -1;
	m->producer_epoch = -1;
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	km_wire_rd_i32(r, &m->throttle_time_ms);
	km_wire_rd_i16(r, &m->error_code);
	km_wire_rd_i64(r, &m->producer_id);
	km_wire_rd_i16(r, &m->producer_epoch);
	if (flexible(version))
		km_wire_rd_tags(r);
	return km_wire_rd_end(r);
}
