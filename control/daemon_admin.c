/* The Admin client's topic calls for local topics (issue 20 item 2),
 * decided on the control thread, which owns the partition table: the
 * front end's worker queues a job (km_daemon_admin_post, under a lock: a
 * rare call) and wakes the loop through an eventfd; the loop answers each
 * job and sets its `done`, which the front end's tick picks up.
 *
 *  - CreateTopics: Kafka's checks and errors (a single broker: a
 *    replication factor above 1 is INVALID_REPLICATION_FACTOR), the
 *    partitions added as local.topics' are (writable, role=local in
 *    kmirror.state), the configs given kept in partition 0's
 *    kmirror.configs, which DescribeConfigs shows and the logs follow
 *    (retention, segment size, compaction, max.message.bytes) and a
 *    restart reads back. validate_only checks and creates nothing.
 *  - CreatePartitions: more partitions of a local or failed-over topic.
 *  - DeleteTopics: the topic leaves the published view, its owners let go
 *    of the logs, its directories are renamed away (a marker file first,
 *    so a crash in between finishes the deletion at the next start) and
 *    removed.
 *  - DeleteRecords: the owner moves the log start (km_log_delete_records).
 * A topic that is still mirrored (a partition not stopped) is refused
 * with POLICY_VIOLATION: its data is the source's; `kmirrorctl stop`
 * first.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/km_limits.h"
#include "common/log.h"
#include "control/daemon_pvt.h"
#include "dataplane/serve/tconfig.h"
#include "kafka/batch.h"

#define OPEN_TIMEOUT_MS 60000
#define OWNER_TIMEOUT_MS 30000
#define TOPIC_NAME_MAX 249 /* Kafka's Topic.MAX_NAME_LENGTH */
#define DELETING_PREFIX ".deleting-"
#define MIRRORED_MSG "mirrored from the source: stop it first (kmirrorctl stop)"

int km_daemon_admin_init(struct km_daemon *d)
{
	int rc;

	d->admin.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->admin.efd < 0)
		return -errno;
	if ((rc = pthread_mutex_init(&d->admin.lock, NULL)) != 0)
		return -rc;
	d->admin.lock_init = true;
	return 0;
}

void km_daemon_admin_fini(struct km_daemon *d)
{
	if (d->admin.efd > 0)
		close(d->admin.efd);
	d->admin.efd = -1;
	if (d->admin.lock_init)
		pthread_mutex_destroy(&d->admin.lock);
	d->admin.lock_init = false;
}

int km_daemon_admin_post(void *ctx, struct km_admin_job *job)
{
	struct km_daemon *d = ctx;
	uint64_t one = 1;
	int rc = 0;

	pthread_mutex_lock(&d->admin.lock);
	if (d->admin.n == sizeof(d->admin.q) / sizeof(d->admin.q[0]))
		rc = -EAGAIN;
	else
		d->admin.q[d->admin.n++] = job;
	pthread_mutex_unlock(&d->admin.lock);
	if (rc == 0 && write(d->admin.efd, &one, sizeof(one)) < 0)
		KM_WARN("daemon", "admin: cannot wake the control loop: %s",
			strerror(errno)); /* its next WATCH_MS turn answers */
	return rc;
}

static void set_answer(struct km_admin_answer *a, int16_t code,
		       const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void set_answer(struct km_admin_answer *a, int16_t code,
		       const char *fmt, ...)
{
	va_list ap;

	a->error_code = code;
	va_start(ap, fmt);
	vsnprintf(a->message, sizeof(a->message), fmt, ap);
	va_end(ap);
}

/* ---- what the table says about a topic ---- */

/* Partitions of topic in the published view: *first, and the count. */
static uint32_t topic_parts(const struct km_daemon *d, const char *topic,
			    struct km_part *const **first)
{
	return km_part_topic(km_part_index_get(&d->table), topic, first);
}

static uint32_t index_of(const struct km_daemon *d, const struct km_part *p)
{
	return (uint32_t)(p - d->table.parts);
}

/* A partition still mirrored (not stopped), or read-only: not local. */
static bool any_mirrored(struct km_part *const *first, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		if (km_part_get_mode(first[k]) != KM_PART_WRITABLE)
			return true;
	return false;
}

/* Kafka's Topic.validate (4.x words). @return 0, or
 * INVALID_TOPIC_EXCEPTION with a. */
static int check_name(const char *name, struct km_admin_answer *a)
{
	static const char *pre = "Topic name is invalid: ";
	size_t n = strlen(name);

	if (n == 0)
		set_answer(a, KM_KERR_INVALID_TOPIC_EXCEPTION,
			   "%sthe empty string is not allowed", pre);
	else if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		set_answer(a, KM_KERR_INVALID_TOPIC_EXCEPTION,
			   "%s'%s' is not allowed", pre, name);
	else if (n > TOPIC_NAME_MAX)
		set_answer(a, KM_KERR_INVALID_TOPIC_EXCEPTION,
			   "%sthe length of '%.64s...' is longer than the max "
			   "allowed length %d", pre, name, TOPIC_NAME_MAX);
	else if (strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU"
			      "VWXYZ0123456789._-") != n)
		set_answer(a, KM_KERR_INVALID_TOPIC_EXCEPTION,
			   "%s'%s' contains one or more characters other than "
			   "ASCII alphanumerics, '.', '_' and '-'", pre, name);
	return a->error_code ? -1 : 0;
}

/* '.' and '_' collide in metric names: Kafka refuses a second topic whose
 * name differs from one there only by them. */
static bool collides(const struct km_daemon *d, const char *name,
		     char *other, size_t cap)
{
	const struct km_part_index *ix = km_part_index_get(&d->table);

	for (uint32_t k = 0; k < ix->n; k++) {
		const char *t = ix->p[k]->topic;
		size_t i;

		for (i = 0; t[i] && name[i]; i++)
			if (t[i] != name[i] &&
			    !((t[i] == '.' || t[i] == '_') &&
			      (name[i] == '.' || name[i] == '_')))
				break;
		if (t[i] == '\0' && name[i] == '\0' && strcmp(t, name) != 0) {
			snprintf(other, cap, "%s", t);
			return true;
		}
	}
	return false;
}

/* ---- topic configs given at creation ---- */

/* Kafka's topic config names (TopicConfig, 4.x): any other is refused. */
static const char *const topic_configs[] = {
	"cleanup.policy", "compression.gzip.level", "compression.lz4.level",
	"compression.type", "compression.zstd.level", "delete.retention.ms",
	"file.delete.delay.ms", "flush.messages", "flush.ms",
	"follower.replication.throttled.replicas", "index.interval.bytes",
	"leader.replication.throttled.replicas", "local.retention.bytes",
	"local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
	"message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
	"message.timestamp.type", "min.cleanable.dirty.ratio",
	"min.compaction.lag.ms", "min.insync.replicas", "preallocate",
	"remote.log.copy.disable", "remote.log.delete.on.disable",
	"remote.storage.enable", "retention.bytes", "retention.ms",
	"segment.bytes", "segment.index.bytes", "segment.jitter.ms",
	"segment.ms", "unclean.leader.election.enable",
};

static bool known_config(const char *name)
{
	for (size_t i = 0; i < sizeof(topic_configs) / sizeof(topic_configs[0]); i++)
		if (strcmp(topic_configs[i], name) == 0)
			return true;
	return false;
}

/* A value outside [lo, hi]: Kafka's ConfigDef.Range words, in why. */
static bool in_range(const char *s, int64_t lo, int64_t hi, char *why,
		     size_t cap)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0')
		snprintf(why, cap, "Not a number of type %s",
			 hi > INT32_MAX ? "LONG" : "INT");
	else if (v < lo)
		snprintf(why, cap, "Value must be at least %lld", (long long)lo);
	else if (v > hi)
		snprintf(why, cap, "Value must be no more than %lld",
			 (long long)hi);
	else
		return true;
	return false;
}

/* The values kmirror behaves by must make sense to it; why says what is
 * wrong as Kafka's validators say it. */
static bool valid_value(const char *name, const char *v, char *why, size_t cap)
{
	if (strcmp(name, "cleanup.policy") == 0) {
		if (strcmp(v, "delete") == 0 || strcmp(v, "compact") == 0 ||
		    strcmp(v, "compact,delete") == 0 ||
		    strcmp(v, "delete,compact") == 0)
			return true;
		snprintf(why, cap, "String must be one of: compact, delete");
		return false;
	}
	if (strcmp(name, "retention.ms") == 0 ||
	    strcmp(name, "retention.bytes") == 0)
		return in_range(v, -1, INT64_MAX, why, cap);
	/* Kafka 4's floor (LogConfig: atLeast(1024 * 1024)). */
	if (strcmp(name, "segment.bytes") == 0)
		return in_range(v, 1 << 20, INT32_MAX, why, cap);
	if (strcmp(name, "max.message.bytes") == 0)
		return in_range(v, 0, INT32_MAX, why, cap);
	if (strcmp(name, "delete.retention.ms") == 0)
		return in_range(v, 0, INT64_MAX, why, cap);
	return true;
}

static int check_configs(const struct km_admin_job *j,
			 const struct km_ctopics_topic *t,
			 struct km_admin_answer *a)
{
	char why[96];

	for (uint32_t k = 0; k < t->n_configs; k++) {
		const struct km_ctopics_config *c =
			&j->ct_configs[t->configs_first + k];

		if (!known_config(c->name.s))
			set_answer(a, KM_KERR_INVALID_CONFIG,
				   "Unknown topic config name: %s", c->name.s);
		else if (c->value.len < 0)
			set_answer(a, KM_KERR_INVALID_REQUEST,
				   "Null value not supported for topic "
				   "configs: %s", c->name.s);
		else if (c->cut || c->value.len >= (int16_t)KM_TCONFIG_VALUE_BYTES)
			set_answer(a, KM_KERR_INVALID_CONFIG, "Invalid value "
				   "for configuration %s: longer than %u bytes",
				   c->name.s, KM_TCONFIG_VALUE_BYTES - 1);
		else if (!valid_value(c->name.s, c->value.s, why, sizeof(why)))
			set_answer(a, KM_KERR_INVALID_CONFIG,
				   "Invalid value %.64s for configuration %s: %s",
				   c->value.s, c->name.s, why);
		if (a->error_code)
			return -1;
	}
	return 0;
}

/* Partitions and replication factor as Kafka's ReplicationControlManager
 * checks them, for one broker. @return 0, or -1 with a set. */
static int check_counts(const struct km_daemon *d,
			const struct km_ctopics_topic *t,
			struct km_admin_answer *a)
{
	int32_t rf = t->replication_factor;

	if (t->n_assignments > 0) {
		if (t->num_partitions != -1 || rf != -1)
			set_answer(a, KM_KERR_INVALID_REQUEST,
				   "A manual partition assignment was "
				   "specified, but numPartitions or "
				   "replicationFactor was not set to -1.");
		else if (t->assign_broker_min != d->cfg->node_id ||
			 t->assign_broker_max != d->cfg->node_id)
			set_answer(a, KM_KERR_INVALID_REPLICA_ASSIGNMENT,
				   "The manual partition assignment includes "
				   "a broker other than %d (the only one).",
				   d->cfg->node_id);
		a->num_partitions = t->n_assignments;
		a->replication_factor = (int16_t)t->assign_replicas_max;
		return a->error_code ? -1 : 0;
	}
	if (t->num_partitions == 0 || t->num_partitions < -1)
		set_answer(a, KM_KERR_INVALID_PARTITIONS,
			   "Number of partitions was set to an invalid "
			   "non-positive value.");
	else if (rf == 0 || rf < -1)
		set_answer(a, KM_KERR_INVALID_REPLICATION_FACTOR,
			   "Replication factor must be larger than 0, or -1 "
			   "to use the default value.");
	else if (rf > 1)
		set_answer(a, KM_KERR_INVALID_REPLICATION_FACTOR,
			   "Unable to replicate the partition %d time(s): The "
			   "target replication factor of %d cannot be reached "
			   "because only 1 broker(s) are registered or some "
			   "brokers have all their log directories cordoned.",
			   rf, rf);
	a->num_partitions = t->num_partitions == -1
				    ? (int32_t)d->cfg->num_partitions
				    : t->num_partitions;
	a->replication_factor = 1;
	return a->error_code ? -1 : 0;
}

/* ---- adding partitions ---- */

/* Entry i, filled, as a local partition: writable, role=local. */
static void make_local(struct km_daemon *d, uint32_t i)
{
	atomic_store_explicit(&d->table.parts[i].mode, KM_PART_WRITABLE,
			      memory_order_relaxed);
	d->mirrored[i] = false;
	d->table.parts[i].owner = km_daemon_pick_owner(d, false);
	/* role=local is recorded from the mode (km_daemon_record_role). */
}

static int open_local(struct km_daemon *d, uint32_t i)
{
	struct km_part *p = &d->table.parts[i];
	uint8_t (*ids)[16] = calloc(d->table.n, sizeof(*ids));
	struct km_log_config lc;
	struct km_worker_reply r;
	int rc;

	if (ids == NULL)
		return -ENOMEM;
	if ((rc = km_daemon_topic_ids(d, ids)) == 0) {
		km_config_log_config(d->cfg, p->topic, p->partition, &lc);
		km_daemon_configs_limits(d, i, &lc);
		memcpy(lc.topic_id, ids[i], sizeof(lc.topic_id));
		rc = km_worker_open(d->workers[p->owner], p, &lc, &r);
	}
	free(ids);
	if (rc == 0)
		rc = km_worker_wait(d->ctl_efd, &r, OPEN_TIMEOUT_MS);
	if (rc < 0)
		KM_ERROR("daemon", "partition %s-%d: its log cannot be "
			 "opened: %s", p->topic, p->partition,
			 r.msg[0] ? r.msg : km_strerror(rc));
	return rc;
}

/* Partitions [from, to) of topic, local, opened, then published at once.
 * On a failure the entries opened stay out of the view (a restart serves
 * what was created on disk). */
static int add_partitions(struct km_daemon *d, const char *topic,
			  int32_t from, int32_t to)
{
	uint32_t base = d->table.n;
	int rc = 0;

	if (to - from > (int32_t)(d->table.cap - d->table.n))
		return -ENOSPC;
	for (int32_t k = from; k < to && rc == 0; k++) {
		uint32_t i = d->table.n;

		km_daemon_fill_entry(d, i, topic, k);
		make_local(d, i);
		d->table.n = i + 1;
		if ((rc = open_local(d, i)) < 0)
			d->table.n = i; /* the owner kept nothing */
	}
	if (d->table.n > base && km_part_table_publish(&d->table) == 0)
		for (uint32_t i = base; i < d->table.n; i++)
			if (km_daemon_record_role(d, i) < 0)
				KM_WARN("daemon", "partition %s-%d: cannot "
					"record its role", topic,
					d->table.parts[i].partition);
	return rc;
}

/* The configs given, as the topic's own (tconfig), kept in partition 0. */
static int keep_configs(struct km_daemon *d, uint32_t first_i,
			const struct km_admin_job *j,
			const struct km_ctopics_topic *t)
{
	struct km_tconfig_entry *e = calloc(KM_TCONFIG_ENTRIES_MAX, sizeof(*e));
	struct km_part *first = &d->table.parts[first_i];
	uint32_t n = 0;
	int rc;

	char dir[4096];

	if (e == NULL)
		return -ENOMEM;
	/* The file goes where the log will be, before the log is. */
	km_daemon_part_dir(d, first, dir, sizeof(dir));
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		free(e);
		return -errno;
	}
	for (uint32_t k = 0; k < t->n_configs && n < KM_TCONFIG_ENTRIES_MAX; k++) {
		const struct km_ctopics_config *c =
			&j->ct_configs[t->configs_first + k];

		snprintf(e[n].name, sizeof(e[n].name), "%s", c->name.s);
		snprintf(e[n].value, sizeof(e[n].value), "%s", c->value.s);
		n++;
	}
	if ((rc = km_tconfig_new(&first->tconfig)) == 0) {
		km_tconfig_replace(first->tconfig, e, n);
		rc = km_daemon_configs_save(d, first, e, n,
					    "topic configs given at creation "
					    "(CreateTopics)");
	}
	free(e);
	return rc;
}

/* Kafka's answer to a topic made now: its id, as the logs hold it. */
static void created_id(const struct km_daemon *d, const char *topic,
		       struct km_admin_answer *a)
{
	struct km_part *const *first;

	if (topic_parts(d, topic, &first) > 0)
		km_part_topic_id_read(&first[0]->stats.topic_id, a->topic_id);
}

/* Partition 0 alone first, so that its configs are there (tconfig on the
 * entry, kmirror.configs in its directory) before any partition opens. */
static int create_topic(struct km_daemon *d, const struct km_admin_job *j,
			const struct km_ctopics_topic *t,
			const struct km_admin_answer *a)
{
	uint32_t i = d->table.n;
	int rc;

	if ((uint32_t)a->num_partitions > d->table.cap - d->table.n)
		return -ENOSPC;
	km_daemon_fill_entry(d, i, t->name.s, 0);
	make_local(d, i);
	if ((rc = keep_configs(d, i, j, t)) == 0) {
		d->table.n = i + 1;
		if ((rc = open_local(d, i)) < 0)
			d->table.n = i;
	}
	if (rc < 0) { /* the entry is free again: nothing may hang off it */
		km_tconfig_free(d->table.parts[i].tconfig);
		d->table.parts[i].tconfig = NULL;
		return rc;
	}
	if ((rc = km_part_table_publish(&d->table)) < 0)
		return rc;
	(void)km_daemon_record_role(d, i);
	return add_partitions(d, t->name.s, 1, a->num_partitions);
}

static void create_one(struct km_daemon *d, struct km_admin_job *j,
		       uint32_t k)
{
	const struct km_ctopics_topic *t = &j->ct_topics[k];
	struct km_admin_answer *a = &j->ans[k];
	struct km_part *const *first;
	char other[KM_WIRE_NAME_BYTES_MAX + 1];
	int rc;

	if (check_name(t->name.s, a) < 0)
		return;
	if (topic_parts(d, t->name.s, &first) > 0) {
		set_answer(a, KM_KERR_TOPIC_ALREADY_EXISTS,
			   "Topic '%s' already exists.", t->name.s);
		return;
	}
	if (collides(d, t->name.s, other, sizeof(other))) {
		set_answer(a, KM_KERR_INVALID_TOPIC_EXCEPTION,
			   "Topic '%s' collides with existing topic: %s",
			   t->name.s, other);
		return;
	}
	if (check_counts(d, t, a) < 0 || check_configs(j, t, a) < 0)
		return;
	if (j->ct.validate_only)
		return;
	if ((rc = create_topic(d, j, t, a)) == -ENOSPC) {
		set_answer(a, KM_KERR_POLICY_VIOLATION, "kmirrord has room for "
			   "%u partitions (partitions.max)", d->table.cap);
		return;
	}
	if (rc < 0) {
		set_answer(a, KM_KERR_UNKNOWN_SERVER_ERROR,
			   "the topic's logs cannot be made: %s",
			   km_strerror(rc));
		return;
	}
	created_id(d, t->name.s, a);
	KM_INFO("daemon", "topic %s: created (%s) with %d partition(s), %u "
		"config(s)", t->name.s, j->auto_create ? "a Metadata request "
		"named it, auto.create.topics.enable" : "CreateTopics",
		a->num_partitions, t->n_configs);
}

/* ---- CreatePartitions ---- */

static void cparts_one(struct km_daemon *d, struct km_admin_job *j,
		       uint32_t k)
{
	const struct km_cparts_topic *t = &j->cp_topics[k];
	struct km_admin_answer *a = &j->ans[k];
	struct km_part *const *first;
	uint32_t n = topic_parts(d, t->name.s, &first);
	int rc;

	if (n == 0)
		a->error_code = KM_KERR_UNKNOWN_TOPIC_OR_PARTITION; /* no text */
	else if (any_mirrored(first, n) || first[0]->internal)
		set_answer(a, KM_KERR_POLICY_VIOLATION, "Topic '%s': %s",
			   t->name.s, first[0]->internal ? "an internal topic"
							 : MIRRORED_MSG);
	else if (t->count < (int32_t)n)
		set_answer(a, KM_KERR_INVALID_PARTITIONS,
			   "The topic %s currently has %u partition(s); %d "
			   "would not be an increase.", t->name.s, n, t->count);
	else if (t->count == (int32_t)n)
		set_answer(a, KM_KERR_INVALID_PARTITIONS,
			   "Topic already has %u partition(s).", n);
	else if (t->n_assignments > 0 &&
		 (t->assign_broker_min != d->cfg->node_id ||
		  t->assign_broker_max != d->cfg->node_id))
		set_answer(a, KM_KERR_INVALID_REPLICA_ASSIGNMENT,
			   "The manual partition assignment includes a broker "
			   "other than %d (the only one).", d->cfg->node_id);
	if (a->error_code || j->cp.validate_only)
		return;
	if ((rc = add_partitions(d, t->name.s, (int32_t)n, t->count)) < 0) {
		set_answer(a, KM_KERR_UNKNOWN_SERVER_ERROR,
			   "partitions not added: %s", km_strerror(rc));
		return;
	}
	KM_INFO("daemon", "topic %s: %d partition(s) now (CreatePartitions)",
		t->name.s, t->count);
}

/* ---- DeleteRecords ---- */

static int16_t delrec_part(struct km_daemon *d, struct km_proto_topic *t,
			   struct km_delrec_part *q)
{
	struct km_part *p = km_part_find(&d->table, t->name.s, q->partition);
	struct km_worker_reply r;
	int rc;

	if (p == NULL)
		return KM_KERR_UNKNOWN_TOPIC_OR_PARTITION;
	if (km_part_get_mode(p) != KM_PART_WRITABLE || p->internal)
		return KM_KERR_POLICY_VIOLATION;
	if (p->log == NULL || p->error)
		return KM_KERR_NOT_LEADER_OR_FOLLOWER;
	/* -1: up to the high watermark (DeleteRecordsRequest.HIGH_WATERMARK). */
	if (q->offset == -1)
		q->offset = atomic_load_explicit(&p->stats.hw,
						 memory_order_acquire);
	if ((rc = km_worker_delete_records(d->workers[p->owner], p, q->offset,
					   &r)) < 0 ||
	    (rc = km_worker_wait(d->ctl_efd, &r, OWNER_TIMEOUT_MS)) < 0)
		return rc == -ERANGE ? KM_KERR_OFFSET_OUT_OF_RANGE
				     : KM_KERR_UNKNOWN_SERVER_ERROR;
	q->offset = r.low_watermark;
	return KM_KERR_NONE;
}

static void delete_records(struct km_daemon *d, struct km_admin_job *j)
{
	for (uint32_t t = 0; t < j->dr.n_topics; t++) {
		struct km_proto_topic *tp = &j->dr_topics[t];

		if (j->denied[t])
			continue;

		for (uint32_t k = tp->first; k < tp->first + tp->count; k++) {
			struct km_delrec_part *q = &j->dr_parts[k];
			struct km_part *p = km_part_find(&d->table, tp->name.s,
							 q->partition);
			/* Kafka Streams asks again every purge interval: only
			 * a start that moved is worth a line. */
			int64_t before = p ? atomic_load(&p->stats.log_start)
					   : -1;

			q->error_code = delrec_part(d, tp, q);
			if (q->error_code != KM_KERR_NONE)
				q->offset = -1;
			else if (q->offset > before)
				KM_INFO("daemon", "partition %s-%d: records "
					"below %lld deleted (DeleteRecords)",
					tp->name.s, q->partition,
					(long long)q->offset);
		}
	}
}

/* ---- DeleteTopics ---- */

static int rm_entry(const char *path, const struct stat *sb, int flag,
		    struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path) < 0 ? -errno : 0;
}

static int sync_data_dir(const struct km_daemon *d)
{
	int fd = open(d->cfg->data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* The marker that makes a deletion finish after a crash. */
static int marker(const struct km_daemon *d, const char *topic, bool make)
{
	char path[4400];
	int fd;

	snprintf(path, sizeof(path), "%s/" DELETING_PREFIX "%s",
		 d->cfg->data_dir, topic);
	if (!make)
		return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
	if ((fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) < 0)
		return -errno;
	close(fd);
	return sync_data_dir(d);
}

/* Every <topic>-<N> directory of data.dir renamed away and removed. */
static int remove_dirs(const struct km_daemon *d, const char *topic)
{
	DIR *dir = opendir(d->cfg->data_dir);
	size_t len = strlen(topic);
	struct dirent *e;
	char from[4400], to[4500];
	int rc = 0;

	if (dir == NULL)
		return -errno;
	while ((e = readdir(dir)) != NULL) {
		const char *n = e->d_name;

		if (strncmp(n, topic, len) != 0 || n[len] != '-' ||
		    n[len + 1] == '\0' ||
		    strspn(n + len + 1, "0123456789") != strlen(n + len + 1))
			continue;
		snprintf(from, sizeof(from), "%s/%s", d->cfg->data_dir, n);
		snprintf(to, sizeof(to), "%s.deleted", from);
		if (rename(from, to) < 0 ||
		    nftw(to, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
			rc = rc ? rc : -errno;
		/* Test hook: a stop with directories left to remove. */
		km_worker_crash_point("topic-delete");
	}
	closedir(dir);
	return rc;
}

static int unpublish(struct km_daemon *d, struct km_part *const *first,
		     uint32_t n)
{
	uint32_t idx[KM_ADMIN_PARTS_MAX];

	if (n > KM_ADMIN_PARTS_MAX)
		return -E2BIG;
	for (uint32_t k = 0; k < n; k++)
		idx[k] = index_of(d, first[k]);
	for (uint32_t k = 0; k < n; k++)
		d->table.parts[idx[k]].deleted = true;
	return km_part_table_publish(&d->table);
}

static int delete_topic(struct km_daemon *d, const char *topic,
			struct km_part *const *first, uint32_t n)
{
	struct km_part *parts[KM_ADMIN_PARTS_MAX];
	int rc;

	if (n > KM_ADMIN_PARTS_MAX)
		return -E2BIG;
	memcpy(parts, first, n * sizeof(*parts)); /* the view goes */
	if ((rc = marker(d, topic, true)) < 0 ||
	    (rc = unpublish(d, parts, n)) < 0)
		return rc;
	for (uint32_t k = 0; k < n; k++) {
		struct km_worker_reply r;
		struct km_part *p = parts[k];

		atomic_store_explicit(&p->mode, KM_PART_MIRROR,
				      memory_order_release);
		if ((rc = km_worker_drop(d->workers[p->owner], p, &r)) < 0 ||
		    (rc = km_worker_wait(d->ctl_efd, &r, OWNER_TIMEOUT_MS)) < 0)
			KM_WARN("daemon", "partition %s-%d: its owner did not "
				"let go of it: %s", topic, p->partition,
				km_strerror(rc));
	}
	if ((rc = remove_dirs(d, topic)) < 0 || (rc = sync_data_dir(d)) < 0)
		KM_WARN("daemon", "topic %s: its directories: %s (the next "
			"start finishes)", topic, km_strerror(rc));
	else
		rc = marker(d, topic, false);
	return 0;
}

/* A topic named by id (v6+): its name, or NULL. */
static const char *by_id(const struct km_daemon *d, const uint8_t id[16])
{
	const struct km_part_index *ix = km_part_index_get(&d->table);
	uint8_t have[KM_WIRE_UUID_BYTES];

	for (uint32_t k = 0; k < ix->n; k++) {
		km_part_topic_id_read(&ix->p[k]->stats.topic_id, have);
		if (memcmp(have, id, sizeof(have)) == 0)
			return ix->p[k]->topic;
	}
	return NULL;
}

static void dtopics_one(struct km_daemon *d, struct km_admin_job *j,
			uint32_t k)
{
	struct km_dtopics_topic *t = &j->dt_topics[k];
	struct km_admin_answer *a = &j->ans[k];
	struct km_part *const *first;
	const char *name = t->name.len >= 0 ? t->name.s : by_id(d, t->id);
	uint32_t n = name ? topic_parts(d, name, &first) : 0;
	char topic[KM_WIRE_NAME_BYTES_MAX + 1];

	memcpy(a->topic_id, t->id, sizeof(a->topic_id));
	if (n == 0) { /* no text: Kafka's clients word it */
		a->error_code = t->name.len >= 0
					? KM_KERR_UNKNOWN_TOPIC_OR_PARTITION
					: KM_KERR_UNKNOWN_TOPIC_ID;
		return;
	}
	km_part_topic_id_read(&first[0]->stats.topic_id, a->topic_id);
	if (any_mirrored(first, n) || first[0]->internal) {
		set_answer(a, KM_KERR_POLICY_VIOLATION, "Topic '%s': %s", name,
			   first[0]->internal ? "an internal topic"
					      : MIRRORED_MSG);
		return;
	}
	snprintf(topic, sizeof(topic), "%s", name);
	if (t->name.len < 0) /* Kafka answers the name of a topic by id */
		km_wire_name_set(&t->name, topic);
	(void)delete_topic(d, topic, first, n);
	KM_INFO("daemon", "topic %s: deleted (DeleteTopics), %u partition(s)",
		topic, n);
}

/* ---- the loop ---- */

static void serve_job(struct km_daemon *d, struct km_admin_job *j)
{
	switch (j->kind) {
	case KM_ADMIN_CREATE_TOPICS:
		for (uint32_t k = 0; k < j->ct.n_topics; k++)
			if (!j->denied[k])
				create_one(d, j, k);
		break;
	case KM_ADMIN_CREATE_PARTITIONS:
		for (uint32_t k = 0; k < j->cp.n_topics; k++)
			if (!j->denied[k])
				cparts_one(d, j, k);
		break;
	case KM_ADMIN_DELETE_TOPICS:
		for (uint32_t k = 0; k < j->dt.n_topics; k++)
			if (!j->denied[k])
				dtopics_one(d, j, k);
		break;
	case KM_ADMIN_DELETE_RECORDS:
		delete_records(d, j);
		break;
	}
	atomic_store_explicit(&j->done, 1, memory_order_release);
}

void km_daemon_admin_serve(struct km_daemon *d)
{
	struct km_admin_job *q[sizeof(d->admin.q) / sizeof(d->admin.q[0])];
	uint64_t v;
	uint32_t n;

	if (d->admin.efd < 0)
		return;
	(void)!read(d->admin.efd, &v, sizeof(v));
	pthread_mutex_lock(&d->admin.lock);
	n = d->admin.n;
	memcpy(q, d->admin.q, n * sizeof(q[0]));
	d->admin.n = 0;
	pthread_mutex_unlock(&d->admin.lock);
	for (uint32_t i = 0; i < n; i++)
		serve_job(d, q[i]);
}

void km_daemon_admin_recover(struct km_daemon *d)
{
	DIR *dir = opendir(d->cfg->data_dir);
	size_t plen = strlen(DELETING_PREFIX);
	char topics[16][KM_WIRE_NAME_BYTES_MAX + 1];
	uint32_t n = 0;
	struct dirent *e;

	while (dir != NULL && (e = readdir(dir)) != NULL && n < 16)
		if (strncmp(e->d_name, DELETING_PREFIX, plen) == 0)
			snprintf(topics[n++], sizeof(topics[0]), "%s",
				 e->d_name + plen);
	if (dir != NULL)
		closedir(dir);
	for (uint32_t i = 0; i < n; i++) {
		int rc = remove_dirs(d, topics[i]);

		if (rc == 0 && (rc = sync_data_dir(d)) == 0)
			rc = marker(d, topics[i], false);
		if (rc < 0)
			KM_WARN("daemon", "topic %s: its deletion cannot be "
				"finished: %s", topics[i], km_strerror(rc));
		else
			KM_INFO("daemon", "topic %s: its deletion, interrupted "
				"by a stop, is finished", topics[i]);
	}
}
