#include "common/uuid.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

#include "common/km_assert.h"

/* A random id that encodes with a leading '-' is drawn again (Kafka does
 * the same so ids can be passed as command-line arguments): 1 in 64 per
 * draw, so 16 draws all failing is 2^-96. */
#define GENERATE_TRIES_MAX 16

void km_uuid_encode(const uint8_t uuid[16], char out[KM_UUID_CHARS + 1])
{
	static const char b64url[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0;

	for (int i = 0; i < 15; i += 3) {
		uint32_t v = (uint32_t)uuid[i] << 16 | (uint32_t)uuid[i + 1] << 8 |
			     uuid[i + 2];

		out[o++] = b64url[(v >> 18) & 63];
		out[o++] = b64url[(v >> 12) & 63];
		out[o++] = b64url[(v >> 6) & 63];
		out[o++] = b64url[v & 63];
	}
	out[o++] = b64url[uuid[15] >> 2];
	out[o++] = b64url[(uuid[15] & 3) << 4];
	KM_ASSERT(o == KM_UUID_CHARS);
	out[o] = '\0';
}

int km_uuid_random(char out[KM_UUID_CHARS + 1])
{
	uint8_t u[16];

	for (int tries = 0; tries < GENERATE_TRIES_MAX; tries++) {
		ssize_t n = getrandom(u, sizeof(u), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n != (ssize_t)sizeof(u))
			continue;
		u[6] = (uint8_t)((u[6] & 0x0f) | 0x40); /* version 4 */
		u[8] = (uint8_t)((u[8] & 0x3f) | 0x80); /* IETF variant */
		km_uuid_encode(u, out);
		if (out[0] != '-')
			return 0;
	}
	return -EAGAIN;
}

static int b64url_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '-' ? 62 : c == '_' ? 63 : -1;
}

int km_uuid_decode(const char *text, uint8_t out[16])
{
	uint32_t acc = 0;
	int bits = 0;
	size_t o = 0;

	if (strlen(text) != KM_UUID_CHARS)
		return -EINVAL;
	for (size_t i = 0; i < KM_UUID_CHARS; i++) {
		int v = b64url_value(text[i]);

		if (v < 0)
			return -EINVAL;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (uint8_t)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	/* 22 characters carry 132 bits: the last 4 must be zero. */
	return o == 16 && acc == 0 ? 0 : -EINVAL;
}
