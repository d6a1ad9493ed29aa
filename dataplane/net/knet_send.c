/* Kernel network backend: the send queue. km_net_send() queues a slot and
 * its iovecs in two rings per connection; one SENDMSG at a time takes all
 * that is queued, so order holds, and a short count is resubmitted. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "common/container.h"
#include "common/km_assert.h"
#include "dataplane/net/knet_pvt.h"

int km_knet_send(struct km_net_conn *pc, const struct iovec *iov,
		 uint32_t n_iov, km_net_sent_fn fn, void *arg)
{
	struct knet_conn *c = conn_of(pc);
	const struct km_net_config *cfg = &c->kn->cfg;
	struct send_slot *s;
	size_t total = 0;

	if (c->state != CONN_OPEN && c->state != CONN_CONNECTING)
		return -EPIPE;
	if (n_iov == 0 || n_iov > cfg->send_iov_max)
		return -EINVAL;
	for (uint32_t i = 0; i < n_iov; i++)
		total += iov[i].iov_len;
	if (total == 0 || total > INT32_MAX)
		return -EINVAL;
	if (c->sq_count == cfg->send_queue_max ||
	    c->si_count + n_iov > cfg->send_iov_max) {
		c->kn->st.send_queue_full++;
		return -EAGAIN;
	}
	for (uint32_t i = 0; i < n_iov; i++)
		c->sq_iov[(c->si_head + c->si_count + i) % cfg->send_iov_max] =
			iov[i];
	c->si_count += n_iov;
	s = &c->sq[(c->sq_head + c->sq_count) % cfg->send_queue_max];
	*s = (struct send_slot){ fn, arg, total, total, n_iov };
	c->sq_count++;
	c->need |= NEED_SEND;
	km_knet_conn_service(c);
	return 0;
}

/* Copy the queued iovecs (a ring) into the flat array sendmsg reads. */
static void build_tx(struct knet_conn *c)
{
	uint32_t cap = c->kn->cfg.send_iov_max;

	c->tx_bytes = 0;
	for (uint32_t i = 0; i < c->si_count; i++) {
		c->tx_iov[i] = c->sq_iov[(c->si_head + i) % cap];
		c->tx_bytes += c->tx_iov[i].iov_len;
	}
	memset(&c->msg, 0, sizeof(c->msg));
	c->msg.msg_iov = c->tx_iov;
	c->msg.msg_iovlen = c->si_count;
}

bool km_knet_prep_send(struct knet_conn *c)
{
	struct io_uring_sqe *sqe;

	if (c->state == CONN_CONNECTING)
		return true; /* keeps NEED_SEND: sent once connected */
	if (!conn_rx_live(c) || c->send_armed || c->si_count == 0) {
		c->need &= ~(uint32_t)NEED_SEND;
		return true;
	}
	if ((sqe = knet_sqe(c->kn, 1)) == NULL)
		return false;
	build_tx(c);
	KM_ASSERT(c->tx_bytes > 0);
	/* No MSG_WAITALL: a short count comes back and is resubmitted, so a
	 * slow peer never pins more than one request. */
	io_uring_prep_sendmsg(sqe, c->fd, &c->msg, MSG_NOSIGNAL);
	conn_op_start(c, sqe, &c->r_send);
	c->send_armed = true;
	c->need &= ~(uint32_t)NEED_SEND;
	return true;
}

/* Take n bytes off the head of the send queue. @return how many slots at
 * the head are now complete (their callbacks still to run). */
static uint32_t send_account(struct knet_conn *c, size_t n)
{
	uint32_t qcap = c->kn->cfg.send_queue_max;
	uint32_t icap = c->kn->cfg.send_iov_max;
	uint32_t done = 0;

	for (uint32_t i = 0; i < c->sq_count && n > 0; i++) {
		struct send_slot *s = &c->sq[(c->sq_head + i) % qcap];
		size_t take = n < s->left ? n : s->left;

		n -= take;
		s->left -= take;
		/* Drop the iovecs the kernel took; trim a partial one. */
		while (s->n_iov > 0 && (take > 0 || s->left == 0)) {
			struct iovec *v = &c->sq_iov[c->si_head];

			if (v->iov_len > take) {
				v->iov_base = (char *)v->iov_base + take;
				v->iov_len -= take;
				break;
			}
			take -= v->iov_len;
			c->si_head = (c->si_head + 1) % icap;
			c->si_count--;
			s->n_iov--;
		}
		if (s->left == 0)
			done++;
	}
	KM_ASSERT_HOT(n == 0);
	return done;
}

static void send_complete(struct knet_conn *c, uint32_t done)
{
	uint32_t cap = c->kn->cfg.send_queue_max;

	/* Slots the user queues from a callback go to the tail; the done ones
	 * stay at the head until popped here. */
	for (uint32_t i = 0; i < done; i++) {
		struct send_slot s = c->sq[c->sq_head];

		KM_ASSERT_HOT(s.left == 0);
		c->sq_head = (c->sq_head + 1) % cap;
		c->sq_count--;
		if (s.fn != NULL)
			s.fn(&c->pub, s.arg, (int)s.total);
	}
}

void km_knet_on_send_cqe(struct km_io_req *req, int res, uint32_t flags)
{
	struct knet_conn *c = km_container_of(req, struct knet_conn, r_send);
	struct knet *kn = c->kn;

	(void)flags;
	c->send_armed = false;
	if (res > 0) {
		kn->st.bytes_out += (uint64_t)res;
		kn->st.sends++;
		c->st.bytes_out += (uint64_t)res;
		c->st.sends++;
		if ((size_t)res < c->tx_bytes) {
			kn->st.short_sends++;
			c->st.short_sends++;
		}
		send_complete(c, send_account(c, (size_t)res));
	} else if (res == -EINTR || res == -EAGAIN) {
		/* resubmitted below */
	} else if (res == 0) {
		/* No progress on a stream. */
		km_knet_conn_teardown(c, -EPIPE, false);
	} else {
		/* -EPIPE, -ECONNRESET, ... */
		km_knet_conn_teardown(c, res, false);
	}
	if (c->state == CONN_CLOSING && c->si_count == 0 && !c->shut_wr)
		km_knet_conn_shut_wr(c);
	if (conn_rx_live(c) && c->si_count > 0)
		c->need |= NEED_SEND;
	km_knet_conn_service(c);
	km_knet_conn_op_done(c);
}

/* Fail every send still queued; the callbacks see the connection DEAD, so
 * a km_net_send() from one of them answers -EPIPE. */
void km_knet_send_fail_all(struct knet_conn *c)
{
	uint32_t cap = c->kn->cfg.send_queue_max;

	while (c->sq_count > 0) {
		struct send_slot s = c->sq[c->sq_head];

		c->sq_head = (c->sq_head + 1) % cap;
		c->sq_count--;
		if (s.fn != NULL)
			s.fn(&c->pub, s.arg, -ECANCELED);
	}
	c->si_head = c->si_count = 0;
}
