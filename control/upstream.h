/* What an upstream says about one partition, for start and failback (R5):
 * whether it is a kmirror host (its ApiVersions lists KmirrorBarrier),
 * and if so the latest MIRROR_PID_RESET barrier its partition holds for our
 * cluster id - the offset up to which its log and ours agree - and its
 * cluster id. A blocking exchange on the control thread (kclient.h). */
#ifndef KM_CONTROL_UPSTREAM_H
#define KM_CONTROL_UPSTREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "common/resolve.h"
#include "control/config.h"

#ifdef __cplusplus
extern "C" {
#endif

struct km_upstream_answer {
	bool kmirror;		 /* speaks KmirrorBarrier */
	int16_t error_code;	 /* its Kafka error for the partition */
	int64_t barrier_offset;	 /* -1: no barrier for the cluster id asked */
	int64_t log_start;
	int64_t high_watermark;
	char cluster_id[256];	 /* the upstream's (Metadata v2 if not kmirror) */
	/* A kmirror host: the clusters it mirrors from (its DescribeConfigs
	 * of itself, kmirror.source.cluster.ids, comma-separated; "" if it
	 * mirrors from none or does not say). */
	char mirrors_from[256];
	char why[KM_RESOLVE_WHY_BYTES]; /* a host that did not resolve, or "" */
};

/**
 * Ask a (connect, ApiVersions, then KmirrorBarrier or Metadata).
 * @return 0 and *out, or -errno from the connection (-EAFNOSUPPORT: an
 *         IPv6 literal), KM_ERESOLVE (out->why names the host and
 *         getaddrinfo's reason), or a wire error (a malformed answer).
 */
int km_upstream_ask(const struct km_config_addr *a, const char *topic,
		    int32_t partition, const char *our_cluster_id,
		    int timeout_ms, struct km_upstream_answer *out);

/** Does the answer say the upstream mirrors from cluster_id (a loop)? */
bool km_upstream_mirrors_from(const struct km_upstream_answer *a,
			      const char *cluster_id);

#ifdef __cplusplus
}
#endif

#endif
