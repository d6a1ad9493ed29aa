/* Security of a connection to a Kafka broker (issue 16, to the source):
 * TLS through OpenSSL over memory BIOs, then the SASL exchange
 * (kafka/sasl.h), as a transport-free state machine. The caller moves
 * bytes: what arrived from the socket goes in with km_secconn_input(),
 * what km_secconn_output() gives goes out. So the same code serves the
 * workers' fetch sessions over io_uring or DPDK (snet.c) and the control
 * thread's blocking client (control/kclient.c).
 *
 * Without TLS (SASL_PLAINTEXT) the BIOs just carry the bytes; without SASL
 * (SSL) the connection is established once the TLS handshake is. */
#ifndef KM_DATAPLANE_NET_SECCONN_H
#define KM_DATAPLANE_NET_SECCONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kafka/sasl.h"

#ifdef __cplusplus
extern "C" {
#endif

enum km_secproto {
	KM_SEC_PLAINTEXT = 0,
	KM_SEC_SSL,
	KM_SEC_SASL_PLAINTEXT,
	KM_SEC_SASL_SSL,
};

/* Kafka's client settings, source.* in kmirrord.conf. */
struct km_netsec_config {
	enum km_secproto protocol;
	const char *ca_location;	/* PEM; NULL: the system's CAs */
	const char *cert_location;	/* PEM, mutual TLS; NULL: none */
	const char *key_location;
	const char *key_password;	/* NULL: the key is not encrypted */
	bool verify_host;		/* endpoint identification https */
	enum km_sasl_mech mech;
	const char *user;
	const char *password;
};

/* What every connection of a daemon shares: the SSL_CTX (OpenSSL makes it
 * safe to share between threads once configured) and the credentials. */
struct km_netsec {
	enum km_secproto protocol;
	void *ssl_ctx;			/* SSL_CTX; NULL without TLS */
	bool verify_host;
	enum km_sasl_mech mech;
	char user[KM_SASL_TEXT_BYTES];
	char password[KM_SASL_TEXT_BYTES];
	/* The server side (km_netsec_server_init): a listener's TLS. A
	 * handshake not done within handshake_timeout_ms is ended. */
	bool server;
	uint32_t handshake_timeout_ms;
};

/* Kafka's ssl.client.auth. */
enum km_tls_client_auth {
	KM_TLS_CLIENT_AUTH_NONE = 0,
	KM_TLS_CLIENT_AUTH_REQUESTED,	/* a certificate if the client has one */
	KM_TLS_CLIENT_AUTH_REQUIRED,	/* no certificate, no connection */
};

/* A listener's TLS (ssl.* in kmirrord.conf). */
struct km_netsec_server_config {
	const char *cert_location;	/* PEM chain, required */
	const char *key_location;	/* PEM; NULL: in cert_location */
	const char *key_password;	/* NULL: the key is not encrypted */
	const char *ca_location;	/* client certificates' CA (PEM) */
	enum km_tls_client_auth client_auth;
	uint32_t handshake_timeout_ms;	/* 0: 10 s */
};

/** PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL. @return 0 or KM_ECFGVALUE. */
int km_secproto_parse(const char *s, enum km_secproto *out);
const char *km_secproto_name(enum km_secproto p);

/**
 * Load the CA, certificate and key. @return 0, or KM_ETLS with why set
 * (a file that does not load, a key that does not match or decrypt).
 */
int km_netsec_init(struct km_netsec *s, const struct km_netsec_config *cfg,
		   char *why, size_t why_cap);
void km_netsec_free(struct km_netsec *s);

/**
 * A listener's TLS: TLS 1.2 and 1.3, renegotiation refused, the client's
 * certificate asked for and checked against ca_location as client_auth
 * says. @return 0, or KM_ETLS with why set (a file that does not load, a
 * key that does not match or decrypt).
 */
int km_netsec_server_init(struct km_netsec *s,
			  const struct km_netsec_server_config *cfg,
			  char *why, size_t why_cap);

static inline bool km_netsec_active(const struct km_netsec *s)
{
	return s != NULL && s->protocol != KM_SEC_PLAINTEXT;
}

struct km_secconn;

/** A connection's state, for the broker `host` (its certificate must name
 *  it when verify_host). @return 0, -ENOMEM, KM_ETLS. */
int km_secconn_new(const struct km_netsec *s, const char *host,
		   struct km_secconn **out);
void km_secconn_free(struct km_secconn *sc);

/** An accepted connection's state (s from km_netsec_server_init()): the
 *  TLS handshake as the server. @return 0, -ENOMEM, KM_ETLS. */
int km_secconn_new_server(const struct km_netsec *s, struct km_secconn **out);

/**
 * The client's certificate, once the handshake is done, as Kafka's
 * DefaultKafkaPrincipalBuilder names it: "User:" and the subject in RFC
 * 2253 form as Java's X500Principal.getName() prints it ("User:CN=alice,
 * OU=apps,O=x"). @return its length, 0 (no certificate), or -ENOSPC.
 */
int km_secconn_peer_principal(const struct km_secconn *sc, char *out,
			      size_t cap);

/** Bytes from the peer. @return 0 or -ENOMEM. */
int km_secconn_input(struct km_secconn *sc, const void *p, size_t n);

/**
 * Advance the handshakes with what arrived. @return 1 (more bytes
 * needed: send the output and wait), 0 (established: the application's
 * bytes flow), or KM_ETLS / KM_EAUTH / KM_ESASLMECH / a wire error, with
 * km_secconn_why() saying what.
 */
int km_secconn_advance(struct km_secconn *sc, int64_t now_ms);

/** Bytes waiting to go to the peer. */
size_t km_secconn_output_pending(const struct km_secconn *sc);
/** Take up to cap of them. @return how many. */
size_t km_secconn_output(struct km_secconn *sc, void *buf, size_t cap);

/** Once established: the application's bytes. @return a count, 0 (none
 *  yet), -ECONNRESET (the peer closed the TLS session) or KM_ETLS. */
int km_secconn_read(struct km_secconn *sc, void *buf, size_t cap);
/** Once established: send the application's bytes (encrypted into the
 *  output). @return 0 or KM_ETLS. */
int km_secconn_write(struct km_secconn *sc, const void *p, size_t n);

/**
 * End the TLS session cleanly: queue close_notify in the output (once),
 * which the caller sends before it closes the socket, so the broker sees
 * the end of the session rather than a truncation. Nothing to queue
 * without TLS or before the handshake ended.
 * @return 1 (close_notify queued) or 0 (nothing to send).
 */
int km_secconn_close_notify(struct km_secconn *sc);

/** Why the last call failed ("certificate verify failed: ..."). */
const char *km_secconn_why(const struct km_secconn *sc);

/**
 * KIP-368: authenticate again on the established connection (SaslHandshake
 * and SaslAuthenticate as the first time). Only between requests: no
 * answer of the application's may be outstanding, and none may be sent
 * until km_secconn_advance() says 0 again.
 * @return 0, or KM_EAUTH without SASL.
 */
int km_secconn_reauth(struct km_secconn *sc);

/** True while km_secconn_reauth()'s exchange runs. */
bool km_secconn_reauthing(const struct km_secconn *sc);

/** KIP-368: when the broker ends the SASL session (km_clock_ms time), 0
 *  if it never does. The connection must be re-authenticated or replaced
 *  before then. */
int64_t km_secconn_session_end_ms(const struct km_secconn *sc);

#ifdef __cplusplus
}
#endif

#endif
