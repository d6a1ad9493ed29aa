/* Kafka protocol messages: headers and the six APIs kmirror speaks, in both
 * directions. kmirrord is a client of its source cluster (encode requests,
 * decode responses) and a server to Kafka clients (decode requests, encode
 * responses). Pure code over struct km_wire_rd / km_wire_wr (kafka/wire.h).
 *
 * Field orders follow Kafka's message schemas
 * (clients/src/main/resources/common/message/<Api>{Request,Response}.json);
 * "vN+" marks a field present from version N. A field absent at the version
 * decoded reads as the schema's default, which the comment names.
 *
 * Versions (km_proto_versions):
 *   Produce 3-7, Fetch 4-11, ListOffsets 0-9, Metadata 0-12, ApiVersions
 *   0-3, InitProducerId 0-4. Of these ApiVersions v3, InitProducerId v2+,
 *   ListOffsets v6+ and Metadata v9+ are flexible (compact types and tag
 *   sections). Metadata v10+ names topic ids.
 *   As a client (km_proto_client_versions), ListOffsets stops at v5.
 *   The consumer-group APIs (keys 8-16) are in kafka/proto_group.h, with the
 *   versions librdkafka 2.0.2 uses.
 *
 * Shapes, all bounded and allocation-free:
 *  - Small messages are plain structs.
 *  - Messages with topic/partition arrays are "flattened": the caller gives
 *    arrays with capacities (topics/topics_max, parts/parts_max, ...); each
 *    struct km_proto_topic names a run [first, first + count) of the
 *    partition array. A decoder that meets more items than an array holds
 *    fails with KM_EWIRECAPACITY. The same struct feeds the encoder, which
 *    ignores the *_max fields.
 *  - The two messages that carry records (Fetch response, Produce request)
 *    are decoded with a cursor, one partition at a time, and their records
 *    come back as a span of the chain (no copy) for km_batch_parse. They are
 *    encoded as a stream (begin, topic, partition..., end) whose array counts
 *    are patched at the end, and records may stay outside the buffer
 *    (km_wire_wr_external), so a large payload is never copied.
 *
 * Body codecs read or write the body only; the header is km_reqhdr_* /
 * km_resphdr_*, the size prefix km_wire_frame_parse / km_wire_wr_frame_*.
 *
 * Errors, the same for every body codec below (STYLE 1, 3):
 *  decoders return 0, or the first rule that failed:
 *    KM_EWIREVERSION   the version is outside km_proto_versions (checked
 *                      first, before any byte is read);
 *    KM_EWIRETRUNC, KM_EWIRENEGLEN, KM_EWIRESTRLEN, KM_EWIREARRAY,
 *    KM_EWIREVARINT, KM_EWIRETAGS   a field, as in kafka/wire.h;
 *    KM_EWIRECAPACITY  more items than the caller's array holds;
 *    KM_EWIRETRAILING  bytes left after the body (km_wire_rd_end).
 *  Fields read before the failure keep their values (a client reads an
 *  ErrorCode even from a body it cannot finish); the rest are undefined.
 *  Encoders return 0, or KM_EWIREVERSION, KM_ENOSPACE (buffer or gap table
 *  full), KM_EWIRESTRLEN / KM_EWIRENEGLEN (a string or array the caller
 *  gave cannot be written), KM_EWIREVALUE where noted. Both directions
 *  make the error sticky in the reader or writer.
 * Encoder inputs that break the struct's own invariants (a topic's run of
 * partitions outside the partition array) are programmer errors and fail a
 * KM_ASSERT; network input never does.
 */
#ifndef KM_KAFKA_PROTO_H
#define KM_KAFKA_PROTO_H

#include <stdbool.h>
#include <stdint.h>

#include "kafka/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* API keys (ApiKeys.java). */
enum km_api_key {
	KM_API_PRODUCE = 0,
	KM_API_FETCH = 1,
	KM_API_LIST_OFFSETS = 2,
	KM_API_METADATA = 3,
	KM_API_CONTROLLED_SHUTDOWN = 7, /* header v0 only; not decoded */
	/* Consumer groups: codecs in kafka/proto_group.h. */
	KM_API_OFFSET_COMMIT = 8,
	KM_API_OFFSET_FETCH = 9,
	KM_API_FIND_COORDINATOR = 10,
	KM_API_JOIN_GROUP = 11,
	KM_API_HEARTBEAT = 12,
	KM_API_LEAVE_GROUP = 13,
	KM_API_SYNC_GROUP = 14,
	KM_API_DESCRIBE_GROUPS = 15,
	KM_API_LIST_GROUPS = 16,
	KM_API_API_VERSIONS = 18,
	KM_API_CREATE_TOPICS = 19, /* kafka/proto_admin.h */
	KM_API_DELETE_TOPICS = 20,
	KM_API_DELETE_RECORDS = 21,
	KM_API_INIT_PRODUCER_ID = 22,
	KM_API_ADD_PARTITIONS_TO_TXN = 24, /* kafka/proto_txn.h */
	KM_API_ADD_OFFSETS_TO_TXN = 25,
	KM_API_END_TXN = 26,
	KM_API_TXN_OFFSET_COMMIT = 28,
	KM_API_DESCRIBE_CONFIGS = 32,
	KM_API_CREATE_PARTITIONS = 37, /* kafka/proto_admin.h */
	KM_API_DELETE_GROUPS = 42,
	KM_API_OFFSET_DELETE = 47,
	KM_API_DESCRIBE_CLUSTER = 60,
	/* kmirror's own API (docs/design.md, "KmirrorBarrier"): the latest MIRROR_PID_RESET
	 * barrier a partition holds for a cluster id. Far above Kafka's keys. */
	KM_API_KMIRROR_BARRIER = 10000,
};

/* Kafka error codes (Errors.java) that kmirror reads or sends. */
enum km_kerr {
	KM_KERR_UNKNOWN_SERVER_ERROR = -1,
	KM_KERR_NONE = 0,
	KM_KERR_OFFSET_OUT_OF_RANGE = 1,
	KM_KERR_CORRUPT_MESSAGE = 2,
	KM_KERR_UNKNOWN_TOPIC_OR_PARTITION = 3,
	KM_KERR_INVALID_FETCH_SIZE = 4,
	KM_KERR_LEADER_NOT_AVAILABLE = 5,
	KM_KERR_NOT_LEADER_OR_FOLLOWER = 6,
	KM_KERR_REQUEST_TIMED_OUT = 7,
	KM_KERR_BROKER_NOT_AVAILABLE = 8,
	KM_KERR_REPLICA_NOT_AVAILABLE = 9,
	KM_KERR_MESSAGE_TOO_LARGE = 10,
	KM_KERR_OFFSET_METADATA_TOO_LARGE = 12,
	KM_KERR_NETWORK_EXCEPTION = 13,
	KM_KERR_COORDINATOR_LOAD_IN_PROGRESS = 14,
	KM_KERR_COORDINATOR_NOT_AVAILABLE = 15,
	KM_KERR_NOT_COORDINATOR = 16,
	KM_KERR_INVALID_TOPIC_EXCEPTION = 17,
	KM_KERR_RECORD_LIST_TOO_LARGE = 18,
	KM_KERR_NOT_ENOUGH_REPLICAS = 19,
	KM_KERR_INVALID_REQUIRED_ACKS = 21,
	KM_KERR_ILLEGAL_GENERATION = 22,
	KM_KERR_INCONSISTENT_GROUP_PROTOCOL = 23,
	KM_KERR_INVALID_GROUP_ID = 24,
	KM_KERR_UNKNOWN_MEMBER_ID = 25,
	KM_KERR_INVALID_SESSION_TIMEOUT = 26,
	KM_KERR_REBALANCE_IN_PROGRESS = 27,
	KM_KERR_INVALID_COMMIT_OFFSET_SIZE = 28,
	KM_KERR_TOPIC_AUTHORIZATION_FAILED = 29,
	KM_KERR_GROUP_AUTHORIZATION_FAILED = 30,
	KM_KERR_CLUSTER_AUTHORIZATION_FAILED = 31,
	KM_KERR_INVALID_TIMESTAMP = 32,
	KM_KERR_UNSUPPORTED_VERSION = 35,
	KM_KERR_TOPIC_ALREADY_EXISTS = 36,
	KM_KERR_INVALID_PARTITIONS = 37,
	KM_KERR_INVALID_REPLICATION_FACTOR = 38,
	KM_KERR_INVALID_REPLICA_ASSIGNMENT = 39,
	KM_KERR_INVALID_CONFIG = 40,
	KM_KERR_INVALID_REQUEST = 42,
	KM_KERR_UNSUPPORTED_FOR_MESSAGE_FORMAT = 43,
	KM_KERR_POLICY_VIOLATION = 44,
	KM_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER = 45,
	KM_KERR_DUPLICATE_SEQUENCE_NUMBER = 46,
	KM_KERR_INVALID_PRODUCER_EPOCH = 47,
	KM_KERR_INVALID_TXN_STATE = 48,
	KM_KERR_INVALID_PRODUCER_ID_MAPPING = 49,
	KM_KERR_INVALID_TRANSACTION_TIMEOUT = 50,
	KM_KERR_CONCURRENT_TRANSACTIONS = 51,
	KM_KERR_TRANSACTION_COORDINATOR_FENCED = 52,
	KM_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53,
	KM_KERR_OPERATION_NOT_ATTEMPTED = 55,
	KM_KERR_KAFKA_STORAGE_ERROR = 56,
	KM_KERR_UNKNOWN_PRODUCER_ID = 59,
	KM_KERR_NON_EMPTY_GROUP = 68,
	KM_KERR_GROUP_ID_NOT_FOUND = 69,
	KM_KERR_FETCH_SESSION_ID_NOT_FOUND = 70,
	KM_KERR_INVALID_FETCH_SESSION_EPOCH = 71,
	KM_KERR_FENCED_LEADER_EPOCH = 74,
	KM_KERR_UNKNOWN_LEADER_EPOCH = 75,
	KM_KERR_UNSUPPORTED_COMPRESSION_TYPE = 76,
	KM_KERR_OFFSET_NOT_AVAILABLE = 78,
	KM_KERR_MEMBER_ID_REQUIRED = 79,
	KM_KERR_GROUP_MAX_SIZE_REACHED = 81,
	KM_KERR_FENCED_INSTANCE_ID = 82,
	KM_KERR_GROUP_SUBSCRIBED_TO_TOPIC = 86,
	KM_KERR_INVALID_RECORD = 87,
	KM_KERR_UNSTABLE_OFFSET_COMMIT = 88,
	KM_KERR_PRODUCER_FENCED = 90,
	KM_KERR_UNKNOWN_TOPIC_ID = 100,
	KM_KERR_INCONSISTENT_TOPIC_ID = 103,
	KM_KERR_MISMATCHED_ENDPOINT_TYPE = 114,
	KM_KERR_UNSUPPORTED_ENDPOINT_TYPE = 115,
	/* SASL on kmirrord's listener (kafka/sasl_server.h). */
	KM_KERR_UNSUPPORTED_SASL_MECHANISM = 33,
	KM_KERR_ILLEGAL_SASL_STATE = 34,
	KM_KERR_SASL_AUTHENTICATION_FAILED = 58,
};

/** Errors.java name of a Kafka error code ("UNSUPPORTED_VERSION"), or
 *  "UNKNOWN_ERROR_CODE" for codes not in enum km_kerr. Never NULL. */
const char *km_kerr_name(int code);

/* ---- versions and headers ---- */

/* A version range of one API, as ApiVersions carries it. */
struct km_api_range {
	int16_t api_key;
	int16_t min_version;
	int16_t max_version;
};

enum {
	KM_PROTO_APIS = 30,	  /* APIs this codec speaks, and kmirrord's
				   * front end serves (and advertises): the
				   * spoken rows of kafka/proto_header.c's
				   * table, checked at build time */
};

/**
 * The versions this codec encodes and decodes for api_key.
 * @return 0, or KM_EWIREAPIKEY for a key it does not speak.
 */
int km_proto_versions(int16_t api_key, struct km_api_range *out);

/**
 * Every API this codec speaks, in key order (for kmirrord's ApiVersions
 * response: the front end serves them all).
 * @return how many were written (KM_PROTO_APIS), or KM_ENOSPACE.
 */
int km_proto_supported(struct km_api_range *out, uint32_t out_max);

/** @return 0, KM_EWIREAPIKEY (key not spoken) or KM_EWIREVERSION. */
int km_proto_check(int16_t api_key, int16_t api_version);

/**
 * The versions kmirror may use as a client of a source (the fetch
 * sessions): km_proto_versions, except where a client row says otherwise
 * (ListOffsets up to v5 only). The codecs accept both ranges in both
 * directions.
 * @return 0, or KM_EWIREAPIKEY for a key it does not speak.
 */
int km_proto_client_versions(int16_t api_key, struct km_api_range *out);

/** As km_proto_check, against km_proto_client_versions. */
int km_proto_client_check(int16_t api_key, int16_t api_version);

/** ApiKeys.java's name of api_key ("Fetch"), for log lines; spoken or not.
 *  "unknown API" for a key not in the table. Never NULL, static. */
const char *km_proto_api_name(int16_t api_key);

/** True if (api_key, api_version) uses flexible encoding, per Kafka's
 *  "flexibleVersions" (Produce 9+, Fetch 12+, ListOffsets 6+, Metadata 9+,
 *  ControlledShutdown 3+, OffsetCommit 8+, OffsetFetch 6+, FindCoordinator
 *  3+, JoinGroup 6+, Heartbeat 4+, LeaveGroup 4+, SyncGroup 4+,
 *  DescribeGroups 5+, ListGroups 3+, ApiVersions 3+, InitProducerId 2+).
 *  False for unknown keys. */
bool km_proto_is_flexible(int16_t api_key, int16_t api_version);

/** Request header version: 2 if flexible, 0 for ControlledShutdown v0,
 *  else 1 (also for unknown keys: v1 is the prefix v2 shares). */
int km_proto_req_header_version(int16_t api_key, int16_t api_version);

/** Response header version: 1 if flexible, else 0; always 0 for
 *  ApiVersions ("ApiVersionsResponse always includes a v0 header",
 *  ApiMessageTypeGenerator / KIP-511). */
int km_proto_resp_header_version(int16_t api_key, int16_t api_version);

/* Request header: RequestApiKey int16, RequestApiVersion int16,
 * CorrelationId int32, ClientId NULLABLE_STRING (v1+; stays a non-compact
 * STRING in v2), tagged fields (v2). */
struct km_reqhdr {
	int16_t api_key;
	int16_t api_version;
	int32_t correlation_id;
	struct km_wire_name client_id;	/* -1 = null (and in header v0) */
	bool client_id_truncated;	/* longer than a name holds; cut */
};

/**
 * Decode a request header; the reader is left at the body.
 *
 * The header version comes from (api_key, api_version). A clientId longer
 * than KM_WIRE_NAME_BYTES_MAX is accepted and cut (it is only logged).
 * @return 0; KM_EWIREAPIKEY for a key this codec does not speak (read as
 *         header v1, whose fields are then all valid: the server can answer
 *         the correlation id); KM_EWIREVERSION for an unsupported version
 *         of a known key (the whole header read, fields valid; ApiVersions
 *         is answered with a v0 body and UNSUPPORTED_VERSION). These two are
 *         not sticky in the reader. Else a wire error (KM_EWIRETRUNC, ...).
 */
int km_reqhdr_decode(struct km_wire_rd *r, struct km_reqhdr *h);

/** Encode a request header of the version the table gives (any key). */
int km_reqhdr_encode(struct km_wire_wr *w, const struct km_reqhdr *h);

/**
 * Decode a response header (CorrelationId int32; tagged fields in v1) for a
 * request of (api_key, api_version).
 * @return 0 or a wire error.
 */
int km_resphdr_decode(struct km_wire_rd *r, int16_t api_key,
		      int16_t api_version, int32_t *correlation_id);

/** Encode a response header for (api_key, api_version). */
int km_resphdr_encode(struct km_wire_wr *w, int16_t api_key,
		      int16_t api_version, int32_t correlation_id);

/** Begin a request frame: size slot, patched at the end, + header. End it with
 *  km_wire_wr_frame_end(). @return 0 or the writer's error. */
int km_proto_req_begin(struct km_wire_wr *w, const struct km_reqhdr *h);

/** Begin a response frame: size slot, patched at the end, + header. */
int km_proto_resp_begin(struct km_wire_wr *w, int16_t api_key,
			int16_t api_version, int32_t correlation_id);

/* ---- building blocks for flattened topic/partition arrays ---- */

/* A topic of a flattened message: its partitions are the message's
 * partition array [first, first + count). */
struct km_proto_topic {
	struct km_wire_name name;
	uint32_t first;
	uint32_t count;
};

/* Read or write partition i of a caller's partition array `parts`. */
typedef int (*km_proto_part_rd_fn)(struct km_wire_rd *r, int16_t version,
				   void *parts, uint32_t i);
typedef int (*km_proto_part_wr_fn)(struct km_wire_wr *w, int16_t version,
				   const void *parts, uint32_t i);

/* Where a flattened decoder puts topics and partitions. */
struct km_proto_topics_out {
	struct km_proto_topic *topics;
	uint32_t topics_max;
	uint32_t *n_topics;
	void *parts;
	uint32_t parts_max;
	uint32_t *n_parts;
};

/**
 * Read `[Name STRING, [partition]]` into out, partitions by fn.
 * @return 0, KM_EWIRECAPACITY, or a wire error.
 */
int km_proto_rd_topics(struct km_wire_rd *r, int16_t version, bool flex,
		       const struct km_proto_topics_out *out,
		       km_proto_part_rd_fn fn);

/** Write topics[0..n) with their partitions by fn. */
int km_proto_wr_topics(struct km_wire_wr *w, int16_t version, bool flex,
		       const struct km_proto_topic *topics, uint32_t n,
		       const void *parts, uint32_t n_parts,
		       km_proto_part_wr_fn fn);

/* Streaming encoder for `[topic, [partition]]` whose counts are patched at
 * the end (non-flexible versions: fixed-width int32 counts). Fields are
 * private. */
struct km_proto_enc {
	struct km_wire_wr *w;
	int16_t version;
	size_t topics_at;		/* offset of the topic count */
	int32_t n_topics;
	size_t parts_at;		/* offset of the open topic's count */
	int32_t n_parts;
};

/** Open the topics array (count slot, patched at the end) at the writer's position. */
int km_proto_enc_topics(struct km_proto_enc *e, struct km_wire_wr *w,
			int16_t version);

/** Close the previous topic; write Name and open its partitions array. */
int km_proto_enc_topic(struct km_proto_enc *e,
		       const struct km_wire_name *name);

/** Count one partition of the open topic (before writing its fields). */
void km_proto_enc_part(struct km_proto_enc *e);

/** Patch the counts. @return 0 or the writer's error. */
int km_proto_enc_end(struct km_proto_enc *e);

/* Decode cursor over `[Name STRING, [partition]]` (non-flexible), or, with
 * km_proto_cursor_begin_flex, the flexible form (compact arrays, each
 * topic's tagged fields read for the caller) keyed by Name or by TopicId.
 * Public fields: topic (of the partition last returned; null when keyed by
 * id), topic_id (keyed by id) and its index. */
struct km_proto_cursor {
	struct km_wire_name topic;
	uint8_t topic_id[KM_WIRE_UUID_BYTES];
	int32_t topic_index;		/* from 0; -1 before the first */
	/* private */
	struct km_wire_rd *rd;
	int32_t topics_left;
	int32_t parts_left;
	bool flex, by_id, in_topic;
};

/** Read the topics count at the reader's position. */
int km_proto_cursor_begin(struct km_proto_cursor *c, struct km_wire_rd *r);
/** The same for a flexible array, topics keyed by id if by_id. */
int km_proto_cursor_begin_flex(struct km_proto_cursor *c, struct km_wire_rd *r,
			       bool by_id);

/**
 * Position the reader at the next partition, reading topic headers on the
 * way (topics with no partitions are passed over).
 * @return 1 at a partition, 0 at the end of the array, or the error.
 */
int km_proto_cursor_next(struct km_proto_cursor *c);

/* ---- ApiVersions (18), v0-3 ---- */

struct km_apiversions_req {
	struct km_wire_name sw_name;	/* ClientSoftwareName v3+, else null */
	struct km_wire_name sw_version; /* ClientSoftwareVersion v3+ */
};

struct km_apiversions_resp {
	int16_t error_code;
	struct km_api_range *keys;	/* ApiKeys: caller's array */
	uint32_t keys_max;
	uint32_t n_keys;
	int32_t throttle_time_ms;	/* v1+, else 0 */
};

int km_apiversions_req_encode(struct km_wire_wr *w, int16_t version,
			      const struct km_apiversions_req *m);
int km_apiversions_req_decode(struct km_wire_rd *r, int16_t version,
			      struct km_apiversions_req *m);
int km_apiversions_resp_encode(struct km_wire_wr *w, int16_t version,
			       const struct km_apiversions_resp *m);
/**
 * Tagged fields of v3 (SupportedFeatures, ...) are skipped. A broker that
 * does not speak the version asked answers UNSUPPORTED_VERSION in a body of
 * another version (Kafka: v0; librdkafka's mock: a malformed v3), so the
 * decode may fail: m->error_code is then still the ErrorCode read first,
 * and the client retries at a lower version.
 */
int km_apiversions_resp_decode(struct km_wire_rd *r, int16_t version,
			       struct km_apiversions_resp *m);

/* ---- Metadata (3), v0-12 ---- */

struct km_metadata_req {
	struct km_wire_name *topics;	/* caller's array */
	uint32_t topics_max;
	int32_t n_topics;		/* -1 = all (v1+ null, v0 empty) */
	bool allow_auto_topic_creation; /* v4+, else true */
	/* Each topic's TopicId (v10+; all zero = by name, Kafka's default
	 * and all a version below 10 can say), parallel to topics and as
	 * long; NULL: not kept (decode), all zero (encode). A topic asked
	 * by id only has a null name (v10+ nullable; Kafka takes ids from
	 * v12 on). */
	uint8_t (*topic_ids)[KM_WIRE_UUID_BYTES];
};

struct km_metadata_broker {
	int32_t node_id;
	struct km_wire_name host;
	int32_t port;
	struct km_wire_name rack;	/* v1+, nullable; else null */
};

struct km_metadata_part {
	int16_t error_code;
	int32_t partition;
	int32_t leader_id;
	uint32_t replicas_first;	/* ReplicaNodes: nodes[first, +count) */
	uint32_t replicas_count;
	uint32_t isr_first;		/* IsrNodes: nodes[first, +count) */
	uint32_t isr_count;
	int32_t leader_epoch;		/* v7+, else -1 (decoded); encoded
					   as given. OfflineReplicas (v5+)
					   are read and dropped, written
					   empty. */
};

struct km_metadata_topic {
	int16_t error_code;
	struct km_wire_name name;
	bool is_internal;		/* v1+, else false */
	uint32_t first;			/* parts[first, first + count) */
	uint32_t count;
	/* TopicId v10+, else all zero: Kafka's Uuid.ZERO_UUID, "no id"
	 * (librdkafka's mock sends it too). Name is nullable from v12. */
	uint8_t topic_id[KM_WIRE_UUID_BYTES];
};

struct km_metadata_resp {
	int32_t throttle_time_ms;	/* v3+, else 0 */
	struct km_metadata_broker *brokers;
	uint32_t brokers_max;
	uint32_t n_brokers;
	struct km_wire_name cluster_id; /* v2+, nullable; else null */
	int32_t controller_id;		/* v1+, else -1 */
	struct km_metadata_topic *topics;
	uint32_t topics_max;
	uint32_t n_topics;
	struct km_metadata_part *parts;
	uint32_t parts_max;
	uint32_t n_parts;
	int32_t *nodes;			/* replica and ISR node ids */
	uint32_t nodes_max;
	uint32_t n_nodes;
};

/** v0 cannot ask for no topics: n_topics == 0 at v0 -> KM_EWIREVALUE. */
int km_metadata_req_encode(struct km_wire_wr *w, int16_t version,
			   const struct km_metadata_req *m);
/** v0's empty array (all topics) reads as n_topics = -1. */
int km_metadata_req_decode(struct km_wire_rd *r, int16_t version,
			   struct km_metadata_req *m);
int km_metadata_resp_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_metadata_resp *m);
int km_metadata_resp_decode(struct km_wire_rd *r, int16_t version,
			    struct km_metadata_resp *m);

/* ---- ListOffsets (2), v0-9 ---- */

struct km_listoffsets_req_part {
	int32_t partition;
	int32_t current_leader_epoch;	/* v4+, else -1 */
	int64_t timestamp;		/* -1 latest, -2 earliest, -3 max
					   timestamp (v7+), -4 earliest local
					   (v8+), -5 latest tiered (v9+) */
	int32_t max_num_offsets;	/* v0 only, else 1 */
};

struct km_listoffsets_req {
	int32_t replica_id;
	int8_t isolation_level;		/* v2+, else 0 */
	struct km_proto_topic *topics;
	uint32_t topics_max;
	uint32_t n_topics;
	struct km_listoffsets_req_part *parts;
	uint32_t parts_max;
	uint32_t n_parts;
};

struct km_listoffsets_resp_part {
	int32_t partition;
	int16_t error_code;
	/* v0 OldStyleOffsets []int64: the count, and offset holds the first
	 * (or -1). The encoder writes 0 or 1 of them (more: KM_EWIREVALUE). */
	int32_t old_offsets_count;
	int64_t timestamp;		/* v1+, else -1 */
	int64_t offset;			/* v1+ (v0: see above) */
	int32_t leader_epoch;		/* v4+, else -1 */
};

struct km_listoffsets_resp {
	int32_t throttle_time_ms;	/* v2+, else 0 */
	struct km_proto_topic *topics;
	uint32_t topics_max;
	uint32_t n_topics;
	struct km_listoffsets_resp_part *parts;
	uint32_t parts_max;
	uint32_t n_parts;
};

int km_listoffsets_req_encode(struct km_wire_wr *w, int16_t version,
			      const struct km_listoffsets_req *m);
int km_listoffsets_req_decode(struct km_wire_rd *r, int16_t version,
			      struct km_listoffsets_req *m);
int km_listoffsets_resp_encode(struct km_wire_wr *w, int16_t version,
			       const struct km_listoffsets_resp *m);
int km_listoffsets_resp_decode(struct km_wire_rd *r, int16_t version,
			       struct km_listoffsets_resp *m);

/* ---- Fetch (1), v4-11; v12-13 as a client (topic ids: v13) ---- */

struct km_fetch_req_part {
	int32_t partition;
	int32_t current_leader_epoch;	/* v9+, else -1 */
	int64_t fetch_offset;
	int64_t log_start_offset;	/* v5+, else -1 */
	int32_t partition_max_bytes;
	int32_t last_fetched_epoch;	/* v12+, else -1 (on the wire after
					   fetch_offset) */
};

struct km_fetch_req {
	int32_t replica_id;		/* -1 for consumers */
	int32_t max_wait_ms;
	int32_t min_bytes;
	int32_t max_bytes;		/* v3+ */
	int8_t isolation_level;		/* v4+: 0 uncommitted, 1 committed */
	int32_t session_id;		/* v7+, else 0 */
	int32_t session_epoch;		/* v7+, else -1 */
	struct km_proto_topic *topics;
	uint32_t topics_max;
	uint32_t n_topics;
	struct km_fetch_req_part *parts;
	uint32_t parts_max;
	uint32_t n_parts;
	/* ForgottenTopicsData v7+: topics whose partitions are the indexes
	 * forgotten_parts[first, first + count). */
	struct km_proto_topic *forgotten;
	uint32_t forgotten_max;
	uint32_t n_forgotten;
	int32_t *forgotten_parts;
	uint32_t forgotten_parts_max;
	uint32_t n_forgotten_parts;
	struct km_wire_name rack_id;	/* v11+, else "" */
	/* v13+: each topic (and forgotten topic) named by its id, in the
	 * order of topics[] (forgotten[]); names are not sent. Decoding
	 * fills them if given (else KM_EWIRECAPACITY for a v13 request). */
	uint8_t (*topic_ids)[KM_WIRE_UUID_BYTES];
	uint8_t (*forgotten_ids)[KM_WIRE_UUID_BYTES];
};

int km_fetch_req_encode(struct km_wire_wr *w, int16_t version,
			const struct km_fetch_req *m);
int km_fetch_req_decode(struct km_wire_rd *r, int16_t version,
			struct km_fetch_req *m);

struct km_fetch_aborted {
	int64_t producer_id;
	int64_t first_offset;
};

/* One partition of a Fetch response. */
struct km_fetch_part {
	int32_t partition;
	int16_t error_code;
	int64_t high_watermark;
	int64_t last_stable_offset;	/* v4+ */
	int64_t log_start_offset;	/* v5+, else -1 */
	int32_t n_aborted;		/* AbortedTransactions: -1 = null */
	const struct km_fetch_aborted *aborted;
	int32_t preferred_read_replica; /* v11+, else -1 */
	struct km_wire_span records;	/* decode: in place; -1 = null */
};

/* Cursor over a Fetch response body. Top-level fields are valid after
 * km_fetch_resp_begin; cur.topic / cur.topic_index name the topic of the
 * partition last returned (v13+: cur.topic_id, and cur.topic is null). */
struct km_fetch_resp_iter {
	int32_t throttle_time_ms;
	int16_t error_code;		/* v7+, else 0 */
	int32_t session_id;		/* v7+, else 0 */
	struct km_proto_cursor cur;
	/* private */
	int16_t version;
	struct km_fetch_aborted *aborted;
	uint32_t aborted_max;
};

/**
 * Read the top-level fields of a Fetch response and position the cursor at
 * the first partition. aborted[0..aborted_max) receives each partition's
 * aborted transactions in turn.
 * @return 0, KM_EWIREVERSION, or a wire error.
 */
int km_fetch_resp_begin(struct km_fetch_resp_iter *it, struct km_wire_rd *r,
			int16_t version, struct km_fetch_aborted *aborted,
			uint32_t aborted_max);

/**
 * Next partition. out->aborted points into the iterator's array and
 * out->records into the chain; both valid until the next call (the chain's
 * bytes as long as the chain is). Topics with no partitions are passed over.
 * @return 1 with *out filled, 0 at the end (the body fully consumed, else
 *         KM_EWIRETRAILING), KM_EWIRECAPACITY (more aborted transactions
 *         than aborted_max), or a wire error.
 */
int km_fetch_resp_next_partition(struct km_fetch_resp_iter *it,
				 struct km_fetch_part *out);

/**
 * Stream a Fetch response body: begin, then per topic km_fetch_resp_enc_topic
 * and its partitions, then end (patches the counts).
 * @return 0 or the writer's error (KM_ENOSPACE, ...), KM_EWIREVERSION.
 */
int km_fetch_resp_enc_begin(struct km_proto_enc *e, struct km_wire_wr *w,
			    int16_t version, int32_t throttle_time_ms,
			    int16_t error_code, int32_t session_id);
int km_fetch_resp_enc_topic(struct km_proto_enc *e,
			    const struct km_wire_name *topic);
/**
 * One partition: every field of p except records, then the Records field:
 * records_len -1 = null; else records_len bytes copied from records, or,
 * if records is NULL, left external (a writer gap the caller fills).
 */
int km_fetch_resp_enc_partition(struct km_proto_enc *e,
				const struct km_fetch_part *p,
				const void *records, int32_t records_len);
int km_fetch_resp_enc_end(struct km_proto_enc *e);

/* ---- Produce (0), v3-7 ---- */

/* Cursor over a Produce request body; cur.topic names the topic of the
 * partition last returned. */
struct km_produce_req_iter {
	struct km_wire_name transactional_id; /* nullable */
	int16_t acks;
	int32_t timeout_ms;
	struct km_proto_cursor cur;
	/* private */
	int16_t version;
};

struct km_produce_part {
	int32_t partition;
	struct km_wire_span records;	/* in place; -1 = null */
};

/** @return 0, KM_EWIREVERSION, or a wire error. */
int km_produce_req_begin(struct km_produce_req_iter *it, struct km_wire_rd *r,
			 int16_t version);
/** @return 1 with *out, 0 at the end (body consumed), or an error. */
int km_produce_req_next_partition(struct km_produce_req_iter *it,
				  struct km_produce_part *out);

int km_produce_req_enc_begin(struct km_proto_enc *e, struct km_wire_wr *w,
			     int16_t version,
			     const struct km_wire_name *transactional_id,
			     int16_t acks, int32_t timeout_ms);
int km_produce_req_enc_topic(struct km_proto_enc *e,
			     const struct km_wire_name *topic);
/** Records as in km_fetch_resp_enc_partition (NULL = external). */
int km_produce_req_enc_partition(struct km_proto_enc *e, int32_t partition,
				 const void *records, int32_t records_len);
int km_produce_req_enc_end(struct km_proto_enc *e);

struct km_produce_resp_part {
	int32_t partition;
	int16_t error_code;
	int64_t base_offset;
	int64_t log_append_time_ms;	/* v2+, else -1 */
	int64_t log_start_offset;	/* v5+, else -1 */
};

struct km_produce_resp {
	struct km_proto_topic *topics;
	uint32_t topics_max;
	uint32_t n_topics;
	struct km_produce_resp_part *parts;
	uint32_t parts_max;
	uint32_t n_parts;
	int32_t throttle_time_ms;	/* v1+ (last field) */
};

int km_produce_resp_encode(struct km_wire_wr *w, int16_t version,
			   const struct km_produce_resp *m);
int km_produce_resp_decode(struct km_wire_rd *r, int16_t version,
			   struct km_produce_resp *m);

/* ---- InitProducerId (22), v0-4; flexible from v2 ---- */

struct km_initpid_req {
	struct km_wire_name transactional_id; /* nullable */
	int32_t transaction_timeout_ms;
	int64_t producer_id;		/* v3+, else -1 */
	int16_t producer_epoch;		/* v3+, else -1 */
};

struct km_initpid_resp {
	int32_t throttle_time_ms;
	int16_t error_code;
	int64_t producer_id;
	int16_t producer_epoch;
};

int km_initpid_req_encode(struct km_wire_wr *w, int16_t version,
			  const struct km_initpid_req *m);
int km_initpid_req_decode(struct km_wire_rd *r, int16_t version,
			  struct km_initpid_req *m);
int km_initpid_resp_encode(struct km_wire_wr *w, int16_t version,
			   const struct km_initpid_resp *m);
int km_initpid_resp_decode(struct km_wire_rd *r, int16_t version,
			   struct km_initpid_resp *m);

/* ---- KmirrorBarrier (10000), v0, never flexible: kmirror's own ----
 *
 * Request: Topic STRING, Partition int32, SourceClusterId STRING (the
 * cluster whose barrier is sought: the asker's own cluster id).
 * Response: ErrorCode int16, BarrierOffset int64 (-1: none), LogStartOffset
 * int64, HighWatermark int64, ClusterId STRING (the answering host's). */

struct km_barrier_req {
	struct km_wire_name topic;
	int32_t partition;
	struct km_wire_name source_cluster_id;
};

struct km_barrier_resp {
	int16_t error_code;
	int64_t barrier_offset;
	int64_t log_start_offset;
	int64_t high_watermark;
	struct km_wire_name cluster_id;
};

int km_barrier_req_encode(struct km_wire_wr *w, int16_t version,
			  const struct km_barrier_req *m);
int km_barrier_req_decode(struct km_wire_rd *r, int16_t version,
			  struct km_barrier_req *m);
int km_barrier_resp_encode(struct km_wire_wr *w, int16_t version,
			   const struct km_barrier_resp *m);
int km_barrier_resp_decode(struct km_wire_rd *r, int16_t version,
			   struct km_barrier_resp *m);

/* ---- DescribeConfigs (32), v1-4, flexible from v4 ----
 *
 * Request: Resources [ResourceType int8, ResourceName STRING,
 * ConfigurationKeys [STRING] (nullable: null = all)], IncludeSynonyms bool,
 * IncludeDocumentation bool v3+.
 * Response: ThrottleTimeMs int32, Results [ErrorCode int16, ErrorMessage
 * NULLABLE_STRING, ResourceType int8, ResourceName STRING, Configs [Name
 * STRING, Value NULLABLE_STRING, ReadOnly bool, ConfigSource int8,
 * IsSensitive bool, Synonyms [Name STRING, Value NULLABLE_STRING, Source
 * int8], ConfigType int8 v3+, Documentation NULLABLE_STRING v3+]].
 * v0 (IsDefault instead of ConfigSource) left Kafka in 4.0 (KIP-896). */

/* ConfigResource.Type ids. */
enum km_config_resource {
	KM_CONFIG_RESOURCE_TOPIC = 2,
	KM_CONFIG_RESOURCE_BROKER = 4,
};

/* DescribeConfigsResponse.ConfigSource ids. */
enum km_config_source {
	KM_CONFIG_SOURCE_TOPIC = 1,
	KM_CONFIG_SOURCE_STATIC_BROKER = 4,
	KM_CONFIG_SOURCE_DEFAULT = 5,
};

/* ConfigDef.Type as ConfigType carries it (v3+). */
enum km_config_type {
	KM_CONFIG_TYPE_BOOLEAN = 1,
	KM_CONFIG_TYPE_STRING = 2,
	KM_CONFIG_TYPE_INT = 3,
	KM_CONFIG_TYPE_LONG = 5,
	KM_CONFIG_TYPE_LIST = 7,
};

struct km_dconfigs_resource {
	int8_t type;
	struct km_wire_name name;
	int32_t keys_first;		/* keys[first, first + n_keys) */
	int32_t n_keys;			/* -1 = null (all) */
};

struct km_dconfigs_req {
	struct km_dconfigs_resource *resources;	/* caller's array */
	uint32_t resources_max;
	uint32_t n_resources;
	struct km_wire_name *keys;		/* every resource's, in turn */
	uint32_t keys_max;
	uint32_t n_keys;
	bool include_synonyms;
	bool include_documentation;		/* v3+, else false */
};

struct km_dconfigs_synonym {
	const char *name;
	const char *value;		/* NULL = null */
	int8_t source;
};

/* One config of a result; strings borrowed for the encode call. */
struct km_dconfigs_entry {
	const char *name;
	const char *value;		/* NULL = null */
	bool read_only;
	int8_t source;
	bool sensitive;
	const struct km_dconfigs_synonym *synonyms;
	uint32_t n_synonyms;
	int8_t config_type;		/* v3+ */
	const char *documentation;	/* v3+; NULL = null */
};

/* A result's fixed fields; its n_configs entries follow. */
struct km_dconfigs_result {
	int16_t error_code;
	const char *error_message;	/* NULL = null */
	int8_t type;
	const char *name;
	uint32_t n_configs;
};

int km_dconfigs_req_encode(struct km_wire_wr *w, int16_t version,
			   const struct km_dconfigs_req *m);
/** More resources or keys than the arrays hold: KM_EWIRECAPACITY. */
int km_dconfigs_req_decode(struct km_wire_rd *r, int16_t version,
			   struct km_dconfigs_req *m);

/**
 * Stream a response body, each count given before its elements: begin
 * (n_results), then per result km_dconfigs_resp_enc_result, exactly its
 * n_configs km_dconfigs_resp_enc_entry and km_dconfigs_resp_enc_result_end,
 * then km_dconfigs_resp_enc_end.
 * @return 0 or the writer's error (KM_ENOSPACE, KM_EWIREVERSION, ...).
 */
int km_dconfigs_resp_enc_begin(struct km_wire_wr *w, int16_t version,
			       int32_t throttle_time_ms, uint32_t n_results);
int km_dconfigs_resp_enc_result(struct km_wire_wr *w, int16_t version,
				const struct km_dconfigs_result *res);
int km_dconfigs_resp_enc_entry(struct km_wire_wr *w, int16_t version,
			       const struct km_dconfigs_entry *e);
int km_dconfigs_resp_enc_result_end(struct km_wire_wr *w, int16_t version);
int km_dconfigs_resp_enc_end(struct km_wire_wr *w, int16_t version);

/* A decoded response (clients, tests): names copied (a value or
 * documentation longer than KM_WIRE_NAME_BYTES_MAX is cut), results,
 * entries and synonyms in caller arrays. */
struct km_dconfigs_dsyn {
	struct km_wire_name name, value;
	int8_t source;
};

struct km_dconfigs_dentry {
	struct km_wire_name name, value, documentation;
	bool read_only, sensitive;
	int8_t source, config_type;	/* config_type: v3+, else 0 */
	uint32_t syn_first, n_synonyms;
};

struct km_dconfigs_dresult {
	int16_t error_code;
	struct km_wire_name error_message, name;
	int8_t type;
	uint32_t first, n_configs;
};

struct km_dconfigs_resp {
	int32_t throttle_time_ms;
	struct km_dconfigs_dresult *results;
	uint32_t results_max, n_results;
	struct km_dconfigs_dentry *entries;
	uint32_t entries_max, n_entries;
	struct km_dconfigs_dsyn *synonyms;
	uint32_t synonyms_max, n_synonyms;
};

int km_dconfigs_resp_decode(struct km_wire_rd *r, int16_t version,
			    struct km_dconfigs_resp *m);

/* ---- DescribeCluster (60), v0-2, flexible ----
 *
 * Request: IncludeClusterAuthorizedOperations bool, EndpointType int8 v1+
 * (1 brokers, 2 controllers), IncludeFencedBrokers bool v2+.
 * Response: ThrottleTimeMs int32, ErrorCode int16, ErrorMessage
 * NULLABLE_STRING, EndpointType int8 v1+, ClusterId STRING, ControllerId
 * int32, Brokers [BrokerId int32, Host STRING, Port int32, Rack
 * NULLABLE_STRING, IsFenced bool v2+], ClusterAuthorizedOperations int32. */

struct km_dcluster_req {
	bool include_cluster_authorized_operations;
	int8_t endpoint_type;		/* v1+, else 1 */
	bool include_fenced_brokers;	/* v2+, else false */
};

struct km_dcluster_broker {
	int32_t broker_id;
	struct km_wire_name host;
	int32_t port;
	struct km_wire_name rack;	/* nullable */
	bool is_fenced;			/* v2+ */
};

struct km_dcluster_resp {
	int32_t throttle_time_ms;
	int16_t error_code;
	struct km_wire_name error_message;	/* nullable */
	int8_t endpoint_type;		/* v1+ */
	struct km_wire_name cluster_id;
	int32_t controller_id;
	struct km_dcluster_broker *brokers;
	uint32_t brokers_max, n_brokers;
	int32_t cluster_authorized_operations;
};

int km_dcluster_req_encode(struct km_wire_wr *w, int16_t version,
			   const struct km_dcluster_req *m);
int km_dcluster_req_decode(struct km_wire_rd *r, int16_t version,
			   struct km_dcluster_req *m);
int km_dcluster_resp_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_dcluster_resp *m);
int km_dcluster_resp_decode(struct km_wire_rd *r, int16_t version,
			    struct km_dcluster_resp *m);

#ifdef __cplusplus
}
#endif

#endif
