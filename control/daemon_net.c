/* The fetch network in status and metrics (issue 6, observability): per
 * worker its backend's counters (with net.mode=dpdk the port's: frames,
 * bytes, drops, misses, retransmits, out-of-order pieces) and per fetch
 * session its connection's (bytes, packets, retransmits, out-of-order).
 * Figures are the workers' last published ones (each tick). */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "control/daemon_pvt.h"

/* How a worker's frames reach its queue: the port's flow rules, or the
 * port's spreading corrected by the workers (software), or one queue. */
static const char *steering(const struct km_worker_net *n)
{
	if (!n->dpdk || n->net.queues < 2)
		return "none";
	return n->net.flow_rules ? "flow-rules" : "software";
}

static json_t *steer_fields(const struct km_worker_net *n)
{
	const struct km_net_stats *s = &n->net;

	return json_pack("{s:i, s:s, s:I, s:I, s:I}", "queue", (int)s->queue,
			 "steering", steering(n),
			 "steered_out", (json_int_t)s->steered_out,
			 "steered_in", (json_int_t)s->steered_in,
			 "steer_drops", (json_int_t)s->steer_drops);
}

static json_t *port_row(uint32_t w, const struct km_worker_net *n)
{
	const struct km_net_stats *s = &n->net;
	json_t *row = json_pack("{s:i, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			 "worker", (int)w, "backend", n->dpdk ? "dpdk" : "kernel",
			 "bytes_in", (json_int_t)s->bytes_in,
			 "bytes_out", (json_int_t)s->bytes_out,
			 "frames_in", (json_int_t)s->frames_in,
			 "frames_out", (json_int_t)s->frames_out,
			 "dropped", (json_int_t)s->frames_dropped,
			 "tx_dropped", (json_int_t)s->tx_dropped,
			 "rx_missed", (json_int_t)s->rx_missed,
			 "retransmits", (json_int_t)s->retransmits,
			 "out_of_order", (json_int_t)s->out_of_order);

	if (row != NULL && n->dpdk)
		json_object_update_new(row, steer_fields(n));
	/* Clients accepted on the port (a DPDK listener), and reset for
	 * want of a connection slot. */
	if (row != NULL && n->dpdk)
		json_object_update_new(row, json_pack("{s:I, s:I, s:I, s:I}",
			"accepts", (json_int_t)s->accepts,
			"accepts_refused", (json_int_t)s->accepts_refused,
			"poll_busy_us", (json_int_t)s->poll_busy_us,
			"poll_idle_us", (json_int_t)s->poll_idle_us));
	return row;
}

static json_t *conn_row(uint32_t w, const struct km_fsess_pool_conn *c)
{
	return json_pack("{s:i, s:s, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I}",
			 "worker", (int)w, "peer", c->peer,
			 "fetch_session_id", (int)c->fetch_session_id,
			 "fetch_session_epoch", (int)c->fetch_session_epoch,
			 "bytes_in", (json_int_t)c->st.bytes_in,
			 "bytes_out", (json_int_t)c->st.bytes_out,
			 "packets_in", (json_int_t)c->st.recvs,
			 "packets_out", (json_int_t)c->st.sends,
			 "retransmits", (json_int_t)c->st.retransmits,
			 "out_of_order", (json_int_t)c->st.out_of_order);
}

/* The Kafka listener's clients and what their requests hold of its
 * receive pool (dataplane/serve/frontend_rx.c). */
static json_t *listener_row(uint32_t w, const struct km_worker_net *n)
{
	const struct km_frontend_stats *s = &n->fe;

	json_t *row = json_pack("{s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:i, s:i}",
			 "worker", (int)w, "clients", (int)s->conns,
			 "fetch_sessions", (int)s->fetch_sessions,
			 "accepts", (json_int_t)s->accepts,
			 "refused", (json_int_t)s->refused,
			 "protocol_errors", (json_int_t)s->protocol_errors,
			 "request_timeouts", (json_int_t)s->request_timeouts,
			 "rx_waits", (json_int_t)s->rx_waits,
			 "rx_compactions", (json_int_t)s->rx_compactions,
			 "rx_bufs_charged", (int)s->rx_bufs_charged,
			 "rx_bufs_held", (int)n->fe_net.rx_bufs_held,
			 "rx_bufs_total", (int)n->fe_net.rx_bufs_total);

	if (row != NULL)
		json_object_update_new(row, json_pack(
			"{s:I, s:I, s:I, s:I, s:I, s:I}",
			"sasl_authentications", (json_int_t)s->sasl_auth_ok,
			"sasl_reauthentications", (json_int_t)s->sasl_reauth_ok,
			"sasl_failed_authentications", (json_int_t)s->sasl_auth_failed,
			"sasl_expired_connections_killed", (json_int_t)s->sasl_expired,
			"sasl_users_file_reloads", (json_int_t)s->sasl_users_reloads,
			"sasl_users_file_errors", (json_int_t)s->sasl_users_errors));
	return row;
}

void km_daemon_net_status(struct km_daemon *d, json_t *resp)
{
	json_t *ports = json_array(), *conns = json_array();
	json_t *lsn = json_array();
	struct km_worker_net *n = malloc(sizeof(*n));

	for (uint32_t w = 0; n != NULL && w < d->n_workers; w++) {
		km_worker_net_snapshot(d->workers[w], n);
		json_array_append_new(ports, port_row(w, n));
		for (uint32_t i = 0; i < n->n_conns; i++)
			json_array_append_new(conns, conn_row(w, &n->conns[i]));
		if (n->listener)
			json_array_append_new(lsn, listener_row(w, n));
	}
	free(n);
	json_object_set_new(resp, "net", ports);
	json_object_set_new(resp, "connections", conns);
	json_object_set_new(resp, "listener", lsn);
}

#define NET_METRIC(f, name, help) { offsetof(struct km_net_stats, f), name, help }
static const struct {
	size_t off;
	const char *name, *help;
} port_metrics[] = {
	NET_METRIC(bytes_in, "kmirror_net_bytes_in_total", "Bytes received by the worker's fetch network."),
	NET_METRIC(bytes_out, "kmirror_net_bytes_out_total", "Bytes sent by the worker's fetch network."),
	NET_METRIC(frames_in, "kmirror_net_port_frames_in_total", "Frames taken off the DPDK port."),
	NET_METRIC(frames_out, "kmirror_net_port_frames_out_total", "Frames the DPDK port accepted."),
	NET_METRIC(frames_dropped, "kmirror_net_port_dropped_total", "Malformed or unexpected frames, counted and dropped."),
	NET_METRIC(rx_missed, "kmirror_net_port_rx_missed_total", "Frames the port missed (no descriptor or mbuf)."),
	NET_METRIC(retransmits, "kmirror_net_retransmits_total", "TCP segments sent again (DPDK mode)."),
	NET_METRIC(out_of_order, "kmirror_net_out_of_order_total", "Payload pieces queued out of order (DPDK mode)."),
	NET_METRIC(steered_out, "kmirror_net_steered_out_total", "Frames this worker's queue took for another worker's queue and passed on (DPDK mode)."),
	NET_METRIC(steered_in, "kmirror_net_steered_in_total", "Frames other workers' queues passed to this worker (DPDK mode)."),
	NET_METRIC(steer_drops, "kmirror_net_steer_drops_total", "Frames lost passing them between queues: ring full or no mbuf (DPDK mode)."),
	NET_METRIC(poll_busy_us, "kmirror_net_poll_busy_microseconds_total", "Time in DPDK port polls that found work (DPDK mode)."),
	NET_METRIC(poll_idle_us, "kmirror_net_poll_idle_microseconds_total", "Time in DPDK port polls that found nothing: the poller's burn (DPDK mode)."),
};

/* One counter per worker: the uint64_t at off in struct km_worker_net;
 * the listener's only on the worker that has it. */
static void counter(FILE *f, const char *name, const char *help,
		    const struct km_worker_net *nets, uint32_t n_workers,
		    size_t off, bool listener)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
	for (uint32_t w = 0; w < n_workers; w++) {
		uint64_t v;

		if (listener && !nets[w].listener)
			continue;
		memcpy(&v, (const char *)&nets[w] + off, sizeof(v));
		if (listener)
			fprintf(f, "%s{worker=\"%u\"} %" PRIu64 "\n", name, w, v);
		else
			fprintf(f, "%s{worker=\"%u\",backend=\"%s\"} %" PRIu64
				"\n", name, w, nets[w].dpdk ? "dpdk" : "kernel", v);
	}
}

static void conn_metrics(FILE *f, const struct km_worker_net *nets,
			 uint32_t n_workers)
{
	static const char *const names[] = {
		"kmirror_fetch_conn_bytes_in_total", "kmirror_fetch_conn_packets_in_total",
		"kmirror_fetch_conn_retransmits_total", "kmirror_fetch_conn_out_of_order_total",
	};

	for (size_t m = 0; m < sizeof(names) / sizeof(names[0]); m++) {
		fprintf(f, "# HELP %s Per fetch-session connection.\n# TYPE %s counter\n",
			names[m], names[m]);
		for (uint32_t w = 0; w < n_workers; w++)
			for (uint32_t i = 0; i < nets[w].n_conns; i++) {
				const struct km_net_conn_stats *s = &nets[w].conns[i].st;
				uint64_t v = m == 0 ? s->bytes_in : m == 1 ? s->recvs
					     : m == 2 ? s->retransmits : s->out_of_order;

				fprintf(f, "%s{worker=\"%u\",peer=\"%s\"} %" PRIu64 "\n",
					names[m], w, nets[w].conns[i].peer, v);
			}
	}
}

#define FE_METRIC(f, name, help) { offsetof(struct km_frontend_stats, f), name, help }
static const struct {
	size_t off;
	const char *name, *help;
} fe_metrics[] = {
	FE_METRIC(protocol_errors, "kmirror_listener_protocol_errors_total", "Client connections closed for a malformed or oversized request."),
	FE_METRIC(request_timeouts, "kmirror_listener_request_timeouts_total", "Client connections closed for a request not whole within listener.request.timeout.ms."),
	FE_METRIC(rx_waits, "kmirror_listener_rx_waits_total", "Requests that waited for the listener's receive buffers."),
	FE_METRIC(refused, "kmirror_listener_refused_total", "Client connections reset at accept: too many open."),
	FE_METRIC(sasl_auth_ok, "kmirror_listener_sasl_authentications_total", "SASL authentications that succeeded on the listener, re-authentications included."),
	FE_METRIC(sasl_reauth_ok, "kmirror_listener_sasl_reauthentications_total", "SASL re-authentications (KIP-368) that succeeded on the listener."),
	FE_METRIC(sasl_auth_failed, "kmirror_listener_sasl_failed_authentications_total", "SASL authentications refused (wrong credentials, a mechanism not enabled); the connection was closed."),
	FE_METRIC(sasl_expired, "kmirror_listener_sasl_expired_connections_killed_total", "Connections closed for a request after their SASL session expired (connections.max.reauth.ms)."),
	FE_METRIC(sasl_users_errors, "kmirror_listener_sasl_users_file_errors_total", "Times a changed sasl.users.file was refused (the users read before stay)."),
	FE_METRIC(fetch_full, "kmirror_listener_fetch_sessions_created_total", "Full Fetches that opened a KIP-227 fetch session."),
	FE_METRIC(fetch_incremental, "kmirror_listener_fetch_incremental_total", "Incremental Fetches served in a fetch session (only the partitions that changed answered)."),
	FE_METRIC(fetch_sessionless, "kmirror_listener_fetch_sessionless_total", "Fetches served without a fetch session (below v7, epoch -1, no slot, or a partition not here)."),
	FE_METRIC(fetch_session_errors, "kmirror_listener_fetch_session_errors_total", "Fetches answered FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH."),
	FE_METRIC(fetch_sessions_evicted, "kmirror_listener_fetch_sessions_evicted_total", "Fetch sessions evicted for a new one (max.incremental.fetch.session.cache.slots)."),
};

#define FS_METRIC(f, name, help) { offsetof(struct km_fsess_stats, f), name, help }
static const struct {
	size_t off;
	const char *name, *help;
} fsess_metrics[] = {
	FS_METRIC(fetch_partitions, "kmirror_fetch_request_partitions_total", "Partitions written into the Fetch requests sent to the source (an incremental Fetch writes only those that changed)."),
	FS_METRIC(fetch_forgotten, "kmirror_fetch_forgotten_partitions_total", "Partitions dropped from the source's fetch session by incremental Fetches (ForgottenTopicsData)."),
	FS_METRIC(fetch_session_errors, "kmirror_fetch_session_errors_total", "Fetches the source answered FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH or FETCH_SESSION_TOPIC_ID_ERROR (a new session follows)."),
	FS_METRIC(fetch_sessionless, "kmirror_fetch_sessionless_total", "Full Fetches the source answered without a fetch session (no free slot)."),
};

/* Fetches to the source by kind (KIP-227), then the session counters. */
static void fsess_counters(FILE *f, const struct km_worker_net *nets,
			   uint32_t n_workers)
{
	static const char *name = "kmirror_fetch_requests_total";

	fprintf(f, "# HELP %s Fetch requests sent to the source: full (every "
		"partition) or incremental (KIP-227 fetch session).\n# TYPE %s "
		"counter\n", name, name);
	for (uint32_t w = 0; w < n_workers; w++) {
		const struct km_fsess_stats *s = &nets[w].fpool.sum;

		fprintf(f, "%s{worker=\"%u\",kind=\"full\"} %" PRIu64 "\n",
			name, w, s->fetch_full);
		fprintf(f, "%s{worker=\"%u\",kind=\"incremental\"} %" PRIu64
			"\n", name, w, s->fetch_incremental);
	}
	for (size_t m = 0; m < sizeof(fsess_metrics) / sizeof(fsess_metrics[0]); m++)
		counter(f, fsess_metrics[m].name, fsess_metrics[m].help, nets,
			n_workers, offsetof(struct km_worker_net, fpool) +
			offsetof(struct km_fsess_pool_stats, sum) +
			fsess_metrics[m].off, false);
}

char *km_daemon_net_metrics(struct km_daemon *d)
{
	struct km_worker_net *nets = calloc(d->n_workers ? d->n_workers : 1, sizeof(*nets));
	char *buf = NULL;
	size_t len = 0;
	FILE *f = nets ? open_memstream(&buf, &len) : NULL;

	if (f == NULL) {
		free(nets);
		return NULL;
	}
	for (uint32_t w = 0; w < d->n_workers; w++)
		km_worker_net_snapshot(d->workers[w], &nets[w]);
	for (size_t m = 0; m < sizeof(port_metrics) / sizeof(port_metrics[0]); m++)
		counter(f, port_metrics[m].name, port_metrics[m].help, nets,
			d->n_workers,
			offsetof(struct km_worker_net, net) + port_metrics[m].off,
			false);
	conn_metrics(f, nets, d->n_workers);
	fsess_counters(f, nets, d->n_workers);
	/* Issue 17: work at the ticks follows events, not the partitions. */
	counter(f, "kmirror_worker_partition_visits_total",
		"Partitions the worker visited at its ticks (flush by time, "
		"retention, figures): those something happened to, and each "
		"partition once a second.", nets, d->n_workers,
		offsetof(struct km_worker_net, part_visits), false);
	counter(f, "kmirror_fetch_watchdog_passes_total",
		"Passes of the fetch sessions' stall watchdog over their "
		"partitions: after an error or a state change, or at a deadline.",
		nets, d->n_workers, offsetof(struct km_worker_net, fetch_looks),
		false);
	for (size_t m = 0; m < sizeof(fe_metrics) / sizeof(fe_metrics[0]); m++)
		counter(f, fe_metrics[m].name, fe_metrics[m].help, nets,
			d->n_workers,
			offsetof(struct km_worker_net, fe) + fe_metrics[m].off, true);
	fclose(f);
	free(nets);
	return buf;
}
