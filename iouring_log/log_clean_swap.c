/* Replacing a segment with its cleaned copy, as Kafka's cleaner does
 * (LogSegment .cleaned -> .swap -> the segment's own names):
 *
 * 1. The copy is written in <dir>/cleaner.tmp/ under the segment's names
 *    (Kafka's .cleaned stage): a crash there leaves the log as it was and
 *    an open deletes the directory.
 * 2. Each file is renamed into the log dir as <name>.swap, the .log last:
 *    <base>.log.swap existing is the commit point. An open that finds it
 *    finishes the swap; .swap files without it are deleted (rolled back).
 *    The copy always has a .txnindex (empty when it has no entry) so that
 *    a swap finished twice cannot take the old one for the new one.
 * 3. Each .swap is renamed over the segment's file, the .log last; an
 *    empty .txnindex is then removed.
 * 4. The new files are opened and put in the log's array under the
 *    exclusive segment lock, as retention does: a read in flight finishes
 *    on the old segment's descriptors and maps (the renames left their
 *    inodes alive), which are closed after. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/log.h"
#include "iouring_log/log_clean_pvt.h"

static const char *const sfx[] = { ".index", ".timeindex", ".txnindex",
				   ".log" };

static void name_of(char *out, size_t cap, int64_t base, const char *suffix,
		    const char *tail)
{
	snprintf(out, cap, "%020lld%s%s", (long long)base, suffix, tail);
}

/* Step 3 and an open's roll forward. */
static int finish_swap(int dir_fd, int64_t base)
{
	char from[64], to[64];
	struct stat st;

	for (int k = 0; k < 4; k++) {
		name_of(from, sizeof(from), base, sfx[k], ".swap");
		name_of(to, sizeof(to), base, sfx[k], "");
		if (renameat(dir_fd, from, dir_fd, to) < 0 && errno != ENOENT)
			return -errno;
		/* The indexes must not be older than the .log after a crash. */
		if (k == 2 && fsync(dir_fd) < 0)
			return -errno;
	}
	name_of(to, sizeof(to), base, sfx[2], "");
	if (fstatat(dir_fd, to, &st, 0) == 0 && st.st_size == 0 &&
	    unlinkat(dir_fd, to, 0) < 0)
		return -errno;
	return fsync(dir_fd) < 0 ? -errno : 0;
}

/* Step 2. */
static int stage_swap(struct km_log *log, int tmp_fd, int64_t base)
{
	char from[64], to[64];
	int fd;

	name_of(from, sizeof(from), base, sfx[2], "");
	fd = openat(tmp_fd, from, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0 || fsync(tmp_fd) < 0)
		return fd < 0 ? -errno : (close(fd), -errno);
	close(fd);
	for (int k = 0; k < 4; k++) {
		name_of(from, sizeof(from), base, sfx[k], "");
		name_of(to, sizeof(to), base, sfx[k], ".swap");
		if (renameat(tmp_fd, from, log->dir_fd, to) < 0)
			return -errno;
		/* The .log.swap must not be durable before the others. */
		if (k == 2 && fsync(log->dir_fd) < 0)
			return -errno;
	}
	return fsync(log->dir_fd) < 0 ? -errno : 0;
}

#ifdef KM_TEST_HOOKS
/* Tests: stop a swap after this step (2: committed, 3: files renamed). */
int km_log_clean_test_stop_after = 0;
#define STOP_AFTER(step)                                                     \
	do {                                                                 \
		if (km_log_clean_test_stop_after == (step))                  \
			return -EINTR;                                 \
	} while (0)
#else
#define STOP_AFTER(step) ((void)0)
#endif

int km_log_clean_swap(struct km_log *log, uint32_t i, int tmp_fd)
{
	struct km_segment ns, old;
	int64_t base = log->segs[i].base_offset;
	int rc;

	if ((rc = stage_swap(log, tmp_fd, base)) < 0)
		return rc;
	STOP_AFTER(2);
	if ((rc = finish_swap(log->dir_fd, base)) < 0)
		return rc;
	STOP_AFTER(3);
	rc = km_segment_open(&ns, log->dir_fd, base, log->cfg.index_bytes_max,
			     false);
	if (rc < 0)
		return rc;
	ns.next_offset = log->segs[i].next_offset;
	km_log_lock_segments(log);
	old = log->segs[i];
	log->segs[i] = ns;
	km_log_unlock_segments(log);
	km_segment_close(&old);
	return 0;
}

int km_log_clean_tmpdir(struct km_log *log, int *fd)
{
	if (mkdirat(log->dir_fd, KM_CLEAN_DIR, 0755) < 0 && errno != EEXIST)
		return -errno;
	*fd = openat(log->dir_fd, KM_CLEAN_DIR,
		     O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*fd < 0)
		return -errno;
	return fsync(log->dir_fd) < 0 ? -errno : 0;
}

/* Step 1 undone: the copies not committed yet. */
static int drop_tmpdir(struct km_log *log)
{
	int fd = openat(log->dir_fd, KM_CLEAN_DIR,
			O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		return errno == ENOENT ? 0 : -errno;
	}
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			(void)unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	if (unlinkat(log->dir_fd, KM_CLEAN_DIR, AT_REMOVEDIR) < 0)
		return -errno;
	return fsync(log->dir_fd) < 0 ? -errno : 0;
}

/* Step 2 undone: .swap files of a swap whose .log.swap never came. */
static int drop_swaps(struct km_log *log)
{
	int64_t bases[64];

	for (int k = 0; k < 3; k++) {
		char suffix[32], name[64];
		int n;

		snprintf(suffix, sizeof(suffix), "%s.swap", sfx[k]);
		do {
			n = km_log_list_files(log, suffix, bases, 64, true, NULL);
			for (int j = 0; j < n; j++) {
				name_of(name, sizeof(name), bases[j], sfx[k],
					".swap");
				if (unlinkat(log->dir_fd, name, 0) < 0)
					return -errno;
			}
		} while (n == 64);
		if (n < 0)
			return n;
	}
	return 0;
}

int km_log_clean_redo(struct km_log *log)
{
	int64_t bases[64];
	int n, rc = drop_tmpdir(log);

	if (rc < 0)
		return rc;
	do {
		n = km_log_list_files(log, ".log.swap", bases, 64, true, NULL);
		for (int j = 0; j < n; j++) {
			KM_WARN("log", "%s: finishing the swap of cleaned segment "
				"%lld that the last run began", log->dir,
				(long long)bases[j]);
			if ((rc = finish_swap(log->dir_fd, bases[j])) < 0)
				return rc;
		}
	} while (n == 64);
	if (n < 0)
		return n;
	return drop_swaps(log);
}
