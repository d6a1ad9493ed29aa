// Goal: the fetch cap's bucket (dataplane/fetch/throttle.h) does what the
// fetch sessions rely on: no cap costs nothing and holds nothing back; a
// charge holds the next Fetch for bytes / rate; the credit is reckoned when
// the bytes were asked for, and an idle bucket keeps at most
// KM_THROTTLE_BURST_US of it; a Fetch asks for its credit, at least
// KM_THROTTLE_CHUNK_US worth; charges from several threads at once are all
// counted (the workers share one bucket); the rate changes at run time.
// Method: the functions take the clock as an argument, so every time here
// is a fixed number of microseconds; the threads' case checks the bucket's
// time against the sum of every charge's cost.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "dataplane/fetch/throttle.h"

namespace {

constexpr uint64_t kT0 = 1000000000ull; // an arbitrary "now", in us
constexpr uint64_t kMiB = 1 << 20;

TEST(Throttle, NoCapHoldsNothing)
{
	km_throttle t;
	km_throttle_init(&t, 0);
	EXPECT_FALSE(km_throttle_on(&t));
	EXPECT_FALSE(km_throttle_on(nullptr));
	km_throttle_charge(&t, 100 * kMiB, kT0, kT0);
	EXPECT_EQ(0u, km_throttle_wait_ms(&t, kT0));
	EXPECT_EQ(123, km_throttle_allow(&t, kT0, 123));
	km_throttle_stats st;
	km_throttle_get_stats(&t, &st);
	EXPECT_EQ(0u, st.rate);
	EXPECT_EQ(0u, st.throttled_ms);
}

TEST(Throttle, ChargeHoldsTheNextFetchForBytesOverRate)
{
	km_throttle t;
	km_throttle_init(&t, kMiB); // 1 MiB/s: 1 byte ~ 0.95 us
	ASSERT_TRUE(km_throttle_on(&t));
	EXPECT_EQ(0u, km_throttle_wait_ms(&t, kT0));
	// A fresh bucket has the burst's credit: 100 ms worth.
	EXPECT_EQ((int32_t)(kMiB * KM_THROTTLE_BURST_US / 1000000),
		  km_throttle_allow(&t, kT0, INT32_MAX));
	// 1 MiB costs 1 s, less the 100 ms of credit.
	km_throttle_charge(&t, kMiB, kT0, kT0);
	EXPECT_EQ(900u, km_throttle_wait_ms(&t, kT0));
	EXPECT_EQ(1u, km_throttle_wait_ms(&t, kT0 + 899999));
	EXPECT_EQ(0u, km_throttle_wait_ms(&t, kT0 + 900000));
	// In debt, a Fetch still asks for a useful piece: 100 ms worth.
	EXPECT_EQ((int32_t)(kMiB * KM_THROTTLE_CHUNK_US / 1000000),
		  km_throttle_allow(&t, kT0, INT32_MAX));
	EXPECT_EQ(4096, km_throttle_allow(&t, kT0, 4096));
	km_throttle_stats st;
	km_throttle_get_stats(&t, &st);
	EXPECT_EQ(kMiB, st.rate);
	EXPECT_EQ(900u, st.throttled_ms);
}

TEST(Throttle, CreditIsReckonedWhenTheBytesWereAsked)
{
	km_throttle t;
	km_throttle_init(&t, 1000000); // 1 byte = 1 us
	km_throttle_charge(&t, 200000, kT0, kT0); // paid until kT0 + 100 ms
	ASSERT_EQ(100u, km_throttle_wait_ms(&t, kT0));
	// Asked the moment the debt was paid, answered 300 ms later: paid
	// from when it was asked (reckoned at the answer, the 200 ms on the
	// way past the burst would be credit lost: paid at asked + 250 ms).
	uint64_t asked = kT0 + 100000;
	km_throttle_charge(&t, 50000, asked, asked + 300000);
	EXPECT_EQ(50u, km_throttle_wait_ms(&t, asked));
	EXPECT_EQ(1u, km_throttle_wait_ms(&t, asked + 49001));
	EXPECT_EQ(0u, km_throttle_wait_ms(&t, asked + 50000));
	// Idle for a minute: only the burst's credit is kept.
	uint64_t later = kT0 + 60000000ull;
	km_throttle_charge(&t, 300000, later, later);
	EXPECT_EQ((300000 - KM_THROTTLE_BURST_US) / 1000,
		  km_throttle_wait_ms(&t, later));
}

TEST(Throttle, ChargesFromManyThreadsAreAllCounted)
{
	km_throttle t;
	km_throttle_init(&t, 1000000); // 1 byte = 1 us
	// Far in debt first, so that no charge below meets the burst's clamp.
	km_throttle_charge(&t, 10000000, kT0, kT0);
	uint64_t before = km_throttle_wait_ms(&t, kT0);
	constexpr int kThreads = 4, kCharges = 400000, kBytes = 10;
	std::atomic<int> ready{ 0 };
	std::vector<std::thread> th;
	for (int i = 0; i < kThreads; i++)
		th.emplace_back([&t, &ready] {
			// All start together, so that their charges overlap.
			ready++;
			while (ready.load() < kThreads)
				std::this_thread::yield();
			for (int k = 0; k < kCharges; k++)
				km_throttle_charge(&t, kBytes, kT0, kT0);
		});
	for (auto &x : th)
		x.join();
	// Every charge moved the bucket's time by its cost: none was lost.
	EXPECT_EQ(before + (uint64_t)kThreads * kCharges * kBytes / 1000,
		  km_throttle_wait_ms(&t, kT0));
}

TEST(Throttle, RateChangesAtRunTime)
{
	km_throttle t;
	km_throttle_init(&t, 0);
	km_throttle_set_rate(&t, 1000000);
	EXPECT_TRUE(km_throttle_on(&t));
	km_throttle_charge(&t, 500000, kT0, kT0);
	EXPECT_EQ(400u, km_throttle_wait_ms(&t, kT0));
	km_throttle_set_rate(&t, 0); // lifted: nothing held any more
	EXPECT_EQ(0u, km_throttle_wait_ms(&t, kT0));
	EXPECT_EQ(7, km_throttle_allow(&t, kT0, 7));
}

TEST(Throttle, SourceThrottleIsCounted)
{
	km_throttle t;
	km_throttle_init(&t, 0);
	km_throttle_source(&t, 250);
	km_throttle_source(&t, 0);
	km_throttle_source(&t, -5);
	km_throttle_source(nullptr, 100);
	km_throttle_source(&t, 50);
	km_throttle_stats st;
	km_throttle_get_stats(&t, &st);
	EXPECT_EQ(300u, st.source_throttle_ms);
	EXPECT_EQ(2u, st.source_throttles);
	EXPECT_EQ(0u, st.throttled_ms);
}

} // namespace
