/* Internals of the kernel network backend (knet.c, knet_conn.c,
 * knet_recv.c, knet_send.c, knet_listen.c); not for inclusion elsewhere.
 * The design (requests, needs, teardown) is described at the head of
 * knet.c. The inlines are here because the completion paths of every file
 * run them per request. */
#ifndef KM_DATAPLANE_NET_KNET_PVT_H
#define KM_DATAPLANE_NET_KNET_PVT_H

#include <liburing.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/container.h"
#include "dataplane/net/net.h"
#include "iouring_log/uring.h"

#define KNET_NO_BUF UINT32_MAX

struct knet_link {
	struct knet_link *prev, *next;
};

enum conn_state {
	CONN_FREE,
	CONN_CONNECTING,
	CONN_OPEN,
	CONN_CLOSING, /* km_net_close(): flushing, FIN sent once flushed */
	CONN_DEAD,    /* tearing down: waiting for requests to complete */
};

enum conn_list { L_NONE, L_FREE, L_PENDING, L_STARVED };

enum conn_need {
	NEED_CONNECT = 1u << 0,
	NEED_RECV = 1u << 1,
	NEED_SEND = 1u << 2,
	NEED_TIMER = 1u << 3,
	NEED_CANCEL = 1u << 4,
	NEED_TREMOVE = 1u << 5,
	NEED_RXCANCEL = 1u << 6,
};

enum buf_state {
	BUF_POOL, /* in the kernel's buffer ring or on the free stack */
	BUF_RECV, /* taken by a receive, not yet delivered */
	BUF_USER, /* delivered: the consumer holds it */
};

struct send_slot {
	km_net_sent_fn fn;
	void *arg;
	size_t total;
	size_t left;	/* bytes the kernel has not taken yet */
	uint32_t n_iov; /* its iovecs still in the connection's iovec ring */
};

struct knet;

struct knet_conn {
	struct km_net_conn pub; /* first */
	struct knet *kn;
	struct knet_link link;
	enum conn_state state;
	enum conn_list list;
	int fd;
	int reason;	  /* the on_close / on_connect code once DEAD */
	uint32_t need;	  /* enum conn_need bits */
	uint32_t inflight;
	uint32_t rx_bid;  /* single-shot: buffer lent to the pending recv */
	bool established; /* on_close (not on_connect) ends it */
	bool abortive;	  /* close with SO_LINGER 0 */
	bool recv_armed;
	bool send_armed;
	bool timer_armed;
	bool shut_wr;
	bool stalled;
	bool rx_paused;	  /* km_net_recv_pause(): do not arm the receive */
	bool rx_cancelling; /* the armed multishot receive is being cancelled */
	struct km_io_req r_connect, r_ltimeout, r_recv, r_send;
	struct km_io_req r_timer, r_tremove, r_cancel, r_rxcancel;
	struct sockaddr_in peer;
	struct __kernel_timespec ts_connect, ts_close;
	struct msghdr msg;
	struct iovec *tx_iov;	/* the in-flight sendmsg's copy */
	size_t tx_bytes;
	struct send_slot *sq;	/* ring of send_queue_max */
	uint32_t sq_head, sq_count;
	struct iovec *sq_iov;	/* ring of send_iov_max */
	uint32_t si_head, si_count;
	struct km_net_conn_stats st;
};

struct knet_listener {
	struct km_net_listener pub; /* first */
	struct knet *kn;
	const struct km_net_handler *h;
	int fd;
	uint32_t inflight;
	bool used;
	bool closing;
	bool armed;
	bool multishot;
	bool need_arm;
	bool need_cancel;
	bool pending;
	struct km_io_req r_accept, r_cancel;
};

struct knet {
	struct km_net pub; /* first */
	struct km_uring *u;
	struct km_net_config cfg;
	bool multishot;
	uint32_t inflight; /* requests of this backend still due a CQE */
	uint32_t listeners_pending;
	struct knet_conn *conns;
	struct knet_listener *lsn;
	struct send_slot *slot_mem;
	struct iovec *iov_mem;
	struct knet_link free_list, pending, starved;
	/* Receive pool: rx_buf_count buffers of rx_buf_bytes in one mapping. */
	uint8_t *buf_mem;
	size_t buf_mem_bytes;
	uint8_t *buf_state;
	uint32_t *buf_stack; /* single-shot: free ids */
	uint32_t buf_stack_n;
	struct io_uring_buf_ring *br;
	size_t br_bytes;
	uint32_t br_mask;
	uint32_t ring_bufs; /* multishot: buffers in the kernel's ring */
	int bgid;
	struct km_net_stats st;
};

/* ---- lists ---------------------------------------------------------- */

static inline void link_init(struct knet_link *l)
{
	l->prev = l;
	l->next = l;
}

static inline bool link_empty(const struct knet_link *head)
{
	return head->next == head;
}

static inline void link_del(struct knet_link *l)
{
	l->prev->next = l->next;
	l->next->prev = l->prev;
	link_init(l);
}

static inline void link_add_tail(struct knet_link *head, struct knet_link *l)
{
	l->prev = head->prev;
	l->next = head;
	head->prev->next = l;
	head->prev = l;
}

static inline struct knet_link *list_head(struct knet *kn,
					  enum conn_list which)
{
	switch (which) {
	case L_FREE:
		return &kn->free_list;
	case L_PENDING:
		return &kn->pending;
	case L_STARVED:
		return &kn->starved;
	case L_NONE:
	default:
		return NULL;
	}
}

/* Move c onto list `to` (or off every list). */
static inline void conn_place(struct knet_conn *c, enum conn_list to)
{
	if (c->list == to)
		return;
	if (c->list != L_NONE)
		link_del(&c->link);
	if (to != L_NONE)
		link_add_tail(list_head(c->kn, to), &c->link);
	c->list = to;
}

/* ---- small helpers -------------------------------------------------- */

static inline struct knet *knet_of(struct km_net *net)
{
	return km_container_of(net, struct knet, pub);
}

static inline struct knet_conn *conn_of(struct km_net_conn *pc)
{
	return km_container_of(pc, struct knet_conn, pub);
}

static inline bool conn_rx_live(const struct knet_conn *c)
{
	return c->state == CONN_OPEN || c->state == CONN_CLOSING;
}

/* n free SQEs, submitting what is queued if the SQ is too full. The first of
 * them, or NULL: the caller keeps its need and retries from km_net_poll(). */
static inline struct io_uring_sqe *knet_sqe(struct knet *kn, unsigned n)
{
	struct io_uring *r = &kn->u->ring;

	if (io_uring_sq_space_left(r) < n && km_uring_submit(kn->u) < 0)
		return NULL;
	if (io_uring_sq_space_left(r) < n)
		return NULL;
	return io_uring_get_sqe(r);
}

/* Account for one request of c prepared in sqe. */
static inline void conn_op_start(struct knet_conn *c,
				 struct io_uring_sqe *sqe,
				 struct km_io_req *req)
{
	io_uring_sqe_set_data(sqe, req);
	km_uring_note_queued(c->kn->u);
	c->inflight++;
	c->kn->inflight++;
}

/* ---- knet_conn.c: connection life cycle ----------------------------- */

int km_knet_parse_ipv4(const char *ipv4, uint16_t port,
		       struct sockaddr_in *sa);
void km_knet_set_nodelay(int fd);
void km_knet_close_fd(int fd, bool abortive);
void km_knet_conn_init(struct knet *kn, struct knet_conn *c, uint32_t i);
struct knet_conn *km_knet_conn_alloc(struct knet *kn);
void km_knet_conn_service(struct knet_conn *c);
void km_knet_conn_op_done(struct knet_conn *c);
void km_knet_conn_teardown(struct knet_conn *c, int reason, bool abortive);
void km_knet_conn_shut_wr(struct knet_conn *c);
int km_knet_connect(struct km_net *net, const char *ipv4, uint16_t port,
		    const struct km_net_handler *h, void *ctx,
		    struct km_net_conn **out);
int km_knet_close(struct km_net_conn *pc);
void km_knet_abort(struct km_net_conn *pc);

/* ---- knet_recv.c: receive with provided buffers --------------------- */

int km_knet_bufs_init(struct knet *kn);
void km_knet_bufs_free_all(struct knet *kn);
int km_knet_prep_recv(struct knet_conn *c);
bool km_knet_prep_rxcancel(struct knet_conn *c);
void km_knet_on_rxcancel_cqe(struct km_io_req *req, int res, uint32_t flags);
int km_knet_recv_pause(struct km_net_conn *pc, bool paused);
void km_knet_on_recv_cqe(struct km_io_req *req, int res, uint32_t flags);
void km_knet_release(struct km_net *net, const uint32_t *ids, uint32_t n);

/* ---- knet_send.c: the send queue ------------------------------------ */

bool km_knet_prep_send(struct knet_conn *c);
void km_knet_on_send_cqe(struct km_io_req *req, int res, uint32_t flags);
void km_knet_send_fail_all(struct knet_conn *c);
int km_knet_send(struct km_net_conn *pc, const struct iovec *iov,
		 uint32_t n_iov, km_net_sent_fn fn, void *arg);

/* ---- knet_listen.c: listeners --------------------------------------- */

void km_knet_listener_init(struct knet *kn, struct knet_listener *l);
void km_knet_listener_service(struct knet_listener *l);
int km_knet_listen(struct km_net *net, const char *ipv4, uint16_t port,
		   const struct km_net_handler *h, void *ctx,
		   struct km_net_listener **out);
void km_knet_unlisten(struct km_net_listener *pl);

#endif
