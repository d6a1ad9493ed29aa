/* km_log_replay: an internal partition read whole, batch by batch, from
 * its start to its appended offset - how a restart rebuilds what the
 * coordinators keep in memory (the committed offsets of
 * __consumer_offsets-0, the transactions of __transaction_state-0) from
 * their logs. One buffer of KM_LOG_REPLAY_BYTES for the whole walk; a
 * batch larger than that ends the walk early, as a read that cannot hold
 * it would (the coordinators' batches are far smaller). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "common/chain.h"
#include "common/errors.h"
#include "common/km_limits.h"
#include "common/log.h"
#include "iouring_log/log.h"

#define KM_LOG_REPLAY_BYTES (1u << 20)

/* The batches of one read, to fn; *next advances past each. */
static int replay_buf(const struct km_log *log, const char *who,
		      const uint8_t *buf, uint32_t len, km_log_batch_fn fn,
		      void *arg, int64_t *next)
{
	struct iovec iov = { (void *)buf, len };
	struct km_chain ch = { &iov, 1 };
	struct km_chain_cur cur = { 0, 0 };
	struct km_batch b;
	int n = 0, rc;

	while (cur.off < len &&
	       (rc = km_batch_parse(&b, &ch, cur, KM_BATCH_BYTES_MAX)) > 0) {
		int got = fn(arg, &b);

		if (got < 0)
			KM_WARN(who, "%s: batch at offset %" PRId64
				" skipped: %s", km_log_dir(log),
				km_batch_base_offset(&b), km_strerror(got));
		n += got > 0 ? got : 0;
		*next = km_batch_last_offset(&b) + 1;
		cur.off += (uint32_t)rc;
	}
	return n;
}

int km_log_replay(struct km_log *log, const char *who, km_log_batch_fn fn,
		  void *arg)
{
	int64_t next = km_log_start_offset(log);
	int64_t end = km_log_appended_offset(log);
	uint8_t *buf = malloc(KM_LOG_REPLAY_BYTES);
	int n = 0, rc = 0;

	if (buf == NULL)
		return -ENOMEM;
	while (rc == 0 && next < end) {
		struct km_log_read_result res;

		rc = km_log_read(log, next, end, KM_LOG_REPLAY_BYTES, buf,
				 KM_LOG_REPLAY_BYTES, &res);
		if (rc < 0 || res.batches == 0)
			break;
		n += replay_buf(log, who, buf, res.bytes, fn, arg, &next);
		if (res.next_offset > next)
			next = res.next_offset;
	}
	free(buf);
	return rc < 0 ? rc : n;
}
