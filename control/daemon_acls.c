/* Authorization's ACLs (issue 16; the matcher is dataplane/serve/acl.h).
 *
 * Two sources, merged into one table the control thread publishes for the
 * workers' front ends:
 *   - acls.file: one ACL a line (km_acl_parse_line). Read at start, where
 *     a malformed line stops kmirrord with the line named; looked at every
 *     second after (size, mtime, inode) and read again on a change: a
 *     malformed line then keeps the table in force and shows the error in
 *     status until the file is fixed.
 *   - acls.sync=true: every acls.sync.interval.ms (MM2's
 *     sync.topic.acls.interval.seconds default, 10 minutes; and once right
 *     after start) one DescribeAcls to the source (all ACLs), of which
 *     kmirrord keeps the TOPIC ones on patterns that cover a mirrored
 *     topic, the GROUP ones on patterns that cover a group it syncs (or
 *     `groups` names) and every TRANSACTIONAL_ID one, as they are: MM2
 *     turns a mirrored topic's ALL and WRITE into READ (its mirrors stay
 *     read-only), but after a failover here the partition is the
 *     application's to write, so it keeps exactly the rights it had on
 *     the source. CLUSTER ACLs stay behind: rights on the source's
 *     brokers are not rights on this host. A source without an authorizer
 *     answers SECURITY_DISABLED: a state in status, not an error, and
 *     mirroring goes on.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/errors.h"
#include "common/log.h"
#include "control/daemon_pvt.h"
#include "control/kclient.h"
#include "kafka/proto_acls.h"

#define FILE_CHECK_MS 1000
#define SYNC_TIMEOUT_MS 3000
#define SYNC_ACLS_MAX 4096u	/* one DescribeAcls answer */
#define FILE_ACLS_MAX 65536u

static const char *const rtype_keys[KM_ACL_RTYPES] = {
	"topic", "group", "cluster", "transactional_id" };

/* ---- acls.file ------------------------------------------------------------ */

static int file_read(const char *path, struct km_acl **out, uint32_t *n,
		     char *why, size_t cap)
{
	FILE *f = fopen(path, "r");
	struct km_acl *v = NULL, a;
	uint32_t count = 0, size = 0, line = 0;
	char buf[2048], err[256];
	int rc = 0;

	if (f == NULL) {
		rc = -errno;
		snprintf(why, cap, "acls.file %s: %s", path, km_strerror(rc));
		return rc;
	}
	while (rc == 0 && fgets(buf, sizeof(buf), f) != NULL) {
		int k = km_acl_parse_line(buf, &a, err, sizeof(err));

		line++;
		if (k < 0) {
			snprintf(why, cap, "acls.file %s line %u: %s", path,
				 line, err);
			rc = k;
		} else if (k == 1 && count == FILE_ACLS_MAX) {
			snprintf(why, cap, "acls.file %s: more than %u ACLs",
				 path, FILE_ACLS_MAX);
			rc = -E2BIG;
		} else if (k == 1) {
			if (count == size) {
				struct km_acl *nv;

				size = size ? 2 * size : 64;
				if ((nv = realloc(v, size * sizeof(*v))) == NULL) {
					rc = -ENOMEM;
					break;
				}
				v = nv;
			}
			a.origin = KM_ACL_FROM_FILE;
			v[count++] = a;
		}
	}
	fclose(f);
	if (rc < 0) {
		free(v);
		return rc;
	}
	*out = v;
	*n = count;
	return 0;
}

/* Both sources into one table, published if it builds. */
static int rebuild(struct km_daemon *d)
{
	struct km_daemon_acls *x = &d->acls;
	uint32_t n = x->n_file + x->n_src;
	struct km_acl *all = calloc(n ? n : 1, sizeof(*all));
	struct km_acl_table *t;
	int rc;

	if (all == NULL)
		return -ENOMEM;
	if (x->n_file)
		memcpy(all, x->file, x->n_file * sizeof(*all));
	if (x->n_src)
		memcpy(all + x->n_file, x->src, x->n_src * sizeof(*all));
	rc = km_acl_table_build(all, n, d->cfg->super_users,
				d->cfg->allow_everyone_if_no_acl_found != 0, &t);
	free(all);
	if (rc < 0)
		return rc;
	if (x->store == NULL) {
		if ((rc = km_acl_store_new(t, &x->store)) < 0)
			km_acl_table_free(t);
	} else {
		km_acl_store_publish(x->store, t);
	}
	if (rc == 0)
		KM_INFO("daemon", "acls: %u in force (%u from acls.file, %u "
			"from the source)", km_acl_table_count(t),
			km_acl_table_count_from(t, KM_ACL_FROM_FILE),
			km_acl_table_count_from(t, KM_ACL_FROM_SOURCE));
	return rc;
}

/* Has the file changed since it was last read? */
static bool file_changed(struct km_daemon_acls *x, const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return x->file_ino != 0; /* gone: say so once */
	if (st.st_ino == x->file_ino && st.st_size == x->file_size &&
	    st.st_mtim.tv_sec == x->file_mtime.tv_sec &&
	    st.st_mtim.tv_nsec == x->file_mtime.tv_nsec)
		return false;
	x->file_ino = st.st_ino;
	x->file_size = st.st_size;
	x->file_mtime = st.st_mtim;
	return true;
}

static int file_load(struct km_daemon *d)
{
	struct km_daemon_acls *x = &d->acls;
	struct km_acl *v = NULL;
	uint32_t n = 0;
	int rc;

	if (!file_changed(x, d->cfg->acls_file) && x->file_loads > 0)
		return 0;
	rc = file_read(d->cfg->acls_file, &v, &n, x->file_error,
		       sizeof(x->file_error));
	if (rc < 0)
		return rc;
	free(x->file);
	x->file = v;
	x->n_file = n;
	x->file_error[0] = '\0';
	x->file_loads++;
	return rebuild(d);
}

int km_daemon_acls_init(struct km_daemon *d)
{
	struct km_daemon_acls *x = &d->acls;
	int rc;

	if (!km_config_authorizes(d->cfg))
		return 0;
	if (d->cfg->acls_file[0] != '\0' && (rc = file_load(d)) < 0) {
		KM_ERROR("daemon", "%s", x->file_error);
		return rc;
	}
	if (x->store == NULL && (rc = rebuild(d)) < 0)
		return rc;
	x->sync_next_ms = 0; /* the first round right after start */
	return 0;
}

void km_daemon_acls_free(struct km_daemon *d)
{
	km_acl_store_free(d->acls.store);
	free(d->acls.file);
	free(d->acls.src);
	memset(&d->acls, 0, sizeof(d->acls));
}

/* ---- acls.sync --------------------------------------------------------------- */

/* Does the pattern (pattern, name) cover s? */
static bool covers(int pattern, const char *name, const char *s)
{
	if (pattern == KM_ACL_PREFIXED)
		return strncmp(s, name, strlen(name)) == 0;
	return strcmp(name, "*") == 0 || strcmp(name, s) == 0;
}

static bool covers_topic(const struct km_daemon *d, int pattern,
			 const char *name)
{
	for (uint32_t i = 0; i < d->table.n; i++)
		if (d->mirrored[i] && !d->table.parts[i].deleted &&
		    covers(pattern, name, d->table.parts[i].topic))
			return true;
	return false;
}

static bool covers_group(const struct km_daemon *d, int pattern,
			 const char *name)
{
	if (pattern == KM_ACL_LITERAL && strcmp(name, "*") == 0)
		return true;
	for (uint32_t k = 0; k < d->n_gsync; k++)
		if (covers(pattern, name, d->gsync[k].s.group))
			return true;
	for (uint32_t k = 0; k < d->cfg->groups_count; k++)
		if (covers(pattern, name, d->cfg->groups[k]))
			return true;
	return false;
}

/* The source's ACL a as ours, if kmirrord keeps it (see the top). */
static bool take(const struct km_daemon *d, const struct km_dacls_acl *a,
		 struct km_acl *out)
{
	memset(out, 0, sizeof(*out));
	out->rtype = (uint8_t)a->resource_type;
	out->pattern = (uint8_t)a->pattern_type;
	out->op = (uint8_t)a->operation;
	out->perm = (uint8_t)a->permission_type;
	out->origin = KM_ACL_FROM_SOURCE;
	if ((out->pattern != KM_ACL_LITERAL && out->pattern != KM_ACL_PREFIXED) ||
	    out->op < KM_ACL_OP_ALL || out->op > KM_ACL_OP_TWO_PHASE_COMMIT ||
	    (out->perm != KM_ACL_ALLOW && out->perm != KM_ACL_DENY) ||
	    a->principal.len <= 0 || a->host.len <= 0 ||
	    (size_t)a->host.len >= sizeof(out->host))
		return false;
	snprintf(out->principal, sizeof(out->principal), "%s", a->principal.s);
	memcpy(out->host, a->host.s, (size_t)a->host.len + 1);
	snprintf(out->name, sizeof(out->name), "%s", a->resource_name.s);
	switch (a->resource_type) {
	case KM_ACL_RES_TOPIC:
		return covers_topic(d, out->pattern, out->name);
	case KM_ACL_RES_GROUP:
		return covers_group(d, out->pattern, out->name);
	case KM_ACL_RES_TXNID:
		return true;
	default:
		return false;
	}
}

static int cmp_raw(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct km_acl));
}

/* The answer's ACLs that kmirrord keeps; rebuilt if they changed. */
static int take_all(struct km_daemon *d, const struct km_dacls_resp *m)
{
	struct km_daemon_acls *x = &d->acls;
	struct km_acl *v = calloc(m->n_acls ? m->n_acls : 1, sizeof(*v));
	uint32_t n = 0;

	if (v == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->n_acls; i++)
		n += take(d, &m->acls[i], &v[n]);
	qsort(v, n, sizeof(*v), cmp_raw);
	if (n == x->n_src && (n == 0 || memcmp(v, x->src, n * sizeof(*v)) == 0)) {
		free(v);
		return 0;
	}
	free(x->src);
	x->src = v;
	x->n_src = n;
	KM_INFO("daemon", "acls.sync: %u of the source's %u ACLs apply to the "
		"mirrored topics and groups", n, m->n_acls);
	return rebuild(d);
}

static int enc_dacls(struct km_wire_wr *w, int16_t v, const void *m)
{
	return km_dacls_req_encode(w, v, m);
}

static int ask(struct km_daemon *d, struct km_kclient *c,
	       struct km_dacls_resp *m)
{
	struct km_dacls_req req = { .resource_type = KM_ACLS_ANY,
				    .pattern_type = KM_ACLS_ANY,
				    .operation = KM_ACLS_ANY,
				    .permission_type = KM_ACLS_ANY };
	struct km_wire_rd r;
	int rc;

	km_wire_name_set_null(&req.resource_name);
	km_wire_name_set_null(&req.principal);
	km_wire_name_set_null(&req.host);
	if ((rc = km_kclient_call(c, KM_API_DESCRIBE_ACLS,
				  KM_DESCRIBE_ACLS_VERSION, enc_dacls, &req,
				  &r)) < 0 ||
	    (rc = km_dacls_resp_decode(&r, KM_DESCRIBE_ACLS_VERSION, m)) < 0)
		return rc;
	d->acls.security_disabled = m->error_code == KM_KERR_SECURITY_DISABLED;
	if (d->acls.security_disabled)
		return 0;
	if (m->error_code != 0) {
		snprintf(d->acls.sync_error, sizeof(d->acls.sync_error),
			 "the source answered DescribeAcls with %s%s%s",
			 km_kerr_name(m->error_code),
			 m->error_message.len > 0 ? ": " : "",
			 m->error_message.len > 0 ? m->error_message.s : "");
		return KM_ESOURCE;
	}
	return take_all(d, m);
}

static int sync_round(struct km_daemon *d)
{
	struct km_dacls_resp m = { .acls_max = SYNC_ACLS_MAX };
	struct km_kclient c;
	int rc = -ENOENT;

	if ((m.acls = calloc(SYNC_ACLS_MAX, sizeof(*m.acls))) == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < d->cfg->bootstrap_count && rc < 0; i++)
		rc = km_kclient_open(&c, &d->cfg->bootstrap[i], SYNC_TIMEOUT_MS);
	if (rc == 0) {
		rc = ask(d, &c, &m);
		km_kclient_close(&c);
	}
	free(m.acls);
	return rc;
}

static void sync_acls(struct km_daemon *d, uint64_t now)
{
	struct km_daemon_acls *x = &d->acls;
	bool was_disabled = x->security_disabled;
	int rc;

	if (!d->cfg->acls_sync || d->cfg->bootstrap_count == 0 ||
	    now < x->sync_next_ms)
		return;
	x->sync_next_ms = now + d->cfg->acls_sync_interval_ms;
	x->sync_error[0] = '\0';
	rc = sync_round(d);
	x->sync_rounds++;
	x->sync_last_ms = now;
	if (rc < 0 && x->sync_error[0] == '\0')
		snprintf(x->sync_error, sizeof(x->sync_error), "%s",
			 km_strerror(rc));
	/* Said once per change: a source that is down stays quiet after. */
	if (rc < 0 && rc != x->sync_rc)
		KM_WARN("daemon", "acls.sync from the source failed: %s (the "
			"ACLs here stay as last synced)", x->sync_error);
	if (rc == 0 && x->security_disabled && !was_disabled)
		KM_WARN("daemon", "acls.sync: the source has no authorizer "
			"(DescribeAcls: SECURITY_DISABLED): no ACLs to follow");
	x->sync_errors += rc < 0;
	x->sync_rc = rc;
}

void km_daemon_acls_watch(struct km_daemon *d)
{
	struct km_daemon_acls *x = &d->acls;
	uint64_t now = km_daemon_now_ms();

	if (x->store == NULL)
		return;
	if (d->cfg->acls_file[0] != '\0' && now >= x->file_next_ms) {
		char before[sizeof(x->file_error)];

		x->file_next_ms = now + FILE_CHECK_MS;
		memcpy(before, x->file_error, sizeof(before));
		if (file_load(d) < 0 && strcmp(before, x->file_error) != 0)
			KM_ERROR("daemon", "%s (the ACLs in force stay)",
				 x->file_error);
	}
	sync_acls(d, now);
}

/* ---- status and metrics ----------------------------------------------------- */

static const char *sync_state(const struct km_daemon *d)
{
	const struct km_daemon_acls *x = &d->acls;

	if (!d->cfg->acls_sync)
		return "off";
	if (x->sync_rounds == 0)
		return "not run yet";
	if (x->sync_rc < 0)
		return x->sync_error;
	return x->security_disabled
		       ? "the source has no authorizer (SECURITY_DISABLED)"
		       : "ok";
}

json_t *km_daemon_acls_status(const struct km_daemon *d)
{
	const struct km_daemon_acls *x = &d->acls;
	const struct km_acl_table *t;
	json_t *denied;

	if (x->store == NULL)
		return json_pack("{s:b}", "enabled", 0);
	t = km_acl_store_get(x->store);
	denied = json_object();
	for (int k = 0; k < KM_ACL_RTYPES; k++)
		json_object_set_new(denied, rtype_keys[k],
				    json_integer((json_int_t)km_acl_store_denied(
					    x->store, (enum km_acl_rtype)(k + 2))));
	return json_pack(
		"{s:b, s:I, s:I, s:I, s:s, s:s, s:s, s:I, s:I, s:I, s:o}",
		"enabled", 1, "count", (json_int_t)km_acl_table_count(t),
		"from_file", (json_int_t)km_acl_table_count_from(t, KM_ACL_FROM_FILE),
		"from_source",
		(json_int_t)km_acl_table_count_from(t, KM_ACL_FROM_SOURCE),
		"file", d->cfg->acls_file,
		"file_error", x->file_error, "sync", sync_state(d),
		"sync_rounds", (json_int_t)x->sync_rounds,
		"sync_errors", (json_int_t)x->sync_errors,
		"last_sync_age_ms",
		(json_int_t)(x->sync_rounds ? km_daemon_now_ms() - x->sync_last_ms
					    : 0),
		"denied", denied);
}

char *km_daemon_acls_metrics(const struct km_daemon *d)
{
	const struct km_daemon_acls *x = &d->acls;
	const struct km_acl_table *t;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (x->store == NULL || (f = open_memstream(&buf, &len)) == NULL)
		return NULL;
	t = km_acl_store_get(x->store);
	fprintf(f, "# HELP kmirror_acls ACLs in force, by where they came from.\n"
		"# TYPE kmirror_acls gauge\n"
		"kmirror_acls{source=\"file\"} %u\n"
		"kmirror_acls{source=\"source\"} %u\n",
		km_acl_table_count_from(t, KM_ACL_FROM_FILE),
		km_acl_table_count_from(t, KM_ACL_FROM_SOURCE));
	fprintf(f, "# HELP kmirror_acl_denials_total Requests (per topic, group "
		"or id they name) the ACLs refused, by resource type.\n"
		"# TYPE kmirror_acl_denials_total counter\n");
	for (int k = 0; k < KM_ACL_RTYPES; k++)
		fprintf(f, "kmirror_acl_denials_total{resource=\"%s\"} %" PRIu64
			"\n", rtype_keys[k],
			km_acl_store_denied(x->store, (enum km_acl_rtype)(k + 2)));
	fprintf(f, "# HELP kmirror_acl_sync_errors_total acls.sync rounds that "
		"failed.\n# TYPE kmirror_acl_sync_errors_total counter\n"
		"kmirror_acl_sync_errors_total %" PRIu64 "\n", x->sync_errors);
	fclose(f);
	return buf;
}
