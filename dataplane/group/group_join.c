/* Consumer-group coordinator: JoinGroup (Kafka's handleJoinGroup,
 * doUnknownJoinGroup, doJoinGroup, KIP-345 static members, KIP-394
 * MEMBER_ID_REQUIRED). */
#include <stdlib.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/km_assert.h"
#include "common/uuid.h"
#include "dataplane/group/group_pvt.h"

static int16_t protocols_valid(const struct km_group *g,
			       const struct km_group_join_req *r)
{
	if (r->protocol_type == NULL || r->protocol_type[0] == '\0' ||
	    r->n_protocols == 0 || r->protocols == NULL)
		return KM_GROUP_ERR_INCONSISTENT_GROUP_PROTOCOL;
	if (!km_group_name_ok(r->protocol_type) || r->n_protocols > g->cfg.protocols_max)
		return KM_GROUP_ERR_INVALID_REQUEST;
	for (uint32_t i = 0; i < r->n_protocols; i++) {
		const struct km_group_protocol *p = &r->protocols[i];

		if (!km_group_name_ok(p->name) ||
		    p->metadata_len > g->cfg.metadata_bytes_max ||
		    (p->metadata_len > 0 && p->metadata == NULL))
			return KM_GROUP_ERR_INVALID_REQUEST;
	}
	return KM_GROUP_ERR_NONE;
}

/* handleJoinGroup's checks before the group is looked at. */
static int16_t join_validate(const struct km_group *g,
			     const struct km_group_join_req *r)
{
	const char *mid = r->member_id == NULL ? "" : r->member_id;

	if (!km_group_name_ok(r->group_id))
		return KM_GROUP_ERR_INVALID_GROUP_ID;
	if (r->session_timeout_ms < 0 ||
	    (uint32_t)r->session_timeout_ms < g->cfg.session_timeout_min_ms ||
	    (uint32_t)r->session_timeout_ms > g->cfg.session_timeout_max_ms)
		return KM_GROUP_ERR_INVALID_SESSION_TIMEOUT;
	if (strnlen(mid, NAME_CAP) > KM_GROUP_NAME_BYTES_MAX)
		return KM_GROUP_ERR_UNKNOWN_MEMBER_ID;
	if (r->instance_id != NULL && !km_group_name_ok(r->instance_id))
		return KM_GROUP_ERR_INVALID_REQUEST;
	return protocols_valid(g, r);
}

/* Kafka's supportsProtocols, against the members other than self: same
 * protocol type, and one of the offered protocols every one supports. */
static bool supports(const struct grp *gr, const struct km_group_join_req *r,
		     const struct gmember *self)
{
	uint32_t others = gr->n_members - (self != NULL);

	if (others == 0)
		return true;
	if (strcmp(gr->protocol_type, r->protocol_type) != 0)
		return false;
	for (uint32_t k = 0; k < r->n_protocols; k++) {
		uint32_t n = 0;

		for (uint32_t i = 0; i < gr->n_members; i++) {
			const struct gmember *m = &gr->members[i];

			n += m != self && km_group_proto_of(m, r->protocols[k].name);
		}
		if (n == others)
			return true;
	}
	return false;
}

static bool grp_full(const struct km_group *g, const struct grp *gr)
{
	return gr->n_members + gr->n_pending >= g->cfg.members_max;
}

/* Kafka's generateMemberId: clientId (or group.instance.id) + "-" + a
 * random UUID, cut so the whole id fits the name bound. */
static int new_member_id(const char *prefix, char out[NAME_CAP])
{
	char uuid[KM_UUID_CHARS + 1];
	int rc = km_uuid_random(uuid);
	int keep = KM_GROUP_NAME_BYTES_MAX - 1 - (int)KM_UUID_CHARS;

	if (rc < 0)
		return rc;
	snprintf(out, NAME_CAP, "%.*s-%s", keep, prefix == NULL ? "" : prefix,
		 uuid);
	return 0;
}

static int add_member(struct km_group *g, struct grp *gr,
		      const struct km_group_join_req *r, const char *id,
		      void *ticket, uint64_t now_ms)
{
	struct gpending *p = km_group_pend_find(gr, id);
	struct gproto *protos;
	struct gmember *m;

	if (km_group_members_reserve(gr, gr->n_members + 1) < 0)
		return -ENOMEM;
	protos = km_group_protos_copy(r);
	if (protos == NULL)
		return -ENOMEM;
	if (p != NULL)
		km_group_pend_remove(gr, p);
	if (gr->n_members == 0)
		km_group_copy_cut(gr->protocol_type, r->protocol_type);
	m = &gr->members[gr->n_members++];
	memset(m, 0, sizeof(*m));
	km_group_copy_cut(m->id, id);
	m->is_static = r->instance_id != NULL;
	km_group_copy_cut(m->instance, r->instance_id);
	km_group_member_set_protos(m, protos, r);
	m->is_new = true;
	m->is_leader = km_group_leader_of(gr) == NULL;
	m->last_hb_ms = now_ms;
	if (gr->state == KM_GROUP_PREPARING_REBALANCE && gr->initial)
		gr->new_member_added = true;
	km_group_set_join_ticket(g, m, ticket);
	km_group_maybe_rebalance(g, gr, now_ms);
	return 0;
}

static int add_pending(struct km_group *g, struct grp *gr,
		       const struct km_group_join_req *r, const char *id,
		       void *ticket, uint64_t now_ms)
{
	struct gpending *p;

	if (gr->n_pending == gr->cap_pending) {
		uint32_t cap = gr->cap_pending == 0 ? 4 : gr->cap_pending * 2;
		struct gpending *np = realloc(gr->pending, cap * sizeof(*np));

		if (np == NULL)
			return -ENOMEM;
		gr->pending = np;
		gr->cap_pending = cap;
	}
	p = &gr->pending[gr->n_pending++];
	km_group_copy_cut(p->id, id);
	p->deadline_ms = now_ms + (uint32_t)r->session_timeout_ms;
	km_group_answer_join_error(g, ticket, KM_GROUP_ERR_MEMBER_ID_REQUIRED, p->id);
	return 0;
}

/* Stable: no rebalance if the vote would keep the protocol; the answer
 * names the leader as it was, so a replaced leader's successor does not
 * compute an assignment nobody would receive. */
static void static_rejoined(struct km_group *g, struct grp *gr,
			    struct gmember *m, void *ticket, uint64_t now_ms,
			    const char *leader_before)
{
	char next[NAME_CAP];

	if (gr->state == KM_GROUP_STABLE && km_group_vote(gr, next) &&
	    strcmp(next, gr->protocol) == 0) {
		km_group_answer_current(g, gr, m, ticket, leader_before);
		return;
	}
	km_group_set_join_ticket(g, m, ticket);
	if (gr->state != KM_GROUP_PREPARING_REBALANCE)
		km_group_prepare_rebalance(g, gr, now_ms);
}

/* KIP-345: a known group.instance.id with member id "" takes the old
 * member's place (and assignment) under a new id; the old id is fenced. */
static int replace_static(struct km_group *g, struct grp *gr,
			  struct gmember *old, const struct km_group_join_req *r,
			  void *ticket, uint64_t now_ms)
{
	char id[NAME_CAP], leader_before[NAME_CAP];
	struct gproto *protos;
	struct gmember *l = km_group_leader_of(gr);
	int rc = new_member_id(r->instance_id, id);

	if (rc < 0)
		return rc;
	protos = km_group_protos_copy(r);
	if (protos == NULL)
		return -ENOMEM;
	km_group_copy_cut(leader_before, l == NULL ? "" : l->id);
	if (old->join_ticketed)
		km_group_answer_join_error(g, old->join_ticket,
				  KM_GROUP_ERR_FENCED_INSTANCE_ID, old->id);
	if (old->awaiting_sync)
		km_group_answer_sync(g, old->sync_ticket,
			    KM_GROUP_ERR_FENCED_INSTANCE_ID, NULL, 0);
	old->join_ticketed = false;
	old->awaiting_sync = false;
	km_group_copy_cut(old->id, id);
	km_group_member_set_protos(old, protos, r);
	old->last_hb_ms = now_ms;
	KM_ASSERT(gr->state != KM_GROUP_EMPTY);
	static_rejoined(g, gr, old, ticket, now_ms, leader_before);
	return 0;
}

static int join_unknown(struct km_group *g, struct grp *gr,
			const struct km_group_join_req *r, void *ticket,
			uint64_t now_ms)
{
	struct gmember *old = km_group_mem_find_static(gr, r->instance_id);
	char id[NAME_CAP];
	int rc;

	if (old == NULL && grp_full(g, gr)) {
		km_group_answer_join_error(g, ticket,
				  KM_GROUP_ERR_GROUP_MAX_SIZE_REACHED, "");
		return 0;
	}
	if (!supports(gr, r, old)) {
		km_group_answer_join_error(g, ticket,
				  KM_GROUP_ERR_INCONSISTENT_GROUP_PROTOCOL, "");
		return 0;
	}
	if (old != NULL)
		return replace_static(g, gr, old, r, ticket, now_ms);
	rc = new_member_id(r->instance_id != NULL ? r->instance_id :
						    r->client_id, id);
	if (rc < 0)
		return rc;
	if (r->instance_id == NULL && r->version >= 4)
		return add_pending(g, gr, r, id, ticket, now_ms);
	return add_member(g, gr, r, id, ticket, now_ms);
}

/* doJoinGroup for a current member, by state. */
static int join_existing(struct km_group *g, struct grp *gr, struct gmember *m,
			 const struct km_group_join_req *r, void *ticket,
			 uint64_t now_ms)
{
	bool same = km_group_protos_match(m, r);
	struct gmember *l = km_group_leader_of(gr);
	struct gproto *protos;

	if ((gr->state == KM_GROUP_COMPLETING_REBALANCE && same) ||
	    (gr->state == KM_GROUP_STABLE && same && !m->is_leader)) {
		m->last_hb_ms = now_ms;
		km_group_answer_current(g, gr, m, ticket, l == NULL ? "" : l->id);
		return 0;
	}
	protos = km_group_protos_copy(r);
	if (protos == NULL)
		return -ENOMEM;
	m->last_hb_ms = now_ms;
	km_group_member_set_protos(m, protos, r);
	km_group_set_join_ticket(g, m, ticket);
	km_group_maybe_rebalance(g, gr, now_ms);
	return 0;
}

static int join_known(struct km_group *g, struct grp *gr,
		      const struct km_group_join_req *r, const char *mid,
		      void *ticket, uint64_t now_ms)
{
	struct gmember *m = km_group_mem_find(gr, mid);
	int16_t err = KM_GROUP_ERR_NONE;

	if (!supports(gr, r, m))
		err = KM_GROUP_ERR_INCONSISTENT_GROUP_PROTOCOL;
	else if (r->instance_id == NULL && km_group_pend_find(gr, mid) != NULL)
		return add_member(g, gr, r, mid, ticket, now_ms);
	else if (km_group_is_fenced(gr, mid, r->instance_id))
		err = KM_GROUP_ERR_FENCED_INSTANCE_ID;
	else if (m == NULL || (r->instance_id != NULL &&
				   km_group_mem_find_static(gr, r->instance_id) == NULL))
		err = KM_GROUP_ERR_UNKNOWN_MEMBER_ID;
	if (err != KM_GROUP_ERR_NONE) {
		km_group_answer_join_error(g, ticket, err, mid);
		return 0;
	}
	return join_existing(g, gr, m, r, ticket, now_ms);
}

int km_group_join(struct km_group *g, const struct km_group_join_req *r,
		  void *ticket, uint64_t now_ms)
{
	const char *mid = r->member_id == NULL ? "" : r->member_id;
	int16_t err = join_validate(g, r);
	struct grp *gr;
	bool created = false;
	int rc;

	KM_ASSERT(!g->in_cb);
	gr = err == KM_GROUP_ERR_NONE ? km_group_find(g, r->group_id) : NULL;
	if (err == KM_GROUP_ERR_NONE && gr == NULL && mid[0] != '\0')
		err = KM_GROUP_ERR_UNKNOWN_MEMBER_ID;
	if (err == KM_GROUP_ERR_NONE && gr == NULL) {
		gr = km_group_new(g, r->group_id);
		created = gr != NULL;
		if (gr == NULL)
			err = KM_GROUP_ERR_COORDINATOR_NOT_AVAILABLE;
	}
	if (err != KM_GROUP_ERR_NONE) {
		km_group_answer_join_error(g, ticket, err, "");
		return 0;
	}
	rc = mid[0] == '\0' ? join_unknown(g, gr, r, ticket, now_ms) :
			      join_known(g, gr, r, mid, ticket, now_ms);
	if (rc < 0 && created)
		km_group_free(g, gr);
	else
		km_group_settle(g, gr, now_ms);
	return rc < 0 ? rc : 0;
}
