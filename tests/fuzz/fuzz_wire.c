/* libFuzzer target for the Kafka wire codecs (kafka/wire.c, proto_*.c).
 *
 * Goal: no input, split anywhere, makes a decoder read out of bounds, loop
 * without bound, or break its contract; and whatever a decoder accepts, the
 * encoders can write back stably. Method: byte 0 picks where the input is
 * split into two separately allocated segments, byte 1 the mode:
 *   - server (bit 7 clear): the input is a request frame; with bit 6 set
 *     the size prefix is skipped (the rest is taken as the frame body), so
 *     the fuzzer reaches bodies without matching sizes. Header, then the
 *     body decoder the header names, as kmirrord's front end would;
 *   - client (bit 7 set): the input is the body of a response (header
 *     included) to one of the (API, version) pairs in `responses`.
 * An accepted message is encoded again (e1), decoded from e1 and encoded
 * once more (e2): e1 and e2 must be equal and decoding e1 must succeed.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "kafka/proto.h"
#include "kafka/proto_group.h"
#include "kafka/proto_txn.h"
#include "kafka/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { CAP = 64, ARENA = 1 << 20, OUT = 2 << 20 };

/* Decoded messages, kept for re-encoding. Single-threaded, so static. */
static struct {
	struct km_wire_name names[CAP];
	uint8_t ids[CAP][KM_WIRE_UUID_BYTES];
	struct km_proto_topic topics[CAP], forgotten[CAP];
	struct km_api_range keys[CAP];
	struct km_metadata_broker brokers[CAP];
	struct km_metadata_topic mtopics[CAP];
	struct km_metadata_part mparts[CAP];
	int32_t nodes[CAP], fparts[CAP];
	struct km_listoffsets_req_part loreq[CAP];
	struct km_listoffsets_resp_part loresp[CAP];
	struct km_fetch_req_part freq[CAP];
	struct km_produce_resp_part presp[CAP];
	struct km_fetch_aborted aborted[CAP];
	/* Streamed messages, flattened: records bytes in arena. */
	struct km_fetch_part fparts_out[CAP];
	int32_t fpart_topic[CAP];
	struct km_fetch_aborted fab[CAP][4];
	int32_t rec_at[CAP];
	uint32_t n_sparts, arena_used;
	struct km_wire_name stopics[CAP];
	uint32_t n_stopics;
	int32_t last_topic_index;
	uint8_t arena[ARENA];
	/* Every message type, one of each. */
	struct km_apiversions_req avq;
	struct km_apiversions_resp avp;
	struct km_metadata_req mdq;
	struct km_metadata_resp mdp;
	struct km_listoffsets_req loq;
	struct km_listoffsets_resp lop;
	struct km_fetch_req ftq;
	struct km_produce_resp prp;
	struct km_initpid_req ipq;
	struct km_initpid_resp ipp;
	/* The Admin client's describe calls. */
	struct km_dconfigs_resource dcres[CAP];
	struct km_dconfigs_dresult dcresults[CAP];
	struct km_dconfigs_dentry dcentries[CAP];
	struct km_dconfigs_dsyn dcsyns[CAP];
	struct km_dconfigs_req dcq;
	struct km_dconfigs_resp dcp;
	struct km_dcluster_broker dcbrokers[CAP];
	struct km_dcluster_req dlq;
	struct km_dcluster_resp dlp;
	int32_t ft_throttle, ft_session;
	int16_t ft_err, pr_acks;
	int32_t pr_timeout;
	struct km_wire_name pr_txn;
	/* Consumer-group messages (kafka/proto_group.h); their byte fields
	 * are copied into garena so they re-encode. */
	struct km_offcommit_req_part ocq_parts[CAP];
	struct km_offcommit_resp_part ocp_parts[CAP];
	struct km_offfetch_resp_part ofp_parts[CAP];
	struct km_joingroup_protocol protos[CAP];
	struct km_group_member gmembers[CAP];
	struct km_leavegroup_member lmembers[CAP];
	struct km_descgroups_group dgroups[CAP];
	struct km_descgroups_member dmembers[CAP];
	struct km_listgroups_group lgroups[CAP];
	struct km_delgroups_result dresults[CAP];
	struct km_findcoord_req fcq;
	struct km_findcoord_resp fcp;
	struct km_offcommit_req ocq;
	struct km_offcommit_resp ocp;
	struct km_offfetch_req ofq;
	struct km_offfetch_resp ofp;
	struct km_joingroup_req jgq;
	struct km_joingroup_resp jgp;
	struct km_heartbeat_req hbq;
	struct km_heartbeat_resp hbp;
	struct km_leavegroup_req lgq;
	struct km_leavegroup_resp lgp;
	struct km_syncgroup_req sgq;
	struct km_syncgroup_resp sgp;
	struct km_descgroups_req dgq;
	struct km_descgroups_resp dgp;
	struct km_listgroups_req lsq;
	struct km_listgroups_resp lsp;
	struct km_delgroups_req deq;
	struct km_delgroups_resp dep;
	struct km_offdelete_req odq;
	struct km_offdelete_resp odp;
	/* The transactional producer's (kafka/proto_txn.h). */
	struct km_addparts_req apq;
	struct km_addparts_resp app;
	struct km_endtxn_req etq;
	struct km_txn_resp etp;
	struct km_addoffsets_req aoq;
	struct km_txn_resp aop;
	struct km_txncommit_req tcq;
	struct km_txncommit_part tcq_parts[CAP];
	struct km_addparts_resp tcp;
	uint8_t garena[ARENA];
	uint32_t garena_used;
} st;

static uint8_t out1[OUT], out2[OUT];

static void reset_group_storage(void)
{
	st.ocq.topics = st.ocp.topics = st.topics;
	st.ofq.topics = st.ofp.topics = st.topics;
	st.ocq.topics_max = st.ocp.topics_max = CAP;
	st.ofq.topics_max = st.ofp.topics_max = CAP;
	st.ocq.parts = st.ocq_parts, st.ocq.parts_max = CAP;
	st.ocp.parts = st.ocp_parts, st.ocp.parts_max = CAP;
	st.ofq.parts = st.nodes, st.ofq.parts_max = CAP;
	st.ofp.parts = st.ofp_parts, st.ofp.parts_max = CAP;
	st.jgq.protocols = st.protos, st.jgq.protocols_max = CAP;
	st.jgp.members = st.gmembers, st.jgp.members_max = CAP;
	st.sgq.assignments = st.gmembers, st.sgq.assignments_max = CAP;
	st.lgq.members = st.lgp.members = st.lmembers;
	st.lgq.members_max = st.lgp.members_max = CAP;
	st.dgq.groups = st.names, st.dgq.groups_max = CAP;
	st.dgp.groups = st.dgroups, st.dgp.groups_max = CAP;
	st.dgp.members = st.dmembers, st.dgp.members_max = CAP;
	st.lsq.states_filter = st.names, st.lsq.states_max = CAP;
	st.lsq.types_filter = st.names, st.lsq.types_max = CAP;
	st.lsp.groups = st.lgroups, st.lsp.groups_max = CAP;
	st.deq.groups = st.names, st.deq.groups_max = CAP;
	st.dep.results = st.dresults, st.dep.results_max = CAP;
	st.odq.topics = st.odp.topics = st.topics;
	st.odq.topics_max = st.odp.topics_max = CAP;
	st.odq.parts = st.nodes, st.odq.parts_max = CAP;
	st.odp.parts = st.ocp_parts, st.odp.parts_max = CAP;
	st.apq.topics = st.app.topics = st.topics;
	st.apq.topics_max = st.app.topics_max = CAP;
	st.apq.parts = st.nodes, st.apq.parts_max = CAP;
	st.app.parts = st.ocp_parts, st.app.parts_max = CAP;
	st.tcq.topics = st.tcp.topics = st.topics;
	st.tcq.topics_max = st.tcp.topics_max = CAP;
	st.tcq.parts = st.tcq_parts, st.tcq.parts_max = CAP;
	st.tcp.parts = st.ocp_parts, st.tcp.parts_max = CAP;
	st.garena_used = 0;
}

static void reset_storage(void)
{
	struct km_metadata_resp *m = &st.mdp;

	st.avp.keys = st.keys, st.avp.keys_max = CAP;
	st.mdq.topics = st.names, st.mdq.topics_max = CAP;
	st.mdq.topic_ids = st.ids;
	m->brokers = st.brokers, m->brokers_max = CAP;
	m->topics = st.mtopics, m->topics_max = CAP;
	m->parts = st.mparts, m->parts_max = CAP;
	m->nodes = st.nodes, m->nodes_max = CAP;
	st.loq.topics = st.topics, st.loq.topics_max = CAP;
	st.loq.parts = st.loreq, st.loq.parts_max = CAP;
	st.lop.topics = st.topics, st.lop.topics_max = CAP;
	st.lop.parts = st.loresp, st.lop.parts_max = CAP;
	st.ftq.topics = st.topics, st.ftq.topics_max = CAP;
	st.ftq.parts = st.freq, st.ftq.parts_max = CAP;
	st.ftq.forgotten = st.forgotten, st.ftq.forgotten_max = CAP;
	st.ftq.forgotten_parts = st.fparts, st.ftq.forgotten_parts_max = CAP;
	st.prp.topics = st.topics, st.prp.topics_max = CAP;
	st.prp.parts = st.presp, st.prp.parts_max = CAP;
	st.dcq.resources = st.dcres, st.dcq.resources_max = CAP;
	st.dcq.keys = st.names, st.dcq.keys_max = CAP;
	st.dcp.results = st.dcresults, st.dcp.results_max = CAP;
	st.dcp.entries = st.dcentries, st.dcp.entries_max = CAP;
	st.dcp.synonyms = st.dcsyns, st.dcp.synonyms_max = CAP;
	st.dlp.brokers = st.dcbrokers, st.dlp.brokers_max = CAP;
	st.n_sparts = st.n_stopics = st.arena_used = 0;
	st.last_topic_index = -1;
	reset_group_storage();
}

/* Keep one streamed partition: topic, fields, records into the arena. */
static int keep_part(const struct km_proto_cursor *c,
		     const struct km_wire_span *rec, int32_t *rec_len)
{
	uint32_t i = st.n_sparts;

	if (i == CAP)
		return KM_EWIRECAPACITY;
	if (c->topic_index != st.last_topic_index) {
		if (st.n_stopics == CAP)
			return KM_EWIRECAPACITY;
		st.stopics[st.n_stopics++] = c->topic;
		st.last_topic_index = c->topic_index;
	}
	st.fpart_topic[i] = (int32_t)st.n_stopics - 1;
	st.rec_at[i] = -1;
	*rec_len = rec->len;
	if (rec->len >= 0) {
		KM_ASSERT((uint32_t)rec->len <= ARENA - st.arena_used);
		km_wire_span_copy(c->rd->chain, rec, st.arena + st.arena_used,
				  (size_t)rec->len);
		st.rec_at[i] = (int32_t)st.arena_used;
		st.arena_used += (uint32_t)rec->len;
	}
	st.n_sparts++;
	return 0;
}

static int decode_fetch_resp(struct km_wire_rd *r, int16_t v)
{
	struct km_fetch_resp_iter it;
	struct km_fetch_part p;
	int rc = km_fetch_resp_begin(&it, r, v, st.aborted, 4);

	st.ft_throttle = it.throttle_time_ms;
	st.ft_err = it.error_code;
	st.ft_session = it.session_id;
	while (rc == 0 && (rc = km_fetch_resp_next_partition(&it, &p)) == 1) {
		uint32_t i = st.n_sparts;
		int32_t len;

		KM_ASSERT(p.n_aborted <= 4);
		rc = keep_part(&it.cur, &p.records, &len);
		if (rc < 0)
			break;
		st.fparts_out[i] = p;
		st.fparts_out[i].records.len = len;
		if (p.n_aborted > 0)
			memcpy(st.fab[i], p.aborted,
			       sizeof(p.aborted[0]) * (size_t)p.n_aborted);
		st.fparts_out[i].aborted = st.fab[i];
		rc = 0;
	}
	return rc;
}

static int decode_produce_req(struct km_wire_rd *r, int16_t v)
{
	struct km_produce_req_iter it;
	struct km_produce_part p;
	int rc = km_produce_req_begin(&it, r, v);

	st.pr_txn = it.transactional_id;
	st.pr_acks = it.acks;
	st.pr_timeout = it.timeout_ms;
	while (rc == 0 && (rc = km_produce_req_next_partition(&it, &p)) == 1) {
		uint32_t i = st.n_sparts;
		int32_t len;

		rc = keep_part(&it.cur, &p.records, &len);
		if (rc < 0)
			break;
		st.fparts_out[i].partition = p.partition;
		st.fparts_out[i].records.len = len;
		rc = 0;
	}
	return rc;
}

/* Copy a decoded byte field out of the chain so it can be encoded. */
static void own(const struct km_chain *c, struct km_group_bytes *b)
{
	b->p = "";
	if (b->len <= 0)
		return;
	KM_ASSERT((uint32_t)b->len <= ARENA - st.garena_used);
	km_wire_span_copy(c, &b->span, st.garena + st.garena_used,
			  (size_t)b->len);
	b->p = st.garena + st.garena_used;
	st.garena_used += (uint32_t)b->len;
}

static void own_group(const struct km_chain *c, int req, int16_t key)
{
	uint32_t i;

	if (key == KM_API_OFFSET_COMMIT && req)
		for (i = 0; i < st.ocq.n_parts; i++)
			own(c, &st.ocq_parts[i].metadata);
	if (key == KM_API_TXN_OFFSET_COMMIT && req)
		for (i = 0; i < st.tcq.n_parts; i++)
			own(c, &st.tcq_parts[i].metadata);
	if (key == KM_API_OFFSET_FETCH && !req)
		for (i = 0; i < st.ofp.n_parts; i++)
			own(c, &st.ofp_parts[i].metadata);
	if (key == KM_API_JOIN_GROUP && req)
		for (i = 0; i < st.jgq.n_protocols; i++)
			own(c, &st.protos[i].metadata);
	if (key == KM_API_JOIN_GROUP && !req)
		for (i = 0; i < st.jgp.n_members; i++)
			own(c, &st.gmembers[i].data);
	if (key == KM_API_SYNC_GROUP && req)
		for (i = 0; i < st.sgq.n_assignments; i++)
			own(c, &st.gmembers[i].data);
	if (key == KM_API_SYNC_GROUP && !req)
		own(c, &st.sgp.assignment);
	if (key == KM_API_DESCRIBE_GROUPS && !req)
		for (i = 0; i < st.dgp.n_members; i++) {
			own(c, &st.dmembers[i].metadata);
			own(c, &st.dmembers[i].assignment);
		}
}

static int decode_group(struct km_wire_rd *r, int req, int16_t key,
			int16_t v)
{
	switch (key) {
	case KM_API_FIND_COORDINATOR:
		return req ? km_findcoord_req_decode(r, v, &st.fcq)
			   : km_findcoord_resp_decode(r, v, &st.fcp);
	case KM_API_OFFSET_COMMIT:
		return req ? km_offcommit_req_decode(r, v, &st.ocq)
			   : km_offcommit_resp_decode(r, v, &st.ocp);
	case KM_API_OFFSET_FETCH:
		return req ? km_offfetch_req_decode(r, v, &st.ofq)
			   : km_offfetch_resp_decode(r, v, &st.ofp);
	case KM_API_JOIN_GROUP:
		return req ? km_joingroup_req_decode(r, v, &st.jgq)
			   : km_joingroup_resp_decode(r, v, &st.jgp);
	case KM_API_HEARTBEAT:
		return req ? km_heartbeat_req_decode(r, v, &st.hbq)
			   : km_heartbeat_resp_decode(r, v, &st.hbp);
	case KM_API_LEAVE_GROUP:
		return req ? km_leavegroup_req_decode(r, v, &st.lgq)
			   : km_leavegroup_resp_decode(r, v, &st.lgp);
	case KM_API_SYNC_GROUP:
		return req ? km_syncgroup_req_decode(r, v, &st.sgq)
			   : km_syncgroup_resp_decode(r, v, &st.sgp);
	case KM_API_DESCRIBE_GROUPS:
		return req ? km_descgroups_req_decode(r, v, &st.dgq)
			   : km_descgroups_resp_decode(r, v, &st.dgp);
	case KM_API_LIST_GROUPS:
		return req ? km_listgroups_req_decode(r, v, &st.lsq)
			   : km_listgroups_resp_decode(r, v, &st.lsp);
	case KM_API_DELETE_GROUPS:
		return req ? km_delgroups_req_decode(r, v, &st.deq)
			   : km_delgroups_resp_decode(r, v, &st.dep);
	case KM_API_OFFSET_DELETE:
		return req ? km_offdelete_req_decode(r, v, &st.odq)
			   : km_offdelete_resp_decode(r, v, &st.odp);
	}
	return KM_EWIREAPIKEY;
}

static int encode_group(struct km_wire_wr *w, int req, int16_t key,
			int16_t v)
{
	switch (key) {
	case KM_API_FIND_COORDINATOR:
		return req ? km_findcoord_req_encode(w, v, &st.fcq)
			   : km_findcoord_resp_encode(w, v, &st.fcp);
	case KM_API_OFFSET_COMMIT:
		return req ? km_offcommit_req_encode(w, v, &st.ocq)
			   : km_offcommit_resp_encode(w, v, &st.ocp);
	case KM_API_OFFSET_FETCH:
		return req ? km_offfetch_req_encode(w, v, &st.ofq)
			   : km_offfetch_resp_encode(w, v, &st.ofp);
	case KM_API_JOIN_GROUP:
		return req ? km_joingroup_req_encode(w, v, &st.jgq)
			   : km_joingroup_resp_encode(w, v, &st.jgp);
	case KM_API_HEARTBEAT:
		return req ? km_heartbeat_req_encode(w, v, &st.hbq)
			   : km_heartbeat_resp_encode(w, v, &st.hbp);
	case KM_API_LEAVE_GROUP:
		return req ? km_leavegroup_req_encode(w, v, &st.lgq)
			   : km_leavegroup_resp_encode(w, v, &st.lgp);
	case KM_API_SYNC_GROUP:
		return req ? km_syncgroup_req_encode(w, v, &st.sgq)
			   : km_syncgroup_resp_encode(w, v, &st.sgp);
	case KM_API_DESCRIBE_GROUPS:
		return req ? km_descgroups_req_encode(w, v, &st.dgq)
			   : km_descgroups_resp_encode(w, v, &st.dgp);
	case KM_API_LIST_GROUPS:
		return req ? km_listgroups_req_encode(w, v, &st.lsq)
			   : km_listgroups_resp_encode(w, v, &st.lsp);
	case KM_API_DELETE_GROUPS:
		return req ? km_delgroups_req_encode(w, v, &st.deq)
			   : km_delgroups_resp_encode(w, v, &st.dep);
	case KM_API_OFFSET_DELETE:
		return req ? km_offdelete_req_encode(w, v, &st.odq)
			   : km_offdelete_resp_encode(w, v, &st.odp);
	}
	return KM_EWIREAPIKEY;
}

static int decode(struct km_wire_rd *r, int req, int16_t key, int16_t v)
{
	int rc;

	reset_storage();
	rc = decode_group(r, req, key, v);
	if (rc != KM_EWIREAPIKEY) {
		if (rc == 0)
			own_group(r->chain, req, key);
		return rc;
	}
	switch (key) {
	case KM_API_API_VERSIONS:
		return req ? km_apiversions_req_decode(r, v, &st.avq)
			   : km_apiversions_resp_decode(r, v, &st.avp);
	case KM_API_METADATA:
		return req ? km_metadata_req_decode(r, v, &st.mdq)
			   : km_metadata_resp_decode(r, v, &st.mdp);
	case KM_API_LIST_OFFSETS:
		return req ? km_listoffsets_req_decode(r, v, &st.loq)
			   : km_listoffsets_resp_decode(r, v, &st.lop);
	case KM_API_FETCH:
		return req ? km_fetch_req_decode(r, v, &st.ftq)
			   : decode_fetch_resp(r, v);
	case KM_API_PRODUCE:
		return req ? decode_produce_req(r, v)
			   : km_produce_resp_decode(r, v, &st.prp);
	case KM_API_INIT_PRODUCER_ID:
		return req ? km_initpid_req_decode(r, v, &st.ipq)
			   : km_initpid_resp_decode(r, v, &st.ipp);
	case KM_API_ADD_PARTITIONS_TO_TXN:
		return req ? km_addparts_req_decode(r, v, &st.apq)
			   : km_addparts_resp_decode(r, v, &st.app);
	case KM_API_END_TXN:
		return req ? km_endtxn_req_decode(r, v, &st.etq)
			   : km_txn_resp_decode(r, KM_API_END_TXN, v, &st.etp);
	case KM_API_ADD_OFFSETS_TO_TXN:
		return req ? km_addoffsets_req_decode(r, v, &st.aoq)
			   : km_txn_resp_decode(r, KM_API_ADD_OFFSETS_TO_TXN, v,
						&st.aop);
	case KM_API_TXN_OFFSET_COMMIT:
		if (!req)
			return km_txncommit_resp_decode(r, v, &st.tcp);
		/* Its metadata are spans, as OffsetCommit's. */
		if ((rc = km_txncommit_req_decode(r, v, &st.tcq)) == 0)
			own_group(r->chain, req, key);
		return rc;
	case KM_API_DESCRIBE_CONFIGS:
		return req ? km_dconfigs_req_decode(r, v, &st.dcq)
			   : km_dconfigs_resp_decode(r, v, &st.dcp);
	case KM_API_DESCRIBE_CLUSTER:
		return req ? km_dcluster_req_decode(r, v, &st.dlq)
			   : km_dcluster_resp_decode(r, v, &st.dlp);
	}
	return KM_EWIREAPIKEY;
}

/* Re-encode the streamed messages from the flattened copy. */
static int encode_streamed(struct km_wire_wr *w, int req, int16_t v)
{
	struct km_proto_enc e;
	int32_t topic = -1;

	if (req)
		km_produce_req_enc_begin(&e, w, v, &st.pr_txn, st.pr_acks,
					 st.pr_timeout);
	else
		km_fetch_resp_enc_begin(&e, w, v, st.ft_throttle, st.ft_err,
					st.ft_session);
	for (uint32_t i = 0; i < st.n_sparts; i++) {
		const struct km_fetch_part *p = &st.fparts_out[i];
		const void *rec = st.rec_at[i] >= 0 ? st.arena + st.rec_at[i]
						    : NULL;

		if (st.fpart_topic[i] != topic) {
			topic = st.fpart_topic[i];
			km_proto_enc_topic(&e, &st.stopics[topic]);
		}
		if (req)
			km_produce_req_enc_partition(&e, p->partition,
						     rec ? rec : "",
						     p->records.len);
		else
			km_fetch_resp_enc_partition(&e, p, rec ? rec : "",
						    p->records.len);
	}
	return km_proto_enc_end(&e);
}

static const char *cstr(const struct km_wire_name *n)
{
	return n->len < 0 ? NULL : n->s;
}

/* The decoded DescribeConfigs response through the streaming encoder. */
static int encode_dconfigs_resp(struct km_wire_wr *w, int16_t v)
{
	struct km_dconfigs_synonym syn[CAP];

	km_dconfigs_resp_enc_begin(w, v, st.dcp.throttle_time_ms,
				   st.dcp.n_results);
	for (uint32_t i = 0; i < st.dcp.n_results; i++) {
		const struct km_dconfigs_dresult *d = &st.dcp.results[i];
		struct km_dconfigs_result res = {
			d->error_code, cstr(&d->error_message), d->type,
			d->name.s, d->n_configs,
		};

		km_dconfigs_resp_enc_result(w, v, &res);
		for (uint32_t k = 0; k < d->n_configs; k++) {
			const struct km_dconfigs_dentry *e =
				&st.dcp.entries[d->first + k];
			struct km_dconfigs_entry o = {
				e->name.s, cstr(&e->value), e->read_only,
				e->source, e->sensitive, syn, e->n_synonyms,
				e->config_type, cstr(&e->documentation),
			};

			for (uint32_t s = 0; s < e->n_synonyms; s++) {
				const struct km_dconfigs_dsyn *y =
					&st.dcp.synonyms[e->syn_first + s];

				syn[s] = (struct km_dconfigs_synonym){
					y->name.s, cstr(&y->value), y->source };
			}
			km_dconfigs_resp_enc_entry(w, v, &o);
		}
		km_dconfigs_resp_enc_result_end(w, v);
	}
	return km_dconfigs_resp_enc_end(w, v);
}

static int encode(struct km_wire_wr *w, int req, int16_t key, int16_t v)
{
	int rc = encode_group(w, req, key, v);

	if (rc != KM_EWIREAPIKEY)
		return rc;
	switch (key) {
	case KM_API_API_VERSIONS:
		return req ? km_apiversions_req_encode(w, v, &st.avq)
			   : km_apiversions_resp_encode(w, v, &st.avp);
	case KM_API_METADATA:
		return req ? km_metadata_req_encode(w, v, &st.mdq)
			   : km_metadata_resp_encode(w, v, &st.mdp);
	case KM_API_LIST_OFFSETS:
		return req ? km_listoffsets_req_encode(w, v, &st.loq)
			   : km_listoffsets_resp_encode(w, v, &st.lop);
	case KM_API_FETCH:
		return req ? km_fetch_req_encode(w, v, &st.ftq)
			   : encode_streamed(w, 0, v);
	case KM_API_PRODUCE:
		return req ? encode_streamed(w, 1, v)
			   : km_produce_resp_encode(w, v, &st.prp);
	case KM_API_INIT_PRODUCER_ID:
		return req ? km_initpid_req_encode(w, v, &st.ipq)
			   : km_initpid_resp_encode(w, v, &st.ipp);
	case KM_API_ADD_PARTITIONS_TO_TXN:
		return req ? km_addparts_req_encode(w, v, &st.apq)
			   : km_addparts_resp_encode(w, v, &st.app);
	case KM_API_END_TXN:
		return req ? km_endtxn_req_encode(w, v, &st.etq)
			   : km_txn_resp_encode(w, KM_API_END_TXN, v, &st.etp);
	case KM_API_ADD_OFFSETS_TO_TXN:
		return req ? km_addoffsets_req_encode(w, v, &st.aoq)
			   : km_txn_resp_encode(w, KM_API_ADD_OFFSETS_TO_TXN, v,
						&st.aop);
	case KM_API_TXN_OFFSET_COMMIT:
		return req ? km_txncommit_req_encode(w, v, &st.tcq)
			   : km_txncommit_resp_encode(w, v, &st.tcp);
	case KM_API_DESCRIBE_CONFIGS:
		return req ? km_dconfigs_req_encode(w, v, &st.dcq)
			   : encode_dconfigs_resp(w, v);
	case KM_API_DESCRIBE_CLUSTER:
		return req ? km_dcluster_req_encode(w, v, &st.dlq)
			   : km_dcluster_resp_encode(w, v, &st.dlp);
	}
	return KM_EWIREAPIKEY;
}

/* encode(decode(x)) is a fixed point after one step. */
static void check_reencode(int req, int16_t key, int16_t v)
{
	struct km_wire_wr w1, w2;
	struct km_wire_rd r;
	struct iovec iov;
	struct km_chain c = { &iov, 1 };
	int rc;

	km_wire_wr_init(&w1, out1, sizeof(out1));
	rc = encode(&w1, req, key, v);
	/* ListOffsets v0 can carry several old-style offsets; we keep one. */
	if (rc == KM_EWIREVALUE)
		return;
	KM_ASSERT(rc == 0);
	iov.iov_base = out1;
	iov.iov_len = w1.pos;
	km_wire_rd_init(&r, &c, km_chain_start(&c), (uint32_t)w1.pos,
			&km_wire_limits_default);
	rc = decode(&r, req, key, v);
	KM_ASSERT(rc == 0);
	km_wire_wr_init(&w2, out2, sizeof(out2));
	KM_ASSERT(encode(&w2, req, key, v) == 0);
	KM_ASSERT(w1.pos == w2.pos);
	KM_ASSERT(memcmp(out1, out2, w1.pos) == 0);
}

static void server(const struct km_chain *c, uint32_t size, int skip_prefix)
{
	struct km_chain_cur cur = km_chain_start(c);
	struct km_wire_rd r;
	struct km_reqhdr h;
	uint32_t body = size;
	int rc;

	if (!skip_prefix) {
		rc = km_wire_frame_parse(c, cur, 1u << 20, &body);
		if (rc <= 0)
			return;
		KM_ASSERT((uint32_t)rc <= size);
		KM_ASSERT(km_chain_advance(c, &cur, 4) == 0);
	}
	km_wire_rd_init(&r, c, cur, body, &km_wire_limits_default);
	rc = km_reqhdr_decode(&r, &h);
	if (rc < 0) {
		KM_ASSERT(rc < -4095);
		return;
	}
	KM_ASSERT(r.pos <= body);
	rc = decode(&r, 1, h.api_key, h.api_version);
	KM_ASSERT(rc <= 0);
	KM_ASSERT(r.pos <= body);
	if (rc == 0) {
		KM_ASSERT(r.pos == body);
		check_reencode(1, h.api_key, h.api_version);
	}
}

static const int16_t responses[][2] = {
	{ 18, 0 }, { 18, 1 }, { 18, 2 }, { 18, 3 },
	{ 3, 0 }, { 3, 1 }, { 3, 2 }, { 3, 3 }, { 3, 4 }, { 3, 5 }, { 3, 7 },
	{ 3, 8 }, { 3, 9 }, { 3, 10 }, { 3, 11 }, { 3, 12 },
	{ 1, 4 }, { 1, 5 }, { 1, 6 }, { 1, 7 }, { 1, 8 }, { 1, 9 }, { 1, 10 },
	{ 1, 11 },
	{ 2, 0 }, { 2, 1 }, { 2, 2 }, { 2, 3 }, { 2, 4 }, { 2, 5 }, { 2, 6 },
	{ 2, 9 },
	{ 0, 3 }, { 0, 5 }, { 0, 7 },
	{ 22, 0 }, { 22, 2 }, { 22, 4 },
	/* consumer groups: FindCoordinator, OffsetCommit, OffsetFetch,
	 * JoinGroup, Heartbeat, LeaveGroup, SyncGroup, DescribeGroups,
	 * ListGroups */
	{ 10, 0 }, { 10, 1 }, { 10, 2 },
	{ 8, 0 }, { 8, 1 }, { 8, 2 }, { 8, 3 }, { 8, 5 }, { 8, 6 }, { 8, 7 },
	{ 9, 0 }, { 9, 1 }, { 9, 2 }, { 9, 3 }, { 9, 5 }, { 9, 6 }, { 9, 7 },
	{ 11, 0 }, { 11, 1 }, { 11, 2 }, { 11, 5 },
	{ 12, 0 }, { 12, 1 }, { 12, 3 },
	{ 13, 0 }, { 13, 1 }, { 13, 3 },
	{ 14, 0 }, { 14, 1 }, { 14, 3 },
	{ 15, 0 }, { 15, 1 }, { 15, 3 }, { 15, 4 },
	{ 16, 0 }, { 16, 1 }, { 16, 3 }, { 16, 4 },
	/* DescribeConfigs, DescribeCluster */
	{ 32, 1 }, { 32, 3 }, { 32, 4 }, { 60, 0 }, { 60, 1 }, { 60, 2 },
	/* Fetch as a client of a source only (flexible; v13 by topic id):
	 * decoded, not encoded again (the encoder serves v4-11) */
	{ 1, 12 }, { 1, 13 },
};

static void client(const struct km_chain *c, uint32_t size, uint8_t mode)
{
	const int16_t *kv =
		responses[(mode & 0x7f) %
			  (sizeof(responses) / sizeof(responses[0]))];
	struct km_wire_rd r;
	int32_t corr;
	int rc;

	km_wire_rd_init(&r, c, km_chain_start(c), size,
			&km_wire_limits_default);
	if (km_resphdr_decode(&r, kv[0], kv[1], &corr) < 0)
		return;
	rc = decode(&r, 0, kv[0], kv[1]);
	KM_ASSERT(rc <= 0);
	if (rc == 0)
		KM_ASSERT(r.pos == size);
	if (rc == 0 && km_proto_check(kv[0], kv[1]) == 0)
		check_reencode(0, kv[0], kv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *a, *b;
	size_t cut;
	uint8_t mode;

	if (size < 2 || size > (1u << 20))
		return 0;
	cut = data[0], mode = data[1];
	data += 2, size -= 2;
	cut = size > 0 ? cut % (size + 1) : 0;
	/* Two separate blocks, so ASan sees a read past either. */
	a = malloc(cut + 1);
	b = malloc(size - cut + 1);
	memcpy(a, data, cut);
	memcpy(b, data + cut, size - cut);
	{
		struct iovec iov[2] = { { a, cut }, { b, size - cut } };
		struct km_chain c = { iov, 2 };

		if (mode & 0x80)
			client(&c, (uint32_t)size, mode);
		else
			server(&c, (uint32_t)size, (mode & 0x40) != 0);
	}
	free(a);
	free(b);
	return 0;
}
