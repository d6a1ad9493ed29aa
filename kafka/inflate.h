/* Decompression of a compressed RecordBatch's records (codecs 1-4), into one
 * bounded buffer, so the local-write path can check them as Kafka's
 * LogValidator does (kafka/validate.h). Mirrored batches never come here:
 * their bytes are verified by CRC and copied as they are.
 *
 * The framings are Kafka's (CompressionType.java and the streams it wraps):
 *   gzip    one or more gzip members (GZIPInputStream);
 *   snappy  xerial's SnappyOutputStream framing (magic 82 'SNAPPY' 00, two
 *           int32 versions, then int32-length-prefixed raw blocks), or one
 *           raw snappy block as librdkafka writes it (xerial's
 *           SnappyInputStream reads both);
 *   lz4     LZ4 frames (KafkaLZ4BlockOutputStream), linked or independent
 *           blocks, skippable frames skipped: liblz4's frame decoder;
 *   zstd    one or more zstd frames.
 *
 * Memory (STYLE 9): everything is allocated by km_inflate_create(): the
 * output buffer (out_bytes_max), a zlib state in a fixed arena, a zstd
 * context and an lz4 one; a call allocates nothing, except that liblz4
 * sizes its block buffers (at most 4 MiB, the largest LZ4 block) the first
 * time a frame needs them and keeps them.
 *
 * Threading: one thread at a time (a worker's local writers share one).
 */
#ifndef KM_KAFKA_INFLATE_H
#define KM_KAFKA_INFLATE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct km_inflate; /* opaque */

/**
 * Create a decompressor whose output is at most out_bytes_max bytes.
 * @return 0 and *out, -EINVAL (out_bytes_max 0 or above INT32_MAX) or
 *         -ENOMEM.
 */
int km_inflate_create(uint32_t out_bytes_max, struct km_inflate **out);

/** Free it (NULL is ignored). */
void km_inflate_destroy(struct km_inflate *z);

/** The largest output km_inflate_records() produces. */
uint32_t km_inflate_bytes_max(const struct km_inflate *z);

/**
 * Decompress len contiguous bytes at src, compressed with codec.
 * @return the decompressed size (>= 0) with *out at the bytes (valid until
 *         the next call or km_inflate_destroy()), or
 *         KM_EINFLATEMAX  they would be more than out_bytes_max (a bomb, or
 *                         a batch larger than this host validates);
 *         KM_EINFLATE     corrupt, truncated or followed by stray bytes, or
 *                         codec is not 1-4.
 */
int km_inflate_records(struct km_inflate *z, int codec, const void *src,
		       uint32_t len, const uint8_t **out);

#ifdef __cplusplus
}
#endif

#endif
