// common/spsc.h: the rings between the control thread and the workers.
#include <gtest/gtest.h>

#include <cerrno>

#include "tests/unit/spsc_support.h"

TEST(Spsc, CapacityMustBeAPowerOfTwo)
{
	EXPECT_EQ(-EINVAL, km_test_spsc_init(0));
	EXPECT_EQ(-EINVAL, km_test_spsc_init(1));
	EXPECT_EQ(-EINVAL, km_test_spsc_init(3));
	EXPECT_EQ(0, km_test_spsc_init(4));
}

TEST(Spsc, HoldsExactlyCapacityInOrder)
{
	for (uint32_t cap : { 2u, 8u, 1024u }) {
		uint32_t pushed = 0;
		int fifo = 0;
		ASSERT_EQ(0, km_test_spsc_fill(cap, &pushed, &fifo));
		EXPECT_EQ(cap, pushed);
		EXPECT_EQ(1, fifo);
	}
}

TEST(Spsc, TwoThreadsLoseAndReorderNothing)
{
	uint64_t full = 0;
	// A small ring so that the producer often finds it full and the
	// indexes wrap many times.
	ASSERT_EQ(0, km_test_spsc_threads(2000000, 8, &full));
	ASSERT_EQ(0, km_test_spsc_threads(200000, 1024, &full));
}
