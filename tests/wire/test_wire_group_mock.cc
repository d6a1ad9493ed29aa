// Goal: the consumer-group codecs interoperate with a group coordinator no
// one here wrote: librdkafka 2.0.2's mock cluster, which advertises
// FindCoordinator 0-2, OffsetCommit 0-7, OffsetFetch 0-5, JoinGroup 0-5,
// Heartbeat 0-3, LeaveGroup 0-1 and SyncGroup 0-3.
// Method: over sockets, the client path kmirror uses against a source
// cluster: FindCoordinator finds the coordinator, JoinGroup (v5, retried
// with the member id the mock hands out) makes us the leader of a
// generation, SyncGroup gives us our own assignment back, Heartbeat keeps
// it, OffsetCommit v7 stores an offset with metadata and OffsetFetch v5
// reads the same offset back, LeaveGroup v1 ends the membership. Each
// request is encoded by kafka/proto_group_*.c, each answer decoded by them.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <unistd.h>

#include "group_util.h"
#include "tests/support/kafka_peers.h"

namespace {

using wt::Bytes;
using wt::Name;

const char kTopic[] = "wire-group";
const char kGroup[] = "wire-group-g";
const int kTimeoutMs = 15000;

class Conn {
public:
	~Conn()
	{
		if (fd_ >= 0)
			close(fd_);
	}
	std::string Connect(const std::string &host, uint16_t port)
	{
		return kmtest::tcp_connect(host, port, kTimeoutMs, &fd_);
	}
	// Send one frame, receive one whole response frame.
	std::string RoundTrip(const uint8_t *p, size_t n, Bytes *resp)
	{
		auto deadline = kmtest::deadline_in(kTimeoutMs);
		std::string err = kmtest::io_all(fd_, (uint8_t *)p, n, true,
						 deadline);
		if (!err.empty())
			return err;
		uint8_t be[4];
		err = kmtest::io_all(fd_, be, 4, false, deadline);
		if (!err.empty())
			return err;
		uint32_t size = ntohl(*(uint32_t *)be);
		if (size > (1u << 24))
			return "response too large";
		resp->assign(be, be + 4);
		resp->resize(4 + size);
		return kmtest::io_all(fd_, resp->data() + 4, size, false,
				      deadline);
	}

private:
	int fd_ = -1;
};

class WireGroupMock : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ("", mock_.error());
		ASSERT_EQ("", mock_.create_topic(kTopic, 2, 1));
		ASSERT_EQ("", boot_.Connect(mock_.host(), mock_.port()));
	}

	// Encode s's (key, v) request, send it on c, decode the answer into
	// s's response of the same API.
	void Call(Conn *c, int16_t key, int16_t v)
	{
		uint8_t buf[4096];
		km_wire_wr w;
		km_wire_wr_init(&w, buf, sizeof(buf));
		int32_t corr = corr_++;
		km_reqhdr h = {key, v, corr, Name("kmirror-group-test"), false};
		ASSERT_EQ(0, km_proto_req_begin(&w, &h));
		ASSERT_EQ(0, gt::Encode(&w, &s_, key, true, v));
		ASSERT_GT(km_wire_wr_frame_end(&w), 0);
		ASSERT_EQ("", c->RoundTrip(buf, w.pos, &resp_));
		chain_.reset(new wt::Chain(resp_, {5, 9}));
		km_chain_cur cur = km_chain_start(chain_->get());
		km_chain_advance(chain_->get(), &cur, 4);
		km_wire_rd r;
		km_wire_rd_init(&r, chain_->get(), cur,
				(uint32_t)resp_.size() - 4,
				&km_wire_limits_default);
		int32_t got = 0;
		ASSERT_EQ(0, km_resphdr_decode(&r, key, v, &got));
		EXPECT_EQ(corr, got);
		ASSERT_EQ(0, gt::Decode(&r, &s_, key, false, v))
			<< "key " << key << " v" << v;
	}

	kmtest::MockCluster mock_{3};
	Conn boot_;
	gt::Store s_;
	Bytes resp_;
	std::unique_ptr<wt::Chain> chain_;
	int32_t corr_ = 1;
};

TEST_F(WireGroupMock, AGenerationCommitsAndReadsBack)
{
	// FindCoordinator v2 on the bootstrap broker.
	s_.fcq = {Name(kGroup), 0};
	ASSERT_NO_FATAL_FAILURE(Call(&boot_, KM_API_FIND_COORDINATOR, 2));
	ASSERT_EQ(0, s_.fcp.error_code) << km_kerr_name(s_.fcp.error_code);
	EXPECT_GE(s_.fcp.node_id, 1);
	EXPECT_LE(s_.fcp.node_id, 3);
	EXPECT_STREQ("127.0.0.1", s_.fcp.host.s);
	Conn coord;
	ASSERT_EQ("", coord.Connect(s_.fcp.host.s, (uint16_t)s_.fcp.port));

	// JoinGroup v5; KIP-394 brokers answer MEMBER_ID_REQUIRED first.
	static const char kMeta[] = "\x00\x01\x00\x00\x00\x01\x00\x0a"
				    "wire-group\x00\x00\x00\x00";
	const int32_t meta_len = (int32_t)sizeof(kMeta) - 1;
	km_joingroup_protocol proto = {Name("range"), {kMeta, meta_len, {}}};
	auto Join = [&](const km_wire_name &member) {
		s_.Wire();
		s_.jgq = {Name(kGroup), 10000, 10000, member, Name(nullptr),
			  Name("consumer"), &proto, 1, 1};
		Call(&coord, KM_API_JOIN_GROUP, 5);
	};
	ASSERT_NO_FATAL_FAILURE(Join(Name("")));
	if (s_.jgp.error_code == KM_KERR_MEMBER_ID_REQUIRED) {
		km_wire_name m = s_.jgp.member_id;
		ASSERT_NO_FATAL_FAILURE(Join(m));
	}
	ASSERT_EQ(0, s_.jgp.error_code) << km_kerr_name(s_.jgp.error_code);
	EXPECT_GE(s_.jgp.generation_id, 1);
	EXPECT_STREQ("range", s_.jgp.protocol_name.s);
	ASSERT_GT(s_.jgp.member_id.len, 0);
	EXPECT_TRUE(km_wire_name_eq(&s_.jgp.leader, &s_.jgp.member_id));
	ASSERT_EQ(1u, s_.jgp.n_members);
	EXPECT_EQ(meta_len, s_.members[0].data.len) << "our metadata, in place";
	km_wire_name member = s_.jgp.member_id;
	int32_t gen = s_.jgp.generation_id;

	// SyncGroup v3 as the leader: our assignment comes back.
	static const char kAsgn[] = "assignment-bytes";
	s_.Wire();
	s_.members[0] = {member, Name(nullptr), {kAsgn, 16, {}}};
	s_.sgq = {Name(kGroup), gen, member, Name(nullptr), s_.members, 8, 1};
	ASSERT_NO_FATAL_FAILURE(Call(&coord, KM_API_SYNC_GROUP, 3));
	ASSERT_EQ(0, s_.sgp.error_code) << km_kerr_name(s_.sgp.error_code);
	ASSERT_EQ(16, s_.sgp.assignment.len);
	char back[16];
	km_wire_span_copy(chain_->get(), &s_.sgp.assignment.span, back, 16);
	EXPECT_EQ(0, memcmp(back, kAsgn, 16));

	// Heartbeat v3.
	s_.hbq = {Name(kGroup), gen, member, Name(nullptr)};
	ASSERT_NO_FATAL_FAILURE(Call(&coord, KM_API_HEARTBEAT, 3));
	EXPECT_EQ(0, s_.hbp.error_code) << km_kerr_name(s_.hbp.error_code);

	// OffsetCommit v7: offset 1234 with metadata on partition 1.
	s_.Wire();
	s_.topics[0] = {Name(kTopic), 0, 1};
	s_.ocq_parts[0] = {1, 1234, -1, -1, {"kmirror", 7, {}}};
	s_.ocq = {Name(kGroup), gen, member, Name(nullptr), -1,
		  s_.topics, 8, 1, s_.ocq_parts, 8, 1};
	ASSERT_NO_FATAL_FAILURE(Call(&coord, KM_API_OFFSET_COMMIT, 7));
	ASSERT_EQ(1u, s_.ocp.n_topics);
	EXPECT_STREQ(kTopic, s_.topics[0].name.s);
	ASSERT_EQ(1u, s_.ocp.n_parts);
	EXPECT_EQ(1, s_.ocp_parts[0].partition);
	EXPECT_EQ(0, s_.ocp_parts[0].error_code)
		<< km_kerr_name(s_.ocp_parts[0].error_code);

	// OffsetFetch v5 (the mock's highest) reads it back.
	s_.Wire();
	s_.topics[0] = {Name(kTopic), 0, 2};
	s_.ofq_parts[0] = 0;
	s_.ofq_parts[1] = 1;
	s_.ofq = {Name(kGroup), false, s_.topics, 8, 1, s_.ofq_parts, 8, 2,
		  false};
	ASSERT_NO_FATAL_FAILURE(Call(&coord, KM_API_OFFSET_FETCH, 5));
	EXPECT_EQ(0, s_.ofp.error_code);
	ASSERT_EQ(2u, s_.ofp.n_parts);
	for (uint32_t i = 0; i < 2; i++) {
		const km_offfetch_resp_part &p = s_.ofp_parts[i];
		EXPECT_EQ(0, p.error_code);
		if (p.partition != 1) {
			EXPECT_EQ(-1, p.committed_offset);
			continue;
		}
		EXPECT_EQ(1234, p.committed_offset);
		ASSERT_EQ(7, p.metadata.len);
		char md[7];
		km_wire_span_copy(chain_->get(), &p.metadata.span, md, 7);
		EXPECT_EQ(0, memcmp(md, "kmirror", 7));
	}

	// LeaveGroup v1; a heartbeat after it is refused.
	s_.Wire();
	s_.lmembers[0] = {member, Name(nullptr), 0};
	s_.lgq = {Name(kGroup), s_.lmembers, 8, 1};
	ASSERT_NO_FATAL_FAILURE(Call(&coord, KM_API_LEAVE_GROUP, 1));
	EXPECT_EQ(0, s_.lgp.error_code) << km_kerr_name(s_.lgp.error_code);
	s_.hbq = {Name(kGroup), gen, member, Name(nullptr)};
	ASSERT_NO_FATAL_FAILURE(Call(&coord, KM_API_HEARTBEAT, 3));
	EXPECT_NE(0, s_.hbp.error_code);
}

// Every FindCoordinator version the mock speaks decodes.
TEST_F(WireGroupMock, FindCoordinatorAtEveryVersion)
{
	for (int16_t v = 0; v <= 2; v++) {
		s_.fcq = {Name(kGroup), 0};
		ASSERT_NO_FATAL_FAILURE(Call(&boot_, KM_API_FIND_COORDINATOR, v));
		EXPECT_EQ(0, s_.fcp.error_code);
		EXPECT_GT(s_.fcp.port, 0);
		EXPECT_EQ(0, s_.fcp.throttle_time_ms);
	}
}

} // namespace
