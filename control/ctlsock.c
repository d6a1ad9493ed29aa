/* The control socket server (ctlsock.h). */
#include "control/ctlsock.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/log.h"

#define MOD "ctlsock"
#define IN_BYTES (KM_CTLPROTO_LINE_BYTES_MAX + 1) /* a full line + '\n' */
#define EV_LISTEN 0u
#define EV_WAKE 1u
#define EV_CONN0 2u /* client i is EV_CONN0 + i */

struct conn {
	int fd;		  /* -1: slot free */
	uint32_t gen;	  /* bumped on each accept: stale tokens miss */
	bool discarding;  /* over-long line: skip to the next '\n' */
	bool pending;	  /* a deferred request is open: reading paused */
	bool eof;	  /* peer shut its side: close once drained */
	bool want_out;	  /* EPOLLOUT armed */
	json_t *pending_id; /* "id" of the open request (owned) */
	size_t in_len;
	size_t out_off, out_len;
	char *in;	  /* IN_BYTES */
	char *out;	  /* out_cap, up to KM_CTLSOCK_OUT_BYTES_MAX */
	size_t out_cap;
};

struct handler {
	km_ctlsock_handler_fn fn;
	void *ctx;
};

struct km_ctlsock {
	int epfd, lfd, wakefd;
	uint32_t clients_max, clients;
	dev_t dev;		/* the socket file we created, for close() */
	ino_t ino;
	uint64_t cur_token;	/* request inside a handler call, else 0 */
	const json_t *cur_id;
	struct handler handlers[KM_CTL_VERB_COUNT];
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct conn conns[];
};

static uint64_t make_token(const struct km_ctlsock *s, uint32_t i)
{
	return ((uint64_t)s->conns[i].gen << 32) | (i + 1);
}

/* The client of a token, or NULL if it is gone (generation moved on). */
static struct conn *token_conn(struct km_ctlsock *s, uint64_t token)
{
	uint32_t i = (uint32_t)(token & 0xffffffffu);

	if (i == 0 || i > s->clients_max)
		return NULL;
	if (s->conns[i - 1].fd < 0 || s->conns[i - 1].gen != token >> 32)
		return NULL;
	return &s->conns[i - 1];
}

static int fill_addr(struct sockaddr_un *sa, const char *path)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

/* 0 if path is absent or a socket nobody accepts on; else why not. */
static int check_stale(const char *path)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	rc = fill_addr(&sa, path);
	if (rc < 0)
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	rc = rc == 0 ? -EADDRINUSE : (errno == ECONNREFUSED ? 0 : -errno);
	close(fd);
	if (rc == 0)
		KM_INFO(MOD, "replacing stale socket %s", path);
	return rc;
}

/* The socket's directory is to be one only the daemon's user can enter
 * (issue 16): ours with group or other bits loses them (logged); one we
 * do not own (/tmp) is left as it is, with a warning - the socket's 0600
 * and the peer check still keep other users out. */
static void private_dir(const char *path)
{
	char copy[PATH_MAX];
	const char *dir;
	struct stat st;

	snprintf(copy, sizeof(copy), "%s", path);
	dir = dirname(copy);
	if (stat(dir, &st) < 0)
		return; /* bind will say why */
	if ((st.st_mode & 077) == 0)
		return;
	if (st.st_uid != geteuid()) {
		KM_WARN(MOD, "the control socket's directory %s (mode %04o, uid "
			"%ld) is not private to kmirrord's user", dir,
			(unsigned)(st.st_mode & 07777), (long)st.st_uid);
		return;
	}
	if (chmod(dir, st.st_mode & 07700) < 0)
		KM_WARN(MOD, "chmod %s: %s", dir, strerror(errno));
	else
		KM_INFO(MOD, "the control socket's directory %s: mode %04o -> "
			"%04o (only kmirrord's user may enter)", dir,
			(unsigned)(st.st_mode & 07777), (unsigned)(st.st_mode & 07700));
}

/* Bind and listen in a fresh 0700 directory beside path, chmod 0600, then
 * rename into place: the socket is never reachable with umask's mode. */
static int bind_private(int fd, const char *path, dev_t *dev, ino_t *ino)
{
	char dir[PATH_MAX], tmp[PATH_MAX], copy[PATH_MAX];
	struct sockaddr_un sa;
	struct stat st;
	int rc;

	if (strlen(path) >= sizeof(copy))
		return -ENAMETOOLONG;
	strcpy(copy, path);
	snprintf(dir, sizeof(dir), "%s/.kmctl-XXXXXX", dirname(copy));
	if (mkdtemp(dir) == NULL)
		return -errno;
	if (chmod(dir, 0700) < 0) { /* mkdtemp's mode went through the umask */
		rc = -errno;
		goto out_rmdir;
	}
	rc = snprintf(tmp, sizeof(tmp), "%.*s/s", (int)(sizeof(tmp) - 3), dir);
	rc = rc >= (int)sizeof(tmp) ? -ENAMETOOLONG : fill_addr(&sa, tmp);
	if (rc < 0)
		goto out_rmdir;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(tmp, 0600) < 0 || listen(fd, 16) < 0 ||
	    stat(tmp, &st) < 0 || rename(tmp, path) < 0) {
		rc = -errno;
		unlink(tmp);
		goto out_rmdir;
	}
	*dev = st.st_dev;
	*ino = st.st_ino;
out_rmdir:
	rmdir(dir);
	return rc;
}

static int ep_add(int epfd, int fd, uint32_t events, uint64_t tag)
{
	struct epoll_event ev = { .events = events, .data.u64 = tag };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

static int alloc_conns(struct km_ctlsock *s)
{
	for (uint32_t i = 0; i < s->clients_max; i++) {
		s->conns[i].fd = -1;
		s->conns[i].in = malloc(IN_BYTES);
		s->conns[i].out = malloc(KM_CTLSOCK_OUT_BYTES_MIN);
		s->conns[i].out_cap = KM_CTLSOCK_OUT_BYTES_MIN;
		if (s->conns[i].in == NULL || s->conns[i].out == NULL)
			return -ENOMEM;
	}
	return 0;
}

static int open_fds(struct km_ctlsock *s, const char *path)
{
	int rc;

	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->epfd < 0 || s->wakefd < 0 || s->lfd < 0)
		return -errno;
	rc = check_stale(path);
	if (rc < 0)
		return rc;
	private_dir(path);
	rc = bind_private(s->lfd, path, &s->dev, &s->ino);
	if (rc < 0)
		return rc;
	strcpy(s->path, path);
	rc = ep_add(s->epfd, s->lfd, EPOLLIN, EV_LISTEN);
	if (rc < 0)
		return rc;
	return ep_add(s->epfd, s->wakefd, EPOLLIN, EV_WAKE);
}

int km_ctlsock_open(struct km_ctlsock **out, const char *path,
		    uint32_t clients_max)
{
	struct km_ctlsock *s;
	int rc;

	if (clients_max == 0 || clients_max > KM_CTLSOCK_CLIENTS_MAX ||
	    path == NULL || path[0] == '\0')
		return -EINVAL;
	if (strlen(path) >= sizeof(s->path))
		return -ENAMETOOLONG;
	s = calloc(1, sizeof(*s) + clients_max * sizeof(s->conns[0]));
	if (s == NULL)
		return -ENOMEM;
	s->clients_max = clients_max;
	s->epfd = s->lfd = s->wakefd = -1;
	rc = alloc_conns(s);
	if (rc == 0)
		rc = open_fds(s, path);
	if (rc < 0) {
		km_ctlsock_close(s);
		return rc;
	}
	KM_INFO(MOD, "control socket listening at %s", path);
	*out = s;
	return 0;
}

static void conn_close(struct km_ctlsock *s, struct conn *c)
{
	if (c->fd < 0)
		return;
	close(c->fd); /* also removes it from the epoll set */
	c->fd = -1;
	json_decref(c->pending_id);
	c->pending_id = NULL;
	s->clients--;
}

void km_ctlsock_close(struct km_ctlsock *s)
{
	struct stat st;

	if (s == NULL)
		return;
	for (uint32_t i = 0; i < s->clients_max; i++) {
		conn_close(s, &s->conns[i]);
		free(s->conns[i].in);
		free(s->conns[i].out);
	}
	/* Unlink only our own socket: a successor may have replaced it. */
	if (s->path[0] != '\0' && lstat(s->path, &st) == 0 &&
	    st.st_dev == s->dev && st.st_ino == s->ino)
		unlink(s->path);
	if (s->lfd >= 0)
		close(s->lfd);
	if (s->wakefd >= 0)
		close(s->wakefd);
	if (s->epfd >= 0)
		close(s->epfd);
	free(s);
}

int km_ctlsock_register(struct km_ctlsock *s, enum km_ctlproto_verb verb,
			km_ctlsock_handler_fn fn, void *ctx)
{
	if ((unsigned)verb >= KM_CTL_VERB_COUNT)
		return -EINVAL;
	s->handlers[verb].fn = fn;
	s->handlers[verb].ctx = ctx;
	return 0;
}

int km_ctlsock_fd(const struct km_ctlsock *s)
{
	return s->epfd;
}

uint32_t km_ctlsock_clients(const struct km_ctlsock *s)
{
	return s->clients;
}

uint64_t km_ctlsock_token(const struct km_ctlsock *s)
{
	return s->cur_token;
}

/* Arm EPOLLIN unless paused or at EOF, EPOLLOUT while output waits. */
static void conn_rearm(struct km_ctlsock *s, struct conn *c)
{
	struct epoll_event ev = { 0 };

	ev.data.u64 = EV_CONN0 + (uint64_t)(c - s->conns);
	if (!c->pending && !c->eof)
		ev.events |= EPOLLIN;
	if (c->out_len > c->out_off)
		ev.events |= EPOLLOUT;
	c->want_out = (ev.events & EPOLLOUT) != 0;
	if (epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
		KM_WARN(MOD, "epoll_ctl: %s", strerror(errno));
}

/* Write what is queued; 0, or -errno (the caller closes). */
static int conn_flush(struct conn *c)
{
	while (c->out_off < c->out_len) { /* bounded: out_len bytes */
		ssize_t n = send(c->fd, c->out + c->out_off,
				 c->out_len - c->out_off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0)
			return -errno;
		c->out_off += (size_t)n;
	}
	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	return 0;
}

/* Grow the client's output buffer to hold need bytes (<= the max). */
static int out_room(struct conn *c, size_t need)
{
	size_t cap = c->out_cap;
	char *p;

	while (cap < need)
		cap *= 2;
	if (cap > KM_CTLSOCK_OUT_BYTES_MAX)
		cap = KM_CTLSOCK_OUT_BYTES_MAX;
	if (cap == c->out_cap)
		return 0;
	if ((p = realloc(c->out, cap)) == NULL)
		return -ENOMEM;
	c->out = p;
	c->out_cap = cap;
	return 0;
}

/* Queue obj as one line (+ "id" if any) and try to send it. */
static int conn_send(struct km_ctlsock *s, struct conn *c, json_t *obj,
		     const json_t *id)
{
	char *text;
	size_t n;
	int rc = 0;

	if (id != NULL)
		json_object_set(obj, "id", (json_t *)id);
	text = json_dumps(obj, JSON_COMPACT | JSON_ENSURE_ASCII);
	if (text == NULL)
		return -ENOMEM;
	n = strlen(text);
	if (c->out_off > 0 && c->out_len + n + 1 > c->out_cap) {
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	if (c->out_len + n + 1 > KM_CTLSOCK_OUT_BYTES_MAX) {
		KM_WARN(MOD, "a reply of %zu bytes with %zu unsent before it is "
			"more than a client may hold (%u): closing", n + 1,
			c->out_len, KM_CTLSOCK_OUT_BYTES_MAX);
		rc = -ENOBUFS;
	} else if ((rc = out_room(c, c->out_len + n + 1)) == 0) {
		memcpy(c->out + c->out_len, text, n);
		c->out[c->out_len + n] = '\n';
		c->out_len += n + 1;
		rc = conn_flush(c);
	}
	free(text);
	if (rc < 0) {
		conn_close(s, c);
		return rc;
	}
	if (c->want_out != (c->out_len > c->out_off))
		conn_rearm(s, c);
	return 0;
}

static int send_error(struct km_ctlsock *s, struct conn *c, int code,
		      const char *msg, const json_t *id)
{
	json_t *e = km_ctlproto_error(code, msg);
	int rc;

	if (e == NULL)
		return -ENOMEM;
	rc = conn_send(s, c, e, id);
	json_decref(e);
	return rc;
}

/* The final line for a handler's rc and resp. */
static int send_final(struct km_ctlsock *s, struct conn *c, int rc,
		      const json_t *resp, const json_t *id)
{
	json_t *obj, *msg;
	int ret;

	if (rc < 0) {
		msg = resp ? json_object_get(resp, "message") : NULL;
		return send_error(s, c, rc,
				  json_is_string(msg) ? json_string_value(msg)
						      : NULL,
				  id);
	}
	obj = json_pack("{s:b}", "ok", 1);
	if (obj == NULL)
		return -ENOMEM;
	if (resp != NULL)
		json_object_update_missing(obj, (json_t *)resp);
	ret = conn_send(s, c, obj, id);
	json_decref(obj);
	return ret;
}

int km_ctlsock_progress(struct km_ctlsock *s, uint64_t token,
			const json_t *progress)
{
	struct conn *c;
	const json_t *id;
	json_t *obj;
	int rc;

	if (token == 0)
		token = s->cur_token;
	c = token_conn(s, token);
	if (c == NULL || (token != s->cur_token && !c->pending))
		return -ENOENT;
	id = token == s->cur_token ? s->cur_id : c->pending_id;
	obj = json_pack("{s:O}", "progress", (json_t *)progress);
	if (obj == NULL)
		return -ENOMEM;
	rc = conn_send(s, c, obj, id);
	json_decref(obj);
	return rc;
}

static void wake(struct km_ctlsock *s)
{
	uint64_t one = 1;

	if (write(s->wakefd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		KM_WARN(MOD, "eventfd write: %s", strerror(errno));
}

int km_ctlsock_complete(struct km_ctlsock *s, uint64_t token, int rc,
			const json_t *resp)
{
	struct conn *c = token_conn(s, token);
	json_t *id;
	int ret;

	if (rc == KM_CTLSOCK_DEFERRED)
		return -EINVAL;
	if (c == NULL || !c->pending)
		return -ENOENT;
	c->pending = false;
	id = c->pending_id;
	c->pending_id = NULL;
	ret = send_final(s, c, rc, resp, id);
	json_decref(id);
	if (ret < 0)
		return ret;
	conn_rearm(s, c);
	wake(s); /* lines may wait in its input buffer */
	return 0;
}

static bool blank(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
			return false;
	return true;
}

/* Validate and run one request; the reply (or the deferral) follows. */
static void run_request(struct km_ctlsock *s, uint32_t i, json_t *req)
{
	struct conn *c = &s->conns[i];
	const json_t *id = json_object_get(req, "id");
	char err[512];
	struct handler *h;
	json_t *resp;
	uint32_t gen = c->gen;
	int verb, rc;

	verb = km_ctlproto_validate(req, err, sizeof(err));
	if (verb < 0) {
		send_error(s, c, verb, err, id);
		return;
	}
	h = &s->handlers[verb];
	if (h->fn == NULL) {
		snprintf(err, sizeof(err), "no handler for \"%s\" (daemon not ready)",
			 km_ctlproto_verb_name((enum km_ctlproto_verb)verb));
		send_error(s, c, KM_ECTLCMD, err, id);
		return;
	}
	resp = json_object();
	if (resp == NULL)
		return;
	s->cur_token = make_token(s, i);
	s->cur_id = id;
	rc = h->fn(h->ctx, req, resp);
	s->cur_token = 0;
	s->cur_id = NULL;
	if (c->fd >= 0 && c->gen == gen) { /* a progress send may have closed it */
		if (rc == KM_CTLSOCK_DEFERRED) {
			c->pending = true;
			c->pending_id = json_incref((json_t *)id);
			conn_rearm(s, c);
		} else {
			send_final(s, c, rc, resp, id);
		}
	}
	json_decref(resp);
}

static void dispatch_line(struct km_ctlsock *s, uint32_t i, const char *line,
			  size_t len)
{
	json_error_t jerr;
	json_t *req;
	char msg[256];

	if (blank(line, len))
		return;
	req = json_loadb(line, len, 0, &jerr);
	if (req == NULL) {
		snprintf(msg, sizeof(msg), "request is not JSON: %s (column %d)",
			 jerr.text, jerr.column);
		send_error(s, &s->conns[i], KM_ECTLJSON, msg, NULL);
		return;
	}
	run_request(s, i, req);
	json_decref(req);
}

/* Dispatch up to KM_CTLSOCK_LINES_PER_STEP whole lines of client i.
 * @return true if whole lines are left for a later step. */
static bool process_lines(struct km_ctlsock *s, uint32_t i)
{
	struct conn *c = &s->conns[i];
	uint32_t gen = c->gen;
	size_t start = 0;
	char *nl;

	for (uint32_t k = 0; k < KM_CTLSOCK_LINES_PER_STEP && !c->pending; k++) {
		nl = memchr(c->in + start, '\n', c->in_len - start);
		if (nl == NULL)
			break;
		if (c->discarding)
			c->discarding = false; /* the end of the over-long line */
		else
			dispatch_line(s, i, c->in + start,
				      (size_t)(nl - (c->in + start)));
		if (c->fd < 0 || c->gen != gen)
			return false;
		start = (size_t)(nl - c->in) + 1;
	}
	memmove(c->in, c->in + start, c->in_len - start);
	c->in_len -= start;
	nl = memchr(c->in, '\n', c->in_len);
	if (nl == NULL && (c->discarding || c->in_len == IN_BYTES)) {
		if (!c->discarding) {
			char msg[128];

			snprintf(msg, sizeof(msg),
				 "request line longer than %u bytes: skipped to its end",
				 KM_CTLPROTO_LINE_BYTES_MAX);
			send_error(s, c, KM_ECTLLINE, msg, NULL);
			c->discarding = true;
		}
		c->in_len = 0;
	}
	return nl != NULL && !c->pending && c->fd >= 0;
}

/* Close client i once it has nothing left to do after EOF. */
static void maybe_finish(struct km_ctlsock *s, struct conn *c)
{
	if (c->fd >= 0 && c->eof && !c->pending && c->out_len == c->out_off &&
	    memchr(c->in, '\n', c->in_len) == NULL)
		conn_close(s, c);
}

/* One read, then its lines. @return true if lines are left over. */
static bool conn_read(struct km_ctlsock *s, uint32_t i)
{
	struct conn *c = &s->conns[i];
	ssize_t n;

	if (c->pending || c->eof)
		return false;
	n = recv(c->fd, c->in + c->in_len, IN_BYTES - c->in_len, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return false;
	if (n < 0) {
		conn_close(s, c);
		return false;
	}
	if (n == 0) {
		c->eof = true;
		/* A last request without '\n' still counts. */
		if (c->in_len > 0 && c->in_len < IN_BYTES && !c->discarding)
			c->in[c->in_len++] = '\n';
		conn_rearm(s, c);
	} else {
		c->in_len += (size_t)n;
	}
	return process_lines(s, i);
}

static void refuse_busy(int fd)
{
	json_t *e = km_ctlproto_error(KM_ECTLBUSY, NULL);
	char *text = e ? json_dumps(e, JSON_COMPACT) : NULL;

	if (text != NULL) {
		size_t n = strlen(text);

		if (send(fd, text, n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 ||
		    send(fd, "\n", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			KM_DEBUG(MOD, "busy reply not sent: %s", strerror(errno));
	}
	free(text);
	json_decref(e);
	close(fd);
}

/* The socket file's mode keeps other users out, but a copy of the
 * directory or a mode changed by hand would let them in: the kernel's
 * word on who connected (credentials taken at connect) decides. Only the
 * daemon's own user and root may control it (issue 16). */
static bool peer_allowed(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	char msg[160];
	json_t *e;
	char *text;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
	    (cred.uid == geteuid() || cred.uid == 0))
		return true;
	snprintf(msg, sizeof(msg), "a client of uid %ld (pid %ld) may not control "
		 "kmirrord: only uid %ld (kmirrord's) and root may",
		 len == sizeof(cred) ? (long)cred.uid : -1L,
		 len == sizeof(cred) ? (long)cred.pid : -1L, (long)geteuid());
	KM_WARN(MOD, "refused: %s", msg);
	e = km_ctlproto_error(-EACCES, msg);
	text = e ? json_dumps(e, JSON_COMPACT) : NULL;
	if (text != NULL && (send(fd, text, strlen(text), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 ||
			     send(fd, "\n", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0))
		KM_DEBUG(MOD, "refusal not sent: %s", strerror(errno));
	free(text);
	json_decref(e);
	close(fd);
	return false;
}

static void accept_one(struct km_ctlsock *s)
{
	int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	uint32_t i;

	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR)
			KM_WARN(MOD, "accept: %s", strerror(errno));
		return;
	}
	if (!peer_allowed(fd))
		return;
	for (i = 0; i < s->clients_max && s->conns[i].fd >= 0; i++)
		;
	if (i == s->clients_max) {
		KM_WARN(MOD, "refusing a control client: %u connected",
			s->clients);
		refuse_busy(fd);
		return;
	}
	struct conn *c = &s->conns[i];

	c->fd = fd;
	c->gen++;
	c->discarding = c->pending = c->eof = c->want_out = false;
	c->in_len = c->out_off = c->out_len = 0;
	if (ep_add(s->epfd, fd, EPOLLIN, EV_CONN0 + i) < 0) {
		close(fd);
		c->fd = -1;
		return;
	}
	s->clients++;
}

/* After a wake-up: lines left in buffers by earlier bounded steps. */
static bool run_backlog(struct km_ctlsock *s)
{
	uint64_t v;
	bool more = false;

	if (read(s->wakefd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		KM_WARN(MOD, "eventfd read: %s", strerror(errno));
	for (uint32_t i = 0; i < s->clients_max; i++) {
		struct conn *c = &s->conns[i];

		if (c->fd < 0 || c->pending)
			continue;
		if (memchr(c->in, '\n', c->in_len) != NULL)
			more |= process_lines(s, i);
		maybe_finish(s, c);
	}
	return more;
}

static bool conn_event(struct km_ctlsock *s, uint32_t i, uint32_t events)
{
	struct conn *c = &s->conns[i];
	bool more = false;

	if (c->fd < 0)
		return false;
	if ((events & (EPOLLHUP | EPOLLERR)) && c->pending) {
		conn_close(s, c); /* gone mid-operation: its token goes stale */
		return false;
	}
	if (events & EPOLLOUT) {
		if (conn_flush(c) < 0) {
			conn_close(s, c);
			return false;
		}
		if (c->out_len == c->out_off)
			conn_rearm(s, c);
	}
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		more = conn_read(s, i);
	maybe_finish(s, c);
	return more;
}

int km_ctlsock_poll(struct km_ctlsock *s, int timeout_ms)
{
	struct epoll_event evs[KM_CTLSOCK_EVENTS_MAX];
	bool more = false;
	int n;

	n = epoll_wait(s->epfd, evs, KM_CTLSOCK_EVENTS_MAX, timeout_ms);
	if (n < 0)
		return -errno;
	for (int k = 0; k < n; k++) {
		uint64_t tag = evs[k].data.u64;

		if (tag == EV_LISTEN)
			accept_one(s);
		else if (tag == EV_WAKE)
			more |= run_backlog(s);
		else
			more |= conn_event(s, (uint32_t)(tag - EV_CONN0),
					   evs[k].events);
	}
	if (more)
		wake(s);
	return n;
}
