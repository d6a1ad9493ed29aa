/* Small durable-file helpers shared by the log's checkpoints and the
 * daemon's meta.properties. */
#ifndef KM_COMMON_FILE_H
#define KM_COMMON_FILE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** write(2) all of p, retrying on EINTR and short writes. @return 0 or -errno. */
int km_file_write_all(int fd, const void *p, size_t len);

/**
 * Replace dir_fd/name with data, crash-safely: write `<name>.tmp`, fsync
 * it, rename it over name, fsync the directory (Kafka's CheckpointFile).
 * The tmp file is removed on failure.
 * @return 0 or -errno.
 */
int km_file_write_atomic(int dir_fd, const char *name, const void *data,
			 size_t len);

#ifdef __cplusplus
}
#endif

#endif
