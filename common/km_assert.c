#include "common/km_assert.h"

#include <stdio.h>
#include <stdlib.h>

void km_assert_fail(const char *expr, const char *file, int line)
{
	fprintf(stderr, "kmirror: assertion failed: %s (%s:%d)\n", expr, file,
		line);
	abort();
}
