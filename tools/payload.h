/* The deterministic message contents of kmirror-produce, shared with the
 * test-support library (tests/support/kafka_peers.h) so a test can recompute
 * every key, value and header a run wrote from (seed, partition, sequence)
 * alone.
 *
 * partition is the partition the message was aimed at (-1 when librdkafka's
 * partitioner chose it) and sequence counts the messages aimed there, from 0.
 * Values are runs of 8 equal letters 'a'..'p' (four random bits a run):
 * printable for kcat, and compressible by every codec, snappy included,
 * which has no entropy coder and would find nothing to match in random
 * letters (librdkafka then may send a batch uncompressed).
 */
#ifndef KM_TOOLS_PAYLOAD_H
#define KM_TOOLS_PAYLOAD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest key and header value text, with the NUL. */
#define KM_PAYLOAD_TEXT_BYTES_MAX 24
#define KM_PAYLOAD_RUN_BYTES 8

/* SplitMix64's output function (Steele, Lea, Flood 2014): a bijection that
 * spreads every input bit over the whole word. */
static inline uint64_t km_payload_mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The per-message stream state; each draw adds SplitMix64's gamma. */
static inline uint64_t km_payload_state(uint64_t seed, int32_t partition,
					int64_t seq)
{
	uint64_t s = km_payload_mix(seed + 0x9e3779b97f4a7c15ull);

	s = km_payload_mix(s ^ (uint64_t)(int64_t)partition);
	return km_payload_mix(s ^ (uint64_t)seq);
}

static inline uint64_t km_payload_next(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ull;
	return km_payload_mix(*state);
}

/* The value: size letters, in runs of KM_PAYLOAD_RUN_BYTES. */
static inline void km_payload_value(uint64_t seed, int32_t partition,
				    int64_t seq, char *out, size_t size)
{
	uint64_t st = km_payload_state(seed, partition, seq), word = 0;

	for (size_t i = 0; i < size; i++) {
		size_t run = i / KM_PAYLOAD_RUN_BYTES;

		if (i % (16 * KM_PAYLOAD_RUN_BYTES) == 0)
			word = km_payload_next(&st);
		out[i] = (char)('a' + ((word >> (4 * (run % 16))) & 0xf));
	}
}

/* The "seq" key: the sequence in decimal. @return its length. */
static inline int km_payload_key_seq(int64_t seq,
				     char out[KM_PAYLOAD_TEXT_BYTES_MAX])
{
	return snprintf(out, KM_PAYLOAD_TEXT_BYTES_MAX, "%lld",
			(long long)seq);
}

/* The "random" key: 16 hex digits drawn apart from the value's stream. */
static inline int km_payload_key_random(uint64_t seed, int32_t partition,
					int64_t seq,
					char out[KM_PAYLOAD_TEXT_BYTES_MAX])
{
	uint64_t st = km_payload_state(seed ^ 0x6b65790000000000ull, partition,
				       seq);

	return snprintf(out, KM_PAYLOAD_TEXT_BYTES_MAX, "%016llx",
			(unsigned long long)km_payload_next(&st));
}

/* Header i of a message is named "h<i>"; its value is 8 hex digits. */
static inline int km_payload_header(uint64_t seed, int32_t partition,
				    int64_t seq, int i,
				    char name[KM_PAYLOAD_TEXT_BYTES_MAX],
				    char value[KM_PAYLOAD_TEXT_BYTES_MAX])
{
	uint64_t st = km_payload_state(seed ^ 0x6864720000000000ull, partition,
				       seq);

	st += (uint64_t)i * 0x9e3779b97f4a7c15ull;
	snprintf(name, KM_PAYLOAD_TEXT_BYTES_MAX, "h%d", i);
	return snprintf(value, KM_PAYLOAD_TEXT_BYTES_MAX, "%08llx",
			(unsigned long long)(km_payload_next(&st) >> 32));
}

#ifdef __cplusplus
}
#endif

#endif
