/* DescribeConfigs (key 32), v1-4, flexible from v4, and DescribeCluster
 * (key 60), v0-2, always flexible (DescribeConfigs{Request,Response}.json,
 * DescribeCluster{Request,Response}.json; fields in kafka/proto.h). The
 * Admin client's describe calls: the front end answers them, a client
 * would decode them (tests).
 *
 * A DescribeConfigs response is written as a stream whose counts come
 * first (a compact array's count is a varint, which cannot be patched
 * later): the front end knows how many configs a resource has before it
 * writes them, and so needs no table of them.
 */
#include "kafka/proto.h"

#include <string.h>

#include "common/errors.h"

static bool dc_flex(int16_t version)
{
	return km_proto_is_flexible(KM_API_DESCRIBE_CONFIGS, version);
}

static void wr_tags(struct km_wire_wr *w, bool flex)
{
	if (flex)
		km_wire_wr_tags(w);
}

static void rd_tags(struct km_wire_rd *r, bool flex)
{
	if (flex)
		km_wire_rd_tags(r);
}

static int wr_cstr(struct km_wire_wr *w, bool flex, bool nullable,
		   const char *s)
{
	return km_wire_wr_string(w, flex, nullable, s, s ? strlen(s) : 0);
}

/* ---- DescribeConfigs request ---- */

int km_dconfigs_req_encode(struct km_wire_wr *w, int16_t version,
			   const struct km_dconfigs_req *m)
{
	int rc = km_proto_check(KM_API_DESCRIBE_CONFIGS, version);
	bool flex = dc_flex(version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	km_wire_wr_array(w, flex, false, (int32_t)m->n_resources);
	for (uint32_t i = 0; i < m->n_resources && w->err == 0; i++) {
		const struct km_dconfigs_resource *res = &m->resources[i];

		km_wire_wr_i8(w, res->type);
		km_wire_wr_name(w, flex, false, &res->name);
		km_wire_wr_array(w, flex, true, res->n_keys);
		for (int32_t k = 0; k < res->n_keys; k++)
			km_wire_wr_name(w, flex, false,
					&m->keys[res->keys_first + k]);
		wr_tags(w, flex);
	}
	km_wire_wr_bool(w, m->include_synonyms);
	if (version >= 3)
		km_wire_wr_bool(w, m->include_documentation);
	wr_tags(w, flex);
	return w->err;
}

/* One resource's ConfigurationKeys into m->keys. */
static int rd_keys(struct km_wire_rd *r, bool flex, struct km_dconfigs_req *m,
		   struct km_dconfigs_resource *res)
{
	int32_t n;

	if (km_wire_rd_array(r, flex, true, &n) < 0)
		return r->err;
	res->keys_first = (int32_t)m->n_keys;
	res->n_keys = n;
	if (n > 0 && (uint32_t)n > m->keys_max - m->n_keys)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t k = 0; k < n && r->err == 0; k++)
		km_wire_rd_name(r, flex, false, &m->keys[m->n_keys++]);
	return r->err;
}

int km_dconfigs_req_decode(struct km_wire_rd *r, int16_t version,
			   struct km_dconfigs_req *m)
{
	int rc = km_proto_check(KM_API_DESCRIBE_CONFIGS, version);
	bool flex = dc_flex(version);
	int32_t n;

	m->n_resources = m->n_keys = 0;
	m->include_synonyms = m->include_documentation = false;
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	if (km_wire_rd_array(r, flex, false, &n) < 0)
		return r->err;
	if ((uint32_t)n > m->resources_max)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t i = 0; i < n; i++) {
		struct km_dconfigs_resource *res = &m->resources[i];

		km_wire_rd_i8(r, &res->type);
		km_wire_rd_name(r, flex, false, &res->name);
		if (rd_keys(r, flex, m, res) < 0)
			return r->err;
		rd_tags(r, flex);
		if (r->err != 0)
			return r->err;
		m->n_resources++;
	}
	km_wire_rd_bool(r, &m->include_synonyms);
	if (version >= 3)
		km_wire_rd_bool(r, &m->include_documentation);
	rd_tags(r, flex);
	return km_wire_rd_end(r);
}

/* ---- DescribeConfigs response ---- */

int km_dconfigs_resp_enc_begin(struct km_wire_wr *w, int16_t version,
			       int32_t throttle_time_ms, uint32_t n_results)
{
	int rc = km_proto_check(KM_API_DESCRIBE_CONFIGS, version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	km_wire_wr_i32(w, throttle_time_ms);
	return km_wire_wr_array(w, dc_flex(version), false, (int32_t)n_results);
}

int km_dconfigs_resp_enc_result(struct km_wire_wr *w, int16_t version,
				const struct km_dconfigs_result *res)
{
	bool flex = dc_flex(version);

	km_wire_wr_i16(w, res->error_code);
	wr_cstr(w, flex, true, res->error_message);
	km_wire_wr_i8(w, res->type);
	wr_cstr(w, flex, false, res->name);
	return km_wire_wr_array(w, flex, false, (int32_t)res->n_configs);
}

int km_dconfigs_resp_enc_entry(struct km_wire_wr *w, int16_t version,
			       const struct km_dconfigs_entry *e)
{
	bool flex = dc_flex(version);

	wr_cstr(w, flex, false, e->name);
	wr_cstr(w, flex, true, e->value);
	km_wire_wr_bool(w, e->read_only);
	km_wire_wr_i8(w, e->source);
	km_wire_wr_bool(w, e->sensitive);
	km_wire_wr_array(w, flex, false, (int32_t)e->n_synonyms);
	for (uint32_t i = 0; i < e->n_synonyms && w->err == 0; i++) {
		wr_cstr(w, flex, false, e->synonyms[i].name);
		wr_cstr(w, flex, true, e->synonyms[i].value);
		km_wire_wr_i8(w, e->synonyms[i].source);
		wr_tags(w, flex);
	}
	if (version >= 3) {
		km_wire_wr_i8(w, e->config_type);
		wr_cstr(w, flex, true, e->documentation);
	}
	wr_tags(w, flex);
	return w->err;
}

int km_dconfigs_resp_enc_result_end(struct km_wire_wr *w, int16_t version)
{
	wr_tags(w, dc_flex(version));
	return w->err;
}

int km_dconfigs_resp_enc_end(struct km_wire_wr *w, int16_t version)
{
	wr_tags(w, dc_flex(version));
	return w->err;
}

static int rd_text(struct km_wire_rd *r, bool flex, bool nullable,
		   struct km_wire_name *out)
{
	bool cut;

	return km_wire_rd_name_trunc(r, flex, nullable, out, &cut);
}

static int rd_synonyms(struct km_wire_rd *r, bool flex,
		       struct km_dconfigs_resp *m, struct km_dconfigs_dentry *e)
{
	int32_t n;

	if (km_wire_rd_array(r, flex, false, &n) < 0)
		return r->err;
	e->syn_first = m->n_synonyms;
	e->n_synonyms = (uint32_t)n;
	if ((uint32_t)n > m->synonyms_max - m->n_synonyms)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t i = 0; i < n && r->err == 0; i++) {
		struct km_dconfigs_dsyn *s = &m->synonyms[m->n_synonyms++];

		rd_text(r, flex, false, &s->name);
		rd_text(r, flex, true, &s->value);
		km_wire_rd_i8(r, &s->source);
		rd_tags(r, flex);
	}
	return r->err;
}

static int rd_entry(struct km_wire_rd *r, int16_t version,
		    struct km_dconfigs_resp *m)
{
	bool flex = dc_flex(version);
	struct km_dconfigs_dentry *e = &m->entries[m->n_entries++];

	memset(e, 0, sizeof(*e));
	km_wire_name_set_null(&e->documentation);
	rd_text(r, flex, false, &e->name);
	rd_text(r, flex, true, &e->value);
	km_wire_rd_bool(r, &e->read_only);
	km_wire_rd_i8(r, &e->source);
	km_wire_rd_bool(r, &e->sensitive);
	if (r->err != 0 || rd_synonyms(r, flex, m, e) < 0)
		return r->err;
	if (version >= 3) {
		km_wire_rd_i8(r, &e->config_type);
		rd_text(r, flex, true, &e->documentation);
	}
	rd_tags(r, flex);
	return r->err;
}

static int rd_result(struct km_wire_rd *r, int16_t version,
		     struct km_dconfigs_resp *m)
{
	bool flex = dc_flex(version);
	struct km_dconfigs_dresult *res = &m->results[m->n_results++];
	int32_t n;

	km_wire_rd_i16(r, &res->error_code);
	rd_text(r, flex, true, &res->error_message);
	km_wire_rd_i8(r, &res->type);
	rd_text(r, flex, false, &res->name);
	if (km_wire_rd_array(r, flex, false, &n) < 0)
		return r->err;
	res->first = m->n_entries;
	res->n_configs = (uint32_t)n;
	if ((uint32_t)n > m->entries_max - m->n_entries)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t i = 0; i < n; i++)
		if (rd_entry(r, version, m) < 0)
			return r->err;
	rd_tags(r, flex);
	return r->err;
}

int km_dconfigs_resp_decode(struct km_wire_rd *r, int16_t version,
			    struct km_dconfigs_resp *m)
{
	int rc = km_proto_check(KM_API_DESCRIBE_CONFIGS, version);
	int32_t n;

	m->throttle_time_ms = 0;
	m->n_results = m->n_entries = m->n_synonyms = 0;
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	km_wire_rd_i32(r, &m->throttle_time_ms);
	if (km_wire_rd_array(r, dc_flex(version), false, &n) < 0)
		return r->err;
	if ((uint32_t)n > m->results_max)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t i = 0; i < n; i++)
		if (rd_result(r, version, m) < 0)
			return r->err;
	rd_tags(r, dc_flex(version));
	return km_wire_rd_end(r);
}

/* ---- DescribeCluster ---- */

int km_dcluster_req_encode(struct km_wire_wr *w, int16_t version,
			   const struct km_dcluster_req *m)
{
	int rc = km_proto_check(KM_API_DESCRIBE_CLUSTER, version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	km_wire_wr_bool(w, m->include_cluster_authorized_operations);
	if (version >= 1)
		km_wire_wr_i8(w, m->endpoint_type);
	if (version >= 2)
		km_wire_wr_bool(w, m->include_fenced_brokers);
	km_wire_wr_tags(w);
	return w->err;
}

int km_dcluster_req_decode(struct km_wire_rd *r, int16_t version,
			   struct km_dcluster_req *m)
{
	int rc = km_proto_check(KM_API_DESCRIBE_CLUSTER, version);

	m->include_cluster_authorized_operations = false;
	m->endpoint_type = 1; /* "default": "1", brokers */
	m->include_fenced_brokers = false;
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	km_wire_rd_bool(r, &m->include_cluster_authorized_operations);
	if (version >= 1)
		km_wire_rd_i8(r, &m->endpoint_type);
	if (version >= 2)
		km_wire_rd_bool(r, &m->include_fenced_brokers);
	km_wire_rd_tags(r);
	return km_wire_rd_end(r);
}

int km_dcluster_resp_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_dcluster_resp *m)
{
	int rc = km_proto_check(KM_API_DESCRIBE_CLUSTER, version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	km_wire_wr_i32(w, m->throttle_time_ms);
	km_wire_wr_i16(w, m->error_code);
	km_wire_wr_name(w, true, true, &m->error_message);
	if (version >= 1)
		km_wire_wr_i8(w, m->endpoint_type);
	km_wire_wr_name(w, true, false, &m->cluster_id);
	km_wire_wr_i32(w, m->controller_id);
	km_wire_wr_array(w, true, false, (int32_t)m->n_brokers);
	for (uint32_t i = 0; i < m->n_brokers && w->err == 0; i++) {
		const struct km_dcluster_broker *b = &m->brokers[i];

		km_wire_wr_i32(w, b->broker_id);
		km_wire_wr_name(w, true, false, &b->host);
		km_wire_wr_i32(w, b->port);
		km_wire_wr_name(w, true, true, &b->rack);
		if (version >= 2)
			km_wire_wr_bool(w, b->is_fenced);
		km_wire_wr_tags(w);
	}
	km_wire_wr_i32(w, m->cluster_authorized_operations);
	km_wire_wr_tags(w);
	return w->err;
}

int km_dcluster_resp_decode(struct km_wire_rd *r, int16_t version,
			    struct km_dcluster_resp *m)
{
	int rc = km_proto_check(KM_API_DESCRIBE_CLUSTER, version);
	int32_t n;

	m->n_brokers = 0;
	m->endpoint_type = 1;
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	km_wire_rd_i32(r, &m->throttle_time_ms);
	km_wire_rd_i16(r, &m->error_code);
	km_wire_rd_name(r, true, true, &m->error_message);
	if (version >= 1)
		km_wire_rd_i8(r, &m->endpoint_type);
	km_wire_rd_name(r, true, false, &m->cluster_id);
	km_wire_rd_i32(r, &m->controller_id);
	if (km_wire_rd_array(r, true, false, &n) < 0)
		return r->err;
	if ((uint32_t)n > m->brokers_max)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t i = 0; i < n && r->err == 0; i++) {
		struct km_dcluster_broker *b = &m->brokers[m->n_brokers++];

		km_wire_rd_i32(r, &b->broker_id);
		km_wire_rd_name(r, true, false, &b->host);
		km_wire_rd_i32(r, &b->port);
		km_wire_rd_name(r, true, true, &b->rack);
		b->is_fenced = false;
		if (version >= 2)
			km_wire_rd_bool(r, &b->is_fenced);
		km_wire_rd_tags(r);
	}
	km_wire_rd_i32(r, &m->cluster_authorized_operations);
	km_wire_rd_tags(r);
	return km_wire_rd_end(r);
}
