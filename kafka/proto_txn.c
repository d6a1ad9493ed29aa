/* AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26) and
 * TxnOffsetCommit (28): see kafka/proto_txn.h for the fields and why these
 * versions. The byte helpers are the group codecs' (proto_group_pvt.h):
 * TxnOffsetCommit is OffsetCommit's transactional twin. */
#include "kafka/proto_txn.h"

#include "common/errors.h"
#include "kafka/proto_group_pvt.h"

static const struct km_api_range txn_apis[] = {
	{ KM_API_ADD_PARTITIONS_TO_TXN, 0, 3 },
	{ KM_API_ADD_OFFSETS_TO_TXN, 0, 4 },
	{ KM_API_END_TXN, 0, 5 },
	{ KM_API_TXN_OFFSET_COMMIT, 0, 5 },
};

/* Every one of the four: "flexibleVersions": "3+". */
static bool flexible(int16_t version)
{
	return version >= 3;
}

int km_txn_versions(int16_t api_key, struct km_api_range *out)
{
	for (size_t i = 0; i < sizeof(txn_apis) / sizeof(txn_apis[0]); i++) {
		if (txn_apis[i].api_key == api_key) {
			*out = txn_apis[i];
			return 0;
		}
	}
	return KM_EWIREAPIKEY;
}

static int check(int16_t api_key, int16_t version)
{
	struct km_api_range r;

	if (km_txn_versions(api_key, &r) < 0)
		return KM_EWIREAPIKEY;
	if (version < r.min_version || version > r.max_version)
		return KM_EWIREVERSION;
	return 0;
}

static int rd_check(struct km_wire_rd *r, int16_t api_key, int16_t version)
{
	int rc = check(api_key, version);

	return rc < 0 ? km_wire_rd_fail(r, rc) : 0;
}

static int wr_check(struct km_wire_wr *w, int16_t api_key, int16_t version)
{
	int rc = check(api_key, version);

	return rc < 0 ? km_wire_wr_fail(w, rc) : 0;
}

/* TransactionalId, ProducerId, ProducerEpoch: how three of the four
 * requests begin. */
static void wr_txn_head(struct km_wire_wr *w, bool flex,
			const struct km_wire_name *txn, int64_t pid,
			int16_t epoch)
{
	km_wire_wr_name(w, flex, false, txn);
	km_wire_wr_i64(w, pid);
	km_wire_wr_i16(w, epoch);
}

static void rd_txn_head(struct km_wire_rd *r, bool flex,
			struct km_wire_name *txn, int64_t *pid, int16_t *epoch)
{
	km_wire_rd_name(r, flex, false, txn);
	km_wire_rd_i64(r, pid);
	km_wire_rd_i16(r, epoch);
}

static int rd_end(struct km_wire_rd *r, bool flex)
{
	if (flex)
		km_wire_rd_tags(r);
	return km_wire_rd_end(r);
}

static int wr_end(struct km_wire_wr *w, bool flex)
{
	if (flex)
		km_wire_wr_tags(w);
	return w->err;
}

/* ---- AddPartitionsToTxn ---- */

int km_addparts_req_encode(struct km_wire_wr *w, int16_t version,
			   const struct km_addparts_req *m)
{
	bool flex = flexible(version);

	if (wr_check(w, KM_API_ADD_PARTITIONS_TO_TXN, version) < 0)
		return w->err;
	wr_txn_head(w, flex, &m->transactional_id, m->producer_id,
		    m->producer_epoch);
	km_proto_group_wr_topics_i32(w, flex, false, m->topics, m->n_topics,
				     m->parts, m->n_parts);
	return wr_end(w, flex);
}

int km_addparts_req_decode(struct km_wire_rd *r, int16_t version,
			   struct km_addparts_req *m)
{
	struct km_proto_topics_out out = {
		m->topics, m->topics_max, &m->n_topics,
		m->parts, m->parts_max, &m->n_parts,
	};
	bool flex = flexible(version), is_null;

	km_wire_name_set(&m->transactional_id, "");
	m->producer_id = -1;
	m->producer_epoch = -1;
	m->n_topics = m->n_parts = 0;
	if (rd_check(r, KM_API_ADD_PARTITIONS_TO_TXN, version) < 0)
		return r->err;
	rd_txn_head(r, flex, &m->transactional_id, &m->producer_id,
		    &m->producer_epoch);
	if (r->err != 0 ||
	    km_proto_group_rd_topics_i32(r, flex, false, &out, &is_null) < 0)
		return r->err;
	return rd_end(r, flex);
}

static int rd_result_part(struct km_wire_rd *r, int16_t version, void *parts,
			  uint32_t i)
{
	struct km_offcommit_resp_part *p =
		&((struct km_offcommit_resp_part *)parts)[i];

	km_wire_rd_i32(r, &p->partition);
	km_wire_rd_i16(r, &p->error_code);
	if (flexible(version))
		km_wire_rd_tags(r);
	return r->err;
}

static int wr_result_part(struct km_wire_wr *w, int16_t version,
			  const void *parts, uint32_t i)
{
	const struct km_offcommit_resp_part *p =
		&((const struct km_offcommit_resp_part *)parts)[i];

	km_wire_wr_i32(w, p->partition);
	km_wire_wr_i16(w, p->error_code);
	if (flexible(version))
		km_wire_wr_tags(w);
	return w->err;
}

/* ThrottleTimeMs, [Name, [PartitionIndex, ErrorCode]]: both answers. */
static int wr_results(struct km_wire_wr *w, int16_t api_key, int16_t version,
		      const struct km_addparts_resp *m)
{
	bool flex = flexible(version);

	if (wr_check(w, api_key, version) < 0)
		return w->err;
	km_wire_wr_i32(w, m->throttle_time_ms);
	km_proto_wr_topics(w, version, flex, m->topics, m->n_topics, m->parts,
			   m->n_parts, wr_result_part);
	return wr_end(w, flex);
}

static int rd_results(struct km_wire_rd *r, int16_t api_key, int16_t version,
		      struct km_addparts_resp *m)
{
	struct km_proto_topics_out out = {
		m->topics, m->topics_max, &m->n_topics,
		m->parts, m->parts_max, &m->n_parts,
	};
	bool flex = flexible(version);

	m->throttle_time_ms = 0;
	m->n_topics = m->n_parts = 0;
	if (rd_check(r, api_key, version) < 0)
		return r->err;
	km_wire_rd_i32(r, &m->throttle_time_ms);
	if (r->err != 0 ||
	    km_proto_rd_topics(r, version, flex, &out, rd_result_part) < 0)
		return r->err;
	return rd_end(r, flex);
}

int km_addparts_resp_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_addparts_resp *m)
{
	return wr_results(w, KM_API_ADD_PARTITIONS_TO_TXN, version, m);
}

int km_addparts_resp_decode(struct km_wire_rd *r, int16_t version,
			    struct km_addparts_resp *m)
{
	return rd_results(r, KM_API_ADD_PARTITIONS_TO_TXN, version, m);
}

/* ---- AddOffsetsToTxn ---- */

int km_addoffsets_req_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_addoffsets_req *m)
{
	bool flex = flexible(version);

	if (wr_check(w, KM_API_ADD_OFFSETS_TO_TXN, version) < 0)
		return w->err;
	wr_txn_head(w, flex, &m->transactional_id, m->producer_id,
		    m->producer_epoch);
	km_wire_wr_name(w, flex, false, &m->group_id);
	return wr_end(w, flex);
}

int km_addoffsets_req_decode(struct km_wire_rd *r, int16_t version,
			     struct km_addoffsets_req *m)
{
	bool flex = flexible(version);

	km_wire_name_set(&m->transactional_id, "");
	km_wire_name_set(&m->group_id, "");
	m->producer_id = -1;
	m->producer_epoch = -1;
	if (rd_check(r, KM_API_ADD_OFFSETS_TO_TXN, version) < 0)
		return r->err;
	rd_txn_head(r, flex, &m->transactional_id, &m->producer_id,
		    &m->producer_epoch);
	km_wire_rd_name(r, flex, false, &m->group_id);
	return rd_end(r, flex);
}

/* Only the two answers of ThrottleTimeMs and ErrorCode (and EndTxn v5's
 * producer) share this codec. */
static bool plain_answer(int16_t api_key)
{
	return api_key == KM_API_ADD_OFFSETS_TO_TXN || api_key == KM_API_END_TXN;
}

int km_txn_resp_encode(struct km_wire_wr *w, int16_t api_key,
		       int16_t version, const struct km_txn_resp *m)
{
	bool flex = flexible(version);

	if (!plain_answer(api_key))
		return km_wire_wr_fail(w, KM_EWIREAPIKEY);
	if (wr_check(w, api_key, version) < 0)
		return w->err;
	km_wire_wr_i32(w, m->throttle_time_ms);
	km_wire_wr_i16(w, m->error_code);
	if (api_key == KM_API_END_TXN && version >= 5) {
		km_wire_wr_i64(w, m->producer_id);
		km_wire_wr_i16(w, m->producer_epoch);
	}
	return wr_end(w, flex);
}

int km_txn_resp_decode(struct km_wire_rd *r, int16_t api_key,
		       int16_t version, struct km_txn_resp *m)
{
	bool flex = flexible(version);

	m->throttle_time_ms = 0;
	m->error_code = 0;
	m->producer_id = -1;
	m->producer_epoch = -1;
	if (!plain_answer(api_key))
		return km_wire_rd_fail(r, KM_EWIREAPIKEY);
	if (rd_check(r, api_key, version) < 0)
		return r->err;
	km_wire_rd_i32(r, &m->throttle_time_ms);
	km_wire_rd_i16(r, &m->error_code);
	if (api_key == KM_API_END_TXN && version >= 5) {
		km_wire_rd_i64(r, &m->producer_id);
		km_wire_rd_i16(r, &m->producer_epoch);
	}
	return rd_end(r, flex);
}

/* ---- EndTxn ---- */

int km_endtxn_req_encode(struct km_wire_wr *w, int16_t version,
			 const struct km_endtxn_req *m)
{
	bool flex = flexible(version);

	if (wr_check(w, KM_API_END_TXN, version) < 0)
		return w->err;
	wr_txn_head(w, flex, &m->transactional_id, m->producer_id,
		    m->producer_epoch);
	km_wire_wr_bool(w, m->committed);
	return wr_end(w, flex);
}

int km_endtxn_req_decode(struct km_wire_rd *r, int16_t version,
			 struct km_endtxn_req *m)
{
	bool flex = flexible(version);

	km_wire_name_set(&m->transactional_id, "");
	m->producer_id = -1;
	m->producer_epoch = -1;
	m->committed = false;
	if (rd_check(r, KM_API_END_TXN, version) < 0)
		return r->err;
	rd_txn_head(r, flex, &m->transactional_id, &m->producer_id,
		    &m->producer_epoch);
	km_wire_rd_bool(r, &m->committed);
	return rd_end(r, flex);
}

/* ---- TxnOffsetCommit ---- */

static int rd_commit_part(struct km_wire_rd *r, int16_t version, void *parts,
			  uint32_t i)
{
	struct km_txncommit_part *p = &((struct km_txncommit_part *)parts)[i];
	bool flex = flexible(version);

	p->committed_leader_epoch = -1;
	km_wire_rd_i32(r, &p->partition);
	km_wire_rd_i64(r, &p->committed_offset);
	if (version >= 2)
		km_wire_rd_i32(r, &p->committed_leader_epoch);
	if (km_proto_group_rd_strspan(r, flex, true, &p->metadata) < 0)
		return r->err;
	if (flex)
		km_wire_rd_tags(r);
	return r->err;
}

static int wr_commit_part(struct km_wire_wr *w, int16_t version,
			  const void *parts, uint32_t i)
{
	const struct km_txncommit_part *p =
		&((const struct km_txncommit_part *)parts)[i];
	bool flex = flexible(version);

	km_wire_wr_i32(w, p->partition);
	km_wire_wr_i64(w, p->committed_offset);
	if (version >= 2)
		km_wire_wr_i32(w, p->committed_leader_epoch);
	km_proto_group_wr_strbytes(w, flex, true, &p->metadata);
	if (flex)
		km_wire_wr_tags(w);
	return w->err;
}

int km_txncommit_req_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_txncommit_req *m)
{
	bool flex = flexible(version);

	if (wr_check(w, KM_API_TXN_OFFSET_COMMIT, version) < 0)
		return w->err;
	km_wire_wr_name(w, flex, false, &m->transactional_id);
	km_wire_wr_name(w, flex, false, &m->group_id);
	km_wire_wr_i64(w, m->producer_id);
	km_wire_wr_i16(w, m->producer_epoch);
	if (version >= 3) {
		km_wire_wr_i32(w, m->generation_id);
		km_wire_wr_name(w, flex, false, &m->member_id);
		km_wire_wr_name(w, flex, true, &m->group_instance_id);
	}
	km_proto_wr_topics(w, version, flex, m->topics, m->n_topics, m->parts,
			   m->n_parts, wr_commit_part);
	return wr_end(w, flex);
}

static void txncommit_defaults(struct km_txncommit_req *m)
{
	km_wire_name_set(&m->transactional_id, "");
	km_wire_name_set(&m->group_id, "");
	km_wire_name_set(&m->member_id, "");
	km_wire_name_set_null(&m->group_instance_id);
	m->producer_id = -1;
	m->producer_epoch = -1;
	m->generation_id = -1;
	m->n_topics = m->n_parts = 0;
}

int km_txncommit_req_decode(struct km_wire_rd *r, int16_t version,
			    struct km_txncommit_req *m)
{
	struct km_proto_topics_out out = {
		m->topics, m->topics_max, &m->n_topics,
		m->parts, m->parts_max, &m->n_parts,
	};
	bool flex = flexible(version);

	txncommit_defaults(m);
	if (rd_check(r, KM_API_TXN_OFFSET_COMMIT, version) < 0)
		return r->err;
	km_wire_rd_name(r, flex, false, &m->transactional_id);
	km_wire_rd_name(r, flex, false, &m->group_id);
	km_wire_rd_i64(r, &m->producer_id);
	km_wire_rd_i16(r, &m->producer_epoch);
	if (version >= 3) {
		km_wire_rd_i32(r, &m->generation_id);
		km_wire_rd_name(r, flex, false, &m->member_id);
		km_wire_rd_name(r, flex, true, &m->group_instance_id);
	}
	if (r->err != 0 ||
	    km_proto_rd_topics(r, version, flex, &out, rd_commit_part) < 0)
		return r->err;
	return rd_end(r, flex);
}

int km_txncommit_resp_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_addparts_resp *m)
{
	return wr_results(w, KM_API_TXN_OFFSET_COMMIT, version, m);
}

int km_txncommit_resp_decode(struct km_wire_rd *r, int16_t version,
			     struct km_addparts_resp *m)
{
	return rd_results(r, KM_API_TXN_OFFSET_COMMIT, version, m);
}
