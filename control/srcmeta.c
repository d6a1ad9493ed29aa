/* Blocking Metadata v2 request to the source, for startup discovery. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "control/kclient.h"
#include "control/srcmeta.h"
#include "kafka/proto.h"

#define META_VERSION 2 /* the first with ClusterId */

static int encode_req(struct km_wire_wr *w, int16_t version, const void *req)
{
	return km_metadata_req_encode(w, version, req);
}

struct meta_arrays {
	struct km_metadata_broker brokers[64];
	struct km_metadata_topic topics[KM_CONFIG_TOPICS_MAX];
	struct km_metadata_part parts[16384];
	int32_t nodes[65536];
};

static int decode(const struct km_config *cfg, struct km_wire_rd *r,
		  struct km_srcmeta *out)
{
	struct meta_arrays *a = calloc(1, sizeof(*a));
	struct km_metadata_resp m = {
		.brokers = a ? a->brokers : NULL, .brokers_max = 64,
		.topics = a ? a->topics : NULL,
		.topics_max = KM_CONFIG_TOPICS_MAX,
		.parts = a ? a->parts : NULL, .parts_max = 16384,
		.nodes = a ? a->nodes : NULL, .nodes_max = 65536,
	};
	int rc;

	if (a == NULL)
		return -ENOMEM;
	if ((rc = km_metadata_resp_decode(r, META_VERSION, &m)) == 0) {
		for (uint32_t t = 0; t < m.n_topics; t++)
			for (uint32_t i = 0; i < cfg->topics_count; i++)
				if (m.topics[t].error_code == 0 &&
				    strcmp(m.topics[t].name.s, cfg->topics[i]) == 0)
					out->partitions[i] = m.topics[t].count;
		if (m.cluster_id.len > 0)
			snprintf(out->cluster_id, sizeof(out->cluster_id),
				 "%s", m.cluster_id.s);
	}
	free(a);
	return rc;
}

/* why: the host that did not resolve and getaddrinfo's reason, or "". */
static int ask(const struct km_config *cfg, const struct km_config_addr *a,
	       int timeout_ms, struct km_srcmeta *out, char *why, size_t len)
{
	static struct km_wire_name names[KM_CONFIG_TOPICS_MAX];
	struct km_metadata_req m = { .topics = names,
				     .topics_max = KM_CONFIG_TOPICS_MAX,
				     .n_topics = (int32_t)cfg->topics_count };
	struct km_kclient c;
	struct km_wire_rd r;
	int rc;

	for (uint32_t i = 0; i < cfg->topics_count; i++)
		km_wire_name_set(&names[i], cfg->topics[i]);
	if ((rc = km_kclient_open(&c, a, timeout_ms)) < 0) {
		snprintf(why, len, "%s", c.why);
		return rc;
	}
	rc = km_kclient_call(&c, KM_API_METADATA, META_VERSION, encode_req, &m,
			     &r);
	if (rc == 0)
		rc = decode(cfg, &r, out);
	km_kclient_close(&c);
	return rc;
}

int km_srcmeta_fetch(const struct km_config *cfg, int timeout_ms,
		     struct km_srcmeta *out, char *err, size_t err_len)
{
	int rc = -EINVAL;

	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < cfg->bootstrap_count; i++) {
		const struct km_config_addr *a = &cfg->bootstrap[i];
		char why[KM_RESOLVE_WHY_BYTES] = "";

		if ((rc = ask(cfg, a, timeout_ms, out, why, sizeof(why))) == 0)
			return 0;
		snprintf(err, err_len, "source %s:%u: %s%s", a->host, a->port,
			 why[0] ? "" : "Metadata: ", why[0] ? why : km_strerror(rc));
	}
	return rc;
}
