/* The front-end's group coordinator (issue 7): FindCoordinator, JoinGroup,
 * SyncGroup, Heartbeat, LeaveGroup, ListGroups and DescribeGroups over the
 * membership state machine (dataplane/group/group.h); OffsetCommit and
 * OffsetFetch over the committed offsets (frontend_offsets.c). kmirrord is
 * a single broker, so it coordinates every group itself.
 *
 * A JoinGroup or SyncGroup answer may come later (the rebalance waits for
 * the other members): its slot stays PENDING and a ticket, listed on the
 * connection, finds it again; a closed connection withdraws its tickets.
 * Their responses reserve GROUP_RESP_BYTES: a leader's member list or an
 * assignment larger than that closes the connection with the reason.
 *
 * Nothing is allocated per request (frontend_group_pvt.h): the tables are
 * made by km_frontend_groups_init(). A JoinGroup offering more than
 * KM_GROUP_PROTOCOLS_MAX protocols, a SyncGroup carrying more than
 * KM_GROUP_MEMBERS_MAX assignments and a LeaveGroup naming more than
 * KM_GROUP_LEAVE_MAX members are answered INVALID_REQUEST, as the
 * coordinator answers a field over its bound; a DescribeGroups naming more
 * than KM_GROUP_DESCRIBE_GROUPS_MAX groups has no error field to carry
 * that (each group has its own) and closes the connection, naming the
 * limit.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "common/km_limits.h"
#include "common/log.h"
#include "dataplane/serve/frontend_group_pvt.h"
#include "kafka/proto_group.h"

#define GROUP_RESP_BYTES (64u * 1024)

/* The tables of the handlers below (one request at a time), and a ticket
 * per slot of every connection. */
struct fe_gmem {
	uint32_t span_used;			/* of fe->staging */
	struct fe_gticket *tickets;		/* conns_max * PIPELINE */
	struct km_leavegroup_member *leave_in;	/* KM_GROUP_LEAVE_MAX */
	struct km_group_leave_member *leave_members; /* KM_GROUP_LEAVE_MAX */
	int16_t *leave_errs;			/* KM_GROUP_LEAVE_MAX */
	struct km_group_member *join_members;	/* KM_GROUP_MEMBERS_MAX */
	struct km_group_member *sync_in;	/* KM_GROUP_MEMBERS_MAX */
	struct km_group_assignment *sync_assign; /* KM_GROUP_MEMBERS_MAX */
	struct km_group_overview *list_ov;	/* KM_GROUP_LIST_MAX */
	struct km_listgroups_group *list_out;	/* KM_GROUP_LIST_MAX */
	struct km_wire_name *desc_ids;		/* ..._DESCRIBE_GROUPS_MAX */
	struct km_descgroups_group *desc_groups; /* ..._DESCRIBE_GROUPS_MAX */
	struct km_descgroups_member *desc_members; /* _DESCRIBE_MEMBERS_MAX */
	struct km_group_member_view *desc_views; /* _DESCRIBE_MEMBERS_MAX */
};

void km_frontend_span_reset(struct km_frontend *fe)
{
	fe->gmem->span_used = 0;
}

const uint8_t *km_frontend_span_bytes(struct km_frontend *fe, const struct km_chain *ch,
			     const struct km_group_bytes *b)
{
	struct fe_gmem *gm = fe->gmem;
	uint8_t *p;

	if (b->len <= 0)
		return NULL;
	if ((p = km_chain_contig(ch, b->span.cur, (size_t)b->len)) != NULL)
		return p;
	/* Fields are disjoint parts of one request, which staging holds. */
	if ((uint32_t)b->len > fe->staging_bytes - gm->span_used)
		return NULL;
	p = fe->staging + gm->span_used;
	km_wire_span_copy(ch, &b->span, p, (size_t)b->len);
	gm->span_used += (uint32_t)b->len;
	return p;
}

static const char *name_or_null(const struct km_wire_name *n)
{
	return n->len < 0 ? NULL : n->s;
}

/* ---- tickets ---------------------------------------------------------------- */

/* The slot's own ticket: a slot waits for one answer at most. */
static struct fe_gticket *ticket_new(struct fe_conn *fc, uint32_t slot)
{
	struct km_frontend *fe = fc->fe;
	uint32_t conn = (uint32_t)(fc - fe->conns);
	struct fe_gticket *t;

	KM_ASSERT(conn < fe->conns_max);
	t = &fe->gmem->tickets[conn * KM_FRONTEND_PIPELINE + slot];
	KM_ASSERT(!t->used);
	*t = (struct fe_gticket){ .fc = fc, .slot = slot, .used = true };
	t->next = fc->gtickets;
	if (t->next)
		t->next->prev = t;
	fc->gtickets = t;
	return t;
}

static void ticket_free(struct fe_gticket *t)
{
	if (t->prev)
		t->prev->next = t->next;
	else
		t->fc->gtickets = t->next;
	if (t->next)
		t->next->prev = t->prev;
	t->used = false;
}

void km_frontend_groups_conn_closed(struct fe_conn *fc)
{
	while (fc->gtickets != NULL) {
		km_group_cancel(fc->fe->groups, fc->gtickets);
		ticket_free(fc->gtickets);
	}
}

/* ---- delayed answers -------------------------------------------------------- */

static void join_respond(struct fe_conn *fc, uint32_t slot,
			 const struct km_group_join_result *res)
{
	struct km_group_member *m = fc->fe->gmem->join_members;
	struct km_joingroup_resp r = { .error_code = res->error,
				       .generation_id = res->generation,
				       .members = m,
				       .members_max = res->n_members,
				       .n_members = res->n_members };
	struct km_wire_wr w;

	/* The coordinator's groups hold at most its members_max. */
	KM_ASSERT(res->n_members <= KM_GROUP_MEMBERS_MAX);
	km_wire_name_set(&r.protocol_name, res->protocol);
	km_wire_name_set(&r.leader, res->leader_id);
	km_wire_name_set(&r.member_id, res->member_id);
	for (uint32_t i = 0; i < res->n_members; i++) {
		const struct km_group_member_view *v = &res->members[i];

		km_wire_name_set(&m[i].member_id, v->member_id);
		if (v->instance_id)
			km_wire_name_set(&m[i].group_instance_id, v->instance_id);
		else
			km_wire_name_set_null(&m[i].group_instance_id);
		m[i].data = (struct km_group_bytes){ .p = v->metadata,
						     .len = (int32_t)v->metadata_len };
	}
	km_frontend_slot_begin(fc, slot, &w);
	km_joingroup_resp_encode(&w, fc->slots[slot].api_version, &r);
	km_frontend_slot_finish(fc, slot, &w, false);
}

static void on_join(void *arg, void *ticket,
		    const struct km_group_join_result *res)
{
	struct fe_gticket *t = ticket;

	(void)arg;
	join_respond(t->fc, t->slot, res);
	ticket_free(t);
}

static void on_sync(void *arg, void *ticket, int16_t error,
		    const uint8_t *assignment, uint32_t len)
{
	struct fe_gticket *t = ticket;
	struct fe_conn *fc = t->fc;
	struct km_syncgroup_resp r = { .error_code = error,
				       .assignment = { .p = assignment,
							       .len = (int32_t)len } };
	struct km_wire_wr w;

	(void)arg;
	km_frontend_slot_begin(fc, t->slot, &w);
	km_syncgroup_resp_encode(&w, fc->slots[t->slot].api_version, &r);
	km_frontend_slot_finish(fc, t->slot, &w, false);
	ticket_free(t);
}

/* ---- life cycle ------------------------------------------------------------- */

static void gmem_free(struct fe_gmem *gm)
{
	if (gm == NULL)
		return;
	free(gm->tickets);
	free(gm->leave_in);
	free(gm->leave_members);
	free(gm->leave_errs);
	free(gm->join_members);
	free(gm->sync_in);
	free(gm->sync_assign);
	free(gm->list_ov);
	free(gm->list_out);
	free(gm->desc_ids);
	free(gm->desc_groups);
	free(gm->desc_members);
	free(gm->desc_views);
	free(gm);
}

static int gmem_alloc(struct km_frontend *fe)
{
	struct fe_gmem *gm = calloc(1, sizeof(*gm));

	fe->gmem = gm;
	if (gm == NULL)
		return -ENOMEM;
	gm->tickets = calloc((size_t)fe->conns_max * KM_FRONTEND_PIPELINE,
			     sizeof(*gm->tickets));
	gm->leave_in = calloc(KM_GROUP_LEAVE_MAX, sizeof(*gm->leave_in));
	gm->leave_members = calloc(KM_GROUP_LEAVE_MAX, sizeof(*gm->leave_members));
	gm->leave_errs = calloc(KM_GROUP_LEAVE_MAX, sizeof(*gm->leave_errs));
	gm->join_members = calloc(KM_GROUP_MEMBERS_MAX, sizeof(*gm->join_members));
	gm->sync_in = calloc(KM_GROUP_MEMBERS_MAX, sizeof(*gm->sync_in));
	gm->sync_assign = calloc(KM_GROUP_MEMBERS_MAX, sizeof(*gm->sync_assign));
	gm->list_ov = calloc(KM_GROUP_LIST_MAX, sizeof(*gm->list_ov));
	gm->list_out = calloc(KM_GROUP_LIST_MAX, sizeof(*gm->list_out));
	gm->desc_ids = calloc(KM_GROUP_DESCRIBE_GROUPS_MAX, sizeof(*gm->desc_ids));
	gm->desc_groups = calloc(KM_GROUP_DESCRIBE_GROUPS_MAX,
				 sizeof(*gm->desc_groups));
	gm->desc_members = calloc(KM_GROUP_DESCRIBE_MEMBERS_MAX,
				  sizeof(*gm->desc_members));
	gm->desc_views = calloc(KM_GROUP_DESCRIBE_MEMBERS_MAX,
				sizeof(*gm->desc_views));
	if (!gm->tickets || !gm->leave_in || !gm->leave_members ||
	    !gm->leave_errs || !gm->join_members || !gm->sync_in ||
	    !gm->sync_assign || !gm->list_ov || !gm->list_out ||
	    !gm->desc_ids || !gm->desc_groups || !gm->desc_members ||
	    !gm->desc_views)
		return -ENOMEM;
	return 0;
}

int km_frontend_groups_init(struct km_frontend *fe, const struct km_frontend_config *cfg)
{
	struct km_group_config gc;
	int rc;

	if ((rc = gmem_alloc(fe)) < 0)
		return rc;

	km_group_config_default(&gc);
	if (cfg->group_initial_rebalance_delay_ms != UINT32_MAX)
		gc.initial_rebalance_delay_ms = cfg->group_initial_rebalance_delay_ms;
	if (cfg->group_min_session_timeout_ms)
		gc.session_timeout_min_ms = cfg->group_min_session_timeout_ms;
	if (cfg->group_max_session_timeout_ms)
		gc.session_timeout_max_ms = cfg->group_max_session_timeout_ms;
	gc.protocols_max = KM_GROUP_PROTOCOLS_MAX;
	gc.members_max = KM_GROUP_MEMBERS_MAX;
	/* An answer's bytes must fit its reserved response. */
	gc.metadata_bytes_max = GROUP_RESP_BYTES / 2;
	gc.on_join = on_join;
	gc.on_sync = on_sync;
	gc.cb_arg = fe;
	if ((rc = km_group_create(&gc, &fe->groups)) < 0)
		return rc;
	return km_frontend_offsets_init(fe);
}

void km_frontend_groups_free(struct km_frontend *fe)
{
	km_group_destroy(fe->groups);
	fe->groups = NULL;
	km_frontend_offsets_free(fe);
	gmem_free(fe->gmem);
	fe->gmem = NULL;
}

bool km_frontend_groups_active(struct km_frontend *fe, const char *group)
{
	return km_group_is_active(fe->groups, group);
}

void km_frontend_groups_tick(struct km_frontend *fe, uint64_t now_ms)
{
	if (now_ms >= km_group_next_deadline_ms(fe->groups))
		km_group_tick(fe->groups, now_ms);
}

uint64_t km_frontend_groups_deadline(const struct km_frontend *fe)
{
	return km_group_next_deadline_ms(fe->groups);
}

/* ---- FindCoordinator, Heartbeat, LeaveGroup ------------------------------- */

/* Encode a small, immediate answer. */
#define RESPOND(fc, h, bound, encode, msg)                                   \
	do {                                                                 \
		uint32_t slot_;                                              \
		struct km_wire_wr w_;                                        \
		int rc_ = km_frontend_slot_open(fc, h, bound, &slot_);                \
		if (rc_ != 0)                                                \
			return rc_;                                          \
		km_frontend_slot_begin(fc, slot_, &w_);                               \
		encode(&w_, (h)->api_version, msg);                          \
		return km_frontend_slot_finish(fc, slot_, &w_, true);                 \
	} while (0)

static int decode_failed(struct fe_conn *fc, const struct km_reqhdr *h, int rc)
{
	return km_frontend_conn_fail(fc, "malformed %s v%d request: %s",
			    km_proto_api_name(h->api_key), h->api_version,
			    km_strerror(rc));
}

/* KafkaApis: the group APIs need Read on the group (Describe for
 * FindCoordinator, DescribeGroups and ListGroups), else
 * GROUP_AUTHORIZATION_FAILED. */
static bool group_allowed(struct fe_conn *fc, enum km_acl_op op,
			  const char *group)
{
	return km_frontend_allowed(fc, op, KM_ACL_RES_GROUP, group);
}

/* FindCoordinator: Describe on the group or the transactional id. */
static int16_t findcoord_denied(struct fe_conn *fc,
				const struct km_findcoord_req *q)
{
	if (q->key_type == 0 &&
	    !group_allowed(fc, KM_ACL_OP_DESCRIBE, q->key.s))
		return KM_KERR_GROUP_AUTHORIZATION_FAILED;
	if (q->key_type == 1 &&
	    !km_frontend_allowed(fc, KM_ACL_OP_DESCRIBE, KM_ACL_RES_TXNID,
				 q->key.s))
		return KM_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
	return KM_KERR_NONE;
}

static int handle_findcoord(struct fe_conn *fc, const struct km_reqhdr *h,
			    struct km_wire_rd *r)
{
	struct km_frontend *fe = fc->fe;
	struct km_findcoord_req q;
	struct km_findcoord_resp m = { .node_id = fe->node_id,
				       .port = km_frontend_adv_port(fc) };
	int rc = km_findcoord_req_decode(r, h->api_version, &q);

	if (rc < 0)
		return decode_failed(fc, h, rc);
	km_wire_name_set(&m.host, km_frontend_adv_host(fc));
	km_wire_name_set_null(&m.error_message);
	m.error_code = findcoord_denied(fc, &q);
	if (m.error_code == KM_KERR_NONE && q.key_type != 0 &&
	    (q.key_type != 1 || !km_frontend_txn_enabled(fe)))
		/* Transactions are coordinated here only when the daemon
		 * writes their markers (frontend_txn.c). */
		m.error_code = KM_KERR_COORDINATOR_NOT_AVAILABLE;
	if (m.error_code != KM_KERR_NONE) {
		m.node_id = -1;
		m.port = -1;
		km_wire_name_set(&m.host, "");
	}
	RESPOND(fc, h, 64 + KM_WIRE_NAME_BYTES_MAX, km_findcoord_resp_encode, &m);
}

static int handle_heartbeat(struct fe_conn *fc, const struct km_reqhdr *h,
			    struct km_wire_rd *r)
{
	struct km_heartbeat_req q;
	struct km_heartbeat_resp m = { 0 };
	int rc = km_heartbeat_req_decode(r, h->api_version, &q);

	if (rc < 0)
		return decode_failed(fc, h, rc);
	if (!group_allowed(fc, KM_ACL_OP_READ, q.group_id.s)) {
		m.error_code = KM_KERR_GROUP_AUTHORIZATION_FAILED;
		RESPOND(fc, h, 32, km_heartbeat_resp_encode, &m);
	}
	m.error_code = km_group_heartbeat(fc->fe->groups, q.group_id.s,
					  q.member_id.s,
					  name_or_null(&q.group_instance_id),
					  q.generation_id, km_frontend_now_ms());
	RESPOND(fc, h, 32, km_heartbeat_resp_encode, &m);
}

/* A request over one of the bounds of the tables above: answered as the
 * coordinator answers a field over its bound (km_group_join, _sync). */
static void warn_over(struct fe_conn *fc, const struct km_reqhdr *h,
		      uint32_t limit, const char *what)
{
	KM_WARN("frontend", "connection %u (client id \"%s\"): %s v%d with "
		"more than %u %s: answered INVALID_REQUEST", fc->id,
		fc->client_id, km_proto_api_name(h->api_key), h->api_version, limit,
		what);
}

static int handle_leave(struct fe_conn *fc, const struct km_reqhdr *h,
			struct km_wire_rd *r)
{
	struct fe_gmem *gm = fc->fe->gmem;
	struct km_leavegroup_member *mem = gm->leave_in;
	struct km_leavegroup_req q = { .members = mem,
				       .members_max = KM_GROUP_LEAVE_MAX };
	struct km_leavegroup_resp m = { .members = mem,
					.members_max = KM_GROUP_LEAVE_MAX };
	int rc = km_leavegroup_req_decode(r, h->api_version, &q);

	if (rc == KM_EWIRECAPACITY) {
		warn_over(fc, h, KM_GROUP_LEAVE_MAX, "members");
		m.error_code = KM_KERR_INVALID_REQUEST;
		RESPOND(fc, h, 32, km_leavegroup_resp_encode, &m);
	}
	if (rc < 0)
		return decode_failed(fc, h, rc);
	if (!group_allowed(fc, KM_ACL_OP_READ, q.group_id.s)) {
		m.error_code = KM_KERR_GROUP_AUTHORIZATION_FAILED;
		RESPOND(fc, h, 32, km_leavegroup_resp_encode, &m);
	}
	for (uint32_t i = 0; i < q.n_members; i++)
		gm->leave_members[i] = (struct km_group_leave_member){
			mem[i].member_id.s, name_or_null(&mem[i].group_instance_id)
		};
	m.error_code = km_group_leave(fc->fe->groups, q.group_id.s,
				      gm->leave_members, q.n_members,
				      gm->leave_errs, km_frontend_now_ms());
	for (uint32_t i = 0; i < q.n_members; i++)
		mem[i].error_code = gm->leave_errs[i];
	if (h->api_version < 3 && m.error_code == KM_KERR_NONE && q.n_members)
		m.error_code = gm->leave_errs[0];
	m.n_members = h->api_version >= 3 ? q.n_members : 0;
	RESPOND(fc, h, 32 + m.n_members * (2 * (KM_WIRE_NAME_BYTES_MAX + 3) + 4),
		km_leavegroup_resp_encode, &m);
}

/* ---- JoinGroup, SyncGroup ---------------------------------------------------- */

/* Open the slot of a delayed answer and its ticket. @return 0, FE_WAIT, or
 * a negative code. */
static int open_delayed(struct fe_conn *fc, const struct km_reqhdr *h,
			struct fe_gticket **t)
{
	uint32_t bound = GROUP_RESP_BYTES < fc->fe->conn_buf_bytes / 2
				 ? GROUP_RESP_BYTES : fc->fe->conn_buf_bytes / 2;
	uint32_t slot;
	int rc = km_frontend_slot_open(fc, h, bound, &slot);

	if (rc != 0)
		return rc;
	*t = ticket_new(fc, slot);
	return 0;
}

/* JoinGroup's answer to a request over a bound or refused: Kafka's
 * joinError shape. */
static int join_refused(struct fe_conn *fc, const struct km_reqhdr *h,
			const struct km_joingroup_req *q, int16_t err)
{
	struct km_group_join_result res = {
		.error = err, .generation = -1,
		.protocol_type = "", .protocol = "", .leader_id = "",
		.member_id = q->member_id.len > 0 ? q->member_id.s : "",
	};
	uint32_t slot;
	int rc = km_frontend_slot_open(fc, h, 64 + 3 * (KM_WIRE_NAME_BYTES_MAX + 4),
			      &slot);

	if (rc != 0)
		return rc;
	if (err == KM_KERR_INVALID_REQUEST)
		warn_over(fc, h, KM_GROUP_PROTOCOLS_MAX, "protocols");
	join_respond(fc, slot, &res);
	return 0;
}

static int handle_join(struct fe_conn *fc, const struct km_reqhdr *h,
		       struct km_wire_rd *r)
{
	struct km_joingroup_protocol wp[KM_GROUP_PROTOCOLS_MAX];
	struct km_group_protocol gp[KM_GROUP_PROTOCOLS_MAX];
	struct km_joingroup_req q = { .protocols = wp,
				      .protocols_max = KM_GROUP_PROTOCOLS_MAX };
	struct km_group_join_req jr;
	struct fe_gticket *t;
	int rc = km_joingroup_req_decode(r, h->api_version, &q);

	if (rc == KM_EWIRECAPACITY)
		return join_refused(fc, h, &q, KM_KERR_INVALID_REQUEST);
	if (rc < 0)
		return decode_failed(fc, h, rc);
	if (!group_allowed(fc, KM_ACL_OP_READ, q.group_id.s))
		return join_refused(fc, h, &q,
				    KM_KERR_GROUP_AUTHORIZATION_FAILED);
	km_frontend_span_reset(fc->fe);
	for (uint32_t i = 0; i < q.n_protocols; i++)
		gp[i] = (struct km_group_protocol){
			wp[i].name.s, km_frontend_span_bytes(fc->fe, r->chain, &wp[i].metadata),
			wp[i].metadata.len > 0 ? (uint32_t)wp[i].metadata.len : 0
		};
	jr = (struct km_group_join_req){
		.group_id = q.group_id.s, .member_id = q.member_id.s,
		.instance_id = name_or_null(&q.group_instance_id),
		.client_id = fc->client_id, .client_host = fc->client_host,
		.session_timeout_ms = q.session_timeout_ms,
		.rebalance_timeout_ms = q.rebalance_timeout_ms,
		.protocol_type = q.protocol_type.s, .protocols = gp,
		.n_protocols = q.n_protocols, .version = h->api_version,
	};
	if ((rc = open_delayed(fc, h, &t)) == 0 &&
	    (rc = km_group_join(fc->fe->groups, &jr, t, km_frontend_now_ms())) < 0) {
		ticket_free(t);
		rc = km_frontend_conn_fail(fc, "JoinGroup: %s", km_strerror(rc));
	}
	return rc;
}

static int handle_sync(struct fe_conn *fc, const struct km_reqhdr *h,
		       struct km_wire_rd *r)
{
	struct fe_gmem *gm = fc->fe->gmem;
	struct km_group_member *wa = gm->sync_in;
	struct km_group_assignment *ga = gm->sync_assign;
	struct km_syncgroup_req q = { .assignments = wa,
				      .assignments_max = KM_GROUP_MEMBERS_MAX };
	struct km_syncgroup_resp m = { .error_code = KM_KERR_INVALID_REQUEST };
	struct km_group_sync_req sr;
	struct fe_gticket *t;
	int rc = km_syncgroup_req_decode(r, h->api_version, &q);

	if (rc == KM_EWIRECAPACITY) {
		warn_over(fc, h, KM_GROUP_MEMBERS_MAX, "assignments");
		RESPOND(fc, h, 32, km_syncgroup_resp_encode, &m);
	}
	if (rc < 0)
		return decode_failed(fc, h, rc);
	if (!group_allowed(fc, KM_ACL_OP_READ, q.group_id.s)) {
		m.error_code = KM_KERR_GROUP_AUTHORIZATION_FAILED;
		RESPOND(fc, h, 32, km_syncgroup_resp_encode, &m);
	}
	km_frontend_span_reset(fc->fe);
	for (uint32_t i = 0; i < q.n_assignments; i++)
		ga[i] = (struct km_group_assignment){
			wa[i].member_id.s, km_frontend_span_bytes(fc->fe, r->chain, &wa[i].data),
			wa[i].data.len > 0 ? (uint32_t)wa[i].data.len : 0
		};
	sr = (struct km_group_sync_req){
		.group_id = q.group_id.s, .member_id = q.member_id.s,
		.instance_id = name_or_null(&q.group_instance_id),
		.generation = q.generation_id, .assignments = ga,
		.n_assignments = q.n_assignments,
	};
	if ((rc = open_delayed(fc, h, &t)) == 0 &&
	    (rc = km_group_sync(fc->fe->groups, &sr, t, km_frontend_now_ms())) < 0) {
		ticket_free(t);
		rc = km_frontend_conn_fail(fc, "SyncGroup: %s", km_strerror(rc));
	}
	return rc;
}

/* ---- ListGroups, DescribeGroups -------------------------------------------- */

/* Groups known only by their committed offsets (synced from the source, or
 * whose members are gone after a restart) are Empty groups to Kafka's
 * tools, as in Kafka: listed, and described as Empty with no members. */
struct offset_groups {
	struct km_group_overview *ov;
	uint32_t n, cap;
	const struct km_group *g;
};

static void add_offset_group(void *arg, const char *group, const char *topic,
			     int32_t partition, const struct km_goffset *o)
{
	struct offset_groups *x = arg;

	(void)topic;
	(void)partition;
	(void)o;
	if (x->n == x->cap || km_group_is_active(x->g, group))
		return;
	for (uint32_t i = 0; i < x->n; i++)
		if (strcmp(x->ov[i].group_id, group) == 0)
			return;
	x->ov[x->n++] = (struct km_group_overview){ group, "", "Empty" };
}

static uint32_t list_all(struct km_frontend *fe, struct km_group_overview *ov)
{
	uint32_t n = km_group_list(fe->groups, ov, KM_GROUP_LIST_MAX);
	struct offset_groups x = { ov, n < KM_GROUP_LIST_MAX ? n : KM_GROUP_LIST_MAX,
				   KM_GROUP_LIST_MAX, fe->groups };

	if (km_frontend_offsets_ready(fe) == KM_KERR_NONE)
		km_goffsets_each(fe->go.table, NULL, add_offset_group, &x);
	return x.n;
}

static void count_only(void *arg, const char *group, const char *topic,
		       int32_t partition, const struct km_goffset *o)
{
	(void)arg, (void)group, (void)topic, (void)partition, (void)o;
}

static bool has_offsets(struct km_frontend *fe, const char *group)
{
	return km_frontend_offsets_ready(fe) == KM_KERR_NONE &&
	       km_goffsets_each(fe->go.table, group, count_only, NULL) > 0;
}

/* Every group here is a classic group (kmirrord serves no
 * ConsumerGroupHeartbeat): Kafka's GroupType names are matched ignoring
 * case, as its coordinator parses them. */
static bool type_kept(const struct km_listgroups_req *q)
{
	bool keep = q->n_types == 0;

	for (uint32_t k = 0; k < q->n_types; k++)
		keep |= strcasecmp(q->types_filter[k].s, "classic") == 0;
	return keep;
}

static int handle_list(struct fe_conn *fc, const struct km_reqhdr *h,
		       struct km_wire_rd *r)
{
	struct km_wire_name states[8], types[8];
	struct km_listgroups_req q = { .states_filter = states, .states_max = 8,
				       .types_filter = types, .types_max = 8 };
	struct km_group_overview *ov = fc->fe->gmem->list_ov;
	struct km_listgroups_group *g = fc->fe->gmem->list_out;
	struct km_listgroups_resp m = { .groups = g,
					.groups_max = KM_GROUP_LIST_MAX };
	uint32_t n, slot;
	struct km_wire_wr w;
	bool all;
	int rc = km_listgroups_req_decode(r, h->api_version, &q);

	if (rc < 0)
		return decode_failed(fc, h, rc);
	n = type_kept(&q) ? list_all(fc->fe, ov) : 0;
	/* Kafka: every group with Describe on the cluster, else those the
	 * principal may Describe. */
	all = km_frontend_acl_sees(fc, KM_ACL_OP_DESCRIBE, KM_ACL_RES_CLUSTER,
				   KM_ACL_CLUSTER_NAME);
	for (uint32_t i = 0; i < n; i++) {
		bool keep = q.n_states == 0;

		if (!all && !km_frontend_acl_sees(fc, KM_ACL_OP_DESCRIBE,
						  KM_ACL_RES_GROUP,
						  ov[i].group_id))
			continue;
		for (uint32_t k = 0; k < q.n_states; k++)
			keep |= strcmp(states[k].s, ov[i].state) == 0;
		if (!keep)
			continue;
		km_wire_name_set(&g[m.n_groups].group_id, ov[i].group_id);
		km_wire_name_set(&g[m.n_groups].protocol_type, ov[i].protocol_type);
		km_wire_name_set(&g[m.n_groups].group_type, "classic");
		km_wire_name_set(&g[m.n_groups++].group_state, ov[i].state);
	}
	rc = km_frontend_slot_open(fc, h, 32 + m.n_groups * 4 * (KM_WIRE_NAME_BYTES_MAX + 4),
			  &slot);
	if (rc == 0) {
		km_frontend_slot_begin(fc, slot, &w);
		km_listgroups_resp_encode(&w, h->api_version, &m);
		rc = km_frontend_slot_finish(fc, slot, &w, true);
	}
	return rc;
}

/* One group of a DescribeGroups answer; *bound grows by what it adds. */
static void describe_one(struct km_frontend *fe, const struct km_wire_name *id,
			 struct km_descgroups_resp *m,
			 struct km_group_member_view *views, uint32_t *bound)
{
	struct km_descgroups_group *g = &m->groups[m->n_groups++];
	struct km_group_description d;
	uint32_t room = m->members_max - m->n_members;
	int n = km_group_describe(fe->groups, id->s, &d, views, room);

	memset(g, 0, sizeof(*g));
	g->group_id = *id;
	g->authorized_operations = KM_GROUP_AUTH_OPS_UNSET;
	g->first = m->n_members;
	if ((n < 0 || d.state == KM_GROUP_DEAD) && has_offsets(fe, id->s)) {
		km_wire_name_set(&g->group_state, "Empty");
		km_wire_name_set(&g->protocol_type, "");
		km_wire_name_set(&g->protocol_data, "");
		*bound += 4 * (KM_WIRE_NAME_BYTES_MAX + 4) + 16;
		return;
	}
	km_wire_name_set(&g->group_state, n < 0 ? "Dead" : d.state_name);
	km_wire_name_set(&g->protocol_type, n < 0 ? "" : d.protocol_type);
	km_wire_name_set(&g->protocol_data, n < 0 ? "" : d.protocol);
	*bound += 4 * (KM_WIRE_NAME_BYTES_MAX + 4) + 16;
	for (int i = 0; i < n && (uint32_t)i < room; i++) {
		struct km_descgroups_member *dm = &m->members[m->n_members++];
		const struct km_group_member_view *v = &views[i];

		km_wire_name_set(&dm->member_id, v->member_id);
		if (v->instance_id)
			km_wire_name_set(&dm->group_instance_id, v->instance_id);
		else
			km_wire_name_set_null(&dm->group_instance_id);
		km_wire_name_set(&dm->client_id, v->client_id);
		km_wire_name_set(&dm->client_host, v->client_host);
		dm->metadata = (struct km_group_bytes){ .p = v->metadata,
							.len = (int32_t)v->metadata_len };
		dm->assignment = (struct km_group_bytes){ .p = v->assignment,
							  .len = (int32_t)v->assignment_len };
		*bound += 5 * (KM_WIRE_NAME_BYTES_MAX + 4) + v->metadata_len +
			  v->assignment_len;
		g->count++;
	}
}

/* Kafka's DescribeGroupsResponse.groupError: the error, empty fields. */
static void describe_denied(const struct km_wire_name *id,
			    struct km_descgroups_resp *m, uint32_t *bound)
{
	struct km_descgroups_group *g = &m->groups[m->n_groups++];

	memset(g, 0, sizeof(*g));
	g->error_code = KM_KERR_GROUP_AUTHORIZATION_FAILED;
	g->group_id = *id;
	g->authorized_operations = KM_GROUP_AUTH_OPS_UNSET;
	g->first = m->n_members;
	km_wire_name_set(&g->group_state, "");
	km_wire_name_set(&g->protocol_type, "");
	km_wire_name_set(&g->protocol_data, "");
	*bound += 4 * (KM_WIRE_NAME_BYTES_MAX + 4) + 16;
}

static int handle_describe(struct fe_conn *fc, const struct km_reqhdr *h,
			   struct km_wire_rd *r)
{
	struct fe_gmem *gm = fc->fe->gmem;
	struct km_descgroups_req q = {
		.groups = gm->desc_ids, .groups_max = KM_GROUP_DESCRIBE_GROUPS_MAX
	};
	struct km_descgroups_resp m = {
		.groups = gm->desc_groups,
		.groups_max = KM_GROUP_DESCRIBE_GROUPS_MAX,
		.members = gm->desc_members,
		.members_max = KM_GROUP_DESCRIBE_MEMBERS_MAX
	};
	uint32_t bound = 32, slot;
	struct km_wire_wr w;
	int rc = km_descgroups_req_decode(r, h->api_version, &q);

	if (rc == KM_EWIRECAPACITY)
		return km_frontend_conn_fail(fc, "DescribeGroups v%d names more than %u "
				    "groups (its answer has no error field "
				    "for that)", h->api_version,
				    KM_GROUP_DESCRIBE_GROUPS_MAX);
	if (rc < 0)
		return decode_failed(fc, h, rc);
	/* Each group's views stay valid until the next non-query call:
	 * they are all encoded below, before any. */
	for (uint32_t i = 0; i < q.n_groups; i++) {
		if (!group_allowed(fc, KM_ACL_OP_DESCRIBE, gm->desc_ids[i].s)) {
			describe_denied(&gm->desc_ids[i], &m, &bound);
			continue;
		}
		describe_one(fc->fe, &gm->desc_ids[i], &m,
			     gm->desc_views + m.n_members, &bound);
	}
	if ((rc = km_frontend_slot_open(fc, h, bound, &slot)) == 0) {
		km_frontend_slot_begin(fc, slot, &w);
		km_descgroups_resp_encode(&w, h->api_version, &m);
		rc = km_frontend_slot_finish(fc, slot, &w, true);
	}
	return rc;
}

int km_frontend_handle_group(struct fe_conn *fc, const struct km_reqhdr *h,
		    struct km_wire_rd *r)
{
	switch (h->api_key) {
	case KM_API_FIND_COORDINATOR:
		return handle_findcoord(fc, h, r);
	case KM_API_JOIN_GROUP:
		return handle_join(fc, h, r);
	case KM_API_SYNC_GROUP:
		return handle_sync(fc, h, r);
	case KM_API_HEARTBEAT:
		return handle_heartbeat(fc, h, r);
	case KM_API_LEAVE_GROUP:
		return handle_leave(fc, h, r);
	case KM_API_LIST_GROUPS:
		return handle_list(fc, h, r);
	case KM_API_DESCRIBE_GROUPS:
		return handle_describe(fc, h, r);
	case KM_API_OFFSET_COMMIT:
		return km_frontend_handle_offset_commit(fc, h, r);
	case KM_API_OFFSET_FETCH:
		return km_frontend_handle_offset_fetch(fc, h, r);
	default:
		return km_frontend_conn_fail(fc, "API key %d is not a group API",
				    h->api_key);
	}
}
