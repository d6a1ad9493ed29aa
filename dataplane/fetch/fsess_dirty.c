/* Per-Fetch work in proportion to the partitions that moved (issue 17).
 *
 * A KIP-227 session with the broker holds each partition's line (fetch
 * offset, PartitionMaxBytes) as the last Fetch that wrote it said; an
 * incremental Fetch writes only the lines that changed and forgets the
 * partitions not fetched this time. So the Fetch needs to look only at
 * the members whose line may have changed, and nothing more walks every
 * member per Fetch:
 *  - the dirty list holds every member that may differ from its line in
 *    the broker's session: one that joined, one an answer named (records,
 *    an error, a new high watermark), one an event touched (an error, a
 *    state change: km_fetcher_touch), one not ready to fetch at the last
 *    Fetch (backing off, its records still being appended, waiting for
 *    Metadata or offsets), and every member after a full Fetch or a
 *    session reset. A member leaves it when a Fetch finds it ready and
 *    writes its line, or finds its line already the broker's;
 *  - so a member off the list is in the broker's session, ready, at its
 *    offset: an incremental Fetch carries it without a word and its
 *    answer names it only with news (looked up in the session's index);
 *    one that leaves it out counts as an answer for it (stats.fetches,
 *    counted lazily: fs_answers);
 *  - what no event announces falls back to a walk over every member: a
 *    byte-rate cap (whose credit comes back with time) and a change of
 *    the PartitionMaxBytes every line is built at.
 * Members in Metadata, ListOffsets or waiting for the handshake are all on
 * the list, so the choice of request looks at the list only. */
#include "dataplane/fetch/fetcher_pvt.h"

#include <string.h>

/* ---- the index: members by topic and partition ---- */

uint32_t km_fsess_name_hash(const char *name)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h;
}

static uint32_t key_of(uint32_t name_hash, int32_t partition)
{
	return name_hash ^ ((uint32_t)partition * 0x9E3779B1u);
}

static void index_add(struct km_fsess *s, struct km_fetcher *f)
{
	uint32_t b;

	f->hkey = key_of(km_fsess_name_hash(f->cfg.topic), f->cfg.partition);
	b = f->hkey & (KM_FSESS_INDEX - 1);
	f->hnext = s->index[b];
	s->index[b] = f;
}

static void index_del(struct km_fsess *s, struct km_fetcher *f)
{
	struct km_fetcher **pp = &s->index[f->hkey & (KM_FSESS_INDEX - 1)];

	while (*pp != f)
		pp = &(*pp)->hnext;
	*pp = f->hnext;
	f->hnext = NULL;
}

struct km_fetcher *km_fsess_find(const struct km_fsess *s, const char *topic,
				 uint32_t name_hash, int32_t partition)
{
	uint32_t k = key_of(name_hash, partition);

	for (struct km_fetcher *f = s->index[k & (KM_FSESS_INDEX - 1)];
	     f != NULL; f = f->hnext)
		if (f->hkey == k && f->cfg.partition == partition &&
		    strcmp(f->cfg.topic, topic) == 0)
			return f;
	return NULL;
}

/* ---- topic ids ---- */

void km_fsess_topic_note(struct km_fsess *s, const uint8_t *id,
			 const char *name)
{
	for (uint32_t i = 0; i < s->n_topics; i++)
		if (memcmp(s->topics[i].id, id, KM_WIRE_UUID_BYTES) == 0)
			return;
	if (s->n_topics == KM_FSESS_TOPICS_MAX)
		return; /* km_fsess_topic_name looks among the members */
	memcpy(s->topics[s->n_topics].id, id, KM_WIRE_UUID_BYTES);
	strcpy(s->topics[s->n_topics].name, name);
	s->n_topics++;
}

const char *km_fsess_topic_name(const struct km_fsess *s, const uint8_t *id)
{
	for (uint32_t i = 0; i < s->n_topics; i++)
		if (memcmp(s->topics[i].id, id, KM_WIRE_UUID_BYTES) == 0)
			return s->topics[i].name;
	for (const struct km_fetcher *f = s->members; f != NULL; f = f->next)
		if (memcmp(f->topic_id, id, KM_WIRE_UUID_BYTES) == 0)
			return f->cfg.topic;
	return NULL;
}

/* ---- the dirty list ---- */

/* A member off the list and in the broker's session was left out, as
 * unchanged, by every incremental answer since fs_seen. */
static void fold(struct km_fsess *s, struct km_fetcher *f)
{
	if (!f->dirty && f->fs_in)
		f->stats.fetches += s->fs_answers - f->fs_seen;
	f->fs_seen = s->fs_answers;
}

void km_fsess_dirty_add(struct km_fsess *s, struct km_fetcher *f)
{
	if (f->dirty)
		return;
	fold(s, f);
	f->dirty = true;
	f->dprev = NULL;
	f->dnext = s->dirty;
	if (s->dirty != NULL)
		s->dirty->dprev = f;
	s->dirty = f;
	s->n_dirty++;
}

void km_fsess_dirty_clean(struct km_fsess *s, struct km_fetcher *f)
{
	if (!f->dirty) {
		fold(s, f);
		return;
	}
	if (f->dprev != NULL)
		f->dprev->dnext = f->dnext;
	else
		s->dirty = f->dnext;
	if (f->dnext != NULL)
		f->dnext->dprev = f->dprev;
	f->dnext = f->dprev = NULL;
	f->dirty = false;
	f->fs_seen = s->fs_answers;
	s->n_dirty--;
}

void km_fsess_dirty_all(struct km_fsess *s)
{
	for (struct km_fetcher *f = s->members; f != NULL; f = f->next)
		km_fsess_dirty_add(s, f);
}

bool km_fsess_walk_all(const struct km_fsess *s)
{
	return s->n_capped > 0 || km_throttle_on(s->throttle);
}

static bool capped(const struct km_fsess *s, const struct km_fetcher *f)
{
	return f->cfg.topic_throttle != NULL ||
	       (f->cfg.throttle != NULL && f->cfg.throttle != s->throttle);
}

void km_fsess_member_in(struct km_fsess *s, struct km_fetcher *f)
{
	f->dirty = false;
	f->fs_in = false;
	index_add(s, f);
	km_fsess_dirty_add(s, f);
	s->n_capped += capped(s, f);
}

void km_fsess_member_out(struct km_fsess *s, struct km_fetcher *f)
{
	km_fsess_dirty_add(s, f); /* its count folded */
	km_fsess_dirty_clean(s, f);
	index_del(s, f);
	s->n_capped -= capped(s, f);
}

void km_fsess_dirty_reset(struct km_fsess *s)
{
	s->dirty = NULL;
	s->n_dirty = 0;
	s->n_capped = 0;
	s->fs_answers = 0;
	s->fs_line_max = 0;
	s->n_topics = 0;
	s->tail = NULL;
	memset(s->index, 0, sizeof(s->index));
}

const struct km_fetcher_stats *
km_fetcher_get_stats(const struct km_fetcher *cf)
{
	/* Only the owner's thread reads or moves a fetcher; the lazy count
	 * is all that changes. */
	struct km_fetcher *f = (struct km_fetcher *)cf;

	if (f->sess != NULL)
		fold(f->sess, f);
	return &f->stats;
}
