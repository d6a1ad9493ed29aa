/* The source each mirrored partition's log holds (issue 21), on the
 * control thread: kmirror.source loaded at start (control/cluster_id.h),
 * handed to every fetcher the partition gets (which compares it with each
 * Metadata answer, dataplane/fetch/fetcher.h), filled in with what a
 * fetcher learns, never replaced silently; and what `start` and `failback`
 * do with it: a start that resumes a FAILED partition where its log ends
 * keeps it (and refuses a source that is another cluster), one that cuts
 * the log (--from-start, --truncate-to, a barrier) takes the source's ids
 * anew, as the operator asked. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "common/log.h"
#include "common/uuid.h"
#include "control/cluster_id.h"
#include "control/daemon_pvt.h"
#include "iouring_log/log.h"

static bool id_given(const uint8_t id[16])
{
	static const uint8_t zero[16];

	return memcmp(id, zero, sizeof(zero)) != 0;
}

static int save(const struct km_daemon *d, uint32_t i)
{
	char dir[4096];

	km_daemon_part_dir(d, &d->table.parts[i], dir, sizeof(dir));
	return km_cluster_id_source_save(dir, &d->sources[i]);
}

int km_daemon_load_sources(struct km_daemon *d)
{
	char dir[4096];
	uint32_t other = 0;
	int rc;

	d->sources = calloc(d->table.cap, sizeof(*d->sources));
	if (d->sources == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < d->table.n; i++) {
		const char *id = d->sources[i].cluster_id;

		km_daemon_part_dir(d, &d->table.parts[i], dir, sizeof(dir));
		if ((rc = km_cluster_id_source_load(dir, &d->sources[i])) < 0) {
			KM_ERROR("daemon", "%s/%s: %s", dir,
				 KM_CLUSTER_ID_SOURCE_FILE, km_strerror(rc));
			return rc;
		}
		other += d->mirrored[i] &&
			 d->mstates[i].state == KM_MSTATE_MIRRORING &&
			 d->mstates[i].source[0] == '\0' && id[0] != '\0' &&
			 d->source_cluster_id[0] != '\0' &&
			 strcmp(id, d->source_cluster_id) != 0;
	}
	if (other > 0)
		KM_WARN("daemon", "the source reports cluster id %s, but %u "
			"partitions' logs mirror another cluster: they will "
			"not mirror from it (see their status reason)",
			d->source_cluster_id, other);
	return 0;
}

static bool same_topic(const struct km_daemon *d, uint32_t i, uint32_t j)
{
	return strcmp(d->table.parts[i].topic, d->table.parts[j].topic) == 0;
}

/* The id of topic table.parts[first].topic for its partitions with no
 * source topic id (a local topic, a source below Metadata v10, or not
 * learned yet): Kafka has one id per topic, so another partition's source
 * id, else the id a partition.metadata of the topic already names, else a
 * new one. */
static int topic_id_of(const struct km_daemon *d, uint32_t first,
		       uint8_t out[16])
{
	char dir[4096], text[KM_UUID_CHARS + 1];
	int rc;

	for (uint32_t j = first; j < d->table.n; j++)
		if (same_topic(d, first, j) && id_given(d->sources[j].topic_id)) {
			memcpy(out, d->sources[j].topic_id, 16);
			return 0;
		}
	for (uint32_t j = first; j < d->table.n; j++) {
		if (!same_topic(d, first, j))
			continue;
		km_daemon_part_dir(d, &d->table.parts[j], dir, sizeof(dir));
		if (km_log_metadata_read(dir, out) == 1)
			return 0;
	}
	if ((rc = km_uuid_random(text)) < 0)
		return rc;
	return km_uuid_decode(text, out);
}

int km_daemon_topic_ids(const struct km_daemon *d, uint8_t (*ids)[16])
{
	uint8_t topic[16];
	uint32_t j;
	int rc;

	for (uint32_t i = 0; i < d->table.n; i++) {
		for (j = 0; j < i && !same_topic(d, i, j); j++)
			;
		if (j < i) /* done with the topic's first partition */
			continue;
		if ((rc = topic_id_of(d, i, topic)) < 0)
			return rc;
		for (j = i; j < d->table.n; j++)
			if (same_topic(d, i, j))
				memcpy(ids[j], id_given(d->sources[j].topic_id)
						       ? d->sources[j].topic_id
						       : topic, 16);
	}
	return 0;
}

void km_daemon_source_fill(const struct km_daemon *d, uint32_t i,
			   struct km_fetcher_config *fc)
{
	struct km_cluster_id_source *s = &d->sources[i];
	const struct km_part *p = &d->table.parts[i];
	int rc;

	/* A first fetch from the configured source: the id startup discovery
	 * saw is the one the log will hold, recorded before any append. */
	if (s->cluster_id[0] == '\0' && d->mstates[i].source[0] == '\0' &&
	    d->source_cluster_id[0] != '\0') {
		snprintf(s->cluster_id, sizeof(s->cluster_id), "%s",
			 d->source_cluster_id);
		if ((rc = save(d, i)) < 0)
			KM_WARN("daemon", "partition %s-%d: %s: %s", p->topic,
				p->partition, KM_CLUSTER_ID_SOURCE_FILE,
				km_strerror(rc));
	}
	snprintf(fc->source_cluster_id, sizeof(fc->source_cluster_id), "%s",
		 s->cluster_id);
	memcpy(fc->source_topic_id, s->topic_id, sizeof(fc->source_topic_id));
}

/* The file holds both ids: learned() finds nothing to add. */
static bool known(const struct km_cluster_id_source *s)
{
	return s->cluster_id[0] != '\0' && id_given(s->topic_id);
}

/* What the fetcher of partition i learned that the file lacks. */
static bool learned(struct km_cluster_id_source *s,
		    const struct km_part_source_view *v)
{
	bool changed = false;

	if (s->cluster_id[0] == '\0' && v->cluster_id[0] != '\0') {
		snprintf(s->cluster_id, sizeof(s->cluster_id), "%s",
			 v->cluster_id);
		changed = true;
	}
	if (!id_given(s->topic_id) && id_given(v->topic_id)) {
		memcpy(s->topic_id, v->topic_id, sizeof(s->topic_id));
		changed = true;
	}
	return changed;
}

void km_daemon_watch_sources(struct km_daemon *d)
{
	struct km_part_source_view v;
	char tid[KM_UUID_CHARS + 1] = "-";

	for (uint32_t i = 0; i < d->table.n; i++) {
		const struct km_part *p = &d->table.parts[i];
		int rc;

		/* Both known: nothing a fetcher learns changes the file, and
		 * 10,000 partitions' 600-byte views copied every second cost
		 * more than the rest of the control loop (issue 17). */
		if (!d->mirrored[i] || known(&d->sources[i]) ||
		    !km_part_source_read(&p->stats.source, &v) ||
		    !learned(&d->sources[i], &v))
			continue;
		if (id_given(d->sources[i].topic_id))
			km_uuid_encode(d->sources[i].topic_id, tid);
		if ((rc = save(d, i)) < 0)
			KM_ERROR("daemon", "partition %s-%d: cannot record its "
				 "source in %s: %s", p->topic, p->partition,
				 KM_CLUSTER_ID_SOURCE_FILE, km_strerror(rc));
		else
			KM_INFO("daemon", "partition %s-%d: mirrors source "
				"cluster %s, topic id %s", p->topic,
				p->partition, d->sources[i].cluster_id, tid);
	}
}

int km_daemon_source_keep(const struct km_daemon *d, uint32_t i,
			  const struct km_config_addr *where,
			  const char *cluster_id, char *err, size_t len)
{
	const struct km_part *p = &d->table.parts[i];
	const char *had = d->sources[i].cluster_id;

	if (had[0] == '\0' || cluster_id[0] == '\0' ||
	    strcmp(had, cluster_id) == 0)
		return 0;
	snprintf(err, len, "%.200s-%d: the log mirrors source cluster %.64s, "
		 "but the source at %.256s:%u is cluster %.64s; give "
		 "--from-start to mirror it from scratch (or --truncate-to "
		 "OFFSET if it holds the same records up to OFFSET)",
		 p->topic, p->partition, had, where->host, where->port,
		 cluster_id);
	return KM_ESOURCEID;
}

int km_daemon_source_accept(struct km_daemon *d, uint32_t i,
			    const char *cluster_id)
{
	struct km_cluster_id_source *s = &d->sources[i];
	const struct km_part *p = &d->table.parts[i];

	if (s->cluster_id[0] != '\0' && strcmp(s->cluster_id, cluster_id) != 0)
		KM_WARN("daemon", "partition %s-%d: its log was cut for a new "
			"source: cluster %s (was %s)", p->topic, p->partition,
			cluster_id[0] ? cluster_id : "(learned at the first "
			"fetch)", s->cluster_id);
	memset(s, 0, sizeof(*s));
	snprintf(s->cluster_id, sizeof(s->cluster_id), "%s", cluster_id);
	return save(d, i);
}

void km_daemon_source_status(const struct km_daemon *d, uint32_t i,
			     const char *state, json_t *row)
{
	struct km_part_source_view v;

	if (!d->mirrored[i] || json_object_get(row, "reason") != NULL ||
	    (strcmp(state, "CONNECTING") != 0 && strcmp(state, "MIRRORING") != 0))
		return;
	if (km_part_source_read(&d->table.parts[i].stats.source, &v) &&
	    v.note[0] != '\0')
		json_object_set_new(row, "reason", json_string(v.note));
}
