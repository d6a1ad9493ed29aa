/* DescribeAcls v1 (proto_acls.h). */
#include "kafka/proto_acls.h"

#include <string.h>

#include "common/errors.h"

static int check(int16_t version)
{
	return version == KM_DESCRIBE_ACLS_VERSION ? 0 : KM_EWIREVERSION;
}

int km_dacls_req_encode(struct km_wire_wr *w, int16_t version,
			const struct km_dacls_req *m)
{
	if (check(version) < 0)
		return km_wire_wr_fail(w, KM_EWIREVERSION);
	km_wire_wr_i8(w, m->resource_type);
	km_wire_wr_name(w, false, true, &m->resource_name);
	km_wire_wr_i8(w, m->pattern_type);
	km_wire_wr_name(w, false, true, &m->principal);
	km_wire_wr_name(w, false, true, &m->host);
	km_wire_wr_i8(w, m->operation);
	km_wire_wr_i8(w, m->permission_type);
	return w->err;
}

int km_dacls_req_decode(struct km_wire_rd *r, int16_t version,
			struct km_dacls_req *out)
{
	if (check(version) < 0)
		return km_wire_rd_fail(r, KM_EWIREVERSION);
	km_wire_rd_i8(r, &out->resource_type);
	km_wire_rd_name(r, false, true, &out->resource_name);
	km_wire_rd_i8(r, &out->pattern_type);
	km_wire_rd_name(r, false, true, &out->principal);
	km_wire_rd_name(r, false, true, &out->host);
	km_wire_rd_i8(r, &out->operation);
	km_wire_rd_i8(r, &out->permission_type);
	return km_wire_rd_end(r);
}

/* One resource's ACLs, appended to out->acls. */
static int rd_resource(struct km_wire_rd *r, struct km_dacls_resp *out)
{
	struct km_dacls_acl res;
	int32_t n;

	memset(&res, 0, sizeof(res));
	km_wire_rd_i8(r, &res.resource_type);
	km_wire_rd_name(r, false, false, &res.resource_name);
	km_wire_rd_i8(r, &res.pattern_type);
	if (km_wire_rd_array(r, false, false, &n) < 0)
		return r->err;
	for (int32_t i = 0; i < n && r->err == 0; i++) {
		struct km_dacls_acl *a;

		if (out->n_acls == out->acls_max)
			return km_wire_rd_fail(r, KM_EWIRECAPACITY);
		a = &out->acls[out->n_acls++];
		*a = res;
		km_wire_rd_name(r, false, false, &a->principal);
		km_wire_rd_name(r, false, false, &a->host);
		km_wire_rd_i8(r, &a->operation);
		km_wire_rd_i8(r, &a->permission_type);
	}
	return r->err;
}

int km_dacls_resp_decode(struct km_wire_rd *r, int16_t version,
			 struct km_dacls_resp *out)
{
	int32_t n;

	out->n_acls = 0;
	if (check(version) < 0)
		return km_wire_rd_fail(r, KM_EWIREVERSION);
	km_wire_rd_i32(r, &out->throttle_time_ms);
	km_wire_rd_i16(r, &out->error_code);
	km_wire_rd_name(r, false, true, &out->error_message);
	if (km_wire_rd_array(r, false, false, &n) < 0)
		return r->err;
	for (int32_t i = 0; i < n && r->err == 0; i++)
		rd_resource(r, out);
	return km_wire_rd_end(r);
}

static bool same_resource(const struct km_dacls_acl *a,
			  const struct km_dacls_acl *b)
{
	return a->resource_type == b->resource_type &&
	       a->pattern_type == b->pattern_type &&
	       a->resource_name.len == b->resource_name.len &&
	       strcmp(a->resource_name.s, b->resource_name.s) == 0;
}

int km_dacls_resp_encode(struct km_wire_wr *w, int16_t version,
			 const struct km_dacls_resp *m)
{
	int32_t n_res = 0;

	if (check(version) < 0)
		return km_wire_wr_fail(w, KM_EWIREVERSION);
	for (uint32_t i = 0; i < m->n_acls; i++)
		n_res += i == 0 || !same_resource(&m->acls[i - 1], &m->acls[i]);
	km_wire_wr_i32(w, m->throttle_time_ms);
	km_wire_wr_i16(w, m->error_code);
	km_wire_wr_name(w, false, true, &m->error_message);
	km_wire_wr_i32(w, n_res);
	for (uint32_t i = 0; i < m->n_acls;) {
		const struct km_dacls_acl *res = &m->acls[i];
		uint32_t k = i;

		while (k < m->n_acls && same_resource(res, &m->acls[k]))
			k++;
		km_wire_wr_i8(w, res->resource_type);
		km_wire_wr_name(w, false, false, &res->resource_name);
		km_wire_wr_i8(w, res->pattern_type);
		km_wire_wr_i32(w, (int32_t)(k - i));
		for (; i < k; i++) {
			km_wire_wr_name(w, false, false, &m->acls[i].principal);
			km_wire_wr_name(w, false, false, &m->acls[i].host);
			km_wire_wr_i8(w, m->acls[i].operation);
			km_wire_wr_i8(w, m->acls[i].permission_type);
		}
	}
	return w->err;
}
