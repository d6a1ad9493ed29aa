/* The metrics over HTTP, for Prometheus to scrape (metrics.listener):
 * GET /metrics answers the text `kmirrorctl metrics` prints, then closes
 * the connection. Served on the control thread, one connection at a time,
 * so every wait is bounded: the request must come within HTTP_READ_MS,
 * and the answer, which the socket's send buffer nearly always takes at
 * once, gets HTTP_SEND_MS. A client that sends nothing or reads nothing
 * holds the control thread no longer than that; nothing of the data path
 * runs here. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/log.h"
#include "control/daemon_pvt.h"

#define HTTP_READ_MS 500
#define HTTP_SEND_MS 1000
#define HTTP_REQUEST_BYTES_MAX 4096

static int bind_listener(const struct km_config_addr *a, int *fd_out,
			 uint16_t *port_out)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char port[8];
	int one = 1, fd, rc;

	snprintf(port, sizeof(port), "%u", a->port);
	rc = getaddrinfo(a->host[0] ? a->host : NULL, port, &hints, &ai);
	if (rc != 0)
		return -EADDRNOTAVAIL;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return rc;
	}
	freeaddrinfo(ai);
	*fd_out = fd;
	*port_out = ntohs(ss.ss_family == AF_INET6
				  ? ((struct sockaddr_in6 *)&ss)->sin6_port
				  : ((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

int km_daemon_http_open(struct km_daemon *d)
{
	const struct km_config_addr *a = &d->cfg->metrics_listener;
	int rc;

	d->http_fd = -1;
	if (!d->cfg->metrics_listener_set)
		return 0;
	rc = bind_listener(a, &d->http_fd, &d->http_port);
	if (rc < 0) {
		KM_ERROR("daemon", "metrics.listener %s:%u: %s", a->host,
			 a->port, km_strerror(rc));
		return rc;
	}
	KM_INFO("daemon", "metrics on http://%s:%u/metrics",
		a->host[0] ? a->host : "0.0.0.0", d->http_port);
	return 0;
}

void km_daemon_http_close(struct km_daemon *d)
{
	if (d->http_fd >= 0)
		close(d->http_fd);
	d->http_fd = -1;
}

/* The request head (up to the blank line) into buf, within HTTP_READ_MS.
 * @return its length, or -1 if it did not come whole in time. */
static int read_head(int c, char *buf, size_t cap)
{
	uint64_t end = km_daemon_now_ms() + HTTP_READ_MS;
	size_t len = 0;

	while (len + 1 < cap) {
		uint64_t now = km_daemon_now_ms();
		struct pollfd p = { .fd = c, .events = POLLIN };
		ssize_t n;

		if (now >= end || poll(&p, 1, (int)(end - now)) <= 0)
			return -1;
		n = recv(c, buf + len, cap - 1 - len, MSG_DONTWAIT);
		if (n <= 0)
			return n < 0 && errno == EAGAIN ? 0 : -1;
		len += (size_t)n;
		buf[len] = '\0';
		if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
			return (int)len;
	}
	return -1;
}

static void send_all(int c, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = send(c, p, len, MSG_NOSIGNAL);

		if (n <= 0)
			return; /* SO_SNDTIMEO passed, or the client left */
		p += n;
		len -= (size_t)n;
	}
}

static void answer(int c, const char *status, const char *type,
		   const char *body, size_t len)
{
	char head[256];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %s\r\nContent-Type: %s\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			 status, type, len);

	send_all(c, head, (size_t)n);
	send_all(c, body, len);
}

/* One scrape: its request line decides the answer. */
static void serve_one(struct km_daemon *d, int c)
{
	static const char plain[] = "text/plain; charset=utf-8";
	char req[HTTP_REQUEST_BYTES_MAX];
	size_t len;
	char *text;

	if (read_head(c, req, sizeof(req)) <= 0)
		return;
	if (strncmp(req, "GET ", 4) != 0) {
		answer(c, "405 Method Not Allowed", plain, "GET only\n", 9);
		return;
	}
	if (strncmp(req + 4, "/metrics ", 9) != 0 &&
	    strncmp(req + 4, "/metrics?", 9) != 0) {
		answer(c, "404 Not Found", plain, "GET /metrics\n", 13);
		return;
	}
	text = km_daemon_metrics_text(d, &len);
	if (text == NULL) {
		answer(c, "500 Internal Server Error", plain, "no memory\n", 10);
		return;
	}
	/* The exposition format's version, as Prometheus asks for it. */
	answer(c, "200 OK", "text/plain; version=0.0.4; charset=utf-8", text,
	       len);
	free(text);
}

/* One connection per call: the control loop polls the listener again
 * right after its other work, so a burst of scrapes is served in turn and
 * never holds the loop more than one connection's bounded waits. */
void km_daemon_http_serve(struct km_daemon *d)
{
	struct timeval tv = { .tv_sec = HTTP_SEND_MS / 1000,
			      .tv_usec = (HTTP_SEND_MS % 1000) * 1000 };
	int c;

	if (d->http_fd < 0 ||
	    (c = accept4(d->http_fd, NULL, NULL, SOCK_CLOEXEC)) < 0)
		return;
	(void)setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	serve_one(d, c);
	close(c);
}
