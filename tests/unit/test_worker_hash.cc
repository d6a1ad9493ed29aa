// Goal: km_worker_hash (dataplane/worker.c), which gives each partition its
// owner worker, spreads one topic's partitions over the workers: with 2 or
// 4 workers, partition p and p ^ 1 must not always share a worker (a bare
// CRC32C of topic then partition, linear over GF(2), put them together for
// every topic), and the load is even; the owner is the same on every call.
//
// Method: the owners of partitions 0..7 of 500 topic names ("t0".."t499")
// over 2 and 4 workers, counted; bounds are far from what an even hash
// gives (50% and 25%) and far from what the linear one gave (100% pairs).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

// As dataplane/worker.h declares it; that header pulls in the C11 atomics
// of part.h, which C++ cannot read.
extern "C" uint32_t km_worker_hash(const char *topic, int32_t partition, uint32_t n);

TEST(WorkerHash, PartitionsOfATopicSpreadOverTwoAndFourWorkers)
{
	for (uint32_t n : { 2u, 4u }) {
		uint32_t per[4] = { 0, 0, 0, 0 }, paired = 0, pairs = 0, total = 0;
		for (int t = 0; t < 500; t++) {
			std::string topic = "t" + std::to_string(t);
			for (int32_t p = 0; p < 8; p++) {
				uint32_t o = km_worker_hash(topic.c_str(), p, n);
				ASSERT_LT(o, n);
				ASSERT_EQ(o, km_worker_hash(topic.c_str(), p, n)) << "not stable";
				per[o]++;
				total++;
				if ((p & 1) == 0) {
					pairs++;
					paired += o == km_worker_hash(topic.c_str(), p ^ 1, n);
				}
			}
		}
		for (uint32_t w = 0; w < n; w++)
			EXPECT_NEAR((double)per[w] / total, 1.0 / n, 0.05)
				<< "worker " << w << " of " << n;
		EXPECT_NEAR((double)paired / pairs, 1.0 / n, 0.1)
			<< "p and p^1 on one worker of " << n;
	}
	// One topic's 8 partitions reach both of 2 workers and 3+ of 4.
	for (uint32_t n : { 2u, 4u }) {
		bool used[4] = { false, false, false, false };
		for (int32_t p = 0; p < 8; p++)
			used[km_worker_hash("orders", p, n)] = true;
		int k = used[0] + used[1] + used[2] + used[3];
		EXPECT_GE(k, n == 2 ? 2 : 3) << n << " workers";
	}
	EXPECT_EQ(0u, km_worker_hash("orders", 3, 0));
}
