// Goal (issue 16): the front end answers a principal without the right as
// Kafka's KafkaApis does - ListOffsets without Describe, Produce without
// Write (TOPIC_AUTHORIZATION_FAILED per partition), an idempotent
// producer with neither IdempotentWrite on the cluster nor Write on any
// topic (CLUSTER_AUTHORIZATION_FAILED), a transactional producer without
// Write on its transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) -
// and lets through what the ACLs allow.
// Method: the in-process front end (fe_harness) over real logs with an ACL
// store (acl.h) set in its config; its connections are User:ANONYMOUS
// (PLAINTEXT, no TLS or SASL), so the ACLs name that principal. Real
// librdkafka 2.0.2 clients see the answers: the watermark query's error,
// each message's delivery report, init_transactions' error, and the
// records a consumer reads back.
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <cstring>
#include <string>
#include <vector>

#include "fe_harness.h"
#include "fe_raw.h"

extern "C" {
#include "dataplane/serve/acl.h"
}

namespace {

using fetest::Msg;
using fetest::PartSpec;
using fetest::Producer;
using fetest::Props;
using fetest::Server;

const int kTimeoutMs = 20000;

km_acl Anon(km_acl_op op, km_acl_rtype rt, const char *name,
	    km_acl_pattern pat = KM_ACL_LITERAL)
{
	km_acl a;
	memset(&a, 0, sizeof(a));
	snprintf(a.principal, sizeof(a.principal), "User:ANONYMOUS");
	snprintf(a.host, sizeof(a.host), "*");
	snprintf(a.name, sizeof(a.name), "%s", name);
	a.rtype = rt;
	a.pattern = pat;
	a.op = op;
	a.perm = KM_ACL_ALLOW;
	return a;
}

struct Store {
	km_acl_store *s = nullptr;
	explicit Store(const std::vector<km_acl> &v)
	{
		km_acl_table *t;
		EXPECT_EQ(0, km_acl_table_build(v.data(), (uint32_t)v.size(),
						nullptr, false, &t));
		EXPECT_EQ(0, km_acl_store_new(t, &s));
	}
	~Store() { km_acl_store_free(s); }
};

// init_transactions (or the first idempotent send's InitProducerId) error.
std::string InitTxn(const std::string &bootstrap, const char *txn_id)
{
	char err[256];
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	rd_kafka_conf_set(c, "bootstrap.servers", bootstrap.c_str(), err,
			  sizeof(err));
	rd_kafka_conf_set(c, "transactional.id", txn_id, err, sizeof(err));
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
	rd_kafka_error_t *e = rd_kafka_init_transactions(rk, kTimeoutMs);
	std::string what = e ? rd_kafka_error_name(e) : "";
	if (e)
		rd_kafka_error_destroy(e);
	rd_kafka_destroy(rk);
	return what;
}

std::vector<Msg> Three(int32_t partition)
{
	std::vector<Msg> v(3);
	for (size_t i = 0; i < v.size(); i++) {
		v[i].partition = partition;
		v[i].value_null = false;
		v[i].value = "v" + std::to_string(i);
	}
	return v;
}

} // namespace

class AclRaw : public fetest::RawFixture {};

// ListOffsets (raw: a client asks Metadata first, where the same Describe
// is checked): Describe on the topic, implied by Read; without it
// TOPIC_AUTHORIZATION_FAILED for each partition, as KafkaApis answers.
TEST_F(AclRaw, ListOffsetsNeedsDescribe)
{
	Store acls({ Anon(KM_ACL_OP_READ, KM_ACL_RES_TOPIC, "r") });
	srv_.SetAcls(acls.s);
	ASSERT_NO_FATAL_FAILURE(Start({ { "h", 0, true }, { "r", 0, true } }));
	for (const char *topic : { "h", "r" }) {
		fetest::Resp x;
		km_proto_topic t = {};
		km_listoffsets_req_part q[1] = { { 0, -1, -1, 1 } };
		km_listoffsets_req req = {};
		km_wire_name_set(&t.name, topic);
		t.count = 1;
		req.replica_id = -1;
		req.topics = &t;
		req.topics_max = req.n_topics = 1;
		req.parts = q;
		req.parts_max = req.n_parts = 1;
		ASSERT_NO_FATAL_FAILURE(RoundTrip(
			fetest::Req(KM_API_LIST_OFFSETS, 5, 6,
				    [&](km_wire_wr *w) {
					    km_listoffsets_req_encode(w, 5, &req);
				    }),
			KM_API_LIST_OFFSETS, 5, &x));
		km_proto_topic rt[1];
		km_listoffsets_resp_part rp[1];
		km_listoffsets_resp m = { 0, rt, 1, 0, rp, 1, 0 };
		ASSERT_EQ(0, km_listoffsets_resp_decode(&x.r, 5, &m));
		ASSERT_EQ(1u, m.n_parts);
		EXPECT_EQ(topic[0] == 'h' ? KM_KERR_TOPIC_AUTHORIZATION_FAILED
					  : KM_KERR_NONE,
			  rp[0].error_code) << topic;
		EXPECT_EQ(topic[0] == 'h' ? -1 : 0, rp[0].offset) << topic;
	}
}

TEST(FrontendAcl, ProduceNeedsWrite)
{
	Store acls({ Anon(KM_ACL_OP_READ, KM_ACL_RES_TOPIC, "r"),
		     Anon(KM_ACL_OP_WRITE, KM_ACL_RES_TOPIC, "w-",
			  KM_ACL_PREFIXED) });
	Server srv;
	srv.SetAcls(acls.s);
	ASSERT_EQ("", srv.Start({ { "r", 0, true }, { "w-1", 0, true } }));
	Producer p;
	ASSERT_EQ("", p.Create(srv.bootstrap(),
			       { { "enable.idempotence", "false" },
				 { "message.timeout.ms", "5000" } }));
	std::vector<Msg> to_w = Three(0);
	ASSERT_EQ("", p.Send("w-1", &to_w, kTimeoutMs));
	for (const Msg &m : to_w)
		EXPECT_EQ(RD_KAFKA_RESP_ERR_NO_ERROR, m.err)
			<< rd_kafka_err2str((rd_kafka_resp_err_t)m.err);
	EXPECT_EQ(3, srv.EndOffset(srv.index("w-1", 0)));
	std::vector<Msg> to_r = Three(0);
	p.Send("r", &to_r, kTimeoutMs);
	for (const Msg &m : to_r)
		EXPECT_EQ(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, m.err);
	EXPECT_EQ(0, srv.EndOffset(srv.index("r", 0)));
	srv.Stop();
}

TEST(FrontendAcl, ProducerIdsNeedTheirRights)
{
	// Write on no topic: an idempotent producer's InitProducerId is
	// CLUSTER_AUTHORIZATION_FAILED, a transactional one's without Write
	// on its id TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
	{
		Store acls({ Anon(KM_ACL_OP_READ, KM_ACL_RES_TOPIC, "w-1") });
		Server srv;
		srv.SetAcls(acls.s);
		ASSERT_EQ("", srv.Start({ { "w-1", 0, true } }));
		Producer p;
		ASSERT_EQ("", p.Create(srv.bootstrap(),
				       { { "enable.idempotence", "true" },
					 { "message.timeout.ms", "5000" } }));
		std::vector<Msg> m = Three(0);
		p.Send("w-1", &m, kTimeoutMs);
		EXPECT_NE(RD_KAFKA_RESP_ERR_NO_ERROR, m[0].err);
		EXPECT_EQ(0, srv.EndOffset(srv.index("w-1", 0)));
		char why[512] = "";
		EXPECT_EQ(RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED,
			  rd_kafka_fatal_error((rd_kafka_t *)p.rk, why, sizeof(why)))
			<< why;
		EXPECT_EQ("TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
			  InitTxn(srv.bootstrap(), "app"));
		srv.Stop();
	}
	// Write on one topic stands for IdempotentWrite (Kafka 2.8+'s
	// authorizeByResourceType); Write on the id lets a transaction in.
	Store acls({ Anon(KM_ACL_OP_WRITE, KM_ACL_RES_TOPIC, "w-1"),
		     Anon(KM_ACL_OP_WRITE, KM_ACL_RES_TXNID, "app"),
		     Anon(KM_ACL_OP_DESCRIBE, KM_ACL_RES_TXNID, "reader") });
	Server srv;
	srv.SetAcls(acls.s);
	ASSERT_EQ("", srv.Start({ { "w-1", 0, true } }));
	Producer p;
	ASSERT_EQ("", p.Create(srv.bootstrap(), { { "enable.idempotence", "true" },
						  { "message.timeout.ms", "5000" } }));
	std::vector<Msg> m = Three(0);
	ASSERT_EQ("", p.Send("w-1", &m, kTimeoutMs));
	EXPECT_EQ(RD_KAFKA_RESP_ERR_NO_ERROR, m[2].err)
		<< rd_kafka_err2str((rd_kafka_resp_err_t)m[2].err);
	EXPECT_EQ(3, srv.EndOffset(srv.index("w-1", 0)));
	EXPECT_EQ("", InitTxn(srv.bootstrap(), "app"));
	// FindCoordinator refuses an id without Describe; InitProducerId
	// one with Describe but no Write.
	EXPECT_EQ("TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
		  InitTxn(srv.bootstrap(), "other"));
	EXPECT_EQ("TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
		  InitTxn(srv.bootstrap(), "reader"));
	srv.Stop();
}
