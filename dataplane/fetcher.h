/* Fetch session: mirror ONE source partition into a km_log (DESIGN.md data
 * flow; R1, R6).
 *
 * Driving. Non-blocking, no threads, nothing allocated after init: the
 * worker loop calls km_uring_poll(), km_net_poll(), then km_fetcher_step()
 * every turn; connection callbacks run from those polls. The one wait is
 * km_log_reset_to() under offset_reset_earliest (rare: it finishes the
 * log's I/O and syncs the files it changes).
 *
 * Finding the leader. The session connects to a broker (the bootstrap list
 * of the config, and once known every broker Metadata named, tried in
 * rotation), negotiates versions with ApiVersions (v3 first; on
 * UNSUPPORTED_VERSION it steps down to the broker's advertised maximum, or
 * v0, as Kafka clients do; Fetch, Metadata and ListOffsets then use the
 * highest version both sides and kafka/proto.h speak: Fetch v4 at least,
 * and v5+ when offered, so each response carries the source's log start;
 * ListOffsets v1-v3, as v4+ adds only leader epochs), asks
 * Metadata for the partition's leader and the source cluster id, and if the
 * leader is another broker closes and connects to the leader's host:port.
 * There it asks ApiVersions again, then ListOffsets (earliest) if the log is
 * empty, else resumes at the log end (R6), and fetches (read_uncommitted).
 *
 * Pipelining and buffers. One request is in flight at a time and one
 * response frame is held at a time (kframe's contract). A Fetch response is
 * parsed (km_batch_parse over the receive chain: bounds, magic, CRC32C),
 * mapped in place (R1) and appended (KM_ORIGIN_MIRROR) straight from the
 * receive buffers; as soon as its last batch is parsed the next offset is
 * known and the next Fetch is sent, while the log is still writing, so the
 * link never idles on the disk (stats.fetch_pipelined counts these). The
 * next response queues behind the held frame, which is released only once
 * km_log_appended_offset() has passed its last batch. Fetch MaxBytes is
 * clamped to half of the receive buffers the session may hold, so one
 * response queued behind another always fits; a response that could never
 * fit fails the session, and one that cannot complete within the buffers
 * (receive buffers only partly filled) halves MaxBytes and refetches.
 *
 * Errors (stats.errors[] counts each kind):
 *  - NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION,
 *    FENCED/UNKNOWN_LEADER_EPOCH and the like: Metadata again (on the same
 *    connection; after KM_FETCHER_ROTATE_AFTER errors in a row,
 *    through the next broker of the rotation), with backoff, then on to the
 *    leader;
 *  - other retriable Kafka errors: the same request again after backoff;
 *  - a lost connection, a failed connect, no answer within
 *    request_timeout_ms: reconnect with backoff (doubling up to
 *    backoff_max_ms, reset by a good Fetch), refresh Metadata, resume from
 *    the log end;
 *  - a corrupt batch: rejected, counted, refetched from its offset;
 *    KM_FETCHER_CORRUPT_MAX times in a row at one offset: FAILED;
 *  - OFFSET_OUT_OF_RANGE: ListOffsets earliest and latest; if our next
 *    offset is above the source's high watermark (the source lost data):
 *    FAILED, never a silent truncation; if below the source's log start:
 *    FAILED naming both offsets, or, with offset_reset_earliest,
 *    km_log_reset_to(source start) and continue;
 *  - batch offsets going backwards, a log error, R1's INT64_MAX, an
 *    authorization or other non-retriable error: FAILED with the reason.
 */
#ifndef KM_DATAPLANE_FETCHER_H
#define KM_DATAPLANE_FETCHER_H

#include <stdbool.h>
#include <stdint.h>

#include "dataplane/kframe.h"
#include "dataplane/net.h"
#include "iouring_log/log.h"
#include "kafka/batch.h"
#include "kafka/proto.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Capacities (STYLE 9). A struct km_fetcher is about 68 KiB: 24 KiB of
 * batch views, 20 KiB of kframe segments, 21 KiB of broker addresses (the
 * bootstrap list and Metadata's), 1 KiB of request buffer. */
enum {
	KM_FETCHER_BURST = 256,		/* batches parsed per round */
	KM_FETCHER_REQ_BYTES = 1024,	/* the one request being sent */
	KM_FETCHER_BOOTSTRAP_MAX = 16,	/* bootstrap addresses */
	KM_FETCHER_BROKERS_MAX = 64,	/* brokers remembered from Metadata */
	KM_FETCHER_IPV4_BYTES = 16,	/* "255.255.255.255" + NUL */
	KM_FETCHER_REASON_BYTES = 320,	/* km_fetcher_reason(), with NUL */
};

/* Scratch for decoding Metadata and ApiVersions (about 1.3 MiB): one per
 * worker, shared by its sessions, which only use it inside a callback or
 * km_fetcher_step() on that worker's thread. Partitions of the mirrored
 * topic, and brokers of the cluster, above these counts fail the session. */
#define KM_FETCHER_META_BROKERS_MAX 256u
#define KM_FETCHER_META_PARTS_MAX 16384u
#define KM_FETCHER_META_NODES_MAX (KM_FETCHER_META_PARTS_MAX * 12u)
#define KM_FETCHER_API_KEYS_MAX 256u

struct km_fetcher_scratch {
	struct km_api_range keys[KM_FETCHER_API_KEYS_MAX];
	struct km_metadata_broker brokers[KM_FETCHER_META_BROKERS_MAX];
	struct km_metadata_topic topics[4];
	struct km_metadata_part parts[KM_FETCHER_META_PARTS_MAX];
	int32_t nodes[KM_FETCHER_META_NODES_MAX];
};

/* Refetches of one corrupt batch before the session gives up (FAILED): a
 * transient corruption on the wire heals on refetch, a stored one never. */
#define KM_FETCHER_CORRUPT_MAX 5
/* Protocol violations by the source (garbage, a bad frame size, a wrong
 * correlation id, a malformed answer) in a row, each answered by a
 * reconnect, before the session gives up (FAILED). */
#define KM_FETCHER_PROTO_MAX 5
/* Leader-type errors in a row answered on one connection before Metadata
 * is asked of the next broker in the rotation (a broker's metadata may lag). */
#define KM_FETCHER_ROTATE_AFTER 3u

enum km_fetcher_state {
	KM_FETCHER_CONNECTING = 0, /* finding the leader, or backing off */
	KM_FETCHER_MIRRORING = 1,  /* fetching from the leader */
	KM_FETCHER_FAILED = 2,	   /* see km_fetcher_reason() */
};

/* host:port. host is an IPv4 literal, "localhost", or a name the config's
 * resolver maps. */
struct km_fetcher_addr {
	char host[KM_WIRE_NAME_BYTES_MAX + 1];
	uint16_t port;
};

/**
 * Map a host name to an IPv4 literal WITHOUT blocking (a cache the daemon
 * filled at start, say). Called on the worker thread.
 * @return 0 with ipv4 filled, -EAGAIN (not known yet: retried with
 *         backoff), or another negative code (the name cannot be used).
 */
typedef int (*km_fetcher_resolve_fn)(void *ctx, const char *host,
				     char ipv4[KM_FETCHER_IPV4_BYTES]);

struct km_fetcher_config {
	struct km_fetcher_addr bootstrap[KM_FETCHER_BOOTSTRAP_MAX];
	uint32_t n_bootstrap;	   /* 1..KM_FETCHER_BOOTSTRAP_MAX */
	char topic[KM_WIRE_NAME_BYTES_MAX + 1];
	int32_t partition;
	int32_t max_wait_ms;	   /* Fetch MaxWaitMs; 0: 50 */
	int32_t max_bytes;	   /* Fetch MaxBytes before the clamp; 0: 1 MiB */
	uint32_t batch_bytes_max;  /* largest batch accepted; 0: the
				      KM_BATCH_BYTES_MAX */
	uint32_t backoff_ms;	   /* first retry backoff; 0: 50 */
	uint32_t backoff_max_ms;   /* 0: 2000 */
	uint32_t request_timeout_ms; /* an answer later than this (beyond
					MaxWaitMs) drops the connection; 0: 30 s */
	/* The receive buffers this session may hold at once (its share of the
	 * backend's pool, km_net_config rx_buf_count x rx_buf_bytes): bounds
	 * the Fetch MaxBytes and the largest response. Both required. */
	uint32_t rx_buf_bytes;
	uint32_t rx_bufs_max;
	/* mirror.offset.reset=earliest: when the source's log start has moved
	 * past our log end, restart the log there (km_log_reset_to) instead of
	 * failing. */
	bool offset_reset_earliest;
	struct km_fetcher_scratch *scratch; /* required, see above */
	km_fetcher_resolve_fn resolve;	    /* NULL: IPv4 literals only */
	void *resolve_ctx;
};

/* What stats.errors[] counts. */
enum km_fetcher_err {
	KM_FETCHER_ERR_NOT_LEADER = 0,	    /* NOT_LEADER_OR_FOLLOWER */
	KM_FETCHER_ERR_LEADER_NOT_AVAILABLE,
	KM_FETCHER_ERR_UNKNOWN_TOPIC,	    /* UNKNOWN_TOPIC_OR_PARTITION / _ID */
	KM_FETCHER_ERR_LEADER_EPOCH,	    /* FENCED_ / UNKNOWN_LEADER_EPOCH */
	KM_FETCHER_ERR_RETRIABLE,	    /* another retriable Kafka error */
	KM_FETCHER_ERR_OUT_OF_RANGE,	    /* OFFSET_OUT_OF_RANGE */
	KM_FETCHER_ERR_CONNECT,		    /* connect failed or no address */
	KM_FETCHER_ERR_DISCONNECT,	    /* an open connection was lost */
	KM_FETCHER_ERR_TIMEOUT,		    /* no answer in request_timeout_ms */
	KM_FETCHER_ERR_CORRUPT,		    /* batch rejected (= stats.corrupt) */
	KM_FETCHER_ERR_STALL,		    /* response outgrew the buffers */
	KM_FETCHER_ERR_PROTOCOL,	    /* garbage, bad size, bad answer */
	KM_FETCHER_ERR_KINDS,
};

/** Short name of an error kind ("not_leader", ...), for status output. */
const char *km_fetcher_err_name(enum km_fetcher_err kind);

struct km_fetcher_stats {
	uint64_t bytes;		   /* batch bytes appended */
	uint64_t batches;	   /* batches appended */
	uint64_t duplicates;	   /* batches the log skipped (below its end) */
	uint64_t corrupt;	   /* batches rejected (KM_EBADCRC, ...) */
	uint64_t reconnects;	   /* connections opened after the first */
	uint64_t fetches;	   /* Fetch responses handled */
	uint64_t fetch_pipelined;  /* Fetches sent while the previous
				      response's batches were still being
				      written */
	uint64_t metadata_refreshes; /* Metadata responses handled */
	uint64_t leader_changes;   /* leader id or address changed */
	uint64_t log_resets;	   /* km_log_reset_to by offset_reset_earliest */
	uint64_t errors[KM_FETCHER_ERR_KINDS];
	int64_t high_watermark;	   /* source HW, last Fetch/ListOffsets; -1 */
	int64_t log_start_offset;  /* source log start (Fetch v5+,
				      ListOffsets); -1 */
	int32_t leader_id;	   /* -1 while unknown */
	struct km_fetcher_addr leader; /* its address, "" while unknown */
	int32_t max_bytes;	   /* Fetch MaxBytes in use (after the clamp) */
	/* Versions negotiated on the last connection, -1 before. */
	int16_t v_apiversions, v_metadata, v_listoffsets, v_fetch;
};

/* Requests the session sends (private). */
enum km_freq {
	KM_FREQ_NONE = 0,
	KM_FREQ_APIVERSIONS,
	KM_FREQ_METADATA,
	KM_FREQ_EARLIEST,	   /* ListOffsets, timestamp -2 */
	KM_FREQ_LATEST,		   /* ListOffsets, timestamp -1 */
	KM_FREQ_FETCH,
};

/* Connection phases (private). */
enum km_fetch_phase {
	KM_FPH_IDLE = 0,	   /* no connection: backoff, then connect */
	KM_FPH_CONNECT,		   /* connect in progress */
	KM_FPH_READY,		   /* requests flow */
};

/* A broker named by Metadata (private). */
struct km_fetcher_broker {
	int32_t id;
	struct km_fetcher_addr addr;
};

/* Visible for sizeof and the inline accessors only: every field is
 * private. */
struct km_fetcher {
	struct km_fetcher_config cfg;
	struct km_net *net;
	struct km_log *log;
	struct km_net_conn *conn;
	struct km_kframe kf;
	enum km_fetcher_state state;
	enum km_fetch_phase phase;
	bool failed, stopped;
	bool dropping;		   /* we closed conn: not a lost connection */
	bool quick_reconnect;	   /* next connect without backoff */
	bool need_metadata;
	bool opened_once;
	bool in_handler;	   /* a response handler runs: callbacks that
				      re-enter (a log call polling the ring)
				      only queue */
	char reason[KM_FETCHER_REASON_BYTES];
	char cluster_id[KM_WIRE_NAME_BYTES_MAX + 1];
	/* Brokers: Metadata's, then the bootstrap list, in rotation. */
	struct km_fetcher_broker brokers[KM_FETCHER_BROKERS_MAX];
	uint32_t n_brokers;
	uint32_t rr;
	struct km_fetcher_addr target; /* the connection's peer */
	char target_ip[KM_FETCHER_IPV4_BYTES];
	bool target_leader;	   /* connected to the leader's address */
	/* Requests: at most one in flight; `next` waits for its time. */
	enum km_freq next, inflight;
	uint64_t next_at_ms;
	uint64_t sent_at_ms;
	int32_t corr;
	int16_t inflight_ver;
	int64_t inflight_offset;   /* FetchOffset of the Fetch in flight */
	bool send_busy;		   /* req[] is being sent */
	int16_t v_api_ask;	   /* ApiVersions version to ask next */
	uint32_t backoff_ms;
	uint32_t err_streak;	   /* request errors in a row */
	uint64_t retry_at_ms;	   /* next connect */
	/* Offsets. */
	int64_t next_offset;	   /* next offset to fetch, -1 unknown */
	int32_t max_bytes;	   /* MaxBytes in use */
	uint32_t budget_bufs;	   /* receive buffers we may hold */
	uint64_t budget_bytes;
	bool oor;		   /* resolving OFFSET_OUT_OF_RANGE */
	int64_t oor_start;
	int64_t corrupt_offset;	   /* where the last corrupt batch sat */
	uint32_t corrupt_streak;   /* rejections there in a row */
	uint32_t proto_streak;	   /* protocol errors since a good Fetch */
	/* The Fetch response being appended (the held frame). */
	const struct km_kframe_frame *frame;
	struct km_chain_cur rec_cur; /* next batch in the records span */
	uint32_t rec_left;
	int64_t resp_last;	   /* last offset of the response's last batch */
	uint32_t resp_batches;	   /* whole batches framed in the response */
	struct km_batch batches[KM_FETCHER_BURST];
	uint32_t n_batches, n_done;
	int64_t wait_offset;	   /* release the frame when appended > this */
	bool fetch_asked;	   /* the next Fetch was asked for this frame */
	uint8_t req[KM_FETCHER_REQ_BYTES];
	struct km_fetcher_stats stats;
};

/**
 * Set up a session (nothing happens until km_fetcher_step).
 * @return 0, or -EINVAL: no bootstrap address, more than
 *         KM_FETCHER_BOOTSTRAP_MAX, a bootstrap host that is neither an IPv4
 *         literal nor "localhost" and no resolver, no topic, a negative
 *         partition, no scratch, no net or log, or receive buffers too
 *         small for one useful Fetch (rx_buf_bytes x rx_bufs_max below
 *         16 KiB; rx_bufs_max is taken up to KM_KFRAME_SEGS_MAX).
 */
int km_fetcher_init(struct km_fetcher *f, const struct km_fetcher_config *cfg,
		    struct km_net *net, struct km_log *log);

/**
 * Advance the session: timers (backoff, request timeout), appends waiting
 * for queue room, releasing written frames, the next request. Call every
 * loop turn.
 * @return 1 if something moved, 0 if idle, or -1 once FAILED or stopped.
 */
int km_fetcher_step(struct km_fetcher *f);

/** Abort the connection (reason "stopped"); the session then waits for
 *  on_close and for the writes of a held frame, and writes nothing more.
 *  Call and poll until km_fetcher_idle(). */
void km_fetcher_stop(struct km_fetcher *f);

/** True when no connection and no buffer is held (safe to destroy). */
bool km_fetcher_idle(const struct km_fetcher *f);

/** Drop the connection as if the peer had (tests: a cut mid-stream). */
void km_fetcher_cut(struct km_fetcher *f);

static inline enum km_fetcher_state
km_fetcher_get_state(const struct km_fetcher *f)
{
	return f->state;
}

/** Why the session FAILED (or "stopped"), at most KM_FETCHER_REASON_BYTES
 *  with its NUL; "" otherwise. Valid while the session is. */
const char *km_fetcher_reason(const struct km_fetcher *f);

static inline const struct km_fetcher_stats *
km_fetcher_get_stats(const struct km_fetcher *f)
{
	return &f->stats;
}

/** The source cluster id from Metadata (v2+), "" until known. */
static inline const char *km_fetcher_cluster_id(const struct km_fetcher *f)
{
	return f->cluster_id;
}

static inline int64_t km_fetcher_high_watermark(const struct km_fetcher *f)
{
	return f->stats.high_watermark;
}

#ifdef __cplusplus
}
#endif

#endif
