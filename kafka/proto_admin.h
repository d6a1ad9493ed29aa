/* Codecs of the Admin client's topic calls that kmirrord serves for local
 * topics (issue 20 item 2): CreateTopics (19) v2-7, flexible from v5;
 * DeleteTopics (20) v1-6, flexible from v4; DeleteRecords (21) v0-2,
 * flexible from v2; CreatePartitions (37) v0-3, flexible from v2. These
 * are the ranges Kafka 4.x's clients speak (ApiKeys: v0-1 of CreateTopics
 * and v0 of DeleteTopics left in 4.0, KIP-896).
 *
 * Server side only: requests are decoded, responses encoded. Conventions
 * as kafka/proto.h: arrays go into caller storage with a _max
 * (KM_EWIRECAPACITY when full), versions are checked with km_proto_check
 * before any byte is read. */
#ifndef KM_KAFKA_PROTO_ADMIN_H
#define KM_KAFKA_PROTO_ADMIN_H

#include "kafka/proto.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CreateTopics (19) ----
 * Request: Topics [Name STRING, NumPartitions int32, ReplicationFactor
 * int16, Assignments [PartitionIndex int32, BrokerIds [int32]], Configs
 * [Name STRING, Value NULLABLE_STRING]], TimeoutMs int32, ValidateOnly
 * bool. Response: ThrottleTimeMs int32, Topics [Name STRING, TopicId UUID
 * v7+, ErrorCode int16, ErrorMessage NULLABLE_STRING, (TopicConfigErrorCode
 * tag 0 v5+, never written), NumPartitions int32 v5+, ReplicationFactor
 * int16 v5+, Configs NULLABLE [Name STRING, Value NULLABLE_STRING,
 * ReadOnly bool, ConfigSource int8, IsSensitive bool] v5+]. */

struct km_ctopics_config {
	struct km_wire_name name;
	struct km_wire_name value;	/* len -1: null */
	bool cut;			/* longer than a name holds */
};

struct km_ctopics_topic {
	struct km_wire_name name;
	int32_t num_partitions;		/* -1: the broker's default */
	int16_t replication_factor;	/* -1: the broker's default */
	int32_t n_assignments;		/* manual assignment's partitions */
	int32_t assign_broker_min;	/* broker ids it names (INT32_MAX, */
	int32_t assign_broker_max;	/*  INT32_MIN: none) */
	int32_t assign_replicas_max;	/* most ids one partition names */
	uint32_t configs_first;		/* configs[first, first + n) */
	uint32_t n_configs;
};

struct km_ctopics_req {
	struct km_ctopics_topic *topics;	/* caller's arrays */
	uint32_t topics_max, n_topics;
	struct km_ctopics_config *configs;
	uint32_t configs_max, n_configs;
	int32_t timeout_ms;
	bool validate_only;
};

int km_ctopics_req_decode(struct km_wire_rd *r, int16_t version,
			  struct km_ctopics_req *m);

struct km_ctopics_rconfig {
	const char *name;
	const char *value;		/* NULL: null */
	bool read_only;
	int8_t source;
	bool sensitive;
};

struct km_ctopics_result {
	const char *name;
	uint8_t topic_id[KM_WIRE_UUID_BYTES];
	int16_t error_code;
	const char *error_message;	/* NULL: null */
	int32_t num_partitions;
	int16_t replication_factor;
	const struct km_ctopics_rconfig *configs;
	int32_t n_configs;		/* -1: null */
};

int km_ctopics_resp_encode(struct km_wire_wr *w, int16_t version,
			   int32_t throttle_time_ms,
			   const struct km_ctopics_result *res, uint32_t n);

/* ---- DeleteTopics (20) ----
 * Request: TopicNames [STRING] v0-5, Topics [Name NULLABLE_STRING, TopicId
 * UUID] v6+, TimeoutMs int32. Response: ThrottleTimeMs int32, Responses
 * [Name NULLABLE_STRING (null v6+), TopicId UUID v6+, ErrorCode int16,
 * ErrorMessage NULLABLE_STRING v5+]. */

struct km_dtopics_topic {
	struct km_wire_name name;	/* len -1: null (by id, v6+) */
	uint8_t id[KM_WIRE_UUID_BYTES];	/* all zero below v6 */
};

struct km_dtopics_req {
	struct km_dtopics_topic *topics;
	uint32_t topics_max, n_topics;
	int32_t timeout_ms;
};

int km_dtopics_req_decode(struct km_wire_rd *r, int16_t version,
			  struct km_dtopics_req *m);

struct km_dtopics_result {
	const char *name;		/* NULL: null */
	uint8_t id[KM_WIRE_UUID_BYTES];
	int16_t error_code;
	const char *error_message;	/* NULL: null */
};

int km_dtopics_resp_encode(struct km_wire_wr *w, int16_t version,
			   int32_t throttle_time_ms,
			   const struct km_dtopics_result *res, uint32_t n);

/* ---- DeleteRecords (21) ----
 * Request: Topics [Name STRING, Partitions [PartitionIndex int32, Offset
 * int64]], TimeoutMs int32. Response: ThrottleTimeMs int32, Topics [Name
 * STRING, Partitions [PartitionIndex int32, LowWatermark int64, ErrorCode
 * int16]]. Topics name runs of the partition array (struct
 * km_proto_topic). */

struct km_delrec_part {
	int32_t partition;
	int64_t offset;		/* request: delete below; response: the
				 * low watermark */
	int16_t error_code;	/* response */
};

struct km_delrec_req {
	struct km_proto_topic *topics;
	uint32_t topics_max, n_topics;
	struct km_delrec_part *parts;
	uint32_t parts_max, n_parts;
	int32_t timeout_ms;
};

int km_delrec_req_decode(struct km_wire_rd *r, int16_t version,
			 struct km_delrec_req *m);
int km_delrec_resp_encode(struct km_wire_wr *w, int16_t version,
			  int32_t throttle_time_ms,
			  const struct km_proto_topic *topics, uint32_t n_topics,
			  const struct km_delrec_part *parts, uint32_t n_parts);

/* ---- CreatePartitions (37) ----
 * Request: Topics [Name STRING, Count int32, Assignments NULLABLE
 * [BrokerIds [int32]]], TimeoutMs int32, ValidateOnly bool. Response:
 * ThrottleTimeMs int32, Results [Name STRING, ErrorCode int16,
 * ErrorMessage NULLABLE_STRING]. */

struct km_cparts_topic {
	struct km_wire_name name;
	int32_t count;			/* the new total */
	int32_t n_assignments;		/* -1: null */
	int32_t assign_broker_min, assign_broker_max;
};

struct km_cparts_req {
	struct km_cparts_topic *topics;
	uint32_t topics_max, n_topics;
	int32_t timeout_ms;
	bool validate_only;
};

int km_cparts_req_decode(struct km_wire_rd *r, int16_t version,
			 struct km_cparts_req *m);

struct km_cparts_result {
	const char *name;
	int16_t error_code;
	const char *error_message;	/* NULL: null */
};

int km_cparts_resp_encode(struct km_wire_wr *w, int16_t version,
			  int32_t throttle_time_ms,
			  const struct km_cparts_result *res, uint32_t n);

#ifdef __cplusplus
}
#endif

#endif
