#include "common/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int km_file_write_all(int fd, const void *p, size_t len)
{
	const char *c = p;

	while (len > 0) {
		ssize_t n = write(fd, c, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

int km_file_write_atomic(int dir_fd, const char *name, const void *data,
			 size_t len)
{
	char tmp[256];
	int fd, rc;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", name) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	rc = km_file_write_all(fd, data, len);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
		rc = -errno;
	if (rc == 0 && fsync(dir_fd) < 0)
		rc = -errno;
	if (rc < 0)
		(void)unlinkat(dir_fd, tmp, 0);
	return rc;
}
