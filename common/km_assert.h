/* Two tiers of assertions (STYLE 11).
 *
 * KM_ASSERT is always on: module boundaries, cold and control paths.
 * KM_ASSERT_HOT is for per-batch and per-record checks and is compiled in
 * only with -Dstrict=true; otherwise the sizeof trick type-checks the
 * expression without evaluating it. Never assert on network input: malformed
 * Kafka bytes are an operating error and get a return code.
 */
#ifndef KM_COMMON_ASSERT_H
#define KM_COMMON_ASSERT_H

#ifdef __cplusplus
extern "C" {
#endif

__attribute__((noreturn)) void km_assert_fail(const char *expr,
					      const char *file, int line);

#define KM_ASSERT(expr)                                                        \
	do {                                                                   \
		if (__builtin_expect(!(expr), 0))                              \
			km_assert_fail(#expr, __FILE__, __LINE__);             \
	} while (0)

#ifdef KM_STRICT
#define KM_ASSERT_HOT(expr) KM_ASSERT(expr)
#else
#define KM_ASSERT_HOT(expr) ((void)sizeof(!(expr)))
#endif

#ifdef __cplusplus
}
#endif

#endif
