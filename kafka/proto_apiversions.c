/* ApiVersions (key 18), v0-3 (ApiVersions{Request,Response}.json).
 *
 * Request: v0-2 empty; v3 (flexible) ClientSoftwareName COMPACT_STRING,
 * ClientSoftwareVersion COMPACT_STRING, tags.
 * Response: ErrorCode int16, ApiKeys [ApiKey, MinVersion, MaxVersion int16
 * (+ tags v3)], ThrottleTimeMs int32 v1+, tags v3 (SupportedFeatures,
 * FinalizedFeaturesEpoch, FinalizedFeatures, ZkMigrationReady: skipped).
 */
#include "kafka/proto.h"

#include "common/errors.h"
#include "common/km_assert.h"

static bool flexible(int16_t version)
{
	return km_proto_is_flexible(KM_API_API_VERSIONS, version);
}

int km_apiversions_req_encode(struct km_wire_wr *w, int16_t version,
			      const struct km_apiversions_req *m)
{
	int rc = km_proto_check(KM_API_API_VERSIONS, version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	if (version >= 3) {
		km_wire_wr_name(w, true, false, &m->sw_name);
		km_wire_wr_name(w, true, false, &m->sw_version);
		km_wire_wr_tags(w);
	}
	return w->err;
}

int km_apiversions_req_decode(struct km_wire_rd *r, int16_t version,
			      struct km_apiversions_req *m)
{
	int rc = km_proto_check(KM_API_API_VERSIONS, version);

	km_wire_name_set_null(&m->sw_name);
	km_wire_name_set_null(&m->sw_version);
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	if (version >= 3) {
		km_wire_rd_name(r, true, false, &m->sw_name);
		km_wire_rd_name(r, true, false, &m->sw_version);
		km_wire_rd_tags(r);
	}
	return km_wire_rd_end(r);
}

int km_apiversions_resp_encode(struct km_wire_wr *w, int16_t version,
			       const struct km_apiversions_resp *m)
{
	bool flex = flexible(version);
	int rc = km_proto_check(KM_API_API_VERSIONS, version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	KM_ASSERT(m->n_keys <= INT32_MAX);
	km_wire_wr_i16(w, m->error_code);
	km_wire_wr_array(w, flex, false, (int32_t)m->n_keys);
	for (uint32_t i = 0; i < m->n_keys && w->err == 0; i++) {
		km_wire_wr_i16(w, m->keys[i].api_key);
		km_wire_wr_i16(w, m->keys[i].min_version);
		km_wire_wr_i16(w, m->keys[i].max_version);
		if (flex)
			km_wire_wr_tags(w);
	}
	if (version >= 1)
		km_wire_wr_i32(w, m->throttle_time_ms);
	if (flex)
		km_wire_wr_tags(w);
	return w->err;
}

int km_apiversions_resp_decode(struct km_wire_rd *r, int16_t version,
			       struct km_apiversions_resp *m)
{
	bool flex = flexible(version);
	int rc = km_proto_check(KM_API_API_VERSIONS, version);
	int32_t n;

	m->n_keys = 0;
	m->throttle_time_ms = 0;
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	km_wire_rd_i16(r, &m->error_code);
	if (km_wire_rd_array(r, flex, false, &n) < 0)
		return r->err;
	if ((uint32_t)n > m->keys_max)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t i = 0; i < n; i++) {
		struct km_api_range *k = &m->keys[i];

		km_wire_rd_i16(r, &k->api_key);
		km_wire_rd_i16(r, &k->min_version);
		km_wire_rd_i16(r, &k->max_version);
		if (flex)
			km_wire_rd_tags(r);
		if (r->err != 0)
			return r->err;
		m->n_keys++;
	}
	if (version >= 1)
		km_wire_rd_i32(r, &m->throttle_time_ms);
	if (flex)
		km_wire_rd_tags(r);
	return km_wire_rd_end(r);
}
