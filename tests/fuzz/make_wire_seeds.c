/* Writes a seed corpus for fuzz_wire: the golden frames of tests/wire (each
 * request as a server frame, each response as a client body for its (API,
 * version)), and a bare request header for every API and version the codec
 * speaks. File = split byte, mode byte, bytes (as fuzz_wire reads them). */
#include <stdio.h>
#include <string.h>

#include "kafka/proto.h"
#include "tests/wire/golden.h"

static int put(const char *dir, int i, uint8_t mode, const uint8_t *b,
	       size_t n)
{
	char path[4096];
	uint8_t head[2] = { (uint8_t)(n / 2), mode };
	FILE *f;

	snprintf(path, sizeof(path), "%s/wire-%03d", dir, i);
	f = fopen(path, "wb");
	if (f == NULL) {
		perror(path);
		return 1;
	}
	fwrite(head, 1, 2, f);
	fwrite(b, 1, n, f);
	return fclose(f) != 0;
}

/* fuzz_wire's client table index of (key, version), or -1: the first
 * entries of its table, in the same order. */
static int client_mode(int16_t key, int16_t version)
{
	static const int16_t responses[][2] = {
		{ 18, 0 }, { 18, 1 }, { 18, 2 }, { 18, 3 },
		{ 3, 0 }, { 3, 1 }, { 3, 2 }, { 3, 3 }, { 3, 4 },
		{ 1, 4 }, { 1, 5 }, { 1, 6 }, { 1, 7 }, { 1, 8 }, { 1, 9 },
		{ 1, 10 }, { 1, 11 },
	};

	for (size_t i = 0; i < sizeof(responses) / sizeof(responses[0]); i++)
		if (responses[i][0] == key && responses[i][1] == version)
			return (int)i;
	return -1;
}

static int put_headers(const char *dir, int *n)
{
	struct km_api_range apis[KM_PROTO_APIS];
	int rc = 0;

	km_proto_supported(apis, KM_PROTO_APIS);
	for (int a = 0; a < KM_PROTO_APIS; a++)
		for (int16_t v = apis[a].min_version;
		     v <= apis[a].max_version; v++) {
			uint8_t buf[64];
			struct km_wire_wr w;
			struct km_reqhdr h = { apis[a].api_key, v, 1, { 0, "" },
					       0 };

			km_wire_wr_init(&w, buf, sizeof(buf));
			km_reqhdr_encode(&w, &h);
			rc |= put(dir, (*n)++, 0x40, buf, w.pos);
		}
	return rc;
}

int main(int argc, char **argv)
{
	int rc = 0, n = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	for (size_t i = 0; i < GOLDEN_COUNT; i++) {
		const struct golden_frame *g = &golden_frames[i];
		int mode = client_mode(g->api_key, g->version);

		if (g->request)
			rc |= put(argv[1], n++, 0x00, g->bytes, g->size);
		else if (mode >= 0)
			rc |= put(argv[1], n++, (uint8_t)(0x80 | mode),
				  g->bytes + 4, g->size - 4);
	}
	rc |= put_headers(argv[1], &n);
	return rc;
}
