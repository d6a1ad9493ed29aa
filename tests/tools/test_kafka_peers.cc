// Goal: the test-support library (tests/support) does what other suites
// rely on: the in-process mock cluster and its fault knobs, the producer
// helper in every mode (batches cut where asked, transactions committed
// and aborted as asked, deterministic payloads), the consumer helper with
// check.crcs=true (it reports a corrupt batch), child processes with a
// timeout, temporary directories and waiting for a file.
//
// Method: real librdkafka clients against librdkafka's mock cluster, the
// stored batches read raw with tests/rdkafka/raw_kafka.cc and parsed with
// kafka/batch.h; children are sh and sleep. Every wait has a deadline.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/errors.h"
#include "kafka/batch.h"
#include "raw_kafka.h"
#include "tests/support/kafka_peers.h"

namespace {

using kmtest::ChildResult;
using kmtest::Message;
using kmtest::ProducerMode;

const int kTimeoutMs = 20000;

// The stored batches of a partition, raw, from its leader.
std::vector<rawkafka::Bytes> RawBatches(const std::string &boot,
					const std::string &topic, int32_t p)
{
	std::vector<rawkafka::Bytes> out;
	std::string host;
	uint16_t port = 0;
	int32_t leader = -1;
	EXPECT_EQ("", kmtest::partition_leader(boot, topic, p, &leader, &host,
					       &port));
	rawkafka::Conn c;
	EXPECT_EQ("", c.connect(host, port, kTimeoutMs));
	EXPECT_EQ("", rawkafka::fetch_all(c, topic, p, 0, 1000, kTimeoutMs,
					  &out));
	return out;
}

struct View {
	iovec iov;
	km_chain ch;
	km_batch b;
	int rc;
	explicit View(const rawkafka::Bytes &bytes)
		: iov{(void *)bytes.data(), bytes.size()}, ch{&iov, 1}
	{
		rc = km_batch_parse(&b, &ch, km_chain_start(&ch), 1 << 24);
	}
};

class KafkaPeers : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		mock_ = new kmtest::MockCluster(2);
		err_ = mock_->error();
		// One topic, a partition per case: topic creation can stall.
		if (err_.empty())
			err_ = mock_->create_topic("peers", 8);
	}
	static void TearDownTestSuite()
	{
		delete mock_;
		mock_ = nullptr;
	}
	void SetUp() override { ASSERT_EQ("", err_); }
	const std::string &Boot() { return mock_->bootstrap(); }

	static kmtest::MockCluster *mock_;
	static std::string err_;
};

kmtest::MockCluster *KafkaPeers::mock_;
std::string KafkaPeers::err_;

// Plain, idempotent and transactional producers: every message arrives
// with its recomputed payload; flush_every cuts batches; the mode shows in
// the batches; value_size_of and first_seq are honoured.
TEST_F(KafkaPeers, ProduceEachModeAndConsumeBack)
{
	const ProducerMode modes[] = {ProducerMode::kPlain,
				      ProducerMode::kIdempotent,
				      ProducerMode::kTransactional};
	for (int m = 0; m < 3; m++) {
		kmtest::ProduceSpec ps;
		ps.topic = "peers";
		ps.partition = m;
		ps.count = 30;
		ps.mode = modes[m];
		ps.seed = 3;
		ps.first_seq = 100;
		ps.value_size_of = [](int64_t seq) { return (size_t)(seq % 7) * 10; };
		ps.headers = 2;
		ps.flush_every = 10;
		kmtest::ProduceResult pr;
		ASSERT_EQ("", kmtest::produce(Boot(), ps, &pr)) << "mode " << m;
		EXPECT_EQ(30, pr.delivered);
		EXPECT_EQ(0, pr.failed);
		EXPECT_EQ(m == 2 ? 1 : 0, pr.committed);

		kmtest::ConsumeSpec cs;
		cs.topic = "peers";
		cs.partition = m;
		std::vector<Message> got;
		ASSERT_EQ("", kmtest::consume(Boot(), cs, &got));
		ASSERT_EQ(30u, got.size());
		for (const Message &msg : got) {
			int64_t seq = 100 + msg.offset;
			EXPECT_EQ(std::to_string(seq), msg.key);
			EXPECT_EQ(kmtest::payload_value(3, m, seq,
							(size_t)(seq % 7) * 10),
				  msg.value);
			EXPECT_EQ(kmtest::payload_headers(3, m, seq, 2),
				  msg.headers);
			EXPECT_EQ(RD_KAFKA_TIMESTAMP_CREATE_TIME,
				  msg.timestamp_type);
		}
		std::vector<rawkafka::Bytes> raw = RawBatches(Boot(), "peers", m);
		EXPECT_GE(raw.size(), 3u) << "flush_every cut no batches";
		for (const rawkafka::Bytes &b : raw) {
			View v(b);
			ASSERT_EQ((int)b.size(), v.rc) << km_strerror(v.rc);
			EXPECT_EQ(m == 0, km_batch_producer_id(&v.b) == -1);
			EXPECT_EQ(m == 2, km_batch_is_transactional(&v.b));
		}
	}
}

// Transactions of 5, every second one aborted (after a flush, so its
// batches are stored); the consumer reads [from, to) exactly.
TEST_F(KafkaPeers, TransactionsAbortEveryAndPartialRange)
{
	kmtest::ProduceSpec ps;
	ps.topic = "peers";
	ps.partition = 3;
	ps.count = 22;
	ps.mode = ProducerMode::kTransactional;
	ps.txn_size = 5;
	ps.abort_every = 2;
	ps.keys = kmtest::Keys::kNone;
	kmtest::ProduceResult pr;
	ASSERT_EQ("", kmtest::produce(Boot(), ps, &pr));
	EXPECT_EQ(22, pr.delivered);
	EXPECT_EQ(3, pr.committed); // 1, 3, 5 (the last, partial)
	EXPECT_EQ(2, pr.aborted);   // 2, 4
	for (const rawkafka::Bytes &b : RawBatches(Boot(), "peers", 3)) {
		View v(b);
		ASSERT_EQ((int)b.size(), v.rc);
		EXPECT_EQ(km_batch_base_offset(&v.b) / 5,
			  km_batch_last_offset(&v.b) / 5);
	}

	kmtest::ConsumeSpec cs;
	cs.topic = "peers";
	cs.partition = 3;
	cs.from = 7;
	cs.to = 12;
	cs.read_committed = true;
	std::vector<Message> got;
	ASSERT_EQ("", kmtest::consume(Boot(), cs, &got));
	ASSERT_EQ(5u, got.size());
	EXPECT_EQ(7, got.front().offset);
	EXPECT_EQ(11, got.back().offset);
	EXPECT_FALSE(got.front().key.has_value());
	int64_t low = -1, high = -1;
	ASSERT_EQ("", kmtest::watermarks(Boot(), "peers", 3, &low, &high));
	EXPECT_EQ(0, low);
	EXPECT_EQ(22, high);
}

// Every codec this librdkafka has shows in the stored batch.
TEST_F(KafkaPeers, ProduceCompressed)
{
	const char *codecs[] = {"gzip", "snappy", "lz4", "zstd"};
	int64_t from = 0;
	for (int c = 0; c < 4; c++) {
		if (!kmtest::codec_unsupported(codecs[c]).empty())
			continue;
		kmtest::ProduceSpec ps;
		ps.topic = "peers";
		ps.partition = 4;
		ps.count = 10;
		ps.compression = codecs[c];
		ps.first_seq = from;
		ASSERT_EQ("", kmtest::produce(Boot(), ps)) << codecs[c];
		std::vector<rawkafka::Bytes> raw = RawBatches(Boot(), "peers", 4);
		ASSERT_FALSE(raw.empty());
		View v(raw.back());
		ASSERT_EQ((int)raw.back().size(), v.rc);
		EXPECT_EQ(c + 1, km_batch_codec(&v.b)) << codecs[c];
		from += 10;
	}
	std::vector<Message> got;
	kmtest::ConsumeSpec cs;
	cs.topic = "peers";
	cs.partition = 4;
	ASSERT_EQ("", kmtest::consume(Boot(), cs, &got));
	ASSERT_EQ((size_t)from, got.size());
	for (const Message &m : got)
		EXPECT_EQ(kmtest::payload_value(0, 4, m.offset, 100), m.value);
}

// A stored batch with a flipped byte (the mock checks no CRC): the
// consumer helper, which sets check.crcs=true, reports it.
TEST_F(KafkaPeers, ConsumeReportsACorruptBatch)
{
	kmtest::ProduceSpec ps;
	ps.topic = "peers";
	ps.partition = 5;
	ps.count = 3;
	ASSERT_EQ("", kmtest::produce(Boot(), ps));
	std::vector<rawkafka::Bytes> raw = RawBatches(Boot(), "peers", 5);
	ASSERT_EQ(1u, raw.size());
	rawkafka::Bytes bad = raw[0];
	bad.back() ^= 0x20;
	std::string host;
	uint16_t port = 0;
	int32_t leader = -1;
	ASSERT_EQ("", kmtest::partition_leader(Boot(), "peers", 5, &leader,
					       &host, &port));
	rawkafka::Conn c;
	ASSERT_EQ("", c.connect(host, port, kTimeoutMs));
	int16_t perr = -1;
	int64_t base = -1;
	ASSERT_EQ("", c.produce("peers", 5, bad, &perr, &base));
	ASSERT_EQ(0, perr);
	ASSERT_EQ(3, base);

	kmtest::ConsumeSpec cs;
	cs.topic = "peers";
	cs.partition = 5;
	std::vector<Message> got;
	std::string err = kmtest::consume(Boot(), cs, &got);
	EXPECT_NE(std::string::npos, err.find("CRC")) << err;
	EXPECT_EQ(3u, got.size()) << "what precedes the corrupt batch";
}

// The fault knobs: a moved leader shows in Metadata; pushed errors answer
// the next requests of that API, then it works again.
TEST_F(KafkaPeers, MockClusterFaultKnobs)
{
	int32_t leader = -1;
	std::string host;
	uint16_t port = 0;
	ASSERT_EQ("", mock_->set_leader("peers", 6, 2));
	ASSERT_EQ("", kmtest::partition_leader(Boot(), "peers", 6, &leader,
					       &host, &port));
	EXPECT_EQ(2, leader);
	ASSERT_EQ("", mock_->set_leader("peers", 6, 1));
	ASSERT_EQ("", kmtest::partition_leader(Boot(), "peers", 6, &leader,
					       &host, &port));
	EXPECT_EQ(1, leader);

	rawkafka::Conn c;
	ASSERT_EQ("", c.connect(host, port, kTimeoutMs));
	mock_->push_request_errors(
		1 /* Fetch */, {RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
				RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART});
	rawkafka::FetchPartition fp;
	ASSERT_EQ("", c.fetch("peers", 6, 0, 10, &fp));
	EXPECT_EQ(RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, fp.error);
	ASSERT_EQ("", c.fetch("peers", 6, 0, 10, &fp));
	EXPECT_EQ(RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, fp.error);
	ASSERT_EQ("", c.fetch("peers", 6, 0, 10, &fp));
	EXPECT_EQ(0, fp.error);

	EXPECT_EQ("", mock_->set_broker_down(1));
	EXPECT_NE("", c.fetch("peers", 6, 0, 10, &fp)) << "broker 1 is down";
	EXPECT_EQ("", mock_->set_broker_up(1));
}

TEST(Process, RunCommandCapturesOutputAndExitCode)
{
	ChildResult r = kmtest::run_command(
		{"sh", "-c", "echo out; echo \"$KM_X\" >&2; exit 3"}, kTimeoutMs,
		{"KM_X=from-env"});
	EXPECT_EQ(3, r.exit_code);
	EXPECT_EQ(0, r.signal);
	EXPECT_FALSE(r.timed_out);
	EXPECT_EQ("out\n", r.out);
	EXPECT_EQ("from-env\n", r.err);

	r = kmtest::run_command({"/nonexistent/tool"}, kTimeoutMs);
	EXPECT_NE(0, r.exit_code);
	EXPECT_NE(std::string::npos, r.err.find("spawn")) << r.err;
}

// A child that outlives the timeout is killed, and the call returns soon
// after the timeout, not when the child would have ended.
TEST(Process, RunCommandKillsAtTheTimeout)
{
	auto t0 = std::chrono::steady_clock::now();
	ChildResult r = kmtest::run_command({"sleep", "60"}, 300);
	auto took = std::chrono::steady_clock::now() - t0;
	EXPECT_TRUE(r.timed_out);
	EXPECT_EQ(SIGKILL, r.signal);
	EXPECT_LT(took, std::chrono::seconds(30));
}

TEST(Process, ReadLineFailsWhenTheChildExitsWithoutOne)
{
	kmtest::Child c;
	ASSERT_EQ("", c.spawn({"sh", "-c", "printf 'a\\nb'; echo oops >&2"}));
	std::string line;
	ASSERT_EQ("", c.read_line(kTimeoutMs, &line));
	EXPECT_EQ("a", line);
	std::string err = c.read_line(kTimeoutMs, &line);
	EXPECT_NE("", err);
	EXPECT_NE(std::string::npos, err.find("oops")) << err;
	ChildResult r;
	ASSERT_EQ("", c.wait(kTimeoutMs, &r));
	EXPECT_EQ(0, r.exit_code);
}

// A child writing far more to stderr than a pipe holds (1 MiB; a pipe
// takes 64 KiB) while the test reads none of it is not blocked (kmirrord
// logging a line per partition at start blocked so in e2e-scale between
// two status calls), and nothing it wrote is lost.
TEST(Process, StderrNeverBlocksTheChild)
{
	kmtest::TempDir dir;
	ASSERT_NE("", dir.path()) << dir.error();
	const std::string done = dir.file("done");
	kmtest::Child c;
	ASSERT_EQ("", c.spawn({"sh", "-c",
			       "head -c 1048576 /dev/zero | tr '\\0' e >&2; "
			       "touch " + done + "; exec sleep 30"}));
	EXPECT_EQ("", kmtest::wait_for_file(done, kTimeoutMs))
		<< "the child blocked writing stderr";
	EXPECT_EQ("", c.kill(SIGKILL));
	ChildResult r;
	ASSERT_EQ("", c.wait(kTimeoutMs, &r));
	EXPECT_EQ(1048576u, r.err.size());
	EXPECT_EQ(std::string::npos, r.err.find_first_not_of('e'));
}

TEST(Process, TempDirAndWaitForFile)
{
	std::string path;
	{
		kmtest::TempDir d("km-peers-test");
		ASSERT_EQ("", d.error());
		path = d.path();
		ASSERT_EQ(0, mkdir(d.file("sub").c_str(), 0700));
		kmtest::Child c;
		ASSERT_EQ("", c.spawn({"sh", "-c",
				       "echo x > \"$0/sub/f.tmp\" && "
				       "mv \"$0/sub/f.tmp\" \"$0/sub/f\"",
				       d.path()}));
		EXPECT_EQ("", kmtest::wait_for_file(d.file("sub/f"), kTimeoutMs));
		ChildResult r;
		ASSERT_EQ("", c.wait(kTimeoutMs, &r));
		ASSERT_EQ(0, r.exit_code) << r.describe();
		EXPECT_EQ("x\n", kmtest::read_file(d.file("sub/f")));
		EXPECT_NE("", kmtest::wait_for_file(d.file("never"), 50));
	}
	EXPECT_NE(0, access(path.c_str(), F_OK)) << path << " left behind";
}

} // namespace
