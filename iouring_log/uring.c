#include "iouring_log/uring.h"

#include <errno.h>
#include <string.h>

#include "common/km_assert.h"
#include "iouring_log/log_dio.h"

/* CQEs reaped per pass before callbacks run (STYLE 13: bounded work). */
#define REAP_BATCH 64

int km_uring_init(struct km_uring *u, unsigned entries)
{
	memset(u, 0, sizeof(*u));
	return io_uring_queue_init(entries, &u->ring, 0);
}

void km_uring_exit(struct km_uring *u)
{
	KM_ASSERT(u->in_flight == 0);
	KM_ASSERT(u->queued == 0);
	km_dio_pool_free(u);
	io_uring_queue_exit(&u->ring);
}

/* An SQE, submitting what is queued if the SQ is full. */
static struct io_uring_sqe *get_sqe(struct km_uring *u)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	if (sqe == NULL && km_uring_submit(u) >= 0)
		sqe = io_uring_get_sqe(&u->ring);
	return sqe;
}

int km_uring_writev(struct km_uring *u, int fd, const struct iovec *iov,
		    unsigned n_iov, uint64_t off, bool link,
		    struct km_io_req *req)
{
	struct io_uring_sqe *sqe = get_sqe(u);

	if (sqe == NULL)
		return -EBUSY;
	io_uring_prep_writev(sqe, fd, iov, n_iov, off);
	if (link)
		sqe->flags |= IOSQE_IO_LINK;
	io_uring_sqe_set_data(sqe, req);
	u->queued++;
	return 0;
}

int km_uring_write(struct km_uring *u, int fd, const void *buf, uint32_t len,
		   uint64_t off, int buf_index, struct km_io_req *req)
{
	struct io_uring_sqe *sqe = get_sqe(u);

	if (sqe == NULL)
		return -EBUSY;
	if (buf_index >= 0)
		io_uring_prep_write_fixed(sqe, fd, buf, len, off, buf_index);
	else
		io_uring_prep_write(sqe, fd, buf, len, off);
	io_uring_sqe_set_data(sqe, req);
	u->queued++;
	return 0;
}

int km_uring_fdatasync(struct km_uring *u, int fd, struct km_io_req *req)
{
	struct io_uring_sqe *sqe = get_sqe(u);

	if (sqe == NULL)
		return -EBUSY;
	io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
	io_uring_sqe_set_data(sqe, req);
	u->queued++;
	return 0;
}

int km_uring_fsync(struct km_uring *u, int fd, struct km_io_req *req)
{
	struct io_uring_sqe *sqe = get_sqe(u);

	if (sqe == NULL)
		return -EBUSY;
	io_uring_prep_fsync(sqe, fd, 0);
	io_uring_sqe_set_data(sqe, req);
	u->queued++;
	return 0;
}

int km_uring_submit(struct km_uring *u)
{
	int rc;

	if (u->queued == 0)
		return 0;
	do
		rc = io_uring_submit(&u->ring);
	while (rc == -EINTR);
	if (rc < 0)
		return rc;
	KM_ASSERT((uint32_t)rc <= u->queued);
	u->queued -= (uint32_t)rc;
	u->in_flight += (uint32_t)rc;
	return rc;
}

struct reaped {
	struct km_io_req *req;
	int res;
	uint32_t flags;
};

/* Copy up to REAP_BATCH CQEs out, in completion order. */
static int reap(struct km_uring *u, struct reaped *out)
{
	struct io_uring_cqe *cqe;
	int n = 0;

	while (n < REAP_BATCH && io_uring_peek_cqe(&u->ring, &cqe) == 0) {
		out[n].req = io_uring_cqe_get_data(cqe);
		out[n].res = cqe->res;
		out[n].flags = cqe->flags;
		KM_ASSERT(out[n].req != NULL);
		if (!(cqe->flags & IORING_CQE_F_MORE))
			u->in_flight--;
		io_uring_cqe_seen(&u->ring, cqe);
		n++;
	}
	return n;
}

int km_uring_poll(struct km_uring *u, bool wait)
{
	struct reaped done[REAP_BATCH];
	struct io_uring_cqe *cqe;
	int rc, n;

	if ((rc = km_uring_submit(u)) < 0)
		return rc;
	if (wait && u->in_flight > 0) {
		do
			rc = io_uring_wait_cqe(&u->ring, &cqe);
		while (rc == -EINTR);
		if (rc < 0)
			return rc;
	}
	n = reap(u, done);
	for (int i = 0; i < n; i++)
		done[i].req->fn(done[i].req, done[i].res, done[i].flags);
	return n;
}

int km_uring_poll_for(struct km_uring *u, uint32_t timeout_us)
{
	struct __kernel_timespec ts = {
		.tv_sec = timeout_us / 1000000u,
		.tv_nsec = (long long)(timeout_us % 1000000u) * 1000,
	};
	struct io_uring_cqe *cqe;
	int rc;

	if ((rc = km_uring_submit(u)) < 0)
		return rc;
	if (timeout_us > 0 && u->in_flight > 0) {
		rc = io_uring_wait_cqe_timeout(&u->ring, &cqe, &ts);
		if (rc < 0 && rc != -ETIME && rc != -EINTR)
			return rc;
	}
	return km_uring_poll(u, false);
}

int km_uring_drain(struct km_uring *u)
{
	/* Bounded by the requests in flight: each pass completes at least one,
	 * and callbacks may queue a bounded follow-up (a sync after writes). */
	while (km_uring_busy(u) > 0) {
		int rc = km_uring_poll(u, true);

		if (rc < 0)
			return rc;
	}
	return 0;
}
