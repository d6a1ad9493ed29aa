/* Mirroring one source partition into a km_log (DESIGN.md data flow; R1,
 * R6), inside a shared fetch session (dataplane/fetch/fsess.h).
 *
 * A struct km_fetcher is one mirrored partition: its offsets, the records
 * of a Fetch response it is appending, its error policy, state and figures.
 * It does no I/O of its own: km_fetcher_init() attaches it to a fetch
 * session of the worker's pool (struct km_fsess_pool), which holds at most one
 * connection per source broker and per bootstrap list, and names every
 * partition it carries in each request (multi-partition Fetch, KIP-74:
 * PartitionMaxBytes per partition, MaxBytes for the response). The worker
 * loop calls km_uring_poll(), km_net_poll(), then km_fsess_pool_step().
 *
 * Finding the leader. A new partition joins a session of its bootstrap
 * list (the list's discovery session, else any of its sessions), which asks
 * Metadata (one request naming the topics of every partition that needs a
 * leader) on its connection. A partition whose leader is the broker of its
 * session stays; one led elsewhere moves to the session of that broker,
 * opened if there is none (fsess.h). The session negotiates versions with
 * ApiVersions (v3 first; on UNSUPPORTED_VERSION it steps down to the
 * broker's advertised maximum, or v0, as Kafka clients do; Fetch, Metadata
 * and ListOffsets then use the highest version both sides and kafka/proto.h
 * speak: Fetch v4 at least, and v5+ when offered, so each response carries
 * the source's log start, up to v13, which names each topic by the id its
 * partitions hold (below; v12, by name, for a request naming a partition
 * that holds no id); ListOffsets v1-v3, as v4+ adds only leader
 * epochs). A partition then asks ListOffsets (earliest) if its log is
 * empty, else resumes at the log end (R6), and is fetched (read_uncommitted).
 *
 * Pipelining and buffers. One request is in flight per session and one
 * response frame is held per session (kframe's contract). A Fetch response
 * is split into its partitions' records spans; each partition parses its
 * span (km_batch_parse over the receive chain: bounds, magic, CRC32C), maps
 * it in place (R1) and appends it (KM_ORIGIN_MIRROR) straight from the
 * receive buffers; as soon as the spans are parsed the next offsets are
 * known and the next Fetch is sent, while the logs are still writing
 * (stats.fetch_pipelined counts a partition named so). The next response
 * queues behind the held frame, which is released only once every
 * partition's km_log_appended_offset() has passed its batches in it. Fetch
 * MaxBytes is clamped to half of the receive buffers the session may hold,
 * so one response queued behind another always fits; a response that could
 * never fit fails the session's partitions, and one that cannot complete
 * within the buffers (receive buffers only partly filled) halves MaxBytes
 * and refetches.
 *
 * Errors of one partition (stats.errors[] counts each kind) touch only it:
 *  - NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION,
 *    FENCED/UNKNOWN_LEADER_EPOCH and the like: Metadata again after backoff
 *    (on the session's connection; after KM_FETCHER_ROTATE_AFTER errors in
 *    a row, through the discovery session, which rotates over the brokers),
 *    then on to the leader's session;
 *  - other retriable Kafka errors: the same request again after backoff;
 *  - a corrupt batch: rejected, counted, refetched from its offset;
 *    KM_FETCHER_CORRUPT_MAX times in a row at one offset: FAILED;
 *  - OFFSET_OUT_OF_RANGE: ListOffsets earliest and latest; if our next
 *    offset is above the source's high watermark (the source lost data):
 *    FAILED, never a silent truncation; if below the source's log start:
 *    FAILED naming both offsets, or, with offset_reset_earliest,
 *    km_log_reset_to(source start) and continue (the one wait: it finishes
 *    the log's I/O and syncs the files it changes), with an ERROR line
 *    naming the offsets lost and stats.offsets_skipped counting them; if
 *    the source's start is inside a batch (DeleteRecords), the empty log
 *    restarts again at that batch's base to take it whole, as Kafka's
 *    followers do;
 *  - a batch whose baseOffset is not the next offset expected (issue 21:
 *    baseOffset is outside the CRC, so a damaged one passes
 *    km_batch_parse): below it or overlapping what the log holds, or
 *    jumping past the response's high watermark. The batch and the rest
 *    of the span are dropped (nothing of it appended), a WARN names the
 *    partition and both offsets, km_fetcher_note() says so while it
 *    lasts, and the offset is refetched after a backoff doubling each
 *    time; KM_FETCHER_CORRUPT_MAX times in a row at one offset: FAILED.
 *    A forward jump below the high watermark cannot be told from a
 *    compaction gap (R6 keeps gaps); if it overlaps the next batch, the
 *    next Fetch sees the overlap;
 *  - UNKNOWN_TOPIC_OR_PARTITION in Metadata (the source lacks the topic
 *    or partition): as the other leader errors, and km_fetcher_note()
 *    says "source has no partition t-5", with one WARN on the way in and
 *    one INFO on the way out;
 *  - a log error, R1's INT64_MAX, an authorization or other
 *    non-retriable error: FAILED with the reason;
 *  - a log append refused for space (-ENOSPC, -EDQUOT): FAILED too, with
 *    km_fetcher_no_space() true, so that the owner waits for space rather
 *    than for an operator (control/daemon_disk.c).
 *
 * Transient and operator failures (issue 19 item 6). Every FAILED above
 * needs an operator (corrupt data, a source that changed identity, an
 * offset gap the source cannot serve, the source's data lost, a log
 * error). The transient causes (the source unreachable, no leader, not
 * leader, a request timeout, another retriable error) never fail the
 * partition on their own: it stays CONNECTING and retries inside its
 * session. With cfg.unavailable_ms, a partition still CONNECTING that long
 * after such an error without a good Fetch since FAILS with
 * km_fetcher_transient() true: the owner may then retry it with a new
 * fetcher (cfg.retry_attempt), whose first such error before its first
 * good Fetch fails it again, so the owner's backoff paces the retries,
 * not the session's.
 *
 * Source identity (issue 21). A partition holds to one source: its
 * cluster id (Metadata v2+ ClusterId) and its topic id (Metadata v10+
 * TopicId; all zero means "not provided", as librdkafka's mock sends). The
 * config names the ones its log mirrors, or none yet: then the first
 * Metadata answer that provides one sets it (km_fetcher_pub_gen() moves,
 * so the owner can persist it). Every new connection of a session asks
 * Metadata before its partitions fetch, and every answer is compared: a
 * different id FAILS the partition with both ids in the reason, before
 * anything more is appended. The held ids are never replaced. Between two
 * Metadata answers the Fetch itself checks the topic id (v13+): a broker
 * whose topic of that name is now another one answers UNKNOWN_TOPIC_ID
 * (Metadata again, which fails the partition) instead of serving the new
 * topic's offsets, which a fetch by name would splice onto the log (seen
 * with Kafka 4.3: a mirror frozen while the topic was made again).
 * Errors of the connection touch every partition on it: a lost connection,
 * a failed connect, no answer within request_timeout_ms: reconnect with
 * backoff (doubling up to backoff_max_ms, reset by a good Fetch), Metadata
 * again, every partition resumes from its log end; KM_FETCHER_PROTO_MAX
 * protocol violations in a row: the session's partitions FAIL.
 */
#ifndef KM_DATAPLANE_FETCHER_H
#define KM_DATAPLANE_FETCHER_H

#include <stdbool.h>
#include <stdint.h>

#include "dataplane/fetch/throttle.h"
#include "dataplane/net/kframe.h"
#include "dataplane/net/net.h"
#include "iouring_log/log.h"
#include "kafka/batch.h"
#include "kafka/proto.h"

#ifdef __cplusplus
extern "C" {
#endif

struct km_fsess_pool;
struct km_fsess;

/* Capacities (STYLE 9). A struct km_fetcher is about 30 KiB: 24 KiB of
 * batch views, 4 KiB of bootstrap addresses. */
enum {
	KM_FETCHER_BURST = 256,		/* batches parsed per round */
	KM_FETCHER_BOOTSTRAP_MAX = 16,	/* bootstrap addresses */
	KM_FETCHER_BROKERS_MAX = 64,	/* brokers remembered from Metadata */
	KM_FETCHER_IPV4_BYTES = 16,	/* "255.255.255.255" + NUL */
	KM_FETCHER_REASON_BYTES = 320,	/* km_fetcher_reason(), with NUL */
	KM_FETCHER_ASK_MAX = 1024,	/* partitions one request names */
};

/* Scratch for decoding Metadata and ApiVersions and building requests
 * (about 2 MiB): one per worker, shared by its sessions, which only use it
 * inside km_fsess_pool_step() on that worker's thread. Brokers of the cluster,
 * and partitions of the topics named, above these counts fail the
 * partitions named. */
#define KM_FETCHER_META_BROKERS_MAX 256u
#define KM_FETCHER_META_TOPICS_MAX 256u
#define KM_FETCHER_META_PARTS_MAX 16384u
#define KM_FETCHER_META_NODES_MAX (KM_FETCHER_META_PARTS_MAX * 12u)
#define KM_FETCHER_API_KEYS_MAX 256u

/* A partition an incremental Fetch drops from the broker's session. */
struct km_fetcher_fg {
	const char *topic;
	const uint8_t *topic_id;
	int32_t partition;
};

struct km_fetcher_scratch {
	struct km_api_range keys[KM_FETCHER_API_KEYS_MAX];
	struct km_metadata_broker brokers[KM_FETCHER_META_BROKERS_MAX];
	struct km_metadata_topic topics[KM_FETCHER_META_TOPICS_MAX];
	struct km_metadata_part parts[KM_FETCHER_META_PARTS_MAX];
	int32_t nodes[KM_FETCHER_META_NODES_MAX];
	/* A request being built, a ListOffsets answer being read. */
	struct km_wire_name names[KM_FETCHER_META_TOPICS_MAX];
	struct km_proto_topic req_topics[KM_FETCHER_ASK_MAX];
	uint8_t req_topic_ids[KM_FETCHER_ASK_MAX][KM_WIRE_UUID_BYTES];
	struct km_fetch_req_part fetch_parts[KM_FETCHER_ASK_MAX];
	struct km_listoffsets_req_part lo_parts[KM_FETCHER_ASK_MAX];
	struct km_listoffsets_resp_part lo_resp[KM_FETCHER_ASK_MAX];
	struct km_fetcher *sel[KM_FETCHER_ASK_MAX];
	uint32_t sel_topic[KM_FETCHER_ASK_MAX];
	uint32_t topic_n[KM_FETCHER_ASK_MAX];
	/* The ForgottenTopicsData of an incremental Fetch (KIP-227). */
	struct km_proto_topic fg_topics[KM_FETCHER_ASK_MAX];
	uint8_t fg_ids[KM_FETCHER_ASK_MAX][KM_WIRE_UUID_BYTES];
	int32_t fg_parts[KM_FETCHER_ASK_MAX];
	struct km_fetcher_fg fg[KM_FETCHER_ASK_MAX];
};

/* Refetches of one corrupt batch before the partition gives up (FAILED): a
 * transient corruption on the wire heals on refetch, a stored one never. */
#define KM_FETCHER_CORRUPT_MAX 5
/* Protocol violations by the source (garbage, a bad frame size, a wrong
 * correlation id, a malformed answer) in a row, each answered by a
 * reconnect, before the session's partitions give up (FAILED). */
#define KM_FETCHER_PROTO_MAX 5
/* Leader-type errors in a row for one partition answered on its session's
 * connection before Metadata is asked of another broker (a broker's
 * metadata may lag). */
#define KM_FETCHER_ROTATE_AFTER 3u

enum km_fetcher_state {
	KM_FETCHER_CONNECTING = 0, /* finding the leader, or backing off */
	KM_FETCHER_MIRRORING = 1,  /* fetching from the leader */
	KM_FETCHER_FAILED = 2,	   /* see km_fetcher_reason() */
};

/* host:port. host is an IPv4 literal, "localhost", or a name the pool's
 * resolver maps. */
struct km_fetcher_addr {
	char host[KM_WIRE_NAME_BYTES_MAX + 1];
	uint16_t port;
};

/**
 * Map a host name to an IPv4 literal (a cache the daemon filled at start,
 * say). Called on the worker thread.
 * @return 0 with ipv4 filled, -EAGAIN (not known yet: retried with
 *         backoff), or another negative code (the name cannot be used).
 */
typedef int (*km_fetcher_resolve_fn)(void *ctx, const char *host,
				     char ipv4[KM_FETCHER_IPV4_BYTES]);

/* One partition to mirror. Partitions with the same bootstrap list share
 * sessions; a session's timing (max_wait_ms, backoff, request timeout,
 * max_bytes) is that of the partition that opened its group's first
 * session. */
struct km_fetcher_config {
	struct km_fetcher_addr bootstrap[KM_FETCHER_BOOTSTRAP_MAX];
	uint32_t n_bootstrap;	   /* 1..KM_FETCHER_BOOTSTRAP_MAX */
	char topic[KM_WIRE_NAME_BYTES_MAX + 1];
	int32_t partition;
	int32_t max_wait_ms;	   /* Fetch MaxWaitMs; 0: 50 */
	int32_t max_bytes;	   /* Fetch MaxBytes and PartitionMaxBytes
				      before the clamp; 0: 1 MiB */
	uint32_t batch_bytes_max;  /* largest batch accepted; 0: the
				      KM_BATCH_BYTES_MAX */
	uint32_t backoff_ms;	   /* first retry backoff; 0: 50 */
	uint32_t backoff_max_ms;   /* 0: 2000 */
	uint32_t request_timeout_ms; /* an answer later than this (beyond
					MaxWaitMs) drops the connection; 0: 30 s */
	/* mirror.offset.reset=earliest: when the source's log start has moved
	 * past our log end, restart the log there (km_log_reset_to) instead of
	 * failing. */
	bool offset_reset_earliest;
	/* The source the log mirrors (see "Source identity" above): "" and
	 * all zero = not known yet. */
	char source_cluster_id[KM_WIRE_NAME_BYTES_MAX + 1];
	uint8_t source_topic_id[KM_WIRE_UUID_BYTES];
	/* The caps its Fetches obey (throttle.h): the host's and its topic's,
	 * NULL for none; borrowed, they outlive the fetcher. A session counts
	 * the source's throttle_time_ms on the host's of its first partition
	 * and sends nothing to that broker until the time is over (KIP-219). */
	struct km_throttle *throttle;
	struct km_throttle *topic_throttle;
	/* CONNECTING this long after a transient error, with no good Fetch
	 * since: FAILED, transient (see above); 0: never. */
	uint32_t unavailable_ms;
	/* A retry of a transient failure: the first transient error before
	 * a good Fetch FAILS it again (transient). */
	bool retry_attempt;
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
	KM_FETCHER_ERR_BASE_OFFSET,	    /* a batch not at the offset expected */
	KM_FETCHER_ERR_KINDS,
};

/** Short name of an error kind ("not_leader", ...), for status output. */
const char *km_fetcher_err_name(enum km_fetcher_err kind);

/* Per partition. Connection-level events (reconnects, disconnects,
 * timeouts, protocol errors, stalls) count on every partition of the
 * session they happened to. */
struct km_fetcher_stats {
	uint64_t bytes;		   /* batch bytes appended */
	uint64_t batches;	   /* batches appended */
	uint64_t duplicates;	   /* batches the log skipped (below its end) */
	uint64_t corrupt;	   /* batches rejected (KM_EBADCRC, ...) */
	uint64_t reconnects;	   /* connections opened for it after the
				      first (its session's, or a new
				      session's after a move) */
	uint64_t fetches;	   /* Fetch responses that named it */
	uint64_t fetch_pipelined;  /* ... asked while its batches of the
				      previous response were being written */
	uint64_t metadata_refreshes; /* Metadata responses asked for it */
	uint64_t leader_changes;   /* leader id or address changed */
	uint64_t session_moves;	   /* moved to another session */
	uint64_t log_resets;	   /* km_log_reset_to by offset_reset_earliest */
	uint64_t offsets_skipped;  /* ... offsets the source deleted before
				      we had them (the gaps they left) */
	uint64_t errors[KM_FETCHER_ERR_KINDS];
	/* Data-loss events: the source's log start found past our log end
	 * (counted whether mirror.offset.reset restarts the log or FAILS
	 * it), and the offsets the last one lost, inclusive (-1: none). */
	uint64_t data_loss_events;
	int64_t data_loss_from, data_loss_to;
	int64_t high_watermark;	   /* source HW, last Fetch/ListOffsets; -1 */
	int64_t log_start_offset;  /* source log start (Fetch v5+,
				      ListOffsets); -1 */
	int32_t leader_id;	   /* -1 while unknown */
	struct km_fetcher_addr leader; /* its address, "" while unknown */
	int32_t max_bytes;	   /* PartitionMaxBytes in use (clamped) */
	/* Versions negotiated on its session's last connection, -1 before. */
	int16_t v_apiversions, v_metadata, v_listoffsets, v_fetch;
	/* For the operator's graphs (issue 19 item 10): what came in Fetch
	 * answers (duplicates too) against what the log took. */
	uint64_t fetched_bytes;	   /* batch bytes framed from Fetch answers */
	uint64_t fetched_records;  /* ... their records (recordsCount) */
	uint64_t records;	   /* records in the batches appended */
	int64_t last_stable_offset; /* source LSO, last Fetch (v4+); -1 */
};

/* What the partition waits for in its session (private). */
enum km_fpart_phase {
	KM_FP_META = 0,		   /* its leader: Metadata */
	KM_FP_WAIT,		   /* the session's handshake */
	KM_FP_OFFSETS,		   /* ListOffsets (lo_want) */
	KM_FP_FETCH,		   /* Fetch */
	KM_FP_DONE,		   /* FAILED or stopped */
};

/* What km_fetcher_note() is about (private). */
enum km_fetcher_note_kind {
	KM_FNOTE_NONE = 0,
	KM_FNOTE_NO_PARTITION,	   /* the source's Metadata lacks it */
	KM_FNOTE_BASE_OFFSET,	   /* a batch was not where expected */
	KM_FNOTE_UNAVAILABLE,	   /* transient trouble, no good Fetch since */
};

/* Requests a session sends (private). */
enum km_freq {
	KM_FREQ_NONE = 0,
	KM_FREQ_APIVERSIONS,
	KM_FREQ_METADATA,
	KM_FREQ_EARLIEST,	   /* ListOffsets, timestamp -2 */
	KM_FREQ_LATEST,		   /* ListOffsets, timestamp -1 */
	KM_FREQ_FETCH,
};

/* Visible for sizeof and the inline accessors only: every field is
 * private. */
struct km_fetcher {
	struct km_fetcher_config cfg;
	struct km_fsess_pool *pool;
	struct km_log *log;
	struct km_fsess *sess;	   /* NULL once detached (idle) */
	struct km_fetcher *next;   /* sess's member list */
	struct km_fetcher *prev;   /* ... both ways: O(1) leave (issue 17) */
	/* On sess's dirty list (fsess_dirty.c): its line in the broker's
	 * fetch session may differ from what the next Fetch should say. */
	bool dirty;
	struct km_fetcher *dnext, *dprev;
	/* sess's index by topic and partition (answers that name it). */
	struct km_fetcher *hnext;
	uint32_t hkey;
	/* Incremental answers of sess counted into stats.fetches. */
	uint64_t fs_seen;
	enum km_fetcher_state state;
	enum km_fpart_phase phase;
	bool failed, stopped;
	bool no_space;		   /* FAILED because the disk is full */
	bool opened_once;
	bool in_meta;		   /* its topic is in the Metadata in flight */
	bool moving_warned;	   /* no session free for its leader: said */
	int32_t ask_slot;	   /* in sess->asked[], or -1 */
	enum km_freq lo_want;	   /* EARLIEST or LATEST while OFFSETS */
	uint64_t ready_at_ms;	   /* no request for it before (backoff) */
	uint32_t backoff_ms;
	uint32_t err_streak;	   /* request errors in a row */
	char reason[KM_FETCHER_REASON_BYTES];
	/* The source identity it holds to (cfg's, else the first seen). */
	char cluster_id[KM_WIRE_NAME_BYTES_MAX + 1];
	uint8_t topic_id[KM_WIRE_UUID_BYTES];
	/* Why it does not mirror as it should, while not FAILED. */
	enum km_fetcher_note_kind note_kind;
	char note[KM_FETCHER_REASON_BYTES];
	uint64_t pub_gen;	   /* see km_fetcher_pub_gen() */
	/* The owner's hook (km_fetcher_set_touch). */
	void (*touch)(void *arg);
	void *touch_arg;
	/* Offsets. */
	int64_t next_offset;	   /* next offset to fetch, -1 unknown */
	int64_t inflight_offset;   /* FetchOffset asked in flight */
	uint64_t asked_us;	   /* ... when (throttle.h), if capped */
	/* Its place in the broker's fetch session (KIP-227, fsess_inc.c): in
	 * it as the last Fetch sent left it, at that offset and MaxBytes. */
	bool fs_in;
	int64_t fs_offset;
	int32_t fs_max_bytes;
	bool oor;		   /* resolving OFFSET_OUT_OF_RANGE */
	int64_t oor_start;
	int64_t corrupt_offset;	   /* where the last corrupt batch sat */
	uint32_t corrupt_streak;   /* rejections there in a row */
	int64_t badoff_offset;	   /* where a batch was not (baseOffset) */
	uint32_t badoff_streak;	   /* ... times in a row */
	/* Its records in the session's held frame. */
	bool in_frame;
	struct km_chain_cur rec_cur; /* next batch in the records span */
	uint32_t rec_left;
	int64_t resp_last;	   /* last offset of the span's last batch */
	int64_t resp_hw;	   /* the span's HighWatermark, -1 unknown */
	uint32_t resp_batches;	   /* whole batches framed in the span */
	uint32_t n_batches, n_done; /* in batches[] */
	int64_t wait_offset;	   /* done with the frame when appended > this */
	struct km_fetcher_stats stats;
	/* Transient trouble (km_fetcher_watch): since when, the error counts
	 * last seen, the kind that moved last; a FAILED that may pass. */
	bool transient;
	bool attempt;		   /* cfg.retry_attempt, until a good Fetch */
	uint64_t trouble_ms;	   /* 0: none since the last good Fetch */
	uint64_t seen[KM_FETCHER_ERR_KINDS];
	enum km_fetcher_err trouble_kind;
	/* Last: 26 KiB a quiet partition touches at its head only, so that
	 * the fields above share its first pages (each fetcher is a lazily
	 * backed mapping, worker.c; with fields after it, an idle one held
	 * 4 pages, now 2). */
	struct km_batch batches[KM_FETCHER_BURST];
};

/**
 * Set up a partition and attach it to a session of pool (nothing is sent
 * until km_fsess_pool_step). f must not be attached (new, or idle).
 * @return 0, -EINVAL: no bootstrap address, more than
 *         KM_FETCHER_BOOTSTRAP_MAX, a bootstrap host that is neither an IPv4
 *         literal nor "localhost" and the pool has no resolver, no topic, a
 *         negative partition, no pool or log; or -ENOSPC: no session of
 *         its bootstrap list exists and every session slot of the pool is
 *         in use.
 */
int km_fetcher_init(struct km_fetcher *f, const struct km_fetcher_config *cfg,
		    struct km_fsess_pool *pool, struct km_log *log);

/** Stop (reason "stopped", unless FAILED): nothing more is appended; the
 *  partition leaves its session once the writes of its batches held in a
 *  response frame are done. The others on the connection go on. Poll
 *  km_fsess_pool_step() until km_fetcher_idle(). */
void km_fetcher_stop(struct km_fetcher *f);

/** True when the partition has left its session and no write of its reads
 *  a receive buffer (safe to free or to init again). */
static inline bool km_fetcher_idle(const struct km_fetcher *f)
{
	return f->sess == NULL;
}

/** Drop its session's connection as if the peer had (tests: a cut
 *  mid-stream; every partition of the session reconnects). */
void km_fetcher_cut(struct km_fetcher *f);

static inline enum km_fetcher_state
km_fetcher_get_state(const struct km_fetcher *f)
{
	return f->state;
}

/** Why the partition FAILED (or "stopped"), at most KM_FETCHER_REASON_BYTES
 *  with its NUL; "" otherwise. Valid while f is. */
const char *km_fetcher_reason(const struct km_fetcher *f);

/** Its figures. stats.fetches counts the incremental Fetch answers that
 *  left it out as unchanged lazily (fsess_dirty.c): this brings it up to
 *  date, so call it from the owner's thread. */
const struct km_fetcher_stats *
km_fetcher_get_stats(const struct km_fetcher *f);

/** FAILED because its log's disk is full (km_log_is_space_error): the
 *  batches that fit are appended, the rest are not; a new fetcher for the
 *  partition, once space is back, resumes at the log end. */
static inline bool km_fetcher_no_space(const struct km_fetcher *f)
{
	return f->failed && f->no_space;
}

/** FAILED by a cause that may pass (see "Transient and operator
 *  failures"): its owner may retry with a new fetcher. */
static inline bool km_fetcher_transient(const struct km_fetcher *f)
{
	return f->failed && f->transient;
}

/** The source cluster id the partition holds to: the config's, else the
 *  first Metadata (v2+) answer's; "" until known. Valid while f is. */
static inline const char *km_fetcher_cluster_id(const struct km_fetcher *f)
{
	return f->cluster_id;
}

/** Its topic id likewise (Metadata v10+), all zero until known. */
static inline const uint8_t *km_fetcher_topic_id(const struct km_fetcher *f)
{
	return f->topic_id;
}


/** Why a partition that is not FAILED does not mirror as it should ("source
 *  has no partition t-5 ...", a damaged baseOffset being refetched), at
 *  most KM_FETCHER_REASON_BYTES with its NUL; "" when there is nothing to
 *  say. Valid while f is. */
static inline const char *km_fetcher_note(const struct km_fetcher *f)
{
	return f->note;
}

/** A value unique in the process that changes at km_fetcher_init() and
 *  whenever km_fetcher_note(), km_fetcher_cluster_id() or
 *  km_fetcher_topic_id() does: the owner republishes them when it moves. */
static inline uint64_t km_fetcher_pub_gen(const struct km_fetcher *f)
{
	return f->pub_gen;
}

/** Have fn(arg) called (owner thread) whenever f's state or published
 *  figures may have changed: an answer for it, an error, a state change;
 *  so that its owner visits only the fetchers something happened to. */
static inline void km_fetcher_set_touch(struct km_fetcher *f,
					void (*fn)(void *arg), void *arg)
{
	f->touch = fn;
	f->touch_arg = arg;
}

static inline int64_t km_fetcher_high_watermark(const struct km_fetcher *f)
{
	return f->stats.high_watermark;
}

/** Its session now (NULL once idle); valid until the next km_fsess_pool_step. */
static inline const struct km_fsess *
km_fetcher_session(const struct km_fetcher *f)
{
	return f->sess;
}

#ifdef __cplusplus
}
#endif

#endif
