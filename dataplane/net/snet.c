/* TLS and SASL over another network backend (snet.h). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/container.h"
#include "common/endian.h"
#include "common/errors.h"
#include "common/log.h"
#include "dataplane/net/snet.h"

#define SENDS_MAX 16u	/* outer sends waiting for their ciphertext */
#define LISTENERS_MAX 8u /* TLS listeners (km_snet_listen) */

struct osend {
	km_net_sent_fn fn;
	void *arg;
	int total;
	uint64_t mark;	/* ciphertext bytes out once this one is all out */
};

struct slsn;

struct sconn {
	struct km_net_conn pub;	/* first */
	struct snet *sn;
	struct km_net_conn *inner;
	struct km_secconn *sc;
	bool used, up, failed, paused, backlog;
	/* Accepted on a TLS listener: reported to it once the handshake is
	 * done, before hs_deadline (km_clock_ms); upaused: the consumer's
	 * km_net_recv_pause(). */
	struct slsn *lsn;
	uint64_t hs_deadline;
	bool upaused;
	int err;		/* the error that ends it */
	uint64_t produced, sent; /* ciphertext bytes made, taken by inner */
	struct osend q[SENDS_MAX];
	uint32_t q_head, q_n;
	uint8_t *stash;		/* ciphertext the inner queue refused */
	size_t stash_len;
	char host[256];
	uint16_t port;
	/* KIP-368: requests sent and answers delivered (framed here), so
	 * that re-authentication starts only between them. */
	uint64_t reqs, resps;
	uint8_t hdr[4];
	uint32_t hdr_have, body_left;
	int64_t reauth_at;	/* km_clock_ms; 0: never */
	char why[800];
};

/* A TLS listener: the inner backend's, its connections ours. */
struct slsn {
	struct km_net_listener pub;	/* first; pub.ctx: the caller's */
	struct km_net_listener *inner;
	const struct km_netsec *sec;
	const struct km_net_handler *h;
	bool used;
};

struct snet {
	struct km_net pub;	/* first */
	struct km_net *inner;
	const struct km_netsec *sec;
	uint32_t conns_max, nbufs, buf_bytes;
	struct sconn *conns;
	uint8_t *bufs;
	uint32_t *free_ids, n_free;
	bool service;		/* some connection has work for poll */
	int64_t next_reauth_ms;	/* the earliest reauth_at; 0: none */
	struct slsn lsns[LISTENERS_MAX];
	uint32_t handshaking;	/* accepted, handshake not done */
	uint64_t hs_checked_ms;
	struct km_net_stats st;
};

static const struct km_net_ops snet_ops;

static struct snet *sn_of(struct km_net *n)
{
	return km_container_of(n, struct snet, pub);
}

static struct sconn *sc_of(struct km_net_conn *c)
{
	return km_container_of(c, struct sconn, pub);
}

bool km_snet_is(const struct km_net *net)
{
	return net->ops == &snet_ops;
}

void km_snet_conn_set_host(struct km_net_conn *c, const char *host)
{
	if (km_snet_is(c->net))
		snprintf(sc_of(c)->host, sizeof(sc_of(c)->host), "%s", host);
}

const char *km_snet_conn_why(const struct km_net_conn *c)
{
	if (!km_snet_is(c->net))
		return "";
	return km_container_of(c, const struct sconn, pub)->why;
}

/* ---- sending ciphertext ---- */

static void in_sent(struct km_net_conn *ic, void *arg, int res);
static bool reauth_due(const struct sconn *c, int64_t now);
static int reauth_step(struct sconn *c, bool start);

/* Hand what the TLS session produced to the inner backend. */
static int flush(struct sconn *c)
{
	size_t n;
	int rc;

	if (c->stash == NULL) {
		if ((n = km_secconn_output_pending(c->sc)) == 0)
			return 0;
		if ((c->stash = malloc(n)) == NULL)
			return -ENOMEM;
		c->stash_len = km_secconn_output(c->sc, c->stash, n);
		c->produced += c->stash_len;
	}
	rc = km_net_send(c->inner, &(struct iovec){ c->stash, c->stash_len },
			 1, in_sent, c->stash);
	if (rc == -EAGAIN) {
		c->sn->service = true; /* poll retries */
		return 0;
	}
	if (rc < 0) {
		free(c->stash);
		c->stash = NULL;
		return rc;
	}
	c->stash = NULL;
	return 0;
}

/* The outer sends whose ciphertext is all out are done. */
static void complete_sends(struct sconn *c, int res)
{
	while (c->q_n > 0) {
		struct osend *o = &c->q[c->q_head];

		if (res >= 0 && o->mark > c->sent)
			return;
		c->q_head = (c->q_head + 1) % SENDS_MAX;
		c->q_n--;
		if (o->fn != NULL)
			o->fn(&c->pub, o->arg, res >= 0 ? o->total : res);
	}
}

static void in_sent(struct km_net_conn *ic, void *arg, int res)
{
	struct sconn *c = km_net_conn_ctx(ic);

	free(arg);
	if (res > 0)
		c->sent += (uint64_t)res;
	if (c->up)
		complete_sends(c, res < 0 ? -ECANCELED : 0);
}

static int s_send(struct km_net_conn *pc, const struct iovec *iov,
		  uint32_t n_iov, km_net_sent_fn fn, void *arg)
{
	struct sconn *c = sc_of(pc);
	struct osend *o;
	size_t total = 0;
	int rc;

	if (!c->up || c->failed)
		return c->up ? -EPIPE : -EAGAIN;
	if (c->q_n == SENDS_MAX || km_secconn_reauthing(c->sc))
		return -EAGAIN;
	if (reauth_due(c, (int64_t)km_clock_ms())) {
		reauth_step(c, true);
		return -EAGAIN; /* the caller retries once it is done */
	}
	if (n_iov == 0)
		return -EINVAL;
	for (uint32_t i = 0; i < n_iov; i++) {
		total += iov[i].iov_len;
		if ((rc = km_secconn_write(c->sc, iov[i].iov_base,
					   iov[i].iov_len)) < 0)
			return rc;
	}
	if (total == 0 || total > INT32_MAX)
		return -EINVAL;
	o = &c->q[(c->q_head + c->q_n++) % SENDS_MAX];
	o->fn = fn;
	o->arg = arg;
	o->total = (int)total;
	o->mark = c->produced + km_secconn_output_pending(c->sc);
	c->reqs++;
	return flush(c);
}

/* ---- receiving plaintext ---- */

/* Kafka's framing (an int32 size, then the answer) over the plaintext
 * delivered: how many answers are complete. */
static void count_answers(struct sconn *c, const uint8_t *p, uint32_t n)
{
	while (n > 0) {
		if (c->body_left == 0 && c->hdr_have < 4) {
			c->hdr[c->hdr_have++] = *p++;
			n--;
			if (c->hdr_have == 4 &&
			    (c->body_left = km_load_be32(c->hdr)) == 0) {
				c->hdr_have = 0;
				c->resps++;
			}
			continue;
		}
		uint32_t take = n < c->body_left ? n : c->body_left;

		p += take;
		n -= take;
		c->body_left -= take;
		if (c->body_left == 0) {
			c->hdr_have = 0;
			c->resps++;
		}
	}
}

/* Re-authenticate at 85% of the session the broker granted, as Kafka's
 * Java client does at 85-95% (KIP-368): the broker closes a connection
 * whose session ended. */
static void set_reauth(struct sconn *c)
{
	int64_t end = km_secconn_session_end_ms(c->sc);
	int64_t now = (int64_t)km_clock_ms();

	c->reauth_at = end > now ? now + (end - now) * 85 / 100 : 0;
	if (c->reauth_at != 0 && (c->sn->next_reauth_ms == 0 ||
				  c->reauth_at < c->sn->next_reauth_ms))
		c->sn->next_reauth_ms = c->reauth_at;
}

static bool reauth_due(const struct sconn *c, int64_t now)
{
	return c->up && !c->failed && c->reauth_at != 0 &&
	       now >= c->reauth_at && c->reqs == c->resps &&
	       !km_secconn_reauthing(c->sc);
}

static void fail_conn(struct sconn *c, int rc, const char *what)
{
	snprintf(c->why, sizeof(c->why), "%s %s:%u: %s%s",
		 c->lsn != NULL ? "client" : "broker", c->host,
		 (unsigned)c->port, what, km_secconn_why(c->sc));
	/* The front end never hears of a client whose handshake failed. */
	if (c->lsn != NULL)
		KM_WARN("snet", "%s; closing it", c->why);
	c->failed = true;
	c->err = rc;
	km_net_abort(c->inner); /* in_close reports the failure */
}

/* Start or go on with a re-authentication; the caller delivers what
 * follows once it is done (never from inside a km_net_* call). */
static int reauth_step(struct sconn *c, bool start)
{
	int rc = start ? km_secconn_reauth(c->sc) : 0;

	if (rc == 0)
		rc = km_secconn_advance(c->sc, (int64_t)km_clock_ms());
	if (flush(c) < 0 && rc >= 0)
		rc = -EPIPE;
	if (rc < 0) {
		KM_WARN("snet", "broker %s:%u: re-authentication failed: %s",
			c->host, (unsigned)c->port, km_secconn_why(c->sc));
		fail_conn(c, rc, "re-authentication: ");
		return rc;
	}
	if (rc == 0) {
		set_reauth(c);
		KM_INFO("snet", "re-authenticated to broker %s:%u", c->host,
			 (unsigned)c->port);
	}
	return rc;
}

/* Deliver the plaintext the session holds, into this backend's buffers;
 * with none free, pause the inner connection until some come back. */
static void deliver(struct sconn *c)
{
	struct snet *sn = c->sn;

	while (c->up && !c->failed) {
		uint32_t id;
		struct iovec iov;
		int n;

		if (c->upaused) {
			c->backlog = true; /* resumed: poll delivers it */
			return;
		}
		if (sn->n_free == 0) {
			c->backlog = true;
			if (!c->paused && km_net_recv_pause(c->inner, true) == 0)
				c->paused = true;
			sn->st.rx_stalls++;
			return;
		}
		id = sn->free_ids[sn->n_free - 1];
		iov.iov_base = sn->bufs + (size_t)id * sn->buf_bytes;
		n = km_secconn_read(c->sc, iov.iov_base, sn->buf_bytes);
		if (n <= 0) {
			if (n < 0 && c->lsn != NULL && n != -ECONNRESET) {
				fail_conn(c, n, "");
			} else if (n < 0) {
				c->failed = true;
				c->err = n;
				km_net_abort(c->inner);
			}
			break;
		}
		sn->n_free--;
		iov.iov_len = (size_t)n;
		count_answers(c, iov.iov_base, (uint32_t)n);
		sn->st.bytes_in += (uint64_t)n;
		sn->st.recvs++;
		if (c->pub.h->on_recv != NULL)
			c->pub.h->on_recv(&c->pub, &(struct km_chain){ &iov, 1 },
					  &id);
		else
			km_net_release(&sn->pub, &id, 1);
		if (c->inner == NULL)
			return; /* the consumer ended it */
	}
	c->backlog = false;
	if (c->paused && c->inner != NULL &&
	    km_net_recv_pause(c->inner, false) == 0)
		c->paused = false;
}

/* The handshakes went on: established, failed, or waiting. */
static void handshake(struct sconn *c)
{
	int rc = km_secconn_advance(c->sc, (int64_t)km_clock_ms());

	if (flush(c) < 0 && rc >= 0)
		rc = -EPIPE;
	if (rc == 1)
		return;
	if (rc < 0) {
		fail_conn(c, rc, "");
		return;
	}
	c->up = true;
	if (c->lsn != NULL) {
		c->sn->handshaking--;
		if (c->pub.h->on_accept != NULL)
			c->pub.h->on_accept(&c->pub);
		if (!c->failed)
			deliver(c);
		return;
	}
	set_reauth(c);
	c->sn->st.connects++;
	if (c->pub.h->on_connect != NULL)
		c->pub.h->on_connect(&c->pub, 0);
	deliver(c);
}

static void in_recv(struct km_net_conn *ic, const struct km_chain *data,
		    const uint32_t *buf_ids)
{
	struct sconn *c = km_net_conn_ctx(ic);
	int rc = 0;

	if (c == NULL || c->sc == NULL) { /* turned away, or no TLS state */
		km_net_release(ic->net, buf_ids, data->n_iov);
		return;
	}
	for (uint32_t i = 0; i < data->n_iov && rc == 0; i++)
		rc = km_secconn_input(c->sc, data->iov[i].iov_base,
				      data->iov[i].iov_len);
	km_net_release(c->sn->inner, buf_ids, data->n_iov);
	if (c->failed)
		return;
	if (rc < 0) {
		c->failed = true;
		c->err = rc;
		km_net_abort(ic);
		return;
	}
	if (!c->up)
		handshake(c);
	else if (!km_secconn_reauthing(c->sc) || reauth_step(c, false) == 0)
		deliver(c);
}

static void in_connect(struct km_net_conn *ic, int res)
{
	struct sconn *c = km_net_conn_ctx(ic);
	int rc = res;

	if (rc == 0)
		rc = km_secconn_new(c->sn->sec, c->host, &c->sc);
	if (rc < 0) {
		if (res == 0) {
			snprintf(c->why, sizeof(c->why), "broker %s:%u: cannot "
				 "set up TLS: %s", c->host, (unsigned)c->port,
				 km_strerror(rc));
			c->failed = true;
			c->err = rc;
			km_net_abort(ic);
			return;
		}
		c->sn->st.connect_errors++;
		c->used = false;
		if (c->pub.h->on_connect != NULL)
			c->pub.h->on_connect(&c->pub, res);
		return;
	}
	handshake(c);
}

static void in_close(struct km_net_conn *ic, int reason)
{
	struct sconn *c = km_net_conn_ctx(ic);
	bool up, accepting;
	int why;

	if (c == NULL)
		return; /* turned away at accept */
	up = c->up;
	accepting = c->lsn != NULL && !up;
	why = c->failed && c->err < 0 ? c->err : reason;
	free(c->stash);
	c->stash = NULL;
	complete_sends(c, -ECANCELED);
	km_secconn_free(c->sc);
	c->sc = NULL;
	c->inner = NULL;
	if (accepting) { /* never reported: nothing to tell */
		c->sn->handshaking--;
	} else if (!up) {
		c->sn->st.connect_errors++;
		if (c->pub.h->on_connect != NULL)
			c->pub.h->on_connect(&c->pub, why < 0 ? why
							       : -ECONNRESET);
	} else {
		c->sn->st.closes++;
		if (c->pub.h->on_close != NULL)
			c->pub.h->on_close(&c->pub, why);
	}
	c->used = false;
}

static const struct km_net_handler inner_handler = {
	.on_connect = in_connect,
	.on_accept = NULL,
	.on_recv = in_recv,
	.on_close = in_close,
};

/* ---- the server side: TLS listeners ---- */

static struct sconn *conn_slot(struct snet *sn)
{
	for (uint32_t i = 0; i < sn->conns_max; i++)
		if (!sn->conns[i].used)
			return &sn->conns[i];
	return NULL;
}

/* A client connected: its handshake starts with its first bytes, and
 * must end before the deadline. */
static void in_accept(struct km_net_conn *ic)
{
	struct slsn *l = km_net_conn_ctx(ic);
	struct snet *sn = sn_of(l->pub.net);
	struct sconn *c = conn_slot(sn);
	struct sockaddr_in a;

	if (c == NULL) {
		km_net_conn_set_ctx(ic, NULL);
		km_net_abort(ic);
		return;
	}
	memset(c, 0, sizeof(*c));
	c->sn = sn;
	c->pub = (struct km_net_conn){ .net = &sn->pub, .h = l->h,
				       .ctx = l->pub.ctx };
	c->inner = ic;
	c->lsn = l;
	c->used = true;
	if (km_net_conn_peer(ic, &a) == 0) {
		inet_ntop(AF_INET, &a.sin_addr, c->host, sizeof(c->host));
		c->port = ntohs(a.sin_port);
	}
	km_net_conn_set_ctx(ic, c);
	sn->handshaking++;
	c->hs_deadline = km_clock_ms() + l->sec->handshake_timeout_ms;
	if (km_secconn_new_server(l->sec, &c->sc) < 0) {
		snprintf(c->why, sizeof(c->why), "client %s:%u: cannot set up "
			 "TLS", c->host, (unsigned)c->port);
		c->failed = true;
		c->err = KM_ETLS;
		km_net_abort(ic);
	}
}

static const struct km_net_handler server_handler = {
	.on_connect = NULL,
	.on_accept = in_accept,
	.on_recv = in_recv,
	.on_close = in_close,
};

/* Handshakes past their deadline end: a client that connects and says
 * nothing, or half a ClientHello, must not hold a connection forever
 * (Kafka's idle bound does the same). */
static void poll_handshakes(struct snet *sn)
{
	uint64_t now = km_clock_ms();

	if (sn->handshaking == 0 || now - sn->hs_checked_ms < 50)
		return;
	sn->hs_checked_ms = now;
	for (uint32_t i = 0; i < sn->conns_max; i++) {
		struct sconn *c = &sn->conns[i];

		if (!c->used || c->lsn == NULL || c->up || c->failed ||
		    c->inner == NULL || now < c->hs_deadline)
			continue;
		snprintf(c->why, sizeof(c->why), "client %s:%u: no TLS "
			 "handshake within %u ms", c->host, (unsigned)c->port,
			 c->lsn->sec->handshake_timeout_ms);
		KM_WARN("snet", "%s; closing it", c->why);
		c->failed = true;
		c->err = -ETIMEDOUT;
		km_net_abort(c->inner);
	}
}

int km_snet_listen(struct km_net *net, const char *ipv4, uint16_t port,
		   const struct km_netsec *lsec, const struct km_net_handler *h,
		   void *ctx, struct km_net_listener **out)
{
	struct snet *sn = sn_of(net);
	struct slsn *l = NULL;
	int rc;

	if (lsec == NULL || lsec->ssl_ctx == NULL)
		return km_net_listen(sn->inner, ipv4, port, h, ctx, out);
	if (!lsec->server)
		return -EINVAL;
	for (uint32_t i = 0; i < LISTENERS_MAX && l == NULL; i++)
		if (!sn->lsns[i].used)
			l = &sn->lsns[i];
	if (l == NULL)
		return -ENOBUFS;
	*l = (struct slsn){ .pub = { .net = net, .ctx = ctx }, .sec = lsec,
			    .h = h };
	rc = km_net_listen(sn->inner, ipv4, port, &server_handler, l,
			   &l->inner);
	if (rc < 0)
		return rc;
	l->pub.port = km_net_listener_port(l->inner);
	l->used = true;
	*out = &l->pub;
	return 0;
}

int km_snet_conn_principal(const struct km_net_conn *pc, char *out,
			   size_t cap)
{
	const struct sconn *c;

	if (!km_snet_is(pc->net))
		return 0;
	c = km_container_of(pc, const struct sconn, pub);
	if (c->lsn == NULL || c->sc == NULL)
		return 0;
	return km_secconn_peer_principal(c->sc, out, cap);
}

static int s_recv_pause(struct km_net_conn *pc, bool paused)
{
	struct sconn *c = sc_of(pc);

	if (c->lsn == NULL)
		return -EOPNOTSUPP; /* the fetch side never asked for it */
	c->upaused = paused;
	if (c->inner == NULL)
		return 0;
	if (paused && !c->paused && km_net_recv_pause(c->inner, true) == 0)
		c->paused = true;
	if (!paused) {
		c->backlog = true; /* deliver() then resumes the inner one */
		c->sn->service = true;
	}
	return 0;
}

/* ---- the ops ---- */

static int s_connect(struct km_net *net, const char *ipv4, uint16_t port,
		     const struct km_net_handler *h, void *ctx,
		     struct km_net_conn **out)
{
	struct snet *sn = sn_of(net);
	struct sconn *c = NULL;
	int rc;

	if (sn->sec == NULL)
		return -EOPNOTSUPP; /* a listener's wrapper only */
	for (uint32_t i = 0; i < sn->conns_max && c == NULL; i++)
		if (!sn->conns[i].used)
			c = &sn->conns[i];
	if (c == NULL)
		return -ENOBUFS;
	memset(c, 0, sizeof(*c));
	c->sn = sn;
	c->pub = (struct km_net_conn){ .net = net, .h = h, .ctx = ctx };
	snprintf(c->host, sizeof(c->host), "%s", ipv4);
	c->port = port;
	rc = km_net_connect(sn->inner, ipv4, port, &inner_handler, c,
			    &c->inner);
	if (rc < 0)
		return rc;
	c->used = true;
	*out = &c->pub;
	return 0;
}

static void s_abort(struct km_net_conn *pc)
{
	struct sconn *c = sc_of(pc);

	if (c->inner != NULL)
		km_net_abort(c->inner);
	c->failed = true;
}

static int s_close(struct km_net_conn *pc)
{
	struct sconn *c = sc_of(pc);

	if (c->inner == NULL || c->failed)
		return -EALREADY;
	if (!c->up) {
		s_abort(pc);
		return 0;
	}
	/* close_notify queued ahead of the FIN: the peer reads a clean end
	 * of the TLS session. Best effort: a full queue leaves it out. */
	if (km_secconn_close_notify(c->sc) == 1)
		(void)flush(c);
	return km_net_close(c->inner);
}

static void s_release(struct km_net *net, const uint32_t *ids, uint32_t n)
{
	struct snet *sn = sn_of(net);

	for (uint32_t i = 0; i < n; i++)
		sn->free_ids[sn->n_free++] = ids[i];
	sn->service = true;
}

/* Connections idle when their session nears its end re-authenticate
 * now; busy ones when their answer is in, or at their next send. */
static void poll_reauth(struct snet *sn)
{
	int64_t now = (int64_t)km_clock_ms();

	if (sn->next_reauth_ms == 0 || now < sn->next_reauth_ms)
		return;
	sn->next_reauth_ms = 0;
	for (uint32_t i = 0; i < sn->conns_max; i++) {
		struct sconn *c = &sn->conns[i];

		if (!c->used || c->inner == NULL || c->sc == NULL)
			continue;
		if (reauth_due(c, now))
			reauth_step(c, true);
		if (c->reauth_at != 0 && !km_secconn_reauthing(c->sc) &&
		    (sn->next_reauth_ms == 0 ||
		     c->reauth_at < sn->next_reauth_ms))
			sn->next_reauth_ms = c->reauth_at;
	}
}

static int s_poll(struct km_net *net)
{
	struct snet *sn = sn_of(net);
	int rc = km_net_poll(sn->inner);

	poll_reauth(sn);
	poll_handshakes(sn);

	if (!sn->service)
		return rc;
	sn->service = false;
	for (uint32_t i = 0; i < sn->conns_max; i++) {
		struct sconn *c = &sn->conns[i];

		if (!c->used || c->inner == NULL || c->sc == NULL || c->failed)
			continue;
		if (c->stash != NULL || km_secconn_output_pending(c->sc) > 0)
			flush(c);
		if (c->backlog && sn->n_free > 0 && !c->upaused)
			deliver(c);
		rc++;
	}
	return rc;
}

static bool s_wants_poll(const struct km_net *net)
{
	const struct snet *sn = km_container_of(net, const struct snet, pub);

	return sn->service || km_net_wants_poll(sn->inner);
}

static uint32_t s_nap_us(const struct km_net *net)
{
	const struct snet *sn = km_container_of(net, const struct snet, pub);

	return sn->service ? 0 : km_net_nap_us(sn->inner);
}

static int s_listen(struct km_net *net, const char *ipv4, uint16_t port,
		    const struct km_net_handler *h, void *ctx,
		    struct km_net_listener **out)
{
	(void)net, (void)ipv4, (void)port, (void)h, (void)ctx, (void)out;
	return -EOPNOTSUPP;
}

static void s_unlisten(struct km_net_listener *pl)
{
	struct slsn *l = km_container_of(pl, struct slsn, pub);

	km_net_unlisten(l->inner);
	l->used = false;
}

static void s_stats(const struct km_net *net, struct km_net_stats *out)
{
	const struct snet *sn = km_container_of(net, const struct snet, pub);

	km_net_get_stats(sn->inner, out);
	out->rx_bufs_total = sn->nbufs;
	out->rx_bufs_held = sn->nbufs - sn->n_free;
	out->rx_buf_bytes = sn->buf_bytes;
	out->rx_stalls += sn->st.rx_stalls;
}

static void s_conn_stats(const struct km_net_conn *pc,
			 struct km_net_conn_stats *out)
{
	const struct sconn *c = km_container_of(pc, const struct sconn, pub);

	memset(out, 0, sizeof(*out));
	if (c->inner != NULL)
		km_net_conn_get_stats(c->inner, out);
}

static int s_peer(const struct km_net_conn *pc, struct sockaddr_in *out)
{
	const struct sconn *c = km_container_of(pc, const struct sconn, pub);

	return c->inner != NULL ? km_net_conn_peer(c->inner, out) : -ENOTCONN;
}

static void s_destroy(struct km_net *net)
{
	struct snet *sn = sn_of(net);

	km_net_destroy(sn->inner); /* in_close / in_connect run from here */
	free(sn->conns);
	free(sn->bufs);
	free(sn->free_ids);
	free(sn);
}

static const struct km_net_ops snet_ops = {
	.destroy = s_destroy,
	.poll = s_poll,
	.wants_poll = s_wants_poll,
	.nap_us = s_nap_us,
	.connect = s_connect,
	.listen = s_listen,
	.unlisten = s_unlisten,
	.send = s_send,
	.release = s_release,
	.close = s_close,
	.abort = s_abort,
	.recv_pause = s_recv_pause,
	.stats = s_stats,
	.conn_stats = s_conn_stats,
	.peer = s_peer,
};

int km_snet_create(struct km_net *inner, const struct km_net_config *inner_cfg,
		   const struct km_netsec *sec, struct km_net **out)
{
	struct snet *sn = calloc(1, sizeof(*sn));

	if (sn == NULL)
		return -ENOMEM;
	sn->pub.ops = &snet_ops;
	sn->inner = inner;
	sn->sec = sec;
	sn->conns_max = inner_cfg->conns_max;
	sn->nbufs = inner_cfg->rx_buf_count;
	sn->buf_bytes = inner_cfg->rx_buf_bytes;
	sn->conns = calloc(sn->conns_max, sizeof(*sn->conns));
	sn->bufs = malloc((size_t)sn->nbufs * sn->buf_bytes);
	sn->free_ids = malloc(sn->nbufs * sizeof(uint32_t));
	if (sn->conns == NULL || sn->bufs == NULL || sn->free_ids == NULL) {
		free(sn->conns);
		free(sn->bufs);
		free(sn->free_ids);
		free(sn);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < sn->nbufs; i++)
		sn->free_ids[sn->n_free++] = sn->nbufs - 1 - i;
	*out = &sn->pub;
	return 0;
}
