/* See pid_alloc_support.h. */
#include "pid_alloc_support.h"

#include <stdlib.h>

#include "control/daemon_pvt.h"

struct km_test_pids {
	struct km_daemon_pid_alloc a;
};

struct km_test_pids *km_test_pids_open(const char *data_dir, int64_t max_seen,
				       int *rc)
{
	struct km_test_pids *p = calloc(1, sizeof(*p));

	*rc = p == NULL ? -12 : km_daemon_pid_alloc_init(&p->a, data_dir, max_seen);
	if (*rc < 0) {
		free(p);
		return NULL;
	}
	return p;
}

int km_test_pids_next(struct km_test_pids *p, int64_t *pid, int16_t *epoch)
{
	return km_daemon_pid_alloc_next(&p->a, pid, epoch);
}

void km_test_pids_close(struct km_test_pids *p)
{
	km_daemon_pid_alloc_fini(&p->a);
	free(p);
}

int64_t km_test_pids_block(void)
{
	return KM_DAEMON_PID_BLOCK;
}

const char *km_test_pids_file(void)
{
	return KM_DAEMON_PID_BLOCK_FILE;
}
