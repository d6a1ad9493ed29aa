/* A small blocking Kafka client for the control thread: one connection,
 * one request at a time, a deadline over everything. For the rare
 * questions the control thread asks a source itself (startup discovery,
 * failback's barrier lookup), never for data: the workers fetch. */
#ifndef KM_CONTROL_KCLIENT_H
#define KM_CONTROL_KCLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "common/resolve.h"
#include "control/config.h"
#include "kafka/proto.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Responses above this are refused (KM_EWIREFRAMEMAX). */
#define KM_KCLIENT_RESP_BYTES_MAX (16u * 1024 * 1024)

struct km_kclient {
	int fd;
	int64_t deadline_ms;	/* km_clock_ms() */
	int32_t corr;		/* last correlation id sent */
	uint8_t *resp;		/* the last response body (malloc) */
	uint32_t resp_len;
	struct iovec iov;	/* the reader's view of resp */
	struct km_chain chain;
	/* After a failed km_kclient_open: why the host did not resolve
	 * ("cannot resolve host 'foo': Name or service not known"), else "". */
	char why[KM_RESOLVE_WHY_BYTES];
	/* TLS and SASL (issue 16): NULL on a PLAINTEXT connection. */
	struct km_secconn *sc;
	/* KIP-368: re-authenticate before the next call from then on
	 * (km_clock_ms; 0: the broker's sessions do not end). */
	int64_t reauth_at_ms;
	uint32_t reauths;	/* done on this connection */
};

/** Connect to a (a host name or IPv4 literal) within timeout_ms, which
 *  also bounds every later call. IPv4 only, like the workers' fetch
 *  sessions that follow it to the same hosts (common/resolve.h).
 *  @return 0, or -errno (-ETIMEDOUT, -ECONNREFUSED, -EAFNOSUPPORT for an
 *  IPv6 literal), or KM_ERESOLVE for a name that does not resolve; c->why
 *  says which host and why for the last two. */
int km_kclient_open(struct km_kclient *c, const struct km_config_addr *a,
		    int timeout_ms);

/**
 * Send one request and read its response. encode writes the request body
 * for (api_key, version); the response's header is checked (correlation
 * id) and r is left at its body, which stays valid until the next call.
 * A SASL session the broker ends (KIP-368) is re-authenticated first once
 * 85% of it passed, as Kafka's Java client does: the broker closes a
 * connection whose session ended.
 * @return 0, -errno from the socket (-ECONNRESET: the peer closed, as a
 *         Kafka broker does on an API key it does not know), or a wire
 *         error (KM_EWIREFRAMEMAX, KM_EWIREVALUE for a wrong correlation
 *         id, ...).
 */
int km_kclient_call(struct km_kclient *c, int16_t api_key, int16_t version,
		    int (*encode)(struct km_wire_wr *w, int16_t version,
				  const void *req),
		    const void *req, struct km_wire_rd *r);

/**
 * Does the peer serve api_key at version? (ApiVersions v0; a peer that
 * does not list the key is not asked it, so neither a Kafka too old nor a
 * test peer that serves less ever sees a request it cannot answer.)
 * @return 0 and *yes, or what km_kclient_call returns.
 */
int km_kclient_supports(struct km_kclient *c, int16_t api_key,
			int16_t version, bool *yes);

void km_kclient_close(struct km_kclient *c);

struct km_netsec;

/**
 * The security every later km_kclient_open uses (the source's: TLS, SASL;
 * NULL: PLAINTEXT). Set once by the control thread before its first
 * connection; sec must outlive them. A failed handshake is KM_ETLS,
 * KM_EAUTH or KM_ESASLMECH from km_kclient_open, c->why naming the broker
 * and the cause, and logged.
 */
void km_kclient_set_security(const struct km_netsec *sec);

/** As km_kclient_open, always PLAINTEXT: kmirrord's own listener. */
int km_kclient_open_plain(struct km_kclient *c,
			  const struct km_config_addr *a, int timeout_ms);

#ifdef __cplusplus
}
#endif

#endif
