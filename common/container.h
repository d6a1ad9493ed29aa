/* From a pointer to a member back to the struct that embeds it: how an
 * intrusive io_uring request (STYLE 15), list link or backend handle finds
 * its owner. The one copy in the tree; DPDK's rte_common.h has its own
 * container_of, hence the prefix, so the two never meet in one file. */
#ifndef KM_COMMON_CONTAINER_H
#define KM_COMMON_CONTAINER_H

#include <stddef.h>

/* The unevaluated comparison makes the compiler reject a p that does not
 * point to member's type, as rte_common.h's and the kernel's versions do;
 * it adds nothing to the result and evaluates p once. */
#define km_container_of(p, type, member)                                       \
	((type *)(void *)((char *)(p) - offsetof(type, member) -             \
			  0 * sizeof((p) == &((type *)0)->member)))

#endif
