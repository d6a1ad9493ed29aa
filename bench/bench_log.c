/* Append throughput of the partition log through io_uring vs plain write(2)
 * + fdatasync of the same batches, and the recovery scan speed.
 *
 * Same machine, same run, same bytes: 16 KiB batches (the Kafka producer's
 * default batch.size) of random-looking records, mapped as the mirror would.
 * Both writers sync every 64 MiB and once at the end, so both report the
 * rate at which data became durable. The disk bounds both figures here, so
 * CPU time per GB moved is reported too: that is what the writer costs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/endian.h"
#include "common/errors.h"
#include "common/km_limits.h"
#include "common/log.h"
#include "iouring_log/log.h"
#include "kafka/records.h"

#define BATCH_BYTES (16 * 1024)
#define TOTAL_BYTES (512ull << 20)
#define SYNC_EVERY (64ull << 20)
#define ROUNDS 3

struct clock_pair {
	double wall;
	double cpu;
};

static struct clock_pair now(void)
{
	struct timespec w, c;

	clock_gettime(CLOCK_MONOTONIC, &w);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c);
	return (struct clock_pair){ w.tv_sec + w.tv_nsec / 1e9,
				    c.tv_sec + c.tv_nsec / 1e9 };
}

/* One 16 KiB batch of ~150-byte records at base offset `base`. */
static int build_batch(uint8_t *out, int64_t base, uint64_t *rng)
{
	static uint8_t value[128];
	struct km_record_spec recs[100];
	struct km_batch_spec spec = { base, 0, 0, -5002, 0, (int32_t)base };
	int n = 0, size = KM_BATCH_HEADER_BYTES;

	for (size_t i = 0; i < sizeof(value); i++) {
		*rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
		value[i] = (uint8_t)(*rng >> 56);
	}
	while (n < 100 && size + 160 < BATCH_BYTES) {
		recs[n] = (struct km_record_spec){ "key", 3, value, 128,
						   1700000000000 + n, NULL, 0 };
		size = km_records_build_size(recs, ++n);
	}
	return km_records_build(out, BATCH_BYTES, &spec, recs, n);
}

struct corpus {
	uint8_t *bytes;
	uint32_t *sizes;
	int64_t *bases;
	uint32_t n;
};

static int make_corpus(struct corpus *c)
{
	uint64_t rng = 42, off = 0;
	int64_t base = 0;

	c->n = (uint32_t)(TOTAL_BYTES / BATCH_BYTES);
	c->bytes = malloc((size_t)c->n * BATCH_BYTES);
	c->sizes = calloc(c->n, sizeof(*c->sizes));
	c->bases = calloc(c->n, sizeof(*c->bases));
	if (!c->bytes || !c->sizes || !c->bases)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->n; i++) {
		int sz = build_batch(c->bytes + off, base, &rng);

		if (sz < 0)
			return sz;
		c->sizes[i] = (uint32_t)sz;
		c->bases[i] = base;
		base += (int64_t)km_load_be32(c->bytes + off + 23) + 1;
		off += BATCH_BYTES;
	}
	return 0;
}

static int run_plain(const char *dir, const struct corpus *c, uint64_t *bytes)
{
	char path[512];
	uint64_t since = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/plain.log", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -errno;
	*bytes = 0;
	for (uint32_t i = 0; i < c->n; i++) {
		const uint8_t *p = c->bytes + (size_t)i * BATCH_BYTES;

		if (write(fd, p, c->sizes[i]) != (ssize_t)c->sizes[i])
			return -EIO;
		*bytes += c->sizes[i];
		since += c->sizes[i];
		if (since >= SYNC_EVERY && fdatasync(fd) == 0)
			since = 0;
	}
	if (fdatasync(fd) < 0)
		return -errno;
	close(fd);
	return unlink(path);
}

struct views {
	struct iovec *iov;
	struct km_chain *chain;
	struct km_batch *b;
};

static int make_views(const struct corpus *c, struct views *v)
{
	v->iov = calloc(c->n, sizeof(*v->iov));
	v->chain = calloc(c->n, sizeof(*v->chain));
	v->b = calloc(c->n, sizeof(*v->b));
	if (!v->iov || !v->chain || !v->b)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->n; i++) {
		v->iov[i] = (struct iovec){ c->bytes + (size_t)i * BATCH_BYTES,
					    c->sizes[i] };
		v->chain[i] = (struct km_chain){ &v->iov[i], 1 };
		int rc = km_batch_parse(&v->b[i], &v->chain[i],
					km_chain_start(&v->chain[i]),
					KM_BATCH_BYTES_MAX);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void log_config(struct km_log_config *cfg, const char *dir)
{
	km_log_config_defaults(cfg, dir, "bench", 0);
	cfg->flush_bytes = SYNC_EVERY;
	cfg->flush_interval_ms = 60000;
}

/* Append everything in bursts of 32, polling the ring when it is full. */
static int run_kmirror(const char *dir, struct views *v, uint32_t n,
		       uint64_t *bytes)
{
	struct km_log_config cfg;
	struct km_log_append_result res;
	struct km_uring ring;
	struct km_log *log;
	uint32_t i = 0;
	int rc;

	log_config(&cfg, dir);
	if ((rc = km_uring_init(&ring, 256)) < 0)
		return rc;
	if ((rc = km_log_open(&log, &cfg, &ring, NULL)) < 0)
		return rc;
	while (i < n && rc >= 0) {
		uint32_t burst = n - i < 32 ? n - i : 32;

		rc = km_log_append_burst(log, &v->b[i], burst, KM_ORIGIN_MIRROR,
					 &res);
		if (rc >= 0)
			i += (uint32_t)rc;
		if (rc >= 0 && (uint32_t)rc < burst)
			rc = km_uring_poll(&ring, true);
		else
			(void)km_uring_poll(&ring, false);
	}
	if (rc >= 0)
		rc = km_log_flush(log);
	if (rc >= 0)
		rc = km_log_sync(log);
	*bytes = 0;
	for (uint32_t k = 0; k < n && km_batch_last_offset(&v->b[k]) <
					      km_log_durable_offset(log); k++)
		*bytes += km_batch_size(&v->b[k]);
	km_log_close(log);
	km_uring_exit(&ring);
	return rc < 0 ? rc : 0;
}

static int run_recovery(const char *dir, uint64_t *bytes)
{
	char path[1024];
	struct km_log_config cfg;
	struct km_log_recovery rec;
	struct km_uring ring;
	struct km_log *log;
	int rc;

	/* Without the marker and snapshots the whole log is scanned. */
	snprintf(path, sizeof(path), "%s/bench-0/.kafka_cleanshutdown", dir);
	unlink(path);
	snprintf(path, sizeof(path),
		 "rm -f %s/bench-0/*.snapshot", dir);
	if (system(path) != 0)
		return -EIO;
	log_config(&cfg, dir);
	if ((rc = km_uring_init(&ring, 64)) < 0)
		return rc;
	rc = km_log_open(&log, &cfg, &ring, &rec);
	if (rc == 0) {
		*bytes = rec.bytes_scanned;
		km_log_close(log);
	}
	km_uring_exit(&ring);
	return rc;
}

static void cleanup(const char *dir)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "rm -rf %s/bench-0", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "bench-log: could not remove %s/bench-0\n", dir);
}

static void report(const char *what, uint64_t bytes, struct clock_pair t0,
		   struct clock_pair t1, double *gbps)
{
	double gb = (double)bytes / 1e9;

	*gbps = gb / (t1.wall - t0.wall);
	printf("  %-34s %7.3f GB/s  %6.3f s CPU per GB\n", what, *gbps,
	       (t1.cpu - t0.cpu) / gb);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/tmp";
	char work[256];
	struct corpus c;
	struct views v;
	double best_k = 0, best_p = 0, best_r = 0;

	km_log_set_level(KM_LOG_WARN);
	snprintf(work, sizeof(work), "%s/kmirror-bench-log-%d", dir, getpid());
	if (mkdir(work, 0755) < 0 || make_corpus(&c) < 0 || make_views(&c, &v) < 0)
		return 1;
	printf("bench-log: %llu MiB of %d KiB batches on %s, sync every %llu MiB;"
	       " best of %d rounds\n", TOTAL_BYTES >> 20, BATCH_BYTES >> 10, work,
	       SYNC_EVERY >> 20, ROUNDS);
	for (int r = 0; r < ROUNDS; r++) {
		uint64_t bytes;
		struct clock_pair t0, t1;
		double g;

		t0 = now();
		if (run_kmirror(work, &v, c.n, &bytes) < 0)
			return 1;
		t1 = now();
		report("(k) kmirror log, io_uring", bytes, t0, t1, &g);
		best_k = g > best_k ? g : best_k;
		t0 = now();
		if (run_recovery(work, &bytes) < 0)
			return 1;
		t1 = now();
		report("(r) recovery scan (page cache)", bytes, t0, t1, &g);
		best_r = g > best_r ? g : best_r;
		cleanup(work);
		t0 = now();
		if (run_plain(work, &c, &bytes) < 0)
			return 1;
		t1 = now();
		report("(p) write(2) + fdatasync", bytes, t0, t1, &g);
		best_p = g > best_p ? g : best_p;
	}
	printf("best: kmirror %.3f GB/s, plain %.3f GB/s, ratio k/p = %.2f; "
	       "recovery scan %.3f GB/s\n", best_k, best_p, best_k / best_p,
	       best_r);
	rmdir(work);
	return 0;
}
