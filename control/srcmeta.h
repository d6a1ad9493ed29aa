/* Startup discovery: how many partitions each mirrored topic has on the
 * source, and the source's cluster id.
 *
 * A small blocking client for the control thread (it runs once, before the
 * workers mirror anything): connect to each bootstrap address in turn, send
 * Metadata v2 for the topics (no auto-creation), and read the answer.
 */
#ifndef KM_CONTROL_SRCMETA_H
#define KM_CONTROL_SRCMETA_H

#include <stddef.h>
#include <stdint.h>

#include "control/config.h"

#ifdef __cplusplus
extern "C" {
#endif

struct km_srcmeta {
	/* Per cfg->topics[i]: partitions on the source, or 0 if the source
	 * does not know the topic. */
	uint32_t partitions[KM_CONFIG_TOPICS_MAX];
	char cluster_id[256];
};

/**
 * Ask the source about cfg->topics.
 * @param timeout_ms  per bootstrap address (connect + answer).
 * @param err         one-line reason on failure (names the addresses tried).
 * @return 0 (some topics may be unknown: partitions[i] == 0), or
 *         -ECONNREFUSED/-ETIMEDOUT/KM_ERESOLVE/... from the last address
 *         tried (err has getaddrinfo's reason for a name), or a
 *         KM_EWIRE* code for a malformed answer.
 */
int km_srcmeta_fetch(const struct km_config *cfg, int timeout_ms,
		     struct km_srcmeta *out, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif
