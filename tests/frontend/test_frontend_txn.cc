// Goal (issue 20, first phase): a transactional producer (librdkafka
// 2.0.2's transactions API, as tools/kmirror-produce --mode transactional
// uses it) commits and aborts transactions on writable partitions of the
// front-end, a read_committed consumer reads exactly the committed records
// and a read_uncommitted one every record, and a second producer with the
// same transactional.id fences the first: its commit fails as fenced and
// its open transaction is aborted.
// Method: the in-process front-end (fe_harness) over real logs; records
// carry their transaction's name, so what a consumer must see is derived
// from which transactions were committed, never written down; waits poll
// observable conditions with deadlines.
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "dataplane/group/goffsets.h"
#include "fe_harness.h"
#include "fe_raw.h"
#include "kafka/proto_group.h"
#include "kafka/proto_txn.h"

namespace {

using fetest::Consumer;
using fetest::Msg;
using fetest::PartSpec;
using fetest::Props;
using fetest::Server;

const std::vector<PartSpec> kParts = {
	{"tx", 0, true}, {"tx", 1, true}, {"mirrored", 0, false},
};
const int kTimeoutMs = 30000;

// A transactional librdkafka producer.
class TxnProducer {
public:
	~TxnProducer()
	{
		if (rk_)
			rd_kafka_destroy(rk_);
	}
	std::string Create(const std::string &bootstrap, const std::string &id,
			   const std::string &timeout_ms = "60000")
	{
		char err[512];
		rd_kafka_conf_t *c = rd_kafka_conf_new();
		// librdkafka: message.timeout.ms <= transaction.timeout.ms.
		const std::string msg_timeout =
			std::to_string(std::min(30000, std::stoi(timeout_ms)));
		const char *kv[][2] = {{"bootstrap.servers", bootstrap.c_str()},
				       {"transactional.id", id.c_str()},
				       {"linger.ms", "5"},
				       {"transaction.timeout.ms", timeout_ms.c_str()},
				       {"message.timeout.ms", msg_timeout.c_str()}};
		for (auto &p : kv)
			if (rd_kafka_conf_set(c, p[0], p[1], err, sizeof(err)) !=
			    RD_KAFKA_CONF_OK)
				return err;
		rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
		if (rk_ == nullptr)
			return err;
		return Check(rd_kafka_init_transactions(rk_, kTimeoutMs));
	}
	std::string Begin() { return Check(rd_kafka_begin_transaction(rk_)); }
	std::string Send(const std::string &topic, int32_t partition,
			 const std::string &value)
	{
		rd_kafka_resp_err_t e = rd_kafka_producev(
			rk_, RD_KAFKA_V_TOPIC(topic.c_str()),
			RD_KAFKA_V_PARTITION(partition),
			RD_KAFKA_V_VALUE((void *)value.data(), value.size()),
			RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
		return e == RD_KAFKA_RESP_ERR_NO_ERROR ? "" : rd_kafka_err2str(e);
	}
	std::string Commit(int timeout_ms = kTimeoutMs)
	{
		return Check(rd_kafka_commit_transaction(rk_, timeout_ms));
	}
	std::string Abort()
	{
		return Check(rd_kafka_abort_transaction(rk_, kTimeoutMs));
	}
	std::string Flush()
	{
		return rd_kafka_flush(rk_, kTimeoutMs) == RD_KAFKA_RESP_ERR_NO_ERROR
			       ? "" : "flush timed out";
	}
	// sendOffsetsToTransaction: group's offset of topic/partition.
	std::string SendOffsets(const std::string &group, const std::string &topic,
				int32_t partition, int64_t offset)
	{
		rd_kafka_topic_partition_list_t *l =
			rd_kafka_topic_partition_list_new(1);
		rd_kafka_topic_partition_list_add(l, topic.c_str(), partition)
			->offset = offset;
		rd_kafka_consumer_group_metadata_t *md =
			rd_kafka_consumer_group_metadata_new(group.c_str());
		std::string r = Check(rd_kafka_send_offsets_to_transaction(
			rk_, l, md, kTimeoutMs));
		rd_kafka_consumer_group_metadata_destroy(md);
		rd_kafka_topic_partition_list_destroy(l);
		return r;
	}
	bool fenced_ = false;

private:
	std::string Check(rd_kafka_error_t *e)
	{
		if (e == nullptr)
			return "";
		std::string s = rd_kafka_error_string(e);
		fenced_ = rd_kafka_error_is_fatal(e) &&
			  rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR__FENCED;
		if (rd_kafka_error_is_fatal(e)) {
			char why[256];
			rd_kafka_resp_err_t code =
				rd_kafka_fatal_error(rk_, why, sizeof(why));
			fenced_ = fenced_ ||
				  code == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
				  code == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
			s += std::string(" (fatal: ") + why + ")";
		}
		rd_kafka_error_destroy(e);
		return s;
	}
	rd_kafka_t *rk_ = nullptr;
};

class Transactions : public ::testing::Test {
protected:
	void SetUp() override { ASSERT_EQ("", srv_.Start(kParts)); }
	void TearDown() override
	{
		srv_.Stop();
		EXPECT_EQ("", srv_.LoopError());
	}
	// Every value in partitions 0 and 1 of "tx" up to their log end, read
	// at the isolation level given.
	std::multiset<std::string> Read(const char *isolation)
	{
		std::multiset<std::string> got;
		Consumer con;
		EXPECT_EQ("", con.Start(srv_.bootstrap(), "tx", {0, 1}, 0,
					{{"isolation.level", isolation}}));
		bool ok = con.PollUntil([&] {
			return con.Eof(0) >= 0 && con.Eof(1) >= 0;
		}, kTimeoutMs);
		EXPECT_TRUE(ok) << "no end of partition";
		for (const Msg &m : con.msgs)
			got.insert(m.value);
		con.Stop();
		return got;
	}
	Server srv_;
};

std::vector<std::string> Values(const std::string &txn, int n)
{
	std::vector<std::string> v;
	for (int i = 0; i < n; i++)
		v.push_back(txn + "-" + std::to_string(i));
	return v;
}

// Committed, aborted, committed again, over two partitions, each
// transaction's records delivered before it ends: read_committed returns
// exactly the committed transactions' records, read_uncommitted all of
// them (so the aborted ones are on disk and left out, not missing).
TEST_F(Transactions, CommittedAndAbortedTransactionsReadCommitted)
{
	TxnProducer p;
	ASSERT_EQ("", p.Create(srv_.bootstrap(), "app-1"));
	struct Plan {
		std::string name;
		bool commit;
	};
	const Plan plans[] = {{"t1", true}, {"t2", false}, {"t3", true}};
	std::multiset<std::string> committed, all;
	for (const Plan &pl : plans) {
		ASSERT_EQ("", p.Begin());
		std::vector<std::string> vals = Values(pl.name, 6);
		for (size_t i = 0; i < vals.size(); i++) {
			ASSERT_EQ("", p.Send("tx", (int32_t)(i % 2), vals[i]));
			all.insert(vals[i]);
			if (pl.commit)
				committed.insert(vals[i]);
		}
		// Delivered first: an abort purges what is not yet sent, and
		// then there would be nothing on disk to leave out.
		ASSERT_EQ("", p.Flush());
		ASSERT_EQ("", pl.commit ? p.Commit() : p.Abort()) << pl.name;
	}
	EXPECT_EQ(committed, Read("read_committed"));
	EXPECT_EQ(all, Read("read_uncommitted"));
}

// A second instance with the same transactional.id fences the first: the
// first's open transaction is aborted (never read_committed, and no longer
// holding the LSO back), its commit fails as fenced, and the second
// commits.
TEST_F(Transactions, ASecondInstanceFencesTheFirst)
{
	TxnProducer a, b;
	ASSERT_EQ("", a.Create(srv_.bootstrap(), "app-2"));
	ASSERT_EQ("", a.Begin());
	for (const std::string &v : Values("old", 4))
		ASSERT_EQ("", a.Send("tx", 0, v));
	// The records are delivered before the second instance starts, so
	// its init meets an open transaction with data.
	ASSERT_EQ("", a.Flush());
	ASSERT_EQ("", b.Create(srv_.bootstrap(), "app-2"));
	ASSERT_EQ("", b.Begin());
	// Both partitions: on 0 the new records follow the old ones, so they
	// are read_committed only if the old transaction was ended.
	std::multiset<std::string> committed;
	int i = 0;
	for (const std::string &v : Values("new", 4)) {
		ASSERT_EQ("", b.Send("tx", i++ % 2, v));
		committed.insert(v);
	}
	ASSERT_EQ("", b.Commit());
	EXPECT_NE("", a.Commit());
	EXPECT_TRUE(a.fenced_) << "the old instance was not fenced";
	EXPECT_EQ(committed, Read("read_committed"));
}

// librdkafka's high watermark of tx-0 at an isolation level: the LSO for
// read_committed (ListOffsets), or -1.
int64_t HighWatermark(const std::string &bootstrap, const char *isolation)
{
	char err[512];
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	rd_kafka_conf_set(c, "bootstrap.servers", bootstrap.c_str(), err,
			  sizeof(err));
	rd_kafka_conf_set(c, "isolation.level", isolation, err, sizeof(err));
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof(err));
	int64_t lo = -1, hi = -1;
	if (rk == nullptr)
		return -1;
	if (rd_kafka_query_watermark_offsets(rk, "tx", 0, &lo, &hi, 5000) !=
	    RD_KAFKA_RESP_ERR_NO_ERROR)
		hi = -1;
	rd_kafka_destroy(rk);
	return hi;
}

// A transaction left open past its transaction.timeout.ms is aborted by
// the coordinator: the LSO passes it without any EndTxn, its records are
// never read_committed, and its producer, fenced, cannot commit it. 3 s,
// not librdkafka's least (1 s): its message.timeout.ms may not exceed the
// transaction's, and under ASan on a loaded machine 1 s timed the records
// out in the client before they were sent (only the marker was written).
TEST_F(Transactions, ATimedOutTransactionIsAbortedAndItsProducerFenced)
{
	TxnProducer p;
	ASSERT_EQ("", p.Create(srv_.bootstrap(), "app-4", "3000"));
	ASSERT_EQ("", p.Begin());
	for (const std::string &v : Values("late", 3))
		ASSERT_EQ("", p.Send("tx", 0, v));
	ASSERT_EQ("", p.Flush());
	EXPECT_EQ(0, HighWatermark(srv_.bootstrap(), "read_committed"))
		<< "the open transaction does not hold the LSO";
	int64_t lso = 0, hw = -1;
	const uint64_t deadline = fetest::MonoMs() + 20000;
	while (fetest::MonoMs() < deadline) {
		hw = HighWatermark(srv_.bootstrap(), "read_uncommitted");
		lso = HighWatermark(srv_.bootstrap(), "read_committed");
		if (lso > 0 && lso == hw)
			break;
	}
	ASSERT_EQ(4, lso) << "3 records and the ABORT marker (hw " << hw << ")";
	EXPECT_NE("", p.Commit()) << "a timed-out transaction was committed";
	EXPECT_TRUE(Read("read_committed").empty());
}

// Writes to a mirrored partition cannot join a transaction.
TEST_F(Transactions, AMirroredPartitionCannotJoin)
{
	TxnProducer p;
	ASSERT_EQ("", p.Create(srv_.bootstrap(), "app-3"));
	ASSERT_EQ("", p.Begin());
	ASSERT_EQ("", p.Send("mirrored", 0, "x"));
	EXPECT_NE("", p.Commit());
	EXPECT_EQ(0, srv_.EndOffset(srv_.index("mirrored", 0)));
}

// ---- a transaction's consumer offsets (AddOffsetsToTxn, TxnOffsetCommit) ----

const std::vector<PartSpec> kOffParts = {
	{"tx", 0, true}, {"tx", 1, true}, {"__consumer_offsets", 0, true, true},
};

// OffsetFetch v7 of group g on tx-1: (offset, error code).
std::pair<int64_t, int16_t> FetchTx1(fetest::RawConn *c, const std::string &g,
				     bool stable)
{
	static int32_t corr = 100;
	int32_t parts[1] = { 1 };
	km_proto_topic t[1];
	km_wire_name_set(&t[0].name, "tx");
	t[0].first = 0;
	t[0].count = 1;
	km_offfetch_req fq = {};
	km_wire_name_set(&fq.group_id, g.c_str());
	fq.topics = t;
	fq.topics_max = fq.n_topics = 1;
	fq.parts = parts;
	fq.parts_max = fq.n_parts = 1;
	fq.require_stable = stable;
	fetest::Resp x;
	EXPECT_TRUE(c->Send(fetest::Req(KM_API_OFFSET_FETCH, 7, ++corr,
		[&](km_wire_wr *w) { km_offfetch_req_encode(w, 7, &fq); })));
	EXPECT_EQ("", c->ReadFrame(&x.body));
	fetest::Open(&x, KM_API_OFFSET_FETCH, 7);
	km_proto_topic rt[2];
	km_offfetch_resp_part rp[2];
	km_offfetch_resp fr = {};
	fr.topics = rt;
	fr.topics_max = 2;
	fr.parts = rp;
	fr.parts_max = 2;
	EXPECT_EQ(0, km_offfetch_resp_decode(&x.r, 7, &fr));
	if (fr.n_parts != 1)
		return { -2, -2 };
	return { rp[0].committed_offset, rp[0].error_code };
}

class TxnOffsets : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ("", srv_.Start(kOffParts));
		ASSERT_EQ("", c_.Connect(srv_.port()));
	}
	void TearDown() override
	{
		c_.Close();
		srv_.Stop();
		EXPECT_EQ("", srv_.LoopError());
	}
	// The committed offsets partition replayed into a new table, as a
	// restart rebuilds it: group g's offset of tx-1 (-1: none) and
	// whether an open transaction holds one.
	std::pair<int64_t, bool> Replayed(const std::string &g)
	{
		km_goffsets *t = nullptr;
		EXPECT_EQ(0, km_goffsets_create(&t));
		EXPECT_LE(0, km_goffsets_load(
			t, srv_.log(srv_.index("__consumer_offsets", 0))));
		const km_goffset *o = km_goffsets_get(t, g.c_str(), "tx", 1);
		std::pair<int64_t, bool> r = { o ? o->offset : -1,
					       km_goffsets_pending(t, g.c_str(), "tx", 1) };
		km_goffsets_destroy(t);
		return r;
	}
	Server srv_;
	fetest::RawConn c_;
};

// sendOffsetsToTransaction (librdkafka 2.0.2: AddOffsetsToTxn, then
// TxnOffsetCommit to the group coordinator): the offsets of a committed
// transaction become the group's, those of an aborted one never do, and
// while the transaction is open they are pending: OffsetFetch without
// require_stable answers the last committed offset, with it (v7+, a
// read_committed consumer) UNSTABLE_OFFSET_COMMIT. A replay of the
// partition (what a restart does) gives the same answers at every step.
TEST_F(TxnOffsets, OnlyACommittedTransactionsOffsetsAreTheGroups)
{
	typedef std::pair<int64_t, int16_t> R;
	TxnProducer p;
	ASSERT_EQ("", p.Create(srv_.bootstrap(), "app-o"));
	ASSERT_EQ("", p.Begin());
	ASSERT_EQ("", p.Send("tx", 0, "t1"));
	ASSERT_EQ("", p.SendOffsets("g", "tx", 1, 5));
	ASSERT_EQ("", p.Commit());
	EXPECT_EQ(R(5, 0), FetchTx1(&c_, "g", true));
	EXPECT_EQ((std::pair<int64_t, bool>(5, false)), Replayed("g"));

	ASSERT_EQ("", p.Begin());
	ASSERT_EQ("", p.Send("tx", 0, "t2"));
	ASSERT_EQ("", p.SendOffsets("g", "tx", 1, 9));
	ASSERT_EQ("", p.Abort());
	EXPECT_EQ(R(5, 0), FetchTx1(&c_, "g", true));
	EXPECT_EQ(R(5, 0), FetchTx1(&c_, "g", false));
	EXPECT_EQ((std::pair<int64_t, bool>(5, false)), Replayed("g"));

	ASSERT_EQ("", p.Begin());
	ASSERT_EQ("", p.Send("tx", 0, "t3"));
	ASSERT_EQ("", p.SendOffsets("g", "tx", 1, 12));
	EXPECT_EQ(R(-1, KM_KERR_UNSTABLE_OFFSET_COMMIT), FetchTx1(&c_, "g", true));
	EXPECT_EQ(R(5, 0), FetchTx1(&c_, "g", false));
	EXPECT_EQ((std::pair<int64_t, bool>(5, true)), Replayed("g"));
	ASSERT_EQ("", p.Commit());
	EXPECT_EQ(R(12, 0), FetchTx1(&c_, "g", true));
	EXPECT_EQ((std::pair<int64_t, bool>(12, false)), Replayed("g"));
}

// Raw requests of a transactional producer (kafka/proto_txn.h), answered
// by the front-end: the first error code of the answer.
class TxnRaw {
public:
	explicit TxnRaw(fetest::RawConn *c) : c_(c) {}
	int16_t InitPid(const char *id, int64_t *pid, int16_t *epoch)
	{
		km_initpid_req q = {};
		km_initpid_resp m = {};
		km_wire_name_set(&q.transactional_id, id);
		q.transaction_timeout_ms = 60000;
		q.producer_id = -1;
		q.producer_epoch = -1;
		fetest::Resp x;
		Trip(KM_API_INIT_PRODUCER_ID, 3, [&](km_wire_wr *w) {
			km_initpid_req_encode(w, 3, &q); }, &x);
		EXPECT_EQ(0, km_initpid_resp_decode(&x.r, 3, &m));
		*pid = m.producer_id;
		*epoch = m.producer_epoch;
		return m.error_code;
	}
	int16_t AddOffsets(const char *id, int64_t pid, int16_t epoch,
			   const char *group)
	{
		km_addoffsets_req q = {};
		km_txn_resp m = {};
		km_wire_name_set(&q.transactional_id, id);
		km_wire_name_set(&q.group_id, group);
		q.producer_id = pid;
		q.producer_epoch = epoch;
		fetest::Resp x;
		Trip(KM_API_ADD_OFFSETS_TO_TXN, 3, [&](km_wire_wr *w) {
			km_addoffsets_req_encode(w, 3, &q); }, &x);
		EXPECT_EQ(0, km_txn_resp_decode(&x.r, KM_API_ADD_OFFSETS_TO_TXN, 3, &m));
		return m.error_code;
	}
	// TxnOffsetCommit at version ver of group's offset 3 on tx-1.
	int16_t Commit(int16_t ver, const char *id, int64_t pid, int16_t epoch,
		       const char *group, int32_t gen, const char *member)
	{
		km_proto_topic t[1];
		km_txncommit_part pp[1] = {{1, 3, -1, {"", 0, {}}}};
		km_txncommit_req q = {};
		km_wire_name_set(&q.transactional_id, id);
		km_wire_name_set(&q.group_id, group);
		q.producer_id = pid;
		q.producer_epoch = epoch;
		q.generation_id = gen;
		km_wire_name_set(&q.member_id, member);
		km_wire_name_set_null(&q.group_instance_id);
		km_wire_name_set(&t[0].name, "tx");
		t[0].first = 0;
		t[0].count = 1;
		q.topics = t;
		q.topics_max = q.n_topics = 1;
		q.parts = pp;
		q.parts_max = q.n_parts = 1;
		fetest::Resp x;
		Trip(KM_API_TXN_OFFSET_COMMIT, ver, [&](km_wire_wr *w) {
			km_txncommit_req_encode(w, ver, &q); }, &x);
		km_proto_topic rt[1];
		km_offcommit_resp_part rp[1] = {};
		km_addparts_resp m = { 0, rt, 1, 0, rp, 1, 0 };
		EXPECT_EQ(0, km_txncommit_resp_decode(&x.r, ver, &m));
		return m.n_parts == 1 ? rp[0].error_code : -2;
	}
	int16_t End(const char *id, int64_t pid, int16_t epoch, bool commit)
	{
		km_endtxn_req q = {};
		km_txn_resp m = {};
		km_wire_name_set(&q.transactional_id, id);
		q.producer_id = pid;
		q.producer_epoch = epoch;
		q.committed = commit;
		fetest::Resp x;
		Trip(KM_API_END_TXN, 3, [&](km_wire_wr *w) {
			km_endtxn_req_encode(w, 3, &q); }, &x);
		EXPECT_EQ(0, km_txn_resp_decode(&x.r, KM_API_END_TXN, 3, &m));
		return m.error_code;
	}

private:
	void Trip(int16_t key, int16_t ver, const fetest::BodyFn &fn,
		  fetest::Resp *x)
	{
		EXPECT_TRUE(c_->Send(fetest::Req(key, ver, ++corr_, fn)));
		EXPECT_EQ("", c_->ReadFrame(&x->body));
		fetest::Open(x, key, ver);
	}
	fetest::RawConn *c_;
	int32_t corr_ = 500;
};

// TxnOffsetCommit's checks, as Kafka's: the transaction must hold the
// offsets partition (AddOffsetsToTxn first: INVALID_TXN_STATE), the
// producer id and epoch must be the transaction's
// (INVALID_PRODUCER_ID_MAPPING; PRODUCER_FENCED, INVALID_PRODUCER_EPOCH
// below v2), a generation of a group the coordinator does not know is
// ILLEGAL_GENERATION, an empty group id INVALID_GROUP_ID; what passes is
// pending until EndTxn, which drops it on abort.
TEST_F(TxnOffsets, TxnOffsetCommitChecksAsKafka)
{
	TxnRaw t(&c_);
	int64_t pid = -1;
	int16_t ep = -1;
	ASSERT_EQ(0, t.InitPid("raw", &pid, &ep));
	EXPECT_EQ(KM_KERR_INVALID_TXN_STATE, t.Commit(3, "raw", pid, ep, "rg", -1, ""));
	ASSERT_EQ(0, t.AddOffsets("raw", pid, ep, "rg"));
	EXPECT_EQ(KM_KERR_INVALID_PRODUCER_ID_MAPPING,
		  t.Commit(3, "raw", pid + 1, ep, "rg", -1, ""));
	EXPECT_EQ(KM_KERR_PRODUCER_FENCED, t.Commit(3, "raw", pid, ep + 1, "rg", -1, ""));
	EXPECT_EQ(KM_KERR_INVALID_PRODUCER_EPOCH,
		  t.Commit(1, "raw", pid, ep + 1, "rg", -1, ""));
	EXPECT_EQ(KM_KERR_ILLEGAL_GENERATION, t.Commit(3, "raw", pid, ep, "rg", 4, "m"));
	EXPECT_EQ(KM_KERR_INVALID_GROUP_ID, t.Commit(3, "raw", pid, ep, "", -1, ""));
	EXPECT_EQ((std::pair<int64_t, int16_t>(-1, 0)), FetchTx1(&c_, "rg", true));
	EXPECT_EQ(0, t.Commit(3, "raw", pid, ep, "rg", -1, ""));
	EXPECT_EQ((std::pair<int64_t, int16_t>(-1, KM_KERR_UNSTABLE_OFFSET_COMMIT)),
		  FetchTx1(&c_, "rg", true));
	ASSERT_EQ(0, t.End("raw", pid, ep, false));
	EXPECT_EQ((std::pair<int64_t, int16_t>(-1, 0)), FetchTx1(&c_, "rg", true));
	EXPECT_EQ((std::pair<int64_t, bool>(-1, false)), Replayed("rg"));
}

// A marker that cannot be handed to its partition's owner (its ring
// full) is tried again with a backoff, not dropped: the commit completes
// on both partitions once it is in, and the transaction is decided only
// then (issue 20, phase 2a).
TEST_F(Transactions, AFailedMarkerIsRetriedUntilTheCommitCompletes)
{
	TxnProducer p;
	ASSERT_EQ("", p.Create(srv_.bootstrap(), "app-retry"));
	ASSERT_EQ("", p.Begin());
	std::multiset<std::string> committed;
	for (const std::string &v : Values("r1", 4)) {
		ASSERT_EQ("", p.Send("tx", (int32_t)(committed.size() % 2), v));
		committed.insert(v);
	}
	ASSERT_EQ("", p.Flush());
	const size_t t1 = srv_.index("tx", 1);
	const uint64_t before = srv_.MarkerCalls(t1);
	srv_.FailMarkers(t1, 3);
	ASSERT_EQ("", p.Commit());
	EXPECT_EQ(before + 4, srv_.MarkerCalls(t1))
		<< "three refusals, then the marker that went in";
	EXPECT_EQ(committed, Read("read_committed"));
	// The same producer goes on: its transaction is over.
	ASSERT_EQ("", p.Begin());
	ASSERT_EQ("", p.Send("tx", 0, "r2-0"));
	ASSERT_EQ("", p.Commit());
	committed.insert("r2-0");
	EXPECT_EQ(committed, Read("read_committed"));
}

// A marker that keeps failing does not keep the front-end from stopping:
// the EndTxn waiting on it is let go (TearDown fails on a front-end that
// does not drain).
TEST_F(Transactions, AStopDoesNotWaitForAMarkerThatKeepsFailing)
{
	TxnProducer p;
	ASSERT_EQ("", p.Create(srv_.bootstrap(), "app-stuck"));
	ASSERT_EQ("", p.Begin());
	ASSERT_EQ("", p.Send("tx", 1, "s-0"));
	ASSERT_EQ("", p.Flush());
	const size_t t1 = srv_.index("tx", 1);
	const uint64_t before = srv_.MarkerCalls(t1);
	srv_.FailMarkers(t1, UINT32_MAX);
	std::thread commit([&] { (void)p.Commit(3000); });
	const auto deadline = std::chrono::steady_clock::now() +
			      std::chrono::milliseconds(kTimeoutMs);
	while (srv_.MarkerCalls(t1) < before + 2 &&
	       std::chrono::steady_clock::now() < deadline)
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	EXPECT_GE(srv_.MarkerCalls(t1), before + 2)
		<< "the marker is not being retried";
	srv_.Stop();
	commit.join();
}

} // namespace
