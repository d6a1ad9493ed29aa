/* Kernel network backend: receive with provided buffers. One mapping holds
 * rx_buf_count buffers; with multishot RECV (kernel >= 6.0, probed at
 * create) the free ones sit in a provided buffer ring the kernel picks
 * from, otherwise on a stack lending one to each single-shot RECV. A
 * delivered buffer belongs to the consumer until km_net_release(). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/chain.h"
#include "common/container.h"
#include "common/km_assert.h"
#include "dataplane/net/knet_pvt.h"

/* Buffer group ids tried before giving up (another user of the ring may
 * hold some: registration answers -EEXIST). */
#define KNET_BGID_TRIES 256u

static void *buf_addr(const struct knet *kn, uint32_t bid)
{
	return kn->buf_mem + (size_t)bid * kn->cfg.rx_buf_bytes;
}

static uint32_t bufs_free(const struct knet *kn)
{
	return kn->multishot ? kn->ring_bufs : kn->buf_stack_n;
}

/* Return n buffers to the kernel's ring (multishot) or the free stack. */
static void pool_put(struct knet *kn, const uint32_t *ids, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t bid = ids[i];

		KM_ASSERT_HOT(bid < kn->cfg.rx_buf_count);
		KM_ASSERT_HOT(kn->buf_state[bid] != BUF_POOL);
		kn->buf_state[bid] = BUF_POOL;
		if (kn->multishot)
			io_uring_buf_ring_add(kn->br, buf_addr(kn, bid),
					      kn->cfg.rx_buf_bytes,
					      (unsigned short)bid,
					      (int)kn->br_mask, (int)i);
		else
			kn->buf_stack[kn->buf_stack_n++] = bid;
	}
	if (kn->multishot) {
		/* Publishes the entries: a release store of the ring tail, so
		 * the kernel sees each entry's address before the new tail. */
		io_uring_buf_ring_advance(kn->br, (int)n);
		kn->ring_bufs += n;
	}
}

/* Move starved connections to the pending list, as many as there are free
 * buffers for them: km_net_poll() re-arms their receives. */
static void wake_starved(struct knet *kn)
{
	uint32_t avail = bufs_free(kn);

	while (avail > 0 && !link_empty(&kn->starved)) {
		struct knet_conn *c = km_container_of(kn->starved.next,
						      struct knet_conn, link);

		conn_place(c, L_PENDING);
		avail--;
	}
}

/* Arm the receive. @return 0 (armed or not wanted), -EBUSY (SQ full) or
 * -ENOBUFS (no free buffer: the connection is starved). */
int km_knet_prep_recv(struct knet_conn *c)
{
	struct knet *kn = c->kn;
	struct io_uring_sqe *sqe;

	if (!conn_rx_live(c) || c->recv_armed || c->rx_paused) {
		c->need &= ~(uint32_t)NEED_RECV;
		return 0;
	}
	if (bufs_free(kn) == 0)
		return -ENOBUFS;
	if ((sqe = knet_sqe(kn, 1)) == NULL)
		return -EBUSY;
	if (kn->multishot) {
		io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
		sqe->flags |= IOSQE_BUFFER_SELECT;
		sqe->buf_group = (uint16_t)kn->bgid;
	} else {
		uint32_t bid = kn->buf_stack[--kn->buf_stack_n];

		kn->buf_state[bid] = BUF_RECV;
		c->rx_bid = bid;
		io_uring_prep_recv(sqe, c->fd, buf_addr(kn, bid),
				   kn->cfg.rx_buf_bytes, 0);
	}
	conn_op_start(c, sqe, &c->r_recv);
	c->recv_armed = true;
	c->stalled = false;
	c->need &= ~(uint32_t)NEED_RECV;
	return 0;
}

/* The buffer a receive CQE carries, now BUF_RECV, or KNET_NO_BUF. */
static uint32_t recv_take_buf(struct knet_conn *c, uint32_t flags)
{
	struct knet *kn = c->kn;
	uint32_t bid;

	if (!kn->multishot) {
		bid = c->rx_bid;
		c->rx_bid = KNET_NO_BUF;
		return bid;
	}
	if (!(flags & IORING_CQE_F_BUFFER))
		return KNET_NO_BUF;
	bid = flags >> IORING_CQE_BUFFER_SHIFT;
	KM_ASSERT_HOT(bid < kn->cfg.rx_buf_count);
	KM_ASSERT_HOT(kn->buf_state[bid] == BUF_POOL);
	kn->buf_state[bid] = BUF_RECV;
	kn->ring_bufs--;
	return bid;
}

static void recv_deliver(struct knet_conn *c, uint32_t bid, uint32_t len)
{
	struct knet *kn = c->kn;
	struct iovec iov = { buf_addr(kn, bid), len };
	struct km_chain chain = { &iov, 1 };

	kn->buf_state[bid] = BUF_USER;
	kn->st.rx_bufs_held++;
	kn->st.bytes_in += len;
	kn->st.recvs++;
	c->st.bytes_in += len;
	c->st.recvs++;
	if (c->state == CONN_DEAD || c->pub.h->on_recv == NULL) {
		km_knet_release(&kn->pub, &bid, 1);
		return;
	}
	c->pub.h->on_recv(&c->pub, &chain, &bid);
}

/* A receive ended without bytes: EOF (0) or an error. */
static void recv_end(struct knet_conn *c, int res)
{
	switch (res) {
	case 0: /* the peer's FIN: orderly end */
		km_knet_conn_teardown(c, 0, false);
		break;
	case -ENOBUFS: /* the buffer ring ran dry: re-armed when refilled */
	case -EINTR:
	case -EAGAIN:
		break;
	case -ECANCELED: /* a pause, ours (teardown) or the ring going away */
		if (c->rx_cancelling && conn_rx_live(c))
			break;
		km_knet_conn_teardown(c, -ECANCELED, true);
		break;
	default: /* -ECONNRESET, -ETIMEDOUT, -EHOSTUNREACH, -EPIPE, ... */
		km_knet_conn_teardown(c, res, false);
		break;
	}
}

void km_knet_on_recv_cqe(struct km_io_req *req, int res, uint32_t flags)
{
	struct knet_conn *c = km_container_of(req, struct knet_conn, r_recv);
	bool final = !(flags & IORING_CQE_F_MORE);
	uint32_t bid = recv_take_buf(c, flags);

	if (final)
		c->recv_armed = false;
	if (res > 0) {
		KM_ASSERT_HOT(bid != KNET_NO_BUF);
		recv_deliver(c, bid, (uint32_t)res);
	} else {
		if (bid != KNET_NO_BUF) {
			pool_put(c->kn, &bid, 1);
			wake_starved(c->kn);
		}
		recv_end(c, res);
	}
	if (final)
		c->rx_cancelling = false;
	if (final && conn_rx_live(c)) {
		c->need |= NEED_RECV;
		km_knet_conn_service(c);
	}
	if (final)
		km_knet_conn_op_done(c);
}

/* A multishot receive stays armed across a pause unless cancelled; a
 * single-shot one ends with its one buffer and is simply not re-armed. */
bool km_knet_prep_rxcancel(struct knet_conn *c)
{
	struct io_uring_sqe *sqe;

	if (!c->recv_armed || !c->kn->multishot || c->rx_cancelling ||
	    !c->rx_paused) {
		c->need &= ~(uint32_t)NEED_RXCANCEL;
		return true;
	}
	if ((sqe = knet_sqe(c->kn, 1)) == NULL)
		return false;
	io_uring_prep_cancel(sqe, &c->r_recv, 0);
	conn_op_start(c, sqe, &c->r_rxcancel);
	c->rx_cancelling = true;
	c->need &= ~(uint32_t)NEED_RXCANCEL;
	return true;
}

void km_knet_on_rxcancel_cqe(struct km_io_req *req, int res, uint32_t flags)
{
	/* 0, -ENOENT (the receive had ended) or -EALREADY: the receive's own
	 * final CQE says the rest. */
	(void)res;
	(void)flags;
	km_knet_conn_op_done(
		km_container_of(req, struct knet_conn, r_rxcancel));
}

int km_knet_recv_pause(struct km_net_conn *pc, bool paused)
{
	struct knet_conn *c = conn_of(pc);

	if (!conn_rx_live(c) || c->rx_paused == paused)
		return 0;
	c->rx_paused = paused;
	c->need |= paused ? NEED_RXCANCEL : NEED_RECV;
	km_knet_conn_service(c);
	return 0;
}

void km_knet_release(struct km_net *net, const uint32_t *ids, uint32_t n)
{
	struct knet *kn = knet_of(net);

	for (uint32_t i = 0; i < n; i++) {
		KM_ASSERT(ids[i] < kn->cfg.rx_buf_count);
		KM_ASSERT(kn->buf_state[ids[i]] == BUF_USER);
	}
	KM_ASSERT(kn->st.rx_bufs_held >= n);
	kn->st.rx_bufs_held -= n;
	pool_put(kn, ids, n);
	wake_starved(kn);
}

/* ---- setup ---------------------------------------------------------- */

/* Multishot recv with a provided buffer ring, tried on a scratch ring and a
 * socketpair: a byte must come back in a ring buffer with the request still
 * armed (IORING_CQE_F_MORE). Kernels before 6.0 fail it. */
static bool probe_recv_multishot(void)
{
	struct __kernel_timespec ts = { 1, 0 };
	struct io_uring_buf_reg reg;
	struct io_uring_cqe *cqe;
	struct io_uring_sqe *sqe;
	struct io_uring r;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	bool ok = false;
	char buf[64];
	int sv[2] = { -1, -1 };
	void *br;

	if (io_uring_queue_init(4, &r, 0) < 0)
		return false;
	br = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		  -1, 0);
	if (br == MAP_FAILED)
		goto out_ring;
	io_uring_buf_ring_init(br);
	memset(&reg, 0, sizeof(reg));
	reg.ring_addr = (uint64_t)(uintptr_t)br;
	reg.ring_entries = 1;
	if (io_uring_register_buf_ring(&r, &reg, 0) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		goto out_ring;
	io_uring_buf_ring_add(br, buf, sizeof(buf), 0,
			      io_uring_buf_ring_mask(1), 0);
	io_uring_buf_ring_advance(br, 1);
	sqe = io_uring_get_sqe(&r);
	io_uring_prep_recv_multishot(sqe, sv[0], NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = 0;
	if (io_uring_submit(&r) != 1 || write(sv[1], "k", 1) != 1)
		goto out_ring;
	if (io_uring_wait_cqe_timeout(&r, &cqe, &ts) == 0) {
		ok = cqe->res == 1 && (cqe->flags & IORING_CQE_F_BUFFER) &&
		     (cqe->flags & IORING_CQE_F_MORE);
		io_uring_cqe_seen(&r, cqe);
	}
out_ring:
	/* Exiting the ring cancels the recv and drops the registration
	 * before the ring's memory goes. */
	io_uring_queue_exit(&r);
	if (sv[0] >= 0) {
		close(sv[0]);
		close(sv[1]);
	}
	if (br != MAP_FAILED)
		munmap(br, pg);
	return ok;
}

static uint32_t pow2_ceil(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

/* Map, register (first free group id) and fill the provided buffer ring. */
static int bring_setup(struct knet *kn)
{
	uint32_t entries = pow2_ceil(kn->cfg.rx_buf_count);
	struct io_uring_buf_reg reg;
	int rc = -EEXIST;

	kn->br_bytes = (size_t)entries * sizeof(struct io_uring_buf);
	kn->br = mmap(NULL, kn->br_bytes, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (kn->br == MAP_FAILED) {
		kn->br = NULL;
		return -ENOMEM;
	}
	io_uring_buf_ring_init(kn->br);
	memset(&reg, 0, sizeof(reg));
	reg.ring_addr = (uint64_t)(uintptr_t)kn->br;
	reg.ring_entries = entries;
	for (uint32_t g = 0; g < KNET_BGID_TRIES && rc == -EEXIST; g++) {
		reg.bgid = (uint16_t)g;
		rc = io_uring_register_buf_ring(&kn->u->ring, &reg, 0);
		kn->bgid = (int)g;
	}
	if (rc < 0) {
		munmap(kn->br, kn->br_bytes);
		kn->br = NULL;
		return rc;
	}
	kn->br_mask = (uint32_t)io_uring_buf_ring_mask(entries);
	for (uint32_t i = 0; i < kn->cfg.rx_buf_count; i++)
		kn->buf_state[i] = BUF_RECV; /* pool_put() expects not-POOL */
	for (uint32_t i = 0; i < kn->cfg.rx_buf_count; i++)
		pool_put(kn, &i, 1);
	return 0;
}

int km_knet_bufs_init(struct knet *kn)
{
	uint32_t n = kn->cfg.rx_buf_count;
	int rc;

	kn->buf_mem_bytes = (size_t)n * kn->cfg.rx_buf_bytes;
	kn->buf_mem = mmap(NULL, kn->buf_mem_bytes, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (kn->buf_mem == MAP_FAILED) {
		kn->buf_mem = NULL;
		return -ENOMEM;
	}
	kn->buf_state = calloc(n, sizeof(*kn->buf_state));
	kn->buf_stack = calloc(n, sizeof(*kn->buf_stack));
	if (kn->buf_state == NULL || kn->buf_stack == NULL)
		return -ENOMEM;
	kn->multishot = kn->cfg.rx_mode == KM_NET_RX_AUTO &&
			probe_recv_multishot();
	if (kn->multishot && (rc = bring_setup(kn)) < 0)
		return rc;
	for (uint32_t i = 0; !kn->multishot && i < n; i++)
		kn->buf_stack[kn->buf_stack_n++] = n - 1 - i;
	return 0;
}

void km_knet_bufs_free_all(struct knet *kn)
{
	if (kn->br != NULL) {
		io_uring_unregister_buf_ring(&kn->u->ring, kn->bgid);
		munmap(kn->br, kn->br_bytes);
	}
	if (kn->buf_mem != NULL)
		munmap(kn->buf_mem, kn->buf_mem_bytes);
	free(kn->buf_state);
	free(kn->buf_stack);
}
