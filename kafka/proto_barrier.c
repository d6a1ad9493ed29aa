/* KmirrorBarrier (key 10000), v0: kmirror's own API, for failback (R5).
 * A kmirror host asks its upstream kmirror host for the latest
 * MIRROR_PID_RESET barrier the upstream's partition holds whose
 * SourceClusterId is the asker's cluster id: the offset up to which the two
 * logs are the same. Non-flexible, like the Kafka APIs it sits beside, so
 * that any Kafka codec can read it (docs/design.md, "KmirrorBarrier").
 *
 * Request: Topic STRING, Partition int32, SourceClusterId STRING.
 * Response: ErrorCode int16, BarrierOffset int64, LogStartOffset int64,
 * HighWatermark int64, ClusterId STRING.
 */
#include "kafka/proto.h"

#include "common/errors.h"

int km_barrier_req_encode(struct km_wire_wr *w, int16_t version,
			  const struct km_barrier_req *m)
{
	int rc = km_proto_check(KM_API_KMIRROR_BARRIER, version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	km_wire_wr_name(w, false, false, &m->topic);
	km_wire_wr_i32(w, m->partition);
	km_wire_wr_name(w, false, false, &m->source_cluster_id);
	return w->err;
}

int km_barrier_req_decode(struct km_wire_rd *r, int16_t version,
			  struct km_barrier_req *m)
{
	int rc = km_proto_check(KM_API_KMIRROR_BARRIER, version);

	m->partition = -1;
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	km_wire_rd_name(r, false, false, &m->topic);
	km_wire_rd_i32(r, &m->partition);
	km_wire_rd_name(r, false, false, &m->source_cluster_id);
	return km_wire_rd_end(r);
}

int km_barrier_resp_encode(struct km_wire_wr *w, int16_t version,
			   const struct km_barrier_resp *m)
{
	int rc = km_proto_check(KM_API_KMIRROR_BARRIER, version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	km_wire_wr_i16(w, m->error_code);
	km_wire_wr_i64(w, m->barrier_offset);
	km_wire_wr_i64(w, m->log_start_offset);
	km_wire_wr_i64(w, m->high_watermark);
	km_wire_wr_name(w, false, false, &m->cluster_id);
	return w->err;
}

int km_barrier_resp_decode(struct km_wire_rd *r, int16_t version,
			   struct km_barrier_resp *m)
{
	int rc = km_proto_check(KM_API_KMIRROR_BARRIER, version);

	m->error_code = 0;
	m->barrier_offset = -1;
	m->log_start_offset = -1;
	m->high_watermark = -1;
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	km_wire_rd_i16(r, &m->error_code);
	km_wire_rd_i64(r, &m->barrier_offset);
	km_wire_rd_i64(r, &m->log_start_offset);
	km_wire_rd_i64(r, &m->high_watermark);
	km_wire_rd_name(r, false, false, &m->cluster_id);
	return km_wire_rd_end(r);
}
