/* Consumer-group coordinator: what the glue reads (ListGroups,
 * DescribeGroups, the offset sync's "is anyone consuming"), DeleteGroups,
 * and the invariant check the tests run. */
#include <errno.h>
#include <string.h>

#include "common/km_assert.h"
#include "dataplane/group/group_pvt.h"

const char *km_group_state_name(enum km_group_state s)
{
	switch (s) {
	case KM_GROUP_EMPTY:
		return "Empty";
	case KM_GROUP_PREPARING_REBALANCE:
		return "PreparingRebalance";
	case KM_GROUP_COMPLETING_REBALANCE:
		return "CompletingRebalance";
	case KM_GROUP_STABLE:
		return "Stable";
	case KM_GROUP_DEAD:
		return "Dead";
	}
	return "Dead";
}

bool km_group_is_active(const struct km_group *g, const char *group_id)
{
	const struct grp *gr = group_id == NULL ? NULL : km_group_find(g, group_id);

	return gr != NULL && (gr->n_members > 0 || gr->n_pending > 0);
}

uint32_t km_group_list(const struct km_group *g, struct km_group_overview *out,
		       uint32_t cap)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < g->cfg.groups_max; i++) {
		const struct grp *gr = &g->groups[i];

		if (!gr->used)
			continue;
		if (n < cap) {
			out[n].group_id = gr->id;
			out[n].protocol_type = gr->protocol_type;
			out[n].state = km_group_state_name(gr->state);
		}
		n++;
	}
	return n;
}

void km_group_member_view(const struct grp *gr, const struct gmember *m,
			  struct km_group_member_view *v)
{
	const struct gproto *p = gr->protocol[0] == '\0' ? NULL :
				 km_group_proto_of(m, gr->protocol);

	v->member_id = m->id;
	v->instance_id = m->is_static ? m->instance : NULL;
	v->client_id = m->client_id;
	v->client_host = m->client_host;
	v->metadata = p == NULL ? NULL : p->meta;
	v->metadata_len = p == NULL ? 0 : p->meta_len;
	v->assignment = km_group_member_assignment(m);
	v->assignment_len = m->assign_len;
}

int km_group_describe(const struct km_group *g, const char *group_id,
		      struct km_group_description *out,
		      struct km_group_member_view *members, uint32_t cap)
{
	struct grp *gr;
	const struct gmember *l;
	bool settled;

	if (group_id == NULL)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	gr = km_group_find(g, group_id);
	out->state = gr == NULL ? KM_GROUP_DEAD : gr->state;
	out->state_name = km_group_state_name(out->state);
	out->protocol_type = gr == NULL ? "" : gr->protocol_type;
	out->leader_id = "";
	out->protocol = "";
	out->generation = gr == NULL ? -1 : gr->generation;
	if (gr == NULL)
		return 0;
	settled = gr->state == KM_GROUP_STABLE ||
		  gr->state == KM_GROUP_COMPLETING_REBALANCE;
	out->protocol = settled ? gr->protocol : "";
	l = km_group_leader_of(gr);
	out->leader_id = l == NULL ? "" : l->id;
	out->n_members = gr->n_members;
	for (uint32_t i = 0; i < gr->n_members && i < cap; i++)
		km_group_member_view(gr, &gr->members[i], &members[i]);
	return (int)gr->n_members;
}

int16_t km_group_delete(struct km_group *g, const char *group_id)
{
	struct grp *gr;

	KM_ASSERT(!g->in_cb);
	gr = group_id == NULL ? NULL : km_group_find(g, group_id);
	if (gr == NULL)
		return KM_GROUP_ERR_GROUP_ID_NOT_FOUND;
	if (gr->state != KM_GROUP_EMPTY || gr->n_members > 0 ||
	    gr->n_pending > 0)
		return KM_GROUP_ERR_NON_EMPTY_GROUP;
	km_group_free(g, gr);
	return KM_GROUP_ERR_NONE;
}

static bool ids_unique(struct grp *gr, uint32_t i)
{
	const struct gmember *m = &gr->members[i];

	for (uint32_t k = i + 1; k < gr->n_members; k++) {
		const struct gmember *o = &gr->members[k];

		if (strcmp(m->id, o->id) == 0)
			return false;
		if (m->is_static && o->is_static &&
		    strcmp(m->instance, o->instance) == 0)
			return false;
	}
	return km_group_pend_find(gr, m->id) == NULL;
}

static bool member_ok(struct grp *gr, uint32_t i, uint32_t *leaders)
{
	const struct gmember *m = &gr->members[i];

	*leaders += m->is_leader;
	if (m->join_ticketed && !m->awaiting_join)
		return false;
	if (m->awaiting_join && gr->state != KM_GROUP_PREPARING_REBALANCE)
		return false;
	if (m->awaiting_sync && gr->state != KM_GROUP_COMPLETING_REBALANCE)
		return false;
	return ids_unique(gr, i);
}

static bool grp_ok(const struct km_group *g, struct grp *gr)
{
	uint32_t leaders = 0;

	if (gr->n_members + gr->n_pending > g->cfg.members_max)
		return false;
	if (km_group_find(g, gr->id) != gr)
		return false;
	for (uint32_t i = 0; i < gr->n_members; i++)
		if (!member_ok(gr, i, &leaders))
			return false;
	if (leaders != (gr->n_members > 0 ? 1u : 0u))
		return false;
	if (gr->state == KM_GROUP_EMPTY && gr->n_members > 0)
		return false;
	return gr->state != KM_GROUP_DEAD;
}

int km_group_verify(const struct km_group *g)
{
	uint32_t used = 0;

	for (uint32_t i = 0; i < g->cfg.groups_max; i++) {
		struct grp *gr = &g->groups[i];

		if (!gr->used)
			continue;
		used++;
		if (!grp_ok(g, gr))
			return -EPROTO;
	}
	return used == g->n_used ? 0 : -EPROTO;
}
