/* DPDK network backend: listeners (passive open), so that a Kafka front end
 * can serve on the DPDK port.
 *
 * A km_net listener is a listening port of the queue's TCP endpoint
 * (km_tcp_listen). The endpoint completes the handshake on its own and
 * reports the ESTABLISHED connection through ops->accept (from inside
 * km_net_poll(), as net.h promises of every callback); it then takes a
 * connection slot of the backend and the listener's handler and ctx, as the
 * kernel backend's accepted sockets do (knet_listen.c), or is reset when
 * the pool is full (accepts_refused).
 *
 * Ports. The active opens' local ports are the upper half of the port
 * space, one block per queue (DNET_PORT_BASE, km_dnet_port_block), and the
 * endpoint finds a connection by its port's slot there: a listening port
 * must lie below DNET_PORT_BASE, on every queue. With several queues, the
 * frames to a listening port are passed to the queue that listens
 * (dnet_io.c's steering reads km_dnet_port_listener()).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "common/km_assert.h"
#include "common/log.h"
#include "dataplane/net/dpdk/dnet_pvt.h"

static struct dlistener *listener_at(struct dnet *dn, uint16_t port)
{
	for (uint32_t i = 0; i < dn->cfg.listeners_max; i++)
		if (dn->lsn[i].used && dn->lsn[i].pub.port == port)
			return &dn->lsn[i];
	return NULL;
}

/* Port 0: the first port from DNET_LISTEN_AUTO the endpoint does not
 * listen on yet (at most KM_TCP_LISTEN_MAX are taken). */
static int listen_port(struct dnet *dn, uint16_t port, uint16_t *bound)
{
	int rc = -EADDRINUSE;

	if (port != 0) {
		rc = km_tcp_listen(dn->ep, port);
		*bound = port;
		return rc;
	}
	for (uint32_t p = DNET_LISTEN_AUTO;
	     p < DNET_LISTEN_AUTO + KM_TCP_LISTEN_MAX + 1 && rc == -EADDRINUSE;
	     p++) {
		rc = km_tcp_listen(dn->ep, (uint16_t)p);
		*bound = (uint16_t)p;
	}
	return rc;
}

int km_dnet_listen(struct km_net *net, const char *ipv4, uint16_t port,
		   const struct km_net_handler *h, void *ctx,
		   struct km_net_listener **out)
{
	struct dnet *dn = km_container_of(net, struct dnet, pub);
	struct dlistener *l = NULL;
	struct in_addr a;
	uint16_t bound = 0;
	int rc;

	KM_ASSERT(h != NULL);
	if (inet_pton(AF_INET, ipv4, &a) != 1)
		return -EINVAL;
	if (a.s_addr != INADDR_ANY && a.s_addr != dn->cfg.dpdk.ip_be)
		return -EADDRNOTAVAIL; /* the port has one address */
	if (port >= DNET_PORT_BASE) {
		KM_ERROR("dpdk", "cannot listen on port %u: ports %u-65535 are the TCP endpoint's own for outgoing connections; choose a port below %u",
			 port, DNET_PORT_BASE, DNET_PORT_BASE);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < dn->cfg.listeners_max && l == NULL; i++)
		if (!dn->lsn[i].used)
			l = &dn->lsn[i];
	if (l == NULL)
		return -ENOBUFS;
	if ((rc = listen_port(dn, port, &bound)) < 0)
		return rc;
	l->used = true;
	l->h = h;
	l->pub.net = net;
	l->pub.ctx = ctx;
	l->pub.port = bound;
	km_dnet_port_listen(dn->dp, bound, dn->queue, true);
	*out = &l->pub;
	return 0;
}

void km_dnet_unlisten(struct km_net_listener *pl)
{
	struct dlistener *l = km_container_of(pl, struct dlistener, pub);
	struct dnet *dn = km_container_of(pl->net, struct dnet, pub);

	KM_ASSERT(l->used);
	km_dnet_port_listen(dn->dp, pl->port, dn->queue, false);
	(void)km_tcp_unlisten(dn->ep, pl->port);
	l->used = false;
}

/* The endpoint's ops->accept: c is ESTABLISHED on a listening port. */
void km_dnet_accept(void *ctx, struct km_tcp_conn *tc)
{
	struct dnet *dn = ctx;
	struct km_tcp_conn_info info;
	struct dlistener *l;
	struct dconn *dc;

	km_tcp_conn_get_info(tc, &info);
	l = listener_at(dn, info.local_port);
	if (l == NULL || (dc = km_dnet_conn_alloc(dn)) == NULL) {
		if (l != NULL) {
			dn->st.accepts_refused++;
			KM_DEBUG("dpdk", "pool full (%u): connection reset",
				 dn->cfg.conns_max);
		}
		km_tcp_abort(tc); /* no user: its end is not reported */
		return;
	}
	dc->tc = tc;
	dc->state = DC_OPEN;
	dc->pub.h = l->h;
	dc->pub.ctx = l->pub.ctx;
	km_tcp_conn_set_user(tc, dc);
	dn->st.accepts++;
	km_dnet_set_want(dn, dc, true);
	if (l->h->on_accept != NULL)
		l->h->on_accept(&dc->pub);
}

int km_dnet_peer(const struct km_net_conn *c, struct sockaddr_in *out)
{
	const struct dconn *dc = km_container_of(c, const struct dconn, pub);
	struct km_tcp_conn_info info;

	if (dc->tc == NULL)
		return -ENOTCONN;
	km_tcp_conn_get_info(dc->tc, &info);
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	out->sin_addr.s_addr = htonl(info.remote_ip);
	out->sin_port = htons(info.remote_port);
	return 0;
}
