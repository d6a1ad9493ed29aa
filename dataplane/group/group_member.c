/* Consumer-group coordinator: one member's copies of what it sent, its
 * removal, and its session deadline. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/km_assert.h"
#include "dataplane/group/group_pvt.h"

void km_group_protos_free(struct gproto *p, uint32_t n)
{
	if (p == NULL)
		return;
	for (uint32_t i = 0; i < n; i++)
		free(p[i].meta);
	free(p);
}

/* The request's protocols, copied: the caller's buffers are not kept. */
struct gproto *km_group_protos_copy(const struct km_group_join_req *r)
{
	struct gproto *p = calloc(r->n_protocols, sizeof(*p));

	if (p == NULL)
		return NULL;
	for (uint32_t i = 0; i < r->n_protocols; i++) {
		const struct km_group_protocol *src = &r->protocols[i];

		km_group_copy_cut(p[i].name, src->name);
		p[i].meta_len = src->metadata_len;
		if (src->metadata_len == 0)
			continue;
		p[i].meta = malloc(src->metadata_len);
		if (p[i].meta == NULL) {
			km_group_protos_free(p, i);
			return NULL;
		}
		memcpy(p[i].meta, src->metadata, src->metadata_len);
	}
	return p;
}

/* Kafka's MemberMetadata.matches: same names, same order, same bytes. */
bool km_group_protos_match(const struct gmember *m, const struct km_group_join_req *r)
{
	if (m->n_protos != r->n_protocols)
		return false;
	for (uint32_t i = 0; i < m->n_protos; i++) {
		const struct gproto *a = &m->protos[i];
		const struct km_group_protocol *b = &r->protocols[i];

		if (strcmp(a->name, b->name) != 0 ||
		    a->meta_len != b->metadata_len)
			return false;
		if (a->meta_len > 0 && memcmp(a->meta, b->metadata, a->meta_len))
			return false;
	}
	return true;
}

const struct gproto *km_group_proto_of(const struct gmember *m, const char *name)
{
	for (uint32_t i = 0; i < m->n_protos; i++)
		if (strcmp(m->protos[i].name, name) == 0)
			return &m->protos[i];
	return NULL;
}

/* Room for n members, growing by doubling (never past members_max, which
 * the callers check first). */
int km_group_members_reserve(struct grp *gr, uint32_t n)
{
	struct gmember *p;
	uint32_t cap = gr->cap_members == 0 ? 4 : gr->cap_members;

	if (n <= gr->cap_members)
		return 0;
	while (cap < n)
		cap *= 2;
	p = realloc(gr->members, cap * sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	gr->members = p;
	gr->cap_members = cap;
	return 0;
}

void km_group_member_free(struct gmember *m)
{
	km_group_protos_free(m->protos, m->n_protos);
	free(m->assign);
	m->protos = NULL;
	m->assign = NULL;
	m->assign_len = m->assign_cap = 0;
}

/* NULL for an empty assignment, whatever buffer is kept for the next. */
const uint8_t *km_group_member_assignment(const struct gmember *m)
{
	return m->assign_len > 0 ? m->assign : NULL;
}

/* Takes ownership of p. Timeouts and client details follow the latest
 * join, as in the new coordinator's ClassicGroup.updateMember. */
void km_group_member_set_protos(struct gmember *m, struct gproto *p,
		       const struct km_group_join_req *r)
{
	km_group_protos_free(m->protos, m->n_protos);
	m->protos = p;
	m->n_protos = r->n_protocols;
	m->session_timeout_ms = (uint32_t)r->session_timeout_ms;
	m->rebalance_timeout_ms = r->rebalance_timeout_ms < 0 ?
		(uint32_t)r->session_timeout_ms : (uint32_t)r->rebalance_timeout_ms;
	km_group_copy_cut(m->client_id, r->client_id);
	km_group_copy_cut(m->client_host, r->client_host);
}

/* Remove members[idx]: its waiting join (a new member timing out, or a
 * leave) is told UNKNOWN_MEMBER_ID so an active client rejoins; the
 * leadership passes to the first remaining member, as in Kafka's
 * GroupMetadata.remove. The caller then runs km_group_after_removal(). */
void km_group_member_unlink(struct km_group *g, struct grp *gr, uint32_t idx)
{
	struct gmember *m = &gr->members[idx];
	bool was_leader = m->is_leader;

	KM_ASSERT(idx < gr->n_members);
	if (m->join_ticketed)
		km_group_answer_join_error(g, m->join_ticket,
				  KM_GROUP_ERR_UNKNOWN_MEMBER_ID, "");
	if (m->awaiting_sync)
		km_group_answer_sync(g, m->sync_ticket, KM_GROUP_ERR_UNKNOWN_MEMBER_ID,
			    NULL, 0);
	km_group_member_free(m);
	memmove(m, m + 1, (gr->n_members - idx - 1) * sizeof(*m));
	gr->n_members--;
	if (was_leader && gr->n_members > 0)
		gr->members[0].is_leader = true;
}

/* Kafka's MemberMetadata.shouldKeepAlive: a member whose join is awaited
 * is governed by the rebalance timeout (a new one by the 5-minute join
 * timeout), one whose sync waits by the leader's sync. */
bool km_group_member_keep_alive(const struct gmember *m, uint64_t now_ms)
{
	if (m->awaiting_join)
		return !m->is_new ||
		       now_ms < m->last_hb_ms + KM_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS;
	if (m->awaiting_sync)
		return true;
	return now_ms < m->last_hb_ms + m->session_timeout_ms;
}

uint64_t km_group_member_deadline_ms(const struct gmember *m)
{
	if (m->awaiting_join)
		return m->is_new ?
			m->last_hb_ms + KM_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS :
			UINT64_MAX;
	if (m->awaiting_sync)
		return UINT64_MAX;
	return m->last_hb_ms + m->session_timeout_ms;
}
