/* Blocking Metadata v1 request to the source, for startup discovery. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/endian.h"
#include "common/errors.h"
#include "control/srcmeta.h"
#include "kafka/proto.h"

#define META_VERSION 2 /* the first with ClusterId */
#define REQ_BYTES_MAX (64u * 1024)
#define RESP_BYTES_MAX (16u * 1024 * 1024)

static long long ms_now(void)
{
	return (long long)km_clock_ms();
}

/* Wait for fd to be ready for events before deadline. */
static int wait_fd(int fd, short events, long long deadline)
{
	struct pollfd p = { .fd = fd, .events = events };
	long long left = deadline - ms_now();
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

static int connect_to(const struct km_config_addr *a, long long deadline)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	char port[8];
	int fd, rc, soerr = 0;
	socklen_t len = sizeof(soerr);

	snprintf(port, sizeof(port), "%u", a->port);
	if (getaddrinfo(a->host, port, &hints, &res) != 0)
		return -EHOSTUNREACH;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0) {
		freeaddrinfo(res);
		return -errno;
	}
	rc = connect(fd, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	if (rc < 0 && errno != EINPROGRESS)
		rc = -errno;
	else if ((rc = wait_fd(fd, POLLOUT, deadline)) == 0 &&
		 getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0)
		rc = -soerr;
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

static int io_all(int fd, void *buf, size_t len, bool out, long long deadline)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = out ? send(fd, (char *)buf + done, len - done,
				       MSG_NOSIGNAL)
				: recv(fd, (char *)buf + done, len - done, 0);
		int rc;

		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		if ((rc = wait_fd(fd, out ? POLLOUT : POLLIN, deadline)) < 0)
			return rc;
	}
	return 0;
}

static int build_request(const struct km_config *cfg, uint8_t *buf,
			 size_t cap, size_t *len)
{
	static struct km_wire_name names[KM_CONFIG_TOPICS_MAX];
	struct km_reqhdr h = { .api_key = KM_API_METADATA,
			       .api_version = META_VERSION,
			       .correlation_id = 1 };
	struct km_metadata_req m = { .topics = names,
				     .topics_max = KM_CONFIG_TOPICS_MAX,
				     .n_topics = (int32_t)cfg->topics_count };
	struct km_wire_wr w;
	int rc;

	km_wire_name_set(&h.client_id, "kmirrord");
	for (uint32_t i = 0; i < cfg->topics_count; i++)
		km_wire_name_set(&names[i], cfg->topics[i]);
	km_wire_wr_init(&w, buf, cap);
	if ((rc = km_proto_req_begin(&w, &h)) < 0 ||
	    (rc = km_metadata_req_encode(&w, META_VERSION, &m)) < 0 ||
	    (rc = km_wire_wr_frame_end(&w)) < 0)
		return rc;
	*len = w.pos;
	return 0;
}

struct meta_arrays {
	struct km_metadata_broker brokers[64];
	struct km_metadata_topic topics[KM_CONFIG_TOPICS_MAX];
	struct km_metadata_part parts[16384];
	int32_t nodes[65536];
};

static int decode(const struct km_config *cfg, uint8_t *body, uint32_t len,
		  struct km_srcmeta *out)
{
	struct meta_arrays *a = calloc(1, sizeof(*a));
	struct iovec iov = { body, len };
	struct km_chain ch = { &iov, 1 };
	struct km_chain_cur cur = { 0, 0 };
	struct km_metadata_resp m = {
		.brokers = a ? a->brokers : NULL, .brokers_max = 64,
		.topics = a ? a->topics : NULL,
		.topics_max = KM_CONFIG_TOPICS_MAX,
		.parts = a ? a->parts : NULL, .parts_max = 16384,
		.nodes = a ? a->nodes : NULL, .nodes_max = 65536,
	};
	struct km_wire_rd r;
	int32_t corr;
	int rc;

	if (a == NULL)
		return -ENOMEM;
	km_wire_rd_init(&r, &ch, cur, len, &km_wire_limits_default);
	if ((rc = km_resphdr_decode(&r, KM_API_METADATA, META_VERSION,
				    &corr)) == 0 && corr != 1)
		rc = KM_EWIREVALUE; /* not the answer to our request */
	if (rc == 0 && (rc = km_metadata_resp_decode(&r, META_VERSION, &m)) == 0) {
		for (uint32_t t = 0; t < m.n_topics; t++)
			for (uint32_t i = 0; i < cfg->topics_count; i++)
				if (m.topics[t].error_code == 0 &&
				    strcmp(m.topics[t].name.s, cfg->topics[i]) == 0)
					out->partitions[i] = m.topics[t].count;
		if (m.cluster_id.len > 0)
			snprintf(out->cluster_id, sizeof(out->cluster_id),
				 "%s", m.cluster_id.s);
	}
	free(a);
	return rc;
}

static int ask(const struct km_config *cfg, const struct km_config_addr *a,
	       int timeout_ms, struct km_srcmeta *out)
{
	long long deadline = ms_now() + timeout_ms;
	uint8_t *buf = malloc(REQ_BYTES_MAX), hdr[4];
	size_t len = 0;
	uint32_t size;
	int fd, rc;

	if (buf == NULL)
		return -ENOMEM;
	if ((rc = build_request(cfg, buf, REQ_BYTES_MAX, &len)) < 0 ||
	    (fd = rc = connect_to(a, deadline)) < 0) {
		free(buf);
		return rc;
	}
	if ((rc = io_all(fd, buf, len, true, deadline)) == 0 &&
	    (rc = io_all(fd, hdr, 4, false, deadline)) == 0) {
		size = km_load_be32(hdr);
		rc = size > RESP_BYTES_MAX ? KM_EWIREFRAMEMAX : 0;
	}
	free(buf);
	buf = NULL;
	if (rc == 0 && (buf = malloc(size)) == NULL)
		rc = -ENOMEM;
	if (rc == 0 && (rc = io_all(fd, buf, size, false, deadline)) == 0)
		rc = decode(cfg, buf, size, out);
	free(buf);
	close(fd);
	return rc;
}

int km_srcmeta_fetch(const struct km_config *cfg, int timeout_ms,
		     struct km_srcmeta *out, char *err, size_t err_len)
{
	int rc = -EINVAL;

	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < cfg->bootstrap_count; i++) {
		const struct km_config_addr *a = &cfg->bootstrap[i];

		if ((rc = ask(cfg, a, timeout_ms, out)) == 0)
			return 0;
		snprintf(err, err_len, "source %s:%u: Metadata: %s", a->host,
			 a->port, km_strerror(rc));
	}
	return rc;
}
