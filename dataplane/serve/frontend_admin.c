/* CreateTopics, DeleteTopics, DeleteRecords and CreatePartitions (issue 20
 * item 2): decoded here into a job of the front end's pool, decided on the
 * control thread (it owns the partition table and the logs' directories:
 * control/daemon_admin.c), answered from the slot's tick once the job is
 * done. The worker never waits: a job that is not done yet is looked at
 * again at the next tick, and a request that finds no free job waits in
 * its frame (FE_WAIT) as one that finds no room does. A connection that
 * closes first leaves its job to finish unowned; it is reused once done.
 */
#include <stdio.h>
#include <string.h>

#include "common/errors.h"
#include "dataplane/serve/frontend_pvt.h"

/* Bytes of one topic's answer besides its name and configs: id, codes,
 * counts, message, lengths and tags. */
#define TOPIC_BYTES (KM_ADMIN_MESSAGE_BYTES + 64u)

struct km_admin_job *km_frontend_admin_job(struct km_frontend *fe)
{
	for (uint32_t i = 0; i < KM_FRONTEND_ADMIN_JOBS; i++) {
		struct km_admin_job *j = &fe->admin_jobs[i];

		if (j->busy && j->conn == NULL &&
		    atomic_load_explicit(&j->done, memory_order_acquire))
			j->busy = false; /* its asker left, or none waited */
		if (!j->busy) {
			j->busy = true;
			j->conn = NULL;
			j->auto_create = false;
			atomic_store_explicit(&j->done, 0, memory_order_relaxed);
			memset(j->ans, 0, sizeof(j->ans));
			memset(j->denied, 0, sizeof(j->denied));
			return j;
		}
	}
	return NULL;
}

static struct km_admin_job *job_of(struct fe_conn *fc, const struct fe_slot *s)
{
	uint32_t slot = (uint32_t)(s - fc->slots);

	for (uint32_t i = 0; i < KM_FRONTEND_ADMIN_JOBS; i++) {
		struct km_admin_job *j = &fc->fe->admin_jobs[i];

		if (j->busy && j->conn == fc && j->slot == slot)
			return j;
	}
	return NULL;
}

static const char *msg(const struct km_admin_answer *a)
{
	return a->message[0] ? a->message : NULL;
}

static void enc_create(struct km_wire_wr *w, const struct km_admin_job *j)
{
	struct km_ctopics_result res[KM_ADMIN_TOPICS_MAX];
	struct km_ctopics_rconfig cfg[KM_ADMIN_CONFIGS_MAX];

	for (uint32_t i = 0; i < j->ct.n_topics; i++) {
		const struct km_ctopics_topic *t = &j->ct_topics[i];
		const struct km_admin_answer *a = &j->ans[i];
		struct km_ctopics_result *r = &res[i];

		memset(r, 0, sizeof(*r));
		r->name = t->name.s;
		memcpy(r->topic_id, a->topic_id, sizeof(r->topic_id));
		r->error_code = a->error_code;
		r->error_message = msg(a);
		r->num_partitions = a->error_code ? -1 : a->num_partitions;
		r->replication_factor = a->error_code ? -1
						      : a->replication_factor;
		r->configs = &cfg[t->configs_first];
		r->n_configs = a->error_code ? 0 : (int32_t)t->n_configs;
		for (uint32_t k = 0; k < t->n_configs; k++) {
			const struct km_ctopics_config *c =
				&j->ct_configs[t->configs_first + k];

			cfg[t->configs_first + k] = (struct km_ctopics_rconfig){
				c->name.s, c->value.len < 0 ? NULL : c->value.s,
				false, KM_CONFIG_SOURCE_TOPIC, false };
		}
	}
	km_ctopics_resp_encode(w, j->version, 0, res, j->ct.n_topics);
}

static void enc_delete(struct km_wire_wr *w, const struct km_admin_job *j)
{
	struct km_dtopics_result res[KM_ADMIN_TOPICS_MAX];

	for (uint32_t i = 0; i < j->dt.n_topics; i++) {
		const struct km_dtopics_topic *t = &j->dt_topics[i];

		res[i].name = t->name.len < 0 ? NULL : t->name.s;
		memcpy(res[i].id, j->ans[i].topic_id, sizeof(res[i].id));
		res[i].error_code = j->ans[i].error_code;
		res[i].error_message = msg(&j->ans[i]);
	}
	km_dtopics_resp_encode(w, j->version, 0, res, j->dt.n_topics);
}

static void enc_cparts(struct km_wire_wr *w, const struct km_admin_job *j)
{
	struct km_cparts_result res[KM_ADMIN_TOPICS_MAX];

	for (uint32_t i = 0; i < j->cp.n_topics; i++)
		res[i] = (struct km_cparts_result){ j->cp_topics[i].name.s,
						    j->ans[i].error_code,
						    msg(&j->ans[i]) };
	km_cparts_resp_encode(w, j->version, 0, res, j->cp.n_topics);
}

static void encode(struct km_wire_wr *w, const struct km_admin_job *j)
{
	switch (j->kind) {
	case KM_ADMIN_CREATE_TOPICS:
		enc_create(w, j);
		break;
	case KM_ADMIN_DELETE_TOPICS:
		enc_delete(w, j);
		break;
	case KM_ADMIN_DELETE_RECORDS:
		km_delrec_resp_encode(w, j->version, 0, j->dr_topics,
				      j->dr.n_topics, j->dr_parts,
				      j->dr.n_parts);
		break;
	case KM_ADMIN_CREATE_PARTITIONS:
		enc_cparts(w, j);
		break;
	}
}

static void answer(struct fe_conn *fc, struct km_admin_job *j)
{
	struct km_wire_wr w;
	uint32_t slot = j->slot;

	fc->slots[slot].ops = NULL;
	km_frontend_slot_begin(fc, slot, &w);
	encode(&w, j);
	j->busy = false;
	j->conn = NULL;
	(void)km_frontend_slot_finish(fc, slot, &w, true);
}

static void admin_tick(struct fe_conn *fc, struct fe_slot *s, uint64_t now_ms)
{
	struct km_admin_job *j = job_of(fc, s);

	(void)now_ms;
	if (j != NULL && atomic_load_explicit(&j->done, memory_order_acquire))
		answer(fc, j);
}

/* The connection closed first: the control thread may still hold it. */
static void admin_release(struct fe_conn *fc, struct fe_slot *s)
{
	struct km_admin_job *j = job_of(fc, s);

	if (j != NULL)
		j->conn = NULL;
}

static uint64_t admin_deadline(const struct fe_conn *fc,
			       const struct fe_slot *s)
{
	(void)fc;
	(void)s;
	return km_frontend_now_ms() + 5; /* the tick looks at `done` */
}

static const struct fe_slot_ops admin_ops = {
	.release = admin_release,
	.deadline = admin_deadline,
	.tick = admin_tick,
};

/* Every topic (DeleteRecords: partition) gets code, message msg. */
static void refuse_all(struct km_admin_job *j, int16_t code, const char *m)
{
	uint32_t n = j->kind == KM_ADMIN_CREATE_TOPICS ? j->ct.n_topics
		   : j->kind == KM_ADMIN_DELETE_TOPICS ? j->dt.n_topics
		   : j->cp.n_topics;

	if (j->kind == KM_ADMIN_DELETE_RECORDS) {
		for (uint32_t i = 0; i < j->dr.n_parts; i++) {
			j->dr_parts[i].error_code = code;
			j->dr_parts[i].offset = -1;
		}
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		j->ans[i].error_code = code;
		snprintf(j->ans[i].message, sizeof(j->ans[i].message), "%s", m);
	}
}

static int decode(struct km_admin_job *j, int16_t key, int16_t version,
		  struct km_wire_rd *r, uint32_t *bound)
{
	int rc = 0;

	j->version = version;
	*bound = 64;
	if (key == KM_API_CREATE_TOPICS) {
		j->kind = KM_ADMIN_CREATE_TOPICS;
		j->ct = (struct km_ctopics_req){ j->ct_topics, KM_ADMIN_TOPICS_MAX,
			0, j->ct_configs, KM_ADMIN_CONFIGS_MAX, 0, 0, false };
		rc = km_ctopics_req_decode(r, version, &j->ct);
		/* What the answer echoes, at its size: a whole Kafka Streams
		 * topology's topics fit a connection's response ring. */
		for (uint32_t i = 0; rc == 0 && i < j->ct.n_topics; i++)
			*bound += TOPIC_BYTES + (uint32_t)j->ct_topics[i].name.len;
		for (uint32_t i = 0; rc == 0 && i < j->ct.n_configs; i++)
			*bound += 16u + (uint32_t)j->ct_configs[i].name.len +
				  (uint32_t)(j->ct_configs[i].value.len > 0
						     ? j->ct_configs[i].value.len
						     : 0);
	} else if (key == KM_API_DELETE_TOPICS) {
		j->kind = KM_ADMIN_DELETE_TOPICS;
		j->dt = (struct km_dtopics_req){ j->dt_topics,
						 KM_ADMIN_TOPICS_MAX, 0, 0 };
		rc = km_dtopics_req_decode(r, version, &j->dt);
		*bound += j->dt.n_topics * (TOPIC_BYTES + KM_WIRE_NAME_BYTES_MAX);
	} else if (key == KM_API_DELETE_RECORDS) {
		j->kind = KM_ADMIN_DELETE_RECORDS;
		j->dr = (struct km_delrec_req){ j->dr_topics, KM_ADMIN_TOPICS_MAX,
			0, j->dr_parts, KM_ADMIN_PARTS_MAX, 0, 0 };
		rc = km_delrec_req_decode(r, version, &j->dr);
		*bound += j->dr.n_topics * (KM_WIRE_NAME_BYTES_MAX + 16u) +
			  j->dr.n_parts * 24u;
	} else {
		j->kind = KM_ADMIN_CREATE_PARTITIONS;
		j->cp = (struct km_cparts_req){ j->cp_topics,
						KM_ADMIN_TOPICS_MAX, 0, 0, false };
		rc = km_cparts_req_decode(r, version, &j->cp);
		*bound += j->cp.n_topics * (TOPIC_BYTES + KM_WIRE_NAME_BYTES_MAX);
	}
	return rc;
}

/* Kafka's checks (KafkaApis): Create on the cluster or the topic
 * (CreateTopics), Delete (DeleteTopics, DeleteRecords), Alter
 * (CreatePartitions) on the topic, else TOPIC_AUTHORIZATION_FAILED. */
static bool admin_allowed(struct fe_conn *fc, const struct km_admin_job *j,
			  const char *topic)
{
	switch (j->kind) {
	case KM_ADMIN_CREATE_TOPICS:
		return km_frontend_allowed(fc, KM_ACL_OP_CREATE,
					   KM_ACL_RES_CLUSTER,
					   KM_ACL_CLUSTER_NAME) ||
		       km_frontend_allowed(fc, KM_ACL_OP_CREATE,
					   KM_ACL_RES_TOPIC, topic);
	case KM_ADMIN_CREATE_PARTITIONS:
		return km_frontend_allowed(fc, KM_ACL_OP_ALTER, KM_ACL_RES_TOPIC,
					   topic);
	default:
		return km_frontend_allowed(fc, KM_ACL_OP_DELETE,
					   KM_ACL_RES_TOPIC, topic);
	}
}

static void admin_authorize(struct fe_conn *fc, struct km_admin_job *j)
{
	const char *name;
	uint32_t n = j->kind == KM_ADMIN_CREATE_TOPICS ? j->ct.n_topics
		   : j->kind == KM_ADMIN_DELETE_TOPICS ? j->dt.n_topics
		   : j->kind == KM_ADMIN_DELETE_RECORDS ? j->dr.n_topics
		   : j->cp.n_topics;

	for (uint32_t k = 0; fc->fe->acls != NULL && k < n; k++) {
		name = j->kind == KM_ADMIN_CREATE_TOPICS ? j->ct_topics[k].name.s
		     : j->kind == KM_ADMIN_DELETE_TOPICS ? j->dt_topics[k].name.s
		     : j->kind == KM_ADMIN_DELETE_RECORDS ? j->dr_topics[k].name.s
		     : j->cp_topics[k].name.s;
		if (j->kind == KM_ADMIN_DELETE_TOPICS &&
		    j->dt_topics[k].name.len < 0)
			continue; /* by id: the control thread's to name */
		if (admin_allowed(fc, j, name))
			continue;
		j->denied[k] = true;
		if (j->kind != KM_ADMIN_DELETE_RECORDS) {
			j->ans[k].error_code = KM_KERR_TOPIC_AUTHORIZATION_FAILED;
			continue;
		}
		for (uint32_t i = j->dr_topics[k].first;
		     i < j->dr_topics[k].first + j->dr_topics[k].count; i++) {
			j->dr_parts[i].error_code =
				KM_KERR_TOPIC_AUTHORIZATION_FAILED;
			j->dr_parts[i].offset = -1;
		}
	}
}

int km_frontend_handle_admin(struct fe_conn *fc, const struct km_reqhdr *h,
			     struct km_wire_rd *r)
{
	struct km_frontend *fe = fc->fe;
	struct km_admin_job *j = km_frontend_admin_job(fe);
	uint32_t bound, slot;
	int rc;

	if (j == NULL)
		return FE_WAIT; /* the next tick tries again */
	if ((rc = decode(j, h->api_key, h->api_version, r, &bound)) < 0) {
		j->busy = false;
		return km_frontend_conn_fail(fc, "malformed %s v%d request: %s",
					     km_proto_api_name(h->api_key),
					     h->api_version, km_strerror(rc));
	}
	if ((rc = km_frontend_slot_open(fc, h, bound, &slot)) != 0) {
		j->busy = false;
		return rc;
	}
	j->conn = fc;
	j->slot = slot;
	admin_authorize(fc, j);
	if (fe->ops->admin == NULL ||
	    fe->ops->admin(fe->ops->ctx, j) < 0) {
		refuse_all(j, KM_KERR_UNKNOWN_SERVER_ERROR,
			   "kmirrord cannot take this request now");
		answer(fc, j);
		return 0;
	}
	fc->slots[slot].ops = &admin_ops;
	return 0;
}

bool km_frontend_admin_auto_create(struct km_frontend *fe, const char *topic)
{
	struct km_admin_job *j;

	if (!fe->auto_create_topics || fe->ops->admin == NULL ||
	    (j = km_frontend_admin_job(fe)) == NULL)
		return false;
	j->kind = KM_ADMIN_CREATE_TOPICS;
	j->version = 7;
	j->auto_create = true;
	j->ct = (struct km_ctopics_req){ j->ct_topics, KM_ADMIN_TOPICS_MAX, 1,
					 j->ct_configs, KM_ADMIN_CONFIGS_MAX, 0,
					 0, false };
	memset(&j->ct_topics[0], 0, sizeof(j->ct_topics[0]));
	j->ct_topics[0].name.len = (int16_t)snprintf(
		j->ct_topics[0].name.s, sizeof(j->ct_topics[0].name.s), "%s",
		topic);
	j->ct_topics[0].num_partitions = -1;
	j->ct_topics[0].replication_factor = -1;
	if (fe->ops->admin(fe->ops->ctx, j) < 0) {
		j->busy = false;
		return false;
	}
	return true;
}
