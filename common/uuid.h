/* Kafka's Uuid as text: 16 bytes in URL-safe base64 without padding, 22
 * characters (Uuid.toString). Cluster ids and topic ids use it. */
#ifndef KM_COMMON_UUID_H
#define KM_COMMON_UUID_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KM_UUID_CHARS 22u

/** Encode 16 bytes as 22 base64url characters plus a NUL. */
void km_uuid_encode(const uint8_t uuid[16], char out[KM_UUID_CHARS + 1]);

/** Decode 22 base64url characters (no padding) to 16 bytes.
 *  @return 0, or -EINVAL for other text. */
int km_uuid_decode(const char *text, uint8_t out[16]);

/**
 * A random version-4 UUID as text, never starting with '-' (Kafka draws
 * again so ids can be passed as command-line arguments).
 * @return 0, or -errno from getrandom, or -EAGAIN if every draw failed.
 */
int km_uuid_random(char out[KM_UUID_CHARS + 1]);

#ifdef __cplusplus
}
#endif

#endif
