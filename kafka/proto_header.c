/* Version table, request/response headers and Kafka error names. */
#include "kafka/proto.h"

#include <assert.h>
#include <stddef.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "kafka/sasl.h"

/* The one table of the APIs kmirror knows (docs/adding-an-api.md): what
 * this codec speaks, which is what the front end serves and advertises in
 * ApiVersions (every API spoken has a handler in
 * dataplane/serve/frontend_dispatch.c, checked when a front end is
 * created), ApiKeys.java's name for log lines, and where each API turns
 * flexible (the schemas' "flexibleVersions"; ControlledShutdown only for
 * its v0 header). Rows in key order. */
struct api_info {
	int16_t key;
	const char *name;
	int16_t min_version;
	int16_t max_version;
	int16_t flexible_from;
	bool spoken;
};

static const struct api_info apis[] = {
	{ KM_API_PRODUCE, "Produce", 3, 7, 9, true },
	{ KM_API_FETCH, "Fetch", 4, 11, 12, true },
	{ KM_API_LIST_OFFSETS, "ListOffsets", 0, 9, 6, true },
	{ KM_API_METADATA, "Metadata", 0, 12, 9, true },
	{ KM_API_CONTROLLED_SHUTDOWN, "ControlledShutdown", 0, 0, 3, false },
	{ KM_API_OFFSET_COMMIT, "OffsetCommit", 0, 7, 8, true },
	{ KM_API_OFFSET_FETCH, "OffsetFetch", 0, 7, 6, true },
	{ KM_API_FIND_COORDINATOR, "FindCoordinator", 0, 2, 3, true },
	{ KM_API_JOIN_GROUP, "JoinGroup", 0, 5, 6, true },
	{ KM_API_HEARTBEAT, "Heartbeat", 0, 3, 4, true },
	{ KM_API_LEAVE_GROUP, "LeaveGroup", 0, 3, 4, true },
	{ KM_API_SYNC_GROUP, "SyncGroup", 0, 3, 4, true },
	{ KM_API_DESCRIBE_GROUPS, "DescribeGroups", 0, 4, 5, true },
	{ KM_API_LIST_GROUPS, "ListGroups", 0, 5, 3, true },
	/* The listener's SASL (issue 16). SaslHandshake v0 is listed because
	 * librdkafka enables SASL only when the range holds it; a v0 request
	 * (raw SASL tokens after it) is refused by the handler. */
	{ KM_API_SASL_HANDSHAKE, "SaslHandshake", 0, 1, INT16_MAX, true },
	{ KM_API_API_VERSIONS, "ApiVersions", 0, 3, 3, true },
	/* Kafka 4.x's range (v0-1 and v0 left in 4.0, KIP-896). */
	{ KM_API_CREATE_TOPICS, "CreateTopics", 2, 7, 5, true },
	{ KM_API_DELETE_TOPICS, "DeleteTopics", 1, 6, 4, true },
	{ KM_API_DELETE_RECORDS, "DeleteRecords", 0, 2, 2, true },
	{ KM_API_INIT_PRODUCER_ID, "InitProducerId", 0, 4, 2, true },
	/* v4+ is broker-to-broker; EndTxn v5 is transaction.version 2's. */
	{ KM_API_ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn", 0, 3, 3, true },
	/* v5 (transaction.version 2) adds the partition implicitly. */
	{ KM_API_ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", 0, 4, 3, true },
	{ KM_API_END_TXN, "EndTxn", 0, 4, 3, true },
	{ KM_API_TXN_OFFSET_COMMIT, "TxnOffsetCommit", 0, 4, 3, true },
	{ KM_API_DESCRIBE_CONFIGS, "DescribeConfigs", 1, 4, 4, true },
	{ KM_API_SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2, 2, true },
	{ KM_API_CREATE_PARTITIONS, "CreatePartitions", 0, 3, 2, true },
	{ KM_API_DELETE_GROUPS, "DeleteGroups", 0, 2, 2, true },
	{ KM_API_OFFSET_DELETE, "OffsetDelete", 0, 0, INT16_MAX, true },
	{ KM_API_DESCRIBE_CLUSTER, "DescribeCluster", 0, 2, 0, true },
	{ KM_API_KMIRROR_BARRIER, "KmirrorBarrier", 0, 0, INT16_MAX, true },
};

/* Where kmirror as a client of a source uses another highest version than
 * it serves. ListOffsets stays at v5: v6+ (flexible) buys a source's
 * client nothing (the fetch sessions ask only latest and earliest), and
 * the sessions' v0-5 are what librdkafka's mock cluster and Kafka were
 * checked against. Metadata's client range is its served one (v12, where
 * a source names its topic ids: the fetch sessions check them, issue 21);
 * the row keeps that should the served range ever move. Fetch v13 names
 * the topic by that id, so a source whose topic was made again answers
 * UNKNOWN_TOPIC_ID instead of serving the new topic's offsets (issue 14). */
static const struct {
	int16_t key;
	int16_t max_version;
} client_max[] = {
	{ KM_API_LIST_OFFSETS, 5 },
	{ KM_API_METADATA, 12 },
	{ KM_API_FETCH, 13 },
};

/* Rows kept only for their header version (ControlledShutdown): a new row
 * that is spoken raises KM_PROTO_APIS, or the build stops here. */
#define UNSPOKEN_ROWS 1
static_assert(sizeof(apis) / sizeof(apis[0]) == KM_PROTO_APIS + UNSPOKEN_ROWS,
	      "KM_PROTO_APIS counts the spoken rows of apis[]");

static const struct api_info *find_api(int16_t key)
{
	for (size_t i = 0; i < sizeof(apis) / sizeof(apis[0]); i++)
		if (apis[i].key == key)
			return &apis[i];
	return NULL;
}

int km_proto_versions(int16_t api_key, struct km_api_range *out)
{
	const struct api_info *a = find_api(api_key);

	if (a == NULL || !a->spoken)
		return KM_EWIREAPIKEY;
	out->api_key = a->key;
	out->min_version = a->min_version;
	out->max_version = a->max_version;
	return 0;
}

int km_proto_supported(struct km_api_range *out, uint32_t out_max)
{
	uint32_t n = 0;

	for (size_t i = 0; i < sizeof(apis) / sizeof(apis[0]); i++) {
		if (!apis[i].spoken)
			continue;
		if (n == out_max)
			return KM_ENOSPACE;
		km_proto_versions(apis[i].key, &out[n++]);
	}
	KM_ASSERT(n == KM_PROTO_APIS);
	return (int)n;
}

int km_proto_check(int16_t api_key, int16_t api_version)
{
	struct km_api_range r;

	if (km_proto_versions(api_key, &r) < 0)
		return KM_EWIREAPIKEY;
	if (api_version < r.min_version || api_version > r.max_version)
		return KM_EWIREVERSION;
	return 0;
}

int km_proto_client_versions(int16_t api_key, struct km_api_range *out)
{
	int rc = km_proto_versions(api_key, out);

	for (size_t i = 0; rc == 0 && i < sizeof(client_max) / sizeof(client_max[0]);
	     i++)
		if (client_max[i].key == api_key)
			out->max_version = client_max[i].max_version;
	return rc;
}

int km_proto_client_check(int16_t api_key, int16_t api_version)
{
	struct km_api_range r;

	if (km_proto_client_versions(api_key, &r) < 0)
		return KM_EWIREAPIKEY;
	if (api_version < r.min_version || api_version > r.max_version)
		return KM_EWIREVERSION;
	return 0;
}

const char *km_proto_api_name(int16_t api_key)
{
	const struct api_info *a = find_api(api_key);

	return a != NULL ? a->name : "unknown API";
}

bool km_proto_is_flexible(int16_t api_key, int16_t api_version)
{
	const struct api_info *a = find_api(api_key);

	return a != NULL && api_version >= a->flexible_from;
}

int km_proto_req_header_version(int16_t api_key, int16_t api_version)
{
	/* RequestHeader.json: "Version 0 ... is only used by v0 of
	 * ControlledShutdownRequest"; "Version 2 is the first flexible". */
	if (api_key == KM_API_CONTROLLED_SHUTDOWN && api_version == 0)
		return 0;
	return km_proto_is_flexible(api_key, api_version) ? 2 : 1;
}

int km_proto_resp_header_version(int16_t api_key, int16_t api_version)
{
	/* ApiVersionsResponse.json: "Tagged fields are only supported in the
	 * body but not in the header", so a client that does not yet know
	 * the broker's versions can always read the correlation id. */
	if (api_key == KM_API_API_VERSIONS)
		return 0;
	return km_proto_is_flexible(api_key, api_version) ? 1 : 0;
}

int km_reqhdr_decode(struct km_wire_rd *r, struct km_reqhdr *h)
{
	int hv;

	km_wire_name_set_null(&h->client_id);
	h->client_id_truncated = false;
	km_wire_rd_i16(r, &h->api_key);
	km_wire_rd_i16(r, &h->api_version);
	if (km_wire_rd_i32(r, &h->correlation_id) < 0)
		return r->err;
	hv = km_proto_req_header_version(h->api_key, h->api_version);
	/* "ClientId ... must be serialized with the old-style two-byte length
	 * prefix" in every version, flexible ones included. */
	if (hv >= 1)
		km_wire_rd_name_trunc(r, false, true, &h->client_id,
				      &h->client_id_truncated);
	if (hv >= 2)
		km_wire_rd_tags(r);
	if (r->err != 0)
		return r->err;
	return km_proto_check(h->api_key, h->api_version);
}

int km_reqhdr_encode(struct km_wire_wr *w, const struct km_reqhdr *h)
{
	int hv = km_proto_req_header_version(h->api_key, h->api_version);

	km_wire_wr_i16(w, h->api_key);
	km_wire_wr_i16(w, h->api_version);
	km_wire_wr_i32(w, h->correlation_id);
	if (hv >= 1)
		km_wire_wr_name(w, false, true, &h->client_id);
	if (hv >= 2)
		km_wire_wr_tags(w);
	return w->err;
}

int km_resphdr_decode(struct km_wire_rd *r, int16_t api_key,
		      int16_t api_version, int32_t *correlation_id)
{
	km_wire_rd_i32(r, correlation_id);
	if (km_proto_resp_header_version(api_key, api_version) >= 1)
		km_wire_rd_tags(r);
	return r->err;
}

int km_resphdr_encode(struct km_wire_wr *w, int16_t api_key,
		      int16_t api_version, int32_t correlation_id)
{
	km_wire_wr_i32(w, correlation_id);
	if (km_proto_resp_header_version(api_key, api_version) >= 1)
		km_wire_wr_tags(w);
	return w->err;
}

int km_proto_req_begin(struct km_wire_wr *w, const struct km_reqhdr *h)
{
	km_wire_wr_frame_begin(w);
	return km_reqhdr_encode(w, h);
}

int km_proto_resp_begin(struct km_wire_wr *w, int16_t api_key,
			int16_t api_version, int32_t correlation_id)
{
	km_wire_wr_frame_begin(w);
	return km_resphdr_encode(w, api_key, api_version, correlation_id);
}

#define KERR(name)                                                             \
	case KM_KERR_##name:                                                   \
		return #name

const char *km_kerr_name(int code)
{
	switch (code) {
	KERR(UNKNOWN_SERVER_ERROR); KERR(NONE); KERR(OFFSET_OUT_OF_RANGE);
	KERR(CORRUPT_MESSAGE); KERR(UNKNOWN_TOPIC_OR_PARTITION);
	KERR(INVALID_FETCH_SIZE); KERR(LEADER_NOT_AVAILABLE);
	KERR(NOT_LEADER_OR_FOLLOWER); KERR(REQUEST_TIMED_OUT);
	KERR(BROKER_NOT_AVAILABLE); KERR(REPLICA_NOT_AVAILABLE);
	KERR(MESSAGE_TOO_LARGE); KERR(OFFSET_METADATA_TOO_LARGE);
	KERR(NETWORK_EXCEPTION); KERR(COORDINATOR_LOAD_IN_PROGRESS);
	KERR(COORDINATOR_NOT_AVAILABLE); KERR(NOT_COORDINATOR);
	KERR(INVALID_TOPIC_EXCEPTION); KERR(RECORD_LIST_TOO_LARGE);
	KERR(NOT_ENOUGH_REPLICAS); KERR(INVALID_REQUIRED_ACKS);
	KERR(ILLEGAL_GENERATION); KERR(INCONSISTENT_GROUP_PROTOCOL);
	KERR(INVALID_GROUP_ID); KERR(UNKNOWN_MEMBER_ID);
	KERR(INVALID_SESSION_TIMEOUT); KERR(REBALANCE_IN_PROGRESS);
	KERR(INVALID_COMMIT_OFFSET_SIZE); KERR(GROUP_AUTHORIZATION_FAILED);
	KERR(TOPIC_AUTHORIZATION_FAILED); KERR(CLUSTER_AUTHORIZATION_FAILED);
	KERR(INVALID_TIMESTAMP); KERR(UNSUPPORTED_VERSION);
	KERR(TOPIC_ALREADY_EXISTS); KERR(INVALID_PARTITIONS);
	KERR(INVALID_REPLICATION_FACTOR); KERR(INVALID_REPLICA_ASSIGNMENT);
	KERR(INVALID_CONFIG);
	KERR(INVALID_REQUEST); KERR(UNSUPPORTED_FOR_MESSAGE_FORMAT);
	KERR(POLICY_VIOLATION); KERR(OUT_OF_ORDER_SEQUENCE_NUMBER);
	KERR(DUPLICATE_SEQUENCE_NUMBER); KERR(INVALID_PRODUCER_EPOCH);
	KERR(INVALID_TXN_STATE); KERR(INVALID_PRODUCER_ID_MAPPING);
	KERR(INVALID_TRANSACTION_TIMEOUT); KERR(CONCURRENT_TRANSACTIONS);
	KERR(TRANSACTION_COORDINATOR_FENCED);
	KERR(TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
	KERR(OPERATION_NOT_ATTEMPTED); KERR(KAFKA_STORAGE_ERROR); KERR(UNKNOWN_PRODUCER_ID);
	KERR(NON_EMPTY_GROUP);
	KERR(GROUP_ID_NOT_FOUND);
	KERR(FETCH_SESSION_ID_NOT_FOUND); KERR(INVALID_FETCH_SESSION_EPOCH);
	KERR(FENCED_LEADER_EPOCH); KERR(UNKNOWN_LEADER_EPOCH);
	KERR(UNSUPPORTED_COMPRESSION_TYPE); KERR(OFFSET_NOT_AVAILABLE);
	KERR(MEMBER_ID_REQUIRED); KERR(GROUP_MAX_SIZE_REACHED);
	KERR(FENCED_INSTANCE_ID); KERR(UNSTABLE_OFFSET_COMMIT);
	KERR(GROUP_SUBSCRIBED_TO_TOPIC);
	KERR(INVALID_RECORD); KERR(PRODUCER_FENCED); KERR(UNKNOWN_TOPIC_ID);
	KERR(INCONSISTENT_TOPIC_ID);
	KERR(UNSUPPORTED_SASL_MECHANISM); KERR(ILLEGAL_SASL_STATE);
	KERR(SASL_AUTHENTICATION_FAILED);
	default:
		return "UNKNOWN_ERROR_CODE";
	}
}
