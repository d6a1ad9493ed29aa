/* ListOffsets (key 2), v0-9 (ListOffsets{Request,Response}.json), flexible
 * from v6 (compact strings and arrays, a tag section after every struct).
 * v7-9 add no field: they only allow the Timestamp sentinels -3 (max
 * timestamp, KIP-734), -4 (earliest local, KIP-405) and -5 (latest tiered,
 * KIP-1005), which a client may send only at those versions.
 *
 * Request: ReplicaId int32, IsolationLevel int8 v2+, Topics [Name STRING,
 * Partitions [PartitionIndex int32, CurrentLeaderEpoch int32 v4+, Timestamp
 * int64, MaxNumOffsets int32 v0]].
 * Response: ThrottleTimeMs int32 v2+, Topics [Name STRING, Partitions
 * [PartitionIndex int32, ErrorCode int16, OldStyleOffsets [int64] v0,
 * Timestamp int64 v1+, Offset int64 v1+, LeaderEpoch int32 v4+]].
 */
#include "kafka/proto.h"

#include "common/errors.h"

static bool flexible(int16_t version)
{
	return km_proto_is_flexible(KM_API_LIST_OFFSETS, version);
}

static int rd_req_part(struct km_wire_rd *r, int16_t version, void *parts,
		       uint32_t i)
{
	struct km_listoffsets_req_part *p =
		&((struct km_listoffsets_req_part *)parts)[i];

	p->current_leader_epoch = -1;
	p->max_num_offsets = 1;
	km_wire_rd_i32(r, &p->partition);
	if (version >= 4)
		km_wire_rd_i32(r, &p->current_leader_epoch);
	km_wire_rd_i64(r, &p->timestamp);
	if (version == 0)
		km_wire_rd_i32(r, &p->max_num_offsets);
	if (flexible(version))
		km_wire_rd_tags(r);
	return r->err;
}

static int wr_req_part(struct km_wire_wr *w, int16_t version,
		       const void *parts, uint32_t i)
{
	const struct km_listoffsets_req_part *p =
		&((const struct km_listoffsets_req_part *)parts)[i];

	km_wire_wr_i32(w, p->partition);
	if (version >= 4)
		km_wire_wr_i32(w, p->current_leader_epoch);
	km_wire_wr_i64(w, p->timestamp);
	if (version == 0)
		km_wire_wr_i32(w, p->max_num_offsets);
	if (flexible(version))
		km_wire_wr_tags(w);
	return w->err;
}

int km_listoffsets_req_encode(struct km_wire_wr *w, int16_t version,
			      const struct km_listoffsets_req *m)
{
	int rc = km_proto_check(KM_API_LIST_OFFSETS, version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	km_wire_wr_i32(w, m->replica_id);
	if (version >= 2)
		km_wire_wr_i8(w, m->isolation_level);
	if (km_proto_wr_topics(w, version, flexible(version), m->topics,
			       m->n_topics, m->parts, m->n_parts,
			       wr_req_part) < 0)
		return w->err;
	if (flexible(version))
		km_wire_wr_tags(w);
	return w->err;
}

int km_listoffsets_req_decode(struct km_wire_rd *r, int16_t version,
			      struct km_listoffsets_req *m)
{
	int rc = km_proto_check(KM_API_LIST_OFFSETS, version);
	struct km_proto_topics_out out = {
		m->topics, m->topics_max, &m->n_topics,
		m->parts, m->parts_max, &m->n_parts,
	};

	m->isolation_level = 0;
	m->n_topics = m->n_parts = 0;
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	km_wire_rd_i32(r, &m->replica_id);
	if (version >= 2)
		km_wire_rd_i8(r, &m->isolation_level);
	if (km_proto_rd_topics(r, version, flexible(version), &out,
			       rd_req_part) < 0)
		return r->err;
	if (flexible(version))
		km_wire_rd_tags(r);
	return km_wire_rd_end(r);
}

/* ---- response ---- */

/* v0 OldStyleOffsets: keep the first (the newest, as the old API sorted
 * them), count them all. */
static int rd_old_offsets(struct km_wire_rd *r,
			  struct km_listoffsets_resp_part *p)
{
	int64_t off;

	if (km_wire_rd_array(r, false, false, &p->old_offsets_count) < 0)
		return r->err;
	for (int32_t j = 0; j < p->old_offsets_count; j++) {
		km_wire_rd_i64(r, &off);
		if (j == 0)
			p->offset = off;
	}
	return r->err;
}

static int rd_resp_part(struct km_wire_rd *r, int16_t version, void *parts,
			uint32_t i)
{
	struct km_listoffsets_resp_part *p =
		&((struct km_listoffsets_resp_part *)parts)[i];

	p->old_offsets_count = 0;
	p->timestamp = -1;
	p->offset = -1;
	p->leader_epoch = -1;
	km_wire_rd_i32(r, &p->partition);
	km_wire_rd_i16(r, &p->error_code);
	if (version == 0)
		return rd_old_offsets(r, p);
	km_wire_rd_i64(r, &p->timestamp);
	km_wire_rd_i64(r, &p->offset);
	if (version >= 4)
		km_wire_rd_i32(r, &p->leader_epoch);
	if (flexible(version))
		km_wire_rd_tags(r);
	return r->err;
}

static int wr_resp_part(struct km_wire_wr *w, int16_t version,
			const void *parts, uint32_t i)
{
	const struct km_listoffsets_resp_part *p =
		&((const struct km_listoffsets_resp_part *)parts)[i];

	km_wire_wr_i32(w, p->partition);
	km_wire_wr_i16(w, p->error_code);
	if (version == 0) {
		if (p->old_offsets_count < 0 || p->old_offsets_count > 1)
			return km_wire_wr_fail(w, KM_EWIREVALUE);
		km_wire_wr_array(w, false, false, p->old_offsets_count);
		if (p->old_offsets_count == 1)
			km_wire_wr_i64(w, p->offset);
		return w->err;
	}
	km_wire_wr_i64(w, p->timestamp);
	km_wire_wr_i64(w, p->offset);
	if (version >= 4)
		km_wire_wr_i32(w, p->leader_epoch);
	if (flexible(version))
		km_wire_wr_tags(w);
	return w->err;
}

int km_listoffsets_resp_encode(struct km_wire_wr *w, int16_t version,
			       const struct km_listoffsets_resp *m)
{
	int rc = km_proto_check(KM_API_LIST_OFFSETS, version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	if (version >= 2)
		km_wire_wr_i32(w, m->throttle_time_ms);
	if (km_proto_wr_topics(w, version, flexible(version), m->topics,
			       m->n_topics, m->parts, m->n_parts,
			       wr_resp_part) < 0)
		return w->err;
	if (flexible(version))
		km_wire_wr_tags(w);
	return w->err;
}

int km_listoffsets_resp_decode(struct km_wire_rd *r, int16_t version,
			       struct km_listoffsets_resp *m)
{
	int rc = km_proto_check(KM_API_LIST_OFFSETS, version);
	struct km_proto_topics_out out = {
		m->topics, m->topics_max, &m->n_topics,
		m->parts, m->parts_max, &m->n_parts,
	};

	m->throttle_time_ms = 0;
	m->n_topics = m->n_parts = 0;
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	if (version >= 2)
		km_wire_rd_i32(r, &m->throttle_time_ms);
	if (km_proto_rd_topics(r, version, flexible(version), &out,
			       rd_resp_part) < 0)
		return r->err;
	if (flexible(version))
		km_wire_rd_tags(r);
	return km_wire_rd_end(r);
}
