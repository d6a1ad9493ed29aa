/* Tests that drive a fault-injection switch of kmirrord (KMIRROR_TEST_CRASH,
 * KMIRROR_TEST_NO_BARRIER, KMIRROR_TEST_DPDK_IMPAIR) need a build with the
 * meson option test_hooks, which ./kmirror test sets on both of its builds.
 * In a build without it (a release build) the daemon ignores the switches,
 * so such a test skips and says why instead of failing for the wrong reason.
 */
#ifndef KM_TESTS_SUPPORT_TEST_HOOKS_H
#define KM_TESTS_SUPPORT_TEST_HOOKS_H

#include <gtest/gtest.h>

#ifdef KM_TEST_HOOKS
#define KM_NEEDS_TEST_HOOKS() \
	do {                  \
	} while (0)
#else
#define KM_NEEDS_TEST_HOOKS()                                              \
	GTEST_SKIP() << "built without -Dtest_hooks=true: this test drives " \
			"a fault-injection switch that only such a build has"
#endif

#endif
