/* One kmirrord per data.dir: an exclusive flock(2) on data.dir/.lock,
 * taken before anything in data.dir is opened, created, truncated or
 * recovered, and held for the process's life.
 *
 * Why: two daemons on one data.dir each believe they own every log
 * (DESIGN: one writer per partition). The second one's recovery truncates
 * segments the first has mapped (the first dies of SIGBUS), or both append
 * and each overwrites the other's acknowledged records.
 *
 * flock, not a pid file: the kernel drops the lock when the holder exits
 * in any way, kill -9 included, so a stale file never blocks a restart,
 * and no pid is ever guessed alive. The file's text (pid, control socket,
 * listeners) is only for the refusal's message; it is rewritten by each
 * holder once it holds the lock, and never removed (unlinking would let a
 * third process lock a fresh inode while a second still holds the old).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/log.h"
#include "control/daemon.h"
#include "control/daemon_pvt.h"

/* The holder's text: "pid=N\ncontrol.socket=PATH\nlisteners=H:P\n". */
#define LOCK_TEXT_BYTES 2048

static void lock_path(const struct km_daemon *d, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", d->cfg->data_dir, KM_DAEMON_LOCK_FILE);
}

struct holder {
	char pid[32], sock[512], listeners[300];
};

/* The holder's text, line by line; a field it has not written yet (it
 * took the lock a moment ago) stays "?". */
static void parse_holder(char *text, struct holder *h)
{
	char *save = NULL;

	snprintf(h->pid, sizeof(h->pid), "?");
	snprintf(h->sock, sizeof(h->sock), "?");
	snprintf(h->listeners, sizeof(h->listeners), "?");
	for (char *l = strtok_r(text, "\n", &save); l != NULL;
	     l = strtok_r(NULL, "\n", &save)) {
		if (strncmp(l, "pid=", 4) == 0)
			snprintf(h->pid, sizeof(h->pid), "%s", l + 4);
		else if (strncmp(l, "control.socket=", 15) == 0)
			snprintf(h->sock, sizeof(h->sock), "%s", l + 15);
		else if (strncmp(l, "listeners=", 10) == 0)
			snprintf(h->listeners, sizeof(h->listeners), "%s", l + 10);
	}
}

static void report_holder(const struct km_daemon *d, int fd)
{
	char text[LOCK_TEXT_BYTES];
	ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
	struct holder h;

	text[n > 0 ? n : 0] = '\0';
	parse_holder(text, &h);
	KM_ERROR("daemon", "data.dir %s is in use by kmirrord pid %s (control "
		 "socket %s, listeners %s): refusing to start", d->cfg->data_dir,
		 h.pid, h.sock, h.listeners);
}

/* pwrite over the old text, then cut it to length: a reader never sees
 * the text emptied, and the pid, first, is the same line throughout. The
 * listener's port is the bound one once the daemon serves. */
static int write_holder(const struct km_daemon *d, int fd)
{
	char text[LOCK_TEXT_BYTES];
	int n = snprintf(text, sizeof(text),
			 "pid=%ld\ncontrol.socket=%s\nlisteners=%s:%u\n",
			 (long)getpid(), d->cfg->control_socket,
			 d->cfg->listener.host[0] ? d->cfg->listener.host
						  : "0.0.0.0",
			 d->kafka_port ? d->kafka_port : d->cfg->listener.port);
	ssize_t w = pwrite(fd, text, (size_t)n, 0);

	if (w < 0)
		return -errno;
	if (w != n)
		return -EIO;
	return ftruncate(fd, n) < 0 ? -errno : 0;
}

int km_daemon_lock(struct km_daemon *d)
{
	char path[4096];
	int fd, rc;

	lock_path(d, path, sizeof(path));
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = -errno;
		KM_ERROR("daemon", "%s: %s", path, km_strerror(rc));
		return rc;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		rc = errno == EWOULDBLOCK ? KM_EDATADIRLOCK : -errno;
		if (rc == KM_EDATADIRLOCK)
			report_holder(d, fd);
		else
			KM_ERROR("daemon", "%s: lock: %s", path, km_strerror(rc));
		close(fd);
		return rc;
	}
	if ((rc = write_holder(d, fd)) < 0) {
		KM_ERROR("daemon", "%s: %s", path, km_strerror(rc));
		close(fd);
		return rc;
	}
	d->lock_fd = fd;
	return 0;
}

int km_daemon_lock_update(struct km_daemon *d)
{
	return d->lock_fd >= 0 ? write_holder(d, d->lock_fd) : 0;
}

void km_daemon_unlock(struct km_daemon *d)
{
	/* Closing the only descriptor of the open file drops the flock. */
	if (d->lock_fd >= 0)
		close(d->lock_fd);
	d->lock_fd = -1;
}
