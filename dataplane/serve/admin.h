/* The Admin client's topic calls (CreateTopics, DeleteTopics,
 * DeleteRecords, CreatePartitions; issue 20 item 2) travel from the
 * front end's worker to the control thread, which owns the partition
 * table: the front end decodes the request into a job of its own pool,
 * hands it over (struct km_part_ops.admin), and answers once the control
 * thread has set `done` (its tick looks; the worker never waits). The job
 * stays the front end's memory: the control thread fills `ans` and sets
 * `done` (release), and touches the job no more after that. */
#ifndef KM_DATAPLANE_ADMIN_H
#define KM_DATAPLANE_ADMIN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kafka/proto_admin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KM_ADMIN_TOPICS_MAX 256u	/* topics one request names */
#define KM_ADMIN_CONFIGS_MAX 1024u	/* configs one CreateTopics gives */
#define KM_ADMIN_PARTS_MAX 1024u	/* partitions of a DeleteRecords */
#define KM_ADMIN_MESSAGE_BYTES 320u

enum km_admin_kind {
	KM_ADMIN_CREATE_TOPICS,
	KM_ADMIN_DELETE_TOPICS,
	KM_ADMIN_DELETE_RECORDS,
	KM_ADMIN_CREATE_PARTITIONS,
};

/* One topic's answer (DeleteRecords: the partition's, in dr_parts). */
struct km_admin_answer {
	int16_t error_code;
	char message[KM_ADMIN_MESSAGE_BYTES];	/* "" : null */
	int32_t num_partitions;
	int16_t replication_factor;
	uint8_t topic_id[KM_WIRE_UUID_BYTES];
};

struct km_admin_job {
	enum km_admin_kind kind;
	int16_t version;
	bool auto_create;	/* a Metadata's: nobody waits for it */
	struct km_ctopics_req ct;
	struct km_ctopics_topic ct_topics[KM_ADMIN_TOPICS_MAX];
	struct km_ctopics_config ct_configs[KM_ADMIN_CONFIGS_MAX];
	struct km_dtopics_req dt;
	struct km_dtopics_topic dt_topics[KM_ADMIN_TOPICS_MAX];
	struct km_delrec_req dr;
	struct km_proto_topic dr_topics[KM_ADMIN_TOPICS_MAX];
	struct km_delrec_part dr_parts[KM_ADMIN_PARTS_MAX]; /* answers too */
	struct km_cparts_req cp;
	struct km_cparts_topic cp_topics[KM_ADMIN_TOPICS_MAX];
	struct km_admin_answer ans[KM_ADMIN_TOPICS_MAX];
	_Atomic int done;
	/* The front end's: who waits for it. */
	bool busy;
	void *conn;
	uint32_t slot;
	/* Per topic (DeleteRecords: per dr_topics entry): the ACLs refused
	 * it, its answer is set; the control thread leaves it alone. */
	bool denied[KM_ADMIN_TOPICS_MAX];
};

/* Hand a job to the control thread. @return 0 (done will be set), or a
 * negative code (it will not: the queue is full, or nobody serves it). */
typedef int (*km_admin_post_fn)(void *ctx, struct km_admin_job *job);

#ifdef __cplusplus
}
#endif

#endif
