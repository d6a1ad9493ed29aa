/* DPDK network backend (KM_NET_DPDK): the km_net ops over one queue pair of
 * a DPDK port and kmirror's TCP endpoint (dataplane/net/tcp/tcp.h).
 *
 * Mapping. A km_net connection is a struct dconn bound to one endpoint
 * connection (km_tcp_conn, whose user pointer is the dconn). Everything the
 * endpoint reports (connected, data, FIN, end) comes from km_tcp_input_
 * burst_end() or km_tcp_poll(), which run only inside km_net_poll(), so the
 * user callbacks run from the worker's poll loop as net.h promises.
 *
 * Receive is zero copy: the endpoint delivers segments of the received
 * mbufs with their buffer ids (an id per mbuf, fixed when the pool is
 * made); km_net_release() hands them to km_tcp_release(), which reopens the
 * window and frees each mbuf segment (rte_pktmbuf_free_seg).
 *
 * Send: km_net_send() queues the caller's iovecs; they are copied into the
 * endpoint's send ring as it has room (now, and again on each ACK), and a
 * send's callback runs from the next km_net_poll() once all of it is
 * copied.
 *
 * Listeners (dnet_listen.c): the endpoint's passive opens; an accepted
 * connection is a dconn like an active one from then on.
 *
 * Ends. The peer's FIN ends the km_net connection at once (on_close(0)):
 * the endpoint finishes the TCP close on its own (our FIN, LAST-ACK), the
 * connection detached from any dconn, so the slot is free for a reconnect.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <rte_cycles.h>

#include "common/clock.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "dataplane/net/dpdk/dnet_pvt.h"

/* The endpoint asks the time for every frame: it gets the time the poll
 * began (and everything outside a poll runs right after one, in the same
 * worker turn). Its timers count milliseconds; a clock read per frame was
 * 6% of a worker's time. */
static uint64_t dnet_now_ms(void *ctx)
{
	const struct dnet *dn = ctx;

	return dn->now_ms;
}

/* ---- connection slots --------------------------------------------------- */

struct dconn *km_dnet_conn_alloc(struct dnet *dn)
{
	struct dconn *dc = dn->free_conns;

	if (dc == NULL)
		return NULL;
	dn->free_conns = dc->next_free;
	dn->conns_used++;
	dc->state = DC_CONNECTING;
	dc->close_req = dc->fin_sent = dc->aborting = dc->ending = false;
	dc->sq_head = dc->sq_count = dc->sq_taken = 0;
	dc->iov_head = dc->iov_count = dc->cur_iov = dc->cur_off = 0;
	memset(&dc->st, 0, sizeof(dc->st));
	return dc;
}

void km_dnet_set_want(struct dnet *dn, struct dconn *dc, bool on)
{
	if (dc->want == on)
		return;
	dc->want = on;
	if (on)
		dn->want_count++;
	else
		dn->want_count--;
}

static void conn_free(struct dnet *dn, struct dconn *dc)
{
	if (dc->tc != NULL)
		km_tcp_conn_set_user(dc->tc, NULL);
	km_dnet_set_want(dn, dc, false);
	dc->tc = NULL;
	dc->state = DC_FREE;
	dc->next_free = dn->free_conns;
	dn->free_conns = dc;
	dn->conns_used--;
}

/* ---- sends -------------------------------------------------------------- */

static struct dsend *sq_at(const struct dnet *dn, const struct dconn *dc,
			   uint32_t k)
{
	return &dc->sq[(dc->sq_head + k) % dn->cfg.send_queue_max];
}

/* Gather the untaken rest of send s from the progress point. */
static uint32_t gather(const struct dnet *dn, const struct dconn *dc,
		       const struct dsend *s, struct iovec *out)
{
	uint32_t n = 0;

	for (uint32_t k = dc->cur_iov; k < s->n_iov && n < DNET_SEND_GATHER;
	     k++) {
		const struct iovec *v =
			&dc->iov[(s->iov_first + k) % dn->cfg.send_iov_max];
		uint32_t skip = k == dc->cur_iov ? dc->cur_off : 0;

		out[n].iov_base = (char *)v->iov_base + skip;
		out[n].iov_len = v->iov_len - skip;
		n++;
	}
	return n;
}

static void advance(const struct dnet *dn, struct dconn *dc,
		    const struct dsend *s, size_t taken)
{
	while (taken > 0) {
		const struct iovec *v =
			&dc->iov[(s->iov_first + dc->cur_iov) %
				 dn->cfg.send_iov_max];
		size_t left = v->iov_len - dc->cur_off;

		if (taken < left) {
			dc->cur_off += (uint32_t)taken;
			return;
		}
		taken -= left;
		dc->cur_iov++;
		dc->cur_off = 0;
	}
}

/* Copy queued sends into the endpoint while it has room. */
static void feed(struct dnet *dn, struct dconn *dc)
{
	struct iovec v[DNET_SEND_GATHER];

	while (dc->sq_taken < dc->sq_count && !dc->aborting && !dc->ending) {
		struct dsend *s = sq_at(dn, dc, dc->sq_taken);
		uint32_t n = gather(dn, dc, s, v);
		ssize_t r = n > 0 ? km_tcp_send(dc->tc, v, n) : 0;

		if (r < 0)
			break; /* -EAGAIN: on the next ACK; -EPIPE: ending */
		advance(dn, dc, s, (size_t)r);
		if (dc->cur_iov == s->n_iov) {
			dc->sq_taken++;
			dc->cur_iov = dc->cur_off = 0;
		}
	}
	if (dc->close_req && !dc->fin_sent && dc->sq_taken == dc->sq_count &&
	    !dc->aborting) {
		dc->fin_sent = true;
		km_tcp_close(dc->tc);
	}
}

/* Pop the oldest send and run its callback with res. */
static void pop_send(struct dnet *dn, struct dconn *dc, int res)
{
	struct dsend s = *sq_at(dn, dc, 0);

	dc->sq_head = (dc->sq_head + 1) % dn->cfg.send_queue_max;
	dc->sq_count--;
	dc->iov_head = (dc->iov_head + s.n_iov) % dn->cfg.send_iov_max;
	dc->iov_count -= s.n_iov;
	if (res > 0) {
		dc->st.bytes_out += (uint64_t)res;
		dc->st.sends++;
		dn->st.bytes_out += (uint64_t)res;
		dn->st.sends++;
	}
	if (s.fn != NULL)
		s.fn(&dc->pub, s.arg, res);
}

/* Callbacks of the sends copied whole (bounded by send_queue_max). */
static int report_sent(struct dnet *dn, struct dconn *dc)
{
	int n = 0;

	while (dc->sq_taken > 0 && dc->state != DC_FREE) {
		dc->sq_taken--;
		pop_send(dn, dc, (int)sq_at(dn, dc, 0)->total);
		n++;
	}
	return n;
}

/* The connection is ending: sends already copied report their total, the
 * others -ECANCELED (net.h), all before on_close/on_connect. */
static void fail_sends(struct dnet *dn, struct dconn *dc)
{
	dc->ending = true;
	report_sent(dn, dc);
	while (dc->sq_count > 0)
		pop_send(dn, dc, -ECANCELED);
}

/* Service the connections with work: feed the endpoint, report sends.
 * Bounded by conns_max. A callback may queue more (want is set again). */
static int service(struct dnet *dn)
{
	int n = 0;

	for (uint32_t i = 0; i < dn->cfg.conns_max && dn->want_count > 0; i++) {
		struct dconn *dc = &dn->conns[i];

		if (!dc->want)
			continue;
		km_dnet_set_want(dn, dc, false);
		if (dc->state != DC_FREE)
			feed(dn, dc);
		n += report_sent(dn, dc);
	}
	return n;
}

/* ---- endpoint callbacks ------------------------------------------------- */

void km_dnet_deliver(void *ctx, struct km_tcp_conn *tc,
		  const struct km_chain *data, const uint32_t *ids)
{
	struct dnet *dn = ctx;
	struct dconn *dc = km_tcp_conn_user(tc);
	uint64_t bytes = 0;

	for (uint32_t i = 0; i < data->n_iov; i++)
		bytes += data->iov[i].iov_len;
	dn->st.bytes_in += bytes;
	dn->st.recvs++;
	if (dc == NULL || dc->ending || dc->pub.h->on_recv == NULL) {
		km_tcp_release(dn->ep, ids, data->n_iov);
		return;
	}
	dc->st.bytes_in += bytes;
	dc->st.recvs++;
	dc->pub.h->on_recv(&dc->pub, data, ids);
}

static void on_connected(struct dnet *dn, struct dconn *dc, int res)
{
	const struct km_net_handler *h = dc->pub.h;

	if (res == 0) {
		dn->st.connects++;
		dc->state = DC_OPEN;
		km_dnet_set_want(dn, dc, true);
		if (h->on_connect != NULL)
			h->on_connect(&dc->pub, 0);
		return;
	}
	dn->st.connect_errors++;
	fail_sends(dn, dc);
	dc->tc = NULL; /* the endpoint's handle is dead */
	if (h->on_connect != NULL)
		h->on_connect(&dc->pub, res);
	conn_free(dn, dc);
}

/* The km_net connection ends with reason; the endpoint connection (if it
 * still lives) finishes on its own, detached. */
static void on_end(struct dnet *dn, struct dconn *dc, int reason)
{
	const struct km_net_handler *h = dc->pub.h;

	fail_sends(dn, dc);
	dn->st.closes++;
	if (reason == -ECONNRESET)
		dn->st.resets++;
	else if (reason < 0 && reason != -ECONNABORTED && reason != -ETIMEDOUT)
		dn->st.errors++;
	km_tcp_conn_set_user(dc->tc, NULL);
	if (h->on_close != NULL)
		h->on_close(&dc->pub, reason);
	conn_free(dn, dc);
}

void km_dnet_event(void *ctx, struct km_tcp_conn *tc, enum km_tcp_event ev,
		int res)
{
	struct dnet *dn = ctx;
	struct dconn *dc = km_tcp_conn_user(tc);

	if (dc == NULL)
		return; /* detached: its km_net end was reported */
	switch (ev) {
	case KM_TCP_EV_CONNECTED:
		on_connected(dn, dc, res);
		break;
	case KM_TCP_EV_SENT:
		feed(dn, dc);
		if (dc->sq_taken > 0)
			km_dnet_set_want(dn, dc, true);
		break;
	case KM_TCP_EV_PEER_FIN:
		/* Like the kernel backend on EOF: the connection is over for
		 * its user; our FIN follows what is already queued. */
		if (!dc->fin_sent && !dc->aborting) {
			dc->fin_sent = true;
			km_tcp_close(tc);
		}
		on_end(dn, dc, 0);
		break;
	case KM_TCP_EV_CLOSED:
		on_end(dn, dc, res);
		break;
	}
}

/* ---- ops ---------------------------------------------------------------- */

static int dnet_connect(struct km_net *net, const char *ipv4, uint16_t port,
			const struct km_net_handler *h, void *ctx,
			struct km_net_conn **out)
{
	struct dnet *dn = km_container_of(net, struct dnet, pub);
	struct in_addr a;
	struct dconn *dc;
	int rc;

	if (inet_pton(AF_INET, ipv4, &a) != 1 || port == 0)
		return -EINVAL;
	if ((dc = km_dnet_conn_alloc(dn)) == NULL)
		return -ENOBUFS;
	dc->pub.h = h;
	dc->pub.ctx = ctx;
	rc = km_tcp_connect(dn->ep, ntohl(a.s_addr), port, dc, &dc->tc);
	if (rc < 0) {
		dc->tc = NULL;
		conn_free(dn, dc);
		return rc;
	}
	*out = &dc->pub;
	return 0;
}

static int dnet_send(struct km_net_conn *c, const struct iovec *iov,
		     uint32_t n_iov, km_net_sent_fn fn, void *arg)
{
	struct dconn *dc = km_container_of(c, struct dconn, pub);
	struct dnet *dn = km_container_of(c->net, struct dnet, pub);
	uint64_t total = 0;
	struct dsend *s;

	if (n_iov == 0 || n_iov > dn->cfg.send_iov_max)
		return -EINVAL;
	for (uint32_t i = 0; i < n_iov; i++)
		total += iov[i].iov_len;
	if (total == 0 || total > INT32_MAX)
		return -EINVAL;
	if (dc->close_req || dc->aborting || dc->ending)
		return -EPIPE;
	if (dc->sq_count == dn->cfg.send_queue_max ||
	    dc->iov_count + n_iov > dn->cfg.send_iov_max) {
		dn->st.send_queue_full++;
		return -EAGAIN;
	}
	s = sq_at(dn, dc, dc->sq_count);
	*s = (struct dsend){ fn, arg, (uint32_t)total,
			     (dc->iov_head + dc->iov_count) % dn->cfg.send_iov_max,
			     n_iov };
	for (uint32_t i = 0; i < n_iov; i++)
		dc->iov[(s->iov_first + i) % dn->cfg.send_iov_max] = iov[i];
	dc->iov_count += n_iov;
	dc->sq_count++;
	feed(dn, dc);
	km_dnet_set_want(dn, dc, true);
	return 0;
}

static void dnet_release(struct km_net *net, const uint32_t *ids, uint32_t n)
{
	struct dnet *dn = km_container_of(net, struct dnet, pub);

	km_tcp_release(dn->ep, ids, n);
}

static void dnet_abort(struct km_net_conn *c)
{
	struct dconn *dc = km_container_of(c, struct dconn, pub);

	if (dc->aborting || dc->ending)
		return;
	dc->aborting = true;
	km_tcp_abort(dc->tc); /* the end is reported from the next poll */
}

static int dnet_close(struct km_net_conn *c)
{
	struct dconn *dc = km_container_of(c, struct dconn, pub);
	struct dnet *dn = km_container_of(c->net, struct dnet, pub);

	if (dc->close_req || dc->aborting || dc->ending)
		return -EALREADY;
	if (dc->state == DC_CONNECTING) {
		dnet_abort(c);
		return 0;
	}
	dc->close_req = true;
	feed(dn, dc);
	return 0;
}

static uint64_t tsc_us(uint64_t tsc)
{
	uint64_t hz = rte_get_tsc_hz();

	return hz == 0 ? 0 : (uint64_t)((double)tsc * 1e6 / (double)hz);
}

static void dnet_stats(const struct km_net *net, struct km_net_stats *out)
{
	const struct dnet *dn = km_container_of(net, const struct dnet, pub);
	struct km_tcp_stats ts;

	km_tcp_get_stats(dn->ep, &ts);
	*out = dn->st;
	out->conns_used = dn->conns_used;
	out->conns_max = dn->cfg.conns_max;
	out->rx_bufs_total = dn->n_bufs;
	out->rx_bufs_held = ts.bufs_user;
	out->retransmits = ts.tcp.retransmits;
	out->out_of_order = ts.tcp.ooo_segs;
	out->rx_missed = km_dnet_port_missed(dn);
	out->steered_out = dn->steer.out;
	out->steered_in = dn->steer.in;
	out->steer_drops = dn->steer.drops;
	out->poll_busy_us = tsc_us(dn->poll_busy_tsc);
	out->poll_idle_us = tsc_us(dn->poll_idle_tsc);
	out->queue = dn->queue;
	out->queues = dn->dp != NULL ? dn->dp->n_queues : 0;
	out->flow_rules = dn->dp != NULL && dn->dp->flow_rules;
	out->csum_offload = dn->dp != NULL && dn->dp->csum_tx;
}

static void dnet_conn_stats(const struct km_net_conn *c,
			    struct km_net_conn_stats *out)
{
	const struct dconn *dc = km_container_of(c, const struct dconn, pub);

	struct km_tcp_counters tc;

	*out = dc->st;
	out->send_queued = dc->sq_count;
	if (dc->tc != NULL) {
		km_tcp_conn_get_stats(dc->tc, &tc);
		out->retransmits = tc.retransmits;
		out->out_of_order = tc.ooo_segs;
	}
}

static int dnet_poll(struct km_net *net)
{
	struct dnet *dn = km_container_of(net, struct dnet, pub);
	int n;

	uint64_t t0 = rte_rdtsc(), dt;

	km_dnet_thread_enter(dn);
	dn->now_ms = km_clock_ms();
	n = km_dnet_rx(dn);
	if (n > 0)
		dn->last_rx_ms = dn->now_ms;
	/* The endpoint's timers count milliseconds, and its poll visits every
	 * slot: once per millisecond, not once per spin of the loop (it was
	 * 13-15% of a busy worker's time). Ends it reports come from the
	 * rx bursts' ends too. */
	if (dn->now_ms != dn->timers_ms) {
		dn->timers_ms = dn->now_ms;
		n += km_tcp_poll(dn->ep);
	}
	n += service(dn);
	km_dnet_tx_flush(dn);
	dn->empty_polls = n > 0 ? 0 : dn->empty_polls + 1;
	dt = rte_rdtsc() - t0;
	if (n > 0)
		dn->poll_busy_tsc += dt;
	else
		dn->poll_idle_tsc += dt;
	return n;
}

static uint32_t dnet_nap_us(const struct km_net *net)
{
	const struct dnet *dn = km_container_of(net, const struct dnet, pub);
	uint32_t k;

	if ((dn->tx_n > 0 && !dn->tx_stalled) || dn->want_count > 0 ||
	    dn->empty_polls < DNET_SPIN_POLLS)
		return 0;
	k = dn->empty_polls - DNET_SPIN_POLLS;
	if (k >= 4 || (DNET_NAP_MIN_US << k) > DNET_NAP_MAX_US)
		return DNET_NAP_MAX_US;
	return DNET_NAP_MIN_US << k;
}

/* Poll while frames keep coming or work is queued (napping between empty
 * polls, dnet_nap_us); an idle worker may sleep until its tick, which also
 * runs the endpoint's timers. */
static bool dnet_wants_poll(const struct km_net *net)
{
	const struct dnet *dn = km_container_of(net, const struct dnet, pub);

	if ((dn->tx_n > 0 && !dn->tx_stalled) || dn->want_count > 0)
		return true;
	return dn->conns_used > 0 &&
	       dn->now_ms - dn->last_rx_ms < DNET_IDLE_MS;
}

/* ---- create, destroy ---------------------------------------------------- */

static void log_counters(const struct dnet *dn)
{
	struct km_net_stats s;

	dnet_stats(&dn->pub, &s);
	KM_INFO("dpdk", "port %u queue %u counters: frames_in=%llu frames_out=%llu bytes_in=%llu bytes_out=%llu frames_dropped=%llu tx_dropped=%llu rx_missed=%llu retransmits=%llu out_of_order=%llu connects=%llu resets=%llu steered_out=%llu steered_in=%llu steer_drops=%llu",
		dn->port_id, dn->queue, (unsigned long long)s.frames_in,
		(unsigned long long)s.frames_out,
		(unsigned long long)s.frame_bytes_in,
		(unsigned long long)s.frame_bytes_out,
		(unsigned long long)s.frames_dropped,
		(unsigned long long)s.tx_dropped,
		(unsigned long long)s.rx_missed,
		(unsigned long long)s.retransmits,
		(unsigned long long)s.out_of_order,
		(unsigned long long)s.connects, (unsigned long long)s.resets,
		(unsigned long long)s.steered_out,
		(unsigned long long)s.steered_in,
		(unsigned long long)s.steer_drops);
	km_dnet_port_log_eth(dn);
	if (dn->imp.seen > 0)
		KM_INFO("dpdk", "test switch: impaired_drops=%llu impaired_swaps=%llu",
			(unsigned long long)dn->imp.dropped,
			(unsigned long long)dn->imp.swapped);
}

/* Abort what is left and let the endpoint report the ends (callbacks run
 * here, as net.h says of km_net_destroy). Aborts end on the next
 * km_tcp_poll(): a few rounds suffice; bounded all the same. */
static void end_all(struct dnet *dn)
{
	for (uint32_t i = 0; i < dn->cfg.listeners_max; i++)
		if (dn->lsn[i].used)
			km_dnet_unlisten(&dn->lsn[i].pub);
	for (uint32_t i = 0; i < dn->cfg.conns_max; i++)
		if (dn->conns[i].state != DC_FREE)
			dnet_abort(&dn->conns[i].pub);
	for (int round = 0; round < 8 && dn->conns_used > 0; round++) {
		km_tcp_poll(dn->ep);
		service(dn);
	}
	km_dnet_tx_flush(dn);
	KM_ASSERT(dn->conns_used == 0);
}

static void dnet_free(struct dnet *dn)
{
	km_dnet_port_close(dn);
	km_dnet_thread_leave(dn);
	free(dn->ep_mem);
	if (dn->conns != NULL) {
		free(dn->conns[0].sq);
		free(dn->conns[0].iov);
	}
	free(dn->conns);
	free(dn->lsn);
	free(dn);
}

static void dnet_destroy(struct km_net *net)
{
	struct dnet *dn = km_container_of(net, struct dnet, pub);

	if (dn->ep != NULL) {
		end_all(dn);
		log_counters(dn);
	}
	dnet_free(dn);
}

static const struct km_net_ops dnet_ops = {
	.destroy = dnet_destroy,
	.poll = dnet_poll,
	.wants_poll = dnet_wants_poll,
	.nap_us = dnet_nap_us,
	.connect = dnet_connect,
	.listen = km_dnet_listen,
	.unlisten = km_dnet_unlisten,
	.send = dnet_send,
	.release = dnet_release,
	.close = dnet_close,
	.abort = dnet_abort,
	.stats = dnet_stats,
	.conn_stats = dnet_conn_stats,
	.peer = km_dnet_peer,
};

static bool config_ok(const struct km_net_config *c)
{
	return c->conns_max >= 1 && c->conns_max <= 4096 &&
	       c->rx_buf_count >= 64 && c->rx_buf_count <= (1u << 24) &&
	       c->send_queue_max >= 1 && c->send_iov_max >= 1 &&
	       c->send_iov_max <= 1024 && c->dpdk.port != NULL &&
	       c->listeners_max <= KM_TCP_LISTEN_MAX &&
	       c->dpdk.port[0] != '\0' && c->dpdk.ip_be != 0 &&
	       c->dpdk.queues <= RTE_MAX_QUEUES_PER_PORT;
}

static int alloc_conns(struct dnet *dn)
{
	const struct km_net_config *c = &dn->cfg;
	struct dsend *sq = calloc((size_t)c->conns_max * c->send_queue_max,
				  sizeof(*sq));
	struct iovec *iov = calloc((size_t)c->conns_max * c->send_iov_max,
				   sizeof(*iov));

	dn->conns = calloc(c->conns_max, sizeof(*dn->conns));
	dn->lsn = calloc(c->listeners_max ? c->listeners_max : 1,
			 sizeof(*dn->lsn));
	if (dn->conns == NULL || dn->lsn == NULL || sq == NULL ||
	    iov == NULL) {
		free(sq);
		free(iov);
		return -ENOMEM;
	}
	for (uint32_t i = c->conns_max; i-- > 0;) {
		struct dconn *dc = &dn->conns[i];

		dc->pub.net = &dn->pub;
		dc->sq = sq + (size_t)i * c->send_queue_max;
		dc->iov = iov + (size_t)i * c->send_iov_max;
		dc->next_free = dn->free_conns;
		dn->free_conns = dc;
	}
	return 0;
}

/* SYN retransmissions that fit the connect timeout (RTO doubling from the
 * initial one); 0: the endpoint's default. */
static uint32_t syn_retries(uint32_t timeout_ms, uint32_t rto_ms)
{
	uint32_t k = 0;
	uint64_t spent = rto_ms;

	if (timeout_ms == 0)
		return 0;
	while (k < 8 && spent + ((uint64_t)rto_ms << (k + 1)) <= timeout_ms)
		spent += (uint64_t)rto_ms << ++k;
	return k;
}

/* A server streams Fetch responses: a send ring that a round trip of the
 * port does not empty (a client only sends requests: 64 KiB). Every slot
 * has one, in memory the endpoint zeroes at init: at most
 * DNET_SERVER_SND_TOTAL of them, the ring halved until they fit. */
static uint32_t server_snd_buf(uint32_t slots)
{
	uint32_t b = DNET_SERVER_SND_BUF;

	while (b > (64u << 10) && (uint64_t)b * slots > DNET_SERVER_SND_TOTAL)
		b /= 2;
	return b;
}

static void tcp_config(const struct dnet *dn, struct km_tcp_config *t)
{
	const struct km_net_dpdk_config *d = &dn->cfg.dpdk;
	uint32_t slots = dn->cfg.conns_max * DNET_TCP_SLOTS_PER_CONN;

	km_tcp_config_default(t);
	memcpy(t->mac, dn->dp->mac, 6);
	t->ip = ntohl(d->ip_be);
	t->netmask = ntohl(d->netmask_be);
	t->gateway = ntohl(d->gateway_be);
	t->mtu = dn->dp->mtu;
	/* A slot needs a local port of its own: the queue's block bounds it. */
	t->conns_max = slots < dn->dp->port_span ? slots : dn->dp->port_span;
	km_dnet_port_block(dn->dp, dn->queue, &t->port_min, &t->port_max);
	t->bufs_max = dn->n_bufs;
	t->rcv_buf_bytes = DNET_RCV_WINDOW;
	if (dn->cfg.listeners_max > 0)
		t->snd_buf_bytes = server_snd_buf(t->conns_max);
	t->tx_csum_offload = dn->dp->csum_tx ? KM_TCP_TX_CSUM_IP | KM_TCP_TX_CSUM_TCP
					 : 0;
	if (dn->cfg.close_timeout_ms != 0)
		t->close_timeout_ms = dn->cfg.close_timeout_ms;
	if (dn->cfg.connect_timeout_ms != 0)
		t->syn_retries = syn_retries(dn->cfg.connect_timeout_ms,
					     t->rto_init_ms);
	if (getrandom(&t->isn_secret, sizeof(t->isn_secret), 0) !=
	    sizeof(t->isn_secret))
		t->isn_secret = km_clock_ms() * 0x9e3779b97f4a7c15ull;
}

static int make_endpoint(struct dnet *dn)
{
	struct km_tcp_config t;
	ssize_t size;

	tcp_config(dn, &t);
	if ((size = km_tcp_memsize(&t)) < 0)
		return (int)size;
	size = (size + 63) & ~(ssize_t)63;
	if ((dn->ep_mem = aligned_alloc(64, (size_t)size)) == NULL)
		return -ENOMEM;
	dn->tops = (struct km_tcp_ops){ .tx = km_dnet_tx, .now_ms = dnet_now_ms,
					.deliver = km_dnet_deliver,
					.event = km_dnet_event,
					.buf_free = km_dnet_buf_free,
					.accept = km_dnet_accept };
	return km_tcp_init(dn->ep_mem, (size_t)size, &t, &dn->tops, dn, &dn->ep);
}

int km_dnet_create(const struct km_net_config *cfg, struct km_net **out)
{
	struct dnet *dn;
	int rc;

	if (!config_ok(cfg))
		return -EINVAL;
	if ((dn = calloc(1, sizeof(*dn))) == NULL)
		return -ENOMEM;
	dn->pub.ops = &dnet_ops;
	dn->cfg = *cfg;
	dn->now_ms = km_clock_ms();
	dn->queue = cfg->dpdk.queue;
	dn->n_bufs = cfg->rx_buf_count;
	if ((rc = alloc_conns(dn)) == 0 && (rc = km_dnet_port_open(dn)) == 0)
		rc = make_endpoint(dn);
	if (rc < 0) {
		dn->ep = NULL;
		dnet_free(dn);
		return rc;
	}
	km_dnet_impair_init(dn);
	dn->last_rx_ms = dn->now_ms;
	*out = &dn->pub;
	return 0;
}
