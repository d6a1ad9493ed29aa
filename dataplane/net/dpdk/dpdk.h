/* DPDK process set-up for the DPDK network backend (KM_NET_DPDK,
 * dataplane/net/net.h): the EAL is initialised once per process, by the daemon
 * at start, before any DPDK backend is created. Nothing here names a DPDK
 * type, so control/ includes this header without DPDK's.
 */
#ifndef KM_DATAPLANE_DPDK_DPDK_H
#define KM_DATAPLANE_DPDK_DPDK_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * rte_eal_init() with argv (argv[0] is the program name), once per process.
 * The calling thread's CPU affinity is restored afterwards: the EAL pins
 * its main lcore, and the threads kmirrord starts later (workers, the log's
 * io_uring helpers) would inherit that pin.
 * @return the number of arguments the EAL used (>= 0), -EALREADY if the EAL
 *         is already up, or the negative errno the EAL reported (-EINVAL
 *         bad arguments, -ENOMEM no hugepages, -EACCES no permission...).
 */
int km_dpdk_eal_init(int argc, char **argv);

/** True once km_dpdk_eal_init() succeeded (and before cleanup). */
bool km_dpdk_eal_ready(void);

/** rte_eal_cleanup(), after every DPDK backend was destroyed. Safe to call
 *  when the EAL never came up. */
void km_dpdk_eal_cleanup(void);

#ifdef __cplusplus
}
#endif

#endif
