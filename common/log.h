/* Levelled logging: one line per event on stderr,
 *   2026-11-30T02:40:00.123Z INFO  pstate: barrier at offset 42 expired 3 producers
 * The level is process-wide and set once at start-up (log.level). */
#ifndef KM_COMMON_LOG_H
#define KM_COMMON_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

enum km_log_level {
	KM_LOG_ERROR = 0,
	KM_LOG_WARN = 1,
	KM_LOG_INFO = 2,
	KM_LOG_DEBUG = 3,
};

/** Set the most verbose level printed (default INFO). */
void km_log_set_level(enum km_log_level level);

/**
 * Parse "error", "warn", "info" or "debug" (any case).
 * @return the level (>= 0), or -EINVAL.
 */
int km_log_parse_level(const char *name);

/** True if a message at level would be printed. */
int km_log_enabled(enum km_log_level level);

/** Print one line: time, level, the module tag, the formatted message. */
void km_log_write(enum km_log_level level, const char *module, const char *fmt,
		  ...) __attribute__((format(printf, 3, 4)));

#define KM_LOG(level, module, ...)                                             \
	do {                                                                   \
		if (km_log_enabled(level))                                     \
			km_log_write(level, module, __VA_ARGS__);              \
	} while (0)
#define KM_ERROR(module, ...) KM_LOG(KM_LOG_ERROR, module, __VA_ARGS__)
#define KM_WARN(module, ...) KM_LOG(KM_LOG_WARN, module, __VA_ARGS__)
#define KM_INFO(module, ...) KM_LOG(KM_LOG_INFO, module, __VA_ARGS__)
#define KM_DEBUG(module, ...) KM_LOG(KM_LOG_DEBUG, module, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
