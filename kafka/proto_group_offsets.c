/* OffsetCommit (key 8) v0-7 and OffsetFetch (key 9) v0-7
 * (OffsetCommit{Request,Response}.json, OffsetFetch{Request,Response}.json).
 * OffsetFetch is flexible from v6; OffsetCommit only from v8.
 *
 * OffsetCommit request: GroupId STRING, GenerationId int32 v1+, MemberId
 * STRING v1+, GroupInstanceId NULLABLE_STRING v7+, RetentionTimeMs int64
 * v2-4, Topics [Name STRING, Partitions [PartitionIndex int32,
 * CommittedOffset int64, CommittedLeaderEpoch int32 v6+, CommitTimestamp
 * int64 v1, CommittedMetadata NULLABLE_STRING]].
 * Response: ThrottleTimeMs int32 v3+, Topics [Name, Partitions
 * [PartitionIndex int32, ErrorCode int16]].
 * OffsetFetch request: GroupId STRING, Topics [Name STRING,
 * PartitionIndexes [int32]] (nullable v2+: all topics), RequireStable bool
 * v7+.
 * Response: ThrottleTimeMs int32 v3+, Topics [Name, Partitions
 * [PartitionIndex int32, CommittedOffset int64, CommittedLeaderEpoch int32
 * v5+, Metadata NULLABLE_STRING, ErrorCode int16]], ErrorCode int16 v2+.
 */
#include "kafka/proto_group_pvt.h"

#include "common/errors.h"

static int rd_commit_part(struct km_wire_rd *r, int16_t version, void *parts,
			  uint32_t i)
{
	struct km_offcommit_req_part *p =
		&((struct km_offcommit_req_part *)parts)[i];

	p->committed_leader_epoch = -1;
	p->commit_timestamp = -1;
	km_wire_rd_i32(r, &p->partition);
	km_wire_rd_i64(r, &p->committed_offset);
	if (version >= 6)
		km_wire_rd_i32(r, &p->committed_leader_epoch);
	if (version == 1)
		km_wire_rd_i64(r, &p->commit_timestamp);
	return km_proto_group_rd_strspan(r, false, true, &p->metadata);
}

static int wr_commit_part(struct km_wire_wr *w, int16_t version,
			  const void *parts, uint32_t i)
{
	const struct km_offcommit_req_part *p =
		&((const struct km_offcommit_req_part *)parts)[i];

	km_wire_wr_i32(w, p->partition);
	km_wire_wr_i64(w, p->committed_offset);
	if (version >= 6)
		km_wire_wr_i32(w, p->committed_leader_epoch);
	if (version == 1)
		km_wire_wr_i64(w, p->commit_timestamp);
	return km_proto_group_wr_strbytes(w, false, true, &p->metadata);
}

int km_offcommit_req_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_offcommit_req *m)
{
	if (km_proto_group_wr_check(w, KM_API_OFFSET_COMMIT, version) < 0)
		return w->err;
	km_wire_wr_name(w, false, false, &m->group_id);
	if (version >= 1) {
		km_wire_wr_i32(w, m->generation_id);
		km_wire_wr_name(w, false, false, &m->member_id);
	}
	if (version >= 7)
		km_wire_wr_name(w, false, true, &m->group_instance_id);
	if (version >= 2 && version <= 4)
		km_wire_wr_i64(w, m->retention_time_ms);
	return km_proto_wr_topics(w, version, false, m->topics, m->n_topics,
				  m->parts, m->n_parts, wr_commit_part);
}

static void commit_req_defaults(struct km_offcommit_req *m)
{
	km_wire_name_set(&m->group_id, "");
	m->generation_id = -1;
	km_wire_name_set(&m->member_id, "");
	km_wire_name_set_null(&m->group_instance_id);
	m->retention_time_ms = -1;
	m->n_topics = m->n_parts = 0;
}

int km_offcommit_req_decode(struct km_wire_rd *r, int16_t version,
			    struct km_offcommit_req *m)
{
	struct km_proto_topics_out out = {
		m->topics, m->topics_max, &m->n_topics,
		m->parts, m->parts_max, &m->n_parts,
	};

	commit_req_defaults(m);
	if (km_proto_group_rd_check(r, KM_API_OFFSET_COMMIT, version) < 0)
		return r->err;
	km_wire_rd_name(r, false, false, &m->group_id);
	if (version >= 1) {
		km_wire_rd_i32(r, &m->generation_id);
		km_wire_rd_name(r, false, false, &m->member_id);
	}
	if (version >= 7)
		km_wire_rd_name(r, false, true, &m->group_instance_id);
	if (version >= 2 && version <= 4)
		km_wire_rd_i64(r, &m->retention_time_ms);
	if (r->err != 0 ||
	    km_proto_rd_topics(r, version, false, &out, rd_commit_part) < 0)
		return r->err;
	return km_wire_rd_end(r);
}

static int rd_commit_resp_part(struct km_wire_rd *r, int16_t version,
			       void *parts, uint32_t i)
{
	struct km_offcommit_resp_part *p =
		&((struct km_offcommit_resp_part *)parts)[i];

	(void)version;
	km_wire_rd_i32(r, &p->partition);
	return km_wire_rd_i16(r, &p->error_code);
}

static int wr_commit_resp_part(struct km_wire_wr *w, int16_t version,
			       const void *parts, uint32_t i)
{
	const struct km_offcommit_resp_part *p =
		&((const struct km_offcommit_resp_part *)parts)[i];

	(void)version;
	km_wire_wr_i32(w, p->partition);
	return km_wire_wr_i16(w, p->error_code);
}

int km_offcommit_resp_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_offcommit_resp *m)
{
	if (km_proto_group_wr_check(w, KM_API_OFFSET_COMMIT, version) < 0)
		return w->err;
	if (version >= 3)
		km_wire_wr_i32(w, m->throttle_time_ms);
	return km_proto_wr_topics(w, version, false, m->topics, m->n_topics,
				  m->parts, m->n_parts, wr_commit_resp_part);
}

int km_offcommit_resp_decode(struct km_wire_rd *r, int16_t version,
			     struct km_offcommit_resp *m)
{
	struct km_proto_topics_out out = {
		m->topics, m->topics_max, &m->n_topics,
		m->parts, m->parts_max, &m->n_parts,
	};

	m->throttle_time_ms = 0;
	m->n_topics = m->n_parts = 0;
	if (km_proto_group_rd_check(r, KM_API_OFFSET_COMMIT, version) < 0)
		return r->err;
	if (version >= 3)
		km_wire_rd_i32(r, &m->throttle_time_ms);
	if (r->err != 0 || km_proto_rd_topics(r, version, false, &out,
					      rd_commit_resp_part) < 0)
		return r->err;
	return km_wire_rd_end(r);
}

/* ---- OffsetFetch ---- */

static bool fetch_flex(int16_t version)
{
	return km_proto_is_flexible(KM_API_OFFSET_FETCH, version);
}

int km_offfetch_req_encode(struct km_wire_wr *w, int16_t version,
			   const struct km_offfetch_req *m)
{
	bool flex = fetch_flex(version);

	if (km_proto_group_wr_check(w, KM_API_OFFSET_FETCH, version) < 0)
		return w->err;
	/* "Topics ... null to fetch all offsets" exists from v2 only. */
	if (m->all_topics && version < 2)
		return km_wire_wr_fail(w, KM_EWIREVALUE);
	km_wire_wr_name(w, flex, false, &m->group_id);
	km_proto_group_wr_topics_i32(w, flex, m->all_topics, m->topics, m->n_topics,
			       m->parts, m->n_parts);
	if (version >= 7)
		km_wire_wr_bool(w, m->require_stable);
	if (flex)
		km_wire_wr_tags(w);
	return w->err;
}

int km_offfetch_req_decode(struct km_wire_rd *r, int16_t version,
			   struct km_offfetch_req *m)
{
	bool flex = fetch_flex(version);
	struct km_proto_topics_out out = {
		m->topics, m->topics_max, &m->n_topics,
		m->parts, m->parts_max, &m->n_parts,
	};

	km_wire_name_set(&m->group_id, "");
	m->all_topics = false;
	m->n_topics = m->n_parts = 0;
	m->require_stable = false;
	if (km_proto_group_rd_check(r, KM_API_OFFSET_FETCH, version) < 0)
		return r->err;
	km_wire_rd_name(r, flex, false, &m->group_id);
	if (r->err != 0 || km_proto_group_rd_topics_i32(r, flex, version >= 2, &out,
						  &m->all_topics) < 0)
		return r->err;
	if (version >= 7)
		km_wire_rd_bool(r, &m->require_stable);
	if (flex)
		km_wire_rd_tags(r);
	return km_wire_rd_end(r);
}

static int rd_fetch_part(struct km_wire_rd *r, int16_t version, void *parts,
			 uint32_t i)
{
	struct km_offfetch_resp_part *p =
		&((struct km_offfetch_resp_part *)parts)[i];
	bool flex = fetch_flex(version);

	p->committed_leader_epoch = -1;
	p->error_code = 0;
	km_wire_rd_i32(r, &p->partition);
	km_wire_rd_i64(r, &p->committed_offset);
	if (version >= 5)
		km_wire_rd_i32(r, &p->committed_leader_epoch);
	if (km_proto_group_rd_strspan(r, flex, true, &p->metadata) < 0)
		return r->err;
	km_wire_rd_i16(r, &p->error_code);
	if (flex)
		km_wire_rd_tags(r);
	return r->err;
}

static int wr_fetch_part(struct km_wire_wr *w, int16_t version,
			 const void *parts, uint32_t i)
{
	const struct km_offfetch_resp_part *p =
		&((const struct km_offfetch_resp_part *)parts)[i];
	bool flex = fetch_flex(version);

	km_wire_wr_i32(w, p->partition);
	km_wire_wr_i64(w, p->committed_offset);
	if (version >= 5)
		km_wire_wr_i32(w, p->committed_leader_epoch);
	km_proto_group_wr_strbytes(w, flex, true, &p->metadata);
	km_wire_wr_i16(w, p->error_code);
	if (flex)
		km_wire_wr_tags(w);
	return w->err;
}

int km_offfetch_resp_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_offfetch_resp *m)
{
	bool flex = fetch_flex(version);

	if (km_proto_group_wr_check(w, KM_API_OFFSET_FETCH, version) < 0)
		return w->err;
	if (version >= 3)
		km_wire_wr_i32(w, m->throttle_time_ms);
	km_proto_wr_topics(w, version, flex, m->topics, m->n_topics, m->parts,
			   m->n_parts, wr_fetch_part);
	if (version >= 2)
		km_wire_wr_i16(w, m->error_code);
	if (flex)
		km_wire_wr_tags(w);
	return w->err;
}

int km_offfetch_resp_decode(struct km_wire_rd *r, int16_t version,
			    struct km_offfetch_resp *m)
{
	bool flex = fetch_flex(version);
	struct km_proto_topics_out out = {
		m->topics, m->topics_max, &m->n_topics,
		m->parts, m->parts_max, &m->n_parts,
	};

	m->throttle_time_ms = 0;
	m->n_topics = m->n_parts = 0;
	m->error_code = 0;
	if (km_proto_group_rd_check(r, KM_API_OFFSET_FETCH, version) < 0)
		return r->err;
	if (version >= 3)
		km_wire_rd_i32(r, &m->throttle_time_ms);
	if (r->err != 0 ||
	    km_proto_rd_topics(r, version, flex, &out, rd_fetch_part) < 0)
		return r->err;
	if (version >= 2)
		km_wire_rd_i16(r, &m->error_code);
	if (flex)
		km_wire_rd_tags(r);
	return km_wire_rd_end(r);
}
