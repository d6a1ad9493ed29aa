/* Loopback TCP throughput of the kernel network backend (dataplane/net/knet.c)
 * vs a plain blocking read(2)/write(2) loop, both directions.
 *
 * Same machine, same run, same bytes (1 GiB per round, best of 3). The side
 * under test runs on the main thread; the other end is a plain blocking
 * socket on a second thread in every case. Receive: the backend delivers
 * 64 KiB ring buffers (multishot recv when the kernel has it) and the
 * consumer releases each at once; plain read() uses a 64 KiB buffer. Send:
 * the backend keeps 8 sends of 1 MiB queued; plain write() writes 1 MiB at a
 * time. Reported: GB/s, and CPU seconds per GB of the measured thread (what
 * the worker pays), since the other end also needs a core of a shared box.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "dataplane/net/net.h"
#include "iouring_log/uring.h"

#define TOTAL_BYTES (1ull << 30)
#define CHUNK_BYTES (1u << 20)
#define READ_BYTES (64u << 10)
#define SENDS_QUEUED 8
#define ROUNDS 3

struct clock_pair {
	double wall;
	double cpu; /* this thread */
};

static struct clock_pair now(void)
{
	struct timespec w, c;

	clock_gettime(CLOCK_MONOTONIC, &w);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c);
	return (struct clock_pair){ w.tv_sec + w.tv_nsec / 1e9,
				    c.tv_sec + c.tv_nsec / 1e9 };
}

static uint8_t chunk[CHUNK_BYTES];

static void die(const char *what)
{
	fprintf(stderr, "bench-net: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int plain_listen(uint16_t *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, 4) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		die("listen");
	*port = ntohs(sa.sin_port);
	return fd;
}

static int plain_connect(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect");
	return fd;
}

static void write_all(int fd, uint64_t total)
{
	while (total > 0) {
		size_t n = total < CHUNK_BYTES ? total : CHUNK_BYTES;
		ssize_t w = write(fd, chunk, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("write");
		total -= (uint64_t)w;
	}
}

static void read_all(int fd, uint64_t total)
{
	static uint8_t buf[READ_BYTES];

	while (total > 0) {
		ssize_t r = read(fd, buf, sizeof(buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("read");
		total -= (uint64_t)r;
	}
}

/* The far end: a plain thread that writes (connecting to port) or reads
 * (accepting on lfd) TOTAL_BYTES. */
struct peer {
	pthread_t th;
	bool writer;
	uint16_t port;
	int lfd;
};

static void *peer_main(void *arg)
{
	struct peer *p = arg;

	if (p->writer) {
		int fd = plain_connect(p->port);

		write_all(fd, TOTAL_BYTES);
		close(fd);
	} else {
		int fd = accept(p->lfd, NULL, NULL);

		if (fd < 0)
			die("accept");
		read_all(fd, TOTAL_BYTES);
		close(fd);
	}
	return NULL;
}

static void peer_start(struct peer *p)
{
	if (pthread_create(&p->th, NULL, peer_main, p) != 0)
		die("pthread_create");
}

/* ---- plain ---------------------------------------------------------- */

static struct clock_pair plain_rx(void)
{
	struct peer p = { .writer = true };
	int lfd = plain_listen(&p.port), fd;
	struct clock_pair t0, t1;

	peer_start(&p);
	if ((fd = accept(lfd, NULL, NULL)) < 0)
		die("accept");
	t0 = now();
	read_all(fd, TOTAL_BYTES);
	t1 = now();
	pthread_join(p.th, NULL);
	close(fd);
	close(lfd);
	return (struct clock_pair){ t1.wall - t0.wall, t1.cpu - t0.cpu };
}

static struct clock_pair plain_tx(void)
{
	struct peer p = { .writer = false };
	struct clock_pair t0, t1;
	int fd;

	p.lfd = plain_listen(&p.port);
	peer_start(&p);
	fd = plain_connect(p.port);
	t0 = now();
	write_all(fd, TOTAL_BYTES);
	pthread_join(p.th, NULL); /* the reader has it all */
	t1 = now();
	close(fd);
	close(p.lfd);
	return (struct clock_pair){ t1.wall - t0.wall, t1.cpu - t0.cpu };
}

/* ---- kernel backend ------------------------------------------------- */

struct knet_side {
	struct km_net *net;
	struct km_net_conn *c;
	uint64_t queued, sent;
	int closed;
};

static void on_recv(struct km_net_conn *c, const struct km_chain *d,
		    const uint32_t *ids)
{
	km_net_release(c->net, ids, d->n_iov);
}

static void on_accept(struct km_net_conn *c)
{
	struct knet_side *s = km_net_conn_ctx(c);

	s->c = c;
}

static void on_close(struct km_net_conn *c, int reason)
{
	struct knet_side *s = km_net_conn_ctx(c);

	(void)reason;
	s->closed = 1;
}

static void on_sent(struct km_net_conn *c, void *arg, int res);

static void top_up(struct knet_side *s)
{
	struct iovec iov = { chunk, CHUNK_BYTES };

	while (s->queued < TOTAL_BYTES &&
	       s->queued - s->sent < (uint64_t)SENDS_QUEUED * CHUNK_BYTES) {
		if (km_net_send(s->c, &iov, 1, on_sent, s) != 0)
			return;
		s->queued += CHUNK_BYTES;
	}
}

static void on_sent(struct km_net_conn *c, void *arg, int res)
{
	struct knet_side *s = arg;

	(void)c;
	if (res < 0) {
		fprintf(stderr, "bench-net: send: %d\n", res);
		exit(1);
	}
	s->sent += (uint64_t)res;
	top_up(s);
}

static void on_connect(struct km_net_conn *c, int res)
{
	struct knet_side *s = km_net_conn_ctx(c);

	if (res != 0) {
		fprintf(stderr, "bench-net: connect: %d\n", res);
		exit(1);
	}
	top_up(s);
}

static const struct km_net_handler handler = { on_connect, on_accept,
					       on_recv, on_close };

static struct km_net *knet_make(struct km_uring *u)
{
	struct km_net_config cfg = {
		.kind = KM_NET_KERNEL,
		.conns_max = 4,
		.listeners_max = 1,
		.rx_buf_count = 64,
		.rx_buf_bytes = READ_BYTES,
		.send_queue_max = SENDS_QUEUED,
		.send_iov_max = 64,
		.rx_mode = KM_NET_RX_AUTO,
		.uring = u,
	};
	struct km_net *net;

	if (km_uring_init(u, 256) < 0 || km_net_create(&cfg, &net) < 0) {
		fprintf(stderr, "bench-net: no io_uring backend\n");
		exit(77);
	}
	return net;
}

static void knet_loop(struct km_uring *u, struct km_net *net,
		      const uint64_t *done, uint64_t target)
{
	/* The worker loop, bounded by the byte target. */
	while (*done < target) {
		if (km_uring_poll(u, !km_net_wants_poll(net)) < 0)
			die("poll");
		km_net_poll(net);
	}
}

static struct clock_pair knet_rx(bool *multishot)
{
	struct knet_side s = { 0 };
	struct km_uring u;
	struct km_net *net = knet_make(&u);
	struct km_net_listener *l;
	struct peer p = { .writer = true };
	struct km_net_stats st;
	struct clock_pair t0, t1;

	if (km_net_listen(net, "127.0.0.1", 0, &handler, &s, &l) < 0)
		die("km_net_listen");
	p.port = km_net_listener_port(l);
	peer_start(&p);
	t0 = now();
	km_net_get_stats(net, &st);
	while (st.bytes_in < TOTAL_BYTES) {
		if (km_uring_poll(&u, !km_net_wants_poll(net)) < 0)
			die("poll");
		km_net_poll(net);
		km_net_get_stats(net, &st);
	}
	t1 = now();
	*multishot = st.rx_multishot;
	pthread_join(p.th, NULL);
	km_net_destroy(net);
	km_uring_exit(&u);
	return (struct clock_pair){ t1.wall - t0.wall, t1.cpu - t0.cpu };
}

static struct clock_pair knet_tx(void)
{
	struct knet_side s = { 0 };
	struct km_uring u;
	struct km_net *net = knet_make(&u);
	struct peer p = { .writer = false };
	struct clock_pair t0, t1;

	p.lfd = plain_listen(&p.port);
	peer_start(&p);
	t0 = now();
	if (km_net_connect(net, "127.0.0.1", p.port, &handler, &s, &s.c) < 0)
		die("km_net_connect");
	knet_loop(&u, net, &s.sent, TOTAL_BYTES);
	pthread_join(p.th, NULL);
	t1 = now();
	km_net_destroy(net);
	km_uring_exit(&u);
	close(p.lfd);
	return (struct clock_pair){ t1.wall - t0.wall, t1.cpu - t0.cpu };
}

/* ---- report --------------------------------------------------------- */

static void keep_best(struct clock_pair *best, struct clock_pair t)
{
	if (best->wall == 0 || t.wall < best->wall)
		best->wall = t.wall;
	if (best->cpu == 0 || t.cpu < best->cpu)
		best->cpu = t.cpu;
}

static void report(const char *what, struct clock_pair knet,
		   struct clock_pair plain)
{
	double gb = TOTAL_BYTES / 1e9;

	printf("%s  knet  %6.2f GB/s  %5.3f CPU s/GB\n", what, gb / knet.wall,
	       knet.cpu / gb);
	printf("%s  plain %6.2f GB/s  %5.3f CPU s/GB\n", what, gb / plain.wall,
	       plain.cpu / gb);
	printf("%s  knet/plain: %.2fx throughput, %.2fx CPU per GB\n", what,
	       plain.wall / knet.wall, knet.cpu / plain.cpu);
}

int main(void)
{
	struct clock_pair krx = { 0, 0 }, prx = { 0, 0 };
	struct clock_pair ktx = { 0, 0 }, ptx = { 0, 0 };
	bool multishot = false;

	km_log_set_level(KM_LOG_WARN);
	memset(chunk, 0x6b, sizeof(chunk));
	for (int r = 0; r < ROUNDS; r++) {
		keep_best(&krx, knet_rx(&multishot));
		keep_best(&prx, plain_rx());
		keep_best(&ktx, knet_tx());
		keep_best(&ptx, plain_tx());
	}
	printf("loopback TCP, %llu MiB per round, best of %d; receive side "
	       "%s recv into 64 KiB buffers\n",
	       TOTAL_BYTES >> 20, ROUNDS,
	       multishot ? "multishot" : "single-shot");
	report("rx", krx, prx);
	report("tx", ktx, ptx);
	return 0;
}
