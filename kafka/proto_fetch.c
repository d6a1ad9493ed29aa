/* Fetch request (key 1), v4-11 (FetchRequest.json); non-flexible.
 *
 * ReplicaId int32, MaxWaitMs int32, MinBytes int32, MaxBytes int32 (v3+),
 * IsolationLevel int8 (v4+), SessionId int32 v7+, SessionEpoch int32 v7+,
 * Topics [Topic STRING, Partitions [Partition int32, CurrentLeaderEpoch
 * int32 v9+, FetchOffset int64, LogStartOffset int64 v5+,
 * PartitionMaxBytes int32]], ForgottenTopicsData [Topic STRING, Partitions
 * [int32]] v7+, RackId STRING v11+.
 */
#include "kafka/proto.h"

#include "common/errors.h"

static int rd_part(struct km_wire_rd *r, int16_t version, void *parts,
		   uint32_t i)
{
	struct km_fetch_req_part *p = &((struct km_fetch_req_part *)parts)[i];

	p->current_leader_epoch = -1;
	p->log_start_offset = -1;
	km_wire_rd_i32(r, &p->partition);
	if (version >= 9)
		km_wire_rd_i32(r, &p->current_leader_epoch);
	km_wire_rd_i64(r, &p->fetch_offset);
	if (version >= 5)
		km_wire_rd_i64(r, &p->log_start_offset);
	km_wire_rd_i32(r, &p->partition_max_bytes);
	return r->err;
}

static int wr_part(struct km_wire_wr *w, int16_t version, const void *parts,
		   uint32_t i)
{
	const struct km_fetch_req_part *p =
		&((const struct km_fetch_req_part *)parts)[i];

	km_wire_wr_i32(w, p->partition);
	if (version >= 9)
		km_wire_wr_i32(w, p->current_leader_epoch);
	km_wire_wr_i64(w, p->fetch_offset);
	if (version >= 5)
		km_wire_wr_i64(w, p->log_start_offset);
	km_wire_wr_i32(w, p->partition_max_bytes);
	return w->err;
}

/* ForgottenTopicsData partitions are bare int32 indexes. */
static int rd_index(struct km_wire_rd *r, int16_t version, void *parts,
		    uint32_t i)
{
	(void)version;
	return km_wire_rd_i32(r, &((int32_t *)parts)[i]);
}

static int wr_index(struct km_wire_wr *w, int16_t version, const void *parts,
		    uint32_t i)
{
	(void)version;
	return km_wire_wr_i32(w, ((const int32_t *)parts)[i]);
}

int km_fetch_req_encode(struct km_wire_wr *w, int16_t version,
			const struct km_fetch_req *m)
{
	int rc = km_proto_check(KM_API_FETCH, version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	km_wire_wr_i32(w, m->replica_id);
	km_wire_wr_i32(w, m->max_wait_ms);
	km_wire_wr_i32(w, m->min_bytes);
	km_wire_wr_i32(w, m->max_bytes);
	km_wire_wr_i8(w, m->isolation_level);
	if (version >= 7) {
		km_wire_wr_i32(w, m->session_id);
		km_wire_wr_i32(w, m->session_epoch);
	}
	km_proto_wr_topics(w, version, false, m->topics, m->n_topics,
			   m->parts, m->n_parts, wr_part);
	if (version >= 7)
		km_proto_wr_topics(w, version, false, m->forgotten,
				   m->n_forgotten, m->forgotten_parts,
				   m->n_forgotten_parts, wr_index);
	if (version >= 11)
		km_wire_wr_name(w, false, false, &m->rack_id);
	return w->err;
}

static void set_defaults(struct km_fetch_req *m)
{
	m->isolation_level = 0;
	m->session_id = 0;
	m->session_epoch = -1;
	m->n_topics = m->n_parts = 0;
	m->n_forgotten = m->n_forgotten_parts = 0;
	km_wire_name_set(&m->rack_id, "");
}

int km_fetch_req_decode(struct km_wire_rd *r, int16_t version,
			struct km_fetch_req *m)
{
	int rc = km_proto_check(KM_API_FETCH, version);
	struct km_proto_topics_out topics = {
		m->topics, m->topics_max, &m->n_topics,
		m->parts, m->parts_max, &m->n_parts,
	};
	struct km_proto_topics_out forgotten = {
		m->forgotten, m->forgotten_max, &m->n_forgotten,
		m->forgotten_parts, m->forgotten_parts_max,
		&m->n_forgotten_parts,
	};

	set_defaults(m);
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	km_wire_rd_i32(r, &m->replica_id);
	km_wire_rd_i32(r, &m->max_wait_ms);
	km_wire_rd_i32(r, &m->min_bytes);
	km_wire_rd_i32(r, &m->max_bytes);
	km_wire_rd_i8(r, &m->isolation_level);
	if (version >= 7) {
		km_wire_rd_i32(r, &m->session_id);
		km_wire_rd_i32(r, &m->session_epoch);
	}
	if (km_proto_rd_topics(r, version, false, &topics, rd_part) < 0)
		return r->err;
	if (version >= 7 &&
	    km_proto_rd_topics(r, version, false, &forgotten, rd_index) < 0)
		return r->err;
	if (version >= 11)
		km_wire_rd_name(r, false, false, &m->rack_id);
	return km_wire_rd_end(r);
}
