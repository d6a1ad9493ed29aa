/* Consumer-group coordinator: the rebalance. PreparingRebalance collects
 * the joins (Kafka's DelayedJoin / InitialDelayedJoin), its completion
 * starts the next generation (onCompleteJoin), and the protocol vote
 * (GroupMetadata.selectProtocol). */
#include <stdlib.h>
#include <string.h>

#include "common/km_assert.h"
#include "dataplane/group/group_pvt.h"

uint32_t km_group_rebalance_timeout_ms(const struct grp *gr)
{
	uint32_t t = 0;

	for (uint32_t i = 0; i < gr->n_members; i++)
		if (gr->members[i].rebalance_timeout_ms > t)
			t = gr->members[i].rebalance_timeout_ms;
	return t;
}

static bool all_support(const struct grp *gr, const char *name)
{
	for (uint32_t i = 0; i < gr->n_members; i++)
		if (km_group_proto_of(&gr->members[i], name) == NULL)
			return false;
	return true;
}

static uint32_t votes_for(const struct grp *gr, const char *name)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < gr->n_members; i++) {
		const struct gmember *m = &gr->members[i];

		for (uint32_t k = 0; k < m->n_protos; k++) {
			if (!all_support(gr, m->protos[k].name))
				continue;
			n += strcmp(m->protos[k].name, name) == 0;
			break;
		}
	}
	return n;
}

/* Candidates are the first member's protocols every member supports, in
 * its order, so a tie goes to the earlier one. */
bool km_group_vote(const struct grp *gr, char out[NAME_CAP])
{
	const struct gmember *first;
	uint32_t best = 0;

	out[0] = '\0';
	if (gr->n_members == 0)
		return false;
	first = &gr->members[0];
	for (uint32_t k = 0; k < first->n_protos; k++) {
		const char *name = first->protos[k].name;
		uint32_t v;

		if (!all_support(gr, name))
			continue;
		v = votes_for(gr, name);
		if (out[0] == '\0' || v > best) {
			km_group_copy_cut(out, name);
			best = v;
		}
	}
	return out[0] != '\0';
}

static uint32_t fill_views(struct km_group *g, struct grp *gr)
{
	KM_ASSERT(gr->n_members <= g->cfg.members_max);
	for (uint32_t i = 0; i < gr->n_members; i++) {
		memset(&g->views[i], 0, sizeof(g->views[i]));
		km_group_member_view(gr, &gr->members[i], &g->views[i]);
	}
	return gr->n_members;
}

/* The current generation's answer to m (the leader's with the members). */
void km_group_answer_current(struct km_group *g, struct grp *gr, struct gmember *m,
		    void *ticket, const char *leader_id)
{
	struct km_group_join_result res = {
		.error = KM_GROUP_ERR_NONE,
		.generation = gr->generation,
		.protocol_type = gr->protocol_type,
		.protocol = gr->protocol,
		.leader_id = leader_id,
		.member_id = m->id,
	};

	if (strcmp(m->id, leader_id) == 0) {
		res.n_members = fill_views(g, gr);
		res.members = g->views;
	}
	km_group_answer_join(g, ticket, &res);
}

/* Members awaiting a sync are told to rejoin, and the assignments of the
 * aborted generation are dropped (resetAndPropagateAssignmentError). */
static void abort_syncs(struct km_group *g, struct grp *gr)
{
	for (uint32_t i = 0; i < gr->n_members; i++) {
		struct gmember *m = &gr->members[i];

		if (m->awaiting_sync) {
			m->awaiting_sync = false;
			km_group_answer_sync(g, m->sync_ticket,
				    KM_GROUP_ERR_REBALANCE_IN_PROGRESS, NULL, 0);
		}
		m->assign_len = 0; /* the buffer serves the next generation */
	}
}

void km_group_prepare_rebalance(struct km_group *g, struct grp *gr,
			   uint64_t now_ms)
{
	uint32_t rt = km_group_rebalance_timeout_ms(gr);
	uint32_t delay = g->cfg.initial_rebalance_delay_ms;

	if (gr->state == KM_GROUP_COMPLETING_REBALANCE)
		abort_syncs(g, gr);
	gr->initial = gr->state == KM_GROUP_EMPTY;
	gr->new_member_added = false;
	if (gr->initial) {
		gr->join_deadline_ms = now_ms + delay;
		gr->initial_remaining_ms = rt > delay ? rt - delay : 0;
	} else {
		gr->join_deadline_ms = now_ms + rt;
	}
	gr->state = KM_GROUP_PREPARING_REBALANCE;
}

/* Kafka's maybePrepareRebalance: canRebalance is every state but
 * PreparingRebalance (and Dead, which a group in the table never is). */
void km_group_maybe_rebalance(struct km_group *g, struct grp *gr, uint64_t now_ms)
{
	if (gr->state != KM_GROUP_PREPARING_REBALANCE)
		km_group_prepare_rebalance(g, gr, now_ms);
	km_group_maybe_complete(g, gr, now_ms);
}

static bool all_joined(const struct grp *gr)
{
	if (gr->n_pending > 0)
		return false;
	for (uint32_t i = 0; i < gr->n_members; i++)
		if (!gr->members[i].awaiting_join)
			return false;
	return true;
}

/* Dynamic members that did not rejoin are out; static ones stay until
 * their session times out (KIP-345). */
static void drop_absent(struct km_group *g, struct grp *gr)
{
	for (uint32_t i = gr->n_members; i-- > 0;) {
		struct gmember *m = &gr->members[i];

		if (!m->awaiting_join && !m->is_static)
			km_group_member_unlink(g, gr, i);
	}
}

/* Keep the leader if it rejoined, else the first member that did. */
static struct gmember *elect_leader(struct grp *gr)
{
	struct gmember *l = km_group_leader_of(gr);

	if (l != NULL && l->awaiting_join)
		return l;
	for (uint32_t i = 0; i < gr->n_members; i++) {
		if (gr->members[i].awaiting_join) {
			if (l != NULL)
				l->is_leader = false;
			gr->members[i].is_leader = true;
			return &gr->members[i];
		}
	}
	return NULL;
}

static void start_generation(struct km_group *g, struct grp *gr,
			     uint64_t now_ms)
{
	struct gmember *leader = km_group_leader_of(gr);
	bool voted;

	gr->generation++;
	voted = km_group_vote(gr, gr->protocol);
	KM_ASSERT(voted); /* every join shares a protocol with all others */
	gr->state = KM_GROUP_COMPLETING_REBALANCE;
	for (uint32_t i = 0; i < gr->n_members; i++) {
		struct gmember *m = &gr->members[i];

		if (m->join_ticketed)
			km_group_answer_current(g, gr, m, m->join_ticket, leader->id);
		m->awaiting_join = false;
		m->join_ticketed = false;
		m->is_new = false;
		m->last_hb_ms = now_ms;
	}
}

static void complete_join(struct km_group *g, struct grp *gr, uint64_t now_ms)
{
	gr->initial = false;
	drop_absent(g, gr);
	if (gr->n_members == 0) {
		gr->generation++;
		gr->protocol[0] = '\0';
		gr->state = KM_GROUP_EMPTY;
		return;
	}
	if (elect_leader(gr) == NULL) {
		/* Only absent static members: wait for their sessions. */
		gr->join_deadline_ms = now_ms + km_group_rebalance_timeout_ms(gr);
		return;
	}
	start_generation(g, gr, now_ms);
}

/* InitialDelayedJoin: a new member during the delay buys another delay,
 * until the rebalance timeout is used up; it never ends early. */
static void initial_delay_over(struct km_group *g, struct grp *gr,
			       uint64_t now_ms)
{
	uint32_t delay = g->cfg.initial_rebalance_delay_ms;
	uint32_t rem = gr->initial_remaining_ms;

	if (gr->new_member_added && rem > 0) {
		gr->new_member_added = false;
		gr->join_deadline_ms = now_ms + (delay < rem ? delay : rem);
		gr->initial_remaining_ms = rem > delay ? rem - delay : 0;
		return;
	}
	complete_join(g, gr, now_ms);
}

void km_group_maybe_complete(struct km_group *g, struct grp *gr, uint64_t now_ms)
{
	if (gr->state != KM_GROUP_PREPARING_REBALANCE)
		return;
	if (gr->initial) {
		if (now_ms >= gr->join_deadline_ms)
			initial_delay_over(g, gr, now_ms);
		return;
	}
	if (all_joined(gr) || now_ms >= gr->join_deadline_ms)
		complete_join(g, gr, now_ms);
}
