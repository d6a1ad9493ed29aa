/* Internals shared by worker*.c; not for inclusion elsewhere. */
#ifndef KM_DATAPLANE_WORKER_PVT_H
#define KM_DATAPLANE_WORKER_PVT_H

#include <pthread.h>

#include "common/spsc.h"
#include "dataplane/fetch/fsess.h"
#include "dataplane/worker.h"
#include "iouring_log/uring.h"

struct km_frontend;
struct km_local_write;

enum wmsg_type {
	WMSG_OPEN,
	WMSG_FETCH,
	WMSG_LISTEN,
	WMSG_SHUTDOWN,
	WMSG_STOP,
	WMSG_WRITABLE,
	WMSG_PRODUCE,	/* front-end worker -> owner */
	WMSG_PRODUCED,	/* owner -> front-end worker */
	WMSG_GROUP_SYNC, /* control -> front-end worker */
	WMSG_LIMITS,	/* control -> owner: synced topic configs */
	WMSG_DELETE_RECORDS, /* control -> owner: DeleteRecords */
	WMSG_DROP,	/* control -> owner: its topic was deleted */
};

struct wmsg {
	enum wmsg_type type;
	struct km_part *part;
	struct km_worker_reply *reply;
	struct wmsg *next;	/* outbox link while a ring is full */
	union {
		struct km_log_config open;
		struct km_log_limits limits;
		int64_t delete_below;	/* WMSG_DELETE_RECORDS */
		struct {
			struct km_group_sync *s;
			struct km_worker *w;	/* for the callback */
		} sync;
		struct km_fetcher_config fetch;
		struct {
			enum km_stop_mode mode;
			char cluster_id[256];
			int64_t truncate_to;	/* KM_STOP_PREPARE */
			bool from_start;	/* KM_STOP_PREPARE */
		} stop;
		struct {
			char host[64];
			uint16_t port;
			bool named;	/* l is set, else PLAINTEXT */
			struct km_frontend_listener l;
		} listen;
		struct {
			uint32_t from;	/* worker to answer */
			struct km_worker *owner; /* set by the owner */
			int16_t acks;
			uint32_t len;
			km_part_produced_fn done;
			void *arg;
			struct km_part_produced res;
			uint8_t *bytes;	/* the records' copy, which the
					 * owner's writer adopts */
			/* A coordinator's marker instead (bytes NULL). */
			bool marker;
			bool commit;
			int16_t epoch;
			int64_t pid;
		} produce;
	} u;
};

/* A partition this worker owns. */
struct wpart {
	struct km_part *part;
	struct km_log *log;
	struct km_fetcher *fetcher;	/* NULL unless mirroring */
	/* Counters of the partition's earlier fetchers (a pause, a resume, a
	 * retry each end one): the published counters never go down. */
	struct km_fetcher_stats gone;
	struct km_local_write *lw;	/* local Produce */
	bool fetch_failed_logged;
	struct wmsg *stopping;	/* a STOP waiting for the fetcher to end */
	uint64_t retain_at_ms;	/* next retention check (worker clock) */
	struct km_worker *w;	/* for the log's and fetcher's hooks */
	bool active;		/* on w->act (worker_ready.c) */
	/* A visit skipped retention for its pace: one is owed. */
	bool retain_owed;
	/* Its place in worker_ready.c's timer heap + 1 (0: not in it). */
	uint32_t heap_at;
};

/* A timer heap entry: when to visit wparts[slot] next (worker clock). */
struct km_worker_due {
	uint64_t due_ms;
	uint32_t slot;
};

struct km_worker {
	struct km_worker_config cfg;
	pthread_t thread;
	bool started;
	struct km_uring ring;
	struct km_net *net;		/* front-end (kernel sockets) */
	struct km_net *fnet;		/* fetch sessions: their own, or net */
	int efd;			/* wake-up eventfd */
	uint64_t efd_val;
	struct km_io_req efd_req;
	bool efd_armed;
	struct __kernel_timespec tick_ts;
	struct km_io_req tick_req;
	bool tick_armed;
	struct km_spsc ctl_q;		/* from the control thread */
	struct km_spsc *peer_q;		/* [n_workers]: from each worker */
	void **slots;
	struct wmsg *outbox, **outbox_tail; /* pushes waiting for room */
	struct km_fetcher_scratch *scratch; /* shared by its sessions */
	struct km_inflate *inflate;	/* shared by its local writers */
	struct km_fsess_pool fpool;		/* fetch sessions: one per broker */
	void *fsess_mem;
	struct wpart *wparts;
	uint32_t n_wparts;
	/* worker_ready.c: indexes into wparts of those to visit at the next
	 * tick, the sweep's next one, the visits made (metrics). */
	uint32_t *act;
	uint32_t n_act;
	struct km_worker_due *heap; /* earliest first (worker_ready.c) */
	uint32_t n_heap;
	bool stops_pending;	/* a STOP came: the ready list holds it */
	uint64_t part_visits;
	struct km_frontend *fe;
	uint32_t fwd_pending;		/* Produce forwarded, not answered */
	struct km_part_ops ops;
	bool stopping;
	bool done;
	struct km_worker_reply *shutdown_reply;
	uint64_t now_ms;
	/* Logs of deleted topics: other workers' front ends may still read
	 * them through a view taken before, so they are freed at the end. */
	struct km_log **retired;
	uint32_t n_retired;
	/* Published for status: the worker try-locks, never waits. */
	pthread_mutex_t net_lock;
	struct km_worker_net net_pub;
};

/* worker_fe.c: the front-end and local writes on this worker. */
int km_worker_fe_listen(struct km_worker *w,
			const struct km_frontend_listener *l,
			const char *ipv4, uint16_t port,
		  uint16_t *bound);
int km_worker_fe_open_writer(struct km_worker *w, struct wpart *wp);
void km_worker_fe_poll(struct km_worker *w);
bool km_worker_fe_idle(struct km_worker *w);
void km_worker_fe_stop(struct km_worker *w);
void km_worker_fe_free(struct km_worker *w);
void km_worker_fe_free_writers(struct km_worker *w);
void km_worker_fe_on_produce(struct km_worker *w, struct wmsg *m);
void km_worker_fe_on_produced(struct km_worker *w, struct wmsg *m);
void km_worker_fe_on_group_sync(struct km_worker *w, struct wmsg *m);
int km_worker_fe_alloc_pid(void *ctx, int64_t *pid, int16_t *epoch);
int km_worker_fe_admin(void *ctx, struct km_admin_job *job);
int km_worker_fe_write_marker(void *ctx, struct km_part *p, int64_t pid,
			      int16_t epoch, bool commit,
			      km_part_produced_fn done, void *arg);
int km_worker_fe_produce(void *ctx, struct km_part *p, const struct km_chain *c,
		   struct km_chain_cur cur, uint32_t len, int16_t acks,
		   km_part_produced_fn done, void *arg);

/* worker_stop.c: R4 on the owner */
void km_worker_stop_on_stop(struct km_worker *w, struct wmsg *m);
void km_worker_stop_on_writable(struct km_worker *w, struct wmsg *m);
/* Free wp's fetcher, its counters kept in wp->gone. */
void km_worker_fetcher_free(struct wpart *wp);

/* Finish stops whose fetcher has ended. @return stops finished. */
int km_worker_stop_step(struct km_worker *w, struct wpart *wp);

/* worker_prepare.c: R5's cut on the owner, once nothing writes. */
int km_worker_prepare_run(struct km_worker *w, struct wpart *wp, const struct wmsg *m,
		 struct km_stop_result *r);

/* worker_ready.c: the partitions with something to do (see there). */
/* wp's log and fetcher tell w when something happens to them. */
void km_worker_hook(struct km_worker *w, struct wpart *wp);
/* Visit wp at the next tick. */
void km_worker_touch(struct km_worker *w, struct wpart *wp);
/* wparts[i] goes, the last one moving into its place. */
void km_worker_unlist(struct km_worker *w, uint32_t i);
/* The tick's visits: the ready list and the partitions whose deadline
 * came. */
void km_worker_visit_all(struct km_worker *w);

/* worker.c */
/* A tick's work for one partition: flush by time, retention, the failed
 * fetcher's line, the published figures. */
void km_worker_visit(struct km_worker *w, struct wpart *wp);
/* A log failed for space (km_log_is_space_error) is repaired, if space is
 * back. @return 0, or the log's error that stays. */
int km_worker_clear_space_error(struct wpart *wp);
/* Refresh the partition's published figures (status, metrics). */
void km_worker_publish(struct wpart *wp);
/* When a quiet wp needs its next visit (worker clock): retention owed or
 * due by time, compaction, a space error to retry, or the backstop. */
uint64_t km_worker_next_due(struct km_worker *w, struct wpart *wp);
struct wmsg *km_worker_msg_new(enum wmsg_type type, struct km_part *p,
			       struct km_worker_reply *reply);
int km_worker_post(struct km_worker *w, struct wmsg *m);
struct wpart *km_worker_find(struct km_worker *w, const struct km_part *p);
bool km_worker_send(struct km_worker *w, uint32_t to, struct wmsg *m);
void km_worker_reply_done(struct km_worker *w, struct km_worker_reply *r,
			  int rc, const char *msg);

#endif
