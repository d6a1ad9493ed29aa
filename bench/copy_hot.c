/* bench-copy-hot: what the copy of a batch into the direct-I/O write
 * buffer costs when its bytes are still in the cache against when they
 * are not (issue 18 item 1: is processing a Fetch answer as it arrives
 * worth it?).
 *
 *   bench-copy-hot [GIB [ROUNDS]]   (default 2 GiB per case, 3 rounds)
 *
 * The copy is the one the writer does (km_crc32c_copy: CRC-32C on the
 * copy, streaming stores into a 2 MiB page-aligned buffer), 1 MiB at a
 * time, as the dio bench's 1 MiB batches. Before each copy a 1 MiB chunk
 * of a 64 MiB ring is written (memset, the stand-in for the kernel's
 * receive copy into the receive buffers); the copy then reads the chunk
 * written LAG bytes earlier: 0 (the chunk just written: hot, what a parse
 * as the bytes arrive could get at best), 4 MiB (a Fetch answer received
 * whole before it is parsed, as kmirrord does) and 32 MiB (half the
 * receive pool). The cases alternate within each round. CPU is the
 * thread's (CLOCK_THREAD_CPUTIME_ID) around the copies only.
 * Prints, per case, CPU s/GB of the copy and the GB/s it ran at, and what
 * a hot copy saves against each lag per GB moved. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/crc32c.h"

#define CHUNK (1u << 20)
#define RING (64u << 20)
#define DST (2u << 20)

static const uint32_t lags[] = { 0, 4u << 20, 32u << 20 };
#define N_LAGS (sizeof(lags) / sizeof(lags[0]))

static double cpu_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* bytes through the copy at lag; @return the copies' CPU seconds. */
static double run(uint8_t *ring, uint8_t *dst, uint64_t bytes, uint32_t lag,
		  uint32_t *crc)
{
	double spent = 0;
	uint32_t at = 0, d = 0;

	for (uint64_t done = 0; done < bytes; done += CHUNK) {
		uint32_t from = (at + RING - lag) % RING;
		double t0;

		memset(ring + at, (int)(done >> 20), CHUNK);
		t0 = cpu_now();
		*crc = km_crc32c_copy(*crc, dst + d, ring + from, CHUNK);
		spent += cpu_now() - t0;
		at = (at + CHUNK) % RING;
		d = (d + CHUNK) % DST;
	}
	return spent;
}

int main(int argc, char **argv)
{
	uint64_t bytes = (uint64_t)(argc > 1 ? atof(argv[1]) : 2.0) * (1u << 30);
	int rounds = argc > 2 ? atoi(argv[2]) : 3;
	uint8_t *ring = aligned_alloc(4096, RING);
	uint8_t *dst = aligned_alloc(4096, DST);
	double best[N_LAGS];
	uint32_t crc = 0;

	if (ring == NULL || dst == NULL || bytes < CHUNK || rounds < 1) {
		fprintf(stderr, "usage: bench-copy-hot [GIB [ROUNDS]]\n");
		return 2;
	}
	memset(ring, 1, RING);
	memset(dst, 0, DST);
	for (size_t i = 0; i < N_LAGS; i++)
		best[i] = 1e9;
	for (int r = 1; r <= rounds; r++) {
		for (size_t i = 0; i < N_LAGS; i++) {
			double s = run(ring, dst, bytes, lags[i], &crc);
			double spg = s / ((double)bytes / 1e9);

			printf("[round %d] copy+CRC of bytes written %2u MiB "
			       "before: %.3f CPU s/GB (%.2f GB/s)\n", r,
			       lags[i] >> 20, spg, 1 / spg);
			if (spg < best[i])
				best[i] = spg;
		}
	}
	printf("best of %d rounds: lag 0 %.3f, 4 MiB %.3f, 32 MiB %.3f CPU "
	       "s/GB\n", rounds, best[0], best[1], best[2]);
	printf("a hot copy saves %.3f CPU s/GB against an answer held whole "
	       "(4 MiB), %.3f against 32 MiB (hot/cold cost %.2fx, %.2fx) "
	       "(crc %08x)\n", best[1] - best[0], best[2] - best[0],
	       best[0] / best[1], best[0] / best[2], crc);
	return 0;
}
