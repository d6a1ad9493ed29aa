/* kmirrord: the control thread and the life of the process.
 *
 * km_daemon_run() resolves the cluster id, finds the partitions to serve
 * (mirrored topics as the source reports them, local.topics, and any
 * partition directory already in data.dir), starts the workers, opens every
 * log (R7 recovery), starts the fetch sessions, listens for Kafka clients,
 * serves the control socket, and on SIGTERM or SIGINT shuts down cleanly:
 * fetchers stopped, logs flushed, producer snapshots and clean-shutdown
 * markers written. A restart resumes every partition at its log end.
 */
#ifndef KM_CONTROL_DAEMON_H
#define KM_CONTROL_DAEMON_H

#include "control/config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the daemon publishes in data.dir once it serves: the Kafka port
 * actually bound (listeners may ask for port 0), for scripts and tests. */
#define KM_DAEMON_PORT_FILE "kmirrord.port"
/* Held (flock) by the one kmirrord that owns data.dir; its text names the
 * holder's pid, control socket and listeners (control/daemon_lock.c). */
#define KM_DAEMON_LOCK_FILE ".lock"

/**
 * Run until SIGTERM/SIGINT (which the caller must have blocked in every
 * thread; the daemon takes them through a signalfd).
 * @return 0 after a clean shutdown, or a negative code (logged) when the
 *         daemon could not start or could not close cleanly:
 *         KM_EDATADIRLOCK when another kmirrord holds data.dir (the log
 *         line names its pid and control socket).
 */
int km_daemon_run(struct km_config *cfg);

#ifdef __cplusplus
}
#endif

#endif
