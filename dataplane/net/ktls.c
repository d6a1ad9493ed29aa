/* The kTLS probe (ktls.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dataplane/net/ktls.h"

#ifndef TCP_ULP
#define TCP_ULP 31
#endif
#ifndef SOL_TLS
#define SOL_TLS 282
#endif

/* A connected pair on loopback: *c the client end, *s the accepted one. */
static int loop_pair(int *c, int *s)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = 0;

	*c = *s = -1;
	if (l < 0)
		return -errno;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&sa, &len) < 0 ||
	    (*c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(*c, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    (*s = accept4(l, NULL, NULL, SOCK_CLOEXEC)) < 0)
		rc = -errno;
	close(l);
	return rc;
}

/* A TLS 1.2 AES-GCM-128 receive key of zeros: the kernel checks the
 * cipher it supports, not the key, and no record is ever decrypted. */
static int try_rx(int fd)
{
	struct tls12_crypto_info_aes_gcm_128 ci;

	memset(&ci, 0, sizeof(ci));
	ci.info.version = TLS_1_2_VERSION;
	ci.info.cipher_type = TLS_CIPHER_AES_GCM_128;
	return setsockopt(fd, SOL_TLS, TLS_RX, &ci, sizeof(ci)) < 0 ? -errno
								     : 0;
}

/* The ULP attached to c: does it take a receive key? */
static void probe_rx(int c, struct km_ktls_answer *out)
{
	int rc = try_rx(c);

	out->ulp = true;
	if (rc < 0) {
		out->err = -rc;
		snprintf(out->why, sizeof(out->why), "kTLS unavailable: the tls "
			 "ULP refuses a TLS_RX key: %s", strerror(-rc));
		return;
	}
	out->rx = true;
	snprintf(out->why, sizeof(out->why), "kTLS available (tls ULP, "
		 "TLS_RX), not used: kmirrord has no kTLS data path");
}

int km_ktls_probe(struct km_ktls_answer *out)
{
	int c, s, rc;

	memset(out, 0, sizeof(*out));
	if ((rc = loop_pair(&c, &s)) < 0) {
		out->err = -rc;
		snprintf(out->why, sizeof(out->why), "kTLS not probed: loopback "
			 "socket: %s", strerror(-rc));
	} else if (setsockopt(c, IPPROTO_TCP, TCP_ULP, "tls", sizeof("tls")) <
		   0) {
		out->err = errno;
		if (errno == ENOENT)
			snprintf(out->why, sizeof(out->why), "kTLS unavailable: "
				 "kernel lacks the tls ULP (ENOENT)");
		else
			snprintf(out->why, sizeof(out->why), "kTLS unavailable: "
				 "setsockopt TCP_ULP tls: %s", strerror(errno));
	} else {
		probe_rx(c, out);
	}
	if (c >= 0)
		close(c);
	if (s >= 0)
		close(s);
	return rc;
}

void km_ktls_user_tls(char *buf, size_t cap)
{
	snprintf(buf, cap, "user-space TLS (%s over memory BIOs)",
		 OpenSSL_version(OPENSSL_VERSION));
}
