/* This mirror host's cluster id: configured (cluster.id) or generated once,
 * and kept in `<data.dir>/meta.properties` in Kafka's format:
 *
 *   #
 *   #Tue Nov 30 02:40:00 UTC 2026
 *   cluster.id=q1Sh-9_ISia_zwGINzRvyQ
 *   node.id=1
 *   version=1
 *
 * (Kafka's MetaProperties version 1, as `kafka-storage.sh format` writes
 * it; lines sorted, the date comment as java.util.Properties.store writes
 * it). A generated id is Kafka's Uuid.randomUuid(): 16 random bytes with
 * the version-4 and IETF-variant bits set, in URL-safe base64 without
 * padding (22 characters), never starting with '-'.
 *
 * The id is what the barrier's SourceClusterId names when a host
 * downstream of this one fails over, and what failback (R5) searches for,
 * so it must not change under a data.dir: a configured cluster.id (or
 * node.id) that disagrees with meta.properties is an error naming both.
 */
#ifndef KM_CONTROL_CLUSTER_ID_H
#define KM_CONTROL_CLUSTER_ID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct km_config;

#define KM_CLUSTER_ID_UUID_CHARS 22u	/* base64url of 16 bytes, no padding */
#define KM_CLUSTER_ID_META_FILE "meta.properties"
#define KM_CLUSTER_ID_META_BYTES_MAX 65536u /* largest meta.properties read */

/** Encode 16 bytes as Kafka's Uuid.toString(): 22 base64url characters. */
void km_cluster_id_encode(const uint8_t uuid[16],
			  char out[KM_CLUSTER_ID_UUID_CHARS + 1]);

/**
 * A new random id, as Kafka's Uuid.randomUuid() (getrandom(2)).
 * @return 0, or -errno from getrandom.
 */
int km_cluster_id_generate(char out[KM_CLUSTER_ID_UUID_CHARS + 1]);

/** 1..KM_CLUSTER_ID_BYTES_MAX characters from A-Z a-z 0-9 . _ - */
bool km_cluster_id_is_valid(const char *id);

/**
 * Settle cfg->cluster_id against `<data.dir>/meta.properties`, creating
 * data.dir (and parents) if needed:
 *   - the file exists: its cluster.id is used; a configured cluster.id or a
 *     node.id that differs from it is an error;
 *   - it does not: the configured id, or a new one, is written to it
 *     atomically (temporary file, fsync, rename, fsync of the directory).
 *
 * @param err  one-line message on failure (may be NULL).
 * @return 0 with cfg->cluster_id set; or
 *   KM_EMETAMISMATCH  the configuration disagrees with meta.properties;
 *   KM_EMETAPROPS     meta.properties is malformed or of another version;
 *   -errno            data.dir or the file cannot be created, read or
 *                     written (-ENAMETOOLONG for a too long data.dir).
 */
int km_cluster_id_resolve(struct km_config *cfg, char *err, size_t err_len);

/* ---- the source a mirrored partition's log holds (issue 21) ----
 *
 * `<partition dir>/kmirror.source`, properties, replaced atomically:
 *
 *   source.cluster.id=<the source cluster's id, as Metadata names it>
 *   source.topic.id=<the source topic's Uuid text, Metadata v10+>
 *
 * written when the ids are first known (at the first fetch of the
 * partition, or when its fetcher first sees them), compared by the fetcher
 * in every Metadata answer and never replaced silently: only a `start` or
 * `failback` that cuts the log (a barrier, --truncate-to, --from-start)
 * takes the source's ids anew. No file, or a key missing, means not known
 * yet. */

#define KM_CLUSTER_ID_SOURCE_FILE "kmirror.source"

struct km_cluster_id_source {
	char cluster_id[256];	/* "" = not known yet */
	uint8_t topic_id[16];	/* all zero = not known yet */
};

/** Decode Kafka's Uuid text (22 base64url characters). @return 0 or
 *  -EINVAL. */
int km_cluster_id_decode(const char *text, uint8_t out[16]);

/**
 * Read dir/kmirror.source; a missing file gives empty ids.
 * @return 0, -errno, or KM_EMETAPROPS (malformed: a syntax error, a
 *         cluster id that is not one, a topic id that is not Uuid text).
 */
int km_cluster_id_source_load(const char *dir, struct km_cluster_id_source *out);

/** Replace dir/kmirror.source (write, fsync, rename, fsync dir).
 *  @return 0 or -errno. */
int km_cluster_id_source_save(const char *dir,
			      const struct km_cluster_id_source *src);

#ifdef __cplusplus
}
#endif

#endif
