/* Fetch sessions: at most one connection per source broker (and per
 * bootstrap list) per worker, carrying every partition of the worker that
 * broker leads (kmirror issue #4: "pipelined Fetch, read_uncommitted, per
 * source broker per worker"). The partitions themselves are struct
 * km_fetcher (fetcher.h); this is the connection side.
 *
 * Pool. A worker owns one struct km_fsess_pool over caller memory for
 * sessions_max sessions (km_fsess_pool_init; nothing allocated later). Each
 * session may hold rx_bufs_max receive buffers of the backend's pool, so
 * sessions_max x rx_bufs_max should stay within what the worker gives to
 * fetching.
 *
 * Sessions of one bootstrap list (a group):
 *  - pinned to a broker address: connects only there, asks Metadata there
 *    for partitions that need a leader, fetches the partitions it leads.
 *    At most one per group and address. A partition whose leader moved to
 *    another broker moves to that broker's session, opened if needed (no
 *    free slot: it stays and asks again after backoff). A lost connection
 *    after a good answer reconnects to the same address with backoff; a
 *    connect that fails, or a connection lost before any good answer (the
 *    broker may be gone), hands the partitions to the group's discovery
 *    session, or, if there is none, the session becomes it;
 *  - discovery (at most one per group): connects to the brokers Metadata
 *    named, then the bootstrap list, in rotation; asks Metadata for all
 *    its partitions; becomes the pinned session of the broker it is
 *    connected to when that broker leads some of them and has no session,
 *    and moves the others on. It never fetches.
 * A session with no partition left closes and frees its slot.
 *
 * Requests. One in flight per session: ApiVersions after connecting; then,
 * in this order of priority, Metadata naming the topics of the partitions
 * waiting for a leader; ListOffsets naming the partitions waiting for an
 * offset; Fetch naming every partition ready to fetch (at most
 * KM_FETCHER_ASK_MAX and what KM_FSESS_REQ_BYTES holds, starting one
 * partition later each time, so none starves behind MaxBytes). A partition
 * backing off after an error is left out until its time. Once the broker
 * holds a KIP-227 session, a Fetch looks only at the members whose line
 * may have moved (the dirty list, fsess_dirty.c), not at every member.
 * After a reconnection, whatever its cause, every partition asks Metadata again
 * before it fetches: the cluster behind the address may have been
 * replaced, and only Metadata names it (issue 21).
 *
 * Callbacks of the network backend only record what happened on the
 * connection; responses are handled, and partitions moved, from
 * km_fsess_pool_step(), so no log call (which may poll the ring) ever re-enters
 * a handler.
 */
#ifndef KM_DATAPLANE_FSESS_H
#define KM_DATAPLANE_FSESS_H

#include "dataplane/fetch/fetcher.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
	KM_FSESS_REQ_BYTES = 32768, /* the one request being sent */
};

/* Partitions one session holds at most: as many as one Fetch asks. More
 * led by one broker take more sessions to it, each its own connection and
 * KIP-227 session (issue 17), so that none waits behind the others. */
#define KM_FSESS_MEMBERS_MAX KM_FETCHER_ASK_MAX

/* Sessions a worker's pool holds at most (STYLE 9): one per source broker
 * is enough for clusters of up to this many brokers. A struct km_fsess is
 * about 105 KiB (20 KiB kframe segments, 17 KiB brokers, 32 KiB request,
 * 8 KiB of asked partitions, 16 KiB index of the members, 8 KiB topic
 * ids). */
#define KM_FSESS_POOL_MAX 32u

struct km_fsess_pool_config {
	uint32_t sessions_max;	 /* 1..KM_FSESS_POOL_MAX */
	/* The receive buffers one session may hold at once (its share of the
	 * backend's pool, km_net_config rx_buf_count x rx_buf_bytes): bounds
	 * the Fetch MaxBytes and the largest response. rx_bufs_max is taken
	 * up to KM_KFRAME_SEGS_MAX. */
	uint32_t rx_buf_bytes;
	uint32_t rx_bufs_max;
	struct km_fetcher_scratch *scratch; /* required, see fetcher.h */
	km_fetcher_resolve_fn resolve;	    /* NULL: IPv4 literals only */
	void *resolve_ctx;
};

struct km_fsess_stats {
	uint64_t connects;	   /* connections attempted */
	uint64_t connect_errors;   /* ... that failed */
	uint64_t disconnects;	   /* open connections lost (not ours) */
	uint64_t requests;	   /* requests sent, all kinds */
	uint64_t fetch_requests;
	uint64_t fetch_partitions; /* partitions named by them, summed */
	uint64_t fetch_pipelined;  /* Fetches sent while a frame was held */
	uint64_t metadata_requests;
	uint64_t listoffsets_requests;
	uint64_t responses;
	uint64_t moves_in, moves_out; /* partitions moved by Metadata */
	uint64_t source_throttle_ms; /* the source's throttle_time_ms, summed */
	/* KIP-227 fetch sessions (fsess_inc.c). fetch_partitions above counts
	 * the partitions written into each Fetch, not the session's. */
	uint64_t fetch_full;	     /* Fetches naming every partition */
	uint64_t fetch_incremental;  /* ... naming only what changed */
	uint64_t fetch_forgotten;    /* partitions dropped from the session */
	uint64_t fetch_session_errors; /* answered 70, 71 or 106: a new one */
	uint64_t fetch_sessionless;  /* full Fetches answered with no session */
};

/* Partitions that left a session (stopped, failed, moved to another
 * broker) while in the broker's fetch session: the next incremental
 * Fetch names them in ForgottenTopicsData; more than this make it a full
 * Fetch, which replaces the broker's session. */
#define KM_FSESS_FORGET_MAX 16u

struct km_fsess_forget {
	char topic[KM_WIRE_NAME_BYTES_MAX + 1];
	uint8_t topic_id[KM_WIRE_UUID_BYTES];
	int32_t partition;
};

enum km_fsess_phase {
	KM_FPH_IDLE = 0,	   /* no connection: backoff, then connect */
	KM_FPH_CONNECT,		   /* connect in progress */
	KM_FPH_READY,		   /* requests flow */
};

/* Topics a session maps from id to name (fsess_dirty.c); a session of
 * more looks the others up among its members. */
#define KM_FSESS_TOPICS_MAX 32u
/* Buckets of a session's index of members (a power of 2). */
#define KM_FSESS_INDEX 2048u

struct km_fsess_topic {
	uint8_t id[KM_WIRE_UUID_BYTES];
	char name[KM_WIRE_NAME_BYTES_MAX + 1];
};

/* A broker named by Metadata (private). */
struct km_fetcher_broker {
	int32_t id;
	struct km_fetcher_addr addr;
};

/* Visible for sizeof only: every field is private. */
struct km_fsess {
	struct km_fsess_pool *pool;
	bool used;
	bool pinned;
	struct km_fetcher_addr pin; /* pinned: the broker */
	char pin_ip[KM_FETCHER_IPV4_BYTES];
	/* The group: bootstrap list and timing, from the first partition. */
	struct km_fetcher_addr bootstrap[KM_FETCHER_BOOTSTRAP_MAX];
	uint32_t n_bootstrap;
	int32_t max_wait_ms;
	int32_t cfg_max_bytes;
	uint32_t backoff_min_ms, backoff_max_ms, request_timeout_ms;
	struct km_throttle *throttle;	   /* the host's cap, or NULL */
	/* Brokers of Metadata, then the bootstrap list, in rotation. */
	struct km_fetcher_broker brokers[KM_FETCHER_BROKERS_MAX];
	uint32_t n_brokers;
	uint32_t rr;
	char cluster_id[KM_WIRE_NAME_BYTES_MAX + 1];
	/* Partitions. */
	struct km_fetcher *members;
	uint32_t n_members;
	/* Past here open_like() sets each field itself. */
	struct km_fetcher *tail;   /* the members' last */
	/* Members whose line the next Fetch must look at (fsess_dirty.c):
	 * joined, named by an answer, touched by an event, not ready to
	 * fetch, or out of the broker's session. Every other member is in
	 * the broker's session at its offset: an incremental Fetch leaves it
	 * out (issue 17: per-Fetch work follows the partitions that moved,
	 * not the session's size). */
	struct km_fetcher *dirty;
	uint32_t n_dirty;
	uint32_t n_capped;	   /* members with a cap of their own */
	uint64_t fs_answers;	   /* incremental answers, for stats.fetches */
	int32_t fs_line_max;	   /* PartitionMaxBytes the lines were built at */
	/* Topic ids of the session's topics (Fetch v13 answers name topics
	 * by id), and the members by topic and partition. */
	struct km_fsess_topic topics[KM_FSESS_TOPICS_MAX];
	uint32_t n_topics;
	struct km_fetcher *index[KM_FSESS_INDEX];
	/* Per-turn work over the members only when due (issue 17): look
	 * (the stall watchdog and the sweep of those done) after an error,
	 * a state change, a join or a frame released, or at look_at_ms, the
	 * earliest stall deadline (0: none); wait_due: a member may wait
	 * for this session to be ready. */
	bool look, wait_due;
	bool done_held;		   /* a member done, in the held frame */
	uint64_t look_at_ms;
	/* A member may want Metadata or ListOffsets (fsess_req.c): set by
	 * the events that make one want them; pre_at_ms: the earliest one
	 * backing off may (0: none). */
	bool pre_due;
	uint64_t pre_at_ms;
	/* A member may be ready to fetch (fsess_req.c): set by an answer, a
	 * member of the held one parsed, a join, an error; fetch_at_ms: the
	 * next scan at the latest (a backoff's end, or a few ms on). */
	bool fetch_due;
	uint64_t fetch_at_ms;
	/* The connection. */
	struct km_net_conn *conn;
	struct km_kframe kf;
	enum km_fsess_phase phase;
	bool dropping;		   /* we closed conn: not a lost connection */
	bool closed;		   /* on_close ran: conn_gone is due */
	bool lost;		   /* ... and it was not ours */
	bool connect_failed;	   /* on_connect reported an error */
	bool healthy;		   /* a Metadata or Fetch answer on it */
	bool versions_known;
	bool handover;		   /* hand the partitions to discovery */
	bool refresh;		   /* the cause may be a leader change
				      (never healthy: hand over) */
	bool overflow;		   /* more segments than kframe holds */
	struct km_fetcher_addr target; /* the connection's peer */
	char target_ip[KM_FETCHER_IPV4_BYTES];
	int16_t v_api_ask;	   /* ApiVersions version to ask next */
	int16_t v_apiversions, v_metadata, v_listoffsets, v_fetch;
	uint32_t backoff_ms;
	uint64_t retry_at_ms;	   /* next connect */
	uint32_t proto_streak;	   /* protocol errors since a good Fetch */
	uint64_t quiet_until_ms;   /* the source throttles us: no request
				      before (KIP-219) */
	/* The request in flight. */
	enum km_freq inflight;
	int32_t corr;
	int16_t inflight_ver;
	uint64_t sent_at_ms;
	uint64_t sent_us;	   /* the same, for the throttle's credit */
	bool send_busy;		   /* req[] is being sent */
	uint64_t meta_at_ms;	   /* discovery: next Metadata */
	struct km_fetcher *asked[KM_FETCHER_ASK_MAX]; /* in request order */
	uint32_t n_asked;
	/* Receive budget and MaxBytes (halved by stalls). */
	uint32_t budget_bufs;
	uint64_t budget_bytes;
	int32_t max_bytes;
	/* The response frame held while partitions append from it. */
	const struct km_kframe_frame *frame;
	uint32_t frame_users;	   /* partitions with in_frame set */
	/* Those partitions, so that draining the frame visits them only
	 * (issue 17); in_frame says which still are. */
	struct km_fetcher *held[KM_FETCHER_ASK_MAX];
	uint32_t n_held;
	uint8_t req[KM_FSESS_REQ_BYTES];
	struct km_fsess_stats stats;
	/* The broker's fetch session (KIP-227, fsess_inc.c): its id (0:
	 * none), the epoch the next Fetch carries (0: a full Fetch that opens
	 * one, replacing fs_id's), the Fetch version it was opened with;
	 * whether the Fetch in flight is full; how many partitions it
	 * wrote. */
	int32_t fs_id;
	int32_t fs_epoch;
	int16_t fs_ver;
	bool fs_full;
	uint32_t fs_written;
	uint32_t fs_forgot; /* partitions it put in ForgottenTopicsData */
	struct km_fsess_forget forget[KM_FSESS_FORGET_MAX];
	uint32_t n_forget;
	bool forget_overflow;
};

struct km_fsess_pool_stats {
	uint32_t sessions_open;	   /* now */
	uint32_t sessions_connected; /* now, with an open connection */
	uint64_t sessions_opened;  /* ever */
	uint64_t slots_exhausted;  /* a session was needed, no slot free */
	struct km_fsess_stats sum; /* of every session, closed ones too */
};

struct km_fsess_pool {
	struct km_net *net;
	struct km_fsess_pool_config cfg;
	struct km_fsess *sess;	   /* [cfg.sessions_max] */
	uint64_t opened;
	uint64_t exhausted;
	struct km_fsess_stats closed_sum; /* of sessions since freed */
	uint64_t looks;		   /* watchdog passes over a member list */
};

/* A fetch session's connection, for status. */
struct km_fsess_pool_conn {
	char peer[KM_FETCHER_IPV4_BYTES + 8]; /* "a.b.c.d:port" */
	struct km_net_conn_stats st;
	/* The broker's fetch session (KIP-227): id (0: none) and the epoch
	 * of the next Fetch. */
	int32_t fetch_session_id;
	int32_t fetch_session_epoch;
};

/** The connections of the pool's sessions that have one, at most cap.
 *  @return how many were written. */
uint32_t km_fsess_pool_conns(const struct km_fsess_pool *p, struct km_fsess_pool_conn *out,
			uint32_t cap);

/** Bytes of caller memory km_fsess_pool_init() needs for sessions_max. */
size_t km_fsess_pool_memsize(uint32_t sessions_max);

/**
 * Set up a pool over mem (km_fsess_pool_memsize(cfg->sessions_max) bytes,
 * suitably aligned, for the pool's lifetime).
 * @return 0, or -EINVAL: no net, no scratch, sessions_max out of range, or
 *         receive buffers too small for one useful Fetch (rx_buf_bytes x
 *         rx_bufs_max below 16 KiB).
 */
int km_fsess_pool_init(struct km_fsess_pool *p, const struct km_fsess_pool_config *cfg,
		  struct km_net *net, void *mem);

/**
 * Advance every session: timers (backoff, request timeouts), connects,
 * responses, appends waiting for queue room, releasing written frames,
 * the next requests, partitions leaving. Call every loop turn.
 * @return 1 if something moved, 0 if idle.
 */
int km_fsess_pool_step(struct km_fsess_pool *p);

/** True when no session is open (no connection, no buffer held). */
bool km_fsess_pool_idle(const struct km_fsess_pool *p);

/** Figures of the pool: open sessions, and sums over all sessions. */
void km_fsess_pool_get_stats(const struct km_fsess_pool *p, struct km_fsess_pool_stats *out);

/** Session i (0..sessions_max-1) if open, else NULL. */
const struct km_fsess *km_fsess_pool_session(const struct km_fsess_pool *p, uint32_t i);

static inline const struct km_fsess_stats *
km_fsess_get_stats(const struct km_fsess *s)
{
	return &s->stats;
}

/** Partitions the session carries now. */
static inline uint32_t km_fsess_members(const struct km_fsess *s)
{
	return s->n_members;
}

/** The broker it serves (pinned), or NULL (discovery). */
static inline const struct km_fetcher_addr *
km_fsess_broker(const struct km_fsess *s)
{
	return s->pinned ? &s->pin : NULL;
}

#ifdef __cplusplus
}
#endif

#endif
