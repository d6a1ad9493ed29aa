/* A dataplane worker: one thread that runs to completion on its own
 * io_uring (sockets and disk), owning a set of partitions (their logs,
 * fetch sessions and local writers) and, on the worker that serves it, the
 * Kafka front-end.
 *
 * Threading. The control thread creates the workers, starts them, and then
 * talks to each only through messages: km_worker_post() from the control
 * thread, answered through a struct km_worker_reply that the control
 * thread waits on (km_worker_wait()). Workers talk to each other (a Produce
 * arriving on the front-end's worker for a partition another worker owns)
 * through one SPSC ring per (sender, receiver) pair. A worker blocks in
 * io_uring_enter; a message wakes it through an eventfd read armed on its
 * ring. Nothing on the mirror path takes a lock.
 */
#ifndef KM_DATAPLANE_WORKER_H
#define KM_DATAPLANE_WORKER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dataplane/fetch/fetcher.h"
#include "dataplane/serve/admin.h"
#include "dataplane/serve/frontend.h"
#include "dataplane/fetch/fsess.h"
#include "dataplane/net/net.h"
#include "dataplane/serve/part.h"
#include "iouring_log/log.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Messages queued to one worker from one sender. */
#define KM_WORKER_RING_SLOTS 1024u
/* Worker loop tick: timers (fetch backoff, flush.ms, Fetch long polls). */
#define KM_WORKER_TICK_MS 5u
/* Retention checks per partition (segment deletion), at most this often. */
#define KM_WORKER_RETAIN_MS 1000u
/* An idle partition with no deadline of its own is visited this often
 * (worker_ready.c): a backstop for what no event announces, a wall clock
 * step among them. Kafka checks retention every 5 minutes
 * (log.retention.check.interval.ms). */
#define KM_WORKER_IDLE_MS 60000u

struct km_worker;

/* Hands out producer ids for local idempotent producers (InitProducerId):
 * shared by all workers, so it locks (a rare call). */
typedef int (*km_worker_pid_fn)(void *ctx, int64_t *pid, int16_t *epoch);

struct km_netsec;

struct km_worker_config {
	uint32_t id;			/* 0..n_workers-1 */
	uint32_t n_workers;
	struct km_worker **peers;	/* every worker, by id (for forwarding) */
	const struct km_part_table *parts;
	uint32_t uring_entries;		/* SQ size; 0: 1024 */
	struct km_net_config net;	/* .uring is filled in by the worker */
	/* The fetch sessions' backend: a kernel one with a receive pool of
	 * its own (so that no client of the front-end can take the buffers
	 * mirroring needs), or KM_NET_DPDK (net.mode=dpdk); the front-end
	 * stays on net. Zeroed (conns_max 0): they share net. */
	struct km_net_config fetch_net;
	uint32_t parts_max;		/* partitions this worker may own */
	/* More it may be given while it runs (topic discovery): room for
	 * them, but receive-buffer shares are cut for parts_max. */
	uint32_t parts_extra;
	km_worker_pid_fn alloc_pid;
	void *alloc_pid_ctx;
	int ctl_efd;			/* eventfd the control thread waits on */
	/* Front-end (on the worker that has a listener). */
	const char *cluster_id;
	int32_t node_id;
	char advertised_host[256];
	uint16_t advertised_port;	/* 0: the bound port */
	uint32_t frame_bytes_max;
	uint32_t request_timeout_ms;
	uint32_t group_initial_rebalance_delay_ms;
	uint32_t group_min_session_timeout_ms;
	uint32_t group_max_session_timeout_ms;
	struct km_log_config broker_log; /* the front end's DescribeConfigs */
	/* The clusters each source mirrors from, by the source's cluster id
	 * (control-owned, outlives the workers): the front end names them
	 * with our own sources, so a loop is seen around any ring. */
	struct km_tconfig *upstream;
	/* TLS and SASL to the source (issue 16), NULL: PLAINTEXT. The fetch
	 * network is wrapped (dataplane/net/snet.h). Outlives the worker. */
	const struct km_netsec *source_sec;
	uint32_t txn_ids_max;		/* 0: the front-end's default */
	uint32_t fetch_session_slots;	/* KIP-227 sessions; 0: none */
	int64_t txn_id_expiration_ms;
	/* The Admin topic calls' way to the control thread (NULL: refused),
	 * and auto.create.topics.enable for the front end's Metadata. */
	km_admin_post_fn admin;
	void *admin_ctx;
	bool auto_create_topics;
	/* Some listener of the front end is SSL or SASL_SSL: its net is
	 * wrapped (dataplane/net/snet.h) when the front end starts. */
	bool listen_tls;
	/* SASL on the Kafka listener (issue 16); users_file outlives us. */
	struct km_frontend_sasl fe_sasl;
	/* Authorization (dataplane/serve/acl.h); NULL: off. */
	struct km_acl_store *acls;
};

/* What a stop did (R4), per partition. */
struct km_stop_result {
	int64_t cut_offset;		/* log end after the cut */
	uint64_t removed_bytes;		/* truncate mode */
	uint32_t removed_batches;
	int64_t removed_records;	/* offsets removed: old end - cut */
	uint32_t aborted;		/* abort mode: ABORT markers written */
	int64_t barrier_offset;		/* where the barrier is */
	bool resumed;			/* the barrier was already there */
};

/* The fetch network as the worker saw it at its last tick, for status and
 * metrics: its backend's counters (DPDK: the port's) and the connection of
 * each fetch session. */
#define KM_WORKER_NET_CONNS 32u
struct km_worker_net {
	bool dpdk;
	struct km_net_stats net;
	uint32_t n_conns;
	struct km_fsess_pool_conn conns[KM_WORKER_NET_CONNS];
	/* The Kafka listener, on the worker that has one. */
	bool listener;
	struct km_frontend_stats fe;
	struct km_net_stats fe_net;
	/* The fetch sessions' figures (full and incremental Fetches). */
	struct km_fsess_pool_stats fpool;
	/* Issue 17: partitions visited at the worker's ticks, and passes of
	 * the fetch sessions' stall watchdog over their members. */
	uint64_t part_visits;
	uint64_t fetch_looks;
};

/** A copy of w's last published figures (control thread; takes the lock
 *  the worker only ever try-locks). */
void km_worker_net_snapshot(struct km_worker *w, struct km_worker_net *out);

/* A reply the control thread waits for: written by the worker, then
 * `done` is set (release) and ctl_efd is written. */
struct km_worker_reply {
	_Atomic int done;
	int rc;
	char msg[256];
	uint16_t port;			/* LISTEN: the bound port */
	int64_t max_pid;		/* OPEN: largest positive producer id */
	struct km_log_recovery rec;	/* OPEN: what recovery did */
	struct km_stop_result stop;	/* STOP */
	int64_t low_watermark;		/* DELETE_RECORDS: the log start */
};

/**
 * Allocate a worker (its ring, net backend, partition slots); the thread
 * starts with km_worker_start(). @return 0 and *out, or a negative code.
 */
int km_worker_create(const struct km_worker_config *cfg,
		     struct km_worker **out);
/** Start the thread. @return 0 or -errno. */
int km_worker_start(struct km_worker *w);
/** Join the thread (after a SHUTDOWN reply) and free. NULL ok. */
void km_worker_destroy(struct km_worker *w);

/* Control-thread requests. Each returns 0 once queued (the reply comes
 * later) or KM_EWORKERQ when the worker's control ring is full. */

/** Open p's log (p->owner must be this worker); reply.max_pid, .rec. */
int km_worker_open(struct km_worker *w, struct km_part *p,
		   const struct km_log_config *cfg,
		   struct km_worker_reply *reply);
/** Give p's log new limits (a topic config synced from the source, issue
 *  19): retention and the roll size follow them from the owner's next
 *  pass. l is copied. */
int km_worker_set_limits(struct km_worker *w, struct km_part *p,
			 const struct km_log_limits *l,
			 struct km_worker_reply *reply);
/** DeleteRecords on p's owner (km_log_delete_records): reply.rc -ERANGE
 *  for an offset past the HW, else reply.low_watermark. */
int km_worker_delete_records(struct km_worker *w, struct km_part *p,
			     int64_t offset, struct km_worker_reply *reply);
/** p's topic was deleted (it is in no published view any more): the owner
 *  lets go of it (writer, retention) and keeps its log open, unused, until
 *  the worker ends, for readers that took a view before. */
int km_worker_drop(struct km_worker *w, struct km_part *p,
		   struct km_worker_reply *reply);
/** Start mirroring p from the source. cfg is copied. */
int km_worker_fetch(struct km_worker *w, struct km_part *p,
		    const struct km_fetcher_config *cfg,
		    struct km_worker_reply *reply);
/** Serve the Kafka API on ipv4:port (0: ephemeral); reply.port. */
int km_worker_listen(struct km_worker *w, const char *ipv4, uint16_t port,
		     struct km_worker_reply *reply);
/** The same as listener l (copied; its tls must outlive the worker). */
int km_worker_listen_as(struct km_worker *w,
			const struct km_frontend_listener *l, const char *ipv4,
			uint16_t port, struct km_worker_reply *reply);
enum km_stop_mode {
	KM_STOP_TRUNCATE = 0, /* cut back to a transaction-clean offset */
	KM_STOP_ABORT = 1,    /* keep everything, ABORT open transactions */
	KM_STOP_PAUSE = 2,    /* only remove the fetcher (pause) */
	KM_STOP_PREPARE = 3,  /* km_worker_prepare (internal) */
};

/**
 * R4 steps 1-4 on p's owner: remove the fetcher, fdatasync, cut by mode,
 * append the MIRROR_PID_RESET barrier carrying source_cluster_id, fdatasync
 * and snapshot. If the log already ends with that barrier (a stop resumed
 * after a crash), nothing is cut or written again. reply.stop says what
 * happened. The partition stays refusing writes: see km_worker_open_writes.
 * KM_STOP_PAUSE only does step 1 (pause: resume with km_worker_fetch).
 */
int km_worker_stop(struct km_worker *w, struct km_part *p,
		   enum km_stop_mode mode, const char *source_cluster_id,
		   struct km_worker_reply *reply);
#ifdef KM_TEST_HOOKS
/** Test switch: SIGKILL the process if $KMIRROR_TEST_CRASH equals point. */
void km_worker_crash_point(const char *point);
#else
/* A release build (no -Dtest_hooks) has no crash points. */
static inline void km_worker_crash_point(const char *point)
{
	(void)point;
}
#endif

/**
 * R5, PREPARING on p's owner: refuse Produce from now on (POLICY_VIOLATION,
 * as any mirrored partition), wait for the local writes already taken to
 * be appended, fdatasync, then cut the log to truncate_to (nothing if it is
 * at or past the log end; an empty log restarting there if it is below the
 * log start), or, from_start, empty it and restart it at offset 0. Then
 * fdatasync and snapshot. reply.stop: cut_offset is the new log end,
 * removed_* what went. Idempotent: a PREPARING resumed after a crash runs
 * it again. The partition has no fetcher (start one with km_worker_fetch).
 */
int km_worker_prepare(struct km_worker *w, struct km_part *p,
		      int64_t truncate_to, bool from_start,
		      struct km_worker_reply *reply);

/** R4 step 6: p takes local Produce from now on. */
int km_worker_open_writes(struct km_worker *w, struct km_part *p,
			  struct km_worker_reply *reply);

/** Offset sync (issue 7): hand s to the front-end's group coordinator
 *  (this worker must serve the front-end); s stays the caller's until the
 *  reply. See km_frontend_group_sync(). */
int km_worker_group_sync(struct km_worker *w, struct km_group_sync *s,
			 struct km_worker_reply *reply);

/** Stop fetchers and the front-end, close every log cleanly (flush,
 *  snapshot, clean-shutdown marker), end the thread. */
int km_worker_shutdown(struct km_worker *w, struct km_worker_reply *reply);

/** Wait (control thread) until reply is done or timeout_ms passes.
 *  @return reply->rc, or -ETIMEDOUT. */
int km_worker_wait(int ctl_efd, struct km_worker_reply *reply,
		   int timeout_ms);

#ifdef __cplusplus
}
#endif

#endif
