/* One io_uring per worker thread, for the log's writes and fdatasyncs and
 * the worker's sockets.
 *
 * Completions are intrusive and owned by the caller (STYLE 15): a
 * struct km_io_req is embedded in the caller's object and travels as the
 * SQE's user_data. km_uring_poll() first copies a bounded batch of CQEs into
 * a local array and only then runs the callbacks, so a callback that submits
 * more work never recurses into the reaper. Multishot requests (one SQE,
 * many CQEs flagged IORING_CQE_F_MORE) are supported: the same request may
 * appear several times in one batch, and it stays in flight until a CQE
 * without IORING_CQE_F_MORE ends it.
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
struct km_dio_pool; /* log_dio.c: the worker's aligned write buffers */

/* res is the CQE result: bytes for writes, 0 for fsync, or -errno; flags
 * the CQE flags (IORING_CQE_F_MORE, IORING_CQE_F_BUFFER and its buffer id). */
typedef void (*km_io_fn)(struct km_io_req *req, int res, uint32_t flags);

struct km_io_req {
	km_io_fn fn;
};

/* Fields are private; the struct is visible so workers can embed it. */
struct km_uring {
	struct io_uring ring;
	uint32_t in_flight; /* submitted and not yet finally completed */
	uint32_t queued;    /* prepared and not yet submitted */
	/* The direct-I/O write buffers of the logs on this ring, made at the
	 * first direct write and registered with the ring (log_dio.c). */
	struct km_dio_pool *dio;
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
 * Queue a positioned write of len bytes from buf: with buf_index >= 0, a
 * buffer registered with the ring (IORING_OP_WRITE_FIXED, no page pinning
 * per write), else a plain IORING_OP_WRITE. buf must stay valid until the
 * request completes. @return 0, or -EBUSY when the SQ is full.
 */
int km_uring_write(struct km_uring *u, int fd, const void *buf, uint32_t len,
		   uint64_t off, int buf_index, struct km_io_req *req);

/**
 * Queue an fdatasync. It covers the writes to fd that completed before it
 * is issued, so callers queue it only once those writes have completed
 * (IOSQE_IO_DRAIN would also hold back every later write until the sync ends).
 * @return 0, or -EBUSY.
 */
int km_uring_fdatasync(struct km_uring *u, int fd, struct km_io_req *req);

/** Queue a full fsync (the file's size and metadata too; a directory's
 *  names). @return 0, or -EBUSY. */
int km_uring_fsync(struct km_uring *u, int fd, struct km_io_req *req);

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

/**
 * km_uring_poll() that blocks at most timeout_us for a completion: for a
 * caller that also polls something io_uring does not see (a DPDK queue)
 * and naps between polls rather than spinning.
 * @return the number of callbacks run (0 if the time passed), or -errno.
 */
int km_uring_poll_for(struct km_uring *u, uint32_t timeout_us);

/** Submit and poll until nothing is in flight. @return 0 or -errno. */
int km_uring_drain(struct km_uring *u);

/**
 * Account for an SQE the caller prepared itself with io_uring_get_sqe() on
 * u->ring (for operations this wrapper has no helper for, e.g. multishot
 * recv); its user_data must be a struct km_io_req.
 */
static inline void km_uring_note_queued(struct km_uring *u)
{
	u->queued++;
}

/** Requests submitted and not yet completed, plus queued ones. */
static inline uint32_t km_uring_busy(const struct km_uring *u)
{
	return u->in_flight + u->queued;
}

#ifdef __cplusplus
}
#endif

#endif
