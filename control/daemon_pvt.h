/* Internals shared by control/daemon*.c; not for inclusion elsewhere. */
#ifndef KM_CONTROL_DAEMON_PVT_H
#define KM_CONTROL_DAEMON_PVT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "control/cluster_id.h"
#include "control/config.h"
#include "dataplane/serve/acl.h"
#include "dataplane/net/secconn.h"
#include "control/ctlsock.h"
#include "control/mstate.h"
#include "control/namefilter.h"
#include "dataplane/serve/part.h"
#include "dataplane/worker.h"

/* Producer ids are reserved in blocks, the block's end kept in data.dir,
 * so that no id is handed out twice across restarts. */
#define KM_DAEMON_PID_BLOCK 1000
#define KM_DAEMON_PID_BLOCK_FILE "producer-id-block"

struct km_daemon_pid_alloc {
	pthread_mutex_t lock;
	int dir_fd;
	int64_t next;
	int64_t limit;	/* ids below are reserved on disk */
};

/* bytes/s per partition, from the published counters between two status
 * calls. */
struct km_rate {
	uint64_t bytes;
	int64_t leo;
	uint64_t at_ms;
	double bytes_per_sec;
	double records_per_sec; /* offsets per second: records, gaps aside */
};

/* Why partition i is PAUSED for free space (daemon_disk.c). */
struct km_daemon_disk_hold {
	bool paused;		/* PAUSED for free space, not by an operator */
	bool refused;		/* ... after an append the disk could not hold */
	uint64_t free_at;	/* bytes free on data.dir when it was refused */
	char why[320];		/* the fetcher's reason (KM_FETCHER_REASON_BYTES) */
};

/* Sync kinds of kmirror_sync_errors_total: groups is the only sync there
 * is; config and ACLs get their kind when those syncs exist. */
enum km_daemon_sync_kind {
	KM_DAEMON_SYNC_GROUPS = 0,
	KM_DAEMON_SYNC_KINDS,
};

/* A transient FAILED partition's retries (daemon_retry.c). */
struct km_daemon_retry {
	uint32_t attempts;	/* retries in a row, since it last mirrored */
	uint64_t next_ms;	/* the next one is due (0: none scheduled) */
	uint64_t total;		/* retries since kmirrord started (metrics) */
	char why[320];		/* the reason of the last transient FAILED */
};

struct km_daemon {
	struct km_config *cfg;
	int lock_fd;		/* data.dir/.lock, flock'd; -1 before */
	struct km_part_table table;
	bool *mirrored;		/* per table entry: has a source */
	struct km_rate *rates;	/* per table entry */
	struct km_mstate_rec *mstates; /* per table entry: persisted state */
	struct km_cluster_id_source *sources; /* per table entry: the source
						 its log mirrors (issue 21) */
	struct km_worker **workers;
	uint32_t n_workers;
	int ctl_efd;
	int sig_fd;
	struct km_ctlsock *ctl;
	struct km_daemon_pid_alloc pids;
	char source_cluster_id[256];
	uint16_t kafka_port;
	uint64_t started_ms;
	/* disk.free.min.bytes (daemon_disk.c) */
	struct km_daemon_disk_hold *disk_holds; /* per table entry */
	bool disk_low;
	uint64_t disk_free;	/* bytes free on data.dir at the last look */
	/* Offset sync from the source (daemon_groups.c): the last answer per
	 * group, for status. */
	struct km_daemon_gsync {
		struct km_group_sync s;
		int rc;			/* of the last attempt */
		uint64_t at_ms;
		uint64_t errors;	/* attempts that failed, for metrics */
	} *gsync;
	uint32_t n_gsync;
	uint64_t gsync_list_errors; /* ListGroups the source did not answer */
	uint64_t gsync_next_ms;
	uint64_t paused_hw_next_ms; /* daemon_pausehw.c */
	bool gsync_ended;	/* no partition follows the source any more */
	/* Topic discovery (daemon_discover.c) */
	struct km_namefilter include, exclude;
	uint64_t discover_next_ms;
	bool discover_full;	/* said once: partitions.max reached */
	/* daemon_metrics.c: when the control thread last saw partition i
	 * caught up (paused partitions have no worker to note it), per table
	 * entry; the sync errors per kind (enum km_daemon_sync_kind). */
	uint64_t *caught_up_ms;
	uint64_t sync_errors[KM_DAEMON_SYNC_KINDS];
	/* daemon_http.c: metrics.listener's socket, -1 without */
	int http_fd;
	uint16_t http_port;
	/* mirror.throttle (daemon_throttle.c): [0] the host's bucket, then
	 * one per topic.mirror.throttle.bytes.per.sec entry; shared with the
	 * workers' fetchers, so freed only after them. */
	struct km_throttle *throttles;
	struct km_rate *throttle_rates;	/* for status and metrics */
	uint32_t n_throttles;
	struct km_daemon_retry *retries; /* per table entry (daemon_retry.c) */
	uint64_t retry_rng;	/* the retries' jitter */
	/* A planned stop waiting for its partitions (daemon_planned.c). */
	struct km_daemon_planned {
		uint64_t token;	/* its deferred request; 0: none waits */
		json_t *req;	/* the stop to run, without planned/timeout_ms */
		bool *sel;	/* per table entry: named by it */
		uint64_t *mark;	/* per table entry: see caught_up() */
		int64_t *mark_hw; /* per table entry: see caught_up() */
		uint64_t started_ms, timeout_ms, progress_ms;
	} planned;
	/* The ctlsock token the stop's progress lines go to (0: the request
	 * being handled). */
	uint64_t stop_token;
	/* Topic config sync (daemon_configs.c) */
	uint64_t csync_next_ms;
	uint64_t csync_rounds, csync_errors;
	int csync_rc;		/* of the last round */
	bool csync_unsupported;	/* the source lists no DescribeConfigs */
	/* Loop detection (daemon_loop.c): each kmirror source's own
	 * upstream clusters, by its cluster id, for the front ends; and the
	 * next re-check (with the topic discovery's refresh). */
	struct km_tconfig *upstream;
	uint64_t loops_refused;	/* partitions FAILED as a loop */
	/* Security to the source (daemon_security.c). */
	struct km_netsec netsec;
	/* Which TLS the source connections use and why, for the log and
	 * status ("" without TLS): the kTLS probe's answer in kernel mode. */
	char source_tls[320];
	/* TLS on the SSL and SASL_SSL listeners (daemon_security.c), and
	 * each listener's bound port (cfg->listeners' order). */
	struct km_netsec lsn_sec;
	uint16_t listener_ports[KM_CONFIG_LISTENERS_MAX];
	/* Admin topic calls from the front end (daemon_admin.c): a queue the
	 * workers fill under the lock, an eventfd that wakes the loop. */
	struct km_daemon_admin {
		pthread_mutex_t lock;
		bool lock_init;
		int efd;
		struct km_admin_job *q[16];
		uint32_t n;
	} admin;
	/* Authorization's ACLs (daemon_acls.c); store NULL: off. */
	struct km_daemon_acls {
		struct km_acl_store *store;
		struct km_acl *file;	/* acls.file's, as last read well */
		uint32_t n_file;
		struct km_acl *src;	/* the source's kept, sorted */
		uint32_t n_src;
		ino_t file_ino;		/* what was read: 0 none */
		off_t file_size;
		struct timespec file_mtime;
		uint64_t file_loads, file_next_ms;
		char file_error[512];	/* the last read's; "" ok */
		uint64_t sync_next_ms, sync_last_ms;
		uint64_t sync_rounds, sync_errors;
		int sync_rc;
		bool security_disabled;	/* the source has no authorizer */
		char sync_error[320];
	} acls;
	/* Open files and memory at scale (daemon_scale.c). */
	struct km_daemon_scale {
		uint64_t nofile_was;	/* RLIMIT_NOFILE's soft limit at start */
		uint64_t nofile;	/* after raising it to the hard limit */
		uint64_t nofile_need;	/* what the partitions and sockets need */
		uint64_t maps_max;	/* vm.max_map_count (0: unknown) */
		uint64_t maps_need;	/* the mappings the logs need */
		uint64_t files_budget;	/* descriptors the logs may hold */
	} scale;
};

/* daemon_acls.c: ACLs from acls.file and the source (acls.sync) */
int km_daemon_acls_init(struct km_daemon *d);
void km_daemon_acls_free(struct km_daemon *d);
/** The control loop: the file re-read on change, the sync when due. */
void km_daemon_acls_watch(struct km_daemon *d);
json_t *km_daemon_acls_status(const struct km_daemon *d);
char *km_daemon_acls_metrics(const struct km_daemon *d);

/* daemon_lock.c: one kmirrord per data.dir */
/* daemon_security.c: the Kafka listener wants SASL (issue 16). */
bool km_daemon_listener_sasl(const struct km_config *cfg);
int km_daemon_lock(struct km_daemon *d);
int km_daemon_lock_update(struct km_daemon *d); /* the bound port */
void km_daemon_unlock(struct km_daemon *d);

/* daemon_roles.c: a partition's role across a restart (the table there) */
void km_daemon_settle_role(struct km_daemon *d, uint32_t i);
int km_daemon_record_roles(struct km_daemon *d);
int km_daemon_record_role(struct km_daemon *d, uint32_t i);

/* daemon_discover.c: topics.include/exclude, partitions added at the
 * source, topics deleted there */
int km_daemon_discover_init(struct km_daemon *d);
void km_daemon_discover_fini(struct km_daemon *d);
/** topics.include takes topic and topics.exclude does not. */
bool km_daemon_discovers(const struct km_daemon *d, const char *topic);
/** The control loop: a listing every metadata.refresh.interval.ms. */
void km_daemon_discover(struct km_daemon *d);

/** Table entry i, new, for topic-partition: a mirror's defaults (the
 *  caller makes it local). */
void km_daemon_fill_entry(struct km_daemon *d, uint32_t i, const char *topic,
			  int32_t partition);

/* daemon_assign.c: which worker owns each partition */
/** The start's table (entries 0..n-1, mirrored[] set): owners dealt round
 *  robin, mirrored partitions and the rest apart. */
void km_daemon_assign_owners(struct km_daemon *d);
/** A partition added while running, mirrored or not: the worker owning
 *  fewest of that class among the table's n entries. */
uint32_t km_daemon_pick_owner(const struct km_daemon *d, bool mirrored);

/* daemon_admin.c: CreateTopics, DeleteTopics, DeleteRecords and
 * CreatePartitions from the front end (dataplane/serve/admin.h) */
int km_daemon_admin_init(struct km_daemon *d);
void km_daemon_admin_fini(struct km_daemon *d);
/** The workers' km_admin_post_fn (any thread): queue the job. */
int km_daemon_admin_post(void *ctx, struct km_admin_job *job);
/** The control loop: answer every queued job. */
void km_daemon_admin_serve(struct km_daemon *d);
/** Start: finish topic deletions a crash interrupted (before the
 *  partitions are found). */
void km_daemon_admin_recover(struct km_daemon *d);

/* daemon_parts.c: which partitions to serve */
int km_daemon_find_parts(struct km_daemon *d);

/* daemon_pid.c */
int km_daemon_pid_alloc_init(struct km_daemon_pid_alloc *a,
			     const char *data_dir, int64_t max_seen);
void km_daemon_pid_alloc_fini(struct km_daemon_pid_alloc *a);
int km_daemon_pid_alloc_next(void *ctx, int64_t *pid, int16_t *epoch);

/* daemon.c */
int km_daemon_start_fetch(struct km_daemon *d, uint32_t i);

/* daemon_pausehw.c: the source's HW of paused partitions */
void km_daemon_watch_paused_hw(struct km_daemon *d);

/* daemon_stop.c: R4 (stop) on the control thread */
int km_daemon_load_states(struct km_daemon *d);
int km_daemon_resume_stops(struct km_daemon *d);
int km_daemon_on_stop(void *ctx, const json_t *req, json_t *resp);
bool km_daemon_selected(const struct km_daemon *d, uint32_t i,
			const json_t *req);
int km_daemon_unmatched(const struct km_daemon *d, const json_t *req,
			json_t *resp);
void km_daemon_part_dir(const struct km_daemon *d, const struct km_part *p,
			char *out, size_t cap);

/* daemon_start.c: R5 (start, failback) and FAILED on the control thread */
/* A failback source "HOST:PORT" or "[V6]:PORT" (kmirror.state `source`):
 * 0, or -EINVAL. */
int km_daemon_parse_source(const char *s, struct km_config_addr *out);
int km_daemon_on_start(void *ctx, const json_t *req, json_t *resp);
int km_daemon_on_failback(void *ctx, const json_t *req, json_t *resp);
int km_daemon_resume_prepares(struct km_daemon *d);
void km_daemon_watch(struct km_daemon *d);

/* daemon_source.c: the source each log mirrors (issue 21) */
int km_daemon_load_sources(struct km_daemon *d);
/** The ids partition i's next fetcher must find (recording the startup
 *  discovery's cluster id first if the log has none yet). */
void km_daemon_source_fill(const struct km_daemon *d, uint32_t i,
			   struct km_fetcher_config *fc);
/** The topic id each partition's partition.metadata is to name (ids[i]
 *  for table.parts[i]): its source topic's if known, else one per topic.
 *  @return 0 or -errno (no random bytes). */
int km_daemon_topic_ids(const struct km_daemon *d, uint8_t (*ids)[16]);
/** Record what the fetchers learned (the control loop, every WATCH_MS). */
void km_daemon_watch_sources(struct km_daemon *d);
/** A start that resumes partition i where its log ends: KM_ESOURCEID (err
 *  says what to do) if the source `where` is another cluster, else 0. */
int km_daemon_source_keep(const struct km_daemon *d, uint32_t i,
			  const struct km_config_addr *where,
			  const char *cluster_id, char *err, size_t len);
/** The log of partition i was cut for the source with cluster_id ("" =
 *  learn it): it holds to that one from now on. @return 0 or -errno. */
int km_daemon_source_accept(struct km_daemon *d, uint32_t i,
			    const char *cluster_id);
/** Status: a mirroring or connecting partition's note as its reason. */
void km_daemon_source_status(const struct km_daemon *d, uint32_t i,
			     const char *state, json_t *row);

/* daemon_pause.c: pause and resume */
int km_daemon_pause_fetch(struct km_daemon *d, uint32_t i);
int km_daemon_on_pause(void *ctx, const json_t *req, json_t *resp);
int km_daemon_on_resume(void *ctx, const json_t *req, json_t *resp);

/* daemon_disk.c: pause mirroring while data.dir is short of space */
int km_daemon_disk_init(struct km_daemon *d);
bool km_daemon_disk_hold(struct km_daemon *d, uint32_t i);
void km_daemon_watch_disk(struct km_daemon *d);
void km_daemon_disk_reason(const struct km_daemon *d, char *out, size_t cap);
/* Mirroring is paused for space: under the threshold, or some partition
 * held after its append was refused (status, kmirror_disk_paused). */
bool km_daemon_disk_pausing(const struct km_daemon *d);
/* A stop takes partition i out of the hold (it is no longer PAUSED). */
void km_daemon_disk_release(struct km_daemon *d, uint32_t i);
/* Why partition i is held (km_daemon_disk_held): the threshold, or the
 * append the disk refused. */
void km_daemon_disk_part_reason(const struct km_daemon *d, uint32_t i,
				char *out, size_t cap);

/* Paused by the free-space watch, not by an operator: only while PAUSED
 * does the flag mean anything (a stop or start moves the state on). */
static inline bool km_daemon_disk_held(const struct km_daemon *d, uint32_t i)
{
	return d->disk_holds[i].paused && d->mstates[i].state == KM_MSTATE_PAUSED;
}

/* daemon_groups.c: committed offsets synced from the source */
void km_daemon_sync_groups(struct km_daemon *d);
/* A stop's last sync, for the partitions stopped[i] (per table entry),
 * capped at cut[i], within group.sync.stop.timeout.ms: progress lines
 * while it runs, then "group_sync" (a line) and "groups" (rows) in resp. */
void km_daemon_sync_groups_at_stop(struct km_daemon *d, const bool *stopped,
				   const int64_t *cut, json_t *resp);
void km_daemon_groups_free(struct km_daemon *d);
/* daemon_stop.c: the stop itself, whatever asked for it (the verb, or a
 * planned stop once caught up). */
int km_daemon_stop_now(struct km_daemon *d, const json_t *req, json_t *resp);
/* daemon_planned.c: stop --planned. begin: sel[i] the partitions named
 * (stoppable, checked); KM_CTLSOCK_DEFERRED or a refusal. step: from the
 * control loop. */
int km_daemon_planned_begin(struct km_daemon *d, const json_t *req,
			    json_t *resp, const bool *sel);
void km_daemon_planned_step(struct km_daemon *d);
void km_daemon_planned_free(struct km_daemon *d);

/* daemon_grows.c: the synced groups' rows for status (the offsets
 * committed here now), and their metrics text (malloc'd, or NULL). */
json_t *km_daemon_groups_status(struct km_daemon *d, uint64_t now);
char *km_daemon_groups_metrics(struct km_daemon *d);

/* daemon_configs.c: topic configs synced from the source (issue 19) */
int km_daemon_configs_init(struct km_daemon *d);
/** Partition i was added by discovery: its topic's synced configs. */
int km_daemon_configs_add(struct km_daemon *d, uint32_t i);
void km_daemon_configs_free(struct km_daemon *d);
struct km_tconfig_entry;
/** Write first's topic configs to its kmirror.configs (write, fsync,
 *  rename, fsync dir), the file's comment saying what they are. */
int km_daemon_configs_save(const struct km_daemon *d,
			   const struct km_part *first,
			   const struct km_tconfig_entry *e, uint32_t n,
			   const char *what);
/** p's topic was made by CreateTopics (its partition 0 keeps the
 *  configs given then), not mirrored. */
bool km_daemon_created(const struct km_daemon *d, const struct km_part *p);
/** Lay partition i's synced configs over lc (kmirrord's for its topic). */
void km_daemon_configs_limits(const struct km_daemon *d, uint32_t i,
			      struct km_log_config *lc);
void km_daemon_sync_configs(struct km_daemon *d);
/** Status: the sync's rounds and errors, and the last round's outcome. */
json_t *km_daemon_configs_status(const struct km_daemon *d);

/* daemon_loop.c: a source that mirrors from us is refused (issue 19) */
/** Partitions about to fetch from a kmirror host that mirrors from this
 *  cluster go FAILED (persisted), naming both cluster ids. */
void km_daemon_refuse_loops(struct km_daemon *d);
/** The same question for the partitions mirroring now, at every metadata
 *  refresh: a ring closed after they started goes FAILED too. */
void km_daemon_recheck_loops(struct km_daemon *d);
struct km_upstream_answer;
/** Why partition i may not mirror from a (which mirrors from us). */
void km_daemon_loop_reason(const struct km_daemon *d, uint32_t i,
			   const struct km_config_addr *a,
			   const struct km_upstream_answer *ans, char *out,
			   size_t cap);

/* daemon_net.c: the fetch network in status and metrics */
void km_daemon_net_status(struct km_daemon *d, json_t *resp);
char *km_daemon_net_metrics(struct km_daemon *d); /* malloc'd, or NULL */

/* daemon_retry.c: a transient FAILED retries by itself */
int km_daemon_retry_init(struct km_daemon *d);

/* daemon_security.c: the source.* security keys into d->netsec (the
 * password files read and their mode checked), for the workers and
 * kclient. @return 0, -errno (a file), KM_ECFGVALUE (a file others may
 * read), KM_ETLS (a certificate or key that does not load). */
int km_daemon_security_init(struct km_daemon *d);
void km_daemon_security_free(struct km_daemon *d);
/** Partition i (mirrored, MIRRORING) with its published fetch_state:
 *  true if a retry handles it (not to be persisted FAILED). */
bool km_daemon_retry_watch(struct km_daemon *d, uint32_t i, int fetch_state);
/** Partition i is in a series of retries (FAILED or retrying). */
bool km_daemon_retry_active(const struct km_daemon *d, uint32_t i);
/** Partition i no longer mirrors (paused, stopped, FAILED for good). */
void km_daemon_retry_reset(struct km_daemon *d, uint32_t i);
/** Status, once partition i was retried: retries, and while a series
 *  runs its attempt, the time to the next one and the last reason. */
void km_daemon_retry_status(const struct km_daemon *d, uint32_t i,
			    json_t *row);

/* daemon_ctl.c: control socket verbs */
int km_daemon_ctl_open(struct km_daemon *d);

uint64_t km_daemon_now_ms(void);

/* daemon_ctl.c: what status calls the state of partition i */
const char *km_daemon_state_name(const struct km_daemon *d, uint32_t i);
/* The whole metrics text (malloc'd, *len its bytes), or NULL. */
char *km_daemon_metrics_text(struct km_daemon *d, size_t *len);

/* daemon_metrics.c: lag, state gauges and sync errors for metrics */

/* Partition i's lag behind its source, as status and metrics give it. */
struct km_daemon_lag {
	bool follows;		/* mirrored, MIRRORING or PAUSED */
	int64_t offsets;	/* source HW - our LEO, >= 0; -1 unknown */
	int64_t stable;		/* source LSO - our LSO, >= 0; -1 unknown */
	int64_t ms;		/* time lag (see daemon_metrics.c); -1 unknown */
};
void km_daemon_lag(struct km_daemon *d, uint32_t i, uint64_t now,
		   struct km_daemon_lag *out);
/* The control loop, every WATCH_MS: notes the partitions caught up. */
void km_daemon_watch_lag(struct km_daemon *d);
char *km_daemon_part_metrics(struct km_daemon *d); /* malloc'd, or NULL */

/* daemon_http.c: metrics over HTTP (metrics.listener) for Prometheus */
int km_daemon_http_open(struct km_daemon *d);
void km_daemon_http_serve(struct km_daemon *d);
void km_daemon_http_close(struct km_daemon *d);
/* daemon_throttle.c: mirror.throttle.bytes.per.sec */
int km_daemon_throttle_init(struct km_daemon *d);
void km_daemon_throttle_free(struct km_daemon *d);
void km_daemon_throttle_fill(const struct km_daemon *d, const char *topic,
			     struct km_fetcher_config *fc);
void km_daemon_throttle_status(struct km_daemon *d, json_t *resp);
char *km_daemon_throttle_metrics(struct km_daemon *d); /* malloc'd, or NULL */
int km_daemon_on_throttle(void *ctx, const json_t *req, json_t *resp);

/* daemon_scale.c: open files and memory for many partitions (issue 17) */
int km_daemon_scale_init(struct km_daemon *d);
void km_daemon_scale_status(struct km_daemon *d, json_t *resp);
char *km_daemon_scale_metrics(struct km_daemon *d); /* malloc'd, or NULL */

#endif
