/* The producer id allocator (control/daemon_pid.c) behind a C interface:
 * its header, control/daemon_pvt.h, is private to control/ and C only. */
#ifndef KM_TESTS_CTL_PID_ALLOC_SUPPORT_H
#define KM_TESTS_CTL_PID_ALLOC_SUPPORT_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
struct km_test_pids;
/* km_daemon_pid_alloc_init on data_dir; NULL (and *rc) on failure. */
struct km_test_pids *km_test_pids_open(const char *data_dir, int64_t max_seen,
				       int *rc);
int km_test_pids_next(struct km_test_pids *p, int64_t *pid, int16_t *epoch);
void km_test_pids_close(struct km_test_pids *p);
int64_t km_test_pids_block(void);	  /* KM_DAEMON_PID_BLOCK */
const char *km_test_pids_file(void); /* KM_DAEMON_PID_BLOCK_FILE */
#ifdef __cplusplus
}
#endif
#endif
