/* Writes a seed corpus for fuzz_batch: a data batch with headers, a COMMIT
 * marker, an ABORT marker and a MIRROR_PID_RESET barrier, each as one file
 * (first byte = split point, as the fuzz target reads it). */
#include <stdio.h>
#include <string.h>

#include "kafka/control.h"
#include "kafka/records.h"

static int put(const char *dir, const char *name, const unsigned char *b, int n)
{
	char path[4096];
	FILE *f;
	unsigned char split = 30;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (f == NULL || n <= 0) {
		perror(path);
		return 1;
	}
	fwrite(&split, 1, 1, f);
	fwrite(b, 1, (size_t)n, f);
	return fclose(f) != 0;
}

int main(int argc, char **argv)
{
	static const struct km_record_header_spec h = { "trace", "abc", 3 };
	struct km_record_spec recs[2] = {
		{ "k", 1, "value", 5, 1000, &h, 1 },
		{ NULL, -1, NULL, -1, 1001, NULL, 0 },
	};
	struct km_batch_spec spec = { 0, 1, 0, 5000, 0, 0 };
	struct km_ctrl_spec cs = { 2, 1, 1002 };
	unsigned char buf[512];
	int rc = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	rc |= put(argv[1], "data", buf,
		  km_records_build(buf, sizeof(buf), &spec, recs, 2));
	rc |= put(argv[1], "commit", buf,
		  km_ctrl_build_marker(buf, sizeof(buf), &cs, 5000, 0, true, 3));
	rc |= put(argv[1], "abort", buf,
		  km_ctrl_build_marker(buf, sizeof(buf), &cs, 5000, 0, false, 3));
	rc |= put(argv[1], "barrier", buf,
		  km_ctrl_build_pid_reset(buf, sizeof(buf), &cs,
					  "Zm9vYmFyYmF6cXV4cXV1eA"));
	return rc;
}
