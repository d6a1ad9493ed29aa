/* The failback question to an upstream (upstream.h). */
#include <stdio.h>
#include <string.h>

#include "common/errors.h"
#include "control/kclient.h"
#include "control/upstream.h"

#define KEYS_MAX 512u
#define META_VERSION 2 /* the first with ClusterId */

static int enc_apiversions(struct km_wire_wr *w, int16_t v, const void *m)
{
	return km_apiversions_req_encode(w, v, m);
}

static int enc_barrier(struct km_wire_wr *w, int16_t v, const void *m)
{
	return km_barrier_req_encode(w, v, m);
}

static int enc_dconfigs(struct km_wire_wr *w, int16_t v, const void *m)
{
	return km_dconfigs_req_encode(w, v, m);
}

static int enc_metadata(struct km_wire_wr *w, int16_t v, const void *m)
{
	return km_metadata_req_encode(w, v, m);
}

/* Does the upstream list KmirrorBarrier v0? (v0: every broker speaks it.) */
static int speaks_barrier(struct km_kclient *c, bool *yes)
{
	static struct km_api_range keys[KEYS_MAX];
	struct km_apiversions_req req = { 0 };
	struct km_apiversions_resp m = { 0, keys, KEYS_MAX, 0, 0 };
	struct km_wire_rd r;
	int rc;

	km_wire_name_set_null(&req.sw_name);
	km_wire_name_set_null(&req.sw_version);
	*yes = false;
	if ((rc = km_kclient_call(c, KM_API_API_VERSIONS, 0, enc_apiversions,
				  &req, &r)) < 0 ||
	    (rc = km_apiversions_resp_decode(&r, 0, &m)) < 0)
		return rc;
	if (m.error_code != 0)
		return KM_ESOURCE;
	for (uint32_t i = 0; i < m.n_keys; i++)
		*yes |= keys[i].api_key == KM_API_KMIRROR_BARRIER &&
			keys[i].min_version <= 0 && keys[i].max_version >= 0;
	return 0;
}

static int ask_barrier(struct km_kclient *c, const char *topic,
		       int32_t partition, const char *cluster_id,
		       struct km_upstream_answer *out)
{
	struct km_barrier_req req = { .partition = partition };
	struct km_barrier_resp m;
	struct km_wire_rd r;
	int rc;

	km_wire_name_set(&req.topic, topic);
	km_wire_name_set(&req.source_cluster_id, cluster_id);
	if ((rc = km_kclient_call(c, KM_API_KMIRROR_BARRIER, 0, enc_barrier,
				  &req, &r)) < 0 ||
	    (rc = km_barrier_resp_decode(&r, 0, &m)) < 0)
		return rc;
	out->error_code = m.error_code;
	out->barrier_offset = m.barrier_offset;
	out->log_start = m.log_start_offset;
	out->high_watermark = m.high_watermark;
	snprintf(out->cluster_id, sizeof(out->cluster_id), "%s",
		 m.cluster_id.s);
	return 0;
}

/* A plain Kafka source: only its cluster id (for the next barrier); a
 * kmirror host: also its node id, which its DescribeConfigs is asked by. */
static int ask_cluster_id(struct km_kclient *c, struct km_upstream_answer *out,
			  int32_t *node_id)
{
	/* An empty topic list asks for none; room for some anyway, for a
	 * server that answers with all. */
	static struct km_metadata_broker brokers[256];
	static struct km_metadata_topic topics[64];
	static struct km_metadata_part parts[4096];
	static int32_t nodes[16384];
	struct km_metadata_req req = { .topics = NULL, .n_topics = 0 };
	struct km_metadata_resp m = { .brokers = brokers, .brokers_max = 256,
				      .topics = topics, .topics_max = 64,
				      .parts = parts, .parts_max = 4096,
				      .nodes = nodes, .nodes_max = 16384 };
	struct km_wire_rd r;
	int rc;

	if ((rc = km_kclient_call(c, KM_API_METADATA, META_VERSION,
				  enc_metadata, &req, &r)) < 0 ||
	    (rc = km_metadata_resp_decode(&r, META_VERSION, &m)) < 0)
		return rc;
	if (m.cluster_id.len > 0)
		snprintf(out->cluster_id, sizeof(out->cluster_id), "%s",
			 m.cluster_id.s);
	*node_id = m.n_brokers > 0 ? brokers[0].node_id : -1;
	return 0;
}

/* What a kmirror host mirrors from: one key of its own broker configs. A
 * host too old to name it answers no such entry: nothing is known. */
static int ask_sources(struct km_kclient *c, struct km_upstream_answer *out)
{
	static struct km_dconfigs_dentry entries[16];
	struct km_dconfigs_dresult results[1];
	struct km_wire_name key;
	struct km_dconfigs_resource res = { .type = KM_CONFIG_RESOURCE_BROKER,
					    .keys_first = 0, .n_keys = 1 };
	struct km_dconfigs_req req = { .resources = &res, .resources_max = 1,
				       .n_resources = 1, .keys = &key,
				       .keys_max = 1, .n_keys = 1 };
	struct km_dconfigs_resp m = { .results = results, .results_max = 1,
				      .entries = entries, .entries_max = 16 };
	struct km_upstream_answer meta = { 0 };
	struct km_wire_rd r;
	int32_t node = -1;
	char id[16];
	int rc;

	if ((rc = ask_cluster_id(c, &meta, &node)) < 0)
		return rc;
	snprintf(id, sizeof(id), "%d", node);
	km_wire_name_set(&res.name, id);
	km_wire_name_set(&key, "kmirror.source.cluster.ids");
	if ((rc = km_kclient_call(c, KM_API_DESCRIBE_CONFIGS, 1, enc_dconfigs,
				  &req, &r)) < 0 ||
	    (rc = km_dconfigs_resp_decode(&r, 1, &m)) < 0)
		return rc;
	for (uint32_t k = 0; m.n_results == 1 && results[0].error_code == 0 &&
			     k < m.n_entries; k++)
		if (strcmp(entries[k].name.s, key.s) == 0 && entries[k].value.len > 0)
			snprintf(out->mirrors_from, sizeof(out->mirrors_from),
				 "%s", entries[k].value.s);
	return 0;
}

bool km_upstream_mirrors_from(const struct km_upstream_answer *a,
			      const char *cluster_id)
{
	size_t n = strlen(cluster_id);

	for (const char *p = a->mirrors_from; n > 0 && *p != '\0';) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);

		if (len == n && strncmp(p, cluster_id, n) == 0)
			return true;
		p += len + (comma != NULL);
	}
	return false;
}

int km_upstream_ask(const struct km_config_addr *a, const char *topic,
		    int32_t partition, const char *our_cluster_id,
		    int timeout_ms, struct km_upstream_answer *out)
{
	struct km_kclient c;
	int32_t node;
	int rc;

	memset(out, 0, sizeof(*out));
	out->barrier_offset = out->log_start = out->high_watermark = -1;
	if ((rc = km_kclient_open(&c, a, timeout_ms)) < 0) {
		snprintf(out->why, sizeof(out->why), "%s", c.why);
		return rc;
	}
	if ((rc = speaks_barrier(&c, &out->kmirror)) == 0)
		rc = out->kmirror ? ask_barrier(&c, topic, partition,
						our_cluster_id, out)
				  : ask_cluster_id(&c, out, &node);
	/* A kmirror host that cannot say is taken to mirror from nobody:
	 * the barrier answer above stands on its own. */
	if (rc == 0 && out->kmirror)
		(void)ask_sources(&c, out);
	km_kclient_close(&c);
	return rc;
}
