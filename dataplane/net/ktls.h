/* Which TLS kmirrord's fetch sessions use, and why (issue 16).
 *
 * kTLS would let the kernel decrypt TLS records so io_uring receives
 * plaintext (the handshake stays in OpenSSL). It needs the kernel's `tls`
 * upper-layer protocol (setsockopt TCP_ULP "tls", CONFIG_TLS); without it
 * that setsockopt fails with ENOENT. kmirrord has no kTLS data path: it
 * probes once at start so that its log, status and the bench say what the
 * kernel offers, and uses user-space TLS (OpenSSL over memory BIOs,
 * secconn.h) in every case. */
#ifndef KM_DATAPLANE_NET_KTLS_H
#define KM_DATAPLANE_NET_KTLS_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KM_KTLS_WHY_BYTES 160u

struct km_ktls_answer {
	bool ulp;		/* the tls ULP attached to a TCP socket */
	bool rx;		/* and took a TLS_RX key (TLS 1.2 AES-GCM-128) */
	int err;		/* the errno that said no; 0 */
	/* "kTLS unavailable: kernel lacks the tls ULP (ENOENT)" */
	char why[KM_KTLS_WHY_BYTES];
};

/**
 * Ask the kernel on a loopback TCP connection made for the purpose (the
 * ULP attaches only to an established socket). @return 0 and *out filled
 * whatever the kernel answered, or -errno if the probe itself could not
 * run (no loopback socket).
 */
int km_ktls_probe(struct km_ktls_answer *out);

/** What a TLS connection of kmirrord uses, for its log and status:
 *  "user-space TLS (OpenSSL 3.0.13 over memory BIOs)". */
void km_ktls_user_tls(char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
