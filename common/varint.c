#include "common/varint.h"

#include "common/errors.h"

int km_varint_decode_u64(const uint8_t *buf, size_t len, size_t max_bytes,
			 uint64_t *out)
{
	uint64_t v = 0;

	for (size_t i = 0; i < max_bytes; i++) {
		if (i == len)
			return 0;
		v |= (uint64_t)(buf[i] & 0x7f) << (7 * i);
		if ((buf[i] & 0x80) == 0) {
			*out = v;
			return (int)i + 1;
		}
	}
	return KM_EVARINT;
}

int km_varint_decode_s32(const uint8_t *buf, size_t len, int32_t *out)
{
	uint64_t u;
	int n = km_varint_decode_u64(buf, len, KM_VARINT_BYTES_MAX, &u);

	/* Kafka's readVarint rejects a fifth byte carrying bits past 32. */
	if (n > 0 && u > UINT32_MAX)
		return KM_EVARINT;
	if (n > 0)
		*out = (int32_t)((uint32_t)u >> 1) ^ -(int32_t)(u & 1);
	return n;
}

int km_varint_decode_s64(const uint8_t *buf, size_t len, int64_t *out)
{
	uint64_t u;
	int n = km_varint_decode_u64(buf, len, KM_VARLONG_BYTES_MAX, &u);

	if (n == KM_VARLONG_BYTES_MAX && buf[n - 1] > 1)
		return KM_EVARINT; /* the tenth byte holds only bit 63 */
	if (n > 0)
		*out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
	return n;
}

int km_varint_encode_u64(uint8_t *buf, uint64_t v)
{
	int n = 0;

	while (v >= 0x80) {
		buf[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	buf[n++] = (uint8_t)v;
	return n;
}

int km_varint_encode_s32(uint8_t *buf, int32_t v)
{
	uint32_t z = ((uint32_t)v << 1) ^ (uint32_t)(v >> 31);

	return km_varint_encode_u64(buf, z);
}

int km_varint_encode_s64(uint8_t *buf, int64_t v)
{
	uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);

	return km_varint_encode_u64(buf, z);
}

int km_varint_size_s32(int32_t v)
{
	uint8_t tmp[KM_VARINT_BYTES_MAX];

	return km_varint_encode_s32(tmp, v);
}
