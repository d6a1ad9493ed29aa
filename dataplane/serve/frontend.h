/* The Kafka front-end: kmirrord's partition logs served to ordinary Kafka
 * clients (librdkafka 2.0, kcat) over the Kafka protocol, on ONE dataplane
 * worker's network backend (dataplane/net/net.h) and io_uring.
 *
 * APIs: those of the table in kafka/proto_header.c, at its versions (what
 * librdkafka 2.0.2 negotiates; docs/adding-an-api.md). Any other API key
 * or version closes the connection (WARN with the key and version), as a
 * Kafka broker does; an unsupported ApiVersions version is answered with
 * UNSUPPORTED_VERSION (35) in a v0 body listing the ranges, so the client
 * retries lower (KIP-511).
 *
 * Per connection: requests are framed over the receive chain (size-prefixed,
 * at most frame_bytes_max; an oversized, negative or malformed request closes
 * the connection with a WARN naming the connection and the reason), decoded,
 * and up to KM_FRONTEND_PIPELINE of them are in process at once. Responses
 * go out in request order whatever order they complete in: a Fetch held by
 * MinBytes/MaxWaitMs or a Produce waiting for durability holds back the
 * (already encoded) responses of later requests, as Kafka clients expect.
 *
 * Semantics:
 *  - Metadata: this host is the only broker (node_id, advertised host:port)
 *    and the controller; every topic of the partition table (or those asked
 *    for; an unknown one is UNKNOWN_TOPIC_OR_PARTITION, never created);
 *    leader = us, replicas = isr = [us]; a partition whose log is not open
 *    or whose error is set is LEADER_NOT_AVAILABLE with leader -1. v10+
 *    names each topic's id (its logs' partition.metadata; a mirrored
 *    topic's only once its fetcher holds the source's, else all zero);
 *    v12 finds topics by id (an unknown one: UNKNOWN_TOPIC_ID).
 *  - ListOffsets: -2 = the log start; -1 = the high watermark (the durable
 *    offset, R6), or the LSO for read_committed (v2+); a timestamp = the
 *    first record at or after it among the batches km_log_offset_for_time()
 *    finds, below the high watermark (LSO for read_committed), else -1/-1.
 *    Inside a compressed batch the answer is the batch's base offset and
 *    maxTimestamp (records are not decompressed here). -3 (v7+) = the
 *    first record of the largest timestamp (km_log_max_timestamp), -4
 *    (v8+) = the log start, both below the same bound, else -1; -5 (v9+)
 *    = -1, Kafka's answer without tiered storage.
 *  - Fetch: read_uncommitted up to the high watermark (the durable offset:
 *    nothing not on disk is served, R6), read_committed up to the LSO with
 *    the aborted transactions of the range (km_log_aborted_txns). MaxBytes
 *    and partition max bytes with KIP-74 (the first batch of the first
 *    partition with data even if larger). MinBytes/MaxWaitMs: the Fetch is
 *    parked, without blocking the thread, until enough data is durable, a
 *    partition errors, or the wait passes. OFFSET_OUT_OF_RANGE below the log
 *    start or above the high watermark. Sessionless (SessionId 0; a client
 *    naming a session gets FETCH_SESSION_ID_NOT_FOUND), throttle 0,
 *    preferred read replica -1. Records are read with km_log_read() into
 *    one of fetch_bufs shared buffers, held from the read until the
 *    response is sent and then sent from there (no copy); a Fetch that
 *    finds none free waits for one, or answers without records once its
 *    MaxWaitMs is over.
 *  - Produce: per partition through ops->produce (never the log directly).
 *    A MIRROR partition (km_part_get_mode) is refused with POLICY_VIOLATION
 *    (44), logged at WARN with the reason. Why 44: in librdkafka 2.0.2
 *    (rdkafka_request.c, rd_kafka_handle_Produce_error) 44 has no explicit
 *    action, so rd_kafka_err_action() gives it the default PERMANENT |
 *    MSG_NOT_PERSISTED: the messages fail at once with no retry (an
 *    idempotent producer then bumps its epoch with a new InitProducerId).
 *    TOPIC_AUTHORIZATION_FAILED (29) is permanent too, but librdkafka then
 *    marks the whole TOPIC failed (rd_kafka_topic_set_error), while a topic
 *    may hold mirrored and writable partitions side by side. acks=0 gets no
 *    response. Outcome codes map to Kafka's: KM_EOUTOFORDERSEQ ->
 *    OUT_OF_ORDER_SEQUENCE_NUMBER, KM_EPRODUCERFENCED ->
 *    INVALID_PRODUCER_EPOCH, KM_EINVALIDTXNSTATE -> INVALID_TXN_STATE, batch
 *    framing errors (KM_EBADCRC, ...) -> CORRUPT_MESSAGE, KM_EBATCHMAX ->
 *    MESSAGE_TOO_LARGE, a header that disagrees with its records
 *    (kafka/validate.h: KM_EBATCHHDR, KM_EBATCHCOUNT, KM_ERECOFFSET,
 *    KM_ERECORD, KM_ERECCOUNT, KM_EVARINT, KM_EINFLATE, KM_EINFLATEMAX; as
 *    LogValidator's InvalidRecordException) and refused batch kinds
 *    (-EPERM, -E2BIG) -> INVALID_RECORD, unknown partition -> UNKNOWN_TOPIC_OR_PARTITION, log
 *    not open or failed -> NOT_LEADER_OR_FOLLOWER, a full writer (-ENOBUFS,
 *    KM_EWORKERQ) -> NOT_ENOUGH_REPLICAS (retriable and "not persisted" in
 *    librdkafka), disk errors -> KAFKA_STORAGE_ERROR.
 *  - InitProducerId: a null transactional id gets ops->alloc_pid's id; a
 *    transactional id is the transaction coordinator's (frontend_txn.c,
 *    issue 20) when the daemon gives ops->write_marker, with
 *    FindCoordinator(transaction), AddPartitionsToTxn and EndTxn; without
 *    it TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53), which librdkafka 2.0.2
 *    treats as fatal (rd_kafka_idemp_check_error). A transactional batch
 *    is taken only from a producer whose open transaction holds the
 *    partition, else INVALID_TXN_STATE.
 *  - AddOffsetsToTxn, TxnOffsetCommit (frontend_txnoff.c): a
 *    transaction's consumer offsets, in __consumer_offsets-0 as a
 *    transactional batch, the group's only once its COMMIT marker is
 *    durable; OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT
 *    for them until then.
 *  - DescribeConfigs, DescribeCluster (frontend_configs.c): the settings
 *    kmirror follows, under Kafka's topic and broker config names, all
 *    read-only; this node and cluster id. What kafka-topics --describe,
 *    kafka-configs --describe and kafka-cluster need.
 *
 * Threading: everything runs on the worker thread that owns the km_net;
 * callbacks come from its poll loop. The partition table is read-only here.
 * Logs are only read, through their any-thread read path (km_log_read,
 * km_log_offset_for_time, km_log_aborted_txns, the published offsets);
 * km_log_lso() is owner-only, so for a partition another worker owns the
 * LSO is its stats.lso, which the owner publishes every tick (a snapshot
 * at most a tick old, never ahead of the true LSO).
 *
 * Memory: everything is allocated by km_frontend_create() (STYLE 9):
 * about conns_max * (conn_buf_bytes + parts_max * 150 B + 10 KiB) for the
 * connections, fetch_bufs * fetch_buf_bytes for Fetch records,
 * frame_bytes_max for group request fields that straddle receive buffers,
 * and the group coordinator's tables (sized in common/km_limits.h: about
 * 8 MiB, half of it the ring of committed-offset writes).
 */
#ifndef KM_DATAPLANE_FRONTEND_H
#define KM_DATAPLANE_FRONTEND_H

#include <stdbool.h>
#include <stdint.h>

#include "dataplane/net/net.h"
#include "dataplane/net/secconn.h"
#include "iouring_log/log.h"
#include "kafka/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dataplane/serve/part.h; only pointers here, so this header stays C++-clean. */
struct km_part_table;
struct km_part_ops;
struct km_tconfig;
struct km_acl_store;

enum {
	/* Requests in process per connection (decoded, response not yet
	 * sent). More are left in the receive queue until one is sent. */
	KM_FRONTEND_PIPELINE = 16,
	/* Partitions with records in one Fetch response: each is an iovec of
	 * its own (2 * this + 1 iovecs per response, within send_iov_max);
	 * the others are answered without records this time. */
	KM_FRONTEND_GAPS_MAX = 32,
	/* Aborted transactions in one Fetch response (16 B each). */
	KM_FRONTEND_ABORTED_MAX = 256,
	/* A parked Fetch re-reads the offsets at least this often: data a
	 * partition owned by another worker publishes does not wake us. */
	KM_FRONTEND_RECHECK_MS = 10,
	/* API keys counted one by one in the stats (0..60: ours are below). */
	KM_FRONTEND_API_KEYS = 61,
};

/* SASL on the listener (issue 16, dataplane/serve/frontend_sasl.c). */
struct km_frontend_sasl {
	bool required;		/* SASL_PLAINTEXT / SASL_SSL: clients must
				 * authenticate before any other request */
	const char *users_file;	/* sasl.users.file; outlives us */
	uint32_t mechanisms;	/* bits 1u << enum km_sasl_mech enabled;
				 * 0: SCRAM-SHA-256 and SCRAM-SHA-512 */
	int64_t reauth_ms;	/* connections.max.reauth.ms; 0: never */
};

struct km_frontend_config {
	struct km_net *net;		     /* the worker's backend */
	uint32_t worker_id;		     /* this worker's index (struct
					      * km_part's owner): the LSO of a
					      * partition it owns is read from
					      * the log, of the others from
					      * the owner's published stats */
	const struct km_part_table *parts;   /* read-only; outlives us */
	const struct km_part_ops *ops;	     /* writes; outlives us */
	const char *cluster_id;		     /* Metadata ClusterId (copied) */
	int32_t node_id;		     /* broker id, >= 0 */
	const char *advertised_host;	     /* Metadata host (copied) */
	uint16_t advertised_port;	     /* 0: the port we listen on */
	uint32_t frame_bytes_max;	     /* largest request; 0: 8 MiB. A
					      * request is held in receive
					      * buffers until whole: keep this
					      * well below the net's pool */
	uint32_t conns_max;		     /* client connections; 0: 64 */
	uint32_t rx_bufs_max;		     /* receive buffers the clients'
					      * requests may hold together;
					      * 0: 3/4 of the net's pool. A
					      * request is limited to what
					      * half of this holds */
	uint32_t request_timeout_ms;	     /* an incomplete request must be
					      * whole within this; 0: 30 s */
	uint32_t conn_buf_bytes;	     /* response space per connection;
					      * 0: 256 KiB (raised to fit a
					      * Metadata answer for every
					      * partition) */
	uint32_t parts_max;		     /* partitions (and topics) one
					      * request may name; 0: 1024 */
	uint32_t fetch_buf_bytes;	     /* records of one Fetch response;
					      * must hold the largest batch;
					      * 0: 4 MiB */
	uint32_t fetch_bufs;		     /* Fetch responses with records
					      * at once; 0: 4 */
	uint32_t send_iov_max;		     /* the net's send_iov_max; 0: 16 */
	/* The group coordinator (Kafka's group.* broker settings); 0: Kafka's
	 * default (the delay: UINT32_MAX for the default, 0 is none). */
	uint32_t group_initial_rebalance_delay_ms;
	uint32_t group_min_session_timeout_ms;
	uint32_t group_max_session_timeout_ms;
	/* The logs' settings before any per-topic override (DescribeConfigs
	 * names them as the broker's); segment_bytes 0: kmirror's defaults. */
	struct km_log_config broker_log;
	/* Our sources' own upstream clusters, by source cluster id (NULL:
	 * none known); outlives us. DescribeConfigs of the broker names
	 * them in kmirror.source.cluster.ids after our direct sources. */
	struct km_tconfig *upstream;
	/* The transaction coordinator: transactional ids kept
	 * (transaction.ids.max; 0: 1024) and how long an idle one is
	 * remembered (transactional.id.expiration.ms; 0: Kafka's 7 days). */
	uint32_t txn_ids_max;
	int64_t txn_id_expiration_ms;
	/* auto.create.topics.enable: a Metadata request that allows it
	 * creates a topic it names that is not here (ops->admin). */
	bool auto_create_topics;
	struct km_frontend_sasl sasl;
	/* Authorization (dataplane/serve/acl.h): the ACLs the control thread
	 * publishes; NULL: no authorizer, every request allowed. Outlives us. */
	struct km_acl_store *acls;
	/* max.incremental.fetch.session.cache.slots: KIP-227 sessions kept
	 * (frontend_fsess.c); 0: Kafka's 1000, KM_FRONTEND_FSESS_NONE: none
	 * (every Fetch answered without a session). */
	uint32_t fetch_session_slots;
};

#define KM_FRONTEND_FSESS_NONE UINT32_MAX
#define KM_FRONTEND_FSESS_DEFAULT 1000u

struct km_frontend_stats {
	uint32_t conns;			     /* open now */
	uint64_t accepts;
	uint64_t refused;		     /* over conns_max: reset */
	uint64_t closes;
	uint64_t requests[KM_FRONTEND_API_KEYS]; /* by API key */
	uint64_t requests_other;	     /* other keys (then closed) */
	uint64_t protocol_errors;	     /* connections closed for a bad
					      * request */
	uint64_t partition_errors;	     /* partitions answered with an
					      * error code */
	uint64_t produce_refused_mirror;     /* POLICY_VIOLATION answers */
	uint64_t fetch_parked;		     /* Fetches that long-polled */
	uint64_t request_timeouts;	     /* closed: request not whole in
					      * time */
	uint64_t rx_waits;		     /* a request waited for receive
					      * buffers (frontend_rx.c) */
	uint64_t rx_compactions;	     /* small pieces packed */
	uint32_t rx_bufs_charged;	     /* receive buffers held or
					      * promised to requests, now */
	uint64_t bytes_out;		     /* response bytes sent */
	uint64_t records_bytes_out;	     /* ... of which record batches */
	/* SASL on the listener (frontend_sasl.c). */
	uint64_t sasl_auth_ok;		     /* authentications, first ones
					      * and re-authentications */
	uint64_t sasl_reauth_ok;	     /* ... of which re-authentications */
	uint64_t sasl_auth_failed;	     /* refused (then closed) */
	uint64_t sasl_expired;		     /* closed: a request after the
					      * session expired */
	uint64_t sasl_users_reloads;	     /* sasl.users.file read again */
	uint64_t sasl_users_errors;	     /* ... and refused (old kept) */
	/* KIP-227 fetch sessions (frontend_fsess.c). */
	uint32_t fetch_sessions;	     /* cached now */
	uint64_t fetch_sessions_evicted;
	uint64_t fetch_full;		     /* Fetches that made a session */
	uint64_t fetch_incremental;	     /* ... of a session */
	uint64_t fetch_sessionless;	     /* ... with none */
	uint64_t fetch_session_errors;	     /* answered 70 or 71 */
};

struct km_frontend; /* opaque */

enum { KM_FRONTEND_LISTENERS_MAX = 4 };

/* One of the front end's listeners (Kafka's listeners=NAME://host:port):
 * Metadata, FindCoordinator and DescribeCluster answer a client with the
 * advertised address of the listener it connected on, as Kafka does. */
struct km_frontend_listener {
	char name[32];			/* Kafka's listener name, for logs */
	enum km_secproto protocol;
	char advertised_host[KM_WIRE_NAME_BYTES_MAX + 1]; /* "": the config's */
	uint16_t advertised_port;	/* 0: the port bound */
	/* SSL, SASL_SSL: the server's TLS (km_netsec_server_init), and the
	 * front end's net must then be a secured one (dataplane/net/snet.h)
	 * that runs the handshake before the connection is accepted here. */
	const struct km_netsec *tls;
	/* NULL: the front end's net. Else another net of the same worker
	 * thread that listens for it (the DPDK port's, dataplane/net/dpdk/):
	 * PLAINTEXT or SASL_PLAINTEXT only (tls NULL); its receive buffers
	 * are parts of frames, never packed (km_kframe_compact). */
	struct km_net *net;
};

/* Offset sync from the source (issue 7): one source group's committed
 * offsets for partitions mirrored here, to be stored by the coordinator if
 * the group has no members here. Owned by the caller until done runs. */
struct km_group_sync_part {
	char topic[KM_WIRE_NAME_BYTES_MAX + 1];
	int32_t partition;
	int64_t source_offset;	/* committed on the source */
	int32_t leader_epoch;
	int64_t stored;		/* out: committed here after, -1: none */
	int64_t previous;	/* out: committed here before, -1: none */
	/* A stop's last sync: the log ends at cut (what follows is ours),
	 * so nothing is stored past it, and an offset here past it is
	 * brought down to it. */
	bool at_stop;
	int64_t cut;
};

struct km_group_sync {
	char group[KM_WIRE_NAME_BYTES_MAX + 1];
	struct km_group_sync_part *parts;
	uint32_t n_parts;
	bool active;		/* out: members here; nothing was stored */
};

typedef void (*km_frontend_sync_fn)(void *arg, int rc);

/**
 * Store what s holds, each offset clamped to max(log start, min(source
 * offset, durable offset)) of our partition (identical offsets on both
 * sides: no translation; the durable offset is the high watermark clients
 * see), unless the group has active members here. Only offsets ahead of
 * ours are written: a sync never moves a group back, except a stop's off
 * what its cut removed (at_stop: also at most cut). done(arg, rc) runs
 * once they are durable (possibly before this returns).
 * @return 0 (done will run), or a negative code (it will not).
 */
int km_frontend_group_sync(struct km_frontend *fe, struct km_group_sync *s,
			   km_frontend_sync_fn done, void *arg);

/**
 * Create a front-end; nothing is served until km_frontend_listen().
 * @return 0 and *out, or -EINVAL (no net, table, ops or host; node_id < 0;
 *         a limit out of range), -ENOMEM.
 */
int km_frontend_create(const struct km_frontend_config *cfg,
		       struct km_frontend **out);

/**
 * Listen for clients on ipv4:port (port 0: an ephemeral port, read it
 * back with km_frontend_port()).
 * @return 0, -EALREADY (already listening), or km_net_listen()'s error
 *         (-EINVAL, -EADDRINUSE, -EACCES, -ENOBUFS, ...).
 */
int km_frontend_listen(struct km_frontend *fe, const char *ipv4,
		       uint16_t port);

/** The port listened on (host order), or 0 before km_frontend_listen():
 *  the first listener's. */
uint16_t km_frontend_port(const struct km_frontend *fe);

/**
 * Listen for clients on ipv4:port as listener l (copied); the listeners
 * are numbered in the order they are added.
 * @return the listener's index (>= 0), or -ENOBUFS (KM_FRONTEND_
 *         LISTENERS_MAX already), -EOPNOTSUPP (l->tls on a net that is not
 *         a secured one), or km_net_listen()'s error.
 */
int km_frontend_listen_as(struct km_frontend *fe,
			  const struct km_frontend_listener *l,
			  const char *ipv4, uint16_t port);

/** Listener i's bound port, 0 if there is none. */
uint16_t km_frontend_listener_port(const struct km_frontend *fe, uint32_t i);

/**
 * Timers and deferred work: parked Fetches whose data arrived or whose wait
 * passed, Fetches waiting for a records buffer, queued requests waiting for
 * room. Call every loop turn.
 * @param now_ms  CLOCK_MONOTONIC in milliseconds.
 */
void km_frontend_tick(struct km_frontend *fe, uint64_t now_ms);

/**
 * When km_frontend_tick() must run next (CLOCK_MONOTONIC ms), so the worker
 * knows how long it may block: the earliest parked Fetch's deadline, and no
 * later than KM_FRONTEND_RECHECK_MS after the last tick while one is parked;
 * UINT64_MAX if nothing waits on time.
 */
uint64_t km_frontend_next_deadline_ms(const struct km_frontend *fe);

/** Stop listening and abort every connection; on_close callbacks follow
 *  from the poll loop. Poll until km_frontend_idle() before destroying. */
void km_frontend_stop(struct km_frontend *fe);

/** True when no connection is open and no Produce outcome is awaited. */
bool km_frontend_idle(const struct km_frontend *fe);

/**
 * Free everything. Call once km_frontend_idle() (or after km_net_destroy(),
 * whose on_close callbacks must still find the front-end), and when no
 * ops->produce outcome can arrive any more.
 */
void km_frontend_destroy(struct km_frontend *fe);

/** Counters. */
void km_frontend_get_stats(const struct km_frontend *fe,
			   struct km_frontend_stats *out);

#ifdef __cplusplus
}
#endif

#endif
