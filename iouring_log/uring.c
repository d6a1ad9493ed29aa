#include "iouring_log/uring.h"

#include <errno.h>
#include <string.h>

#include "common/km_assert.h"

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

/* Move up to REAP_BATCH CQEs onto a list, in completion order. */
static struct km_io_req *reap(struct km_uring *u)
{
	struct km_io_req *head = NULL, **tail = &head;
	struct io_uring_cqe *cqe;

	for (int i = 0; i < REAP_BATCH; i++) {
		if (io_uring_peek_cqe(&u->ring, &cqe) != 0)
			break;
		struct km_io_req *req = io_uring_cqe_get_data(cqe);

		KM_ASSERT(req != NULL);
		req->res = cqe->res;
		req->next = NULL;
		*tail = req;
		tail = &req->next;
		io_uring_cqe_seen(&u->ring, cqe);
		u->in_flight--;
	}
	return head;
}

int km_uring_poll(struct km_uring *u, bool wait)
{
	struct io_uring_cqe *cqe;
	struct km_io_req *req;
	int rc, ran = 0;

	if ((rc = km_uring_submit(u)) < 0)
		return rc;
	if (wait && u->in_flight > 0) {
		do
			rc = io_uring_wait_cqe(&u->ring, &cqe);
		while (rc == -EINTR);
		if (rc < 0)
			return rc;
	}
	req = reap(u);
	while (req != NULL) {
		struct km_io_req *next = req->next;

		req->fn(req, req->res);
		req = next;
		ran++;
	}
	return ran;
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
