/* Consumer-group coordinator: the table of groups, lookups, answers, time
 * and cancellation. The request handlers are in group_join.c and
 * group_sync.c, the rebalance itself in group_rebalance.c. */
#include "dataplane/group/group.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/km_assert.h"
#include "dataplane/group/group_pvt.h"

/* Largest metadata_bytes_max accepted: JoinGroup and SyncGroup frames are
 * bounded by the front-end's frame size anyway; this keeps a typo from
 * turning into an unbounded allocation. */
#define METADATA_BYTES_LIMIT (64u << 20)

void km_group_config_default(struct km_group_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->groups_max = 1024;
	cfg->members_max = 1000;
	cfg->protocols_max = 16;
	cfg->session_timeout_min_ms = 6000;
	cfg->session_timeout_max_ms = 1800000;
	cfg->initial_rebalance_delay_ms = 3000;
	cfg->metadata_bytes_max = 1u << 20;
}

static bool config_ok(const struct km_group_config *c)
{
	if (c->groups_max == 0 || c->members_max == 0 || c->protocols_max == 0)
		return false;
	if (c->session_timeout_min_ms > c->session_timeout_max_ms)
		return false;
	if (c->metadata_bytes_max > METADATA_BYTES_LIMIT)
		return false;
	return c->on_join != NULL && c->on_sync != NULL;
}

int km_group_create(const struct km_group_config *cfg, struct km_group **out)
{
	struct km_group *g;

	if (cfg == NULL || out == NULL || !config_ok(cfg))
		return -EINVAL;
	g = calloc(1, sizeof(*g));
	if (g == NULL)
		return -ENOMEM;
	g->cfg = *cfg;
	g->nbuckets = 1;
	while (g->nbuckets < 2 * cfg->groups_max)
		g->nbuckets <<= 1;
	g->groups = calloc(cfg->groups_max, sizeof(*g->groups));
	if (g->groups == NULL)
		goto out_free_g;
	g->buckets = malloc(g->nbuckets * sizeof(*g->buckets));
	if (g->buckets == NULL)
		goto out_free_groups;
	g->views = calloc(cfg->members_max, sizeof(*g->views));
	if (g->views == NULL)
		goto out_free_buckets;
	g->sync_src = calloc(cfg->members_max, sizeof(*g->sync_src));
	if (g->sync_src == NULL)
		goto out_free_views;
	memset(g->buckets, 0xff, g->nbuckets * sizeof(*g->buckets));
	*out = g;
	return 0;

out_free_views:
	free(g->views);
out_free_buckets:
	free(g->buckets);
out_free_groups:
	free(g->groups);
out_free_g:
	free(g);
	return -ENOMEM;
}

/* Clear a slot but keep its member and pending arrays for the next group
 * in it: groups come and go (an Empty one gives its slot to a new id),
 * the room they grew need not. */
static void grp_reset(struct grp *gr)
{
	struct gmember *members = gr->members;
	struct gpending *pending = gr->pending;
	uint32_t cap_members = gr->cap_members, cap_pending = gr->cap_pending;

	memset(gr, 0, sizeof(*gr));
	gr->members = members;
	gr->cap_members = cap_members;
	gr->pending = pending;
	gr->cap_pending = cap_pending;
}

static void grp_release(struct grp *gr)
{
	for (uint32_t i = 0; i < gr->n_members; i++)
		km_group_member_free(&gr->members[i]);
	grp_reset(gr);
}

void km_group_destroy(struct km_group *g)
{
	if (g == NULL)
		return;
	for (uint32_t i = 0; i < g->cfg.groups_max; i++) {
		if (g->groups[i].used)
			grp_release(&g->groups[i]);
		free(g->groups[i].members);
		free(g->groups[i].pending);
	}
	free(g->sync_src);
	free(g->views);
	free(g->buckets);
	free(g->groups);
	free(g);
}

/* FNV-1a: group ids are short client-chosen strings; no adversary gains
 * more than a longer chain, bounded by groups_max. */
static uint32_t hash_of(const struct km_group *g, const char *s)
{
	uint32_t h = 2166136261u;

	for (uint32_t i = 0; i < KM_GROUP_NAME_BYTES_MAX && s[i] != '\0'; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h & (g->nbuckets - 1);
}

struct grp *km_group_find(const struct km_group *g, const char *id)
{
	int32_t i = g->buckets[hash_of(g, id)];

	for (uint32_t hops = 0; i >= 0 && hops < g->cfg.groups_max; hops++) {
		if (strcmp(g->groups[i].id, id) == 0)
			return &g->groups[i];
		i = g->groups[i].hnext;
	}
	return NULL;
}

static void grp_unlink_hash(struct km_group *g, struct grp *gr)
{
	int32_t *link = &g->buckets[hash_of(g, gr->id)];
	int32_t me = (int32_t)(gr - g->groups);

	for (uint32_t hops = 0; *link >= 0 && hops < g->cfg.groups_max; hops++) {
		if (*link == me) {
			*link = gr->hnext;
			return;
		}
		link = &g->groups[*link].hnext;
	}
	KM_ASSERT(!"group missing from its hash chain");
}

void km_group_free(struct km_group *g, struct grp *gr)
{
	KM_ASSERT(gr->used);
	grp_unlink_hash(g, gr);
	grp_release(gr);
	g->n_used--;
}

static bool grp_reclaimable(const struct grp *gr)
{
	return gr->used && gr->state == KM_GROUP_EMPTY && gr->n_members == 0 &&
	       gr->n_pending == 0;
}

/* A free slot, or else the first Empty group's (nothing waits in it: it
 * has no members, so no tickets). */
static struct grp *grp_slot(struct km_group *g)
{
	for (uint32_t i = 0; i < g->cfg.groups_max; i++)
		if (!g->groups[i].used)
			return &g->groups[i];
	for (uint32_t i = 0; i < g->cfg.groups_max; i++) {
		if (grp_reclaimable(&g->groups[i])) {
			km_group_free(g, &g->groups[i]);
			return &g->groups[i];
		}
	}
	return NULL;
}

struct grp *km_group_new(struct km_group *g, const char *id)
{
	struct grp *gr = grp_slot(g);
	uint32_t b;

	if (gr == NULL)
		return NULL;
	grp_reset(gr);
	gr->used = true;
	km_group_copy_cut(gr->id, id);
	gr->state = KM_GROUP_EMPTY;
	gr->deadline_ms = UINT64_MAX;
	b = hash_of(g, gr->id);
	gr->hnext = g->buckets[b];
	g->buckets[b] = (int32_t)(gr - g->groups);
	g->n_used++;
	return gr;
}

bool km_group_name_ok(const char *s)
{
	return s != NULL && s[0] != '\0' &&
	       strnlen(s, KM_GROUP_NAME_BYTES_MAX + 1) <= KM_GROUP_NAME_BYTES_MAX;
}

void km_group_copy_cut(char dst[NAME_CAP], const char *src)
{
	size_t n = src == NULL ? 0 : strnlen(src, KM_GROUP_NAME_BYTES_MAX);

	if (n > 0)
		memcpy(dst, src, n);
	dst[n] = '\0';
}

struct gmember *km_group_mem_find(struct grp *gr, const char *id)
{
	for (uint32_t i = 0; i < gr->n_members; i++)
		if (strcmp(gr->members[i].id, id) == 0)
			return &gr->members[i];
	return NULL;
}

struct gmember *km_group_mem_find_static(struct grp *gr, const char *instance)
{
	if (instance == NULL || instance[0] == '\0')
		return NULL;
	for (uint32_t i = 0; i < gr->n_members; i++)
		if (gr->members[i].is_static &&
		    strcmp(gr->members[i].instance, instance) == 0)
			return &gr->members[i];
	return NULL;
}

struct gpending *km_group_pend_find(struct grp *gr, const char *id)
{
	for (uint32_t i = 0; i < gr->n_pending; i++)
		if (strcmp(gr->pending[i].id, id) == 0)
			return &gr->pending[i];
	return NULL;
}

void km_group_pend_remove(struct grp *gr, struct gpending *p)
{
	uint32_t i = (uint32_t)(p - gr->pending);

	KM_ASSERT(i < gr->n_pending);
	gr->pending[i] = gr->pending[--gr->n_pending];
}

/* KIP-345: the instance id is held by a different member id. */
bool km_group_is_fenced(struct grp *gr, const char *member_id, const char *instance)
{
	struct gmember *m = km_group_mem_find_static(gr, instance);

	return m != NULL && strcmp(m->id, member_id) != 0;
}

struct gmember *km_group_leader_of(struct grp *gr)
{
	for (uint32_t i = 0; i < gr->n_members; i++)
		if (gr->members[i].is_leader)
			return &gr->members[i];
	return NULL;
}

void km_group_answer_join(struct km_group *g, void *ticket,
		 const struct km_group_join_result *res)
{
	KM_ASSERT(!g->in_cb);
	g->in_cb = true;
	g->cfg.on_join(g->cfg.cb_arg, ticket, res);
	g->in_cb = false;
}

void km_group_answer_join_error(struct km_group *g, void *ticket, int16_t err,
		       const char *member_id)
{
	struct km_group_join_result res = {
		.error = err,
		.generation = -1,
		.protocol_type = "",
		.protocol = "",
		.leader_id = "",
		.member_id = member_id == NULL ? "" : member_id,
	};

	km_group_answer_join(g, ticket, &res);
}

void km_group_answer_sync(struct km_group *g, void *ticket, int16_t err,
		 const uint8_t *a, uint32_t len)
{
	KM_ASSERT(!g->in_cb);
	g->in_cb = true;
	g->cfg.on_sync(g->cfg.cb_arg, ticket, err, a, len);
	g->in_cb = false;
}

/* A join replacing a still-waiting one answers the older ticket, so every
 * ticket is answered exactly once. */
void km_group_set_join_ticket(struct km_group *g, struct gmember *m, void *ticket)
{
	if (m->join_ticketed)
		km_group_answer_join_error(g, m->join_ticket,
				  KM_GROUP_ERR_REBALANCE_IN_PROGRESS, m->id);
	m->awaiting_join = true;
	m->join_ticketed = true;
	m->join_ticket = ticket;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static uint64_t grp_deadline(const struct grp *gr)
{
	uint64_t d = UINT64_MAX;

	if (gr->state == KM_GROUP_PREPARING_REBALANCE)
		d = gr->join_deadline_ms;
	for (uint32_t i = 0; i < gr->n_members; i++)
		d = min_u64(d, km_group_member_deadline_ms(&gr->members[i]));
	for (uint32_t i = 0; i < gr->n_pending; i++)
		d = min_u64(d, gr->pending[i].deadline_ms);
	return d;
}

/* End of every operation on a group: a rebalance whose members are all in
 * (or whose time is up) completes now, then the cached deadline follows. */
void km_group_settle(struct km_group *g, struct grp *gr, uint64_t now_ms)
{
	km_group_maybe_complete(g, gr, now_ms);
	gr->deadline_ms = grp_deadline(gr);
}

/* Kafka's removeMemberAndUpdateGroup, after one or more removals. */
void km_group_after_removal(struct km_group *g, struct grp *gr, uint64_t now_ms)
{
	if (gr->state == KM_GROUP_STABLE ||
	    gr->state == KM_GROUP_COMPLETING_REBALANCE)
		km_group_maybe_rebalance(g, gr, now_ms);
	else
		km_group_maybe_complete(g, gr, now_ms);
}

static void grp_expire(struct km_group *g, struct grp *gr, uint64_t now_ms)
{
	bool removed = false;

	for (uint32_t i = gr->n_pending; i-- > 0;) {
		if (gr->pending[i].deadline_ms <= now_ms) {
			km_group_pend_remove(gr, &gr->pending[i]);
			removed = true;
		}
	}
	/* From the end, so the indices still to visit do not move. */
	for (uint32_t i = gr->n_members; i-- > 0;) {
		if (!km_group_member_keep_alive(&gr->members[i], now_ms)) {
			km_group_member_unlink(g, gr, i);
			removed = true;
		}
	}
	if (removed)
		km_group_after_removal(g, gr, now_ms);
}

/* The scans below stop at the last group in use: the worker runs them every
 * turn, and a mirroring host usually has none. */
void km_group_tick(struct km_group *g, uint64_t now_ms)
{
	uint32_t left = g->n_used;

	KM_ASSERT(!g->in_cb);
	for (uint32_t i = 0; i < g->cfg.groups_max && left > 0; i++) {
		struct grp *gr = &g->groups[i];

		if (!gr->used)
			continue;
		left--;
		if (gr->deadline_ms > now_ms)
			continue;
		grp_expire(g, gr, now_ms);
		km_group_settle(g, gr, now_ms);
	}
}

uint64_t km_group_next_deadline_ms(const struct km_group *g)
{
	uint64_t d = UINT64_MAX;
	uint32_t left = g->n_used;

	for (uint32_t i = 0; i < g->cfg.groups_max && left > 0; i++)
		if (g->groups[i].used) {
			d = min_u64(d, g->groups[i].deadline_ms);
			left--;
		}
	return d;
}

static uint32_t grp_cancel(struct grp *gr, void *ticket)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < gr->n_members; i++) {
		struct gmember *m = &gr->members[i];

		if (m->join_ticketed && m->join_ticket == ticket) {
			m->join_ticketed = false;
			n++;
		}
		/* Not waiting any more: its session timeout runs again. */
		if (m->awaiting_sync && m->sync_ticket == ticket) {
			m->awaiting_sync = false;
			n++;
		}
	}
	return n;
}

uint32_t km_group_cancel(struct km_group *g, void *ticket)
{
	uint32_t n = 0;

	KM_ASSERT(!g->in_cb);
	for (uint32_t i = 0; i < g->cfg.groups_max; i++) {
		struct grp *gr = &g->groups[i];
		uint32_t k;

		if (!gr->used)
			continue;
		k = grp_cancel(gr, ticket);
		if (k > 0)
			gr->deadline_ms = grp_deadline(gr);
		n += k;
	}
	return n;
}
