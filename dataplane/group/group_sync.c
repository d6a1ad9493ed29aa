/* Consumer-group coordinator: SyncGroup, Heartbeat, the membership check of
 * OffsetCommit, and LeaveGroup (Kafka's doSyncGroup, handleHeartbeat,
 * doCommitOffsets, handleLeaveGroup). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/km_assert.h"
#include "dataplane/group/group_pvt.h"

/* The checks Heartbeat, SyncGroup and OffsetCommit share, in Kafka's
 * order: fenced, unknown, wrong generation. *out is the member on NONE. */
static int16_t member_check(struct grp *gr, const char *mid,
			    const char *instance, int32_t generation,
			    struct gmember **out)
{
	struct gmember *m;

	if (km_group_is_fenced(gr, mid, instance))
		return KM_GROUP_ERR_FENCED_INSTANCE_ID;
	m = km_group_mem_find(gr, mid);
	if (m == NULL)
		return KM_GROUP_ERR_UNKNOWN_MEMBER_ID;
	if (generation != gr->generation)
		return KM_GROUP_ERR_ILLEGAL_GENERATION;
	*out = m;
	return KM_GROUP_ERR_NONE;
}

/* Room in each member's buffer for its assignment in the leader's
 * request (g->sync_src[i]; a member named twice: the last one counts),
 * made before anything changes: a failed allocation leaves every
 * assignment as it was (realloc keeps the bytes). Buffers are kept across
 * generations, so a rebalance that assigns no more than the last one
 * allocates nothing. */
static int assign_reserve(struct km_group *g, const struct grp *gr,
			  const struct km_group_sync_req *r)
{
	for (uint32_t i = 0; i < gr->n_members; i++) {
		struct gmember *m = &gr->members[i];
		const struct km_group_assignment *a = NULL;
		uint8_t *p;

		for (uint32_t k = 0; k < r->n_assignments; k++)
			if (r->assignments[k].member_id != NULL &&
			    strcmp(r->assignments[k].member_id, m->id) == 0)
				a = &r->assignments[k];
		g->sync_src[i] = a;
		if (a == NULL || a->assignment_len <= m->assign_cap)
			continue;
		if ((p = realloc(m->assign, a->assignment_len)) == NULL)
			return -ENOMEM;
		m->assign = p;
		m->assign_cap = a->assignment_len;
	}
	return 0;
}

static bool assign_valid(const struct km_group *g,
			 const struct km_group_sync_req *r)
{
	for (uint32_t k = 0; k < r->n_assignments; k++) {
		const struct km_group_assignment *a = &r->assignments[k];

		if (a->assignment_len > g->cfg.metadata_bytes_max ||
		    (a->assignment_len > 0 && a->assignment == NULL))
			return false;
	}
	return true;
}

/* Store the assignments (into the room assign_reserve made), go Stable,
 * answer every waiting sync (setAndPropagateAssignment); each answered
 * member's session restarts. */
static void propagate(struct km_group *g, struct grp *gr, uint64_t now_ms)
{
	gr->state = KM_GROUP_STABLE;
	for (uint32_t i = 0; i < gr->n_members; i++) {
		struct gmember *m = &gr->members[i];
		const struct km_group_assignment *a = g->sync_src[i];

		m->assign_len = a == NULL ? 0 : a->assignment_len;
		if (m->assign_len > 0)
			memcpy(m->assign, a->assignment, m->assign_len);
	}
	for (uint32_t i = 0; i < gr->n_members; i++) {
		struct gmember *m = &gr->members[i];

		if (!m->awaiting_sync)
			continue;
		m->awaiting_sync = false;
		m->last_hb_ms = now_ms;
		km_group_answer_sync(g, m->sync_ticket, KM_GROUP_ERR_NONE,
			    km_group_member_assignment(m), m->assign_len);
	}
}

static void sync_wait(struct km_group *g, struct gmember *m, void *ticket,
		      uint64_t now_ms)
{
	if (m->awaiting_sync)
		km_group_answer_sync(g, m->sync_ticket,
			    KM_GROUP_ERR_REBALANCE_IN_PROGRESS, NULL, 0);
	m->awaiting_sync = true;
	m->sync_ticket = ticket;
	m->last_hb_ms = now_ms;
}

static int leader_sync(struct km_group *g, struct grp *gr, struct gmember *m,
		       const struct km_group_sync_req *r, void *ticket,
		       uint64_t now_ms)
{
	int rc = assign_reserve(g, gr, r);

	if (rc == 0) {
		sync_wait(g, m, ticket, now_ms);
		propagate(g, gr, now_ms);
	}
	return rc;
}

/* CompletingRebalance: followers wait; the leader's sync ends the wait.
 * Its assignments are copied before anything changes. */
static int sync_completing(struct km_group *g, struct grp *gr,
			   struct gmember *m, const struct km_group_sync_req *r,
			   void *ticket, uint64_t now_ms)
{
	if (!m->is_leader) {
		sync_wait(g, m, ticket, now_ms);
		return 0;
	}
	if (!assign_valid(g, r)) {
		km_group_answer_sync(g, ticket, KM_GROUP_ERR_INVALID_REQUEST, NULL, 0);
		return 0;
	}
	return leader_sync(g, gr, m, r, ticket, now_ms);
}

int km_group_sync(struct km_group *g, const struct km_group_sync_req *r,
		  void *ticket, uint64_t now_ms)
{
	const char *mid = r->member_id == NULL ? "" : r->member_id;
	struct gmember *m = NULL;
	struct grp *gr = NULL;
	int16_t err = KM_GROUP_ERR_UNKNOWN_MEMBER_ID;

	KM_ASSERT(!g->in_cb);
	if (!km_group_name_ok(r->group_id))
		err = KM_GROUP_ERR_INVALID_GROUP_ID;
	else if ((gr = km_group_find(g, r->group_id)) != NULL)
		err = member_check(gr, mid, r->instance_id, r->generation, &m);
	if (err == KM_GROUP_ERR_NONE && gr->state == KM_GROUP_PREPARING_REBALANCE)
		err = KM_GROUP_ERR_REBALANCE_IN_PROGRESS;
	if (err != KM_GROUP_ERR_NONE) {
		km_group_answer_sync(g, ticket, err, NULL, 0);
		return 0;
	}
	if (gr->state == KM_GROUP_STABLE) {
		m->last_hb_ms = now_ms;
		km_group_answer_sync(g, ticket, KM_GROUP_ERR_NONE, km_group_member_assignment(m),
			    m->assign_len);
		km_group_settle(g, gr, now_ms);
		return 0;
	}
	KM_ASSERT(gr->state == KM_GROUP_COMPLETING_REBALANCE);
	if (sync_completing(g, gr, m, r, ticket, now_ms) < 0)
		return -ENOMEM;
	km_group_settle(g, gr, now_ms);
	return 0;
}

int16_t km_group_heartbeat(struct km_group *g, const char *group_id,
			   const char *member_id, const char *instance_id,
			   int32_t generation, uint64_t now_ms)
{
	struct gmember *m = NULL;
	struct grp *gr;
	int16_t err;

	KM_ASSERT(!g->in_cb);
	if (!km_group_name_ok(group_id))
		return KM_GROUP_ERR_INVALID_GROUP_ID;
	gr = km_group_find(g, group_id);
	if (gr == NULL)
		return KM_GROUP_ERR_UNKNOWN_MEMBER_ID;
	err = member_check(gr, member_id == NULL ? "" : member_id, instance_id,
			   generation, &m);
	if (err != KM_GROUP_ERR_NONE)
		return err;
	m->last_hb_ms = now_ms;
	km_group_settle(g, gr, now_ms);
	if (gr->state == KM_GROUP_PREPARING_REBALANCE)
		return KM_GROUP_ERR_REBALANCE_IN_PROGRESS;
	return KM_GROUP_ERR_NONE;
}

int16_t km_group_commit_check(struct km_group *g, const char *group_id,
			      const char *member_id, const char *instance_id,
			      int32_t generation, uint64_t now_ms)
{
	const char *mid = member_id == NULL ? "" : member_id;
	struct gmember *m = NULL;
	struct grp *gr;
	int16_t err;

	KM_ASSERT(!g->in_cb);
	if (group_id == NULL)
		return KM_GROUP_ERR_INVALID_GROUP_ID;
	gr = km_group_find(g, group_id);
	if (gr == NULL)
		return generation < 0 ? KM_GROUP_ERR_NONE :
					KM_GROUP_ERR_ILLEGAL_GENERATION;
	if (km_group_is_fenced(gr, mid, instance_id))
		return KM_GROUP_ERR_FENCED_INSTANCE_ID;
	if (generation < 0 && gr->state == KM_GROUP_EMPTY)
		return KM_GROUP_ERR_NONE;
	err = member_check(gr, mid, instance_id, generation, &m);
	if (err != KM_GROUP_ERR_NONE)
		return err;
	if (gr->state == KM_GROUP_COMPLETING_REBALANCE)
		return KM_GROUP_ERR_REBALANCE_IN_PROGRESS;
	m->last_hb_ms = now_ms;
	km_group_settle(g, gr, now_ms);
	return KM_GROUP_ERR_NONE;
}

/* One leaving member (handleLeaveGroup); *removed says a member went. */
static int16_t leave_one(struct km_group *g, struct grp *gr,
			 const struct km_group_leave_member *lm, bool *removed)
{
	const char *mid = lm->member_id == NULL ? "" : lm->member_id;
	struct gpending *p;
	struct gmember *m;

	if (mid[0] != '\0' && km_group_is_fenced(gr, mid, lm->instance_id))
		return KM_GROUP_ERR_FENCED_INSTANCE_ID;
	p = lm->instance_id == NULL ? km_group_pend_find(gr, mid) : NULL;
	if (p != NULL) {
		km_group_pend_remove(gr, p);
		*removed = true;
		return KM_GROUP_ERR_NONE;
	}
	m = km_group_mem_find_static(gr, lm->instance_id);
	if (m == NULL)
		m = km_group_mem_find(gr, mid);
	if (m == NULL)
		return KM_GROUP_ERR_UNKNOWN_MEMBER_ID;
	km_group_member_unlink(g, gr, (uint32_t)(m - gr->members));
	*removed = true;
	return KM_GROUP_ERR_NONE;
}

int16_t km_group_leave(struct km_group *g, const char *group_id,
		       const struct km_group_leave_member *members, uint32_t n,
		       int16_t *errors, uint64_t now_ms)
{
	struct grp *gr;
	bool removed = false;

	KM_ASSERT(!g->in_cb);
	if (!km_group_name_ok(group_id))
		return KM_GROUP_ERR_INVALID_GROUP_ID;
	gr = km_group_find(g, group_id);
	for (uint32_t i = 0; i < n; i++)
		errors[i] = gr == NULL ? KM_GROUP_ERR_UNKNOWN_MEMBER_ID :
					 leave_one(g, gr, &members[i], &removed);
	if (gr == NULL)
		return KM_GROUP_ERR_NONE;
	if (removed)
		km_group_after_removal(g, gr, now_ms);
	km_group_settle(g, gr, now_ms);
	return KM_GROUP_ERR_NONE;
}

/* ClassicGroup.validateOffsetCommit with isTransactional: no session
 * refresh, no REBALANCE_IN_PROGRESS for CompletingRebalance, and a request
 * naming no member (generation < 0, no member or instance id) is taken
 * whatever the group's state. */
int16_t km_group_txn_commit_check(struct km_group *g, const char *group_id,
				  const char *member_id,
				  const char *instance_id, int32_t generation)
{
	const char *mid = member_id == NULL ? "" : member_id;
	struct gmember *m = NULL;
	struct grp *gr;

	KM_ASSERT(!g->in_cb);
	if (group_id == NULL)
		return KM_GROUP_ERR_INVALID_GROUP_ID;
	gr = km_group_find(g, group_id);
	if (gr == NULL)
		return generation < 0 ? KM_GROUP_ERR_NONE :
					KM_GROUP_ERR_ILLEGAL_GENERATION;
	if (generation < 0 && gr->state == KM_GROUP_EMPTY)
		return KM_GROUP_ERR_NONE;
	if (generation < 0 && mid[0] == '\0' && instance_id == NULL)
		return KM_GROUP_ERR_NONE;
	return member_check(gr, mid, instance_id, generation, &m);
}
