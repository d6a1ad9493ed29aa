/* The front-end's Fetch (v4-11): read whole batches up to the high
 * watermark (or the LSO), long-poll without blocking, answer in a slot
 * whose records stay in a Fetch buffer (iovecs, no copy into the response
 * ring). See frontend.h for the semantics. */
#include <errno.h>
#include <string.h>

#include "common/endian.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "dataplane/serve/frontend_pvt.h"

#define RESP_FIXED_BYTES 64u
/* Partition fields of a v11 response with no aborted transaction:
 * index, error, HW, LSO, log start, aborted count, preferred replica,
 * records length. */
#define RESP_PART_BYTES 48u

/* One evaluation of the Fetch in process. */
struct fetch_pass {
	bool committed;		/* read_committed */
	bool errors;		/* a partition answers with an error */
	bool readable;		/* a partition has data below its bound */
	bool min_one;		/* KIP-74: no records read yet */
	uint32_t bytes;		/* record bytes read */
	uint32_t resp_left;	/* of the request's MaxBytes */
	uint32_t gaps;		/* partitions with records */
};

/* The slot's response is sent, or the connection closed: the next Fetch
 * may come, and the records buffer goes back to the pool. */
static void fetch_release(struct fe_conn *fc, struct fe_slot *s)
{
	struct fe_fetch *f = fc->fetch;

	KM_ASSERT_HOT(s == &fc->slots[f->slot]);
	if (f->buf != NULL)
		km_frontend_fbuf_put(fc->fe, f->buf);
	f->buf = NULL;
	f->buf_used = 0;
	f->active = false;
	f->parked = false;
	f->need_buf = false;
	f->n_ext = 0;
	f->n_aborted = 0;
}

/* The head, then each partition's records from the Fetch buffer between
 * the encoded fields around them (no copy). */
static int fetch_iovec(struct fe_conn *fc, struct fe_slot *s, struct iovec *out,
		       uint32_t out_max)
{
	struct fe_fetch *f = fc->fetch;

	KM_ASSERT_HOT(s == &fc->slots[f->slot]);
	return km_wire_wr_iovec(&f->w, f->ext, f->n_ext, out, out_max);
}

static uint64_t fetch_deadline(const struct fe_conn *fc,
			       const struct fe_slot *s)
{
	const struct fe_fetch *f = fc->fetch;
	uint64_t recheck;

	KM_ASSERT_HOT(s == &fc->slots[f->slot]);
	if (!f->active || !f->parked)
		return UINT64_MAX;
	recheck = f->checked_ms + KM_FRONTEND_RECHECK_MS;
	/* A high watermark moved: walked at the next millisecond. */
	if (!f->need_buf && f->req.isolation_level == 0 &&
	    km_log_durable_gen() != f->seen_gen && f->walked_ms + 1 < recheck)
		recheck = f->walked_ms + 1;
	return recheck < f->deadline_ms ? recheck : f->deadline_ms;
}

static int fetch_decode(struct fe_conn *fc, const struct km_reqhdr *h,
			struct km_wire_rd *r)
{
	struct km_frontend *fe = fc->fe;
	struct fe_fetch *f = fc->fetch;
	struct km_fetch_req *q = &f->req;
	int rc;

	memset(q, 0, sizeof(*q));
	q->topics = f->topics;
	q->topics_max = fe->topics_max;
	q->parts = f->parts;
	q->parts_max = fe->parts_max;
	q->forgotten = f->forgotten;
	q->forgotten_max = sizeof(f->forgotten) / sizeof(f->forgotten[0]);
	q->forgotten_parts = f->forgotten_parts;
	q->forgotten_parts_max =
		sizeof(f->forgotten_parts) / sizeof(f->forgotten_parts[0]);
	rc = km_fetch_req_decode(r, h->api_version, q);
	if (rc == KM_EWIRECAPACITY)
		return km_frontend_conn_fail(fc, "Fetch v%d names more than %u "
				    "partitions or %u topics", h->api_version,
				    fe->parts_max, fe->topics_max);
	if (rc < 0)
		return km_frontend_conn_fail(fc, "malformed Fetch v%d request: %s",
				    h->api_version, km_strerror(rc));
	f->top_err = KM_KERR_NONE; /* km_frontend_fsess_begin() says */
	return 0;
}

static uint32_t fetch_bound(const struct fe_fetch *f)
{
	uint32_t b = RESP_FIXED_BYTES + 16 * KM_FRONTEND_ABORTED_MAX;

	for (uint32_t t = 0; t < f->req.n_topics; t++)
		b += 8 + (uint32_t)f->req.topics[t].name.len;
	return b + RESP_PART_BYTES * f->req.n_parts;
}

/* The table is fixed while we run: look each partition up once. */
void km_frontend_fetch_resolve(struct fe_conn *fc)
{
	struct fe_fetch *f = fc->fetch;

	for (uint32_t t = 0; t < f->req.n_topics; t++) {
		const struct km_proto_topic *tp = &f->req.topics[t];
		/* Kafka: Read on the topic, else TOPIC_AUTHORIZATION_FAILED
		 * for its partitions, whether they exist or not. */
		bool denied = !km_frontend_allowed(fc, KM_ACL_OP_READ,
						   KM_ACL_RES_TOPIC, tp->name.s);

		for (uint32_t i = tp->first; i < tp->first + tp->count; i++) {
			f->res[i].denied = denied;
			f->res[i].p = denied ? NULL
				      : km_part_find(fc->fe->table, tp->name.s,
						     f->parts[i].partition);
		}
	}
}

/* Offsets and error of partition i, nothing read yet. */
static void fetch_state(struct fe_conn *fc, uint32_t i, struct fetch_pass *ps)
{
	struct fe_fetch *f = fc->fetch;
	struct fe_fpart *x = &f->res[i];
	int64_t off = f->parts[i].fetch_offset;
	struct km_log *log;

	x->err = x->denied ? KM_KERR_TOPIC_AUTHORIZATION_FAILED
			   : km_frontend_part_state_err(x->p);
	x->hw = x->lso = x->log_start = x->bound = -1;
	x->rec_len = 0;
	x->ab_first = 0;
	x->n_ab = -1;
	if (x->err == KM_KERR_NONE) {
		log = x->p->log;
		x->hw = km_log_durable_offset(log);
		x->log_start = km_log_start_offset(log);
		x->lso = km_frontend_part_lso(fc->fe, x->p);
		x->bound = ps->committed ? x->lso : x->hw;
		/* R6: above the HW is past what exists for a client. */
		if (off < x->log_start || off > x->hw) {
			x->err = KM_KERR_OFFSET_OUT_OF_RANGE;
			x->hw = x->lso = x->log_start = x->bound = -1;
		}
	}
	if (x->err != KM_KERR_NONE)
		ps->errors = true;
	else if (off < x->bound)
		ps->readable = true;
	if (x->err == KM_KERR_NONE && ps->committed)
		x->n_ab = 0;
}

/* The aborted transactions overlapping [from, upto) of x's log. */
static int fetch_aborted(struct fe_conn *fc, struct fe_fpart *x, int64_t from,
			 int64_t upto)
{
	struct fe_fetch *f = fc->fetch;
	uint32_t room = KM_FRONTEND_ABORTED_MAX - f->n_aborted;
	int n = km_log_aborted_txns(x->p->log, from, upto, fc->fe->ab_tmp, room);

	if (n < 0)
		return n;
	/* Records served without all their aborted transactions would hand
	 * aborted data to a read_committed consumer. */
	if ((uint32_t)n > room)
		return -ENOSPC;
	x->ab_first = f->n_aborted;
	x->n_ab = n;
	for (int k = 0; k < n; k++) {
		f->aborted[f->n_aborted].producer_id = fc->fe->ab_tmp[k].producer_id;
		f->aborted[f->n_aborted++].first_offset =
			fc->fe->ab_tmp[k].first_offset;
	}
	return 0;
}

/* Is the batch whose header is at h data (not a marker) of a transaction
 * in ab[0, n), all aborted ones? A producer has one transaction at a time,
 * so its id and an offset between the first offset and the ABORT marker
 * name it. */
static bool batch_aborted(const uint8_t *h, const struct km_aborted_txn *ab,
			  int n)
{
	uint16_t attr = km_load_be16(h + KM_BATCH_OFF_ATTRIBUTES);
	int64_t base = (int64_t)km_load_be64(h + KM_BATCH_OFF_BASE_OFFSET);
	int64_t pid = (int64_t)km_load_be64(h + KM_BATCH_OFF_PRODUCER_ID);

	if ((attr & (KM_BATCH_ATTR_TRANSACTIONAL | KM_BATCH_ATTR_CONTROL)) !=
	    KM_BATCH_ATTR_TRANSACTIONAL)
		return false;
	for (int k = 0; k < n; k++)
		if (ab[k].producer_id == pid && ab[k].first_offset <= base &&
		    base < ab[k].last_offset)
			return true;
	return false;
}

/* Keep, in place, the batches of buf[0, len) (whole ones) that are not
 * aborted data, while they fit limit - the first whatever its size if
 * first_free (KIP-74), as km_log_read does; *full: a batch to keep did not
 * fit. The bytes kept. */
static uint32_t keep_committed(uint8_t *buf, uint32_t len,
			       const struct km_aborted_txn *ab, int n,
			       uint32_t limit, bool first_free, bool *full)
{
	uint32_t kept = 0, size;

	*full = false;
	for (uint32_t pos = 0; pos < len; pos += size) {
		size = km_load_be32(buf + pos + KM_BATCH_OFF_LENGTH) +
		       KM_BATCH_LOG_OVERHEAD;
		if (batch_aborted(buf + pos, ab, n))
			continue;
		if ((kept > 0 || !first_free) && kept + size > limit) {
			*full = true;
			break;
		}
		if (kept != pos)
			memmove(buf + kept, buf + pos, size);
		kept += size;
	}
	return kept;
}

/* km_log_read, then the aborted transactions of the range read. A range
 * that overlaps more of them than the response has room for is read again
 * at half its bytes, down to its first batch: a partition dense with small
 * aborted transactions must still advance, not wait for a Fetch that can
 * never hold them all. At most 32 passes (the bytes halve each time). */
static int read_with_aborted(struct fe_conn *fc, struct fe_fpart *x,
			     int64_t off, uint32_t max_bytes, uint8_t *buf,
			     uint32_t cap, struct km_log_read_result *rr)
{
	uint32_t n_aborted = fc->fetch->n_aborted;
	int rc = 0;

	for (int pass = 0; pass < 32; pass++) {
		rc = km_log_read(x->p->log, off, x->bound, max_bytes, buf, cap,
				 rr);
		if (rc < 0 || rr->bytes == 0)
			return rc;
		fc->fetch->n_aborted = n_aborted;
		rc = fetch_aborted(fc, x, off, rr->next_offset);
		if (rc != -ENOSPC || rr->batches <= 1)
			break;
		max_bytes = rr->bytes / 2;
	}
	if (rc == -ENOSPC)
		KM_WARN("frontend", "%s-%d: the batch at offset %lld overlaps more "
			"aborted transactions than this Fetch response has room "
			"for (%u in all); it waits for the next", x->p->topic,
			(int)x->p->partition, (long long)off,
			KM_FRONTEND_ABORTED_MAX);
	return rc;
}

/* read_committed: whole batches from off as km_log_read reads them, less
 * the data batches of aborted transactions, with the aborted transactions
 * of the range read. Kafka's Java consumer filters aborted batches only
 * when their producer id is above -1 (CompletedFetch.nextFetchedRecord:
 * `isolationLevel == READ_COMMITTED && currentBatch.hasProducerId()`;
 * DefaultRecordBatch.hasProducerId: `RecordBatch.NO_PRODUCER_ID <
 * producerId()`), and R1 maps every mirrored id to -(p+2) < -1, so those
 * batches must not reach it. Clients take the gap as after compaction
 * (their next offset follows the last batch served; markers are served).
 * What is left out does not count against limit. A read whose batches were
 * all aborted reads on, the rest of the Fetch buffer at a time (then cut
 * to limit), so that a response makes progress whenever a kept batch (the
 * ABORT marker, at the latest) lies below the LSO. */
static int read_committed(struct fe_conn *fc, struct fe_fpart *x, int64_t off,
			  uint32_t limit, uint32_t cap, bool min_one,
			  struct km_log_read_result *rr)
{
	struct fe_fetch *f = fc->fetch;
	uint8_t *buf = f->buf + f->buf_used;
	uint32_t room = fc->fe->fetch_buf_bytes - f->buf_used;
	uint32_t n_aborted = f->n_aborted;
	bool full = false;
	int rc;

	for (bool first = true;; first = false) {
		f->n_aborted = n_aborted;
		rc = read_with_aborted(fc, x, off, first ? limit : room, buf,
				       first ? cap : room, rr);
		if (rc < 0 || rr->bytes == 0)
			break;
		if (first && x->n_ab == 0)
			return 0; /* nothing aborted: the read as it is */
		rr->bytes = keep_committed(buf, rr->bytes, fc->fe->ab_tmp,
					   x->n_ab, limit, min_one, &full);
		if (rr->bytes > 0)
			return 0;
		if (full || rr->next_offset >= x->bound)
			break;
		off = rr->next_offset;
	}
	/* Nothing served: no aborted transactions listed either; too many
	 * of them (-ENOSPC, warned) leave the records for the next Fetch. */
	f->n_aborted = n_aborted;
	x->n_ab = 0;
	rr->bytes = 0;
	return rc == -ENOSPC ? 0 : rc;
}

/* The bytes of buf[0, len) (whole batches) before the first barrier that
 * is not its first batch: a barrier is served only at the head of a
 * partition's records. librdkafka (2.0.2, still so in 2.x) hides a control
 * record from the application but stores its offset + 1 once it handles
 * it, and a consumer that closes handles every op it fetched, delivered or
 * not: a barrier that came behind records the application never saw would
 * have its group commit past them (docs/design.md, "The barrier comes
 * alone"). Kafka's own transaction markers follow data as Kafka serves
 * them; the barrier (control, producerId -1, no other control batch has
 * it) is kmirror's, once per failover, in topics whose consumers never
 * met a control batch. */
static uint32_t cut_before_barrier(const uint8_t *buf, uint32_t len)
{
	uint32_t size;

	for (uint32_t pos = 0; pos < len; pos += size) {
		const uint8_t *h = buf + pos;
		uint16_t attr = km_load_be16(h + KM_BATCH_OFF_ATTRIBUTES);

		if (pos > 0 && (attr & KM_BATCH_ATTR_CONTROL) != 0 &&
		    (int64_t)km_load_be64(h + KM_BATCH_OFF_PRODUCER_ID) == -1)
			return pos;
		size = km_load_be32(h + KM_BATCH_OFF_LENGTH) +
		       KM_BATCH_LOG_OVERHEAD;
	}
	return len;
}

/* A read failed: -ERANGE means the log moved under us (truncated). */
static void read_failed(struct fe_fpart *x, int rc, struct fetch_pass *ps)
{
	if (rc == KM_ENOSPACE)
		return; /* the batch does not fit what is left: next time */
	if (rc == -ERANGE) {
		x->err = KM_KERR_OFFSET_OUT_OF_RANGE;
	} else {
		x->err = KM_KERR_KAFKA_STORAGE_ERROR;
		KM_WARN("frontend", "%s-%d: read failed: %s", x->p->topic,
			(int)x->p->partition, km_strerror(rc));
	}
	x->hw = x->lso = x->log_start = -1;
	x->n_ab = -1;
	ps->errors = true;
}

/* Whole batches of partition i into the Fetch buffer, within the
 * partition's and the response's MaxBytes, except that the first
 * partition with data gets its first batch whatever its size (KIP-74). */
static void fetch_read(struct fe_conn *fc, uint32_t i, struct fetch_pass *ps)
{
	struct fe_fetch *f = fc->fetch;
	struct fe_fpart *x = &f->res[i];
	const struct km_fetch_req_part *q = &f->parts[i];
	uint32_t left = fc->fe->fetch_buf_bytes - f->buf_used;
	uint32_t limit = q->partition_max_bytes > 0
				 ? (uint32_t)q->partition_max_bytes : 0;
	struct km_log_read_result rr;
	uint32_t cap;
	int rc;

	if (x->err != KM_KERR_NONE || q->fetch_offset >= x->bound ||
	    ps->gaps == fc->fe->gaps_max)
		return;
	limit = limit < ps->resp_left ? limit : ps->resp_left;
	cap = ps->min_one ? left : (limit < left ? limit : left);
	if (cap < KM_BATCH_HEADER_BYTES)
		return;
	rc = ps->committed ? read_committed(fc, x, q->fetch_offset, limit,
					    cap, ps->min_one, &rr)
			   : km_log_read(x->p->log, q->fetch_offset, x->bound,
					 limit, f->buf + f->buf_used, cap, &rr);
	if (rc == KM_ENOSPACE && ps->min_one)
		KM_WARN("frontend", "%s-%d: the batch at offset %lld is larger "
			"than fetch_buf_bytes (%u): it cannot be served",
			x->p->topic, (int)x->p->partition,
			(long long)q->fetch_offset, fc->fe->fetch_buf_bytes);
	if (rc < 0) {
		read_failed(x, rc, ps);
		return;
	}
	rr.bytes = cut_before_barrier(f->buf + f->buf_used, rr.bytes);
	if (rr.bytes == 0)
		return;
	x->rec_off = f->buf_used;
	x->rec_len = rr.bytes;
	f->buf_used += rr.bytes;
	KM_ASSERT_HOT(f->buf_used <= fc->fe->fetch_buf_bytes);
	ps->bytes += rr.bytes;
	ps->resp_left -= rr.bytes < ps->resp_left ? rr.bytes : ps->resp_left;
	ps->min_one = false;
	ps->gaps++;
}

static void fetch_enc_part(struct fe_conn *fc, struct km_proto_enc *e,
			   uint32_t i)
{
	struct fe_fetch *f = fc->fetch;
	const struct fe_fpart *x = &f->res[i];
	struct km_fetch_part p;

	memset(&p, 0, sizeof(p));
	p.partition = f->parts[i].partition;
	p.error_code = x->err;
	p.high_watermark = x->hw;
	p.last_stable_offset = x->lso;
	p.log_start_offset = x->log_start;
	p.n_aborted = x->n_ab;
	p.aborted = x->n_ab > 0 ? &f->aborted[x->ab_first] : NULL;
	p.preferred_read_replica = -1;
	if (x->err != KM_KERR_NONE)
		fc->fe->st.partition_errors++;
	km_fetch_resp_enc_partition(e, &p, NULL, (int32_t)x->rec_len);
	if (x->rec_len == 0)
		return;
	KM_ASSERT_HOT(f->n_ext < fc->fe->gaps_max); /* fetch_read's bound */
	f->ext[f->n_ext].iov_base = f->buf + x->rec_off;
	f->ext[f->n_ext++].iov_len = x->rec_len;
	fc->fe->st.records_bytes_out += x->rec_len;
}

/* Encode the answer in the Fetch's slot; the records stay in the Fetch
 * buffer as external fields until the send completes. */
static void fetch_respond(struct fe_conn *fc)
{
	struct fe_fetch *f = fc->fetch;
	int16_t ver = fc->slots[f->slot].api_version;
	struct km_proto_enc e;

	f->parked = false;
	f->need_buf = false;
	f->n_ext = 0;
	km_frontend_slot_begin(fc, f->slot, &f->w);
	km_wire_wr_set_gaps(&f->w, f->gaps, KM_FRONTEND_GAPS_MAX);
	if (f->top_err == KM_KERR_NONE)
		km_frontend_fsess_answer(fc); /* KIP-227: what to leave out */
	km_fetch_resp_enc_begin(&e, &f->w, ver, 0, f->top_err, f->fs_resp_id);
	for (uint32_t t = 0; t < f->req.n_topics && f->top_err == 0; t++) {
		const struct km_proto_topic *tp = &f->req.topics[t];
		uint32_t i, end = tp->first + tp->count;

		for (i = tp->first; i < end && f->res[i].skip; i++)
			;
		if (i == end)
			continue; /* nothing of it in this answer */
		km_fetch_resp_enc_topic(&e, &tp->name);
		for (i = tp->first; i < end; i++)
			if (!f->res[i].skip)
				fetch_enc_part(fc, &e, i);
	}
	km_fetch_resp_enc_end(&e);
	km_frontend_slot_finish(fc, f->slot, &f->w, false);
}

/* gen: km_log_durable_gen() before the partitions were evaluated. */
static void fetch_park(struct fe_conn *fc, uint64_t now, bool need_buf,
		       uint64_t gen)
{
	struct fe_fetch *f = fc->fetch;

	f->need_buf = need_buf;
	if (f->buf != NULL)
		km_frontend_fbuf_put(fc->fe, f->buf);
	f->buf = NULL;
	f->buf_used = 0;
	f->n_aborted = 0;
	if (!f->parked)
		fc->fe->st.fetch_parked++;
	f->parked = true;
	f->checked_ms = now;
	f->walked_ms = now;
	f->seen_gen = gen;
}

/* Read what the Fetch asks for and answer, or park it until more data is
 * durable or its MaxWaitMs passes (force). Kafka answers at once when a
 * partition errors, MaxWaitMs is 0, or MinBytes are readable. */
static void fetch_eval(struct fe_conn *fc, uint64_t now, bool force)
{
	struct fe_fetch *f = fc->fetch;
	const struct km_fetch_req *q = &f->req;
	struct fetch_pass ps;
	bool wait = !force && q->max_wait_ms > 0 && q->min_bytes > 0;
	uint64_t gen = km_log_durable_gen();

	memset(&ps, 0, sizeof(ps));
	ps.committed = q->isolation_level == 1;
	ps.min_one = true;
	ps.resp_left = q->max_bytes > 0 ? (uint32_t)q->max_bytes : 0;
	f->buf_used = 0;
	f->n_aborted = 0;
	if (f->top_err != KM_KERR_NONE) {
		fetch_respond(fc);
		return;
	}
	for (uint32_t i = 0; i < q->n_parts; i++)
		fetch_state(fc, i, &ps);
	wait = wait && !ps.errors;
	if (ps.readable && f->buf == NULL)
		f->buf = km_frontend_fbuf_get(fc->fe);
	if (wait && (!ps.readable || f->buf == NULL)) {
		fetch_park(fc, now, ps.readable, gen);
		return;
	}
	for (uint32_t i = 0; i < q->n_parts && f->buf != NULL; i++)
		fetch_read(fc, i, &ps);
	if (wait && !ps.errors && ps.bytes < (uint32_t)q->min_bytes) {
		fetch_park(fc, now, false, gen);
		return;
	}
	fetch_respond(fc);
}

/* A parked read_uncommitted Fetch walks its partitions (a cache miss or
 * three each: a session of 1,024, ten of them on one listener) only when
 * some log's high watermark moved since its last walk, at most once a
 * millisecond (fetch_deadline wakes the worker for it), and every
 * KM_FRONTEND_RECHECK_MS whatever moved (a partition offline, a
 * truncation): walked at every turn of the worker, they took 55% of a
 * 10,000-partition source's CPU (issue 17). Kafka's purgatory looks at
 * the Fetches watching a partition when its high watermark moves: here
 * an answer may come up to a millisecond later than that. */
static bool walk_due(struct fe_fetch *f, uint64_t now_ms)
{
	uint64_t gen = km_log_durable_gen();

	if (f->req.isolation_level == 1)
		return true; /* the LSO also moves on at a visit */
	if (now_ms == f->walked_ms ||
	    (gen == f->seen_gen &&
	     now_ms < f->walked_ms + KM_FRONTEND_RECHECK_MS))
		return false;
	f->seen_gen = gen; /* read before the walk: a move during it shows */
	f->walked_ms = now_ms;
	return true;
}

/* While parked: did a bound move, or a partition go offline? */
static bool fetch_changed(const struct fe_conn *fc)
{
	const struct fe_fetch *f = fc->fetch;
	bool committed = f->req.isolation_level == 1;

	for (uint32_t i = 0; i < f->req.n_parts; i++) {
		const struct fe_fpart *x = &f->res[i];
		int64_t cur;

		if (km_frontend_part_state_err(x->p) != KM_KERR_NONE)
			return true;
		cur = committed ? km_frontend_part_lso(fc->fe, x->p)
				: km_log_durable_offset(x->p->log);
		if (cur != x->bound)
			return true;
	}
	return false;
}

static void fetch_tick(struct fe_conn *fc, struct fe_slot *s, uint64_t now_ms)
{
	struct fe_fetch *f = fc->fetch;

	KM_ASSERT_HOT(s == &fc->slots[f->slot]);
	if (!f->active || !f->parked)
		return;
	if (now_ms >= f->deadline_ms)
		fetch_eval(fc, now_ms, true);
	else if (f->need_buf ? km_frontend_fbuf_available(fc->fe)
			     : walk_due(f, now_ms) && fetch_changed(fc))
		fetch_eval(fc, now_ms, false);
	else
		f->checked_ms = now_ms;
}

/* The Fetch's slot holds records outside the response ring and may be
 * parked on time; one connection has one Fetch, in f. */
static const struct fe_slot_ops fetch_slot_ops = {
	.iovec = fetch_iovec,
	.release = fetch_release,
	.deadline = fetch_deadline,
	.tick = fetch_tick,
};

int km_frontend_handle_fetch(struct fe_conn *fc, const struct km_reqhdr *h,
		    struct km_wire_rd *r)
{
	struct fe_fetch *f = fc->fetch;
	bool resolved;
	uint64_t now;
	uint32_t slot;
	int rc;

	if (f->active)
		return FE_WAIT; /* the previous Fetch's answer is not sent */
	if ((rc = fetch_decode(fc, h, r)) < 0)
		return rc;
	/* Room for the session's partitions too: the session is applied
	 * only once the slot is ours (a FE_WAIT retry decodes again). */
	rc = km_frontend_slot_open(fc, h, fetch_bound(f) +
				   km_frontend_fsess_bound(fc, h->api_version),
				   &slot);
	if (rc != 0)
		return rc;
	fc->slots[slot].ops = &fetch_slot_ops;
	f->active = true;
	f->parked = false;
	f->slot = slot;
	now = km_frontend_now_ms();
	f->deadline_ms = now + (f->req.max_wait_ms > 0
					? (uint64_t)f->req.max_wait_ms : 0);
	f->top_err = km_frontend_fsess_begin(fc, h->api_version, &resolved);
	if (!resolved)
		km_frontend_fetch_resolve(fc);
	fetch_eval(fc, now, false);
	return 0;
}
