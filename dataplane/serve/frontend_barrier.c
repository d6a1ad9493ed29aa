/* KmirrorBarrier (kmirror's own API key 10000, kafka/proto_barrier.c): a
 * downstream kmirror host failing back asks for the latest barrier our
 * partition holds for its cluster id (R5). Answered from the durable log
 * only, like a Fetch; the walk reads one batch header per batch (an
 * operator's rare request, on this worker's thread). */
#include "common/errors.h"
#include "common/log.h"
#include "dataplane/serve/frontend_pvt.h"

/* Header, four fixed fields and the cluster id. */
#define BARRIER_RESP_BYTES (64u + KM_WIRE_NAME_BYTES_MAX)

static void barrier_answer(struct km_frontend *fe,
			   const struct km_barrier_req *req,
			   struct km_barrier_resp *m)
{
	struct km_part *p = km_part_find(fe->table, req->topic.s, req->partition);
	int rc;

	m->error_code = km_frontend_part_state_err(p);
	m->barrier_offset = -1;
	km_wire_name_set(&m->cluster_id, fe->cluster_id);
	if (m->error_code != KM_KERR_NONE)
		return;
	m->log_start_offset = km_log_start_offset(p->log);
	m->high_watermark = km_log_durable_offset(p->log);
	rc = km_log_find_barrier(p->log, req->source_cluster_id.s,
				 m->high_watermark, &m->barrier_offset);
	if (rc < 0) {
		KM_WARN("frontend", "KmirrorBarrier %s-%d: %s", p->topic,
			p->partition, km_strerror(rc));
		m->error_code = KM_KERR_KAFKA_STORAGE_ERROR;
	}
}

int km_frontend_handle_barrier(struct fe_conn *fc, const struct km_reqhdr *h,
		      struct km_wire_rd *r)
{
	struct km_barrier_req req;
	struct km_barrier_resp m = { 0 };
	struct km_wire_wr w;
	uint32_t slot;
	int rc = km_barrier_req_decode(r, h->api_version, &req);

	if (rc < 0)
		return km_frontend_conn_fail(fc, "malformed KmirrorBarrier v%d request: "
				    "%s", h->api_version, km_strerror(rc));
	rc = km_frontend_slot_open(fc, h, BARRIER_RESP_BYTES, &slot);
	if (rc != 0)
		return rc;
	barrier_answer(fc->fe, &req, &m);
	km_frontend_slot_begin(fc, slot, &w);
	km_barrier_resp_encode(&w, h->api_version, &m);
	return km_frontend_slot_finish(fc, slot, &w, true);
}
