/* A partition's role across a restart: what its log holds decides, not
 * which list names it now.
 *
 * The lists (`topics`, `local.topics`) create partitions; only the state
 * machine changes what a partition is: `stop` (R4: the barrier, then
 * writable), `start`/`failback` (R5: cut to a shared point, then
 * mirroring). A restart with a topic moved between the lists is therefore
 * not a role change, and must never make a mirror writable without its
 * barrier (a local producer could collide with a mirrored one), nor mirror
 * source data on top of local writes. The role is persisted in
 * kmirror.state (mstate.h: role=mirror|local), written for every
 * partition the first time this version opens it.
 *
 * What each combination means (log role down, list now across):
 *
 *                      | topics         | local.topics      | neither
 *  --------------------+----------------+-------------------+------------------
 *  mirror, not stopped | mirrors        | FAILED: refuses   | FAILED: refuses
 *                      |                | writes until      | writes until
 *                      |                | `kmirrorctl stop` | `stop`, not fetched
 *  mirror, failback    | mirrors from the failback source whatever the lists
 *  (source=HOST:PORT)  | say: a verb set it, and `stop` ends it
 *  STOPPED / STOPPING  | writable (STOPPING first finishes its stop);
 *                      | mirrors again only after `start` (R5)
 *  local               | writable, not  | writable          | writable (a warning)
 *                      | mirrored until |                   |
 *                      | `start` (R5)   |                   |
 *  no kmirror.state    | mirrors (role  | writable (role    | read-only, not
 *  (before roles)      | recorded)      | recorded)         | fetched (a warning)
 *
 * FAILED here is the in-memory state only, never written: the partition's
 * own state is unchanged on disk, so putting the topic back where it was
 * and restarting resumes it as before. It is the state whose verbs fit:
 * `stop` fails it over (the barrier names the source cluster id the role
 * record kept), `start` mirrors it again, and the front-end refuses
 * Produce as for any mirror ("writes are refused until it is stopped").
 * Why not refuse to start: after a failover this host may be serving
 * production writes on other partitions; one misplaced topic should cost
 * that topic, with its reason in the log and in `kmirrorctl status`, not
 * the host.
 */
#include <stdio.h>
#include <string.h>

#include "common/errors.h"
#include "common/log.h"
#include "control/daemon_pvt.h"
#include "control/mstate.h"

/* Where the config lists partition i now (daemon_parts.c's plan: listed
 * mirrored, listed local, or found only in data.dir). */
enum listed { LISTED_TOPICS, LISTED_LOCAL, LISTED_NEITHER };

static enum listed listed_in(const struct km_daemon *d, uint32_t i)
{
	if (d->mirrored[i])
		return LISTED_TOPICS;
	return km_part_get_mode(&d->table.parts[i]) == KM_PART_WRITABLE
		       ? LISTED_LOCAL
		       : LISTED_NEITHER;
}

static void set_role(struct km_daemon *d, uint32_t i, bool mirror,
		     enum km_part_mode mode)
{
	d->mirrored[i] = mirror;
	atomic_store_explicit(&d->table.parts[i].mode, mode,
			      memory_order_relaxed);
}

/* A mirror that is not stopped, its topic no longer in `topics`. The
 * reason is what status shows; the status row already names the
 * partition. */
static void hold_mirror(struct km_daemon *d, uint32_t i, enum listed l)
{
	struct km_mstate_rec *ms = &d->mstates[i];
	const struct km_part *p = &d->table.parts[i];

	set_role(d, i, true, KM_PART_MIRROR);
	snprintf(ms->failed_reason, sizeof(ms->failed_reason),
		 "a mirror (%s, no barrier) but its topic is in %s: not "
		 "mirrored, writes refused; `kmirrorctl stop %.120s:%d` fails "
		 "it over (barrier, then writable), or list it in topics again",
		 km_mstate_name(ms->state),
		 l == LISTED_LOCAL ? "local.topics" : "neither topics nor local.topics",
		 p->topic, p->partition);
	ms->state = KM_MSTATE_FAILED;
	KM_WARN("daemon", "partition %s-%d: %s", p->topic, p->partition,
		ms->failed_reason);
}

static void settle_mirror(struct km_daemon *d, uint32_t i, enum listed l)
{
	struct km_mstate_rec *ms = &d->mstates[i];
	const struct km_part *p = &d->table.parts[i];

	if (ms->state == KM_MSTATE_STOPPED) {
		if (l == LISTED_NEITHER)
			KM_WARN("daemon", "partition %s-%d: in neither topics nor "
				"local.topics; stopped (barrier at %lld), so it "
				"stays writable", p->topic, p->partition,
				(long long)ms->last_mirrored_offset);
		return; /* km_daemon_resume_stops opens it for writes */
	}
	if (ms->state == KM_MSTATE_STOPPING) {
		set_role(d, i, true, KM_PART_MIRROR); /* the stop finishes */
		return;
	}
	if (ms->source[0] != '\0') {
		if (l != LISTED_TOPICS)
			KM_INFO("daemon", "partition %s-%d: mirrors from %s "
				"(failback) whatever topics and local.topics say",
				p->topic, p->partition, ms->source);
		set_role(d, i, true, KM_PART_MIRROR);
		return;
	}
	if (l == LISTED_TOPICS)
		return;
	hold_mirror(d, i, l);
}

/* A local.topics name whose partitions CreatePartitions added to. */
static bool local_name(const struct km_daemon *d, const char *topic)
{
	for (uint32_t t = 0; t < d->cfg->local_topics_count; t++)
		if (strcmp(d->cfg->local_topics[t], topic) == 0)
			return true;
	return false;
}

static void settle_local(struct km_daemon *d, uint32_t i, enum listed l)
{
	const struct km_part *p = &d->table.parts[i];

	set_role(d, i, false, KM_PART_WRITABLE);
	if (l == LISTED_TOPICS)
		KM_WARN("daemon", "partition %s-%d: its log holds local writes "
			"(created from local.topics) but %s is in topics: it "
			"stays writable and is not mirrored; `kmirrorctl start "
			"%s:%d` mirrors it (R5: cut to the source's barrier, or "
			"--truncate-to/--from-start)", p->topic, p->partition,
			p->topic, p->topic, p->partition);
	else if (l == LISTED_NEITHER && !km_daemon_created(d, p) &&
		 !local_name(d, p->topic))
		KM_WARN("daemon", "partition %s-%d: in neither topics nor "
			"local.topics; it holds local writes and stays writable "
			"(remove %s/%s-%d to drop it)", p->topic, p->partition,
			d->cfg->data_dir, p->topic, p->partition);
}

void km_daemon_settle_role(struct km_daemon *d, uint32_t i)
{
	const struct km_part *p = &d->table.parts[i];
	enum listed l = listed_in(d, i);

	switch (d->mstates[i].role) {
	case KM_MSTATE_ROLE_MIRROR:
		settle_mirror(d, i, l);
		break;
	case KM_MSTATE_ROLE_LOCAL:
		settle_local(d, i, l);
		break;
	case KM_MSTATE_ROLE_NONE:
		/* Nothing says who wrote it: neither fetch into it nor
		 * take writes on a guess. */
		if (l == LISTED_NEITHER)
			KM_WARN("daemon", "partition %s-%d: data in %s but in "
				"neither topics nor local.topics, and no %s "
				"says who wrote it: served read-only and not "
				"mirrored (Produce is refused); list %s in "
				"topics or local.topics to say which it is",
				p->topic, p->partition, d->cfg->data_dir,
				KM_MSTATE_FILE, p->topic);
		break;
	}
}

/* The first time this version opens a listed partition, its role is the
 * list's; from then on kmirror.state keeps it. The mirror's record also
 * keeps the source's cluster id, which a later `stop` names in the
 * barrier even when no listed topic makes the daemon ask the source. */
static int record_role(struct km_daemon *d, uint32_t i)
{
	struct km_mstate_rec *ms = &d->mstates[i];
	char dir[4096];
	bool fill_cid = ms->role == KM_MSTATE_ROLE_MIRROR &&
			ms->state == KM_MSTATE_MIRRORING && ms->source[0] == '\0' &&
			ms->source_cluster_id[0] == '\0' &&
			d->source_cluster_id[0] != '\0';

	if (ms->role == KM_MSTATE_ROLE_NONE) {
		enum listed l = listed_in(d, i);

		if (l == LISTED_NEITHER)
			return 0;
		ms->role = l == LISTED_TOPICS ? KM_MSTATE_ROLE_MIRROR
					      : KM_MSTATE_ROLE_LOCAL;
		fill_cid = l == LISTED_TOPICS;
	} else if (!fill_cid) {
		return 0;
	}
	if (fill_cid)
		snprintf(ms->source_cluster_id, sizeof(ms->source_cluster_id),
			 "%s", d->source_cluster_id);
	km_daemon_part_dir(d, &d->table.parts[i], dir, sizeof(dir));
	ms->exists = true;
	return km_mstate_save(dir, ms);
}

int km_daemon_record_role(struct km_daemon *d, uint32_t i)
{
	return record_role(d, i);
}

/* Not fatal: a host short of disk must still serve. The partition keeps
 * its role for this run; only a change of lists before the record is
 * written would go unnoticed, and the next start tries again. */
int km_daemon_record_roles(struct km_daemon *d)
{
	for (uint32_t i = 0; i < d->table.n; i++) {
		int rc = record_role(d, i);

		if (rc < 0)
			KM_WARN("daemon", "partition %s-%d: cannot record its "
				"role in %s (%s): a move between topics and "
				"local.topics before the next start would not "
				"be caught", d->table.parts[i].topic,
				d->table.parts[i].partition, KM_MSTATE_FILE,
				km_strerror(rc));
	}
	return 0;
}
