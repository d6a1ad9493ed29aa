/* Blocking Kafka requests for the control thread (kclient.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/endian.h"
#include "common/errors.h"
#include "common/log.h"
#include "control/kclient.h"
#include "dataplane/net/secconn.h"

#define REQ_BYTES_MAX (64u * 1024)

/* Wait for fd to be ready for events before the deadline. */
static int wait_fd(const struct km_kclient *c, short events)
{
	struct pollfd p = { .fd = c->fd, .events = events };
	int64_t left = c->deadline_ms - (int64_t)km_clock_ms();
	int rc;

	if (left <= 0)
		return -ETIMEDOUT;
	do
		rc = poll(&p, 1, (int)left);
	while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return -errno;
	return rc == 0 ? -ETIMEDOUT : 0;
}

static int connect_fd(struct km_kclient *c, const struct sockaddr_in *sa)
{
	int soerr = 0, rc;
	socklen_t len = sizeof(soerr);

	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -errno;
	rc = connect(c->fd, (const struct sockaddr *)sa, sizeof(*sa));
	if (rc < 0 && errno != EINPROGRESS)
		return -errno;
	if ((rc = wait_fd(c, POLLOUT)) < 0)
		return rc;
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
		return -errno;
	return -soerr;
}

static const struct km_netsec *source_sec;

void km_kclient_set_security(const struct km_netsec *sec)
{
	source_sec = km_netsec_active(sec) ? sec : NULL;
}

static int raw_io(struct km_kclient *c, void *buf, size_t len, bool out);

/* Everything the TLS session or SASL wrote, out. */
static int sec_flush(struct km_kclient *c)
{
	uint8_t buf[16384];
	size_t n;
	int rc;

	while ((n = km_secconn_output(c->sc, buf, sizeof(buf))) > 0)
		if ((rc = raw_io(c, buf, n, true)) < 0)
			return rc;
	return 0;
}

/* What the socket has now (waiting for some first) into the session. */
static int sec_fill(struct km_kclient *c)
{
	uint8_t buf[16384];
	ssize_t n;
	int rc;

	for (;;) {
		n = recv(c->fd, buf, sizeof(buf), 0);
		if (n > 0)
			return km_secconn_input(c->sc, buf, (size_t)n);
		if (n == 0)
			return -ECONNRESET;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		if ((rc = wait_fd(c, POLLIN)) < 0)
			return rc;
	}
}

/* At 85% of the session the broker granted (Kafka's Java client: 85-95%). */
static void set_reauth(struct km_kclient *c)
{
	int64_t end = km_secconn_session_end_ms(c->sc);
	int64_t now = (int64_t)km_clock_ms();

	c->reauth_at_ms = end > now ? now + (end - now) * 85 / 100 : 0;
}

/* The handshakes (TLS, SASL) to their end, bytes moved both ways. */
static int sec_run(struct km_kclient *c)
{
	int rc = 0;

	while (rc == 0) {
		int frc;

		rc = km_secconn_advance(c->sc, (int64_t)km_clock_ms());
		frc = sec_flush(c); /* a TLS alert goes out too */
		if (rc >= 0 && frc < 0)
			rc = frc;
		if (rc != 1)
			break;
		rc = sec_fill(c);
	}
	if (rc == 0)
		set_reauth(c);
	return rc;
}

static int sec_open(struct km_kclient *c, const struct km_config_addr *a)
{
	int rc = km_secconn_new(source_sec, a->host, &c->sc);

	if (rc == 0)
		rc = sec_run(c);
	if (rc < 0 && c->sc != NULL) {
		snprintf(c->why, sizeof(c->why), "%s: broker %s:%u: %s",
			 km_strerror(rc), a->host, (unsigned)a->port,
			 km_secconn_why(c->sc));
		KM_WARN("kclient", "%s", c->why);
	}
	return rc;
}

int km_kclient_open_plain(struct km_kclient *c,
			  const struct km_config_addr *a, int timeout_ms)
{
	const struct km_netsec *sec = source_sec;
	int rc;

	source_sec = NULL; /* the control thread's only: no race */
	rc = km_kclient_open(c, a, timeout_ms);
	source_sec = sec;
	return rc;
}

int km_kclient_open(struct km_kclient *c, const struct km_config_addr *a,
		    int timeout_ms)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(a->port) };
	char ip[INET_ADDRSTRLEN];
	int rc;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->deadline_ms = (int64_t)km_clock_ms() + timeout_ms;
	rc = km_resolve_ipv4_why(a->host, ip, sizeof(ip), c->why,
				 sizeof(c->why));
	if (rc < 0)
		return rc;
	inet_pton(AF_INET, ip, &sa.sin_addr);
	rc = connect_fd(c, &sa);
	if (rc == 0 && source_sec != NULL)
		rc = sec_open(c, a);
	if (rc < 0)
		km_kclient_close(c);
	return rc;
}

/* Plaintext through the session: out, encrypted and sent; in, read
 * until len bytes came. */
static int sec_io(struct km_kclient *c, void *buf, size_t len, bool out)
{
	size_t done = 0;
	int rc, n;

	if (out)
		return (rc = km_secconn_write(c->sc, buf, len)) < 0
			       ? rc : sec_flush(c);
	while (done < len) {
		n = km_secconn_read(c->sc, (char *)buf + done, len - done);
		if (n < 0)
			return n;
		if (n > 0)
			done += (size_t)n;
		else if ((rc = sec_fill(c)) < 0)
			return rc;
	}
	return 0;
}

static int io_all(struct km_kclient *c, void *buf, size_t len, bool out)
{
	return c->sc != NULL ? sec_io(c, buf, len, out)
			     : raw_io(c, buf, len, out);
}

static int raw_io(struct km_kclient *c, void *buf, size_t len, bool out)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = out ? send(c->fd, (char *)buf + done, len - done,
				       MSG_NOSIGNAL)
				: recv(c->fd, (char *)buf + done, len - done, 0);
		int rc;

		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		if ((rc = wait_fd(c, out ? POLLOUT : POLLIN)) < 0)
			return rc;
	}
	return 0;
}

static int send_request(struct km_kclient *c, int16_t api_key, int16_t version,
			int (*encode)(struct km_wire_wr *, int16_t, const void *),
			const void *req)
{
	struct km_reqhdr h = { .api_key = api_key, .api_version = version,
			       .correlation_id = ++c->corr };
	uint8_t *buf = malloc(REQ_BYTES_MAX);
	struct km_wire_wr w;
	int rc;

	if (buf == NULL)
		return -ENOMEM;
	km_wire_name_set(&h.client_id, "kmirrord");
	km_wire_wr_init(&w, buf, REQ_BYTES_MAX);
	/* The encoders return a count or a negative code. */
	if ((rc = km_proto_req_begin(&w, &h)) >= 0 &&
	    (rc = encode(&w, version, req)) >= 0 &&
	    (rc = km_wire_wr_frame_end(&w)) >= 0)
		rc = io_all(c, buf, w.pos, true);
	free(buf);
	return rc;
}

static int read_response(struct km_kclient *c)
{
	uint8_t hdr[4];
	int rc = io_all(c, hdr, sizeof(hdr), false);

	free(c->resp);
	c->resp = NULL;
	if (rc < 0)
		return rc;
	c->resp_len = km_load_be32(hdr);
	if (c->resp_len > KM_KCLIENT_RESP_BYTES_MAX)
		return KM_EWIREFRAMEMAX;
	if ((c->resp = malloc(c->resp_len ? c->resp_len : 1)) == NULL)
		return -ENOMEM;
	return io_all(c, c->resp, c->resp_len, false);
}

/* Between calls, so no answer of ours is outstanding (KIP-368's rule). */
static int reauth_if_due(struct km_kclient *c)
{
	int rc;

	if (c->sc == NULL || c->reauth_at_ms == 0 ||
	    (int64_t)km_clock_ms() < c->reauth_at_ms)
		return 0;
	if ((rc = km_secconn_reauth(c->sc)) == 0 && (rc = sec_run(c)) == 0) {
		c->reauths++;
		return 0;
	}
	snprintf(c->why, sizeof(c->why), "%s: re-authentication: %s",
		 km_strerror(rc), km_secconn_why(c->sc));
	KM_WARN("kclient", "%s", c->why);
	return rc;
}

int km_kclient_call(struct km_kclient *c, int16_t api_key, int16_t version,
		    int (*encode)(struct km_wire_wr *w, int16_t version,
				  const void *req),
		    const void *req, struct km_wire_rd *r)
{
	struct km_chain_cur cur = { 0, 0 };
	int32_t corr;
	int rc;

	if ((rc = reauth_if_due(c)) < 0 ||
	    (rc = send_request(c, api_key, version, encode, req)) < 0 ||
	    (rc = read_response(c)) < 0)
		return rc;
	c->iov = (struct iovec){ c->resp, c->resp_len };
	c->chain = (struct km_chain){ &c->iov, 1 };
	km_wire_rd_init(r, &c->chain, cur, c->resp_len, &km_wire_limits_default);
	if ((rc = km_resphdr_decode(r, api_key, version, &corr)) == 0 &&
	    corr != c->corr)
		rc = KM_EWIREVALUE; /* not the answer to our request */
	return rc;
}

/* TLS close_notify, if it fits in the socket now: the close must not
 * wait on a broker that stopped reading. SHUT_WR puts the FIN right
 * behind it; what arrived unread (TLS 1.3 session tickets) is read
 * away, or close() would send a reset that can overtake the alert. */
static void sec_close_notify(struct km_kclient *c)
{
	uint8_t buf[4096];
	size_t n;

	if (km_secconn_close_notify(c->sc) == 0)
		return;
	while ((n = km_secconn_output(c->sc, buf, sizeof(buf))) > 0)
		if (send(c->fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) !=
		    (ssize_t)n)
			return;
	shutdown(c->fd, SHUT_WR);
	for (int i = 0; i < 64; i++)
		if (recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0)
			break;
}

void km_kclient_close(struct km_kclient *c)
{
	if (c->fd >= 0 && c->sc != NULL)
		sec_close_notify(c);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	km_secconn_free(c->sc);
	c->sc = NULL;
	free(c->resp);
	c->resp = NULL;
}

static int enc_apiversions(struct km_wire_wr *w, int16_t v, const void *m)
{
	return km_apiversions_req_encode(w, v, m);
}

int km_kclient_supports(struct km_kclient *c, int16_t api_key,
			int16_t version, bool *yes)
{
	static struct km_api_range keys[512]; /* the control thread's only */
	struct km_apiversions_req req = { 0 };
	struct km_apiversions_resp m = { 0, keys, 512, 0, 0 };
	struct km_wire_rd r;
	int rc;

	km_wire_name_set_null(&req.sw_name);
	km_wire_name_set_null(&req.sw_version);
	*yes = false;
	if ((rc = km_kclient_call(c, KM_API_API_VERSIONS, 0, enc_apiversions,
				  &req, &r)) < 0 ||
	    (rc = km_apiversions_resp_decode(&r, 0, &m)) < 0)
		return rc;
	if (m.error_code != 0)
		return KM_ESOURCE;
	for (uint32_t i = 0; i < m.n_keys; i++)
		*yes |= keys[i].api_key == api_key &&
			keys[i].min_version <= version &&
			keys[i].max_version >= version;
	return 0;
}
