/* Internals of dataplane/group/group*.c; not for inclusion elsewhere. */
#ifndef KM_DATAPLANE_GROUP_PVT_H
#define KM_DATAPLANE_GROUP_PVT_H

#include <stdbool.h>
#include <stdint.h>

#include "dataplane/group/group.h"

#define NAME_CAP (KM_GROUP_NAME_BYTES_MAX + 1)

struct gproto {
	char name[NAME_CAP];
	uint8_t *meta;		/* malloc'd, NULL when meta_len is 0 */
	uint32_t meta_len;
};

struct gmember {
	char id[NAME_CAP];
	char instance[NAME_CAP];	/* "" when dynamic */
	char client_id[NAME_CAP];
	char client_host[NAME_CAP];
	uint32_t session_timeout_ms;
	uint32_t rebalance_timeout_ms;
	struct gproto *protos;		/* malloc'd, n_protos >= 1 */
	uint32_t n_protos;
	uint8_t *assign;		/* malloc'd, assign_cap bytes (kept */
	uint32_t assign_len;		/* across generations, grown only) */
	uint32_t assign_cap;
	uint64_t last_hb_ms;
	bool is_static;
	bool is_leader;
	bool is_new;			/* not yet through a generation */
	bool awaiting_join;		/* counts as rejoined */
	bool join_ticketed;		/* ... and join_ticket is to be answered */
	bool awaiting_sync;		/* sync_ticket is to be answered */
	void *join_ticket;
	void *sync_ticket;
};

struct gpending {
	char id[NAME_CAP];
	uint64_t deadline_ms;
};

struct grp {
	bool used;
	int32_t hnext;			/* hash chain, -1 ends */
	char id[NAME_CAP];
	enum km_group_state state;
	char protocol_type[NAME_CAP];
	char protocol[NAME_CAP];	/* "" before the first generation */
	int32_t generation;
	struct gmember *members;	/* join order; the array (and */
	uint32_t n_members;
	uint32_t cap_members;
	struct gpending *pending;	/* pending's) stays with the slot */
	uint32_t n_pending;
	uint32_t cap_pending;
	/* PreparingRebalance: when the join phase ends (initial delay or
	 * rebalance timeout). */
	uint64_t join_deadline_ms;
	bool initial;			/* in the initial delay */
	bool new_member_added;		/* ... and someone new came in it */
	uint32_t initial_remaining_ms;
	uint64_t deadline_ms;		/* earliest of the above, cached */
};

struct km_group {
	struct km_group_config cfg;
	struct grp *groups;		/* groups_max slots */
	int32_t *buckets;		/* nbuckets heads, -1 empty */
	uint32_t nbuckets;		/* a power of two */
	uint32_t n_used;
	struct km_group_member_view *views; /* members_max, for on_join */
	/* members_max, for a leader's SyncGroup: each member's assignment
	 * in the request. */
	const struct km_group_assignment **sync_src;
	bool in_cb;			/* a callback is running */
};

/* group.c */
struct grp *grp_find(const struct km_group *g, const char *id);
struct grp *grp_create(struct km_group *g, const char *id);
void grp_free(struct km_group *g, struct grp *gr);
struct gmember *mem_find(struct grp *gr, const char *id);
struct gmember *mem_find_static(struct grp *gr, const char *instance);
struct gpending *pend_find(struct grp *gr, const char *id);
void pend_remove(struct grp *gr, struct gpending *p);
bool name_ok(const char *s);
void copy_cut(char dst[NAME_CAP], const char *src);
bool is_fenced(struct grp *gr, const char *member_id, const char *instance);
struct gmember *leader_of(struct grp *gr);
void answer_join_error(struct km_group *g, void *ticket, int16_t err,
		       const char *member_id);
void answer_sync(struct km_group *g, void *ticket, int16_t err,
		 const uint8_t *a, uint32_t len);

/* group_member.c */
void protos_free(struct gproto *p, uint32_t n);
bool protos_match(const struct gmember *m, const struct km_group_join_req *r);
struct gproto *protos_copy(const struct km_group_join_req *r);
const struct gproto *proto_of(const struct gmember *m, const char *name);
int members_reserve(struct grp *gr, uint32_t n);
void member_free(struct gmember *m);
const uint8_t *member_assignment(const struct gmember *m);
void member_unlink(struct km_group *g, struct grp *gr, uint32_t idx);
void member_set_protos(struct gmember *m, struct gproto *p,
		       const struct km_group_join_req *r);
bool member_keep_alive(const struct gmember *m, uint64_t now_ms);
uint64_t member_deadline_ms(const struct gmember *m);

void grp_after_removal(struct km_group *g, struct grp *gr, uint64_t now_ms);
void grp_settle(struct km_group *g, struct grp *gr, uint64_t now_ms);
void answer_join(struct km_group *g, void *ticket,
		 const struct km_group_join_result *res);
void set_join_ticket(struct km_group *g, struct gmember *m, void *ticket);
uint32_t grp_rebalance_timeout_ms(const struct grp *gr);

/* group_rebalance.c */
void grp_prepare_rebalance(struct km_group *g, struct grp *gr,
			   uint64_t now_ms);
void grp_maybe_rebalance(struct km_group *g, struct grp *gr, uint64_t now_ms);
void grp_maybe_complete(struct km_group *g, struct grp *gr, uint64_t now_ms);
bool grp_vote(const struct grp *gr, char out[NAME_CAP]);
void answer_current(struct km_group *g, struct grp *gr, struct gmember *m,
		    void *ticket, const char *leader_id);

#endif
