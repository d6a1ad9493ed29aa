/* A secured network backend: TLS and SASL (secconn.h) over another backend
 * (the kernel's io_uring sockets or DPDK's TCP), behind the same net.h
 * interface, so that the fetch sessions are unchanged. An active open
 * reports on_connect(0) only once the TLS handshake and the SASL exchange
 * are done; a failure of either is on_connect(KM_ETLS / KM_EAUTH /
 * KM_ESASLMECH), km_snet_conn_why() saying what during that callback.
 *
 * Receive: the inner backend's buffers are released as soon as their
 * ciphertext is in the TLS session; the plaintext is delivered in this
 * backend's own pool (as many buffers of the same size), with net.h's
 * backpressure: no free buffer, the inner connection's reading pauses.
 * Send: the bytes are encrypted at once (the caller may reuse them once
 * the callback runs, as net.h says) and a send's callback runs once the
 * inner backend took all of its ciphertext. Listening is not offered: this
 * is the fetch side. */
#ifndef KM_DATAPLANE_NET_SNET_H
#define KM_DATAPLANE_NET_SNET_H

#include "dataplane/net/net.h"
#include "dataplane/net/secconn.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Wrap inner (created from inner_cfg; now owned: destroyed with the
 * wrapper). sec must outlive it.
 * @return 0 and *out, -ENOMEM, -EINVAL.
 */
int km_snet_create(struct km_net *inner, const struct km_net_config *inner_cfg,
		   const struct km_netsec *sec, struct km_net **out);

/** Is net a wrapper of this kind? */
bool km_snet_is(const struct km_net *net);

/** The broker's host name of a connection just opened (before any poll):
 *  what its certificate must name. Ignored on another backend. */
void km_snet_conn_set_host(struct km_net_conn *c, const char *host);

/** During a failed on_connect: what went wrong, naming the broker. "" on
 *  another backend. */
const char *km_snet_conn_why(const struct km_net_conn *c);

/**
 * Listen on ipv4:port of the inner backend as a server with lsec's
 * security (km_netsec_server_init). With TLS (SSL, SASL_SSL) each
 * accepted connection runs its handshake here and is reported to
 * h->on_accept only once established; a handshake that fails, stalls past
 * lsec's handshake_timeout_ms, or a renegotiation later, ends it here.
 * Without TLS the listener is the inner backend's, and its connections
 * are the inner backend's own (no copy).
 * @return as km_net_listen().
 */
int km_snet_listen(struct km_net *net, const char *ipv4, uint16_t port,
		   const struct km_netsec *lsec, const struct km_net_handler *h,
		   void *ctx, struct km_net_listener **out);

/**
 * An accepted TLS connection's client, as Kafka's default principal
 * builder names it: "User:" and its certificate's subject in RFC 2253
 * form. @return its length, or 0 (no certificate, or not such a
 * connection).
 */
int km_snet_conn_principal(const struct km_net_conn *c, char *out,
			   size_t cap);

#ifdef __cplusplus
}
#endif

#endif
