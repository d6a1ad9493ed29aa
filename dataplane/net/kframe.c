/* Kafka framing over a km_net connection: see kframe.h. */
#include "dataplane/net/kframe.h"

#include <errno.h>
#include <string.h>

#include "common/endian.h"
#include "common/errors.h"

void km_kframe_init(struct km_kframe *k, struct km_net *net,
		    uint32_t frame_bytes_max)
{
	k->net = net;
	k->frame_bytes_max = frame_bytes_max;
	k->next_corr = 1;
	k->n_segs = 0;
	k->head_off = 0;
	k->queued = 0;
	k->held = false;
	k->bytes_in = 0;
	k->frames_in = 0;
}

int km_kframe_push(struct km_kframe *k, const struct km_chain *data,
		   const uint32_t *buf_ids)
{
	if (data->n_iov > KM_KFRAME_SEGS_MAX - k->n_segs) {
		km_net_release(k->net, buf_ids, data->n_iov);
		return -ENOBUFS;
	}
	for (uint32_t i = 0; i < data->n_iov; i++) {
		if (data->iov[i].iov_len == 0) {
			km_net_release(k->net, &buf_ids[i], 1);
			continue;
		}
		k->segs[k->n_segs] = data->iov[i];
		k->ids[k->n_segs] = buf_ids[i];
		k->n_segs++;
		k->queued += data->iov[i].iov_len;
		k->bytes_in += data->iov[i].iov_len;
	}
	return 0;
}

/* False only when a well-formed size says the frame is not all here yet:
 * a large response arrives in a thousand segments, and walking them all
 * after each one (the parse's km_chain_has) costs the square. A bad size
 * answers true, so that the parse reports it at once. */
static bool whole_frame_queued(const struct km_kframe *k)
{
	uint64_t have = k->queued - k->head_off;
	uint32_t size;

	if (have < KM_WIRE_SIZE_BYTES)
		return false;
	if (km_kframe_peek_size(k, &size) != 1 || (int32_t)size < 0 ||
	    size > k->frame_bytes_max)
		return true;
	return have >= KM_WIRE_SIZE_BYTES + (uint64_t)size;
}

int km_kframe_next(struct km_kframe *k, const struct km_kframe_frame **out)
{
	struct km_kframe_frame *f = &k->cur;
	uint32_t size = 0;
	int rc;

	if (k->held || k->n_segs == 0 || !whole_frame_queued(k))
		return 0;
	f->chain.iov = k->segs;
	f->chain.n_iov = k->n_segs;
	f->body.seg = 0;
	f->body.off = k->head_off;
	rc = km_wire_frame_parse(&f->chain, f->body, k->frame_bytes_max, &size);
	if (rc <= 0)
		return rc;
	km_chain_advance(&f->chain, &f->body, KM_WIRE_SIZE_BYTES);
	f->body_len = size;
	f->end = f->body;
	km_chain_advance(&f->chain, &f->end, size);
	k->held = true;
	k->frames_in++;
	*out = f;
	return 1;
}

int km_kframe_peek_size(const struct km_kframe *k, uint32_t *size)
{
	struct km_chain c = {k->segs, k->n_segs};
	struct km_chain_cur at = {0, k->head_off};
	uint8_t be[KM_WIRE_SIZE_BYTES];

	if (k->held || km_chain_copy(&c, at, be, sizeof(be)) < sizeof(be))
		return 0;
	*size = km_load_be32(be);
	return 1;
}

/* Drop segments [0, n) and make off the head offset in the new segs[0]. */
static void drop_segs(struct km_kframe *k, uint32_t n, uint32_t off)
{
	if (n > 0) {
		for (uint32_t i = 0; i < n; i++)
			k->queued -= k->segs[i].iov_len;
		km_net_release(k->net, k->ids, n);
		memmove(k->segs, k->segs + n,
			(k->n_segs - n) * sizeof(k->segs[0]));
		memmove(k->ids, k->ids + n, (k->n_segs - n) * sizeof(k->ids[0]));
		k->n_segs -= n;
	}
	k->head_off = off;
}

void km_kframe_release(struct km_kframe *k)
{
	struct km_chain_cur e = k->cur.end;

	if (!k->held)
		return;
	k->held = false;
	/* km_chain_advance may leave the cursor at the end of a segment or
	 * at the start of the next; normalise to "in segment e.seg". */
	if (e.seg < k->n_segs && e.off >= k->segs[e.seg].iov_len) {
		e.seg++;
		e.off = 0;
	}
	if (e.seg >= k->n_segs)
		drop_segs(k, k->n_segs, 0);
	else
		drop_segs(k, e.seg, e.off);
}

/* The first segment compaction may write into: the one after the held
 * frame's last (whose bytes the frame's views read), or the first. */
static uint32_t compact_start(const struct km_kframe *k)
{
	return k->held ? k->cur.end.seg + 1 : 0;
}

/* Move r's bytes into the free tails from segment *w on; r itself becomes
 * the writer once every segment before it is full. */
static void compact_one(struct km_kframe *k, uint32_t *w, uint32_t r,
			uint32_t buf_bytes)
{
	uint8_t *src = k->segs[r].iov_base;
	size_t left = k->segs[r].iov_len;

	while (left > 0) {
		struct iovec *d = &k->segs[*w];
		size_t n = buf_bytes - d->iov_len;

		if (*w == r) {
			if (src != d->iov_base)
				memmove(d->iov_base, src, left);
			d->iov_len = left;
			return;
		}
		if (n == 0) {
			(*w)++;
			continue;
		}
		n = n < left ? n : left;
		memcpy((uint8_t *)d->iov_base + d->iov_len, src, n);
		d->iov_len += n;
		src += n;
		left -= n;
	}
	k->segs[r].iov_len = 0;
}

uint32_t km_kframe_compact(struct km_kframe *k, uint32_t buf_bytes)
{
	uint32_t w = compact_start(k), n;

	if (w >= k->n_segs)
		return 0;
	for (uint32_t r = w + 1; r < k->n_segs; r++)
		compact_one(k, &w, r, buf_bytes);
	n = k->n_segs - (w + 1);
	if (n > 0) {
		km_net_release(k->net, &k->ids[w + 1], n);
		k->n_segs = w + 1;
	}
	return n;
}

void km_kframe_reset(struct km_kframe *k)
{
	k->held = false;
	drop_segs(k, k->n_segs, 0);
}

int km_kframe_req_begin(struct km_kframe *k, struct km_wire_wr *w, void *buf,
			size_t cap, int16_t api_key, int16_t api_version,
			const char *client_id, int32_t *corr)
{
	struct km_reqhdr h;

	memset(&h, 0, sizeof(h));
	h.api_key = api_key;
	h.api_version = api_version;
	h.correlation_id = k->next_corr++;
	if (k->next_corr <= 0)
		k->next_corr = 1;
	if (km_wire_name_set(&h.client_id, client_id) != 0)
		km_wire_name_set_null(&h.client_id);
	km_wire_wr_init(w, buf, cap);
	*corr = h.correlation_id;
	return km_proto_req_begin(w, &h);
}

int km_kframe_req_send(struct km_kframe *k, struct km_net_conn *c,
		       struct km_wire_wr *w, km_net_sent_fn fn, void *arg)
{
	struct iovec iov;
	int rc;

	(void)k;
	rc = km_wire_wr_frame_end(w);
	if (rc < 0)
		return rc;
	iov.iov_base = w->buf;
	iov.iov_len = w->pos;
	return km_net_send(c, &iov, 1, fn, arg);
}
