/* The cleaner's bookkeeping: the key map (Kafka's SkimpyOffsetMap: keys
 * known by a 128-bit hash, bounded by log.cleaner.dedupe.buffer.size), the
 * transaction tracking of a pass (CleanedTransactionMetadata) and a record
 * parser over contiguous bytes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/endian.h"
#include "common/errors.h"
#include "common/varint.h"
#include "iouring_log/log_clean_pvt.h"
#include "kafka/control.h"

/* Kafka's log.cleaner.io.buffer.load.factor. */
#define LOAD_PERCENT 90u
#define CAP_MIN 1024u

static uint64_t mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 33);
}

/* Two independent 64-bit hashes (FNV-1a, and a multiply-rotate one), each
 * finalised: a false match needs both to collide. */
static void hash_key(const uint8_t *k, uint32_t len, uint64_t h[2])
{
	uint64_t a = 0xcbf29ce484222325ull, b = 0x9e3779b97f4a7c15ull ^ len;

	for (uint32_t i = 0; i < len; i++) {
		a = (a ^ k[i]) * 0x100000001b3ull;
		b = ((b + k[i]) * 0xbf58476d1ce4e5b9ull);
		b = (b << 27) | (b >> 37);
	}
	h[0] = mix64(a ^ len);
	h[1] = mix64(b);
}

int km_log_clean_map_init(struct km_clean_map *m, uint64_t bytes)
{
	uint64_t slots = bytes / KM_CLEAN_SLOT_BYTES;

	memset(m, 0, sizeof(*m));
	m->latest = -1;
	m->cap_max = CAP_MIN;
	while ((uint64_t)m->cap_max * 2 <= slots && m->cap_max < (1u << 30))
		m->cap_max *= 2;
	m->cap = CAP_MIN;
	m->slots = calloc(m->cap, KM_CLEAN_SLOT_BYTES);
	return m->slots == NULL ? -ENOMEM : 0;
}

void km_log_clean_map_free(struct km_clean_map *m)
{
	free(m->slots);
	m->slots = NULL;
}

/* The slot holding h, or the empty one where it would go. */
static uint8_t *find(uint8_t *slots, uint32_t cap, const uint64_t h[2])
{
	for (uint32_t i = (uint32_t)h[0] & (cap - 1);; i = (i + 1) & (cap - 1)) {
		uint8_t *s = slots + (size_t)i * KM_CLEAN_SLOT_BYTES;

		if (km_load_be64(s + 16) == 0 ||
		    (km_load_be64(s) == h[0] && km_load_be64(s + 8) == h[1]))
			return s;
	}
}

static int grow(struct km_clean_map *m)
{
	uint32_t cap = m->cap * 2;
	uint8_t *ns = calloc(cap, KM_CLEAN_SLOT_BYTES);

	if (ns == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->cap; i++) {
		const uint8_t *s = m->slots + (size_t)i * KM_CLEAN_SLOT_BYTES;
		uint64_t h[2] = { km_load_be64(s), km_load_be64(s + 8) };

		if (km_load_be64(s + 16) != 0)
			memcpy(find(ns, cap, h), s, KM_CLEAN_SLOT_BYTES);
	}
	free(m->slots);
	m->slots = ns;
	m->cap = cap;
	return 0;
}

int km_log_clean_map_put(struct km_clean_map *m, const uint8_t *key,
			 uint32_t len, int64_t offset)
{
	uint64_t h[2];
	uint8_t *s;
	int rc;

	hash_key(key, len, h);
	if ((uint64_t)(m->n + 1) * 100 > (uint64_t)m->cap * LOAD_PERCENT) {
		if (m->cap >= m->cap_max)
			return 1;
		if ((rc = grow(m)) < 0)
			return rc;
	}
	s = find(m->slots, m->cap, h);
	if (km_load_be64(s + 16) == 0)
		m->n++;
	km_store_be64(s, h[0]);
	km_store_be64(s + 8, h[1]);
	km_store_be64(s + 16, (uint64_t)offset + 1);
	return 0;
}

int64_t km_log_clean_map_get(const struct km_clean_map *m, const uint8_t *key,
			     uint32_t len)
{
	uint64_t h[2];
	const uint8_t *s;

	hash_key(key, len, h);
	s = find(m->slots, m->cap, h);
	return (int64_t)km_load_be64(s + 16) - 1;
}

/* ---- transactions ---------------------------------------------------- */

static int cmp_first(const void *a, const void *b)
{
	int64_t x = ((const struct km_aborted_txn *)a)->first_offset;
	int64_t y = ((const struct km_aborted_txn *)b)->first_offset;

	return (x > y) - (x < y);
}

int km_log_clean_txn_init(struct km_clean_txn *t, struct km_log *log,
			  int64_t from, int64_t upto)
{
	uint32_t cap = 0;

	memset(t, 0, sizeof(*t));
	for (uint32_t i = 0; i < log->n_segs; i++) {
		int n = km_segment_txn_read(&log->segs[i], from, upto, NULL, 0);
		struct km_aborted_txn *na;

		if (n < 0)
			return n;
		if (n == 0)
			continue;
		na = realloc(t->aborted, (cap + (uint32_t)n) * sizeof(*na));
		if (na == NULL)
			return -ENOMEM;
		t->aborted = na;
		n = km_segment_txn_read(&log->segs[i], from, upto,
					na + cap, (uint32_t)n);
		if (n < 0)
			return n;
		cap += (uint32_t)n;
	}
	t->n_aborted = cap;
	if (cap > 0)
		qsort(t->aborted, cap, sizeof(*t->aborted), cmp_first);
	return 0;
}

void km_log_clean_txn_free(struct km_clean_txn *t)
{
	free(t->aborted);
	free(t->ongoing);
	free(t->committed);
	memset(t, 0, sizeof(*t));
}

static struct km_clean_aborted *ongoing_of(struct km_clean_txn *t, int64_t pid)
{
	for (uint32_t i = 0; i < t->n_ongoing; i++)
		if (t->ongoing[i].t.producer_id == pid)
			return &t->ongoing[i];
	return NULL;
}

/* consumeAbortedTxnsUpTo: transactions begun by offset are ongoing. */
static int consume_up_to(struct km_clean_txn *t, int64_t offset)
{
	while (t->next < t->n_aborted &&
	       t->aborted[t->next].first_offset <= offset) {
		struct km_clean_aborted *a =
			ongoing_of(t, t->aborted[t->next].producer_id);

		if (a == NULL) {
			if (t->n_ongoing == t->cap_ongoing) {
				uint32_t cap = t->cap_ongoing ? t->cap_ongoing * 2 : 8;
				void *n = realloc(t->ongoing, cap * sizeof(*a));

				if (n == NULL)
					return -ENOMEM;
				t->ongoing = n;
				t->cap_ongoing = cap;
			}
			a = &t->ongoing[t->n_ongoing++];
		}
		a->t = t->aborted[t->next++];
		a->observed = -1;
	}
	return 0;
}

static bool committed_remove(struct km_clean_txn *t, int64_t pid)
{
	for (uint32_t i = 0; i < t->n_committed; i++)
		if (t->committed[i] == pid) {
			t->committed[i] = t->committed[--t->n_committed];
			return true;
		}
	return false;
}

int km_log_clean_txn_on_batch(struct km_clean_txn *t, const struct km_batch *b)
{
	int64_t pid = km_batch_producer_id(b);
	struct km_clean_aborted *a;
	int rc = consume_up_to(t, km_batch_last_offset(b));

	if (rc < 0 || !km_batch_is_transactional(b))
		return rc;
	if ((a = ongoing_of(t, pid)) != NULL) {
		a->observed = km_batch_last_offset(b);
		return 1;
	}
	for (uint32_t i = 0; i < t->n_committed; i++)
		if (t->committed[i] == pid)
			return 0;
	if (t->n_committed == t->cap_committed) {
		uint32_t cap = t->cap_committed ? t->cap_committed * 2 : 8;
		int64_t *n = realloc(t->committed, cap * sizeof(*n));

		if (n == NULL)
			return -ENOMEM;
		t->committed = n;
		t->cap_committed = cap;
	}
	t->committed[t->n_committed++] = pid;
	return 0;
}

int km_log_clean_txn_on_control(struct km_clean_txn *t,
				const struct km_batch *b, bool *keep,
				struct km_aborted_txn *index)
{
	int64_t pid = km_batch_producer_id(b);
	struct km_clean_aborted *a, found;
	struct km_ctrl c;
	int rc = consume_up_to(t, km_batch_last_offset(b));

	*keep = false;
	if (rc < 0)
		return rc;
	if (km_batch_records_count(b) == 0)
		return 1; /* emptied by an earlier clean */
	if (km_ctrl_parse(b, &c) < 0)
		return 0; /* unknown to us: kept, as any other control type */
	if (c.type == KM_CTRL_COMMIT)
		return committed_remove(t, pid) ? 0 : 1;
	if (c.type != KM_CTRL_ABORT)
		return 0; /* the barrier among them: always kept */
	if ((a = ongoing_of(t, pid)) == NULL)
		return 1;
	found = *a;
	*a = t->ongoing[--t->n_ongoing];
	if (found.observed < 0)
		return 1;
	/* Its data went in this pass: the marker and its entry stay. */
	*keep = true;
	*index = found.t;
	return 0;
}

/* ---- records ----------------------------------------------------------- */

int km_log_clean_rec_parse(const uint8_t *p, size_t len, struct km_clean_rec *r)
{
	int32_t body, v32;
	size_t at;
	int n;

	if ((n = km_varint_decode_s32(p, len, &body)) <= 0)
		return KM_EVARINT;
	if (body < 1 || (size_t)n + (size_t)body > len)
		return KM_ERECORD;
	r->size = (uint32_t)n + (uint32_t)body;
	len = r->size;
	at = (size_t)n;
	r->attributes = (int8_t)p[at++];
	if ((n = km_varint_decode_s64(p + at, len - at, &r->ts_delta)) <= 0)
		return KM_EVARINT;
	at += (size_t)n;
	r->rest = p + at;
	r->rest_len = (uint32_t)(len - at);
	if ((n = km_varint_decode_s32(p + at, len - at, &r->offset_delta)) <= 0)
		return KM_EVARINT;
	at += (size_t)n;
	if ((n = km_varint_decode_s32(p + at, len - at, &r->key_len)) <= 0)
		return KM_EVARINT;
	at += (size_t)n;
	if (r->key_len < -1 || (r->key_len > 0 && (size_t)r->key_len > len - at))
		return KM_ERECORD;
	r->key = p + at;
	at += r->key_len > 0 ? (size_t)r->key_len : 0;
	if ((n = km_varint_decode_s32(p + at, len - at, &v32)) <= 0)
		return KM_EVARINT;
	if (v32 < -1)
		return KM_ERECORD;
	r->value_len = v32;
	return (int)r->size;
}
