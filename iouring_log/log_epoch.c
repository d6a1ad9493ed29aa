/* Text checkpoint files of the partition directory, Kafka's formats (spec
 * §3): written to `<name>.tmp`, synced, renamed over `<name>`, directory
 * synced. leader-epoch-checkpoint: "0\n<count>\n<epoch> <startOffset>\n...";
 * partition.metadata: "version: 0\ntopic_id: <base64url uuid>\n". */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "iouring_log/log_pvt.h"

#define EPOCH_FILE "leader-epoch-checkpoint"
#define METADATA_FILE "partition.metadata"

static int write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int km_log_write_text_atomic(struct km_log *log, const char *name,
			     const char *text, size_t len)
{
	char tmp[128];
	int fd, rc;

	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	fd = openat(log->dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		    0644);
	if (fd < 0)
		return -errno;
	rc = write_all(fd, text, len);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	close(fd);
	if (rc == 0 && renameat(log->dir_fd, tmp, log->dir_fd, name) < 0)
		rc = -errno;
	if (rc == 0 && fsync(log->dir_fd) < 0)
		rc = -errno;
	return rc;
}

static int write_epochs(struct km_log *log)
{
	char text[64 + KM_LOG_EPOCHS_MAX * 48];
	int n = snprintf(text, sizeof(text), "0\n%u\n", log->n_epochs);

	for (uint32_t i = 0; i < log->n_epochs; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n, "%d %lld\n",
			      log->epochs[i].epoch,
			      (long long)log->epochs[i].start_offset);
	return km_log_write_text_atomic(log, EPOCH_FILE, text, (size_t)n);
}

int km_log_epoch_note(struct km_log *log, int32_t epoch, int64_t offset)
{
	/* Kafka's LeaderEpochFileCache.assign: only a higher epoch starts an
	 * entry; batches from older leaders in the same range do not. */
	if (epoch < 0 ||
	    (log->n_epochs > 0 && epoch <= log->epochs[log->n_epochs - 1].epoch))
		return 0;
	if (log->n_epochs == KM_LOG_EPOCHS_MAX) {
		/* Keep the newest: drop the oldest entry. */
		memmove(&log->epochs[0], &log->epochs[1],
			(KM_LOG_EPOCHS_MAX - 1) * sizeof(log->epochs[0]));
		log->n_epochs--;
	}
	log->epochs[log->n_epochs++] = (struct log_epoch){ epoch, offset };
	return write_epochs(log);
}

int km_log_epoch_truncate(struct km_log *log, int64_t end_offset)
{
	uint32_t n = log->n_epochs;

	while (n > 0 && log->epochs[n - 1].start_offset >= end_offset)
		n--;
	if (n == log->n_epochs)
		return 0;
	log->n_epochs = n;
	return write_epochs(log);
}

int km_log_epoch_load(struct km_log *log)
{
	FILE *f;
	int fd = openat(log->dir_fd, EPOCH_FILE, O_RDONLY | O_CLOEXEC);
	int version, epoch;
	unsigned count;
	long long start;

	log->n_epochs = 0;
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	f = fdopen(fd, "r");
	if (f == NULL) {
		close(fd);
		return -errno;
	}
	if (fscanf(f, "%d %u", &version, &count) == 2 && version == 0)
		for (unsigned i = 0; i < count && i < KM_LOG_EPOCHS_MAX; i++) {
			if (fscanf(f, "%d %lld", &epoch, &start) != 2)
				break;
			log->epochs[log->n_epochs++] =
				(struct log_epoch){ epoch, start };
		}
	fclose(f);
	return 0;
}

/* Uuid.toString(): URL-safe base64 without padding, 22 characters. */
static void base64url(const uint8_t in[16], char out[23])
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				"0123456789-_";
	int o = 0;

	for (int i = 0; i < 16; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;

		v |= i + 1 < 16 ? (uint32_t)in[i + 1] << 8 : 0;
		v |= i + 2 < 16 ? in[i + 2] : 0;
		out[o++] = a[(v >> 18) & 63];
		out[o++] = a[(v >> 12) & 63];
		if (i + 1 < 16)
			out[o++] = a[(v >> 6) & 63];
		if (i + 2 < 16)
			out[o++] = a[v & 63];
	}
	out[o] = '\0';
}

int km_log_write_metadata(struct km_log *log)
{
	uint8_t uuid[16];
	char id[23], text[64];
	int n;

	if (faccessat(log->dir_fd, METADATA_FILE, F_OK, 0) == 0)
		return 0;
	if (getrandom(uuid, sizeof(uuid), 0) != (ssize_t)sizeof(uuid))
		return -EIO;
	uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x40); /* version 4 */
	uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80);
	base64url(uuid, id);
	n = snprintf(text, sizeof(text), "version: 0\ntopic_id: %s\n", id);
	return km_log_write_text_atomic(log, METADATA_FILE, text, (size_t)n);
}
