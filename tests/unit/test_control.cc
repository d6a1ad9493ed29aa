// Goal: control batches are byte-exact: the MIRROR_PID_RESET barrier per R3
// and spec §2 (98 bytes for a 22-character cluster id), ABORT/COMMIT markers
// per EndTransactionMarker (78 bytes); and parsing refuses malformed ones.
// Method: expected bytes written out field by field from the spec, compared
// with the builder's output; parse round trips; edited, re-checksummed values.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "common/endian.h"
#include "common/errors.h"
#include "common/km_limits.h"
#include "kafka/control.h"
#include "kafka/records.h"
#include "sample.h"

namespace {

const char kClusterId[] = "Zm9vYmFyYmF6cXV4cXV1eA"; // 22 characters

struct Bytes {
	std::vector<uint8_t> v;
	void I8(uint8_t x) { v.push_back(x); }
	void I16(uint16_t x) { I8(x >> 8); I8(x & 0xff); }
	void I32(uint32_t x) { I16(x >> 16); I16(x & 0xffff); }
	void I64(uint64_t x) { I32(x >> 32); I32(x & 0xffffffff); }
	void Raw(const std::string &s) { v.insert(v.end(), s.begin(), s.end()); }
};

// Spec §1-§2 laid out by hand; the CRC is filled in last.
std::vector<uint8_t> ExpectedBarrier(int64_t off, int32_t epoch, int64_t ts)
{
	Bytes b;
	b.I64(off);
	b.I32(86);     // batchLength = 98 - 12
	b.I32(epoch);  // partitionLeaderEpoch
	b.I8(2);       // magic
	b.I32(0);      // crc, below
	b.I16(0x20);   // attributes: isControl only
	b.I32(0);      // lastOffsetDelta
	b.I64(ts);     // baseTimestamp
	b.I64(ts);     // maxTimestamp
	b.I64(-1);     // producerId
	b.I16(0xffff); // producerEpoch -1
	b.I32(0xffffffff); // baseSequence -1
	b.I32(1);      // recordsCount
	b.I8(0x48);    // record length 36, zigzag varint
	b.I8(0);       // record attributes
	b.I8(0);       // timestampDelta 0
	b.I8(0);       // offsetDelta 0
	b.I8(0x08);    // keyLength 4
	b.I16(0);      // key version
	b.I16(7);      // key type MIRROR_PID_RESET
	b.I8(0x34);    // valueLength 26
	b.I16(0);      // MirrorPidResetRecord Version 0
	b.I8(23);      // COMPACT_STRING length + 1
	b.Raw(kClusterId);
	b.I8(0);       // empty tagged fields
	b.I8(0);       // headersCount 0
	km_store_be32(&b.v[17], km_crc32c_update(0, &b.v[21], b.v.size() - 21));
	return b.v;
}

std::vector<uint8_t> ExpectedMarker(int64_t off, int64_t pid, int16_t pepoch,
				    bool commit, int32_t coord, int64_t ts)
{
	Bytes b;
	b.I64(off);
	b.I32(66);
	b.I32(0);
	b.I8(2);
	b.I32(0);
	b.I16(0x30); // isControl | isTransactional
	b.I32(0);
	b.I64(ts);
	b.I64(ts);
	b.I64(pid);
	b.I16(pepoch);
	b.I32(0xffffffff);
	b.I32(1);
	b.I8(0x20); // record length 16
	b.I8(0);
	b.I8(0);
	b.I8(0);
	b.I8(0x08);
	b.I16(0);
	b.I16(commit ? 1 : 0);
	b.I8(0x0c); // valueLength 6
	b.I16(0);   // EndTxnMarker version
	b.I32(coord);
	b.I8(0);
	km_store_be32(&b.v[17], km_crc32c_update(0, &b.v[21], b.v.size() - 21));
	return b.v;
}

int ParseCtrl(std::vector<uint8_t> &buf, km_ctrl *c, size_t cut = 0)
{
	static sample::Chain *keep;
	delete keep;
	keep = new sample::Chain(buf, {cut});
	static km_batch b;
	int rc = km_batch_parse(&b, &keep->chain, km_chain_start(&keep->chain),
				KM_BATCH_BYTES_MAX);
	if (rc <= 0)
		return rc == 0 ? -1 : rc;
	return km_ctrl_parse(&b, c);
}

TEST(Barrier, ExactBytes)
{
	km_ctrl_spec s = {1234, 5, 1700000000123};
	std::vector<uint8_t> buf(200);
	int n = km_ctrl_build_pid_reset(buf.data(), buf.size(), &s, kClusterId);
	ASSERT_EQ(98, n);
	buf.resize(n);
	EXPECT_EQ(ExpectedBarrier(1234, 5, 1700000000123), buf);
}

TEST(Barrier, ParsesAtEverySplit)
{
	km_ctrl_spec s = {0, 0, 1};
	std::vector<uint8_t> buf(98);
	ASSERT_EQ(98, km_ctrl_build_pid_reset(buf.data(), 98, &s, kClusterId));
	for (size_t cut = 0; cut <= buf.size(); cut++) {
		km_ctrl c;
		ASSERT_EQ(0, ParseCtrl(buf, &c, cut)) << cut;
		EXPECT_EQ(KM_CTRL_MIRROR_PID_RESET, c.type);
		EXPECT_EQ(0, c.value_version);
		EXPECT_STREQ(kClusterId, c.cluster_id);
		EXPECT_EQ(22u, c.cluster_id_len);
	}
	EXPECT_STREQ("MIRROR_PID_RESET", km_ctrl_type_name(7));
}

TEST(Barrier, ClusterIdLimits)
{
	km_ctrl_spec s = {0, 0, 1};
	std::vector<uint8_t> buf(512);
	EXPECT_EQ(KM_ECLUSTERID, km_ctrl_build_pid_reset(buf.data(), 512, &s, ""));
	std::string longest(KM_CLUSTER_ID_BYTES_MAX, 'x');
	int n = km_ctrl_build_pid_reset(buf.data(), 512, &s, longest.c_str());
	ASSERT_GT(n, 0);
	buf.resize(n);
	km_ctrl c;
	ASSERT_EQ(0, ParseCtrl(buf, &c));
	EXPECT_EQ(longest, c.cluster_id);
	std::string too_long(KM_CLUSTER_ID_BYTES_MAX + 1, 'x');
	EXPECT_EQ(KM_ECLUSTERID,
		  km_ctrl_build_pid_reset(buf.data(), 512, &s, too_long.c_str()));
	uint8_t small[97];
	EXPECT_EQ(KM_ENOSPACE, km_ctrl_build_pid_reset(small, 97, &s, kClusterId));
}

TEST(Barrier, TaggedFieldsAreSkipped)
{
	// A future writer may add tagged fields; v0 readers skip them.
	std::string id = "abc";
	std::vector<uint8_t> value = {0, 0, 4, 'a', 'b', 'c', 1, 9, 2, 0xaa, 0xbb};
	uint8_t key[4] = {0, 0, 0, 7};
	km_record_spec r = {key, 4, value.data(), (int32_t)value.size(), 5,
			    nullptr, 0};
	km_batch_spec bs = {0, 0, KM_BATCH_ATTR_CONTROL, -1, -1, -1};
	std::vector<uint8_t> buf(km_records_build_size(&r, 1));
	ASSERT_GT(km_records_build(buf.data(), buf.size(), &bs, &r, 1), 0);
	km_ctrl c;
	ASSERT_EQ(0, ParseCtrl(buf, &c));
	EXPECT_EQ(id, c.cluster_id);
	// A tag whose size runs past the value is malformed.
	value[8] = 9;
	r.value = value.data();
	ASSERT_GT(km_records_build(buf.data(), buf.size(), &bs, &r, 1), 0);
	EXPECT_EQ(KM_ECTRLVALUE, ParseCtrl(buf, &c));
}

TEST(Marker, ExactBytesCommitAndAbort)
{
	for (bool commit : {true, false}) {
		km_ctrl_spec s = {77, 0, 1700000000999};
		std::vector<uint8_t> buf(100);
		int n = km_ctrl_build_marker(buf.data(), buf.size(), &s, 4000, 3,
					     commit, 12);
		ASSERT_EQ(KM_CTRL_MARKER_BATCH_BYTES, n);
		buf.resize(n);
		EXPECT_EQ(ExpectedMarker(77, 4000, 3, commit, 12, 1700000000999), buf);
		km_ctrl c;
		ASSERT_EQ(0, ParseCtrl(buf, &c, 40));
		EXPECT_EQ(commit ? KM_CTRL_COMMIT : KM_CTRL_ABORT, c.type);
		EXPECT_EQ(12, c.coordinator_epoch);
		EXPECT_EQ(0, c.value_version);
	}
}

std::vector<uint8_t> CtrlWith(std::vector<uint8_t> key, std::vector<uint8_t> value)
{
	km_record_spec r = {key.data(), (int32_t)key.size(), value.data(),
			    (int32_t)value.size(), 5, nullptr, 0};
	km_batch_spec bs = {0, 0, KM_BATCH_ATTR_CONTROL | KM_BATCH_ATTR_TRANSACTIONAL,
			    9, 0, -1};
	std::vector<uint8_t> buf(km_records_build_size(&r, 1));
	EXPECT_GT(km_records_build(buf.data(), buf.size(), &bs, &r, 1), 0);
	return buf;
}

TEST(ControlParse, MalformedKeysAndValues)
{
	km_ctrl c;
	auto short_key = CtrlWith({0, 0, 1}, {0, 0, 0, 0, 0, 1});
	EXPECT_EQ(KM_ECTRLKEY, ParseCtrl(short_key, &c));
	auto neg_version = CtrlWith({0xff, 0xff, 0, 1}, {0, 0, 0, 0, 0, 1});
	EXPECT_EQ(KM_ECTRLKEY, ParseCtrl(neg_version, &c));
	auto short_marker = CtrlWith({0, 0, 0, 1}, {0, 0, 0, 0, 0});
	EXPECT_EQ(KM_ECTRLVALUE, ParseCtrl(short_marker, &c));
	auto null_id = CtrlWith({0, 0, 0, 7}, {0, 0, 0, 0});
	EXPECT_EQ(KM_ECTRLVALUE, ParseCtrl(null_id, &c));
	auto cut_id = CtrlWith({0, 0, 0, 7}, {0, 0, 10, 'a', 0});
	EXPECT_EQ(KM_ECTRLVALUE, ParseCtrl(cut_id, &c));
	// A higher key version reads as v0; an unknown type is not an error.
	auto v1 = CtrlWith({0, 1, 0, 0}, {0, 0, 0, 0, 0, 2});
	ASSERT_EQ(0, ParseCtrl(v1, &c));
	EXPECT_EQ(KM_CTRL_ABORT, c.type);
	EXPECT_EQ(2, c.coordinator_epoch);
	auto unknown = CtrlWith({0, 0, 0, 42}, {1, 2, 3});
	ASSERT_EQ(0, ParseCtrl(unknown, &c));
	EXPECT_EQ(42, c.type);
	EXPECT_STREQ("UNKNOWN", km_ctrl_type_name(42));
}

TEST(ControlParse, DataBatchIsNotControl)
{
	auto buf = sample::DataBatch(0, 1, 1);
	km_ctrl c;
	EXPECT_EQ(KM_ENOTCONTROL, ParseCtrl(buf, &c));
}

} // namespace
