/* Kafka's LogValidator checks for a batch a client wrote (AppendOrigin
 * CLIENT), on top of km_batch_parse()'s framing and CRC: the header agrees
 * with the records it holds, and every record parses and fills its length
 * exactly, compressed or not.
 *
 * Only the local-write path runs this: a mirrored batch is verified by CRC
 * and copied as it is (R6 keeps its offsets, gaps included), so it never
 * pays for the walk over its records.
 */
#ifndef KM_KAFKA_VALIDATE_H
#define KM_KAFKA_VALIDATE_H

#include <stddef.h>

#include "kafka/batch.h"

#ifdef __cplusplus
extern "C" {
#endif

struct km_inflate;

/**
 * Validate a client batch b (framed and CRC-checked by km_batch_parse()).
 *
 * Checks, in LogValidator's order (validateBatch, then the records):
 *  1. lastOffsetDelta + 1 > 0 ("Batch has an invalid offset range")
 *                                                        -> KM_EBATCHHDR
 *  2. recordsCount > 0 ("Invalid reported count for record batch")
 *                                                        -> KM_EBATCHCOUNT
 *  3. lastOffsetDelta + 1 == recordsCount ("Inconsistent batch offset
 *     range ... and count of records")                   -> KM_EBATCHCOUNT
 *  4. producerId >= 0 implies baseSequence >= 0 ("Invalid sequence number
 *     ... in record batch with producerId")              -> KM_EBATCHHDR
 *  5. compressed records decompress (kafka/inflate.h) within z's limit
 *                                             -> KM_EINFLATE, KM_EINFLATEMAX
 *  6. every record parses, its fields fill its length exactly ("Invalid
 *     record size"), header keys are not null  -> KM_EVARINT, KM_ERECORD
 *  7. record i has offsetDelta i: LogValidator's in-place assignment
 *     takes the offsets as consecutive from 0 (a broker rewrites such a
 *     compressed batch; this host cannot, so it refuses it) -> KM_ERECOFFSET
 *  8. exactly recordsCount records fill the batch ("Incorrect declared
 *     batch size, records still remaining")              -> KM_ERECCOUNT
 *
 * @param z    decompression scratch; may be NULL only if b is uncompressed.
 * @param why  if not NULL, a one-line reason (Kafka's wording where it has
 *             one, with the numbers) on failure; why_len bytes at most.
 * @return 0, one of the codes above, or -EINVAL if b is compressed and z is
 *         NULL or its records straddle segments of the chain (the local
 *         writer's copy is one segment).
 */
int km_validate_batch(const struct km_batch *b, struct km_inflate *z,
		      char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
