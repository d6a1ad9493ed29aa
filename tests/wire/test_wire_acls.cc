// Goal: kmirrord asks a source for its ACLs (acls.sync, issue 16) with
// DescribeAcls v1 byte for byte as Kafka's client writes it, and reads the
// answer as Kafka's broker writes it.
// Method: bodies Kafka's generated message classes serialize
// (kafka-clients 4.3.1, MessageUtil.toByteBufferAccessor, printed with
// jshell: DescribeAclsRequestData / DescribeAclsResponseData with the
// values below) are compared with what kmirror's encoder writes and
// decoded to the same fields; the decoded answer, encoded again, gives
// Kafka's bytes back; an answer with more ACLs than the caller's array is
// KM_EWIRECAPACITY, a cut one KM_EWIRETRUNC, another version refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/errors.h"
#include "kafka/proto_acls.h"

namespace {

using Bytes = std::vector<uint8_t>;

Bytes hex(const std::string &h)
{
	Bytes b;
	for (size_t i = 0; i + 1 < h.size(); i += 2)
		b.push_back((uint8_t)std::stoi(h.substr(i, 2), nullptr, 16));
	return b;
}

// Request: every filter ANY (1) and null strings - what kmirrord sends;
// and TOPIC "orders" LITERAL, User:alice, host *, READ, ALLOW.
const char *kReqAny = "01ffff01ffffffff0101";
const char *kReqNamed =
	"0200066f726465727303000a557365723a616c69636500012a0303";
// Answer: TOPIC "orders-" PREFIXED [User:alice * READ ALLOW, User:bob
// 10.0.0.1 WRITE DENY], GROUP "app" LITERAL [User:* * READ ALLOW].
const char *kResp =
	"000000000000ffff000000020200076f72646572732d0400000002000a557365723a"
	"616c69636500012a03030008557365723a626f62000831302e302e302e3104020300"
	"0361707003000000010006557365723a2a00012a0303";
// A broker with no authorizer: SECURITY_DISABLED (54), its message.
const char *kRespDisabled =
	"000000050036001c4e6f20417574686f72697a657220697320636f6e666967757265"
	"642e00000000";

struct Reader {
	Bytes b;
	struct iovec iov;
	struct km_chain ch;
	struct km_wire_rd r;

	explicit Reader(const Bytes &bytes) : b(bytes)
	{
		iov = { b.data(), b.size() };
		ch = { &iov, 1 };
		km_wire_rd_init(&r, &ch, { 0, 0 }, (uint32_t)b.size(),
				&km_wire_limits_default);
	}
};

} // namespace

TEST(DescribeAcls, RequestIsKafkasBytes)
{
	uint8_t buf[128];
	struct km_wire_wr w;
	struct km_dacls_req q = { KM_ACLS_ANY, {}, KM_ACLS_ANY, {}, {},
				  KM_ACLS_ANY, KM_ACLS_ANY };

	km_wire_name_set_null(&q.resource_name);
	km_wire_name_set_null(&q.principal);
	km_wire_name_set_null(&q.host);
	km_wire_wr_init(&w, buf, sizeof(buf));
	ASSERT_EQ(0, km_dacls_req_encode(&w, 1, &q));
	EXPECT_EQ(hex(kReqAny), Bytes(buf, buf + w.pos));

	struct km_dacls_req n = { 2, {}, 3, {}, {}, 3, 3 };
	km_wire_name_set(&n.resource_name, "orders");
	km_wire_name_set(&n.principal, "User:alice");
	km_wire_name_set(&n.host, "*");
	km_wire_wr_init(&w, buf, sizeof(buf));
	ASSERT_EQ(0, km_dacls_req_encode(&w, 1, &n));
	EXPECT_EQ(hex(kReqNamed), Bytes(buf, buf + w.pos));

	Reader rd(hex(kReqNamed));
	struct km_dacls_req back;
	ASSERT_EQ(0, km_dacls_req_decode(&rd.r, 1, &back));
	EXPECT_STREQ("orders", back.resource_name.s);
	EXPECT_STREQ("User:alice", back.principal.s);
	EXPECT_EQ(3, back.pattern_type);
	km_wire_wr_init(&w, buf, sizeof(buf));
	EXPECT_EQ(KM_EWIREVERSION, km_dacls_req_encode(&w, 2, &q));
}

TEST(DescribeAcls, ResponseIsKafkasBytes)
{
	static struct km_dacls_acl acls[8];
	struct km_dacls_resp m = { 0, 0, {}, acls, 8, 0 };
	Reader rd(hex(kResp));

	ASSERT_EQ(0, km_dacls_resp_decode(&rd.r, 1, &m));
	EXPECT_EQ(0, m.error_code);
	EXPECT_EQ(-1, m.error_message.len);
	ASSERT_EQ(3u, m.n_acls);
	EXPECT_EQ(2, acls[0].resource_type);
	EXPECT_STREQ("orders-", acls[0].resource_name.s);
	EXPECT_EQ(4, acls[0].pattern_type);
	EXPECT_STREQ("User:alice", acls[0].principal.s);
	EXPECT_STREQ("*", acls[0].host.s);
	EXPECT_EQ(3, acls[0].operation);
	EXPECT_EQ(3, acls[0].permission_type);
	EXPECT_STREQ("orders-", acls[1].resource_name.s);
	EXPECT_STREQ("User:bob", acls[1].principal.s);
	EXPECT_STREQ("10.0.0.1", acls[1].host.s);
	EXPECT_EQ(4, acls[1].operation);
	EXPECT_EQ(2, acls[1].permission_type);
	EXPECT_EQ(3, acls[2].resource_type);
	EXPECT_STREQ("app", acls[2].resource_name.s);
	EXPECT_EQ(3, acls[2].pattern_type);
	EXPECT_STREQ("User:*", acls[2].principal.s);

	uint8_t buf[512];
	struct km_wire_wr w;
	km_wire_wr_init(&w, buf, sizeof(buf));
	ASSERT_EQ(0, km_dacls_resp_encode(&w, 1, &m));
	EXPECT_EQ(hex(kResp), Bytes(buf, buf + w.pos));
}

TEST(DescribeAcls, SecurityDisabledAndBadAnswers)
{
	static struct km_dacls_acl acls[2];
	struct km_dacls_resp m = { 0, 0, {}, acls, 2, 0 };
	Reader off(hex(kRespDisabled));

	ASSERT_EQ(0, km_dacls_resp_decode(&off.r, 1, &m));
	EXPECT_EQ(KM_KERR_SECURITY_DISABLED, m.error_code);
	EXPECT_EQ(5, m.throttle_time_ms);
	EXPECT_STREQ("No Authorizer is configured.", m.error_message.s);
	EXPECT_EQ(0u, m.n_acls);

	Reader full(hex(kResp));
	EXPECT_EQ(KM_EWIRECAPACITY, km_dacls_resp_decode(&full.r, 1, &m));
	static struct km_dacls_acl more[8];
	Bytes cut = hex(kResp);
	cut.resize(cut.size() - 1);
	struct km_dacls_resp m8 = { 0, 0, {}, more, 8, 0 };
	Reader rc(cut);
	EXPECT_EQ(KM_EWIRETRUNC, km_dacls_resp_decode(&rc.r, 1, &m8));
	Reader v0(hex(kResp));
	EXPECT_EQ(KM_EWIREVERSION, km_dacls_resp_decode(&v0.r, 0, &m8));
}
