/* Blocking Metadata v2 requests to the source: startup discovery of the
 * configured topics, and the listings topic discovery matches. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/errors.h"
#include "control/kclient.h"
#include "control/srcmeta.h"
#include "kafka/proto.h"

#define META_VERSION 2 /* the first with ClusterId */

static int encode_req(struct km_wire_wr *w, int16_t version, const void *req)
{
	return km_metadata_req_encode(w, version, req);
}

/* All topics: the most a listing may name (more is KM_EWIRELIMIT). */
#define ALL_TOPICS_MAX 16384u
#define ALL_PARTS_MAX (256u * 1024)

struct meta_arrays {
	struct km_metadata_broker brokers[64];
	struct km_metadata_topic topics[ALL_TOPICS_MAX];
	struct km_metadata_part parts[ALL_PARTS_MAX];
	int32_t nodes[4 * ALL_PARTS_MAX];
};

/* What one answer is for: the configured topics, or a listing. */
struct want {
	const struct km_config *cfg;
	struct km_srcmeta *named;	/* or */
	struct km_srcmeta_list *all;
};

static int take_named(const struct km_metadata_resp *m, struct want *w)
{
	for (uint32_t t = 0; t < m->n_topics; t++)
		for (uint32_t i = 0; i < w->cfg->topics_count; i++)
			if (m->topics[t].error_code == 0 &&
			    strcmp(m->topics[t].name.s, w->cfg->topics[i]) == 0)
				w->named->partitions[i] = m->topics[t].count;
	if (m->cluster_id.len > 0)
		snprintf(w->named->cluster_id, sizeof(w->named->cluster_id),
			 "%s", m->cluster_id.s);
	return 0;
}

static int take_all(const struct km_metadata_resp *m, struct want *w)
{
	struct km_srcmeta_list *l = w->all;

	l->topics = calloc(m->n_topics ? m->n_topics : 1, sizeof(*l->topics));
	if (l->topics == NULL)
		return -ENOMEM;
	for (uint32_t t = 0; t < m->n_topics; t++) {
		struct km_srcmeta_topic *o = &l->topics[l->n];

		if (m->topics[t].name.len <= 0)
			continue;
		snprintf(o->name, sizeof(o->name), "%s", m->topics[t].name.s);
		o->error_code = m->topics[t].error_code;
		o->partitions = m->topics[t].count;
		l->n++;
	}
	if (m->cluster_id.len > 0)
		snprintf(l->cluster_id, sizeof(l->cluster_id), "%s",
			 m->cluster_id.s);
	return 0;
}

/* The decode's room (~16 MB, touched only as far as the answer fills it)
 * is mapped and unmapped here, not calloc'd: glibc raises its mmap
 * threshold to the size of an mmapped block it frees, so the second
 * calloc of it came from the heap, zeroed whole, and stayed resident -
 * 16 MB more from the first topic discovery on, which e2e-scale counted
 * against the partitions when its one-partition mirror had not yet made
 * one (issue 17). */
static struct meta_arrays *arrays_map(void)
{
	void *p = mmap(NULL, sizeof(struct meta_arrays), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static int decode(struct km_wire_rd *r, struct want *w)
{
	struct meta_arrays *a = arrays_map();
	struct km_metadata_resp m = {
		.brokers = a ? a->brokers : NULL, .brokers_max = 64,
		.topics = a ? a->topics : NULL, .topics_max = ALL_TOPICS_MAX,
		.parts = a ? a->parts : NULL, .parts_max = ALL_PARTS_MAX,
		.nodes = a ? a->nodes : NULL, .nodes_max = 4 * ALL_PARTS_MAX,
	};
	int rc;

	if (a == NULL)
		return -ENOMEM;
	if ((rc = km_metadata_resp_decode(r, META_VERSION, &m)) == 0)
		rc = w->named ? take_named(&m, w) : take_all(&m, w);
	munmap(a, sizeof(*a));
	return rc;
}

/* why: the host that did not resolve and getaddrinfo's reason, or "". */
static int ask(struct want *w, const struct km_config_addr *a, int timeout_ms,
	       char *why, size_t len)
{
	static struct km_wire_name names[KM_CONFIG_TOPICS_MAX];
	const struct km_config *cfg = w->cfg;
	struct km_metadata_req m = { .topics = names,
				     .topics_max = KM_CONFIG_TOPICS_MAX,
				     .n_topics = w->named
							 ? (int32_t)cfg->topics_count
							 : -1 };
	struct km_kclient c;
	struct km_wire_rd r;
	int rc;

	for (uint32_t i = 0; w->named && i < cfg->topics_count; i++)
		km_wire_name_set(&names[i], cfg->topics[i]);
	if ((rc = km_kclient_open(&c, a, timeout_ms)) < 0) {
		snprintf(why, len, "%s", c.why);
		return rc;
	}
	rc = km_kclient_call(&c, KM_API_METADATA, META_VERSION, encode_req, &m,
			     &r);
	if (rc == 0)
		rc = decode(&r, w);
	km_kclient_close(&c);
	return rc;
}

static int fetch(struct want *w, int timeout_ms, char *err, size_t err_len)
{
	int rc = -EINVAL;

	for (uint32_t i = 0; i < w->cfg->bootstrap_count; i++) {
		const struct km_config_addr *a = &w->cfg->bootstrap[i];
		char why[KM_RESOLVE_WHY_BYTES] = "";

		if ((rc = ask(w, a, timeout_ms, why, sizeof(why))) == 0)
			return 0;
		snprintf(err, err_len, "source %s:%u: %s%s", a->host, a->port,
			 why[0] ? "" : "Metadata: ", why[0] ? why : km_strerror(rc));
	}
	return rc;
}

int km_srcmeta_fetch(const struct km_config *cfg, int timeout_ms,
		     struct km_srcmeta *out, char *err, size_t err_len)
{
	struct want w = { .cfg = cfg, .named = out };

	memset(out, 0, sizeof(*out));
	return fetch(&w, timeout_ms, err, err_len);
}

int km_srcmeta_list(const struct km_config *cfg, int timeout_ms,
		    struct km_srcmeta_list *out, char *err, size_t err_len)
{
	struct want w = { .cfg = cfg, .all = out };
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = fetch(&w, timeout_ms, err, err_len)) < 0)
		km_srcmeta_list_free(out);
	return rc;
}

void km_srcmeta_list_free(struct km_srcmeta_list *l)
{
	free(l->topics);
	memset(l, 0, sizeof(*l));
}
