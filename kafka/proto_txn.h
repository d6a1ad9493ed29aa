/* Codecs of the transactional producer's requests (Kafka's "transaction
 * coordinator" APIs), client path only:
 *   AddPartitionsToTxn (24) 0-3, AddOffsetsToTxn (25) 0-4, EndTxn (26) 0-5,
 *   TxnOffsetCommit (28) 0-5; all flexible from v3.
 * AddPartitionsToTxn v4+ batches transactions and is broker-to-broker only
 * (its json: "Versions 3 and below will be exclusively used by clients");
 * EndTxn v5 and TxnOffsetCommit v5 are the transaction.version 2 (KIP-890
 * part 2) versions, which a client uses only when the broker advertises
 * that feature.
 *
 * A header of its own (the keys are kafka/proto.h's); their versions are
 * checked against km_txn_versions(), the client path Kafka's clients use,
 * not km_proto_check(), which holds what kmirrord serves (AddPartitionsToTxn
 * and EndTxn so far). Conventions as
 * kafka/proto.h: topics name runs of a flat partition array, decoders fill
 * caller arrays (KM_EWIRECAPACITY when full), strings stay in place. */
#ifndef KM_KAFKA_PROTO_TXN_H
#define KM_KAFKA_PROTO_TXN_H

#include "kafka/proto_group.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * The versions these codecs speak for api_key.
 * @return 0 and *out, or KM_EWIREAPIKEY for another key.
 */
int km_txn_versions(int16_t api_key, struct km_api_range *out);

/* ---- AddPartitionsToTxn (24), v0-3 ----
 * Request: V3AndBelowTransactionalId STRING, ProducerId int64,
 * ProducerEpoch int16, Topics [Name STRING, Partitions [int32]].
 * Response: ThrottleTimeMs int32, ResultsByTopicV3AndBelow [Name STRING,
 * ResultsByPartition [PartitionIndex int32, PartitionErrorCode int16]]. */

struct km_addparts_req {
	struct km_wire_name transactional_id;
	int64_t producer_id;
	int16_t producer_epoch;
	struct km_proto_topic *topics;
	uint32_t topics_max;
	uint32_t n_topics;
	int32_t *parts;
	uint32_t parts_max;
	uint32_t n_parts;
};

struct km_addparts_resp {
	int32_t throttle_time_ms;
	struct km_proto_topic *topics;
	uint32_t topics_max;
	uint32_t n_topics;
	struct km_offcommit_resp_part *parts; /* PartitionIndex, ErrorCode */
	uint32_t parts_max;
	uint32_t n_parts;
};

int km_addparts_req_encode(struct km_wire_wr *w, int16_t version,
			   const struct km_addparts_req *m);
int km_addparts_req_decode(struct km_wire_rd *r, int16_t version,
			   struct km_addparts_req *m);
int km_addparts_resp_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_addparts_resp *m);
int km_addparts_resp_decode(struct km_wire_rd *r, int16_t version,
			    struct km_addparts_resp *m);

/* ---- AddOffsetsToTxn (25), v0-4 ----
 * Request: TransactionalId STRING, ProducerId int64, ProducerEpoch int16,
 * GroupId STRING. Response: ThrottleTimeMs int32, ErrorCode int16. */

struct km_addoffsets_req {
	struct km_wire_name transactional_id;
	int64_t producer_id;
	int16_t producer_epoch;
	struct km_wire_name group_id;
};

struct km_txn_resp {
	int32_t throttle_time_ms;
	int16_t error_code;
	int64_t producer_id;	/* EndTxn v5+ only, else -1 */
	int16_t producer_epoch;	/* EndTxn v5+ only, else -1 */
};

int km_addoffsets_req_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_addoffsets_req *m);
int km_addoffsets_req_decode(struct km_wire_rd *r, int16_t version,
			     struct km_addoffsets_req *m);
/* AddOffsetsToTxn and EndTxn answers: api_key says which. */
int km_txn_resp_encode(struct km_wire_wr *w, int16_t api_key,
		       int16_t version, const struct km_txn_resp *m);
int km_txn_resp_decode(struct km_wire_rd *r, int16_t api_key,
		       int16_t version, struct km_txn_resp *m);

/* ---- EndTxn (26), v0-5 ----
 * Request: TransactionalId STRING, ProducerId int64, ProducerEpoch int16,
 * Committed bool. Response: ThrottleTimeMs int32, ErrorCode int16,
 * ProducerId int64 v5+, ProducerEpoch int16 v5+. */

struct km_endtxn_req {
	struct km_wire_name transactional_id;
	int64_t producer_id;
	int16_t producer_epoch;
	bool committed;
};

int km_endtxn_req_encode(struct km_wire_wr *w, int16_t version,
			 const struct km_endtxn_req *m);
int km_endtxn_req_decode(struct km_wire_rd *r, int16_t version,
			 struct km_endtxn_req *m);

/* ---- TxnOffsetCommit (28), v0-5 ----
 * Request: TransactionalId STRING, GroupId STRING, ProducerId int64,
 * ProducerEpoch int16, GenerationId int32 v3+, MemberId STRING v3+,
 * GroupInstanceId NULLABLE_STRING v3+, Topics [Name STRING, Partitions
 * [PartitionIndex int32, CommittedOffset int64, CommittedLeaderEpoch int32
 * v2+, CommittedMetadata NULLABLE_STRING]].
 * Response: ThrottleTimeMs int32, Topics [Name STRING, Partitions
 * [PartitionIndex int32, ErrorCode int16]]. */

struct km_txncommit_part {
	int32_t partition;
	int64_t committed_offset;
	int32_t committed_leader_epoch; /* v2+, else -1 */
	struct km_group_bytes metadata; /* nullable */
};

struct km_txncommit_req {
	struct km_wire_name transactional_id;
	struct km_wire_name group_id;
	int64_t producer_id;
	int16_t producer_epoch;
	int32_t generation_id;		/* v3+, else -1 */
	struct km_wire_name member_id;	/* v3+, else "" */
	struct km_wire_name group_instance_id; /* v3+, nullable; else null */
	struct km_proto_topic *topics;
	uint32_t topics_max;
	uint32_t n_topics;
	struct km_txncommit_part *parts;
	uint32_t parts_max;
	uint32_t n_parts;
};

int km_txncommit_req_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_txncommit_req *m);
int km_txncommit_req_decode(struct km_wire_rd *r, int16_t version,
			    struct km_txncommit_req *m);
/* The answer is km_addparts_resp's shape: ThrottleTimeMs and the topics'
 * [PartitionIndex, ErrorCode]. */
int km_txncommit_resp_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_addparts_resp *m);
int km_txncommit_resp_decode(struct km_wire_rd *r, int16_t version,
			     struct km_addparts_resp *m);

#ifdef __cplusplus
}
#endif

#endif
