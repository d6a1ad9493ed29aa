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
#include "kafka/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

struct km_srcmeta {
	/* Per cfg->topics[i]: partitions on the source, or 0 if the source
	 * does not know the topic. */
	uint32_t partitions[KM_CONFIG_TOPICS_MAX];
	char cluster_id[256];
};

/* One topic of a listing. */
struct km_srcmeta_topic {
	char name[KM_WIRE_NAME_BYTES_MAX + 1];
	int16_t error_code;
	uint32_t partitions;
};

struct km_srcmeta_list {
	struct km_srcmeta_topic *topics;	/* malloc'd */
	uint32_t n;
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

/**
 * Every topic the source has (Metadata with a null topic list), for topic
 * discovery. Same addresses, timeout and errors as km_srcmeta_fetch.
 * @return 0 (out->topics to free with km_srcmeta_list_free), or a
 *         negative code (out empty).
 */
int km_srcmeta_list(const struct km_config *cfg, int timeout_ms,
		    struct km_srcmeta_list *out, char *err, size_t err_len);
void km_srcmeta_list_free(struct km_srcmeta_list *l);

#ifdef __cplusplus
}
#endif

#endif
