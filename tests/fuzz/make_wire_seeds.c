/* Writes a seed corpus for fuzz_wire: the golden frames of tests/wire (each
 * request as a server frame, each response as a client body for its (API,
 * version)), a bare request header for every API and version the codec
 * speaks, and for the consumer-group APIs, DescribeConfigs and
 * DescribeCluster a minimal request frame and response body per version,
 * written by the encoders. File = split byte, mode byte, bytes (as fuzz_wire reads them). */
#include <stdio.h>
#include <string.h>

#include "kafka/proto.h"
#include "kafka/proto_group.h"
#include "tests/wire/golden.h"

static int put(const char *dir, int i, uint8_t mode, const uint8_t *b,
	       size_t n)
{
	char path[4096];
	uint8_t head[2] = { (uint8_t)(n / 2), mode };
	FILE *f;

	snprintf(path, sizeof(path), "%s/wire-%03d", dir, i);
	f = fopen(path, "wb");
	if (f == NULL) {
		perror(path);
		return 1;
	}
	fwrite(head, 1, 2, f);
	fwrite(b, 1, n, f);
	return fclose(f) != 0;
}

/* fuzz_wire's client table index of (key, version), or -1: its table, in
 * the same order. */
static const int16_t responses[][2] = {
	{ 18, 0 }, { 18, 1 }, { 18, 2 }, { 18, 3 },
	{ 3, 0 }, { 3, 1 }, { 3, 2 }, { 3, 3 }, { 3, 4 },
	{ 1, 4 }, { 1, 5 }, { 1, 6 }, { 1, 7 }, { 1, 8 }, { 1, 9 },
	{ 1, 10 }, { 1, 11 },
	{ 2, 0 }, { 2, 1 }, { 2, 2 }, { 2, 3 }, { 2, 4 }, { 2, 5 },
	{ 0, 3 }, { 0, 5 }, { 0, 7 },
	{ 22, 0 }, { 22, 2 }, { 22, 4 },
	{ 10, 0 }, { 10, 1 }, { 10, 2 },
	{ 8, 0 }, { 8, 1 }, { 8, 2 }, { 8, 3 }, { 8, 5 }, { 8, 6 }, { 8, 7 },
	{ 9, 0 }, { 9, 1 }, { 9, 2 }, { 9, 3 }, { 9, 5 }, { 9, 6 }, { 9, 7 },
	{ 11, 0 }, { 11, 1 }, { 11, 2 }, { 11, 5 },
	{ 12, 0 }, { 12, 1 }, { 12, 3 },
	{ 13, 0 }, { 13, 1 }, { 13, 3 },
	{ 14, 0 }, { 14, 1 }, { 14, 3 },
	{ 15, 0 }, { 15, 1 }, { 15, 3 }, { 15, 4 },
	{ 16, 0 }, { 16, 1 }, { 16, 3 }, { 16, 4 },
	{ 32, 1 }, { 32, 3 }, { 32, 4 }, { 60, 0 }, { 60, 1 }, { 60, 2 },
	{ 1, 12 }, { 1, 13 },
};

static int client_mode(int16_t key, int16_t version)
{
	for (size_t i = 0; i < sizeof(responses) / sizeof(responses[0]); i++)
		if (responses[i][0] == key && responses[i][1] == version)
			return (int)i;
	return -1;
}

/* The group messages, all zero: empty names and arrays, which every
 * encoder accepts (LeaveGroup v0-2 needs its one member). */
static union {
	struct km_findcoord_req fcq;
	struct km_offcommit_req ocq;
	struct km_offfetch_req ofq;
	struct km_joingroup_req jgq;
	struct km_heartbeat_req hbq;
	struct km_leavegroup_req lgq;
	struct km_syncgroup_req sgq;
	struct km_descgroups_req dgq;
	struct km_listgroups_req lsq;
	struct km_findcoord_resp fcp;
	struct km_offcommit_resp ocp;
	struct km_offfetch_resp ofp;
	struct km_joingroup_resp jgp;
	struct km_heartbeat_resp hbp;
	struct km_leavegroup_resp lgp;
	struct km_syncgroup_resp sgp;
	struct km_descgroups_resp dgp;
	struct km_listgroups_resp lsp;
} zero;
static struct km_leavegroup_member one_member;

static int encode_group(struct km_wire_wr *w, int req, int16_t key,
			int16_t v)
{
	memset(&zero, 0, sizeof(zero));
	switch (key) {
	case KM_API_FIND_COORDINATOR:
		return req ? km_findcoord_req_encode(w, v, &zero.fcq)
			   : km_findcoord_resp_encode(w, v, &zero.fcp);
	case KM_API_OFFSET_COMMIT:
		return req ? km_offcommit_req_encode(w, v, &zero.ocq)
			   : km_offcommit_resp_encode(w, v, &zero.ocp);
	case KM_API_OFFSET_FETCH:
		return req ? km_offfetch_req_encode(w, v, &zero.ofq)
			   : km_offfetch_resp_encode(w, v, &zero.ofp);
	case KM_API_JOIN_GROUP:
		return req ? km_joingroup_req_encode(w, v, &zero.jgq)
			   : km_joingroup_resp_encode(w, v, &zero.jgp);
	case KM_API_HEARTBEAT:
		return req ? km_heartbeat_req_encode(w, v, &zero.hbq)
			   : km_heartbeat_resp_encode(w, v, &zero.hbp);
	case KM_API_LEAVE_GROUP:
		zero.lgq.members = &one_member;
		zero.lgq.n_members = 1;
		return req ? km_leavegroup_req_encode(w, v, &zero.lgq)
			   : km_leavegroup_resp_encode(w, v, &zero.lgp);
	case KM_API_SYNC_GROUP:
		return req ? km_syncgroup_req_encode(w, v, &zero.sgq)
			   : km_syncgroup_resp_encode(w, v, &zero.sgp);
	case KM_API_DESCRIBE_GROUPS:
		return req ? km_descgroups_req_encode(w, v, &zero.dgq)
			   : km_descgroups_resp_encode(w, v, &zero.dgp);
	default:
		return req ? km_listgroups_req_encode(w, v, &zero.lsq)
			   : km_listgroups_resp_encode(w, v, &zero.lsp);
	}
}

static int put_group(const char *dir, int *n, int16_t key, int16_t v)
{
	uint8_t buf[256];
	struct km_wire_wr w;
	struct km_reqhdr h = { key, v, 1, { 0, "" }, 0 };
	int mode = client_mode(key, v);
	int rc = 0;

	km_wire_wr_init(&w, buf, sizeof(buf));
	km_proto_req_begin(&w, &h);
	encode_group(&w, 1, key, v);
	if (km_wire_wr_frame_end(&w) > 0)
		rc |= put(dir, (*n)++, 0x00, buf, w.pos);
	if (mode < 0)
		return rc;
	km_wire_wr_init(&w, buf, sizeof(buf));
	km_resphdr_encode(&w, key, v, 1);
	if (encode_group(&w, 0, key, v) == 0)
		rc |= put(dir, (*n)++, (uint8_t)(0x80 | mode), buf, w.pos);
	return rc;
}

/* DescribeConfigs and DescribeCluster: one resource, one config with a
 * synonym, one broker. */
static int admin_body(struct km_wire_wr *w, int req, int16_t key, int16_t v)
{
	static const struct km_dconfigs_synonym syn = { "log.segment.bytes",
							"1048576", 4 };
	static const struct km_dconfigs_entry e = { "segment.bytes", "1048576",
						    true, 4, false, &syn, 1, 3,
						    NULL };
	static const struct km_dconfigs_result res = { 0, "", 2, "events", 1 };
	struct km_dconfigs_resource r = { 2, { 6, "events" }, 0, -1 };
	struct km_dconfigs_req q = { &r, 1, 1, NULL, 0, 0, true, false };
	struct km_dcluster_req cq = { false, 1, false };
	struct km_dcluster_broker b = { 1, { 9, "127.0.0.1" }, 9092,
					{ -1, "" }, false };
	struct km_dcluster_resp cp = { 0, 0, { -1, "" }, 1, { 7, "kmirror" },
				       1, &b, 1, 1, INT32_MIN };

	if (key == KM_API_DESCRIBE_CLUSTER)
		return req ? km_dcluster_req_encode(w, v, &cq)
			   : km_dcluster_resp_encode(w, v, &cp);
	if (req)
		return km_dconfigs_req_encode(w, v, &q);
	km_dconfigs_resp_enc_begin(w, v, 0, 1);
	km_dconfigs_resp_enc_result(w, v, &res);
	km_dconfigs_resp_enc_entry(w, v, &e);
	km_dconfigs_resp_enc_result_end(w, v);
	return km_dconfigs_resp_enc_end(w, v);
}

static int put_admin(const char *dir, int *n, int16_t key, int16_t v)
{
	uint8_t buf[512];
	struct km_wire_wr w;
	struct km_reqhdr h = { key, v, 1, { 0, "" }, 0 };
	int mode = client_mode(key, v);
	int rc = 0;

	km_wire_wr_init(&w, buf, sizeof(buf));
	km_proto_req_begin(&w, &h);
	admin_body(&w, 1, key, v);
	if (km_wire_wr_frame_end(&w) > 0)
		rc |= put(dir, (*n)++, 0x00, buf, w.pos);
	if (mode < 0)
		return rc;
	km_wire_wr_init(&w, buf, sizeof(buf));
	km_resphdr_encode(&w, key, v, 1);
	if (admin_body(&w, 0, key, v) == 0)
		rc |= put(dir, (*n)++, (uint8_t)(0x80 | mode), buf, w.pos);
	return rc;
}

/* Fetch v12 and v13 answers with no topics (flexible: the header's and
 * the body's tagged fields), for the client-only versions. */
static int put_fetch_flex(const char *dir, int *n)
{
	int rc = 0;

	for (int16_t v = 12; v <= 13; v++) {
		uint8_t buf[64];
		struct km_wire_wr w;

		km_wire_wr_init(&w, buf, sizeof(buf));
		km_resphdr_encode(&w, KM_API_FETCH, v, 1);
		km_wire_wr_i32(&w, 0);
		km_wire_wr_i16(&w, 0);
		km_wire_wr_i32(&w, 0);
		km_wire_wr_array(&w, true, false, 0);
		km_wire_wr_tags(&w);
		rc |= put(dir, (*n)++, (uint8_t)(0x80 | client_mode(KM_API_FETCH, v)),
			  buf, w.pos);
	}
	return rc;
}

static int put_headers(const char *dir, int *n)
{
	struct km_api_range apis[KM_PROTO_APIS];
	int rc = 0;

	km_proto_supported(apis, KM_PROTO_APIS);
	for (int a = 0; a < KM_PROTO_APIS; a++)
		for (int16_t v = apis[a].min_version;
		     v <= apis[a].max_version; v++) {
			uint8_t buf[64];
			struct km_wire_wr w;
			struct km_reqhdr h = { apis[a].api_key, v, 1, { 0, "" },
					       0 };

			km_wire_wr_init(&w, buf, sizeof(buf));
			km_reqhdr_encode(&w, &h);
			rc |= put(dir, (*n)++, 0x40, buf, w.pos);
			if (apis[a].api_key >= KM_API_OFFSET_COMMIT &&
			    apis[a].api_key <= KM_API_LIST_GROUPS)
				rc |= put_group(dir, n, apis[a].api_key, v);
			if (apis[a].api_key == KM_API_DESCRIBE_CONFIGS ||
			    apis[a].api_key == KM_API_DESCRIBE_CLUSTER)
				rc |= put_admin(dir, n, apis[a].api_key, v);
		}
	return rc;
}

int main(int argc, char **argv)
{
	int rc = 0, n = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	for (size_t i = 0; i < GOLDEN_COUNT; i++) {
		const struct golden_frame *g = &golden_frames[i];
		int mode = client_mode(g->api_key, g->version);

		if (g->request)
			rc |= put(argv[1], n++, 0x00, g->bytes, g->size);
		else if (mode >= 0)
			rc |= put(argv[1], n++, (uint8_t)(0x80 | mode),
				  g->bytes + 4, g->size - 4);
	}
	rc |= put_headers(argv[1], &n);
	rc |= put_fetch_flex(argv[1], &n);
	return rc;
}
