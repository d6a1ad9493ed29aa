/* EAL start-up and clean-up, once per process. */
#include "dataplane/net/dpdk/dpdk.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>

#include "common/log.h"

enum { EAL_DOWN = 0, EAL_STARTING, EAL_UP, EAL_FAILED, EAL_CLEANED };

/* Moved by the one thread that initialises (the daemon's control thread,
 * before it starts workers); acquire/release so that a backend created on
 * another thread sees the EAL's set-up once it reads EAL_UP. */
static _Atomic int eal_state;

int km_dpdk_eal_init(int argc, char **argv)
{
	cpu_set_t saved;
	bool have_mask;
	int rc, expected = EAL_DOWN;

	/* The EAL cannot be initialised twice in a process, even after a
	 * failure. */
	if (!atomic_compare_exchange_strong_explicit(&eal_state, &expected,
						     EAL_STARTING,
						     memory_order_acq_rel,
						     memory_order_acquire))
		return expected == EAL_UP ? -EALREADY : -ENOTRECOVERABLE;
	have_mask = pthread_getaffinity_np(pthread_self(), sizeof(saved),
					   &saved) == 0;
	rc = rte_eal_init(argc, argv);
	if (rc < 0) {
		int e = rte_errno > 0 ? rte_errno : EINVAL;

		atomic_store_explicit(&eal_state, EAL_FAILED,
				      memory_order_release);
		KM_ERROR("dpdk", "EAL initialisation failed: %s",
			 rte_strerror(e));
		return -e;
	}
	if (have_mask &&
	    pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved) != 0)
		KM_WARN("dpdk", "could not restore the CPU affinity the EAL changed");
	atomic_store_explicit(&eal_state, EAL_UP, memory_order_release);
	KM_INFO("dpdk", "EAL up (%d arguments used), %u ethdev port(s)", rc,
		(unsigned)rte_eth_dev_count_avail());
	return rc;
}

bool km_dpdk_eal_ready(void)
{
	return atomic_load_explicit(&eal_state, memory_order_acquire) ==
	       EAL_UP;
}

void km_dpdk_eal_cleanup(void)
{
	int expected = EAL_UP;

	if (atomic_compare_exchange_strong_explicit(&eal_state, &expected,
						    EAL_CLEANED,
						    memory_order_acq_rel,
						    memory_order_acquire))
		rte_eal_cleanup();
}
