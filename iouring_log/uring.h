/* One io_uring per worker thread, for the log's writes and fdatasyncs.
 *
 * Completions are intrusive and owned by the caller (STYLE 15): a
 * struct km_io_req is embedded in the caller's object and travels as the
 * SQE's user_data. km_uring_poll() first drains the CQ into a local list and
 * only then runs the callbacks, so a callback that submits more work never
 * recurses into the reaper.
 */
#ifndef KM_IOURING_LOG_URING_H
#define KM_IOURING_LOG_URING_H

#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

struct km_io_req;

/* res is the CQE result: bytes for writes, 0 for fsync, or -errno. */
typedef void (*km_io_fn)(struct km_io_req *req, int res);

struct km_io_req {
	km_io_fn fn;
	int res;		/* private: set by the reaper */
	struct km_io_req *next; /* private: reaper's run list */
};

/* Fields are private; the struct is visible so workers can embed it. */
struct km_uring {
	struct io_uring ring;
	uint32_t in_flight; /* submitted and not yet completed */
	uint32_t queued;    /* prepared and not yet submitted */
};

/**
 * Set up a ring with room for entries SQEs.
 * @return 0, or -errno from io_uring_queue_init (-ENOSYS or -EPERM where
 *         io_uring is unavailable or forbidden).
 */
int km_uring_init(struct km_uring *u, unsigned entries);

/** Tear the ring down. Every request must have completed. */
void km_uring_exit(struct km_uring *u);

/**
 * Queue a positioned vectored write. The iovec array must stay valid until
 * the request completes (it is read when the kernel issues the write, which
 * may be after submission), and so must the data.
 * @param link  order the next queued request after this one (IOSQE_IO_LINK).
 * @return 0, or -EBUSY when the SQ is full even after submitting.
 */
int km_uring_writev(struct km_uring *u, int fd, const struct iovec *iov,
		    unsigned n_iov, uint64_t off, bool link,
		    struct km_io_req *req);

/**
 * Queue an fdatasync. It covers the writes to fd that completed before it
 * is issued, so callers queue it only once those writes have completed
 * (IOSQE_IO_DRAIN would also hold back every later write until the sync ends).
 * @return 0, or -EBUSY.
 */
int km_uring_fdatasync(struct km_uring *u, int fd, struct km_io_req *req);

/**
 * Submit everything queued, in one io_uring_enter.
 * @return the number submitted, or -errno.
 */
int km_uring_submit(struct km_uring *u);

/**
 * Reap completions and run their callbacks.
 * @param wait  block until at least one completion if any is in flight.
 * @return the number of callbacks run, or -errno.
 */
int km_uring_poll(struct km_uring *u, bool wait);

/** Submit and poll until nothing is in flight. @return 0 or -errno. */
int km_uring_drain(struct km_uring *u);

/** Requests submitted and not yet completed, plus queued ones. */
static inline uint32_t km_uring_busy(const struct km_uring *u)
{
	return u->in_flight + u->queued;
}

#ifdef __cplusplus
}
#endif

#endif
