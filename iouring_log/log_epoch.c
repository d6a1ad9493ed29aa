/* Text checkpoint files of the partition directory, Kafka's formats (spec
 * §3): written to `<name>.tmp`, synced, renamed over `<name>`, directory
 * synced. leader-epoch-checkpoint: "0\n<count>\n<epoch> <startOffset>\n...";
 * partition.metadata: "version: 0\ntopic_id: <base64url uuid>", no newline
 * after the id (PartitionMetadataFileFormatter.toFile). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/file.h"
#include "common/uuid.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "iouring_log/log_pvt.h"

#define EPOCH_FILE "leader-epoch-checkpoint"
#define METADATA_FILE "partition.metadata"

int km_log_write_text_atomic(struct km_log *log, const char *name,
			     const char *text, size_t len)
{
	/* Its directory is shed between operations (log_files.c). */
	int rc = log->dir_fd >= 0 ? 0 : km_log_files_need(log);

	if (rc < 0)
		return rc;
	return km_file_write_atomic(log->dir_fd, name, text, len);
}

static bool same_as_file(const struct km_log *log)
{
	return log->n_file_epochs == log->n_epochs &&
	       memcmp(log->file_epochs, log->epochs,
		      log->n_epochs * sizeof(log->epochs[0])) == 0;
}

/* Rewrite the file if it differs from the epochs (force: anyway). A
 * rewrite needs a block, so on a full disk it must be one that changes
 * something: a recovery that rebuilds the same epochs writes nothing. */
static int write_epochs(struct km_log *log, bool force)
{
	char text[64 + KM_LOG_EPOCHS_MAX * 48];
	int n, rc;

	if (log->epochs_deferred || (!force && same_as_file(log)))
		return 0;
	n = snprintf(text, sizeof(text), "0\n%u\n", log->n_epochs);
	for (uint32_t i = 0; i < log->n_epochs; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n, "%d %lld\n",
			      log->epochs[i].epoch,
			      (long long)log->epochs[i].start_offset);
	rc = km_log_write_text_atomic(log, EPOCH_FILE, text, (size_t)n);
	if (rc == 0) {
		memcpy(log->file_epochs, log->epochs,
		       log->n_epochs * sizeof(log->epochs[0]));
		log->n_file_epochs = log->n_epochs;
	}
	return rc;
}

int km_log_epoch_defer(struct km_log *log, bool defer)
{
	log->epochs_deferred = defer;
	return defer ? 0 : write_epochs(log, false);
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
	return write_epochs(log, false);
}

int km_log_epoch_truncate(struct km_log *log, int64_t end_offset)
{
	uint32_t n = log->n_epochs;

	while (n > 0 && log->epochs[n - 1].start_offset >= end_offset)
		n--;
	if (n == log->n_epochs)
		return 0;
	log->n_epochs = n;
	return write_epochs(log, false);
}

/* Kafka's LeaderEpochFileCache.clearAndFlush: written even if already
 * empty in memory, so a file a crash left behind is emptied too. */
int km_log_epoch_clear(struct km_log *log)
{
	log->n_epochs = 0;
	return write_epochs(log, true);
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
	memcpy(log->file_epochs, log->epochs,
	       log->n_epochs * sizeof(log->epochs[0]));
	log->n_file_epochs = log->n_epochs;
	return 0;
}

static bool id_given(const uint8_t id[16])
{
	static const uint8_t zero[16];

	return memcmp(id, zero, sizeof(zero)) != 0;
}

/* Kafka's reader splits each line at ": " and ignores a final newline,
 * so an older kmirror's file (one after the id) reads the same. */
static int parse_metadata(const char *text, uint8_t out[16])
{
	static const char head[] = "version: 0\ntopic_id: ";
	char id[KM_UUID_CHARS + 1];
	const char *rest;

	if (strncmp(text, head, sizeof(head) - 1) != 0)
		return -EBADMSG;
	rest = text + sizeof(head) - 1;
	if (strlen(rest) < KM_UUID_CHARS ||
	    (rest[KM_UUID_CHARS] != '\0' && strcmp(rest + KM_UUID_CHARS, "\n")))
		return -EBADMSG;
	memcpy(id, rest, KM_UUID_CHARS);
	id[KM_UUID_CHARS] = '\0';
	return km_uuid_decode(id, out) < 0 ? -EBADMSG : 1;
}

static int read_metadata(int dir_fd, uint8_t out[16])
{
	char text[128];
	int fd = openat(dir_fd, METADATA_FILE, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	n = read(fd, text, sizeof(text) - 1);
	n = n < 0 ? -errno : n;
	close(fd);
	if (n < 0)
		return (int)n;
	text[n] = '\0';
	return parse_metadata(text, out);
}

int km_log_metadata_read(const char *dir, uint8_t out[16])
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	rc = read_metadata(fd, out);
	close(fd);
	return rc;
}

int km_log_set_topic_id(struct km_log *log, const uint8_t id[16])
{
	char text[64], tid[KM_UUID_CHARS + 1], had[KM_UUID_CHARS + 1];
	int n, rc;

	KM_ASSERT(id_given(id));
	if (log->metadata_read && memcmp(log->topic_id, id, 16) == 0)
		return 0;
	if ((rc = km_log_files_need(log)) < 0)
		return rc;
	km_uuid_encode(id, tid);
	/* The id a log's files carry is never changed unsaid: the caller
	 * replaces it only for the source's (learned, or a new source). */
	if (log->metadata_read) {
		km_uuid_encode(log->topic_id, had);
		KM_INFO("log", "%s/%s: topic id %s replaces %s", log->dir,
			METADATA_FILE, tid, had);
	}
	n = snprintf(text, sizeof(text), "version: 0\ntopic_id: %s", tid);
	if ((rc = km_log_write_text_atomic(log, METADATA_FILE, text,
					   (size_t)n)) < 0)
		return rc;
	memcpy(log->topic_id, id, 16);
	log->metadata_read = true;
	return 1;
}

void km_log_topic_id(const struct km_log *log, uint8_t out[16])
{
	memcpy(out, log->topic_id, 16);
}

const struct km_log_config *km_log_config_get(const struct km_log *log)
{
	return &log->cfg;
}

/* At open: the configured id if given, else the file's, else a random
 * one (a log opened on its own: tests, tools). A file that is not Kafka's
 * format is replaced: Kafka could not read it either. */
int km_log_write_metadata(struct km_log *log)
{
	char text[KM_UUID_CHARS + 1];
	uint8_t id[16];
	int rc = read_metadata(log->dir_fd, log->topic_id);

	if (rc < 0 && rc != -EBADMSG)
		return rc;
	log->metadata_read = rc == 1;
	if (id_given(log->cfg.topic_id)) {
		rc = km_log_set_topic_id(log, log->cfg.topic_id);
		return rc < 0 ? rc : 0;
	}
	if (rc == 1)
		return 0;
	if ((rc = km_uuid_random(text)) < 0)
		return rc;
	if ((rc = km_uuid_decode(text, id)) < 0)
		return rc;
	rc = km_log_set_topic_id(log, id);
	return rc < 0 ? rc : 0;
}
