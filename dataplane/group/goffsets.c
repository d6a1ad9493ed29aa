/* Committed offsets table and its records (dataplane/group/goffsets.h). A chained
 * hash table keyed by (group, topic, partition); it doubles as it fills. */
#include "dataplane/group/goffsets.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/errors.h"
#include "common/km_limits.h"
#include "common/log.h"
#include "iouring_log/log.h"
#include "kafka/batch.h"
#include "kafka/control.h"
#include "kafka/records.h"

struct entry {
	struct entry *next;
	uint32_t hash;
	int32_t partition;
	char *group;		/* names[]: group \0 topic \0 */
	char *topic;
	struct km_goffset o;
	uint16_t md_cap;	/* o.metadata holds md_cap bytes + NUL */
	char names[];
};

/* A record of an open transaction (TxnOffsetCommit), kept apart until its
 * producer's COMMIT or ABORT marker; in log order. */
struct pend {
	struct pend *next;
	int64_t pid;
	int64_t log_offset;
	int32_t partition;
	bool del;		/* a tombstone */
	struct km_gorec_value v; /* metadata in names[] */
	char *group;		/* names[]: group \0 topic \0 metadata */
	char *topic;
	char names[];
};

struct km_goffsets {
	struct entry **slots;
	uint32_t n_slots;	/* a power of two */
	uint32_t count;
	struct pend *pend;	/* oldest first */
	struct pend **pend_tail;
	uint32_t n_pend;
};

/* Batches the load reads at a time. */

static uint32_t key_hash(const char *group, const char *topic, int32_t part)
{
	uint32_t h = km_crc32c_update(0, group, strlen(group) + 1);

	h = km_crc32c_update(h, topic, strlen(topic) + 1);
	return km_crc32c_update(h, &part, sizeof(part));
}

int km_goffsets_create(struct km_goffsets **out)
{
	struct km_goffsets *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return -ENOMEM;
	t->n_slots = 64;
	t->pend_tail = &t->pend;
	t->slots = calloc(t->n_slots, sizeof(*t->slots));
	if (t->slots == NULL) {
		free(t);
		return -ENOMEM;
	}
	*out = t;
	return 0;
}

static void entry_free(struct entry *e)
{
	free(e->o.metadata);
	free(e);
}

void km_goffsets_destroy(struct km_goffsets *t)
{
	if (t == NULL)
		return;
	for (uint32_t i = 0; i < t->n_slots; i++)
		for (struct entry *e = t->slots[i], *n; e; e = n) {
			n = e->next;
			entry_free(e);
		}
	for (struct pend *p = t->pend, *n; p; p = n) {
		n = p->next;
		free(p);
	}
	free(t->slots);
	free(t);
}

static struct entry **find(const struct km_goffsets *t, const char *group,
			   const char *topic, int32_t part, uint32_t hash)
{
	struct entry **pe = &t->slots[hash & (t->n_slots - 1)];

	for (; *pe; pe = &(*pe)->next)
		if ((*pe)->hash == hash && (*pe)->partition == part &&
		    strcmp((*pe)->group, group) == 0 &&
		    strcmp((*pe)->topic, topic) == 0)
			return pe;
	return pe;
}

/* Double the slots once the table holds as many entries. */
static void grow(struct km_goffsets *t)
{
	uint32_t n = t->n_slots * 2;
	struct entry **s = calloc(n, sizeof(*s));

	if (s == NULL || t->count < t->n_slots) {
		free(s);
		return; /* a longer chain is slower, not wrong */
	}
	for (uint32_t i = 0; i < t->n_slots; i++)
		for (struct entry *e = t->slots[i], *next; e; e = next) {
			next = e->next;
			e->next = s[e->hash & (n - 1)];
			s[e->hash & (n - 1)] = e;
		}
	free(t->slots);
	t->slots = s;
	t->n_slots = n;
}

/* A key is allocated once, when first committed (the table grows with the
 * keys, as the log does); later commits of it reuse its memory. */
static struct entry *entry_new(const char *group, const char *topic,
			       int32_t part, uint32_t hash)
{
	size_t gl = strlen(group), tl = strlen(topic);
	struct entry *e = calloc(1, sizeof(*e) + gl + tl + 2);

	if (e == NULL)
		return NULL;
	e->group = e->names;
	memcpy(e->group, group, gl + 1);
	e->topic = e->group + gl + 1;
	memcpy(e->topic, topic, tl + 1);
	e->partition = part;
	e->hash = hash;
	return e;
}

/* A key's commits mostly repeat the size of its metadata (usually empty):
 * the buffer is kept and only grows. */
static int set_value(struct entry *e, const struct km_gorec_value *v)
{
	if (e->o.metadata == NULL || v->metadata_len > e->md_cap) {
		char *md = realloc(e->o.metadata, (size_t)v->metadata_len + 1);

		if (md == NULL)
			return -ENOMEM;
		e->o.metadata = md;
		e->md_cap = v->metadata_len;
	}
	if (v->metadata_len)
		memmove(e->o.metadata, v->metadata, v->metadata_len);
	e->o.metadata[v->metadata_len] = '\0';
	e->o.metadata_len = v->metadata_len;
	e->o.offset = v->offset;
	e->o.leader_epoch = v->leader_epoch;
	e->o.commit_ts = v->commit_ts;
	return 0;
}

static int put_at(struct km_goffsets *t, const char *group, const char *topic,
		  int32_t partition, const struct km_gorec_value *v,
		  int64_t log_offset);

int km_goffsets_put(struct km_goffsets *t, const char *group,
		    const char *topic, int32_t partition,
		    const struct km_gorec_value *v)
{
	return put_at(t, group, topic, partition, v, -1);
}

static int put_at(struct km_goffsets *t, const char *group, const char *topic,
		  int32_t partition, const struct km_gorec_value *v,
		  int64_t log_offset)
{
	uint32_t hash = key_hash(group, topic, partition);
	struct entry **pe = find(t, group, topic, partition, hash), *e = *pe;

	if (strlen(group) > KM_GOREC_NAME_MAX || strlen(topic) > KM_GOREC_NAME_MAX ||
	    (v && v->metadata_len > KM_GOREC_METADATA_MAX))
		return KM_EGOREC;
	if (v == NULL) {
		if (e != NULL) {
			*pe = e->next;
			entry_free(e);
			t->count--;
		}
		return 0;
	}
	if (e == NULL) {
		if ((e = entry_new(group, topic, partition, hash)) == NULL)
			return -ENOMEM;
		if (set_value(e, v) < 0) {
			entry_free(e);
			return -ENOMEM;
		}
		e->o.log_offset = log_offset;
		*pe = e;
		t->count++;
		grow(t);
		return 0;
	}
	e->o.log_offset = log_offset;
	return set_value(e, v);
}

const struct km_goffset *km_goffsets_get(const struct km_goffsets *t,
					 const char *group, const char *topic,
					 int32_t partition)
{
	uint32_t hash = key_hash(group, topic, partition);
	struct entry *e = *find(t, group, topic, partition, hash);

	return e ? &e->o : NULL;
}

uint32_t km_goffsets_each(const struct km_goffsets *t, const char *group,
			  km_goffsets_fn fn, void *arg)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < t->n_slots; i++)
		for (const struct entry *e = t->slots[i]; e; e = e->next) {
			if (group != NULL && strcmp(group, e->group) != 0)
				continue;
			fn(arg, e->group, e->topic, e->partition, &e->o);
			n++;
		}
	return n;
}

uint32_t km_goffsets_count(const struct km_goffsets *t)
{
	return t->count;
}

/* ---- records --------------------------------------------------------------- */

/* ---- pending transactional commits ----------------------------------------- */

static bool pend_is(const struct pend *p, const char *group,
		    const char *topic, int32_t partition)
{
	return p->partition == partition && strcmp(p->group, group) == 0 &&
	       strcmp(p->topic, topic) == 0;
}

/* A tombstone deletes the key's pending commits too (Kafka's
 * OffsetMetadataManager.replay: an offset deleted while a transaction
 * holds one is not brought back by its COMMIT). */
static void pend_drop_key(struct km_goffsets *t, const char *group,
			  const char *topic, int32_t partition)
{
	struct pend **pp = &t->pend;

	while (*pp != NULL) {
		struct pend *p = *pp;

		if (!pend_is(p, group, topic, partition)) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		free(p);
		t->n_pend--;
	}
	for (t->pend_tail = &t->pend; *t->pend_tail;
	     t->pend_tail = &(*t->pend_tail)->next)
		;
}

static int pend_add(struct km_goffsets *t, int64_t pid, int64_t log_offset,
		    const struct km_gorec_key *k,
		    const struct km_gorec_value *v)
{
	size_t gl = strlen(k->group), tl = strlen(k->topic);
	size_t ml = v ? v->metadata_len : 0;
	struct pend *p = calloc(1, sizeof(*p) + gl + tl + ml + 3);

	if (p == NULL)
		return -ENOMEM;
	p->pid = pid;
	p->log_offset = log_offset;
	p->partition = k->partition;
	p->group = p->names;
	memcpy(p->group, k->group, gl + 1);
	p->topic = p->group + gl + 1;
	memcpy(p->topic, k->topic, tl + 1);
	p->del = v == NULL;
	if (v != NULL) {
		p->v = *v;
		p->v.metadata = p->topic + tl + 1;
		memcpy(p->topic + tl + 1, v->metadata, ml);
	}
	*t->pend_tail = p;
	t->pend_tail = &p->next;
	t->n_pend++;
	return 0;
}

int km_goffsets_end_txn(struct km_goffsets *t, int64_t producer_id,
			bool commit)
{
	struct pend **pp = &t->pend;
	int n = 0, rc = 0;

	while (*pp != NULL) {
		struct pend *p = *pp;
		const struct km_goffset *o;

		if (p->pid != producer_id) {
			pp = &p->next;
			continue;
		}
		o = km_goffsets_get(t, p->group, p->topic, p->partition);
		/* Kafka's replayEndTransactionMarker: a commit stored after
		 * the transaction's record in the log stays. */
		if (commit && (o == NULL || o->log_offset < p->log_offset) &&
		    rc == 0)
			rc = put_at(t, p->group, p->topic, p->partition,
				    p->del ? NULL : &p->v, p->log_offset);
		*pp = p->next;
		free(p);
		t->n_pend--;
		n++;
	}
	for (t->pend_tail = &t->pend; *t->pend_tail;
	     t->pend_tail = &(*t->pend_tail)->next)
		;
	return rc < 0 ? rc : n;
}

bool km_goffsets_pending(const struct km_goffsets *t, const char *group,
			 const char *topic, int32_t partition)
{
	for (const struct pend *p = t->pend; p != NULL; p = p->next)
		if (pend_is(p, group, topic, partition))
			return true;
	return false;
}

uint32_t km_goffsets_pending_count(const struct km_goffsets *t)
{
	return t->n_pend;
}

/* ---- records --------------------------------------------------------------- */

static int apply_record(struct km_goffsets *t, const struct km_batch *b,
			const struct km_record *r)
{
	uint8_t kbuf[KM_GOREC_KEY_MAX], vbuf[KM_GOREC_VALUE_MAX];
	bool txn = km_batch_is_transactional(b);
	struct km_gorec_key k;
	struct km_gorec_value v;
	int rc;

	if (r->key_len < 0 || (size_t)r->key_len > sizeof(kbuf) ||
	    (r->value_len >= 0 && (size_t)r->value_len > sizeof(vbuf)))
		return KM_EGOREC;
	km_chain_copy(b->chain, r->key, kbuf, (size_t)r->key_len);
	if ((rc = km_gorec_key_decode(kbuf, (size_t)r->key_len, &k)) < 0)
		return rc;
	if (k.version == 2)
		return 0; /* group metadata: membership is not kept */
	if (r->value_len >= 0) {
		km_chain_copy(b->chain, r->value, vbuf, (size_t)r->value_len);
		rc = km_gorec_value_decode(vbuf, (size_t)r->value_len, &v);
		if (rc < 0)
			return rc;
	}
	if (txn)
		return pend_add(t, km_batch_producer_id(b), r->offset, &k,
				r->value_len < 0 ? NULL : &v);
	if (r->value_len < 0)
		pend_drop_key(t, k.group, k.topic, k.partition);
	return put_at(t, k.group, k.topic, k.partition,
		      r->value_len < 0 ? NULL : &v, r->offset);
}

/* A COMMIT or ABORT marker ends its producer's pending commits; other
 * control records (the barrier) change nothing here. */
static int apply_control(struct km_goffsets *t, const struct km_batch *b)
{
	struct km_ctrl c;
	int rc;

	if (!km_batch_is_transactional(b))
		return 0;
	if ((rc = km_ctrl_parse(b, &c)) < 0)
		return rc;
	if (c.type != KM_CTRL_COMMIT && c.type != KM_CTRL_ABORT)
		return 0;
	return km_goffsets_end_txn(t, km_batch_producer_id(b),
				   c.type == KM_CTRL_COMMIT);
}

int km_goffsets_apply_batch(struct km_goffsets *t, const struct km_batch *b)
{
	struct km_records_iter it;
	struct km_record r;
	int n = 0, rc;

	if (km_batch_is_control(b))
		return apply_control(t, b);
	if ((rc = km_records_begin(&it, b)) < 0)
		return rc;
	while ((rc = km_records_next(&it, &r)) > 0) {
		if ((rc = apply_record(t, b, &r)) < 0)
			return rc;
		n++;
	}
	return rc < 0 ? rc : n;
}

static int replay_batch(void *arg, const struct km_batch *b)
{
	return km_goffsets_apply_batch(arg, b);
}

int km_goffsets_load(struct km_goffsets *t, struct km_log *log)
{
	return km_log_replay(log, "groups", replay_batch, t);
}

/* A record's key and value as km_gorec encodes them (a name over
 * KM_GOREC_NAME_MAX counts as that much: encoding refuses it anyway). */
static size_t key_bytes(const struct km_goffsets_commit *c)
{
	return 2 + 2 + strnlen(c->group, KM_GOREC_NAME_MAX) + 2 +
	       strnlen(c->topic, KM_GOREC_NAME_MAX) + 4;
}

static size_t value_bytes(const struct km_goffsets_commit *c)
{
	return c->value ? 2 + 8 + 4 + 2 + (size_t)c->value->metadata_len + 8 : 0;
}

/* 61 B batch header; per record at most 5 B for each of its 6 varints,
 * attributes, key, value. */
#define BATCH_HEADER_BYTES 61u
#define RECORD_OVERHEAD_BYTES 31u

size_t km_goffsets_batch_bytes(const struct km_goffsets_commit *c, uint32_t n)
{
	size_t sz = BATCH_HEADER_BYTES;

	for (uint32_t i = 0; i < n; i++)
		sz += RECORD_OVERHEAD_BYTES + key_bytes(&c[i]) + value_bytes(&c[i]);
	return sz;
}

size_t km_goffsets_build_size(const struct km_goffsets_commit *c, uint32_t n)
{
	size_t kv = 0;

	for (uint32_t i = 0; i < n; i++)
		kv += key_bytes(&c[i]) + value_bytes(&c[i]);
	return km_goffsets_batch_bytes(c, n) + kv +
	       (size_t)n * sizeof(struct km_record_spec) +
	       _Alignof(struct km_record_spec);
}

/* Encode c's key and value just below buf[*low] and describe them in
 * *spec. @return 0, KM_ENOSPACE (they do not fit), KM_EGOREC. */
static int place_record(uint8_t *buf, size_t *low,
			const struct km_goffsets_commit *c, int64_t now_ms,
			struct km_record_spec *spec)
{
	uint8_t k[KM_GOREC_KEY_MAX], v[KM_GOREC_VALUE_MAX];
	int kl = km_gorec_key_encode(k, sizeof(k), c->group, c->topic,
				     c->partition);
	int vl = c->value ? km_gorec_value_encode(v, sizeof(v), c->value) : -1;

	if (kl < 0 || (c->value && vl < 0))
		return kl < 0 ? kl : vl;
	if (*low < (size_t)kl + (vl > 0 ? (size_t)vl : 0))
		return KM_ENOSPACE;
	if (vl > 0) {
		*low -= (size_t)vl;
		memcpy(buf + *low, v, (size_t)vl);
	}
	*low -= (size_t)kl;
	memcpy(buf + *low, k, (size_t)kl);
	*spec = (struct km_record_spec){ buf + *low, kl,
					 c->value ? buf + *low + kl : NULL, vl,
					 now_ms, NULL, 0 };
	return 0;
}

/* No allocation: the record specs and the encoded keys and values are
 * staged at the end of buf (the room km_goffsets_build_size counts), and
 * km_records_build writes the batch from the start, below everything it
 * reads. */
static int build_spec(void *buf, size_t cap, const struct km_goffsets_commit *c,
		      uint32_t n, int64_t now_ms,
		      const struct km_batch_spec *spec);

int km_goffsets_build(void *buf, size_t cap, const struct km_goffsets_commit *c,
		      uint32_t n, int64_t now_ms)
{
	struct km_batch_spec spec = { 0, -1, 0, -1, -1, -1 };

	return build_spec(buf, cap, c, n, now_ms, &spec);
}

/* As Kafka's coordinator writes a transactional offset commit
 * (MemoryRecords.withTransactionalRecords): the producer's id and epoch,
 * no sequence (the coordinator's own write). */
int km_goffsets_build_txn(void *buf, size_t cap,
			  const struct km_goffsets_commit *c, uint32_t n,
			  int64_t now_ms, int64_t producer_id,
			  int16_t producer_epoch)
{
	struct km_batch_spec spec = { 0, -1, KM_BATCH_ATTR_TRANSACTIONAL,
				      producer_id, producer_epoch, -1 };

	return build_spec(buf, cap, c, n, now_ms, &spec);
}

static int build_spec(void *buf, size_t cap, const struct km_goffsets_commit *c,
		      uint32_t n, int64_t now_ms,
		      const struct km_batch_spec *spec)
{
	uint8_t *b = buf;
	size_t align = _Alignof(struct km_record_spec);
	size_t specs = (size_t)n * sizeof(struct km_record_spec);
	struct km_record_spec *recs;
	size_t low;
	int rc = 0;

	if (specs + align > cap)
		return KM_ENOSPACE;
	recs = (struct km_record_spec *)(((uintptr_t)b + cap - specs) &
					 ~(uintptr_t)(align - 1));
	low = (size_t)((uint8_t *)recs - b);
	/* From the last record down, so each lands below the one after it. */
	for (uint32_t i = n; rc == 0 && i-- > 0;)
		rc = place_record(b, &low, &c[i], now_ms, &recs[i]);
	if (rc < 0)
		return rc;
	return km_records_build(buf, low, spec, recs, (int32_t)n);
}

struct collect {
	struct km_goffsets_commit *c;
	struct km_gorec_value *v;
	uint32_t n;
};

static void collect_one(void *arg, const char *group, const char *topic,
			int32_t partition, const struct km_goffset *o)
{
	struct collect *x = arg;

	x->v[x->n] = (struct km_gorec_value){ o->offset, o->leader_epoch,
					      o->commit_ts, o->metadata,
					      o->metadata_len };
	x->c[x->n] = (struct km_goffsets_commit){ group, topic, partition,
						  &x->v[x->n] };
	x->n++;
}

int km_goffsets_build_all(const struct km_goffsets *t, uint32_t max_records,
			  int64_t now_ms, uint8_t **out, size_t *out_len)
{
	uint32_t n = t->count ? t->count : 1;
	struct collect x = { calloc(n, sizeof(*x.c)), calloc(n, sizeof(*x.v)), 0 };
	size_t cap = km_goffsets_build_size(x.c, 0) * (n / max_records + 1);
	uint8_t *buf = NULL;
	size_t len = 0;
	int batches = 0, rc = x.c && x.v ? 0 : -ENOMEM;

	if (rc == 0) {
		km_goffsets_each(t, NULL, collect_one, &x);
		cap += km_goffsets_build_size(x.c, x.n);
		rc = (buf = malloc(cap)) ? 0 : -ENOMEM;
	}
	for (uint32_t i = 0; rc == 0 && i < x.n; i += max_records) {
		uint32_t k = x.n - i < max_records ? x.n - i : max_records;

		rc = km_goffsets_build(buf + len, cap - len, x.c + i, k, now_ms);
		if (rc > 0) {
			len += (size_t)rc;
			batches++;
			rc = 0;
		}
	}
	free(x.c);
	free(x.v);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	*out = buf;
	*out_len = len;
	return batches;
}
