/* Open files and memory for thousands of partitions (issue 17).
 *
 * A partition holds its directory and each segment's .log, .index and
 * .timeindex open (a .txnindex too once it holds an abort), and maps both
 * indexes of each segment; past the budget below, the directory and
 * index descriptors of the least recently used go first (log_files.c), so
 * what the partitions need is each segment's .log and the active one's
 * O_DIRECT twin. A default soft RLIMIT_NOFILE (1024) runs out
 * near 250 partitions, so at start the soft limit is raised to the hard
 * one, and the hard one too, as far as what the partitions found on disk
 * need (up to fs.nr_open), where the process may (CAP_SYS_RESOURCE). What
 * is left after the sockets is the logs' budget (km_log_files_set_max):
 * past it the least recently used partitions shed their directory and
 * index descriptors, then idle ones close their files and open them again
 * on use, so more partitions than fit still run. It is said once at start when the limit is short
 * of what all would hold, and status shows the budget and its use.
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
#include "iouring_log/log.h"

/* Sockets and the rest, besides the partitions' files: each worker's
 * io_uring, eventfds, listeners and its clients (the front end takes up
 * to 1024 per worker), plus a margin for the control socket's clients,
 * source connections and the files a stop or a snapshot opens briefly. */
#define FDS_PER_WORKER (1024 + 16)
#define FDS_OTHER 256
/* The active segment's .log and its O_DIRECT twin; each sealed segment
 * adds its .log. */
#define FDS_PARTITION 2
#define FDS_SEGMENT 1
/* Mappings besides the logs': libraries, heaps, stacks, buffers. */
#define MAPS_OTHER 1024
/* The logs' budget never goes below this: a few dozen partitions open. */
#define FDS_LOGS_MIN 128

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

/* Past the hard limit, up to what is needed: only with CAP_SYS_RESOURCE,
 * and never past fs.nr_open (setrlimit's EPERM). */
static void raise_hard(struct km_daemon *d, struct rlimit *rl)
{
	uint64_t want = d->scale.nofile_need;
	uint64_t nr_open = read_u64_file("/proc/sys/fs/nr_open");
	struct rlimit up;

	if (nr_open != 0 && want > nr_open)
		want = nr_open;
	if (want <= (uint64_t)rl->rlim_max)
		return;
	up.rlim_cur = up.rlim_max = (rlim_t)want;
	if (setrlimit(RLIMIT_NOFILE, &up) == 0) {
		KM_INFO("daemon", "open files: hard limit raised from %llu to "
			"%llu", (unsigned long long)rl->rlim_max,
			(unsigned long long)want);
		*rl = up;
	}
}

static void raise_nofile(struct km_daemon *d)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	d->scale.nofile_was = d->scale.nofile = (uint64_t)rl.rlim_cur;
	raise_hard(d, &rl);
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
			d->scale.nofile = (uint64_t)rl.rlim_cur;
	} else {
		d->scale.nofile = (uint64_t)rl.rlim_cur;
	}
}

/* What the sockets leave to the logs. */
static void set_budget(struct km_daemon *d)
{
	struct km_daemon_scale *s = &d->scale;
	uint64_t other = FDS_OTHER + (uint64_t)d->n_workers * FDS_PER_WORKER;

	s->files_budget = s->nofile > other + FDS_LOGS_MIN ? s->nofile - other
							   : FDS_LOGS_MIN;
	km_log_files_set_max(s->files_budget);
}

int km_daemon_scale_init(struct km_daemon *d)
{
	struct km_daemon_scale *s = &d->scale;

	count_needs(d);
	raise_nofile(d);
	set_budget(d);
	s->maps_max = read_u64_file("/proc/sys/vm/max_map_count");
	KM_INFO("daemon", "open files: limit %" PRIu64 " (was %" PRIu64
		"); %u partitions and %u workers need about %" PRIu64
		"; the logs' budget is %" PRIu64, s->nofile, s->nofile_was,
		d->table.n, d->n_workers, s->nofile_need, s->files_budget);
	if (s->nofile < s->nofile_need)
		KM_WARN("daemon", "open files: the limit %" PRIu64 " is short "
			"of the %" PRIu64 " that %u partitions would hold open "
			"(4 each, 3 more per sealed segment, and sockets): past "
			"%" PRIu64 " for the logs, the least recently used idle "
			"partitions close their files and open them again on "
			"use; raise the hard limit (LimitNOFILE=, ulimit -Hn) "
			"to keep them all open", s->nofile, s->nofile_need,
			d->table.n, s->files_budget);
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

	struct km_log_files_stats lf;
	json_t *res;

	km_log_files_get_stats(&lf);
	res = json_pack("{s:I, s:I, s:I, s:I, s:I, s:b, s:I, s:I, s:s}",
		"resident_bytes", (json_int_t)rss,
		"resident_bytes_per_partition", (json_int_t)(rss / n),
		"open_files", (json_int_t)open_files(),
		"open_files_limit", (json_int_t)s->nofile,
		"open_files_needed", (json_int_t)s->nofile_need,
		"open_files_short", s->nofile < s->nofile_need,
		"max_map_count", (json_int_t)s->maps_max,
		"maps_needed", (json_int_t)s->maps_need,
		"log_writes", log_writes());
	json_object_update_missing_new(res, json_pack(
		"{s:I, s:I, s:I, s:I, s:I, s:I}",
		"log_files_budget", (json_int_t)lf.max,
		"log_files_held", (json_int_t)lf.held,
		"logs_with_files_closed", (json_int_t)lf.closed_logs,
		"log_files_closes", (json_int_t)lf.releases,
		"log_files_reopens", (json_int_t)lf.reopens,
		"log_dir_reopens", (json_int_t)lf.unsheds));
	/* Logs holding write memory (KM_LOG_IDLE_MS after their last write
	 * they give it back): what an idle partition's memory waits for. */
	json_object_set_new(res, "logs_awake",
			    json_integer((json_int_t)km_log_awake_count()));
	json_object_set_new(resp, "resources", res);
}

char *km_daemon_scale_metrics(struct km_daemon *d)
{
	uint64_t rss = resident_bytes();
	uint32_t n = d->table.n ? d->table.n : 1;
	struct km_log_files_stats lf;
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
	km_log_files_get_stats(&lf);
	fprintf(f, "# HELP kmirror_log_files_budget Descriptors the partition "
		   "logs may hold; past it cold ones close their files.\n"
		   "# TYPE kmirror_log_files_budget gauge\n"
		   "kmirror_log_files_budget %" PRIu64 "\n"
		   "# HELP kmirror_logs_with_files_closed Partition logs whose "
		   "files are closed now.\n"
		   "# TYPE kmirror_logs_with_files_closed gauge\n"
		   "kmirror_logs_with_files_closed %" PRIu64 "\n"
		   "# HELP kmirror_log_files_reopens_total Times a cold log's "
		   "files were opened again for a use.\n"
		   "# TYPE kmirror_log_files_reopens_total counter\n"
		   "kmirror_log_files_reopens_total %" PRIu64 "\n",
		lf.max, lf.closed_logs, lf.reopens);
	fclose(f);
	return buf;
}
