#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <strings.h>
#include <time.h>

static _Atomic int current_level = KM_LOG_INFO;

static const char *const level_names[] = { "ERROR", "WARN", "INFO", "DEBUG" };

void km_log_set_level(enum km_log_level level)
{
	/* Relaxed: the level is a hint; a racing reader seeing the old value
	 * prints or drops one extra line, nothing more. */
	atomic_store_explicit(&current_level, (int)level, memory_order_relaxed);
}

int km_log_parse_level(const char *name)
{
	for (int i = KM_LOG_ERROR; i <= KM_LOG_DEBUG; i++)
		if (strcasecmp(name, level_names[i]) == 0)
			return i;
	if (strcasecmp(name, "warning") == 0)
		return KM_LOG_WARN;
	return -EINVAL;
}

int km_log_enabled(enum km_log_level level)
{
	return (int)level <=
	       atomic_load_explicit(&current_level, memory_order_relaxed);
}

void km_log_write(enum km_log_level level, const char *module, const char *fmt,
		  ...)
{
	char line[1024], stamp[32];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	n = snprintf(line, sizeof(line), "%s.%03ldZ %-5s %s: ", stamp,
		     ts.tv_nsec / 1000000, level_names[level], module);
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof(line))
		vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* One fprintf per line: stdio's stream lock keeps lines whole across
	 * threads. */
	fprintf(stderr, "%s\n", line);
}
