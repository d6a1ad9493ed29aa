/* kmirror.state: read and replace. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/file.h"
#include "control/mstate.h"

static const char *const names[] = { "MIRRORING", "STOPPING", "STOPPED",
				      "PAUSED", "PREPARING", "FAILED" };
#define N_NAMES 6
static const char *const modes[] = { "truncate", "abort" };

const char *km_mstate_name(enum km_mstate s)
{
	return (unsigned)s < N_NAMES ? names[s] : "?";
}

static int lookup(const char *v, const char *const *tab, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(v, tab[i]) == 0)
			return i;
	return -1;
}

static int parse_line(char *line, struct km_mstate_rec *r)
{
	char *eq = strchr(line, '=');
	int i;

	if (eq == NULL)
		return line[0] == '\0' || line[0] == '#' ? 0 : KM_EMETAPROPS;
	*eq++ = '\0';
	if (strcmp(line, "state") == 0) {
		if ((i = lookup(eq, names, N_NAMES)) < 0)
			return KM_EMETAPROPS;
		r->state = (enum km_mstate)i;
	} else if (strcmp(line, "stop.mode") == 0) {
		if ((i = lookup(eq, modes, 2)) < 0)
			return KM_EMETAPROPS;
		r->stop_mode = i;
	} else if (strcmp(line, "source.cluster.id") == 0) {
		snprintf(r->source_cluster_id, sizeof(r->source_cluster_id),
			 "%s", eq);
	} else if (strcmp(line, "last.mirrored.offset") == 0) {
		r->last_mirrored_offset = strtoll(eq, NULL, 10);
	} else if (strcmp(line, "source") == 0) {
		snprintf(r->source, sizeof(r->source), "%s", eq);
	} else if (strcmp(line, "prepare.truncate.to") == 0) {
		r->prepare_truncate_to = strtoll(eq, NULL, 10);
	} else if (strcmp(line, "prepare.from.start") == 0) {
		r->prepare_from_start = strcmp(eq, "true") == 0;
	} else if (strcmp(line, "role") == 0) {
		if (strcmp(eq, "mirror") != 0 && strcmp(eq, "local") != 0)
			return KM_EMETAPROPS;
		r->role = eq[0] == 'm' ? KM_MSTATE_ROLE_MIRROR
				       : KM_MSTATE_ROLE_LOCAL;
	} else if (strcmp(line, "failed.reason") == 0) {
		snprintf(r->failed_reason, sizeof(r->failed_reason), "%s", eq);
	}
	return 0;
}

int km_mstate_load(const char *dir, struct km_mstate_rec *out)
{
	char path[4096], buf[2048], *line, *save = NULL;
	int fd, rc = 0;
	ssize_t n;

	memset(out, 0, sizeof(*out));
	out->last_mirrored_offset = -1;
	out->prepare_truncate_to = -1;
	snprintf(path, sizeof(path), "%s/%s", dir, KM_MSTATE_FILE);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return errno == ENOENT ? 0 : -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	out->exists = true;
	for (line = strtok_r(buf, "\n", &save); rc == 0 && line != NULL;
	     line = strtok_r(NULL, "\n", &save))
		rc = parse_line(line, out);
	if (out->role == KM_MSTATE_ROLE_NONE) /* before roles: mirror paths only */
		out->role = KM_MSTATE_ROLE_MIRROR;
	return rc;
}

/* One line: a reason may quote what a peer sent. */
static void one_line(char *dst, size_t cap, const char *src)
{
	size_t i = 0;

	for (; src[i] != '\0' && i + 1 < cap; i++)
		dst[i] = src[i] == '\n' || src[i] == '\r' ? ' ' : src[i];
	dst[i] = '\0';
}

int km_mstate_save(const char *dir, const struct km_mstate_rec *r)
{
	char buf[2048], reason[sizeof(r->failed_reason)];
	int n, fd, rc;

	one_line(reason, sizeof(reason), r->failed_reason);
	if (r->role == KM_MSTATE_ROLE_LOCAL) /* no mirror state to keep */
		n = snprintf(buf, sizeof(buf), "# created writable from "
			     "local.topics: local writes only\nrole=local\n");
	else
		n = snprintf(buf, sizeof(buf),
		     "state=%s\nstop.mode=%s\nsource.cluster.id=%s\n"
		     "last.mirrored.offset=%" PRId64 "\nsource=%s\n"
		     "prepare.truncate.to=%" PRId64 "\nprepare.from.start=%s\n"
		     "failed.reason=%s\nrole=mirror\n",
		     km_mstate_name(r->state), modes[r->stop_mode ? 1 : 0],
		     r->source_cluster_id, r->last_mirrored_offset, r->source,
		     r->prepare_truncate_to,
		     r->prepare_from_start ? "true" : "false", reason);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = km_file_write_atomic(fd, KM_MSTATE_FILE, buf, (size_t)n);
	close(fd);
	return rc;
}
