/* lossyfs: a FUSE filesystem that loses what was not synced, for power-loss
 * tests (the way Jepsen's LazyFS does).
 *
 *   lossyfs BACKING MOUNTPOINT
 *
 * It passes every operation through to the directory BACKING at once, and
 * remembers how to take it back:
 *  - data: per file (backing inode), the size at its last fsync/fdatasync
 *    and the pre-image of every byte below that size changed since (write,
 *    truncate, hole punch, and so shared mmap pages the kernel writes back);
 *    a fsync or fdatasync of the file forgets them (durable);
 *  - names: a journal of creations (create, mkdir, mknod, link, symlink),
 *    removals (unlink, rmdir: the entry is moved into a hidden grave, not
 *    deleted) and renames (with the grave of a replaced target); a fsync of
 *    a directory makes durable its own entries and the renames into or out
 *    of it, nothing else. Neither a file's fsync nor a new directory's own
 *    fsync makes its name durable: POSIX asks for a fsync of the parent.
 *    ext4, XFS and btrfs are kinder (a fsync commits a journal holding
 *    earlier operations too); this is stricter so that a missing directory
 *    fsync shows whatever the order of the others.
 * SIGUSR1 is the power cut: lossyfs stops serving (requests in the kernel's
 * queue never land), puts back every file's synced size and pre-images,
 * undoes the journal newest first, empties the grave and unmounts; BACKING
 * then holds what a disk would after the cut. SIGTERM/SIGINT unmount with
 * everything kept (a clean shutdown). It prints "mounted" when it serves,
 * one line per cut, and exits non-zero if a limit was hit (the fs refused an
 * operation, so a test cannot pass through it) or a restore failed.
 * BACKING itself is never synced: the cut is modelled here, not by the
 * machine. One thread serves every request, so the records need no lock.
 * The journal holds paths: an entry under a directory that is renamed
 * later is undone under its old path only if that rename is undone first
 * (kmirror renames files, never directories).
 */
#define FUSE_USE_VERSION 31

#include <fuse.h>
#include <fuse_lowlevel.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Pre-image bytes held at once; a test writing more between syncs is told
 * (EIO and a non-zero exit) rather than given a partial model. */
#define UNDO_BYTES_MAX (256ull << 20)
/* Files with unsynced changes at once. */
#define FILES_MAX 4096
/* Namespace operations not yet made durable by a directory fsync. */
#define JOURNAL_MAX 65536
/* Depth of a tree removed when an unsynced mkdir is undone. */
#define TREE_DEPTH_MAX 16
#define GRAVE ".lossyfs-grave"

struct preimage {
	off_t off;
	size_t len;
	char *data;
};

/* A file changed since its last sync. fd is lossyfs's own O_RDWR handle,
 * so the restore reaches the inode whatever names it has by then. */
struct ufile {
	dev_t dev;
	ino_t ino;
	int fd;
	off_t synced_size;
	struct preimage *pre; /* sorted by off, disjoint */
	size_t npre, cap;
};

enum jop { J_CREATE, J_UNLINK, J_RENAME };

/* Paths are relative to BACKING ("." for its root). */
struct jentry {
	enum jop op;
	char *dir, *name;   /* created, removed, or renamed from */
	char *dir2, *name2; /* renamed to */
	char *grave;	    /* the removed entry, or the replaced target */
};

static int back = -1;
static struct ufile files[FILES_MAX];
static size_t nfiles;
static unsigned long long undo_bytes;
static struct jentry journal[JOURNAL_MAX];
static size_t njournal;
static unsigned long grave_seq;
static bool limit_hit;
static volatile sig_atomic_t cut_asked;
static struct fuse *fs;

static const char *rel(const char *path)
{
	return path[1] != '\0' ? path + 1 : ".";
}

static bool hidden(const char *path)
{
	return strncmp(path, "/" GRAVE, sizeof(GRAVE)) == 0 &&
	       (path[sizeof(GRAVE)] == '\0' || path[sizeof(GRAVE)] == '/');
}

static void over_limit(const char *what)
{
	if (!limit_hit)
		fprintf(stderr, "lossyfs: %s: limit reached, refusing\n", what);
	limit_hit = true;
}

/* ---- data: pre-images of what changed since the last sync ---------- */

static struct ufile *find_file(int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return NULL;
	for (size_t i = 0; i < nfiles; i++)
		if (files[i].dev == st.st_dev && files[i].ino == st.st_ino)
			return &files[i];
	return NULL;
}

/* The record of fd's file, made on its first change since a sync: the
 * size now is the synced size, as nothing changed it since. */
static struct ufile *track(int fd)
{
	struct ufile *u = find_file(fd);
	struct stat st;
	char proc[64];

	if (u != NULL)
		return u;
	if (nfiles == FILES_MAX) {
		over_limit("files with unsynced data");
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return NULL;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	u = &files[nfiles];
	*u = (struct ufile){ .dev = st.st_dev, .ino = st.st_ino,
			     .synced_size = st.st_size };
	u->fd = open(proc, O_RDWR | O_CLOEXEC);
	if (u->fd < 0)
		return NULL;
	nfiles++;
	return u;
}

static void forget(struct ufile *u)
{
	for (size_t i = 0; i < u->npre; i++) {
		undo_bytes -= u->pre[i].len;
		free(u->pre[i].data);
	}
	free(u->pre);
	close(u->fd);
	*u = files[--nfiles];
}

static bool all_zero(const char *p, size_t n)
{
	return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

/* Keep the current bytes [a, b) at index i of the sorted records. */
static int keep(struct ufile *u, size_t i, off_t a, off_t b, bool skip_zero)
{
	size_t n = (size_t)(b - a);
	char *data;
	ssize_t got;

	if (undo_bytes + n > UNDO_BYTES_MAX) {
		over_limit("pre-image bytes");
		return -EIO;
	}
	if ((data = calloc(1, n)) == NULL)
		return -ENOMEM;
	got = pread(u->fd, data, n, a); /* short past the end: zeros */
	if (got < 0 || (skip_zero && all_zero(data, n))) {
		free(data);
		return got < 0 ? -errno : 0;
	}
	if (u->npre == u->cap) {
		size_t cap = u->cap ? 2 * u->cap : 16;
		struct preimage *p = realloc(u->pre, cap * sizeof(*p));
		if (p == NULL) {
			free(data);
			return -ENOMEM;
		}
		u->pre = p;
		u->cap = cap;
	}
	memmove(&u->pre[i + 1], &u->pre[i], (u->npre - i) * sizeof(*u->pre));
	u->pre[i] = (struct preimage){ a, n, data };
	u->npre++;
	undo_bytes += n;
	return 1;
}

/* Pre-images of [a, b) below the synced size, only for bytes no record
 * covers yet: the oldest pre-image is the synced content. skip_zero: the
 * range reads as zeros afterwards (truncated, punched), so zero chunks need
 * no record. */
static int record(struct ufile *u, off_t a, off_t b, bool skip_zero)
{
	const off_t chunk = 1 << 16;
	size_t i = 0;

	if (b > u->synced_size)
		b = u->synced_size;
	while (a < b) {
		while (i < u->npre && u->pre[i].off + (off_t)u->pre[i].len <= a)
			i++;
		if (i < u->npre && u->pre[i].off <= a) {
			a = u->pre[i].off + (off_t)u->pre[i].len;
			continue;
		}
		off_t end = i < u->npre && u->pre[i].off < b ? u->pre[i].off : b;
		if (skip_zero && end - a > chunk)
			end = a + chunk;
		int rc = keep(u, i, a, end, skip_zero);
		if (rc < 0)
			return rc;
		i += (size_t)rc;
		a = end;
	}
	return 0;
}

static int change_size(int fd, off_t size)
{
	struct ufile *u = track(fd);
	struct stat st;
	int rc;

	if (u == NULL)
		return -EIO;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (size < st.st_size && (rc = record(u, size, st.st_size, true)) < 0)
		return rc;
	return ftruncate(fd, size) < 0 ? -errno : 0;
}

/* ---- names: the journal of namespace operations -------------------- */

static char *dup_dir(const char *r)
{
	const char *slash = strrchr(r, '/');

	return slash ? strndup(r, (size_t)(slash - r)) : strdup(".");
}

static char *dup_base(const char *r)
{
	const char *slash = strrchr(r, '/');

	return strdup(slash ? slash + 1 : r);
}

static int log_op(enum jop op, const char *r, const char *r2, char *grave)
{
	struct jentry *e;

	if (njournal == JOURNAL_MAX) {
		over_limit("journal entries");
		free(grave);
		return -EIO;
	}
	e = &journal[njournal++];
	*e = (struct jentry){ .op = op, .dir = dup_dir(r), .name = dup_base(r),
			      .grave = grave };
	if (r2 != NULL) {
		e->dir2 = dup_dir(r2);
		e->name2 = dup_base(r2);
	}
	return 0;
}

/* Move r into the grave; its new name there. */
static char *bury(const char *r)
{
	char *g;

	if (asprintf(&g, GRAVE "/%lu", ++grave_seq) < 0)
		return NULL;
	if (renameat(back, r, back, g) < 0) {
		int e = errno;
		free(g);
		errno = e;
		return NULL;
	}
	return g;
}

/* rm -r of r under BACKING, bounded in depth. */
static void remove_tree(const char *r, int depth)
{
	DIR *d;
	struct dirent *de;
	int fd;

	if (unlinkat(back, r, 0) == 0 || errno != EISDIR || depth == 0)
		return;
	fd = openat(back, r, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0 && (d = fdopendir(fd)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			char *c;
			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0 ||
			    asprintf(&c, "%s/%s", r, de->d_name) < 0)
				continue;
			remove_tree(c, depth - 1);
			free(c);
		}
		closedir(d);
	} else if (fd >= 0) {
		close(fd);
	}
	unlinkat(back, r, AT_REMOVEDIR);
}

static void drop(struct jentry *e, bool delete_grave)
{
	if (delete_grave && e->grave != NULL)
		remove_tree(e->grave, TREE_DEPTH_MAX);
	free(e->dir);
	free(e->name);
	free(e->dir2);
	free(e->name2);
	free(e->grave);
}

static bool made_durable(const struct jentry *e, const char *d)
{
	if (strcmp(e->dir, d) == 0)
		return true;
	return e->op == J_RENAME && strcmp(e->dir2, d) == 0;
}

/* fsync of directory d: its entries are durable, their graves deleted. */
static void sync_dir(const char *d)
{
	size_t k = 0;

	for (size_t i = 0; i < njournal; i++) {
		if (made_durable(&journal[i], d))
			drop(&journal[i], true);
		else
			journal[k++] = journal[i];
	}
	njournal = k;
}

/* ---- the operations ------------------------------------------------- */

static int neg(int rc)
{
	return rc < 0 ? -errno : 0;
}

static int op_getattr(const char *path, struct stat *st,
		      struct fuse_file_info *fi)
{
	if (fi != NULL)
		return neg(fstat((int)fi->fh, st));
	if (hidden(path))
		return -ENOENT;
	return neg(fstatat(back, rel(path), st, AT_SYMLINK_NOFOLLOW));
}

/* A directory handle is its path: with nullpath_ok, readdir and fsyncdir
 * get none of their own. The open ones are listed, so that those the
 * kernel had not released at a cut are freed too. */
struct dirh {
	struct dirh *prev, *next;
	char path[];
};

static struct dirh dirs = { &dirs, &dirs };

static int op_opendir(const char *path, struct fuse_file_info *fi)
{
	struct dirh *h = malloc(sizeof(*h) + strlen(path) + 1);

	if (h == NULL)
		return -ENOMEM;
	strcpy(h->path, path);
	h->next = dirs.next;
	h->prev = &dirs;
	dirs.next->prev = h;
	dirs.next = h;
	fi->fh = (uint64_t)(uintptr_t)h;
	return 0;
}

static const char *dir_path(const char *path, struct fuse_file_info *fi)
{
	return fi != NULL ? ((struct dirh *)(uintptr_t)fi->fh)->path : path;
}

static void dir_free(struct dirh *h)
{
	h->prev->next = h->next;
	h->next->prev = h->prev;
	free(h);
}

static int op_releasedir(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	dir_free((struct dirh *)(uintptr_t)fi->fh);
	return 0;
}

static int op_readdir(const char *p, void *buf, fuse_fill_dir_t fill,
		      off_t off, struct fuse_file_info *fi,
		      enum fuse_readdir_flags flags)
{
	const char *path = dir_path(p, fi);
	int fd = openat(back, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	bool root = strcmp(path, "/") == 0;
	struct dirent *de;
	DIR *d;

	(void)off;
	(void)flags;
	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return -e;
	}
	while ((de = readdir(d)) != NULL)
		if (!(root && strcmp(de->d_name, GRAVE) == 0))
			fill(buf, de->d_name, NULL, 0, 0);
	closedir(d);
	return 0;
}

static int op_mkdir(const char *path, mode_t mode)
{
	if (mkdirat(back, rel(path), mode) < 0)
		return -errno;
	return log_op(J_CREATE, rel(path), NULL, NULL);
}

static int op_mknod(const char *path, mode_t mode, dev_t dev)
{
	if (mknodat(back, rel(path), mode, dev) < 0)
		return -errno;
	return log_op(J_CREATE, rel(path), NULL, NULL);
}

static int op_symlink(const char *target, const char *path)
{
	if (symlinkat(target, back, rel(path)) < 0)
		return -errno;
	return log_op(J_CREATE, rel(path), NULL, NULL);
}

static int op_link(const char *from, const char *to)
{
	if (linkat(back, rel(from), back, rel(to), 0) < 0)
		return -errno;
	return log_op(J_CREATE, rel(to), NULL, NULL);
}

static int op_readlink(const char *path, char *buf, size_t size)
{
	ssize_t n = readlinkat(back, rel(path), buf, size - 1);

	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

static bool dir_empty(const char *r)
{
	int fd = openat(back, r, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	int n = 0;
	DIR *d;

	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	while ((de = readdir(d)) != NULL && n == 0)
		n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	closedir(d);
	return n == 0;
}

static int remove_entry(const char *path, bool is_dir)
{
	struct stat st;
	char *g;

	if (fstatat(back, rel(path), &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (is_dir != S_ISDIR(st.st_mode))
		return is_dir ? -ENOTDIR : -EISDIR;
	if (is_dir && !dir_empty(rel(path)))
		return -ENOTEMPTY;
	if ((g = bury(rel(path))) == NULL)
		return -errno;
	return log_op(J_UNLINK, rel(path), NULL, g);
}

static int op_unlink(const char *path)
{
	return remove_entry(path, false);
}

static int op_rmdir(const char *path)
{
	return remove_entry(path, true);
}

static int op_rename(const char *from, const char *to, unsigned int flags)
{
	struct stat st, sf;
	char *g = NULL;

	if (flags & ~RENAME_NOREPLACE)
		return -EINVAL;
	if (fstatat(back, rel(from), &sf, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (fstatat(back, rel(to), &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (flags & RENAME_NOREPLACE)
			return -EEXIST;
		if (S_ISDIR(st.st_mode) && !dir_empty(rel(to)))
			return -ENOTEMPTY;
		if (S_ISDIR(st.st_mode) != S_ISDIR(sf.st_mode))
			return S_ISDIR(st.st_mode) ? -EISDIR : -ENOTDIR;
		if ((g = bury(rel(to))) == NULL)
			return -errno;
	}
	if (renameat(back, rel(from), back, rel(to)) < 0) {
		int e = errno;
		if (g != NULL)
			renameat(back, g, back, rel(to));
		free(g);
		return -e;
	}
	return log_op(J_RENAME, rel(from), rel(to), g);
}

static int op_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	if (fi != NULL)
		return neg(fchmod((int)fi->fh, mode));
	return neg(fchmodat(back, rel(path), mode, 0));
}

static int op_chown(const char *path, uid_t uid, gid_t gid,
		    struct fuse_file_info *fi)
{
	if (fi != NULL)
		return neg(fchown((int)fi->fh, uid, gid));
	return neg(fchownat(back, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW));
}

static int op_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	int fd, rc;

	if (fi != NULL)
		return change_size((int)fi->fh, size);
	if ((fd = openat(back, rel(path), O_RDWR | O_CLOEXEC)) < 0)
		return -errno;
	rc = change_size(fd, size);
	close(fd);
	return rc;
}

static int op_utimens(const char *path, const struct timespec tv[2],
		      struct fuse_file_info *fi)
{
	if (fi != NULL)
		return neg(futimens((int)fi->fh, tv));
	return neg(utimensat(back, rel(path), tv, AT_SYMLINK_NOFOLLOW));
}

/* The backing file is always opened read-write and without O_APPEND or
 * O_DIRECT: the kernel gives every write its offset, and writes back
 * shared mmap pages through any open handle. */
static int open_flags(int flags)
{
	flags &= ~(O_APPEND | O_DIRECT | O_TRUNC | O_ACCMODE | O_CREAT | O_EXCL);
	return flags | O_RDWR | O_CLOEXEC;
}

static int opened(struct fuse_file_info *fi, int fd)
{
	int rc;

	if (fd < 0)
		return -errno;
	if ((fi->flags & O_TRUNC) && (rc = change_size(fd, 0)) < 0) {
		close(fd);
		return rc;
	}
	fi->fh = (uint64_t)fd;
	fi->keep_cache = 0;
	fi->direct_io = 0;
	return 0;
}

static int op_open(const char *path, struct fuse_file_info *fi)
{
	return opened(fi, openat(back, rel(path), open_flags(fi->flags)));
}

static int op_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	struct stat st;
	bool existed = fstatat(back, rel(path), &st, 0) == 0;
	int fd = openat(back, rel(path),
			open_flags(fi->flags) | O_CREAT | (fi->flags & O_EXCL),
			mode);
	int rc;

	if (fd >= 0 && !existed && (rc = log_op(J_CREATE, rel(path), NULL,
						  NULL)) < 0) {
		close(fd);
		return rc;
	}
	return opened(fi, fd);
}

static int op_read(const char *path, char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	ssize_t n = pread((int)fi->fh, buf, size, off);

	(void)path;
	return n < 0 ? -errno : (int)n;
}

static int op_write(const char *path, const char *buf, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct ufile *u = track((int)fi->fh);
	ssize_t n;
	int rc;

	(void)path;
	if (u == NULL)
		return -EIO;
	if ((rc = record(u, off, off + (off_t)size, false)) < 0)
		return rc;
	n = pwrite((int)fi->fh, buf, size, off);
	return n < 0 ? -errno : (int)n;
}

static int op_fallocate(const char *path, int mode, off_t off, off_t len,
			struct fuse_file_info *fi)
{
	struct ufile *u = track((int)fi->fh);
	int rc;

	(void)path;
	if (u == NULL)
		return -EIO;
	if (mode & (FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE))
		return -EOPNOTSUPP;
	if ((mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) &&
	    (rc = record(u, off, off + len, true)) < 0)
		return rc;
	return neg(fallocate((int)fi->fh, mode, off, len));
}

/* fsync and fdatasync alike make the file's data and size durable. */
static int op_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	struct ufile *u = find_file((int)fi->fh);

	(void)path;
	(void)datasync;
	if (u != NULL)
		forget(u);
	return 0;
}

static int op_fsyncdir(const char *path, int datasync,
		       struct fuse_file_info *fi)
{
	(void)datasync;
	sync_dir(rel(dir_path(path, fi)));
	return 0;
}

static int op_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	close((int)fi->fh);
	return 0;
}

static int op_statfs(const char *path, struct statvfs *sv)
{
	(void)path;
	return neg(fstatvfs(back, sv));
}

static int op_access(const char *path, int mask)
{
	return neg(faccessat(back, rel(path), mask, AT_SYMLINK_NOFOLLOW));
}

static void *op_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	/* Write-through: a write reaches lossyfs (and its pre-image record)
	 * before write(2) returns, and fsync sees no page the kernel holds. */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	cfg->hard_remove = 1; /* handles are fds: an unlinked file works on */
	cfg->nullpath_ok = 1;
	cfg->kernel_cache = 0;
	cfg->direct_io = 0; /* shared writable mmap needs the page cache */
	cfg->negative_timeout = 0;
	return NULL;
}

static const struct fuse_operations ops = {
	.getattr = op_getattr,	     .readlink = op_readlink,
	.mknod = op_mknod,	     .mkdir = op_mkdir,
	.unlink = op_unlink,	     .rmdir = op_rmdir,
	.symlink = op_symlink,	     .rename = op_rename,
	.link = op_link,	     .chmod = op_chmod,
	.chown = op_chown,	     .truncate = op_truncate,
	.open = op_open,	     .read = op_read,
	.write = op_write,	     .statfs = op_statfs,
	.release = op_release,	     .fsync = op_fsync,
	.readdir = op_readdir,	     .fsyncdir = op_fsyncdir,
	.init = op_init,	     .access = op_access,
	.create = op_create,	     .utimens = op_utimens,
	.fallocate = op_fallocate,   .opendir = op_opendir,
	.releasedir = op_releasedir,
};

/* ---- the cut -------------------------------------------------------- */

static int restore_files(void)
{
	int bad = 0;

	while (nfiles > 0) {
		struct ufile *u = &files[nfiles - 1];
		if (ftruncate(u->fd, u->synced_size) < 0)
			bad++;
		for (size_t i = 0; i < u->npre; i++)
			if (pwrite(u->fd, u->pre[i].data, u->pre[i].len,
				   u->pre[i].off) != (ssize_t)u->pre[i].len)
				bad++;
		forget(u);
	}
	return bad;
}

static char *join(const char *dir, const char *name)
{
	char *p;

	if (strcmp(dir, ".") == 0)
		return strdup(name);
	return asprintf(&p, "%s/%s", dir, name) < 0 ? NULL : p;
}

/* Undo one journal entry; an entry a later undone one already moved away
 * is gone (ENOENT), as the disk never had it. */
static void undo(struct jentry *e)
{
	char *a = join(e->dir, e->name);
	char *b = e->dir2 ? join(e->dir2, e->name2) : NULL;

	if (e->op == J_CREATE) {
		remove_tree(a, TREE_DEPTH_MAX);
	} else if (e->op == J_UNLINK) {
		renameat(back, e->grave, back, a);
	} else {
		renameat(back, b, back, a);
		if (e->grave != NULL)
			renameat(back, e->grave, back, b);
	}
	free(a);
	free(b);
}

static void on_cut(int sig)
{
	(void)sig;
	cut_asked = 1;
	fuse_session_exit(fuse_get_session(fs));
}

/* After the loop: a cut puts BACKING as the disk had it; either way the
 * grave is emptied (what is still there was removed durably). */
static int finish(bool cut)
{
	int bad = 0;
	size_t undone = njournal, restored = nfiles;

	if (cut)
		bad = restore_files();
	while (njournal > 0) {
		struct jentry *e = &journal[--njournal];
		if (cut)
			undo(e);
		drop(e, !cut);
	}
	remove_tree(GRAVE, TREE_DEPTH_MAX);
	if (cut)
		fprintf(stderr, "lossyfs: cut: %zu files put back to their "
				"last sync, %zu namespace operations undone, "
				"%d restore errors\n",
			restored, undone, bad);
	while (nfiles > 0)
		forget(&files[nfiles - 1]);
	while (dirs.next != &dirs)
		dir_free(dirs.next);
	return bad;
}

static int serve(const char *prog, const char *mnt)
{
	char *argv[] = { (char *)prog, "-o", "fsname=lossyfs,subtype=lossyfs",
			 NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct sigaction sa = { .sa_handler = on_cut };
	int rc = 1;

	fs = fuse_new(&args, &ops, sizeof(ops), NULL);
	fuse_opt_free_args(&args); /* fuse_new may have copied them */
	if (fs == NULL)
		return 1;
	if (fuse_mount(fs, mnt) == 0 &&
	    fuse_set_signal_handlers(fuse_get_session(fs)) == 0) {
		sigaction(SIGUSR1, &sa, NULL); /* no SA_RESTART: the read ends */
		printf("mounted\n");
		fflush(stdout);
		fuse_loop(fs);
		rc = finish(cut_asked) != 0 || limit_hit;
		fuse_remove_signal_handlers(fuse_get_session(fs));
		fuse_unmount(fs);
	}
	fuse_destroy(fs);
	return rc;
}

/* Read by LeakSanitizer in the sanitizer build: libfuse's own state for
 * the handles the kernel had not released when a cut stopped the loop is
 * freed by no call of its API. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:libfuse3.so\n";
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: lossyfs BACKING MOUNTPOINT\n");
		return 2;
	}
	/* A test killed outright leaves no mount serving behind it: the
	 * parent's death unmounts, keeping everything. */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() == 1)
		return 1;
	back = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (back < 0) {
		perror(argv[1]);
		return 1;
	}
	remove_tree(GRAVE, TREE_DEPTH_MAX); /* of a lossyfs that was killed */
	if (mkdirat(back, GRAVE, 0700) < 0) {
		perror(GRAVE);
		return 1;
	}
	return serve(argv[0], argv[1 + 1]);
}
