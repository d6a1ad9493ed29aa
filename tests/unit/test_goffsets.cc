/* Committed offsets: the __consumer_offsets record codec against bytes
 * derived by hand from Kafka's OffsetCommitKey/OffsetCommitValue schemas,
 * every truncation, and the table rebuilt from the batches it builds (what
 * a restart does), compaction's copy included. */
#include <sys/uio.h>

#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

extern "C" {
#include "common/errors.h"
#include "common/km_limits.h"
#include "dataplane/group/goffsets.h"
#include "common/endian.h"
#include "kafka/batch.h"
#include "kafka/control.h"
#include "kafka/gorec.h"
#include "kafka/records.h"
}

namespace {

using Bytes = std::vector<uint8_t>;

TEST(Gorec, KeyGoldenBytes)
{
	uint8_t buf[KM_GOREC_KEY_MAX];
	int n = km_gorec_key_encode(buf, sizeof(buf), "g1", "orders", 7);
	/* version 1, "g1", "orders", partition 7 */
	const Bytes want = { 0, 1, 0, 2, 'g', '1', 0, 6, 'o', 'r', 'd',
			     'e', 'r', 's', 0, 0, 0, 7 };
	ASSERT_EQ((int)want.size(), n);
	EXPECT_EQ(want, Bytes(buf, buf + n));

	km_gorec_key k;
	ASSERT_EQ(0, km_gorec_key_decode(buf, (size_t)n, &k));
	EXPECT_EQ(1, k.version);
	EXPECT_STREQ("g1", k.group);
	EXPECT_STREQ("orders", k.topic);
	EXPECT_EQ(7, k.partition);
	for (int cut = 0; cut < n; cut++)
		EXPECT_EQ(KM_EGOREC, km_gorec_key_decode(buf, (size_t)cut, &k))
			<< cut;
	uint8_t longer[sizeof(buf) + 1];
	memcpy(longer, buf, (size_t)n);
	longer[n] = 0;
	EXPECT_EQ(KM_EGOREC, km_gorec_key_decode(longer, (size_t)n + 1, &k))
		<< "trailing byte";
	EXPECT_EQ(KM_ENOSPACE, km_gorec_key_encode(buf, 10, "g1", "orders", 7));
	EXPECT_EQ(KM_EGOREC,
		  km_gorec_key_encode(buf, sizeof(buf),
				      std::string(256, 'x').c_str(), "t", 0));
}

TEST(Gorec, GroupMetadataKeyIsRecognised)
{
	const Bytes key = { 0, 2, 0, 2, 'g', '1' };
	km_gorec_key k;
	ASSERT_EQ(0, km_gorec_key_decode(key.data(), key.size(), &k));
	EXPECT_EQ(2, k.version);
	EXPECT_STREQ("g1", k.group);
	const Bytes bad = { 0, 9, 0, 0 };
	EXPECT_EQ(KM_EGOREC, km_gorec_key_decode(bad.data(), bad.size(), &k));
}

TEST(Gorec, ValueGoldenBytesAndOlderVersions)
{
	uint8_t buf[KM_GOREC_VALUE_MAX];
	km_gorec_value v = { 0x0102030405060708LL, 5, 1700000000000LL, "md", 2 };
	int n = km_gorec_value_encode(buf, sizeof(buf), &v);
	const Bytes want = { 0, 3, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 5, 0, 2,
			     'm', 'd', 0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0 };
	ASSERT_EQ((int)want.size(), n);
	EXPECT_EQ(want, Bytes(buf, buf + n));
	km_gorec_value d;
	ASSERT_EQ(0, km_gorec_value_decode(buf, (size_t)n, &d));
	EXPECT_EQ(v.offset, d.offset);
	EXPECT_EQ(5, d.leader_epoch);
	EXPECT_EQ(v.commit_ts, d.commit_ts);
	EXPECT_EQ(std::string("md"), std::string(d.metadata, d.metadata_len));
	for (int cut = 0; cut < n; cut++)
		EXPECT_EQ(KM_EGOREC, km_gorec_value_decode(buf, (size_t)cut, &d));

	/* v1: offset, metadata, commitTimestamp, expireTimestamp. */
	const Bytes v1 = { 0, 1, 0, 0, 0, 0, 0, 0, 0, 42, 0, 0, 0, 0, 0, 0,
			   0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 10 };
	ASSERT_EQ(0, km_gorec_value_decode(v1.data(), v1.size(), &d));
	EXPECT_EQ(42, d.offset);
	EXPECT_EQ(-1, d.leader_epoch);
	EXPECT_EQ(9, d.commit_ts);
	EXPECT_EQ(0, d.metadata_len);

	std::string big(KM_GOREC_METADATA_MAX + 1, 'm');
	km_gorec_value b = { 1, -1, 0, big.data(), (uint16_t)big.size() };
	EXPECT_EQ(KM_EGOREC, km_gorec_value_encode(buf, sizeof(buf), &b));
}

struct Table {
	km_goffsets *t = nullptr;
	Table() { EXPECT_EQ(0, km_goffsets_create(&t)); }
	~Table() { km_goffsets_destroy(t); }
};

using Key = std::tuple<std::string, std::string, int32_t>;
using Snapshot = std::map<Key, std::pair<int64_t, std::string>>;

Snapshot snapshot(const km_goffsets *t, const char *group = nullptr)
{
	Snapshot s;
	km_goffsets_each(
		t, group,
		[](void *arg, const char *g, const char *tp, int32_t p,
		   const km_goffset *o) {
			(*(Snapshot *)arg)[Key(g, tp, p)] = {
				o->offset, std::string(o->metadata, o->metadata_len)
			};
		},
		&s);
	return s;
}

/* Apply every batch of buf (batches back to back) to t. */
int replay(km_goffsets *t, const uint8_t *buf, size_t len)
{
	iovec iov = { (void *)buf, len };
	km_chain ch = { &iov, 1 };
	km_chain_cur cur = { 0, 0 };
	km_batch b;
	int n = 0, rc;

	while (cur.off < len &&
	       (rc = km_batch_parse(&b, &ch, cur, KM_BATCH_BYTES_MAX)) > 0) {
		int got = km_goffsets_apply_batch(t, &b);
		if (got < 0)
			return got;
		n += got;
		cur.off += (uint32_t)rc;
	}
	return n;
}

TEST(Goffsets, PutGetDeleteAndGrow)
{
	Table a;
	for (int i = 0; i < 5000; i++) {
		std::string g = "g" + std::to_string(i % 7);
		km_gorec_value v = { i, -1, 0, "", 0 };
		ASSERT_EQ(0, km_goffsets_put(a.t, g.c_str(), "t", i, &v));
	}
	EXPECT_EQ(5000u, km_goffsets_count(a.t));
	const km_goffset *o = km_goffsets_get(a.t, "g3", "t", 3);
	ASSERT_NE(nullptr, o);
	EXPECT_EQ(3, o->offset);
	EXPECT_EQ(nullptr, km_goffsets_get(a.t, "g4", "t", 3));
	km_gorec_value v = { 99, 2, 0, "x", 1 };
	ASSERT_EQ(0, km_goffsets_put(a.t, "g3", "t", 3, &v));
	EXPECT_EQ(99, km_goffsets_get(a.t, "g3", "t", 3)->offset);
	EXPECT_EQ(5000u, km_goffsets_count(a.t));
	ASSERT_EQ(0, km_goffsets_put(a.t, "g3", "t", 3, nullptr));
	EXPECT_EQ(nullptr, km_goffsets_get(a.t, "g3", "t", 3));
	EXPECT_EQ(4999u, km_goffsets_count(a.t));
	EXPECT_EQ(713u, snapshot(a.t, "g3").size()) << "714 less the one deleted";
}

TEST(Goffsets, BatchesRebuildTheTable)
{
	Table live, replayed;
	std::vector<uint8_t> log;
	for (int round = 0; round < 20; round++) {
		std::vector<std::string> groups, md;
		std::vector<km_gorec_value> vals(8);
		std::vector<km_goffsets_commit> c(8);
		for (int i = 0; i < 8; i++) {
			groups.push_back("group-" + std::to_string((round + i) % 5));
			md.push_back(std::string((size_t)(round * i % 50), 'a' + i));
		}
		for (int i = 0; i < 8; i++) {
			vals[i] = { round * 100 + i, round, 1000 + round, md[i].c_str(),
				    (uint16_t)md[i].size() };
			bool del = round % 7 == 6 && i == 0;
			c[i] = { groups[i].c_str(), "topic", i % 3, del ? nullptr : &vals[i] };
			ASSERT_EQ(0, km_goffsets_put(live.t, c[i].group, c[i].topic,
						     c[i].partition, c[i].value));
		}
		size_t cap = km_goffsets_build_size(c.data(), 8);
		size_t at = log.size();
		log.resize(at + cap);
		int n = km_goffsets_build(log.data() + at, cap, c.data(), 8, 5);
		ASSERT_GT(n, 0);
		log.resize(at + (size_t)n);
	}
	ASSERT_EQ(160, replay(replayed.t, log.data(), log.size()));
	EXPECT_EQ(snapshot(live.t), snapshot(replayed.t));

	/* Compaction's copy alone says the same. */
	uint8_t *all = nullptr;
	size_t len = 0;
	ASSERT_EQ(2, km_goffsets_build_all(live.t, 10, 7, &all, &len));
	Table compacted;
	EXPECT_EQ((int)km_goffsets_count(live.t), replay(compacted.t, all, len));
	EXPECT_EQ(snapshot(live.t), snapshot(compacted.t));
	free(all);
}

/* A batch is built in exactly km_goffsets_build_size bytes, at most
 * km_goffsets_batch_bytes long, whatever the names and metadata: the room
 * it is built in is the caller's buffer. */
TEST(Goffsets, BuildFitsItsSizeAndItsBound)
{
	std::vector<std::string> groups, topics, md;
	std::vector<km_gorec_value> vals(40);
	std::vector<km_goffsets_commit> c(40);
	for (int i = 0; i < 40; i++) {
		groups.push_back(std::string((size_t)(1 + i * 6), 'g'));
		topics.push_back(std::string((size_t)(255 - i), 't'));
		md.push_back(std::string((size_t)(i * 100), 'm'));
	}
	for (int i = 0; i < 40; i++) {
		vals[i] = { i, i, 7, md[i].c_str(), (uint16_t)md[i].size() };
		c[i] = { groups[i].c_str(), topics[i].c_str(), i,
			 i % 9 == 8 ? nullptr : &vals[i] };
	}
	for (uint32_t n : { 0u, 1u, 13u, 40u }) {
		size_t cap = km_goffsets_build_size(c.data(), n);
		std::vector<uint8_t> buf(cap + 1);
		/* Odd address: the staged record specs are aligned inside. */
		int got = km_goffsets_build(buf.data() + 1, cap, c.data(), n, 5);
		if (n == 0)
			continue;
		ASSERT_GT(got, 0) << n << ": " << km_strerror(got);
		EXPECT_LE((size_t)got, km_goffsets_batch_bytes(c.data(), n));
		Table live, replayed;
		for (uint32_t i = 0; i < n; i++)
			ASSERT_EQ(0, km_goffsets_put(live.t, c[i].group, c[i].topic,
						     c[i].partition, c[i].value));
		ASSERT_EQ((int)n, replay(replayed.t, buf.data() + 1, (size_t)got));
		EXPECT_EQ(snapshot(live.t), snapshot(replayed.t));
	}
	uint8_t tiny[64];
	EXPECT_EQ(KM_ENOSPACE, km_goffsets_build(tiny, sizeof(tiny), c.data(), 3, 5));
}

/* A key's later commits reuse its memory, and its metadata may grow and
 * shrink. */
TEST(Goffsets, RecommitsKeepTheKey)
{
	Table a;
	std::string big(KM_GOREC_METADATA_MAX, 'b');
	km_gorec_value v0 = { 1, -1, 0, "", 0 };
	km_gorec_value v1 = { 2, 3, 9, big.data(), (uint16_t)big.size() };
	km_gorec_value v2 = { 3, 4, 10, "xy", 2 };
	ASSERT_EQ(0, km_goffsets_put(a.t, "g", "t", 0, &v0));
	const km_goffset *o = km_goffsets_get(a.t, "g", "t", 0);
	ASSERT_EQ(0, km_goffsets_put(a.t, "g", "t", 0, &v1));
	EXPECT_EQ(o, km_goffsets_get(a.t, "g", "t", 0)) << "the key moved";
	EXPECT_EQ(big, std::string(o->metadata, o->metadata_len));
	ASSERT_EQ(0, km_goffsets_put(a.t, "g", "t", 0, &v2));
	EXPECT_EQ(3, o->offset);
	EXPECT_EQ(4, o->leader_epoch);
	EXPECT_EQ(10, o->commit_ts);
	EXPECT_STREQ("xy", o->metadata);
	EXPECT_EQ(2, o->metadata_len);
	EXPECT_EQ(1u, km_goffsets_count(a.t));
}

TEST(Goffsets, AMalformedRecordIsRefused)
{
	Table a;
	km_gorec_value v = { 1, -1, 0, "", 0 };
	km_goffsets_commit c = { "g", "t", 0, &v };
	uint8_t buf[512];
	int n = km_goffsets_build(buf, sizeof(buf), &c, 1, 0);
	ASSERT_GT(n, 0);
	/* A key too long for its own length field: rebuild with a bad key. */
	const char bad_key[] = { 0, 1, 0, 50, 'g' };
	km_record_spec r = { bad_key, (int32_t)sizeof(bad_key), nullptr, -1, 0,
			     nullptr, 0 };
	km_batch_spec spec = { 0, -1, 0, -1, -1, -1 };
	n = km_records_build(buf, sizeof(buf), &spec, &r, 1);
	ASSERT_GT(n, 0);
	EXPECT_EQ(KM_EGOREC, replay(a.t, buf, (size_t)n));
	EXPECT_EQ(0u, km_goffsets_count(a.t));
}

/* One batch of commits (transactional for pid >= 0) at base offset base,
 * appended to log. */
void append_commits(Bytes *log, int64_t base, int64_t pid,
		    const std::vector<std::tuple<int32_t, int64_t>> &parts)
{
	std::vector<km_gorec_value> v(parts.size());
	std::vector<km_goffsets_commit> c(parts.size());
	for (size_t i = 0; i < parts.size(); i++) {
		v[i] = { std::get<1>(parts[i]), -1, 1700000000000LL, "", 0 };
		c[i] = { "g", "t", std::get<0>(parts[i]), &v[i] };
	}
	Bytes buf(km_goffsets_build_size(c.data(), (uint32_t)c.size()));
	int n = pid < 0 ? km_goffsets_build(buf.data(), buf.size(), c.data(),
					    (uint32_t)c.size(), 1700000000000LL)
			: km_goffsets_build_txn(buf.data(), buf.size(), c.data(),
						(uint32_t)c.size(), 1700000000000LL,
						pid, 3);
	ASSERT_GT(n, 0);
	km_store_be64(buf.data(), (uint64_t)base);
	log->insert(log->end(), buf.begin(), buf.begin() + n);
}

void append_marker(Bytes *log, int64_t base, int64_t pid, bool commit)
{
	uint8_t m[KM_CTRL_MARKER_BATCH_BYTES];
	km_ctrl_spec s = { base, -1, 1700000000000LL };
	ASSERT_EQ((int)sizeof(m), km_ctrl_build_marker(m, sizeof(m), &s, pid, 3,
						       commit, 0));
	log->insert(log->end(), m, m + sizeof(m));
}

int64_t offset_of(const km_goffsets *t, int32_t part)
{
	const km_goffset *o = km_goffsets_get(t, "g", "t", part);
	return o ? o->offset : -1;
}

/* TxnOffsetCommit's records (issue 20) as Kafka's OffsetMetadataManager
 * replays them: a transactional batch's commits are pending (not in the
 * table, but km_goffsets_pending) until their producer's marker; a COMMIT
 * puts each one in unless a plain commit of the key lies after it in the
 * log (replayEndTransactionMarker compares record offsets), an ABORT drops
 * them, another producer's marker leaves them. */
TEST(Goffsets, TransactionalCommitsWaitForTheirMarker)
{
	Bytes log;
	append_commits(&log, 0, -1, { { 0, 10 } });
	append_commits(&log, 1, 7, { { 0, 20 }, { 1, 21 } });
	append_commits(&log, 3, 8, { { 2, 30 } });
	append_commits(&log, 4, -1, { { 1, 99 } });
	const size_t open_end = log.size();
	append_marker(&log, 5, 7, true);
	append_marker(&log, 6, 8, false);

	km_goffsets *t = nullptr;
	ASSERT_EQ(0, km_goffsets_create(&t));
	ASSERT_EQ(5, replay(t, log.data(), open_end));
	EXPECT_EQ(10, offset_of(t, 0));
	EXPECT_EQ(99, offset_of(t, 1));
	EXPECT_EQ(-1, offset_of(t, 2));
	EXPECT_TRUE(km_goffsets_pending(t, "g", "t", 0));
	EXPECT_TRUE(km_goffsets_pending(t, "g", "t", 2));
	EXPECT_FALSE(km_goffsets_pending(t, "g", "t", 3));
	EXPECT_EQ(3u, km_goffsets_pending_count(t));
	EXPECT_EQ(0, km_goffsets_end_txn(t, 9, true)) << "no such producer";
	km_goffsets_destroy(t);

	ASSERT_EQ(0, km_goffsets_create(&t));
	ASSERT_EQ(5 + 2 + 1, replay(t, log.data(), log.size()));
	EXPECT_EQ(20, offset_of(t, 0)) << "committed";
	EXPECT_EQ(99, offset_of(t, 1)) << "the later plain commit stays";
	EXPECT_EQ(-1, offset_of(t, 2)) << "aborted";
	EXPECT_EQ(0u, km_goffsets_pending_count(t));
	EXPECT_EQ(2u, km_goffsets_count(t));
	km_goffsets_destroy(t);
}

} // namespace
