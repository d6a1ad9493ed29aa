/* Open files and memory for thousands of partitions (issue 17).
 *
 * Every partition keeps its directory and each segment's .log, .index and
 * .timeindex open (a .txnindex too once it holds an abort), and maps both
 * indexes of each segment. A default soft RLIMIT_NOFILE (1024) runs out
 * near 250 partitions, so at start the soft limit is raised to the hard
 * one, and what the partitions found on disk need is compared with it:
 * short, it is said once at start (an ERROR) and in status, rather than
 * as partitions failing one by one with EMFILE while they open or roll.
 * vm.max_map_count bounds the mappings the same way (Kafka's own
 * operations guide asks for it to be raised for many partitions).
 *
 * Memory: VmRSS of the process, shown with the per-partition average in
 * status and metrics, so that what a partition costs can be watched.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common/log.h"
#include "control/daemon_pvt.h"

/* Sockets and the rest, besides the partitions' files: each worker's
 * io_uring, eventfds, listeners and its clients (the front end takes up
 * to 1024 per worker), plus a margin for the control socket's clients,
 * source connections and the files a stop or a snapshot opens briefly. */
#define FDS_PER_WORKER (1024 + 16)
#define FDS_OTHER 256
/* A partition's directory and the active segment's three files; each
 * sealed segment adds three. */
#define FDS_PARTITION 4
#define FDS_SEGMENT 3
/* Mappings besides the logs': libraries, heaps, stacks, buffers. */
#define MAPS_OTHER 1024

/* Segments (.log files) in one partition's directory; 0 if none yet. */
static uint64_t count_segments(const char *data_dir, const struct km_part *p)
{
	char path[4096];
	struct dirent *e;
	uint64_t n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "%s/%s-%d", data_dir, p->topic,
		 p->partition);
	if ((dir = opendir(path)) == NULL)
		return 0;
	while ((e = readdir(dir)) != NULL) {
		size_t len = strlen(e->d_name);

		n += len > 4 && strcmp(e->d_name + len - 4, ".log") == 0;
	}
	closedir(dir);
	return n;
}

static uint64_t read_u64_file(const char *path)
{
	FILE *f = fopen(path, "r");
	unsigned long long v = 0;

	if (f == NULL)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

/* What the partitions found on disk need: files, and mappings (the
 * log's own, two index maps per segment). */
static void count_needs(struct km_daemon *d)
{
	uint64_t fds = FDS_OTHER + (uint64_t)d->n_workers * FDS_PER_WORKER;
	uint64_t maps = MAPS_OTHER;

	for (uint32_t i = 0; i < d->table.n; i++) {
		uint64_t segs = count_segments(d->cfg->data_dir,
					       &d->table.parts[i]);

		segs = segs ? segs : 1;
		fds += FDS_PARTITION + FDS_SEGMENT * (segs - 1);
		maps += 1 + 2 * segs;
	}
	d->scale.nofile_need = fds;
	d->scale.maps_need = maps;
}

static void raise_nofile(struct km_daemon *d)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	d->scale.nofile_was = d->scale.nofile = (uint64_t)rl.rlim_cur;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
			d->scale.nofile = (uint64_t)rl.rlim_cur;
	}
}

int km_daemon_scale_init(struct km_daemon *d)
{
	struct km_daemon_scale *s = &d->scale;

	raise_nofile(d);
	count_needs(d);
	s->maps_max = read_u64_file("/proc/sys/vm/max_map_count");
	KM_INFO("daemon", "open files: limit %" PRIu64 " (was %" PRIu64
		"); %u partitions and %u workers need about %" PRIu64,
		s->nofile, s->nofile_was, d->table.n, d->n_workers,
		s->nofile_need);
	if (s->nofile < s->nofile_need)
		KM_ERROR("daemon", "open files: the limit %" PRIu64 " is short "
			 "of the %" PRIu64 " that %u partitions need (4 each, 3 "
			 "more per sealed segment, and sockets): partitions will "
			 "fail with 'Too many open files' as they open or roll; "
			 "raise the hard limit (LimitNOFILE=, ulimit -Hn, "
			 "/etc/security/limits.conf)", s->nofile,
			 s->nofile_need, d->table.n);
	if (s->maps_max != 0 && s->maps_max < s->maps_need)
		KM_ERROR("daemon", "memory maps: vm.max_map_count %" PRIu64
			 " is short of the %" PRIu64 " that %u partitions need "
			 "(1 each, 2 per segment): raise it (sysctl "
			 "vm.max_map_count=262144)", s->maps_max, s->maps_need,
			 d->table.n);
	return 0;
}

/* VmRSS of this process in bytes (0 if unknown). */
static uint64_t resident_bytes(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long kb = 0;

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

static uint64_t open_files(void)
{
	DIR *dir = opendir("/proc/self/fd");
	uint64_t n = 0;

	if (dir == NULL)
		return 0;
	while (readdir(dir) != NULL)
		n++;
	closedir(dir);
	return n > 3 ? n - 3 : 0; /* ".", ".." and the DIR's own */
}

/* How the .log files are written (log.direct.io and what the filesystem
 * took, iouring_log/log_dio.c). */
static const char *log_writes(void)
{
	switch (km_log_direct_io_mode()) {
	case KM_LOG_DIO_ON:
		return "direct";
	case KM_LOG_DIO_OFF:
		return "buffered (log.direct.io=false)";
	case KM_LOG_DIO_REFUSED:
		return "buffered (filesystem without direct I/O)";
	default:
		return "none yet";
	}
}

void km_daemon_scale_status(struct km_daemon *d, json_t *resp)
{
	const struct km_daemon_scale *s = &d->scale;
	uint64_t rss = resident_bytes();
	uint32_t n = d->table.n ? d->table.n : 1;

	json_object_set_new(resp, "resources", json_pack(
		"{s:I, s:I, s:I, s:I, s:I, s:b, s:I, s:I, s:s}",
		"resident_bytes", (json_int_t)rss,
		"resident_bytes_per_partition", (json_int_t)(rss / n),
		"open_files", (json_int_t)open_files(),
		"open_files_limit", (json_int_t)s->nofile,
		"open_files_needed", (json_int_t)s->nofile_need,
		"open_files_short", s->nofile < s->nofile_need,
		"max_map_count", (json_int_t)s->maps_max,
		"maps_needed", (json_int_t)s->maps_need,
		"log_writes", log_writes()));
}

char *km_daemon_scale_metrics(struct km_daemon *d)
{
	uint64_t rss = resident_bytes();
	uint32_t n = d->table.n ? d->table.n : 1;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (f == NULL)
		return NULL;
	fprintf(f, "# HELP kmirror_resident_bytes Resident memory of kmirrord "
		   "(VmRSS).\n# TYPE kmirror_resident_bytes gauge\n"
		   "kmirror_resident_bytes %" PRIu64 "\n"
		   "# HELP kmirror_resident_bytes_per_partition Resident memory "
		   "over the partitions held.\n"
		   "# TYPE kmirror_resident_bytes_per_partition gauge\n"
		   "kmirror_resident_bytes_per_partition %" PRIu64 "\n"
		   "# HELP kmirror_open_files Open file descriptors.\n"
		   "# TYPE kmirror_open_files gauge\nkmirror_open_files %" PRIu64
		   "\n# HELP kmirror_open_files_limit RLIMIT_NOFILE (raised to "
		   "the hard limit at start).\n"
		   "# TYPE kmirror_open_files_limit gauge\n"
		   "kmirror_open_files_limit %" PRIu64 "\n"
		   "# HELP kmirror_open_files_needed What the partitions found "
		   "at start and the sockets need.\n"
		   "# TYPE kmirror_open_files_needed gauge\n"
		   "kmirror_open_files_needed %" PRIu64 "\n",
		rss, rss / n, open_files(), d->scale.nofile,
		d->scale.nofile_need);
	fclose(f);
	return buf;
}
