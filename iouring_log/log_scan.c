/* Reading batches back from a segment's .log, CRC-verified (recovery,
 * truncation, rebuilding producer state). Cold paths: the buffer is
 * allocated per scan and grows to the largest batch met. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/km_limits.h"
#include "iouring_log/log_pvt.h"

#define SCAN_BUF_BYTES (1u << 20)

int km_log_scan_init(struct log_scan *sc, struct km_log *log,
		     struct km_segment *seg, uint64_t pos, uint64_t end)
{
	memset(sc, 0, sizeof(*sc));
	sc->log = log;
	sc->seg = seg;
	sc->pos = pos;
	sc->end = end;
	sc->cap = SCAN_BUF_BYTES;
	sc->buf = malloc(sc->cap);
	return sc->buf == NULL ? -ENOMEM : 0;
}

void km_log_scan_fini(struct log_scan *sc)
{
	free(sc->buf);
	sc->buf = NULL;
}

/* Read [pos, pos + min(cap, end - pos)) into the buffer. */
static int refill(struct log_scan *sc)
{
	size_t want = sc->end - sc->pos < sc->cap ? sc->end - sc->pos : sc->cap;
	size_t got = 0;

	while (got < want) {
		ssize_t n = pread(sc->seg->log_fd, sc->buf + got, want - got,
				  (off_t)(sc->pos + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break; /* the file is shorter than end */
		got += (size_t)n;
	}
	sc->buf_pos = sc->pos;
	sc->have = got;
	return 0;
}

static int grow(struct log_scan *sc, size_t need)
{
	uint8_t *nb;

	if (need <= sc->cap)
		return 0;
	nb = realloc(sc->buf, need);
	if (nb == NULL)
		return -ENOMEM;
	sc->buf = nb;
	sc->cap = need;
	return 0;
}

/* Parse at sc->pos from what is buffered. */
static int parse_here(struct log_scan *sc, struct km_batch *b)
{
	size_t off = sc->pos - sc->buf_pos;

	sc->iov.iov_base = sc->buf + off;
	sc->iov.iov_len = sc->have - off;
	sc->chain.iov = &sc->iov;
	sc->chain.n_iov = 1;
	return km_batch_parse(b, &sc->chain, km_chain_start(&sc->chain),
			      sc->log->cfg.batch_bytes_max);
}

static bool buffered(const struct log_scan *sc)
{
	return sc->pos >= sc->buf_pos && sc->pos < sc->buf_pos + sc->have;
}

/* Need more bytes than buffered: grow to the batch's size and reread. */
static int reread(struct log_scan *sc)
{
	uint8_t hdr[KM_BATCH_LOG_OVERHEAD];
	size_t off = sc->pos - sc->buf_pos;
	int rc;

	if (sc->have - off >= sizeof(hdr)) {
		memcpy(hdr, sc->buf + off, sizeof(hdr));
		rc = grow(sc, (size_t)km_load_be32(hdr + KM_BATCH_OFF_LENGTH) +
				      KM_BATCH_LOG_OVERHEAD);
		if (rc < 0)
			return rc;
	}
	return refill(sc);
}

int km_log_scan_next(struct log_scan *sc, struct km_batch *b, uint64_t *pos)
{
	int rc;

	*pos = sc->pos;
	if (sc->pos >= sc->end)
		return 0;
	if (!buffered(sc) && (rc = refill(sc)) < 0)
		return rc;
	rc = parse_here(sc, b);
	if (rc == 0 && sc->buf_pos + sc->have < sc->end) {
		if ((rc = reread(sc)) < 0)
			return rc;
		rc = parse_here(sc, b);
	}
	if (rc == 0)
		return -ENODATA; /* the file ends inside this batch: torn */
	if (rc > 0)
		sc->pos += (uint64_t)rc;
	return rc;
}
