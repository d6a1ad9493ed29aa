/* The Admin client's describe calls kmirrord answers at once:
 * DescribeConfigs and DescribeCluster.
 *
 * DescribeConfigs names, for a topic, the settings kmirror's behaviour
 * follows, under Kafka's topic config names (cleanup.policy ... segment.bytes)
 * with their broker synonyms (log.segment.bytes ...). Where a value comes
 * from follows Kafka's ConfigSource: a topic's own value (a kmirrord
 * per-topic override, or the offsets topic's compaction and segment cap) is
 * TOPIC_CONFIG, a value kmirrord's config file set is STATIC_BROKER_CONFIG,
 * and kmirror's default is DEFAULT_CONFIG. A mirrored topic's configs
 * synced from the source (tconfig.h) are TOPIC_CONFIG too, with the source's
 * value, including those kmirror only shows. No client may alter a config
 * here (IncrementalAlterConfigs is not served), so every entry is
 * read-only. The broker also names, under kmirror.source.cluster.ids, the
 * clusters it mirrors from and, after each, the clusters that one said it
 * mirrors from (the whole chain upstream): what another kmirror host asks
 * to refuse a loop of any length. Errors are Kafka's
 * (ConfigHelper.describeConfigs): UNKNOWN_TOPIC_OR_PARTITION for a topic
 * not served, INVALID_REQUEST for another broker id or a resource type
 * kmirror has no configs of; ErrorMessage is "" where Kafka sets none (its
 * generated default), which its client then words itself.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "dataplane/serve/frontend_pvt.h"
#include "dataplane/serve/tconfig.h"

/* Bytes of a formatted value (an int64 in decimal, or a word). */
#define VALUE_BYTES 24u
/* The broker config naming the clusters this host mirrors from, so that
 * another kmirror host can refuse a loop (issue 19 item 7). */
#define SOURCES_KEY "kmirror.source.cluster.ids"
/* Bytes of its value: a few cluster ids (22 characters each). */
#define SOURCES_BYTES 256u
/* Bytes of an error message kmirrord writes (it may quote a name). */
#define MESSAGE_BYTES (128u + KM_WIRE_NAME_BYTES_MAX)

enum cfg_which {
	CFG_CLEANUP_POLICY,
	CFG_COMPRESSION_TYPE,
	CFG_FLUSH_MS,
	CFG_INDEX_INTERVAL_BYTES,
	CFG_MAX_MESSAGE_BYTES,
	CFG_TIMESTAMP_TYPE,
	CFG_RETENTION_BYTES,
	CFG_RETENTION_MS,
	CFG_SEGMENT_BYTES,
};

struct cfg_def {
	const char *topic_name;
	const char *broker_name;
	int8_t type;
	enum cfg_which which;
};

/* Sorted by topic name, as Kafka lists them. */
static const struct cfg_def defs[] = {
	{ "cleanup.policy", "log.cleanup.policy", KM_CONFIG_TYPE_LIST,
	  CFG_CLEANUP_POLICY },
	{ "compression.type", "compression.type", KM_CONFIG_TYPE_STRING,
	  CFG_COMPRESSION_TYPE },
	{ "flush.ms", "log.flush.interval.ms", KM_CONFIG_TYPE_LONG, CFG_FLUSH_MS },
	{ "index.interval.bytes", "log.index.interval.bytes", KM_CONFIG_TYPE_INT,
	  CFG_INDEX_INTERVAL_BYTES },
	{ "max.message.bytes", "message.max.bytes", KM_CONFIG_TYPE_INT,
	  CFG_MAX_MESSAGE_BYTES },
	{ "message.timestamp.type", "log.message.timestamp.type",
	  KM_CONFIG_TYPE_STRING, CFG_TIMESTAMP_TYPE },
	{ "retention.bytes", "log.retention.bytes", KM_CONFIG_TYPE_LONG,
	  CFG_RETENTION_BYTES },
	{ "retention.ms", "log.retention.ms", KM_CONFIG_TYPE_LONG,
	  CFG_RETENTION_MS },
	{ "segment.bytes", "log.segment.bytes", KM_CONFIG_TYPE_INT,
	  CFG_SEGMENT_BYTES },
};

#define N_DEFS (sizeof(defs) / sizeof(defs[0]))

/* A setting's value as Kafka prints it. compact: the offsets topic, which
 * the coordinator compacts, or a topic.cleanup.policy=compact topic, whose
 * writable partitions the log cleaner compacts. */
static void cfg_value(enum cfg_which which, const struct km_log_config *c,
		      bool compact, char out[VALUE_BYTES])
{
	int64_t v = 0;

	switch (which) {
	case CFG_CLEANUP_POLICY:
		snprintf(out, VALUE_BYTES, "%s", compact ? "compact" : "delete");
		return;
	case CFG_COMPRESSION_TYPE: /* batches are kept as written */
		snprintf(out, VALUE_BYTES, "producer");
		return;
	case CFG_TIMESTAMP_TYPE: /* no timestamp is rewritten */
		snprintf(out, VALUE_BYTES, "CreateTime");
		return;
	case CFG_FLUSH_MS:
		v = c->flush_always ? 0 : (int64_t)c->flush_interval_ms;
		break;
	case CFG_INDEX_INTERVAL_BYTES:
		v = c->index_interval_bytes;
		break;
	case CFG_MAX_MESSAGE_BYTES:
		v = c->batch_bytes_max;
		break;
	case CFG_RETENTION_BYTES:
		v = c->retention_bytes;
		break;
	case CFG_RETENTION_MS:
		v = c->retention_ms;
		break;
	case CFG_SEGMENT_BYTES:
		v = (int64_t)c->segment_bytes;
		break;
	}
	snprintf(out, VALUE_BYTES, "%" PRId64, v);
}

/* The keys asked for: null or empty is every one (Kafka's rule). */
static bool wanted(const struct km_dconfigs_req *req,
		   const struct km_dconfigs_resource *res, const char *name)
{
	if (res->n_keys <= 0)
		return true;
	for (int32_t k = 0; k < res->n_keys; k++)
		if (strcmp(req->keys[res->keys_first + k].s, name) == 0)
			return true;
	return false;
}

/* One resource's view: the topic's settings (or none for the broker) and
 * the broker-level ones they fall back on. */
struct cfg_scope {
	const struct km_frontend *fe;
	const struct km_dconfigs_req *req;
	const struct km_dconfigs_resource *res;
	const struct km_log_config *topic;	/* NULL: the broker itself */
	bool compact;
	int16_t version;
	/* The topic's configs synced from the source, sorted by name. */
	const struct km_tconfig_entry *synced;
	uint32_t n_synced;
	struct fe_conn *fc;	/* who asks (authorization) */
};

static const char *synced_value(const struct cfg_scope *s, const char *name)
{
	for (uint32_t i = 0; i < s->n_synced; i++)
		if (strcmp(s->synced[i].name, name) == 0)
			return s->synced[i].value;
	return NULL;
}

static void broker_values(const struct km_frontend *fe,
			  const struct cfg_def *d, char val[VALUE_BYTES],
			  int8_t *source)
{
	struct km_log_config dflt;
	char dv[VALUE_BYTES];

	km_log_config_defaults(&dflt, NULL, NULL, 0);
	cfg_value(d->which, &fe->broker_log, false, val);
	cfg_value(d->which, &dflt, false, dv);
	*source = strcmp(val, dv) == 0 ? KM_CONFIG_SOURCE_DEFAULT
				       : KM_CONFIG_SOURCE_STATIC_BROKER;
}

static int put_entry(struct km_wire_wr *w, const struct cfg_scope *s,
		     const struct cfg_def *d)
{
	char bval[VALUE_BYTES], tval[KM_TCONFIG_VALUE_BYTES];
	struct km_dconfigs_synonym syn[2];
	struct km_dconfigs_entry e = { 0 };
	const char *sv;
	int8_t bsrc;

	broker_values(s->fe, d, bval, &bsrc);
	e.read_only = true; /* no client alters it here */
	e.config_type = d->type;
	e.name = s->topic ? d->topic_name : d->broker_name;
	e.value = bval;
	e.source = bsrc;
	/* A synced value is what the source's topic says: shown as the
	 * topic's own even where it equals the broker's, as Kafka does. */
	if (s->topic && (sv = synced_value(s, d->topic_name)) != NULL) {
		snprintf(tval, sizeof(tval), "%s", sv);
		e.value = tval;
		e.source = KM_CONFIG_SOURCE_TOPIC;
	} else if (s->topic) {
		cfg_value(d->which, s->topic, s->compact, tval);
		if (strcmp(tval, bval) != 0) {
			e.value = tval;
			e.source = KM_CONFIG_SOURCE_TOPIC;
		}
	}
	/* Kafka's synonyms: the topic's own value first, then the broker's. */
	if (s->req->include_synonyms) {
		if (e.source == KM_CONFIG_SOURCE_TOPIC)
			syn[e.n_synonyms++] = (struct km_dconfigs_synonym){
				d->topic_name, tval, KM_CONFIG_SOURCE_TOPIC };
		syn[e.n_synonyms++] = (struct km_dconfigs_synonym){
			d->broker_name, bval, bsrc };
		e.synonyms = syn;
	}
	return km_dconfigs_resp_enc_entry(w, s->version, &e);
}

static const char *def_name(const struct cfg_scope *s, const struct cfg_def *d)
{
	return s->topic ? d->topic_name : d->broker_name;
}

static bool is_def(const char *topic_name)
{
	for (size_t i = 0; i < N_DEFS; i++)
		if (strcmp(defs[i].topic_name, topic_name) == 0)
			return true;
	return false;
}

/* A synced config kmirror does not behave by (delete.retention.ms, ...):
 * shown as the source has it, so that tools see the topic as there. */
static int put_extra(struct km_wire_wr *w, const struct cfg_scope *s,
		     const struct km_tconfig_entry *t)
{
	struct km_dconfigs_synonym syn = { t->name, t->value,
					   KM_CONFIG_SOURCE_TOPIC };
	struct km_dconfigs_entry e = {
		.name = t->name, .value = t->value, .read_only = true,
		.source = KM_CONFIG_SOURCE_TOPIC,
	};

	if (s->req->include_synonyms) {
		e.synonyms = &syn;
		e.n_synonyms = 1;
	}
	return km_dconfigs_resp_enc_entry(w, s->version, &e);
}

/* Is id one of the comma-separated ids in list? */
static bool listed(const char *list, const char *id)
{
	size_t n = strlen(id);

	for (const char *p = list; *p != '\0';) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);

		if (len == n && strncmp(p, id, n) == 0)
			return true;
		p += len + (comma != NULL);
	}
	return false;
}

/* Append id (n bytes) to the list unless it is there. @return false once
 * the list is full. */
static bool add_id(char out[SOURCES_BYTES], size_t *len, const char *id,
		   size_t n)
{
	char one[KM_WIRE_NAME_BYTES_MAX + 1];

	if (n == 0 || n >= sizeof(one))
		return true;
	memcpy(one, id, n);
	one[n] = '\0';
	if (listed(out, one))
		return true;
	if (*len + n + 2 > SOURCES_BYTES)
		return false;
	*len += (size_t)snprintf(out + *len, SOURCES_BYTES - *len, "%s%s",
				 *len ? "," : "", one);
	return true;
}

/* A source's own upstream clusters, as the control thread last heard
 * them (its kmirror.source.cluster.ids): a ring of any length then shows
 * our id to whoever would close it. */
static bool add_chain(const struct km_frontend *fe, const char *source,
		      char out[SOURCES_BYTES], size_t *len)
{
	char chain[KM_TCONFIG_VALUE_BYTES];

	if (fe->upstream == NULL ||
	    !km_tconfig_get(fe->upstream, source, chain, sizeof(chain)))
		return true;
	for (const char *p = chain; *p != '\0';) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);

		if (!add_id(out, len, p, n))
			return false;
		p += n + (comma != NULL);
	}
	return true;
}

/* The distinct source cluster ids of the partitions mirroring here (a
 * stopped one is writable and mirrors from nobody), each followed by the
 * clusters it mirrors from, comma-separated. */
static void source_ids(const struct km_frontend *fe, char out[SOURCES_BYTES])
{
	struct km_part_source_view v;
	size_t len = 0;

	out[0] = '\0';
	const struct km_part_index *ix = km_part_index_get(fe->table);

	for (uint32_t i = 0; i < ix->n; i++) {
		const struct km_part *p = ix->p[i];

		if (atomic_load_explicit(&p->mode, memory_order_acquire) !=
			    KM_PART_MIRROR ||
		    !km_part_source_read(&p->stats.source, &v) ||
		    v.cluster_id[0] == '\0')
			continue;
		if (!add_id(out, &len, v.cluster_id, strlen(v.cluster_id)) ||
		    !add_chain(fe, v.cluster_id, out, &len))
			break;
	}
}

static int put_sources(struct km_wire_wr *w, const struct cfg_scope *s)
{
	char ids[SOURCES_BYTES];
	struct km_dconfigs_entry e = {
		.name = SOURCES_KEY, .value = ids, .read_only = true,
		.source = KM_CONFIG_SOURCE_DEFAULT,
		.config_type = KM_CONFIG_TYPE_LIST,
	};

	source_ids(s->fe, ids);
	return km_dconfigs_resp_enc_entry(w, s->version, &e);
}

/* Every entry of a result in Kafka's order (by name): the settings kmirror
 * behaves by merged with the synced names it only shows, and for the
 * broker the clusters it mirrors from. put false: count only. */
static uint32_t walk(struct km_wire_wr *w, const struct cfg_scope *s, bool put)
{
	uint32_t n = 0, k = 0;

	for (size_t i = 0; i <= N_DEFS; i++) {
		const char *dn = i < N_DEFS ? def_name(s, &defs[i]) : NULL;

		for (; k < s->n_synced &&
		       (dn == NULL || strcmp(s->synced[k].name, dn) < 0); k++) {
			if (is_def(s->synced[k].name) ||
			    !wanted(s->req, s->res, s->synced[k].name))
				continue;
			n++;
			if (put && w->err == 0)
				put_extra(w, s, &s->synced[k]);
		}
		if (dn != NULL && wanted(s->req, s->res, dn)) {
			n++;
			if (put && w->err == 0)
				put_entry(w, s, &defs[i]);
		}
	}
	if (s->topic == NULL && wanted(s->req, s->res, SOURCES_KEY)) {
		n++;
		if (put && w->err == 0)
			put_sources(w, s);
	}
	return n;
}

static int put_configs(struct km_wire_wr *w, const struct cfg_scope *s)
{
	struct km_dconfigs_result res = {
		.error_message = "", .type = s->res->type, .name = s->res->name.s,
	};

	res.n_configs = walk(w, s, false);
	km_dconfigs_resp_enc_result(w, s->version, &res);
	walk(w, s, true);
	return km_dconfigs_resp_enc_result_end(w, s->version);
}

static int put_error(struct km_wire_wr *w, int16_t version,
		     const struct km_dconfigs_resource *r, int16_t code,
		     const char *message)
{
	struct km_dconfigs_result res = {
		.error_code = code, .error_message = message ? message : "",
		.type = r->type, .name = r->name.s,
	};

	km_dconfigs_resp_enc_result(w, version, &res);
	return km_dconfigs_resp_enc_result_end(w, version);
}

static const char *resource_type_name(int8_t type)
{
	switch (type) { /* ConfigResource.Type */
	case 8:
		return "BROKER_LOGGER";
	case 16:
		return "CLIENT_METRICS";
	case 32:
		return "GROUP";
	default:
		return "UNKNOWN";
	}
}

static int put_broker(struct km_wire_wr *w, struct cfg_scope *s)
{
	char msg[MESSAGE_BYTES], *end;
	long id = strtol(s->res->name.s, &end, 10);

	/* "" names the cluster-wide dynamic defaults: kmirror has none. */
	if (s->res->name.len == 0) {
		struct km_dconfigs_result res = { .error_message = "",
						  .type = s->res->type, .name = "" };

		km_dconfigs_resp_enc_result(w, s->version, &res);
		return km_dconfigs_resp_enc_result_end(w, s->version);
	}
	if (*end != '\0' || end == s->res->name.s || id != s->fe->node_id) {
		snprintf(msg, sizeof(msg), "Unexpected broker id, expected %d or "
			 "empty string, but received %s", s->fe->node_id,
			 s->res->name.s);
		return put_error(w, s->version, s->res, KM_KERR_INVALID_REQUEST, msg);
	}
	return put_configs(w, s);
}

static int put_resource(struct km_wire_wr *w, struct cfg_scope *s)
{
	char msg[MESSAGE_BYTES];
	struct km_part *const *first;
	struct km_part *p;
	uint32_t n;

	/* Kafka: DescribeConfigs on the topic, or on the cluster for a
	 * broker, before the resource is looked up. */
	if (s->res->type == KM_CONFIG_RESOURCE_TOPIC &&
	    !km_frontend_allowed(s->fc, KM_ACL_OP_DESCRIBE_CONFIGS,
				 KM_ACL_RES_TOPIC, s->res->name.s))
		return put_error(w, s->version, s->res,
				 KM_KERR_TOPIC_AUTHORIZATION_FAILED, NULL);
	if (s->res->type == KM_CONFIG_RESOURCE_BROKER &&
	    !km_frontend_allowed(s->fc, KM_ACL_OP_DESCRIBE_CONFIGS,
				 KM_ACL_RES_CLUSTER, KM_ACL_CLUSTER_NAME))
		return put_error(w, s->version, s->res,
				 KM_KERR_CLUSTER_AUTHORIZATION_FAILED, NULL);
	switch (s->res->type) {
	case KM_CONFIG_RESOURCE_TOPIC:
		n = km_part_topic(km_part_index_get(s->fe->table),
				  s->res->name.s, &first);
		if (n == 0)
			return put_error(w, s->version, s->res,
					 KM_KERR_UNKNOWN_TOPIC_OR_PARTITION, NULL);
		p = first[0];
		if (p->log == NULL)
			return put_error(w, s->version, s->res,
					 KM_KERR_LEADER_NOT_AVAILABLE, NULL);
		s->topic = km_log_config_get(p->log);
		s->compact = p->internal || s->topic->compact;
		return put_configs(w, s);
	case KM_CONFIG_RESOURCE_BROKER:
		return put_broker(w, s);
	default:
		snprintf(msg, sizeof(msg), "Unsupported resource type: %s",
			 resource_type_name(s->res->type));
		return put_error(w, s->version, s->res, KM_KERR_INVALID_REQUEST, msg);
	}
}

/* Most bytes one resource's result takes, with the non-flexible (longer)
 * forms: its fields and error message, each entry asked for with a value,
 * and its two synonyms when asked for. A connection's response space
 * bounds how many topics one request may describe. */
static uint32_t resource_bound(const struct km_dconfigs_req *req,
			       const struct km_dconfigs_resource *r,
			       uint32_t n_synced)
{
	uint32_t b = 16 + MESSAGE_BYTES + (uint32_t)(r->name.len > 0 ? r->name.len : 0);
	uint32_t syn = 16 + KM_TCONFIG_NAME_BYTES + KM_TCONFIG_VALUE_BYTES;

	b += n_synced * syn * (req->include_synonyms ? 2 : 1);
	if (r->type == KM_CONFIG_RESOURCE_BROKER)
		b += 16 + sizeof(SOURCES_KEY) + SOURCES_BYTES;

	for (size_t i = 0; i < N_DEFS; i++) {
		uint32_t tn = (uint32_t)strlen(defs[i].topic_name);
		uint32_t bn = (uint32_t)strlen(defs[i].broker_name);
		uint32_t n = tn > bn ? tn : bn;

		if (!wanted(req, r, defs[i].topic_name) &&
		    !wanted(req, r, defs[i].broker_name))
			continue;
		b += 16 + n + VALUE_BYTES;
		if (req->include_synonyms)
			b += 2 * (8 + n + VALUE_BYTES);
	}
	return b;
}

/* Each resource's synced configs, copied before the response is sized:
 * the control thread may replace them meanwhile. */
struct snap {
	struct km_tconfig_entry *e;
	uint32_t n;
};

static int take_snaps(const struct km_frontend *fe,
		      const struct km_dconfigs_req *req, struct snap *snaps)
{
	struct km_tconfig_entry *tmp = malloc(sizeof(*tmp) * KM_TCONFIG_ENTRIES_MAX);
	struct km_part *first;

	if (tmp == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < req->n_resources; i++) {
		const struct km_dconfigs_resource *r = &req->resources[i];

		if (r->type != KM_CONFIG_RESOURCE_TOPIC ||
		    (first = km_part_topic_first(fe->table, r->name.s)) == NULL ||
		    first->tconfig == NULL)
			continue;
		snaps[i].n = km_tconfig_copy(first->tconfig, tmp,
					     KM_TCONFIG_ENTRIES_MAX);
		if (snaps[i].n == 0)
			continue;
		if ((snaps[i].e = malloc(sizeof(*tmp) * snaps[i].n)) == NULL) {
			free(tmp);
			return -ENOMEM;
		}
		memcpy(snaps[i].e, tmp, sizeof(*tmp) * snaps[i].n);
	}
	free(tmp);
	return 0;
}

static void free_snaps(struct snap *snaps, uint32_t n)
{
	for (uint32_t i = 0; snaps != NULL && i < n; i++)
		free(snaps[i].e);
	free(snaps);
}

int km_frontend_handle_describe_configs(struct fe_conn *fc,
					const struct km_reqhdr *h,
					struct km_wire_rd *r)
{
	struct km_frontend *fe = fc->fe;
	struct km_dconfigs_req req = {
		.resources = fe->dc_res, .resources_max = fe->topics_max,
		.keys = fe->names, .keys_max = fe->parts_max,
	};
	struct cfg_scope s = { .fe = fe, .req = &req, .version = h->api_version,
			       .fc = fc };
	uint32_t bound = 64, slot;
	struct snap *snaps = NULL;
	struct km_wire_wr w;
	int rc = km_dconfigs_req_decode(r, h->api_version, &req);

	if (rc < 0)
		return km_frontend_conn_fail(fc, "malformed DescribeConfigs v%d "
					     "request: %s", h->api_version,
					     km_strerror(rc));
	snaps = calloc(req.n_resources ? req.n_resources : 1, sizeof(*snaps));
	if (snaps == NULL || take_snaps(fe, &req, snaps) < 0) {
		free_snaps(snaps, req.n_resources);
		return km_frontend_conn_fail(fc, "DescribeConfigs: out of memory");
	}
	for (uint32_t i = 0; i < req.n_resources; i++)
		bound += resource_bound(&req, &req.resources[i], snaps[i].n);
	if ((rc = km_frontend_slot_open(fc, h, bound, &slot)) != 0) {
		free_snaps(snaps, req.n_resources);
		return rc;
	}
	km_frontend_slot_begin(fc, slot, &w);
	km_dconfigs_resp_enc_begin(&w, h->api_version, 0, req.n_resources);
	for (uint32_t i = 0; i < req.n_resources && w.err == 0; i++) {
		s.res = &req.resources[i];
		s.topic = NULL;
		s.compact = false;
		s.synced = snaps[i].e;
		s.n_synced = snaps[i].n;
		put_resource(&w, &s);
	}
	km_dconfigs_resp_enc_end(&w, h->api_version);
	free_snaps(snaps, req.n_resources);
	return km_frontend_slot_finish(fc, slot, &w, true);
}

/* ---- DescribeCluster ---- */

/* AclOperation codes kmirrord allows every client on the cluster:
 * DESCRIBE (8), DESCRIBE_CONFIGS (10), IDEMPOTENT_WRITE (12). */
#define CLUSTER_OPS ((1 << 8) | (1 << 10) | (1 << 12))

/* Asked for another endpoint type: Kafka's answer
 * (AuthHelper.computeDescribeClusterResponse), no cluster id, no brokers.
 * Only v1+ can ask (v0 has no EndpointType). */
static void dcluster_refuse(struct km_dcluster_resp *m, int8_t type)
{
	char msg[MESSAGE_BYTES];

	if (type == 2) {
		m->error_code = KM_KERR_MISMATCHED_ENDPOINT_TYPE;
		snprintf(msg, sizeof(msg), "The request was sent to an endpoint "
			 "of type BROKER, but we wanted an endpoint of type "
			 "CONTROLLER");
	} else {
		m->error_code = KM_KERR_UNSUPPORTED_ENDPOINT_TYPE;
		snprintf(msg, sizeof(msg), "Unsupported endpoint type %d", type);
	}
	km_wire_name_set(&m->error_message, msg);
	km_wire_name_set(&m->cluster_id, "");
	m->controller_id = -1;
	m->n_brokers = 0;
	m->cluster_authorized_operations = INT32_MIN;
}

int km_frontend_handle_describe_cluster(struct fe_conn *fc,
					const struct km_reqhdr *h,
					struct km_wire_rd *r)
{
	struct km_frontend *fe = fc->fe;
	struct km_dcluster_broker b = { .broker_id = fe->node_id,
					.port = km_frontend_adv_port(fc) };
	struct km_dcluster_resp m = {
		.controller_id = fe->node_id, .brokers = &b, .brokers_max = 1,
		.n_brokers = 1, .cluster_authorized_operations = INT32_MIN,
	};
	struct km_dcluster_req req;
	struct km_wire_wr w;
	uint32_t slot;
	int rc = km_dcluster_req_decode(r, h->api_version, &req);

	if (rc < 0)
		return km_frontend_conn_fail(fc, "malformed DescribeCluster v%d "
					     "request: %s", h->api_version,
					     km_strerror(rc));
	km_wire_name_set(&b.host, km_frontend_adv_host(fc));
	km_wire_name_set_null(&b.rack);
	km_wire_name_set_null(&m.error_message);
	km_wire_name_set(&m.cluster_id, fe->cluster_id);
	m.endpoint_type = 1; /* brokers: what this endpoint is */
	if (req.include_cluster_authorized_operations)
		m.cluster_authorized_operations = CLUSTER_OPS;
	if (req.endpoint_type != 1)
		dcluster_refuse(&m, req.endpoint_type);
	rc = km_frontend_slot_open(fc, h, 128 + 3 * KM_WIRE_NAME_BYTES_MAX, &slot);
	if (rc != 0)
		return rc;
	km_frontend_slot_begin(fc, slot, &w);
	km_dcluster_resp_encode(&w, h->api_version, &m);
	return km_frontend_slot_finish(fc, slot, &w, true);
}
