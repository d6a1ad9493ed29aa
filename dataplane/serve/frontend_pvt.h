/* Private to dataplane/serve/frontend*.c: not for direct inclusion.
 *
 * A connection keeps its requests in process in a ring of slots, in request
 * order. Each slot reserves its response's bytes (and, for a Produce, the
 * arrays its outcomes fill) in the connection's buffer, which is a byte ring
 * allocated in slot order and freed in slot order as responses are sent.
 * A slot is PENDING until its response is encoded (READY), QUEUED once
 * handed to km_net_send(), SENT when the send's callback came; only the
 * oldest slots are ever READY-and-sendable, so responses leave in order.
 */
#ifndef KM_DATAPLANE_FRONTEND_PVT_H
#define KM_DATAPLANE_FRONTEND_PVT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "dataplane/serve/frontend.h"
#include "dataplane/group/goffsets.h"
#include "dataplane/group/group.h"
#include "dataplane/net/kframe.h"
#include "dataplane/serve/part.h"
#include "kafka/proto.h"
#include "dataplane/serve/admin.h"
#include "dataplane/serve/acl.h"

/* Admin topic calls in process at once, over all connections. */
#define KM_FRONTEND_ADMIN_JOBS 2u

/* A handler's answer besides 0 (done) and a negative code (the connection
 * failed): leave the frame queued and retry once resources free up. */
#define FE_WAIT 1

enum fe_slot_state {
	FE_SLOT_PENDING = 0,
	FE_SLOT_READY,
	FE_SLOT_QUEUED,
	FE_SLOT_SENT,
};

struct fe_conn;
struct fe_slot;

/* What the pipeline (frontend_conn.c) calls back into the handler that owns
 * a slot whose response is more than its encoded bytes, or that waits on
 * time: a static table the handler points the slot at (nothing allocated
 * per request). Any member may be NULL. */
struct fe_slot_ops {
	/* The response as iovecs, the slot's bytes first, in out[0..out_max):
	 * @return how many, or a negative code (the connection fails). */
	int (*iovec)(struct fe_conn *fc, struct fe_slot *s, struct iovec *out,
		     uint32_t out_max);
	/* Sent, or the connection closed: let go of what the response holds.
	 * Runs once; the slot has no ops after it. */
	void (*release)(struct fe_conn *fc, struct fe_slot *s);
	/* When tick must run next (km_frontend_now_ms() clock); UINT64_MAX: never. */
	uint64_t (*deadline)(const struct fe_conn *fc, const struct fe_slot *s);
	/* Every front-end tick while the connection is open. */
	void (*tick)(struct fe_conn *fc, struct fe_slot *s, uint64_t now_ms);
};

struct fe_slot {
	enum fe_slot_state state;
	const struct fe_slot_ops *ops;	/* NULL: the encoded bytes alone */
	int16_t api_key;
	int16_t api_version;
	int32_t corr;
	uint32_t off;		/* reservation in the connection's buffer */
	uint32_t cap;
	uint32_t len;		/* encoded bytes at off */
	/* Produce: topics, partitions and tickets at off + data_off. */
	uint32_t data_off;
	uint32_t n_topics;
	uint32_t n_parts;
	uint32_t pending;	/* outcomes not yet reported */
};

/* One partition of the Fetch in process. */
struct fe_fpart {
	struct km_part *p;	/* NULL: unknown here */
	int16_t err;
	int64_t hw;
	int64_t lso;
	int64_t log_start;
	int64_t bound;		/* readable up to (hw or lso); parked on it */
	uint32_t rec_off;	/* records in the Fetch buffer */
	uint32_t rec_len;
	uint32_t ab_first;	/* aborted[ab_first, + n_ab); -1: null */
	int32_t n_ab;
	bool denied;		/* no Read on its topic (acl.h) */
	uint32_t fs_ent;	/* its entry in the fetch session */
	bool skip;		/* left out of an incremental answer */
};

/* KIP-227 fetch sessions served (frontend_fsess.c): one partition of a
 * session, what the session's Fetches asked of it and what was last
 * answered (hw -1: answer it next time). */
struct fe_fsent {
	struct km_part *p;
	int64_t fetch_offset;
	int32_t max_bytes;
	int64_t hw, lso, log_start;
	uint32_t next;		/* in its session's list, or the free list */
};

struct fe_fsession {
	int32_t id;		/* 0: the slot is free */
	int32_t epoch;		/* the next incremental Fetch's */
	uint64_t created_ms, used_ms;
	uint32_t n;		/* partitions */
	uint32_t head, tail;	/* the partitions' entries, in order */
	uint32_t bound;		/* response bytes of all of them, at most */
};

/* The worker's session cache: slots sessions over a pool of ents_max
 * partition entries, all allocated at create (STYLE 9). */
struct fe_fscache {
	struct fe_fsession *sess;
	uint32_t slots;
	struct fe_fsent *ents;
	uint32_t ents_max;
	uint32_t free_head;
	uint32_t gen;		/* the last id's generation */
	const char **topics;	/* rewrite()'s scratch: topics_max */
	uint32_t *first;
};

/* The connection's Fetch in process (one at a time: clients wait for a
 * Fetch response before the next Fetch; a second one waits its turn). */
struct fe_fetch {
	bool active;		/* until its response is sent */
	bool parked;		/* long-polling */
	bool need_buf;		/* parked for a Fetch buffer, data readable */
	uint32_t slot;
	int16_t top_err;	/* session errors (v7+) */
	uint64_t deadline_ms;
	uint64_t checked_ms;
	/* Parked read_uncommitted: km_log_durable_gen() when its partitions
	 * were last walked, and when (frontend_fetch.c). */
	uint64_t seen_gen;
	uint64_t walked_ms;
	struct km_fetch_req req;
	struct km_proto_topic *topics;
	struct km_fetch_req_part *parts;
	struct fe_fpart *res;
	struct km_proto_topic forgotten[16];
	int32_t forgotten_parts[256];
	struct km_fetch_aborted aborted[KM_FRONTEND_ABORTED_MAX];
	uint32_t n_aborted;
	uint8_t *buf;		/* a Fetch buffer, while held */
	uint32_t buf_used;
	struct km_wire_wr w;	/* the encoded response, for its iovecs */
	struct km_wire_gap gaps[KM_FRONTEND_GAPS_MAX];
	struct iovec ext[KM_FRONTEND_GAPS_MAX];
	uint32_t n_ext;
	/* Its fetch session (frontend_fsess.c): NULL if none; fs_full: the
	 * answer names every partition; the SessionId answered, and the
	 * session's epoch after this Fetch (it must still be so when the
	 * answer is encoded). */
	struct fe_fsession *fs;
	bool fs_full;
	int32_t fs_resp_id;
	int32_t fs_epoch;
};

/* A principal's text, "User:" and a SASL name or a certificate's subject. */
#define KM_FRONTEND_PRINCIPAL_BYTES 256
#define KM_FRONTEND_PRINCIPAL_ANONYMOUS "User:ANONYMOUS"

/* A listener of the front end; the ctx of the connections it accepts
 * until on_accept gives them their fe_conn. */
struct fe_listener {
	struct km_frontend *fe;
	struct km_frontend_listener cfg;	/* advertised host filled in */
	struct km_net_listener *lsn;
	uint16_t port;
};

struct fe_conn {
	struct km_frontend *fe;
	struct km_net_conn *c;	/* NULL once on_close came */
	bool used;
	bool closing;		/* we aborted it; on_close follows */
	uint32_t id;		/* for log lines */
	uint32_t pending_ops;	/* Produce outcomes not yet reported */
	char client_id[64];
	char client_host[24];	/* "/a.b.c.d", Kafka's ClientHost; "" unknown */
	/* Who the client is, as Kafka's ACLs name it ("User:alice"): set by
	 * TLS client authentication or SASL (issue 16), User:ANONYMOUS until
	 * then, as Kafka's PLAINTEXT listeners have it. */
	char principal[KM_FRONTEND_PRINCIPAL_BYTES];
	/* The listener it came in on (issue 16): its index in fe->lsns, its
	 * security protocol, and whether SASL must authenticate it before
	 * any other request (SASL_PLAINTEXT, SASL_SSL listeners). */
	uint8_t listener;
	enum km_secproto protocol;
	bool sasl_required;
	/* SASL (frontend_sasl.c): where the exchange is, the exchange while
	 * one runs, the session's end (0: none; KIP-368) and how it began. */
	uint8_t auth;		/* enum fe_auth */
	bool auth_reauth;	/* the exchange is a re-authentication */
	bool close_after;	/* closed once the queued answers are sent */
	int8_t auth_mech;	/* enum km_sasl_mech of the session */
	int16_t auth_version;	/* its SaslAuthenticate version */
	struct km_sasl_server *sx;
	uint64_t session_end_ms;
	struct km_kframe kf;
	const struct km_kframe_frame *held; /* a frame waiting for room */
	uint8_t *buf;		/* response ring, conn_buf_bytes */
	uint32_t tail;
	struct fe_slot slots[KM_FRONTEND_PIPELINE];
	uint32_t s_head;
	uint32_t s_count;
	bool send_blocked;	/* km_net_send said -EAGAIN */
	/* Its share of the receive pool (frontend_rx.c). */
	uint32_t rx_charge;	/* buffers counted against the budget */
	bool rx_wait;		/* its next request waits for the budget */
	bool rx_paused;		/* its receive is paused */
	uint64_t rx_since_ms;	/* its incomplete request's clock; 0: none */
	uint64_t rx_frames;	/* frames it had when the clock started */
	struct fe_fetch *fetch;
	struct fe_gticket *gtickets;	/* JoinGroup/SyncGroup answers awaited */
};

/* What a Produce outcome finds its way back with. */
struct fe_ticket {
	struct fe_conn *fc;
	uint32_t slot;
	uint32_t part;
};

struct fe_fbuf {
	uint8_t *mem;
	bool used;
};

struct km_frontend {
	struct km_net *net;
	const struct km_part_table *table;
	const struct km_part_ops *ops;
	char cluster_id[KM_WIRE_NAME_BYTES_MAX + 1];
	char host[KM_WIRE_NAME_BYTES_MAX + 1];
	int32_t node_id;
	uint32_t worker_id;
	uint16_t adv_port;
	uint16_t port;
	struct km_net_listener *lsn;	/* lsns[0].lsn, kept for old callers */
	struct fe_listener lsns[KM_FRONTEND_LISTENERS_MAX];
	uint32_t n_lsns;
	struct km_wire_limits limits;
	struct {
		uint32_t buf_bytes;	/* the net's buffers: 0: not packable */
		uint32_t unit;		/* bytes a buffer counts for */
		uint32_t bufs_max;	/* the budget over all connections */
		uint32_t conn_bufs_max;	/* one connection's */
		uint32_t charged;
		uint32_t waiting;	/* connections with rx_wait */
		uint32_t timeout_ms;
	} rx;
	uint32_t conn_buf_bytes;
	uint32_t parts_max;
	uint32_t topics_max;	/* topics a request may name */
	uint32_t gaps_max;	/* partitions with records per response */
	uint32_t iov_max;
	uint32_t fetch_buf_bytes;
	struct fe_conn *conns;
	struct fe_conn refused;	/* ctx of connections turned away */
	uint32_t conns_max;
	uint32_t conns_used;
	uint32_t next_id;
	struct fe_fbuf *fbufs;
	uint32_t n_fbufs;
	uint8_t *staging;	/* group request fields straddling buffers */
	uint32_t staging_bytes;
	/* Scratch of the synchronous handlers (Metadata, ListOffsets): one
	 * request at a time on this thread. */
	struct km_wire_name *names;		/* parts_max */
	struct km_metadata_topic *md_topics;	/* topics_max + table topics */
	uint32_t md_topics_max;
	struct km_metadata_part *md_parts;	/* table capacity */
	uint32_t *md_seen;			/* table capacity: request stamp */
	uint32_t md_stamp;
	uint8_t (*md_ids)[KM_WIRE_UUID_BYTES];	/* parts_max: asked ids */
	struct km_proto_topic *lo_topics;	/* topics_max */
	struct km_listoffsets_req_part *lo_req; /* parts_max */
	struct km_listoffsets_resp_part *lo_resp; /* parts_max */
	struct km_aborted_txn *ab_tmp;		/* KM_FRONTEND_ABORTED_MAX */
	struct km_dconfigs_resource *dc_res;	/* topics_max */
	/* Admin topic calls on their way to the control thread
	 * (frontend_admin.c): KM_FRONTEND_ADMIN_JOBS of them. */
	struct km_admin_job *admin_jobs;
	bool auto_create_topics;
	struct km_log_config broker_log;	/* DescribeConfigs */
	struct km_frontend_stats st;
	struct fe_txn *txn;		/* frontend_txn.c; NULL: refused */
	struct km_group *groups;	/* membership (frontend_group.c) */
	struct fe_gmem *gmem;		/* its tables (frontend_group.c) */
	/* The group coordinator's committed offsets (frontend_offsets.c). */
	struct {
		struct km_part *part;	/* __consumer_offsets-0 */
		struct km_goffsets *table;
		struct fe_omem *mem;	/* tables, write ring */
		bool loaded;
		int load_err;
		uint32_t writes;	/* batches given, outcome not yet in */
		uint64_t since_compact;	/* records appended since */
		bool compacting;
		int64_t compact_from;
	} go;
	struct fe_txnoff *txnoff;	/* frontend_txnoff.c */
	struct km_tconfig *upstream;	/* cfg's: kmirror.source.cluster.ids */
	struct fe_txnlog *txnlog;	/* frontend_txnlog.c; with txn */
	struct fe_sasl *sasl;		/* frontend_sasl.c; NULL: no SASL */
	/* Authorization (acl.h, issue 16); NULL: off, every check passes
	 * without a call. */
	struct km_acl_store *acls;
	bool produce_txn_denied;	/* the Produce being handled's */
	struct fe_fscache fsc;		/* frontend_fsess.c */
};

/* frontend_rx.c: what a connection may hold of the receive pool. */
void km_frontend_rx_init(struct km_frontend *fe,
			 const struct km_frontend_config *cfg);
void km_frontend_rx_update(struct fe_conn *fc);
void km_frontend_rx_closed(struct fe_conn *fc);
uint64_t km_frontend_rx_deadline(const struct fe_conn *fc);
void km_frontend_rx_tick(struct fe_conn *fc, uint64_t now_ms);

/* frontend.c: create/destroy, the loop, Fetch records buffers. */
uint8_t *km_frontend_fbuf_get(struct km_frontend *fe);
void km_frontend_fbuf_put(struct km_frontend *fe, uint8_t *mem);
bool km_frontend_fbuf_available(const struct km_frontend *fe);

/* frontend.c: the advertised address of the listener fc came in on. */
const char *km_frontend_adv_host(const struct fe_conn *fc);
uint16_t km_frontend_adv_port(const struct fe_conn *fc);

/* frontend_conn.c: the pipeline (connections, framing, slots, sending). */
extern const struct km_net_handler km_frontend_conn_handler;
uint64_t km_frontend_now_ms(void);
/* Close fc, logging why: a bad request (counted in protocol_errors), or,
 * _drop, a client that broke no protocol rule (a timeout). */
int km_frontend_conn_fail(struct fe_conn *fc, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int km_frontend_conn_drop(struct fe_conn *fc, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int km_frontend_slot_open(struct fe_conn *fc, const struct km_reqhdr *h, uint32_t bound,
		 uint32_t *slot);
void km_frontend_slot_begin(struct fe_conn *fc, uint32_t slot, struct km_wire_wr *w);
int km_frontend_slot_finish(struct fe_conn *fc, uint32_t slot, struct km_wire_wr *w,
		   bool trim);
void km_frontend_send_ready(struct fe_conn *fc);
void km_frontend_conn_maybe_free(struct fe_conn *fc);
void km_frontend_conn_tick(struct fe_conn *fc, uint64_t now_ms);
uint64_t km_frontend_conn_deadline(const struct fe_conn *fc);

/* frontend_dispatch.c: a request's header to its API's handler. */
/* Handle one frame; first: not a retry after FE_WAIT. @return 0 (done with
 * the frame), FE_WAIT, or a negative code (the connection failed). */
int km_frontend_dispatch(struct fe_conn *fc, const struct km_kframe_frame *fr,
		bool first);
/* Asserts that every API kafka/proto_header.c serves has a handler. */
void km_frontend_dispatch_check(void);

/* frontend_meta.c: ApiVersions, Metadata, ListOffsets, InitProducerId. */
int km_frontend_handle_apiversions(struct fe_conn *fc, const struct km_reqhdr *h,
			  struct km_wire_rd *r, bool unsupported);
int km_frontend_handle_metadata(struct fe_conn *fc, const struct km_reqhdr *h,
		       struct km_wire_rd *r);
int km_frontend_handle_listoffsets(struct fe_conn *fc, const struct km_reqhdr *h,
			  struct km_wire_rd *r);
int km_frontend_handle_initpid(struct fe_conn *fc, const struct km_reqhdr *h,
		      struct km_wire_rd *r);
/* frontend_configs.c: the Admin client's describe calls. */
int km_frontend_handle_describe_configs(struct fe_conn *fc,
					const struct km_reqhdr *h,
					struct km_wire_rd *r);
int km_frontend_handle_describe_cluster(struct fe_conn *fc,
					const struct km_reqhdr *h,
					struct km_wire_rd *r);
/* Kafka error code for a partition that is unknown, not open or failed. */
int16_t km_frontend_part_state_err(const struct km_part *p);
/* The partition's last stable offset, from this thread. */
int64_t km_frontend_part_lso(const struct km_frontend *fe, struct km_part *p);

/* frontend_barrier.c: kmirror's own KmirrorBarrier (failback). */
int km_frontend_handle_barrier(struct fe_conn *fc, const struct km_reqhdr *h,
		      struct km_wire_rd *r);

/* frontend_fetch.c */
int km_frontend_handle_fetch(struct fe_conn *fc, const struct km_reqhdr *h,
		    struct km_wire_rd *r);

/* frontend_offsets.c: committed offsets and their writes. */
typedef void (*fe_owrite_fn)(void *arg, int rc);
int km_frontend_offsets_init(struct km_frontend *fe);
void km_frontend_offsets_free(struct km_frontend *fe);
int16_t km_frontend_offsets_ready(struct km_frontend *fe);
/* Write commits (copied); done(arg, rc) once durable and in the table, or
 * failed. @return 0 (done will run) or a negative code (it will not). */
int km_frontend_offsets_write(struct km_frontend *fe, const struct km_goffsets_commit *c,
		     uint32_t n, fe_owrite_fn done, void *arg);

int km_frontend_handle_offset_commit(struct fe_conn *fc, const struct km_reqhdr *h,
			    struct km_wire_rd *r);
int km_frontend_handle_offset_fetch(struct fe_conn *fc, const struct km_reqhdr *h,
			   struct km_wire_rd *r);
/* frontend_gdelete.c */
int km_frontend_handle_delete_groups(struct fe_conn *fc, const struct km_reqhdr *h,
				     struct km_wire_rd *r);
int km_frontend_handle_offset_delete(struct fe_conn *fc, const struct km_reqhdr *h,
				     struct km_wire_rd *r);

/* frontend_group.c: the group coordinator's APIs. */
int km_frontend_groups_init(struct km_frontend *fe, const struct km_frontend_config *cfg);
void km_frontend_groups_free(struct km_frontend *fe);
bool km_frontend_groups_active(struct km_frontend *fe, const char *group);
void km_frontend_groups_tick(struct km_frontend *fe, uint64_t now_ms);
uint64_t km_frontend_groups_deadline(const struct km_frontend *fe);
void km_frontend_groups_conn_closed(struct fe_conn *fc);
int km_frontend_handle_group(struct fe_conn *fc, const struct km_reqhdr *h,
		    struct km_wire_rd *r);

/* frontend_txn.c: the transaction coordinator (issue 20). */
struct km_initpid_req;
int km_frontend_txn_init(struct km_frontend *fe, uint32_t ids_max,
			 int64_t expiration_ms);
void km_frontend_txn_free(struct km_frontend *fe);
bool km_frontend_txn_enabled(const struct km_frontend *fe);
int16_t km_frontend_txn_init_pid(struct km_frontend *fe,
				 const struct km_initpid_req *q,
				 int64_t *pid, int16_t *epoch);
void km_frontend_txn_tick(struct km_frontend *fe, uint64_t now_ms);
int16_t km_frontend_txn_check_records(struct fe_conn *fc,
				      const struct km_chain *c,
				      const char *topic, int32_t partition,
				      const struct km_wire_span *records);
int km_frontend_handle_addparts(struct fe_conn *fc, const struct km_reqhdr *h,
				struct km_wire_rd *r);
int km_frontend_handle_endtxn(struct fe_conn *fc, const struct km_reqhdr *h,
			      struct km_wire_rd *r);
struct km_txncoord *km_frontend_txn_coord(struct km_frontend *fe);

/* frontend_offcommit.c: Kafka's per-partition checks of an OffsetCommit
 * or a TxnOffsetCommit; NONE if the offset may be written. */
int16_t km_frontend_commit_part_err(struct km_frontend *fe, const char *topic,
				    int32_t partition, int32_t metadata_len);

/* frontend_txnoff.c: a transaction's consumer offsets (issue 20). */
int km_frontend_txnoff_init(struct km_frontend *fe);
void km_frontend_txnoff_free(struct km_frontend *fe);
int km_frontend_txnoff_marker(struct km_frontend *fe, struct km_part *p,
			      int64_t pid, int16_t epoch, bool commit,
			      km_part_produced_fn done, void *arg);
int km_frontend_handle_addoffsets(struct fe_conn *fc, const struct km_reqhdr *h,
				  struct km_wire_rd *r);
int km_frontend_handle_txn_offset_commit(struct fe_conn *fc,
					 const struct km_reqhdr *h,
					 struct km_wire_rd *r);

/* frontend_txnlog.c: the transaction coordinator's records in
 * __transaction_state-0 (issue 20). */
struct km_txncoord;
struct km_txn_markers;
typedef void (*fe_txnlog_fn)(struct km_frontend *fe, void *arg);
int km_frontend_txnlog_init(struct km_frontend *fe, struct km_txncoord *coord,
			    uint32_t ids_max, uint32_t jobs,
			    int64_t expiration_ms);
void km_frontend_txnlog_free(struct km_frontend *fe);
/* KM_KERR_NONE once the table is rebuilt from the partition, else
 * COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE. */
int16_t km_frontend_txnlog_ready(struct km_frontend *fe);
/* Write id's record as the coordinator has it now; fn(fe, arg) once
 * durable (tried again until it is). @return 0 or -EAGAIN (no room). */
int km_frontend_txnlog_persist(struct km_frontend *fe, const char *id,
			       fe_txnlog_fn fn, void *arg);
/* Finish the slot encoded in w: now if id did not change, else once its
 * record is durable. */
int km_frontend_txnlog_answer(struct fe_conn *fc, uint32_t slot,
			      struct km_wire_wr *w, const char *id);
void km_frontend_txnlog_tick(struct km_frontend *fe, uint64_t now_ms);
/* The front-end stops: answers held by a write waiting to retry are let
 * go (unanswered), and so are those of later failures. */
void km_frontend_txnlog_stop(struct km_frontend *fe);
void km_frontend_txn_stop(struct km_frontend *fe);
/* frontend_txn.c: a restart's Prepare* transaction, its markers written. */
void km_frontend_txn_resume(struct km_frontend *fe,
			    const struct km_txn_markers *mk);
int km_frontend_txn_handle_initpid(struct fe_conn *fc,
				   const struct km_reqhdr *h,
				   const struct km_initpid_req *q);
#ifdef KM_TEST_HOOKS
void km_frontend_txn_crash_point(const char *point);
#else
static inline void km_frontend_txn_crash_point(const char *point)
{
	(void)point;
}
#endif

/* frontend_sasl.c: SASL on the listener (issue 16). */
enum fe_auth {
	FE_AUTH_NONE = 0,	/* the listener has no SASL */
	FE_AUTH_HANDSHAKE,	/* ApiVersions or SaslHandshake expected */
	FE_AUTH_AUTHENTICATE,	/* SaslAuthenticate expected */
	FE_AUTH_DONE,		/* authenticated (maybe re-authenticating) */
};
int km_frontend_sasl_init(struct km_frontend *fe,
			  const struct km_frontend_sasl *cfg);
void km_frontend_sasl_free(struct km_frontend *fe);
/* A connection accepted (required: its listener wants SASL) or closed. */
void km_frontend_sasl_conn_open(struct fe_conn *fc, bool required);
void km_frontend_sasl_conn_closed(struct fe_conn *fc);
/* Before a request's handler: 0 (serve it) or a negative code (the
 * connection was closed, as Kafka closes it). */
int km_frontend_sasl_gate(struct fe_conn *fc, const struct km_reqhdr *h);
int km_frontend_handle_sasl(struct fe_conn *fc, const struct km_reqhdr *h,
			    struct km_wire_rd *r);
/* frontend_conn.c: close fc gracefully once its queued answers are out. */
void km_frontend_conn_close_after(struct fe_conn *fc);

/* frontend_produce.c */
int km_frontend_handle_produce(struct fe_conn *fc, const struct km_reqhdr *h,
		      struct km_wire_rd *r);
int16_t km_frontend_kerr_from_km(int err);

/* frontend_admin.c: CreateTopics, DeleteTopics, DeleteRecords and
 * CreatePartitions, decided by the control thread (ops->admin). */
int km_frontend_handle_admin(struct fe_conn *fc, const struct km_reqhdr *h,
			     struct km_wire_rd *r);
/* A free job of the pool, reclaiming finished unowned ones; NULL: none. */
struct km_admin_job *km_frontend_admin_job(struct km_frontend *fe);
/* Metadata with allow_auto_topic_creation: ask for topic to be created
 * (num.partitions). @return true if asked (answer LEADER_NOT_AVAILABLE). */
bool km_frontend_admin_auto_create(struct km_frontend *fe, const char *topic);

/* frontend_acl.c: authorization with Kafka's ACL semantics (acl.h). A
 * check with authorization off is one pointer test. */
bool km_frontend_acl_check(struct fe_conn *fc, enum km_acl_op op,
			   enum km_acl_rtype rtype, const char *name);
bool km_frontend_acl_check_any(struct fe_conn *fc, enum km_acl_op op,
			       enum km_acl_rtype rtype);
/* A filter's check (Metadata of every topic, ListGroups): Kafka neither
 * logs nor counts what a listing leaves out. */
bool km_frontend_acl_sees(struct fe_conn *fc, enum km_acl_op op,
			  enum km_acl_rtype rtype, const char *name);

static inline bool km_frontend_allowed(struct fe_conn *fc, enum km_acl_op op,
				       enum km_acl_rtype rtype,
				       const char *name)
{
	return fc->fe->acls == NULL || km_frontend_acl_check(fc, op, rtype, name);
}
/* frontend_fsess.c: KIP-227 fetch sessions served. */
int km_frontend_fsess_init(struct km_frontend *fe, uint32_t slots,
			   uint32_t ents_max);
void km_frontend_fsess_free(struct km_frontend *fe);
/* Response bytes the session a decoded Fetch names may add (before
 * km_frontend_fsess_begin, which may make it the whole session). */
uint32_t km_frontend_fsess_bound(const struct fe_conn *fc, int16_t version);
/* Apply the session fields of the decoded Fetch: sessionless, a new
 * session, or the session's partitions in place of the request's (res[].p
 * set: *resolved). @return the Fetch's top-level error (70, 71) or 0. */
int16_t km_frontend_fsess_begin(struct fe_conn *fc, int16_t version,
				bool *resolved);
/* Before the answer is encoded: res[].skip for each partition, and the
 * session's figures of what is answered. */
void km_frontend_fsess_answer(struct fe_conn *fc);
/* frontend_fetch.c: res[].p of every partition the Fetch names. */
void km_frontend_fetch_resolve(struct fe_conn *fc);

#endif
