/* The cluster id kept in <data.dir>/meta.properties; see cluster_id.h. */
#include "control/cluster_id.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/file.h"
#include "common/km_assert.h"
#include "common/km_limits.h"
#include "common/log.h"
#include "common/uuid.h"
#include "control/config.h"
#include "control/config_pvt.h"
#include "control/daemon.h"
#include "control/props.h"
#include "kafka/wire.h"

#define META_TMP KM_CLUSTER_ID_META_FILE ".tmp"
#define META_PATH_BYTES_MAX (KM_CONFIG_PATH_BYTES_MAX + 32)
void km_cluster_id_encode(const uint8_t uuid[16],
			  char out[KM_CLUSTER_ID_UUID_CHARS + 1])
{
	km_uuid_encode(uuid, out);
}

int km_cluster_id_generate(char out[KM_CLUSTER_ID_UUID_CHARS + 1])
{
	return km_uuid_random(out);
}

bool km_cluster_id_is_valid(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > KM_CLUSTER_ID_BYTES_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* mkdir -p, bounded by the path's length. */
static int make_dirs(const char *dir)
{
	char p[KM_CONFIG_PATH_BYTES_MAX];
	size_t n = strlen(dir);

	if (n >= sizeof(p))
		return -ENAMETOOLONG;
	memcpy(p, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		p[i] = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
		p[i] = dir[i];
	}
	return 0;
}

/* What meta.properties holds; strings "" when absent. */
struct meta {
	char version[16];
	char cluster_id[KM_CLUSTER_ID_BYTES_MAX + 2];
	char node_id[16];
};

static void copy_field(char *dst, size_t cap, const char *v)
{
	/* A too long value is kept one byte over the limit, to fail checks. */
	snprintf(dst, cap, "%s", v);
}

static int meta_pair(void *arg, const char *key, const char *value,
		     uint32_t line)
{
	struct meta *m = arg;

	(void)line;
	if (strcmp(key, "version") == 0)
		copy_field(m->version, sizeof(m->version), value);
	else if (strcmp(key, "cluster.id") == 0)
		copy_field(m->cluster_id, sizeof(m->cluster_id), value);
	else if (strcmp(key, "node.id") == 0)
		copy_field(m->node_id, sizeof(m->node_id), value);
	/* Other keys (Kafka's directory.id) are kept by Kafka, ignored here. */
	return 0;
}

static int read_file(const char *path, char *buf, size_t cap, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t n = 0;

	if (fd < 0)
		return -errno;
	while (n < cap) {
		ssize_t r = read(fd, buf + n, cap - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int rc = -errno;

			close(fd);
			return rc;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (n == cap)
		return -EFBIG;
	*len = n;
	return 0;
}

static int parse_node_id(const char *s, int32_t *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (s[0] == '\0' || *end != '\0' || errno != 0 || v < 0 || v > INT32_MAX)
		return -EINVAL;
	*out = (int32_t)v;
	return 0;
}

static int check_meta(const struct meta *m, const char *path, int32_t *node_id,
		      char *err, size_t err_len)
{
	if (m->version[0] == '\0')
		km_config_errf(err, err_len, "%s: no version line", path);
	else if (strcmp(m->version, "1") != 0)
		km_config_errf(err, err_len,
			       "%s: version %s is not supported (kmirrord reads and writes version=1)",
			       path, m->version);
	else if (!km_cluster_id_is_valid(m->cluster_id))
		km_config_errf(err, err_len,
			       "%s: cluster.id is missing or not a valid cluster id", path);
	else if (parse_node_id(m->node_id, node_id) < 0)
		km_config_errf(err, err_len,
			       "%s: node.id is missing or not a number from 0 to 2147483647",
			       path);
	else
		return 0;
	return KM_EMETAPROPS;
}

/* @return 0 (found and well-formed), -ENOENT, or another error. */
static int read_meta(const char *path, struct meta *m, int32_t *node_id,
		     char *err, size_t err_len)
{
	char *buf = malloc(KM_CLUSTER_ID_META_BYTES_MAX);
	const char *what = "";
	uint32_t line = 0;
	size_t len = 0;
	int rc;

	if (buf == NULL)
		return -ENOMEM;
	memset(m, 0, sizeof(*m));
	rc = read_file(path, buf, KM_CLUSTER_ID_META_BYTES_MAX, &len);
	if (rc == 0)
		rc = km_props_parse(buf, len, meta_pair, m, &line, &what);
	free(buf);
	if (rc == KM_ECFGSYNTAX) {
		km_config_errf(err, err_len, "%s:%u: %s", path, line, what);
		return KM_EMETAPROPS;
	}
	if (rc == -ENOENT)
		return rc;
	if (rc < 0) {
		km_config_errf(err, err_len, "cannot read %s: %s", path,
			       km_strerror(rc));
		return rc;
	}
	return check_meta(m, path, node_id, err, err_len);
}

static size_t meta_text(char *buf, size_t cap, const char *id, int32_t node_id)
{
	char date[64];
	time_t now = time(NULL);
	struct tm tm;
	int n;

	gmtime_r(&now, &tm);
	/* java.util.Date.toString(): "EEE MMM dd HH:mm:ss zzz yyyy". */
	strftime(date, sizeof(date), "%a %b %d %H:%M:%S UTC %Y", &tm);
	n = snprintf(buf, cap, "#\n#%s\ncluster.id=%s\nnode.id=%" PRId32
		     "\nversion=1\n", date, id, node_id);
	KM_ASSERT(n > 0 && (size_t)n < cap);
	return (size_t)n;
}

static int write_meta(const char *dir, const char *id, int32_t node_id)
{
	char text[256];
	size_t n = meta_text(text, sizeof(text), id, node_id);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (dfd < 0)
		return -errno;
	rc = km_file_write_atomic(dfd, KM_CLUSTER_ID_META_FILE, text, n);
	close(dfd);
	return rc;
}

/* True if dir holds anything besides our own files: a data.dir with logs
 * but no meta.properties lost its identity, worth a warning. */
static bool has_other_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	bool found = false;

	if (d == NULL)
		return false;
	while (!found && (e = readdir(d)) != NULL)
		found = strcmp(e->d_name, ".") != 0 &&
			strcmp(e->d_name, "..") != 0 &&
			strcmp(e->d_name, META_TMP) != 0 &&
			strcmp(e->d_name, KM_DAEMON_LOCK_FILE) != 0;
	closedir(d);
	return found;
}

static int check_against_meta(struct km_config *cfg, const struct meta *m,
			      int32_t node_id, const char *path, char *err,
			      size_t err_len)
{
	if (cfg->cluster_id_configured && strcmp(cfg->cluster_id, m->cluster_id) != 0) {
		km_config_errf(err, err_len,
			       "cluster.id \"%s\" in the configuration does not match cluster.id \"%s\" in %s",
			       cfg->cluster_id, m->cluster_id, path);
		return KM_EMETAMISMATCH;
	}
	if (node_id != cfg->node_id) {
		km_config_errf(err, err_len,
			       "node.id %" PRId32 " in the configuration does not match node.id %" PRId32 " in %s",
			       cfg->node_id, node_id, path);
		return KM_EMETAMISMATCH;
	}
	strcpy(cfg->cluster_id, m->cluster_id);
	return 0;
}

static int create_meta(struct km_config *cfg, const char *path, char *err,
		       size_t err_len)
{
	int rc;

	if (!cfg->cluster_id_configured) {
		if ((rc = km_cluster_id_generate(cfg->cluster_id)) < 0) {
			km_config_errf(err, err_len, "cannot generate a cluster id: %s",
				       km_strerror(rc));
			return rc;
		}
		if (has_other_entries(cfg->data_dir))
			KM_WARN("config",
				"%s has data but no %s: new cluster id %s; barriers written for the old id will not match it in failback",
				cfg->data_dir, KM_CLUSTER_ID_META_FILE, cfg->cluster_id);
	}
	if ((rc = write_meta(cfg->data_dir, cfg->cluster_id, cfg->node_id)) < 0) {
		km_config_errf(err, err_len, "cannot write %s: %s", path,
			       km_strerror(rc));
		return rc;
	}
	KM_INFO("config", "cluster id %s (%s), saved in %s", cfg->cluster_id,
		cfg->cluster_id_configured ? "configured" : "generated", path);
	return 0;
}

int km_cluster_id_resolve(struct km_config *cfg, char *err, size_t err_len)
{
	char path[META_PATH_BYTES_MAX];
	struct meta m;
	int32_t node_id = -1;
	int rc;

	KM_ASSERT(cfg->data_dir[0] != '\0');
	KM_ASSERT(!cfg->cluster_id_configured ||
		  km_cluster_id_is_valid(cfg->cluster_id));
	snprintf(path, sizeof(path), "%s/%s", cfg->data_dir,
		 KM_CLUSTER_ID_META_FILE);
	if ((rc = make_dirs(cfg->data_dir)) < 0) {
		km_config_errf(err, err_len, "cannot create data.dir %s: %s",
			       cfg->data_dir, km_strerror(rc));
		return rc;
	}
	rc = read_meta(path, &m, &node_id, err, err_len);
	if (rc == 0)
		return check_against_meta(cfg, &m, node_id, path, err, err_len);
	if (rc != -ENOENT)
		return rc;
	return create_meta(cfg, path, err, err_len);
}

/* ---- kmirror.source ---- */

static_assert(sizeof(((struct km_cluster_id_source *)0)->cluster_id) >=
		      KM_WIRE_NAME_BYTES_MAX + 1,
	      "a source cluster id is any Metadata ClusterId string");

int km_cluster_id_decode(const char *text, uint8_t out[16])
{
	return km_uuid_decode(text, out);
}

static int source_pair(void *arg, const char *key, const char *value,
		       uint32_t line)
{
	struct km_cluster_id_source *s = arg;

	(void)line;
	if (strcmp(key, "source.cluster.id") == 0) {
		if (strlen(value) >= sizeof(s->cluster_id))
			return KM_EMETAPROPS;
		snprintf(s->cluster_id, sizeof(s->cluster_id), "%s", value);
	} else if (strcmp(key, "source.topic.id") == 0 && value[0] != '\0') {
		if (km_cluster_id_decode(value, s->topic_id) < 0)
			return KM_EMETAPROPS;
	}
	return 0;
}

int km_cluster_id_source_load(const char *dir, struct km_cluster_id_source *out)
{
	char path[META_PATH_BYTES_MAX + 256], buf[4096];
	size_t len = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "%s/%s", dir, KM_CLUSTER_ID_SOURCE_FILE);
	rc = read_file(path, buf, sizeof(buf), &len);
	if (rc == -ENOENT)
		return 0;
	if (rc == 0)
		rc = km_props_parse(buf, len, source_pair, out, NULL, NULL);
	if (rc == KM_ECFGSYNTAX)
		rc = KM_EMETAPROPS;
	return rc;
}

int km_cluster_id_source_save(const char *dir,
			      const struct km_cluster_id_source *src)
{
	static const uint8_t zero[16];
	char text[1024], cid[768], tid[KM_CLUSTER_ID_UUID_CHARS + 1] = "";
	int n, dfd, rc;

	km_props_escape(cid, sizeof(cid), src->cluster_id, 0);
	if (memcmp(src->topic_id, zero, sizeof(zero)) != 0)
		km_cluster_id_encode(src->topic_id, tid);
	n = snprintf(text, sizeof(text),
		     "# The source this partition's log mirrors: kmirrord "
		     "refuses any other\n"
		     "source.cluster.id=%s\nsource.topic.id=%s\n", cid, tid);
	KM_ASSERT(n > 0 && (size_t)n < sizeof(text));
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	rc = km_file_write_atomic(dfd, KM_CLUSTER_ID_SOURCE_FILE, text,
				  (size_t)n);
	close(dfd);
	return rc;
}
