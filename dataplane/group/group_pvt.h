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
struct grp *km_group_find(const struct km_group *g, const char *id);
struct grp *km_group_new(struct km_group *g, const char *id);
void km_group_free(struct km_group *g, struct grp *gr);
struct gmember *km_group_mem_find(struct grp *gr, const char *id);
struct gmember *km_group_mem_find_static(struct grp *gr, const char *instance);
struct gpending *km_group_pend_find(struct grp *gr, const char *id);
void km_group_pend_remove(struct grp *gr, struct gpending *p);
bool km_group_name_ok(const char *s);
void km_group_copy_cut(char dst[NAME_CAP], const char *src);
bool km_group_is_fenced(struct grp *gr, const char *member_id, const char *instance);
struct gmember *km_group_leader_of(struct grp *gr);
void km_group_answer_join_error(struct km_group *g, void *ticket, int16_t err,
		       const char *member_id);
void km_group_answer_sync(struct km_group *g, void *ticket, int16_t err,
		 const uint8_t *a, uint32_t len);

/* group_member.c */
void km_group_protos_free(struct gproto *p, uint32_t n);
bool km_group_protos_match(const struct gmember *m, const struct km_group_join_req *r);
struct gproto *km_group_protos_copy(const struct km_group_join_req *r);
const struct gproto *km_group_proto_of(const struct gmember *m, const char *name);
int km_group_members_reserve(struct grp *gr, uint32_t n);
void km_group_member_free(struct gmember *m);
const uint8_t *km_group_member_assignment(const struct gmember *m);
void km_group_member_unlink(struct km_group *g, struct grp *gr, uint32_t idx);
void km_group_member_set_protos(struct gmember *m, struct gproto *p,
		       const struct km_group_join_req *r);
bool km_group_member_keep_alive(const struct gmember *m, uint64_t now_ms);
uint64_t km_group_member_deadline_ms(const struct gmember *m);

void km_group_after_removal(struct km_group *g, struct grp *gr, uint64_t now_ms);
void km_group_settle(struct km_group *g, struct grp *gr, uint64_t now_ms);
void km_group_answer_join(struct km_group *g, void *ticket,
		 const struct km_group_join_result *res);
void km_group_set_join_ticket(struct km_group *g, struct gmember *m, void *ticket);
uint32_t km_group_rebalance_timeout_ms(const struct grp *gr);

/* group_rebalance.c */
void km_group_prepare_rebalance(struct km_group *g, struct grp *gr,
			   uint64_t now_ms);
void km_group_maybe_rebalance(struct km_group *g, struct grp *gr, uint64_t now_ms);
void km_group_maybe_complete(struct km_group *g, struct grp *gr, uint64_t now_ms);
bool km_group_vote(const struct grp *gr, char out[NAME_CAP]);
void km_group_answer_current(struct km_group *g, struct grp *gr, struct gmember *m,
		    void *ticket, const char *leader_id);

/* group_query.c: a member as DescribeGroups and a JoinGroup answer show it
 * (the metadata of the group's chosen protocol, if one is chosen). */
void km_group_member_view(const struct grp *gr, const struct gmember *m,
			  struct km_group_member_view *v);

#endif
