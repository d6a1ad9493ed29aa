/* Producer ids for local idempotent producers (InitProducerId): above every
 * positive id any partition has seen (R4 step 6), never handed out twice.
 * Ids are reserved in blocks whose end is persisted before any id of the
 * block is given out, as Kafka's controller does. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/file.h"
#include "common/log.h"
#include "control/daemon_pvt.h"

static int64_t read_limit(int dir_fd)
{
	char buf[64] = { 0 };
	int fd = openat(dir_fd, KM_DAEMON_PID_BLOCK_FILE,
			O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	return strtoll(buf, NULL, 10);
}

static int write_limit(struct km_daemon_pid_alloc *a, int64_t limit)
{
	char buf[64];
	int n = snprintf(buf, sizeof(buf), "%" PRId64 "\n", limit);
	int rc = km_file_write_atomic(a->dir_fd, KM_DAEMON_PID_BLOCK_FILE,
				      buf, (size_t)n);

	if (rc == 0)
		a->limit = limit;
	return rc;
}

int km_daemon_pid_alloc_init(struct km_daemon_pid_alloc *a,
			     const char *data_dir, int64_t max_seen)
{
	int64_t limit;

	a->dir_fd = open(data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (a->dir_fd < 0)
		return -errno;
	pthread_mutex_init(&a->lock, NULL);
	limit = read_limit(a->dir_fd);
	/* Ids below the persisted end may have been handed out: skip them
	 * all, even unused ones. */
	a->next = max_seen + 1 > limit ? max_seen + 1 : limit;
	if (a->next < 0)
		a->next = 0;
	a->limit = a->next;
	return 0;
}

void km_daemon_pid_alloc_fini(struct km_daemon_pid_alloc *a)
{
	if (a->dir_fd >= 0)
		close(a->dir_fd);
	a->dir_fd = -1;
	pthread_mutex_destroy(&a->lock);
}

int km_daemon_pid_alloc_next(void *ctx, int64_t *pid, int16_t *epoch)
{
	struct km_daemon_pid_alloc *a = ctx;
	int rc = 0;

	pthread_mutex_lock(&a->lock);
	if (a->next >= a->limit)
		rc = write_limit(a, a->next + KM_DAEMON_PID_BLOCK);
	if (rc == 0) {
		*pid = a->next++;
		*epoch = 0;
	}
	pthread_mutex_unlock(&a->lock);
	if (rc < 0)
		KM_ERROR("daemon", "producer id block: %s", km_strerror(rc));
	return rc;
}
