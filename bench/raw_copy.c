/* bench-raw-copy: the physical limit of a mirror on this machine — the
 * same bytes copied from a file over loopback TCP into another file, with
 * nothing in between (no protocol, no checks), fdatasync'ed at the end.
 *
 *   bench-raw-copy [--direct] SRC_FILE DST_FILE
 *
 * A sender thread sendfile()s SRC_FILE into a loopback TCP connection; the
 * receiving thread recv()s into a 1 MiB buffer and write()s to DST_FILE.
 * With --direct (issue 18's reference for direct I/O writers), DST_FILE is
 * opened O_DIRECT and the buffer (page aligned) is filled before each
 * write, so every write is whole blocks; the last one is padded with
 * zeros and the file cut back to the bytes copied.
 * Prints one line: `raw_copy bytes=B seconds=S gbps=G cpu_s_per_gb=C`
 * (`raw_copy_direct` with --direct) where CPU is the receiver's (user +
 * system, its thread only), the side a mirror host pays for. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BUF_BYTES (1u << 20)
#define BLOCK 4096u

struct sender {
	int listen_fd;
	int src_fd;
	off_t size;
	int rc;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double thread_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void *send_main(void *arg)
{
	struct sender *s = arg;
	int fd = accept(s->listen_fd, NULL, NULL);
	off_t off = 0;

	if (fd < 0) {
		s->rc = -errno;
		return NULL;
	}
	while (off < s->size) {
		ssize_t n = sendfile(fd, s->src_fd, &off, (size_t)(s->size - off));

		if (n <= 0) {
			s->rc = n < 0 ? -errno : -EIO;
			break;
		}
	}
	close(fd);
	return NULL;
}

static int listen_loopback(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(fd, 1) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
}

static int connect_loopback(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return -1;
	return fd;
}

static int write_all(int dst, const char *buf, size_t n)
{
	size_t w = 0;

	while (w < n) {
		ssize_t k = write(dst, buf + w, n - w);

		if (k <= 0)
			return -1;
		w += (size_t)k;
	}
	return 0;
}

/* recv until the buffer is full or EOF -> one O_DIRECT write of whole
 * blocks, until EOF; the tail padded, then cut; then fdatasync. */
static long long copy_direct(int sock, int dst, char *buf)
{
	long long total = 0;
	size_t have = 0;
	bool eof = false;

	while (!eof) {
		ssize_t n = recv(sock, buf + have, BUF_BYTES - have, 0);

		if (n < 0)
			return -1;
		eof = n == 0;
		have += (size_t)n;
		if (have < BUF_BYTES && !eof)
			continue;
		if (have > 0) {
			size_t padded = (have + BLOCK - 1) / BLOCK * BLOCK;

			memset(buf + have, 0, padded - have);
			if (write_all(dst, buf, padded) < 0)
				return -1;
		}
		total += (long long)have;
		have = 0;
	}
	if (ftruncate(dst, total) < 0)
		return -1;
	return fdatasync(dst) == 0 ? total : -1;
}

/* recv -> write until EOF, then fdatasync. */
static long long copy(int sock, int dst, char *buf)
{
	long long total = 0;

	for (;;) {
		ssize_t n = recv(sock, buf, BUF_BYTES, 0), w = 0;

		if (n == 0)
			break;
		if (n < 0)
			return -1;
		while (w < n) {
			ssize_t k = write(dst, buf + w, (size_t)(n - w));

			if (k < 0)
				return -1;
			w += k;
		}
		total += n;
	}
	return fdatasync(dst) == 0 ? total : -1;
}

int main(int argc, char **argv)
{
	struct sender s = { 0 };
	struct stat st;
	pthread_t th;
	uint16_t port = 0;
	bool direct = argc == 4 && strcmp(argv[1], "--direct") == 0;
	char *buf = NULL;
	double t0, c0, secs, cpu;
	long long got;
	int sock, dst;

	if (direct) {
		argc--;
		argv++;
	}
	if (argc != 3 || posix_memalign((void **)&buf, BLOCK, BUF_BYTES) != 0) {
		fprintf(stderr, "usage: bench-raw-copy [--direct] SRC_FILE DST_FILE\n");
		return 2;
	}
	if ((s.src_fd = open(argv[1], O_RDONLY)) < 0 || fstat(s.src_fd, &st) < 0 ||
	    (dst = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC |
				 (direct ? O_DIRECT : 0), 0644)) < 0 ||
	    (s.listen_fd = listen_loopback(&port)) < 0) {
		perror("bench-raw-copy");
		return 1;
	}
	s.size = st.st_size;
	pthread_create(&th, NULL, send_main, &s);
	if ((sock = connect_loopback(port)) < 0) {
		perror("connect");
		return 1;
	}
	t0 = now_s();
	c0 = thread_cpu_s();
	got = direct ? copy_direct(sock, dst, buf) : copy(sock, dst, buf);
	secs = now_s() - t0;
	cpu = thread_cpu_s() - c0;
	pthread_join(th, NULL);
	if (got != (long long)st.st_size || s.rc != 0) {
		fprintf(stderr, "bench-raw-copy: copied %lld of %lld bytes (%s)\n",
			got, (long long)st.st_size, strerror(-s.rc));
		return 1;
	}
	printf("%s bytes=%lld seconds=%.3f gbps=%.3f cpu_s_per_gb=%.3f\n",
	       direct ? "raw_copy_direct" : "raw_copy", got, secs, (double)got / secs / 1e9, cpu / ((double)got / 1e9));
	free(buf);
	return 0;
}
