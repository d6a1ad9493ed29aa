/* kmirrord's life: start, serve, shut down cleanly. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/errors.h"
#include "common/file.h"
#include "common/resolve.h"
#include "common/log.h"
#include "control/cluster_id.h"
#include "control/daemon.h"
#include "control/daemon_pvt.h"
#include "dataplane/group/txnlog.h"
#include "dataplane/serve/tconfig.h"
#include "dataplane/net/dpdk/dpdk.h"

/* How long the control thread waits for a worker's answer. Opening a log
 * may rescan a large tail after a crash, and a clean close syncs it. */
#define OPEN_TIMEOUT_MS (10 * 60 * 1000)
#define SHUTDOWN_TIMEOUT_MS (2 * 60 * 1000)
#define REPLY_TIMEOUT_MS 10000
#define WATCH_MS 1000
#define PLANNED_POLL_MS 100 /* a planned stop waits: look more often */
/* Kafka clients of the listeners on the DPDK port, beyond the fetch
 * sessions' connections (each takes an endpoint slot and a send ring). */
#define DPDK_CLIENTS_MAX 32u

uint64_t km_daemon_now_ms(void)
{
	return km_clock_ms();
}

/* ---- workers ------------------------------------------------------- */

static uint32_t parts_of(const struct km_daemon *d, uint32_t w)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < d->table.n; i++)
		n += d->table.parts[i].owner == w;
	return n;
}

/* net.mode=dpdk: the fetch sessions' backend, on queue pair `worker` of the
 * port. 16383 receive mbufs per queue (about 37 MiB of hugepages) give each session up to KM_KFRAME_SEGS_MAX buffers
 * of one MSS (1460 at MTU 1500). */
static void dpdk_net_config(const struct km_config *cfg, uint32_t parts,
			    uint32_t worker, uint32_t workers,
			    struct km_net_config *nc)
{
	nc->kind = KM_NET_DPDK;
	nc->conns_max = 2 * parts + 8;
	nc->rx_buf_count = 16383;
	nc->rx_buf_bytes = 1460;
	nc->send_queue_max = 64;
	nc->send_iov_max = 256;
	nc->connect_timeout_ms = 5000;
	nc->dpdk.port = cfg->dpdk.port;
	nc->dpdk.queue = (uint16_t)worker;
	nc->dpdk.queues = (uint16_t)workers;
	nc->dpdk.ip_be = cfg->dpdk.ip_be;
	nc->dpdk.netmask_be = cfg->dpdk.netmask_be;
	nc->dpdk.gateway_be = cfg->dpdk.gateway_be;
	memcpy(nc->dpdk.mac, cfg->dpdk.mac, sizeof(nc->dpdk.mac));
	nc->dpdk.mac_set = cfg->dpdk.mac_set;
	nc->dpdk.mtu = cfg->dpdk.mtu;
}

/* Listeners on the DPDK port are worker 0's, as the front end is: its
 * net listens for them and holds their clients too. */
static void dpdk_listeners(const struct km_config *cfg,
			   struct km_net_config *nc)
{
	for (uint32_t i = 0; i < cfg->listeners_count; i++)
		if (km_config_listener_on_dpdk(cfg, &cfg->listeners[i]))
			nc->listeners_max++;
	if (nc->listeners_max > 0)
		nc->conns_max += DPDK_CLIENTS_MAX;
}

/* The kernel backend, one each for the front-end's clients and the fetch
 * sessions: 512 receive buffers of 64 KiB (32 MiB) per pool, so that a
 * client holding its pool's every buffer cannot stall mirroring. */
static void kernel_net_config(uint32_t conns, struct km_net_config *nc)
{
	nc->kind = KM_NET_KERNEL;
	nc->conns_max = conns;
	nc->rx_buf_count = 512;
	nc->rx_buf_bytes = 64 * 1024;
	nc->send_queue_max = 64;
	nc->send_iov_max = 256;
	nc->connect_timeout_ms = 5000;
}

static void worker_config(const struct km_daemon *d, uint32_t id,
			  struct km_worker_config *wc)
{
	uint32_t parts;

	memset(wc, 0, sizeof(*wc));
	wc->id = id;
	wc->n_workers = d->n_workers;
	wc->peers = d->workers;
	wc->parts = &d->table;
	wc->parts_max = parts_of(d, id);
	wc->parts_extra = d->table.cap - d->table.n;
	kernel_net_config(1024, &wc->net);
	wc->net.listeners_max = KM_CONFIG_LISTENERS_MAX;
	wc->alloc_pid = km_daemon_pid_alloc_next;
	wc->alloc_pid_ctx = (void *)&d->pids;
	wc->admin = km_daemon_admin_post;
	wc->admin_ctx = (void *)d;
	wc->auto_create_topics = d->cfg->auto_create_topics != 0;
	wc->ctl_efd = d->ctl_efd;
	wc->cluster_id = d->cfg->cluster_id;
	wc->node_id = d->cfg->node_id;
	snprintf(wc->advertised_host, sizeof(wc->advertised_host), "%s",
		 d->cfg->advertised.host);
	wc->advertised_port = d->cfg->advertised.port;
	wc->frame_bytes_max = d->cfg->request_bytes_max;
	wc->request_timeout_ms = d->cfg->request_timeout_ms;
	wc->group_initial_rebalance_delay_ms = d->cfg->group_initial_rebalance_delay_ms;
	wc->group_min_session_timeout_ms = d->cfg->group_min_session_timeout_ms;
	wc->group_max_session_timeout_ms = d->cfg->group_max_session_timeout_ms;
	wc->txn_ids_max = d->cfg->txn_ids_max;
	wc->fetch_session_slots = d->cfg->fetch_session_slots;
	wc->txn_id_expiration_ms = (int64_t)d->cfg->txn_id_expiration_ms;
	/* A topic no override names: the broker-level settings. */
	km_config_log_config(d->cfg, "", 0, &wc->broker_log);
	wc->broker_log.data_dir = wc->broker_log.topic = NULL;
	wc->upstream = d->upstream;
	wc->acls = d->acls.store;
	/* Connections are per broker: some room for the leaders of
	 * partitions discovery adds, not one per partition it may add. */
	parts = wc->parts_max + (wc->parts_extra < 64 ? wc->parts_extra : 64);
	if (d->cfg->net_mode == KM_CONFIG_NET_DPDK) {
		dpdk_net_config(d->cfg, parts, id, d->n_workers,
				&wc->fetch_net);
		if (id == 0)
			dpdk_listeners(d->cfg, &wc->fetch_net);
	}
	else
		kernel_net_config(2 * parts + 8, &wc->fetch_net);
	wc->source_sec = km_netsec_active(&d->netsec) ? &d->netsec : NULL;
	wc->listen_tls = d->lsn_sec.ssl_ctx != NULL;
	wc->fe_sasl.required = km_daemon_listener_sasl(d->cfg);
	wc->fe_sasl.users_file = d->cfg->sasl_users_file;
	wc->fe_sasl.mechanisms = d->cfg->sasl_enabled_mechanisms;
	wc->fe_sasl.reauth_ms = (int64_t)d->cfg->connections_max_reauth_ms;
}

static int start_workers(struct km_daemon *d)
{
	int rc;

	d->workers = calloc(d->n_workers, sizeof(*d->workers));
	if (d->workers == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < d->n_workers; i++) {
		struct km_worker_config wc;

		worker_config(d, i, &wc);
		if ((rc = km_worker_create(&wc, &d->workers[i])) < 0) {
			KM_ERROR("daemon", "worker %u: %s", i, km_strerror(rc));
			return rc;
		}
	}
	for (uint32_t i = 0; i < d->n_workers; i++)
		if ((rc = km_worker_start(d->workers[i])) < 0)
			return rc;
	return 0;
}

/* ---- partitions ------------------------------------------------------ */

static void log_recovery(const struct km_part *p,
			 const struct km_log_recovery *r)
{
	if (r->clean)
		KM_INFO("daemon", "partition %s-%d: opened (clean shutdown)",
			p->topic, p->partition);
	else if (r->truncated_at >= 0 && r->corrupt_mid_log)
		KM_ERROR("daemon", "partition %s-%d: recovered from corruption "
			 "(not a torn tail): bad batch at position %llu of %s; "
			 "cut at offset %lld, %llu bytes removed", p->topic,
			 p->partition,
			 (unsigned long long)r->corrupt_position,
			 r->corrupt_file, (long long)r->truncated_at,
			 (unsigned long long)r->bytes_truncated);
	else if (r->bytes_scanned == 0 && r->bytes_truncated == 0)
		KM_INFO("daemon", "partition %s-%d: opened (empty)", p->topic,
			p->partition);
	else
		KM_INFO("daemon", "partition %s-%d: recovered: scanned %u batches "
			"(%llu bytes) from offset %lld, truncated %llu bytes",
			p->topic, p->partition, r->batches_scanned,
			(unsigned long long)r->bytes_scanned,
			(long long)r->recovery_point,
			(unsigned long long)r->bytes_truncated);
}

/* The transaction coordinator's records name producer ids its
 * transactions' partitions may no longer hold (R4 step 6): above them too. */
static int64_t txn_max_pid(const struct km_part *p, int64_t max_pid)
{
	int64_t m;
	int rc;

	if (!p->internal || strcmp(p->topic, KM_CONFIG_TXN_TOPIC) != 0 ||
	    p->log == NULL)
		return max_pid;
	if ((rc = km_txnlog_max_pid(p->log, &m)) < 0) {
		KM_WARN("daemon", "%s-0: producer ids not read: %s",
			KM_CONFIG_TXN_TOPIC, km_strerror(rc));
		return max_pid;
	}
	return m > max_pid ? m : max_pid;
}

/* Partition i's open answered (waited for): logged, its producer ids
 * taken into *max_pid. @return its result. */
static int open_done(struct km_daemon *d, struct km_worker_reply *r,
		     uint32_t i, int64_t *max_pid, bool *lost)
{
	struct km_part *p = &d->table.parts[i];
	int rc = km_worker_wait(d->ctl_efd, &r[i], OPEN_TIMEOUT_MS);

	if (rc < 0)
		KM_ERROR("daemon", "partition %s-%d: open: %s", p->topic,
			 p->partition, r[i].msg);
	else
		log_recovery(p, &r[i].rec);
	*lost |= rc == -ETIMEDOUT;
	*max_pid = r[i].max_pid > *max_pid ? r[i].max_pid : *max_pid;
	if (rc == 0)
		*max_pid = txn_max_pid(p, *max_pid);
	return rc;
}

/* Every partition's clean-shutdown marker taken away before any log
 * opens, the removals synced together (km_log_unmark_many): 10,000 opens
 * each syncing its directory took seconds. marks[i]: what was found. */
static int unmark_parts(struct km_daemon *d, int8_t *marks)
{
	struct km_log_unmark *u = calloc(d->table.n + 1, sizeof(*u));
	int rc;

	if (u == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < d->table.n; i++) {
		u[i].topic = d->table.parts[i].topic;
		u[i].partition = d->table.parts[i].partition;
	}
	rc = km_log_unmark_many(d->cfg->data_dir, u, d->table.n);
	if (rc < 0)
		KM_ERROR("daemon", "data.dir %s: clean-shutdown markers: %s",
			 d->cfg->data_dir, km_strerror(rc));
	for (uint32_t i = 0; rc == 0 && i < d->table.n; i++)
		marks[i] = u[i].found;
	free(u);
	return rc;
}

/* Open every log (in parallel across workers), then seed the producer id
 * allocator above every id seen. */
static int open_parts(struct km_daemon *d)
{
	struct km_worker_reply *r = calloc(d->table.n + 1, sizeof(*r));
	uint8_t (*ids)[16] = calloc(d->table.n + 1, sizeof(*ids));
	int64_t max_pid = -1;
	uint32_t posted = 0, waited = 0;
	bool lost = false;
	int rc = 0, rc2;

	int8_t *marks = calloc(d->table.n + 1, sizeof(*marks));

	if (r == NULL || ids == NULL || marks == NULL ||
	    (rc = km_daemon_topic_ids(d, ids)) < 0 ||
	    (rc = unmark_parts(d, marks)) < 0) {
		free(r);
		free(ids);
		free(marks);
		return rc < 0 ? rc : -ENOMEM;
	}
	while (rc == 0 && posted < d->table.n) {
		struct km_part *p = &d->table.parts[posted];
		struct km_log_config lc;

		km_config_log_config(d->cfg, p->topic, p->partition, &lc);
		km_daemon_configs_limits(d, posted, &lc);
		memcpy(lc.topic_id, ids[posted], sizeof(lc.topic_id));
		lc.marker = marks[posted];
		rc = km_worker_open(d->workers[p->owner], p, &lc, &r[posted]);
		/* More partitions than a worker's ring holds (1,024): an
		 * answer frees a slot, then the same partition again. */
		if (rc == KM_EWORKERQ && waited < posted)
			rc = open_done(d, r, waited++, &max_pid, &lost);
		else if (rc == 0)
			posted++;
	}
	free(ids);
	free(marks);
	/* Every posted reply is waited for, even after a failure: the
	 * workers write into r. */
	for (uint32_t i = waited; i < posted; i++) {
		rc2 = open_done(d, r, i, &max_pid, &lost);
		rc = rc ? rc : rc2;
	}
	if (!lost) /* else a worker may still write into r: leak it */
		free(r);
	if (rc == 0)
		rc = km_daemon_pid_alloc_init(&d->pids, d->cfg->data_dir,
					      max_pid);
	return rc;
}

/* A failback's source (kmirror.state `source`), else the config's. */
static int fetch_source(const struct km_daemon *d, uint32_t i,
			struct km_fetcher_config *fc)
{
	const char *s = d->mstates[i].source;
	struct km_config_addr a;

	if (s[0] != '\0') {
		if (km_daemon_parse_source(s, &a) < 0 ||
		    strlen(a.host) >= sizeof(fc->bootstrap[0].host))
			return -EINVAL;
		snprintf(fc->bootstrap[0].host, sizeof(fc->bootstrap[0].host),
			 "%s", a.host);
		fc->bootstrap[0].port = a.port;
		fc->n_bootstrap = 1;
		return 0;
	}
	for (uint32_t k = 0; k < d->cfg->bootstrap_count &&
			     k < KM_FETCHER_BOOTSTRAP_MAX; k++) {
		snprintf(fc->bootstrap[k].host, sizeof(fc->bootstrap[k].host),
			 "%s", d->cfg->bootstrap[k].host);
		fc->bootstrap[k].port = d->cfg->bootstrap[k].port;
		fc->n_bootstrap++;
	}
	return fc->n_bootstrap ? 0 : -ENOENT;
}

static int fetcher_config(const struct km_daemon *d, uint32_t i,
			  struct km_fetcher_config *fc)
{
	const struct km_part *p = &d->table.parts[i];
	int rc;

	memset(fc, 0, sizeof(*fc));
	snprintf(fc->topic, sizeof(fc->topic), "%s", p->topic);
	fc->partition = p->partition;
	if ((rc = fetch_source(d, i, fc)) < 0)
		return rc;
	fc->max_wait_ms = (int32_t)d->cfg->fetch_wait_ms_max;
	fc->max_bytes = (int32_t)d->cfg->fetch_bytes_max;
	fc->batch_bytes_max = d->cfg->batch_bytes_max;
	fc->offset_reset_earliest =
		d->cfg->offset_reset == KM_CONFIG_RESET_EARLIEST;
	fc->unavailable_ms = d->cfg->source_unavailable_ms;
	fc->retry_attempt = d->retries[i].attempts != 0;
	km_daemon_source_fill(d, i, fc);
	km_daemon_throttle_fill(d, p->topic, fc);
	return 0;
}

int km_daemon_start_fetch(struct km_daemon *d, uint32_t i)
{
	struct km_part *p = &d->table.parts[i];
	struct km_fetcher_config fc;
	struct km_worker_reply r;
	int rc;

	if ((rc = fetcher_config(d, i, &fc)) < 0 ||
	    (rc = km_worker_fetch(d->workers[p->owner], p, &fc, &r)) < 0 ||
	    (rc = km_worker_wait(d->ctl_efd, &r, REPLY_TIMEOUT_MS)) < 0)
		KM_ERROR("daemon", "partition %s-%d: fetch: %s", p->topic,
			 p->partition, km_strerror(rc));
	return rc;
}

/* Partition i's fetch answered (waited for), its failure logged. */
static int fetch_done(struct km_daemon *d, struct km_worker_reply *r,
		      uint32_t i, bool *lost)
{
	const struct km_part *p = &d->table.parts[i];
	int rc = km_worker_wait(d->ctl_efd, r, REPLY_TIMEOUT_MS);

	if (rc < 0)
		KM_ERROR("daemon", "partition %s-%d: fetch: %s", p->topic,
			 p->partition, km_strerror(rc));
	*lost |= rc == -ETIMEDOUT;
	return rc;
}

/* Post partition i's fetch; a full worker ring (1,024) first takes the
 * oldest answer, as open_parts does. */
static int post_fetch(struct km_daemon *d, uint32_t i,
		      struct km_worker_reply *r, const uint32_t *idx,
		      uint32_t posted, uint32_t *waited, bool *lost)
{
	struct km_part *p = &d->table.parts[i];
	struct km_fetcher_config fc;
	int rc = fetcher_config(d, i, &fc);

	if (rc < 0) {
		KM_ERROR("daemon", "partition %s-%d: fetch: %s", p->topic,
			 p->partition, km_strerror(rc));
		return rc;
	}
	while ((rc = km_worker_fetch(d->workers[p->owner], p, &fc,
				     &r[posted])) == KM_EWORKERQ &&
	       *waited < posted) {
		rc = fetch_done(d, &r[*waited], idx[*waited], lost);
		(*waited)++;
		if (rc < 0)
			return rc;
	}
	return rc;
}

/* Every fetch posted before the answers are waited for: one at a time,
 * each wait napped a millisecond on the shared eventfd, 10 s for 10,000
 * partitions. */
static int start_fetchers(struct km_daemon *d)
{
	struct km_worker_reply *r = calloc(d->table.n + 1, sizeof(*r));
	uint32_t *idx = calloc(d->table.n + 1, sizeof(*idx));
	uint32_t posted = 0, waited = 0;
	bool lost = false;
	int rc = r != NULL && idx != NULL ? 0 : -ENOMEM;

	for (uint32_t i = 0; rc == 0 && i < d->table.n; i++)
		if (d->mirrored[i] && d->mstates[i].state == KM_MSTATE_MIRRORING &&
		    !km_daemon_disk_hold(d, i) &&
		    (rc = post_fetch(d, i, r, idx, posted, &waited, &lost)) == 0)
			idx[posted++] = i;
	for (; waited < posted; waited++) {
		int rc2 = fetch_done(d, &r[waited], idx[waited], &lost);

		rc = rc ? rc : rc2;
	}
	if (!lost) /* else a worker may still write into r: leak it */
		free(r);
	free(idx);
	if (d->disk_low)
		KM_WARN("daemon", "mirroring held: %" PRIu64 " bytes free on "
			"data.dir, under disk.free.min.bytes=%" PRIu64,
			d->disk_free, d->cfg->disk_free_min_bytes);
	return rc;
}

static int write_port_file(const struct km_daemon *d)
{
	char buf[16];
	int n = snprintf(buf, sizeof(buf), "%u\n", d->kafka_port);
	int fd = open(d->cfg->data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return -errno;
	rc = km_file_write_atomic(fd, KM_DAEMON_PORT_FILE, buf, (size_t)n);
	close(fd);
	return rc;
}

/* One listener as the front end takes it: its name, protocol, the
 * address it is advertised at, and TLS for SSL and SASL_SSL. */
static void fe_listener(const struct km_daemon *d,
			const struct km_config_listener *l,
			struct km_frontend_listener *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", l->name);
	out->protocol = (enum km_secproto)l->protocol;
	snprintf(out->advertised_host, sizeof(out->advertised_host), "%s",
		 l->advertised.host);
	out->advertised_port = l->advertised.port;
	if (l->protocol == KM_SEC_SSL || l->protocol == KM_SEC_SASL_SSL)
		out->tls = &d->lsn_sec;
}

/* A Kafka listener, on worker 0. A failure names the host as
 * configured: a name that does not resolve is not "0.0.0.0", and the
 * operator must see which key to fix. */
static int start_one_listener(struct km_daemon *d, uint32_t i)
{
	const struct km_config_listener *l = &d->cfg->listeners[i];
	const char *shown = l->addr.host[0] ? l->addr.host : "0.0.0.0";
	char ip[64] = "0.0.0.0", why[KM_RESOLVE_WHY_BYTES] = "";
	struct km_frontend_listener fl;
	struct km_worker_reply r;
	int rc = 0;

	fe_listener(d, l, &fl);
	if (l->addr.host[0] != '\0')
		rc = km_resolve_ipv4_why(l->addr.host, ip, sizeof(ip), why,
					 sizeof(why));
	if (rc == 0 && (rc = km_worker_listen_as(d->workers[0], &fl, ip,
						 l->addr.port, &r)) == 0)
		rc = km_worker_wait(d->ctl_efd, &r, REPLY_TIMEOUT_MS);
	if (rc < 0) {
		KM_ERROR("daemon", "listeners %s:%u: %s", shown, l->addr.port,
			 why[0] ? why : km_strerror(rc));
		return rc;
	}
	d->listener_ports[i] = r.port;
	KM_INFO("daemon", "Kafka API on %s://%s:%u (%s; cluster id %s, node "
		"%d)", l->name, ip, r.port, km_secproto_name(fl.protocol),
		d->cfg->cluster_id, d->cfg->node_id);
	return 0;
}

/* Every listener; the primary one (config.h) is the port file's. */
static int start_listener(struct km_daemon *d)
{
	int rc;

	for (uint32_t i = 0; i < d->cfg->listeners_count; i++) {
		if ((rc = start_one_listener(d, i)) < 0)
			return rc;
		if (d->kafka_port == 0 && memcmp(&d->cfg->listeners[i].addr,
						 &d->cfg->listener,
						 sizeof(d->cfg->listener)) == 0)
			d->kafka_port = d->listener_ports[i];
	}
	if (d->kafka_port == 0)
		d->kafka_port = d->listener_ports[0];
	if ((rc = km_daemon_lock_update(d)) < 0)
		return rc;
	return write_port_file(d);
}

/* ---- shutdown ---------------------------------------------------------- */

static int stop_workers(struct km_daemon *d)
{
	struct km_worker_reply *r;
	int *posted, first = 0;

	if (d->workers == NULL)
		return 0;
	r = calloc(d->n_workers, sizeof(*r));
	posted = calloc(d->n_workers, sizeof(*posted));
	/* All told first: the workers close their logs in parallel. */
	for (uint32_t i = 0; r != NULL && posted != NULL && i < d->n_workers;
	     i++)
		posted[i] = d->workers[i] ? km_worker_shutdown(d->workers[i],
							       &r[i])
					  : -ENOENT;
	for (uint32_t i = 0; r != NULL && posted != NULL && i < d->n_workers;
	     i++) {
		int rc = posted[i];

		if (rc == 0)
			rc = km_worker_wait(d->ctl_efd, &r[i], SHUTDOWN_TIMEOUT_MS);
		if (rc < 0 && rc != -ENOENT) {
			KM_ERROR("daemon", "worker %u: shutdown: %s", i,
				 km_strerror(rc));
			first = first ? first : rc;
		}
	}
	for (uint32_t i = 0; i < d->n_workers; i++)
		km_worker_destroy(d->workers[i]);
	free(posted);
	free(r);
	free(d->workers);
	d->workers = NULL;
	return first;
}

static void cleanup(struct km_daemon *d)
{
	km_ctlsock_close(d->ctl);
	km_daemon_http_close(d);
	if (d->pids.dir_fd >= 0)
		km_daemon_pid_alloc_fini(&d->pids);
	if (d->ctl_efd >= 0)
		close(d->ctl_efd);
	if (d->sig_fd >= 0)
		close(d->sig_fd);
	km_daemon_configs_free(d); /* they hang off the table's parts */
	km_daemon_admin_fini(d);
	km_part_table_fini(&d->table);
	free(d->table.parts);
	free(d->mirrored);
	free(d->rates);
	free(d->caught_up_ms);
	free(d->mstates);
	free(d->sources);
	free(d->disk_holds);
	free(d->retries);
	km_daemon_groups_free(d);
	km_daemon_discover_fini(d);
	km_daemon_throttle_free(d); /* after stop_workers: they use them */
	km_tconfig_free(d->upstream); /* the same */
	d->upstream = NULL;
	km_daemon_planned_free(d);
	km_daemon_acls_free(d); /* after stop_workers: they read its tables */
}

/* ---- the control loop ---------------------------------------------------- */

static int serve(struct km_daemon *d)
{
	struct pollfd pfd[4] = {
		{ .fd = d->sig_fd, .events = POLLIN },
		{ .fd = km_ctlsock_fd(d->ctl), .events = POLLIN },
		{ .fd = d->http_fd, .events = POLLIN }, /* -1: ignored */
		{ .fd = d->admin.efd, .events = POLLIN },
	};
	struct signalfd_siginfo si;

	for (;;) {
		/* The timeout persists FAILED partitions (km_daemon_watch). */
		if (poll(pfd, 4, d->planned.token ? PLANNED_POLL_MS : WATCH_MS) < 0 &&
		    errno != EINTR)
			return -errno;
		km_daemon_watch(d);
		km_daemon_watch_sources(d);
		km_daemon_watch_disk(d);
		km_daemon_sync_groups(d);
		km_daemon_watch_paused_hw(d);
		km_daemon_discover(d);
		km_daemon_watch_lag(d);
		km_daemon_planned_step(d);
		km_daemon_sync_configs(d);
		km_daemon_acls_watch(d);
		km_daemon_admin_serve(d);
		if (pfd[0].revents & POLLIN) {
			if (read(d->sig_fd, &si, sizeof(si)) == sizeof(si))
				KM_INFO("daemon", "%s: shutting down",
					strsignal((int)si.ssi_signo));
			return 0;
		}
		if (pfd[1].revents & POLLIN)
			km_ctlsock_poll(d->ctl, 0);
		if (pfd[2].revents & POLLIN)
			km_daemon_http_serve(d);
	}
}

static int setup_fds(struct km_daemon *d)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	d->sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	d->ctl_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->sig_fd < 0 || d->ctl_efd < 0)
		return -errno;
	return 0;
}

static int prepare(struct km_daemon *d)
{
	char err[KM_CONFIG_ERR_BYTES_MAX];
	int rc;

	if (mkdir(d->cfg->data_dir, 0755) < 0 && errno != EEXIST) {
		rc = -errno;
		KM_ERROR("daemon", "data.dir %s: %s", d->cfg->data_dir,
			 km_strerror(rc));
		return rc;
	}
	/* Before meta.properties, the logs, the port file and the control
	 * socket: a second daemon must not touch any of them. */
	if ((rc = km_daemon_lock(d)) < 0)
		return rc;
	if ((rc = km_cluster_id_resolve(d->cfg, err, sizeof(err))) < 0) {
		KM_ERROR("daemon", "%s", err);
		return rc;
	}
	if ((rc = setup_fds(d)) < 0 || (rc = km_daemon_admin_init(d)) < 0)
		return rc;
	km_daemon_admin_recover(d); /* before the directories are read */
	d->n_workers = d->cfg->workers ? d->cfg->workers : 1;
	if ((rc = km_tconfig_new(&d->upstream)) < 0)
		return rc;
	return km_daemon_throttle_init(d);
}

/* net.mode=dpdk: the EAL, once, before any worker exists (its threads
 * inherit the blocked signals). The argv words stay for the process's
 * life: the EAL may keep pointers into them. */
static int eal_init(const struct km_config *cfg)
{
	static char buf[KM_CONFIG_EAL_ARGS_BYTES_MAX + 16];
	static char *argv[KM_CONFIG_EAL_ARGC_MAX + 1];
	int argc, rc;

	if (cfg->net_mode != KM_CONFIG_NET_DPDK)
		return 0;
	argc = km_config_eal_argv(cfg, "kmirrord", buf, sizeof(buf), argv,
				  KM_CONFIG_EAL_ARGC_MAX);
	if (argc < 0)
		return argc;
	if ((rc = km_dpdk_eal_init(argc, argv)) < 0) {
		KM_ERROR("daemon", "net.mode=dpdk: DPDK EAL start with dpdk.eal.args \"%s\" failed: %s (hugepages reserved? see ./kmirror setup)",
			 cfg->dpdk.eal_args, km_strerror(rc));
		return rc;
	}
	return 0;
}

static int start(struct km_daemon *d)
{
	int rc;

	if ((rc = km_daemon_security_init(d)) < 0 || (rc = prepare(d)) < 0 ||
	    (rc = km_daemon_discover_init(d)) < 0 ||
	    (rc = km_daemon_find_parts(d)) < 0 ||
	    (rc = km_daemon_load_states(d)) < 0 ||
	    (rc = km_daemon_load_sources(d)) < 0 ||
	    (rc = km_daemon_disk_init(d)) < 0 ||
	    (rc = km_daemon_retry_init(d)) < 0 ||
	    (rc = km_daemon_configs_init(d)) < 0 ||
	    (rc = km_daemon_acls_init(d)) < 0 || (rc = eal_init(d->cfg)) < 0 ||
	    (rc = km_daemon_scale_init(d)) < 0)
		return rc;
	KM_INFO("daemon", "cluster id %s; %u partitions on %u workers",
		d->cfg->cluster_id, d->table.n, d->n_workers);
	if ((rc = start_workers(d)) < 0 || (rc = open_parts(d)) < 0 ||
	    (rc = km_daemon_record_roles(d)) < 0 ||
	    (rc = km_daemon_resume_stops(d)) < 0 ||
	    (rc = km_daemon_resume_prepares(d)) < 0 ||
	    (rc = km_daemon_ctl_open(d)) < 0 ||
	    (rc = km_daemon_http_open(d)) < 0 || (rc = start_listener(d)) < 0)
		return rc;
	km_daemon_refuse_loops(d);
	return start_fetchers(d);
}

int km_daemon_run(struct km_config *cfg)
{
	struct km_daemon d = { .cfg = cfg, .lock_fd = -1, .ctl_efd = -1,
			       .sig_fd = -1, .pids = { .dir_fd = -1 },
			       .http_fd = -1, .admin.efd = -1 };
	int rc, rc2;

	km_log_set_level(cfg->log_level);
	d.started_ms = km_daemon_now_ms();
	rc = start(&d);
	if (rc == 0) {
		KM_INFO("daemon", "serving");
		rc = serve(&d);
	} else if (rc == KM_ESHUTDOWN) {
		rc = 0;
	}
	rc2 = stop_workers(&d);
	if (rc2 == 0 && rc == 0)
		KM_INFO("daemon", "stopped cleanly");
	cleanup(&d);
	km_daemon_security_free(&d); /* after the workers that used it */
	km_dpdk_eal_cleanup();
	km_daemon_unlock(&d); /* last: every file in data.dir is closed */
	return rc ? rc : rc2;
}
