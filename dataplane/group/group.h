/* Kafka consumer-group coordinator: the classic group membership protocol
 * (JoinGroup 0-5, SyncGroup 0-3, Heartbeat 0-3, LeaveGroup 0-3, the
 * membership checks of OffsetCommit 0-7, ListGroups, DescribeGroups) as pure
 * logic. No I/O, no wire structs, no clock of its own: the front-end glue
 * decodes a request, calls in with the time, and encodes what comes back.
 *
 * Model (Kafka's GroupCoordinator / GroupMetadata, KIP-345, KIP-394): a table
 * of groups, each Empty -> PreparingRebalance -> CompletingRebalance ->
 * Stable (and back to PreparingRebalance whenever membership or metadata
 * changes). Dead is only reported for a group that is not in the table.
 *
 * Delayed answers. A JoinGroup waits until every known member has rejoined
 * or the rebalance timeout (the largest of the members') passes; a
 * follower's SyncGroup waits for the leader's. The caller passes an opaque
 * ticket with each join and sync; the answer arrives through
 * cfg.on_join / cfg.on_sync with that ticket, EXACTLY ONCE per accepted
 * ticket unless km_group_cancel() withdrew it first. The callback may run
 * inside the call that took the ticket (an immediate answer, or the join
 * that completes a rebalance answers every waiting member, itself included),
 * inside another member's call, or inside km_group_tick(). Callbacks must
 * not call any km_group_* function (asserted); everything they are given
 * (strings, member lists, bytes) is valid only during the callback.
 *
 * Simplifications against Kafka, on purpose:
 *  - Nothing is persisted: a restart forgets every group (members rejoin
 *    with UNKNOWN_MEMBER_ID -> JoinGroup). Committed offsets live elsewhere.
 *  - The protocol check of a join (INCONSISTENT_GROUP_PROTOCOL) counts the
 *    OTHER members only, so a lone member may change its protocols (Kafka
 *    counts the joining member's old protocols too).
 *  - Pending members (KIP-394, MEMBER_ID_REQUIRED) count against
 *    members_max, so the table stays bounded; a full group answers the first
 *    join with GROUP_MAX_SIZE_REACHED.
 *  - An Empty group stays in the table (for DescribeGroups / ListGroups)
 *    until its slot is needed for a new group; a full table of non-empty
 *    groups answers joins of new groups with COORDINATOR_NOT_AVAILABLE.
 *  - A join that repeats a member's still-waiting join (or a sync that
 *    repeats a waiting sync) answers the older ticket REBALANCE_IN_PROGRESS
 *    (Kafka drops the older callback silently; we keep exactly-once).
 *  - A member removed while its sync waits gets UNKNOWN_MEMBER_ID on it.
 * Kafka rules kept, including the less obvious ones:
 *  - The initial rebalance delay (group.initial.rebalance.delay.ms) applies
 *    when a rebalance starts from Empty; each new member during it extends
 *    it by the delay again, up to the rebalance timeout in total; it does
 *    not end early when everyone has joined.
 *  - During a rebalance a member whose join is awaited is not expired by its
 *    session timeout (the rebalance timeout governs), except a brand-new
 *    member after 5 minutes (NewMemberJoinTimeoutMs); a member whose sync
 *    waits is not expired either. At the end of the rebalance, dynamic
 *    members that did not rejoin are removed; static members stay (their
 *    session timeout removes them). If the leader did not rejoin, the first
 *    member that did leads; if only absent static members remain, the
 *    rebalance waits another rebalance timeout.
 *  - Protocol vote: among protocols every member supports, each member votes
 *    for its first supported one in its own order; most votes wins, ties go
 *    to the earlier in the first member's list.
 *  - A Stable follower rejoining with unchanged metadata gets the current
 *    generation at once; the leader rejoining, or changed metadata, starts
 *    a rebalance. A CompletingRebalance member rejoining with unchanged
 *    metadata gets the current generation at once (the leader again with
 *    the member list).
 *  - Static membership (KIP-345): a join with member id "" and a known
 *    group instance id replaces the old member under a new member id; the
 *    old id is then unknown, and a request carrying the old id with the
 *    instance id gets FENCED_INSTANCE_ID (also the old member's waiting
 *    join or sync). Stable group and the vote would pick the same protocol:
 *    no rebalance; the answer has the current generation and the CURRENT
 *    leader id (the old one if the replaced member led, so the new member
 *    does not run an assignment that a Stable group would not broadcast);
 *    the assignment carries over. CompletingRebalance: a rebalance (the
 *    leader may be assigning to the old id). A new static member skips
 *    MEMBER_ID_REQUIRED. LeaveGroup with just a member id removes a static
 *    member too, as Kafka does: it is the clients that do not send
 *    LeaveGroup for static members.
 *  - Heartbeat while CompletingRebalance is NONE and refreshes the session
 *    (Kafka 2.6+), REBALANCE_IN_PROGRESS while PreparingRebalance.
 *  - OffsetCommit with generation < 0 is a "simple" commit, allowed when the
 *    group is not in the table or is Empty; while PreparingRebalance a
 *    member's commit is allowed (the heartbeat tells it to rejoin).
 *
 * Threading: single-threaded, the front-end's worker. Memory: the group
 * table and the scratch of a leader's sync are allocated by
 * km_group_create(); the rest on demand, at the rate of rebalances, never
 * per heartbeat or commit: per member about 1.1 KiB plus its metadata and
 * assignment (the assignment's buffer is kept across generations and only
 * grows); each group's member array grows up to members_max and stays
 * with its slot for the next group in it.
 */
#ifndef KM_DATAPLANE_GROUP_H
#define KM_DATAPLANE_GROUP_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Kafka error codes (Errors.java values) the coordinator answers with.
 * Prefixed so they never clash with kafka/proto.h's enum km_kerr. */
enum km_group_kerr {
	KM_GROUP_ERR_NONE = 0,
	KM_GROUP_ERR_COORDINATOR_NOT_AVAILABLE = 15,
	KM_GROUP_ERR_ILLEGAL_GENERATION = 22,
	KM_GROUP_ERR_INCONSISTENT_GROUP_PROTOCOL = 23,
	KM_GROUP_ERR_INVALID_GROUP_ID = 24,
	KM_GROUP_ERR_UNKNOWN_MEMBER_ID = 25,
	KM_GROUP_ERR_INVALID_SESSION_TIMEOUT = 26,
	KM_GROUP_ERR_REBALANCE_IN_PROGRESS = 27,
	KM_GROUP_ERR_INVALID_REQUEST = 42,
	KM_GROUP_ERR_NON_EMPTY_GROUP = 68,
	KM_GROUP_ERR_GROUP_ID_NOT_FOUND = 69,
	KM_GROUP_ERR_MEMBER_ID_REQUIRED = 79,
	KM_GROUP_ERR_GROUP_MAX_SIZE_REACHED = 81,
	KM_GROUP_ERR_FENCED_INSTANCE_ID = 82,
};

enum km_group_state {
	KM_GROUP_EMPTY = 0,
	KM_GROUP_PREPARING_REBALANCE = 1,
	KM_GROUP_COMPLETING_REBALANCE = 2,
	KM_GROUP_STABLE = 3,
	KM_GROUP_DEAD = 4,
};

enum {
	/* Group ids, member ids, instance ids, protocol type and names: longer
	 * is refused (INVALID_GROUP_ID for the group id, UNKNOWN_MEMBER_ID for
	 * a member id, INVALID_REQUEST for the others). Client id and host are
	 * informational and cut to this length. */
	KM_GROUP_NAME_BYTES_MAX = 255,
	/* Kafka's NewMemberJoinTimeoutMs: a new member waiting in a rebalance
	 * is dropped after this (it may retry). */
	KM_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS = 300000,
};

/** Kafka's spelling of a state: "Empty", "PreparingRebalance",
 *  "CompletingRebalance", "Stable", "Dead". Static string. */
const char *km_group_state_name(enum km_group_state s);

struct km_group_join_result;

/** A join's answer; ticket as given to km_group_join(). arg: cfg.cb_arg. */
typedef void (*km_group_join_fn)(void *arg, void *ticket,
				 const struct km_group_join_result *res);
/** A sync's answer: error, and on NONE the member's assignment (len 0 for
 *  an empty one; assignment may then be NULL). */
typedef void (*km_group_sync_fn)(void *arg, void *ticket, int16_t error,
				 const uint8_t *assignment, uint32_t len);

struct km_group_config {
	uint32_t groups_max;		  /* groups in the table, >= 1 */
	uint32_t members_max;		  /* members (+ pending) per group,
					   * >= 1 (group.max.size) */
	uint32_t protocols_max;		  /* protocols in one join, >= 1 */
	uint32_t session_timeout_min_ms;  /* group.min.session.timeout.ms */
	uint32_t session_timeout_max_ms;  /* group.max.session.timeout.ms */
	uint32_t initial_rebalance_delay_ms; /* group.initial.rebalance.delay.ms */
	uint32_t metadata_bytes_max;	  /* one protocol's metadata, and one
					   * assignment (INVALID_REQUEST) */
	km_group_join_fn on_join;	  /* required */
	km_group_sync_fn on_sync;	  /* required */
	void *cb_arg;
};

/** Kafka's defaults: 1024 groups, 1000 members, 16 protocols, session
 *  6000..1800000 ms, initial delay 3000 ms, 1 MiB metadata; no callbacks. */
void km_group_config_default(struct km_group_config *cfg);

struct km_group; /* opaque: the coordinator, all groups */

/**
 * @return 0 and *out, or -EINVAL (a limit is 0, min > max session timeout,
 *         metadata_bytes_max over 64 MiB, a callback missing), -ENOMEM.
 */
int km_group_create(const struct km_group_config *cfg, struct km_group **out);

/** Free everything. Waiting tickets are dropped without a callback. */
void km_group_destroy(struct km_group *g);

/* ---- JoinGroup -------------------------------------------------------- */

struct km_group_protocol {
	const char *name;	  /* NUL-terminated */
	const uint8_t *metadata;  /* may be NULL when metadata_len is 0 */
	uint32_t metadata_len;
};

/* Strings are NUL-terminated and only read during the call (copied). */
struct km_group_join_req {
	const char *group_id;
	const char *member_id;	  /* "" (or NULL) for a new member */
	const char *instance_id;  /* group.instance.id; NULL: dynamic */
	const char *client_id;	  /* request header; NULL reads as "" */
	const char *client_host;  /* peer address; NULL reads as "" */
	int32_t session_timeout_ms;
	int32_t rebalance_timeout_ms; /* < 0 (v0): the session timeout */
	const char *protocol_type;    /* "consumer" */
	const struct km_group_protocol *protocols; /* preference order */
	uint32_t n_protocols;
	int16_t version;	  /* >= 4: new dynamic members get
				   * MEMBER_ID_REQUIRED first (KIP-394) */
};

/* For the leader, per member (its instance id NULL if dynamic) with the
 * metadata of the chosen protocol; describe also fills client id, host and
 * assignment. */
struct km_group_member_view {
	const char *member_id;
	const char *instance_id;
	const char *client_id;
	const char *client_host;
	const uint8_t *metadata;
	uint32_t metadata_len;
	const uint8_t *assignment;
	uint32_t assignment_len;
};

struct km_group_join_result {
	int16_t error;		  /* enum km_group_kerr */
	int32_t generation;	  /* -1 on error */
	const char *protocol_type; /* "" on error */
	const char *protocol;	  /* chosen protocol; "" on error */
	const char *leader_id;	  /* "" on error */
	const char *member_id;	  /* the member's id; on MEMBER_ID_REQUIRED
				   * the id to rejoin with; on another error
				   * the request's id if the group was found
				   * (Kafka's joinError), else "" */
	const struct km_group_member_view *members; /* leader only, else NULL */
	uint32_t n_members;
};

/**
 * JoinGroup. Refreshes the member's session. Errors, roughly in the order
 * checked, come back through on_join: INVALID_GROUP_ID (empty or too long),
 * INVALID_SESSION_TIMEOUT, INVALID_REQUEST (a field over its bound),
 * INCONSISTENT_GROUP_PROTOCOL (no protocol type or protocols; or no
 * protocol in common with every other member, or another protocol type),
 * UNKNOWN_MEMBER_ID (a member id this group does not know, or a known
 * instance id under an unknown member id), COORDINATOR_NOT_AVAILABLE (the
 * table is full), GROUP_MAX_SIZE_REACHED, FENCED_INSTANCE_ID (an instance
 * id held by another member id), MEMBER_ID_REQUIRED (v4+ new dynamic
 * member: rejoin with result->member_id).
 * @param ticket  answered once through on_join (maybe before this returns).
 * @return 0 (the ticket is taken), or -ENOMEM / -errno from the member id's
 *         random draw: the ticket is NOT taken and nothing changed.
 */
int km_group_join(struct km_group *g, const struct km_group_join_req *req,
		  void *ticket, uint64_t now_ms);

/* ---- SyncGroup -------------------------------------------------------- */

struct km_group_assignment {
	const char *member_id;
	const uint8_t *assignment;
	uint32_t assignment_len;
};

struct km_group_sync_req {
	const char *group_id;
	const char *member_id;
	const char *instance_id;  /* NULL: none */
	int32_t generation;
	const struct km_group_assignment *assignments; /* leader's; a member
							* named twice: the
							* last one counts */
	uint32_t n_assignments;
};

/**
 * SyncGroup. Errors through on_sync: INVALID_GROUP_ID, UNKNOWN_MEMBER_ID
 * (also for an unknown or Empty group), FENCED_INSTANCE_ID,
 * ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS (PreparingRebalance, or a
 * rebalance started while it waited), INVALID_REQUEST (the leader's
 * assignment over metadata_bytes_max). The leader's sync stores the
 * assignments (names not in the group ignored, members left out get an
 * empty one), makes the group Stable and answers every waiting sync.
 * @return 0 (ticket taken) or -ENOMEM (not taken, nothing changed).
 */
int km_group_sync(struct km_group *g, const struct km_group_sync_req *req,
		  void *ticket, uint64_t now_ms);

/* ---- Heartbeat, OffsetCommit checks, LeaveGroup ---------------------- */

/**
 * Heartbeat: refreshes the session of a current member.
 * @return a Kafka code: NONE, INVALID_GROUP_ID, UNKNOWN_MEMBER_ID,
 *         FENCED_INSTANCE_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS.
 */
int16_t km_group_heartbeat(struct km_group *g, const char *group_id,
			   const char *member_id, const char *instance_id,
			   int32_t generation, uint64_t now_ms);

/**
 * May this OffsetCommit store offsets? A member's commit refreshes its
 * session. generation < 0 is a simple commit (no group management).
 * @return NONE, INVALID_GROUP_ID (NULL id; "" is allowed as in Kafka),
 *         ILLEGAL_GENERATION (unknown group, generation >= 0, or stale),
 *         FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS
 *         (CompletingRebalance).
 */
int16_t km_group_commit_check(struct km_group *g, const char *group_id,
			      const char *member_id, const char *instance_id,
			      int32_t generation, uint64_t now_ms);

/**
 * May this TxnOffsetCommit (v3+: member, generation, instance) store
 * pending offsets? Kafka's transactional rules: a request naming no member
 * (generation < 0, no ids) is taken in any state; a member's is checked as
 * OffsetCommit's, but CompletingRebalance is no error and its session is
 * not refreshed.
 * @return NONE, INVALID_GROUP_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID,
 *         UNKNOWN_MEMBER_ID.
 */
int16_t km_group_txn_commit_check(struct km_group *g, const char *group_id,
				  const char *member_id,
				  const char *instance_id, int32_t generation);

struct km_group_leave_member {
	const char *member_id;	  /* "" with an instance id: by instance */
	const char *instance_id;  /* NULL: none (v0-2) */
};

/**
 * LeaveGroup: removes each member (a pending one too), answering its
 * waiting join with UNKNOWN_MEMBER_ID; a rebalance follows if members
 * remain, else the group goes Empty.
 * @param errors  n entries: per member NONE, UNKNOWN_MEMBER_ID or
 *                FENCED_INSTANCE_ID (v0-2 answer errors[0] at the top).
 * @return the top-level code: NONE or INVALID_GROUP_ID (errors then unset).
 */
int16_t km_group_leave(struct km_group *g, const char *group_id,
		       const struct km_group_leave_member *members, uint32_t n,
		       int16_t *errors, uint64_t now_ms);

/* ---- Time, cancellation ---------------------------------------------- */

/**
 * Expire sessions and pending member ids, end initial delays and rebalance
 * timeouts; answers fire from here. Call when km_group_next_deadline_ms()
 * has passed (calling more often is harmless).
 */
void km_group_tick(struct km_group *g, uint64_t now_ms);

/** When km_group_tick() must run next; UINT64_MAX if nothing waits. */
uint64_t km_group_next_deadline_ms(const struct km_group *g);

/**
 * Withdraw every waiting join and sync holding ticket (the connection
 * closed): none of them will be answered. The members stay until their
 * sessions time out, as in Kafka; a withdrawn join still counts as joined.
 * @return how many waits were withdrawn.
 */
uint32_t km_group_cancel(struct km_group *g, void *ticket);

/* ---- Queries ---------------------------------------------------------- */

/** True when the group has members or pending members: the offset sync
 *  from the source must then leave its committed offsets alone. */
bool km_group_is_active(const struct km_group *g, const char *group_id);

struct km_group_overview {
	const char *group_id;
	const char *protocol_type;
	const char *state;	  /* km_group_state_name() */
};

/**
 * ListGroups: the groups in the table, in table order.
 * @return how many there are (may exceed cap; the first cap are written).
 *         Strings are valid until the next call that is not a query.
 */
uint32_t km_group_list(const struct km_group *g, struct km_group_overview *out,
		       uint32_t cap);

struct km_group_description {
	enum km_group_state state;
	const char *state_name;
	const char *protocol_type;
	const char *protocol;	  /* "" unless Stable / CompletingRebalance
				   * (Kafka's summary) */
	const char *leader_id;	  /* "" if none */
	int32_t generation;
	uint32_t n_members;
};

/**
 * DescribeGroups. A group not in the table reads as Dead with no members
 * (Kafka's answer to v0-5). Member views carry the chosen protocol's
 * metadata (none before the first generation) and the assignment.
 * @return the member count (may exceed cap; the first cap are written), or
 *         -EINVAL for a NULL group id. Views valid until the next call
 *         that is not a query.
 */
int km_group_describe(const struct km_group *g, const char *group_id,
		      struct km_group_description *out,
		      struct km_group_member_view *members, uint32_t cap);

/**
 * DeleteGroups, for one group.
 * @return NONE (removed), GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP.
 */
int16_t km_group_delete(struct km_group *g, const char *group_id);

/**
 * Check the internal invariants (tests): member and pending counts, one
 * leader among the members while CompletingRebalance or Stable, waiting
 * syncs only while CompletingRebalance, waiting joins only while
 * PreparingRebalance, unique member and instance ids.
 * @return 0, or -EPROTO at the first broken one.
 */
int km_group_verify(const struct km_group *g);

#ifdef __cplusplus
}
#endif

#endif
