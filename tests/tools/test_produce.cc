// Goal: kmirror-produce (tools/produce.c) writes exactly --count messages
// with the keys, values and headers tools/payload.h derives from
// (seed, partition, sequence), in the mode and compression asked for, to
// the partitions asked for; prints `produced=N failed=M bytes=B seconds=S`;
// exits 0 only when every message was delivered, 1 otherwise, 2 on a bad
// argument.
//
// Method: one kmirror-mock-source process (KM_MOCK_SOURCE) is the cluster
// for the suite, a fresh partition per case (few topics: the mock's topic
// creation now and then stalls for a second). kmirror-produce (KM_PRODUCE) runs as
// a child; then a librdkafka consumer with check.crcs=true reads every
// partition back and each message is compared with the payload recomputed
// here, and the stored batches are fetched raw (tests/rdkafka/raw_kafka.cc)
// to check what the mode and codec put in them: producer id (-1 for plain),
// the transactional bit, the codec bits, and where transactions end.
//
// On the mock, transactions write no control batches, LSO = HW and no
// aborted transactions are reported (spec/test-peers.md). So a
// read_committed consumer gets the aborted transactions' messages too: the
// abort test pins that, and checks the aborts through the producer's own
// count and through the batches (none spans two transactions).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <map>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/errors.h"
#include "kafka/batch.h"
#include "raw_kafka.h"
#include "tests/support/kafka_peers.h"

namespace {

using kmtest::ChildResult;
using kmtest::Message;

const int kTimeoutMs = 20000;
const char *const kModes[] = {"plain", "idempotent", "transactional"};
const char *const kCodecs[] = {"none", "gzip", "snappy", "lz4", "zstd"};

// The parameterised cases: one partition of "matrix" per mode and codec.
const char kMatrix[] = "matrix";
// Partitions of "misc", one per case.
enum { kAbortPart, kRatePart, kBatchPart, kKeysPart, kNoKeysPart, kMiscParts };

std::string Env(const char *name)
{
	const char *p = getenv(name);
	return p ? p : "";
}

kmtest::MockSource *source;

struct Summary {
	long long produced = -1, failed = -1, bytes = -1;
	double seconds = -1;
};

// The one summary line, which must be all of stdout.
bool ParseSummary(const std::string &out, Summary *s)
{
	std::regex re("produced=([0-9]+) failed=([0-9]+) bytes=([0-9]+) "
		      "seconds=([0-9]+\\.[0-9]{3})\n");
	std::smatch m;
	if (!std::regex_match(out, m, re))
		return false;
	s->produced = std::stoll(m[1]);
	s->failed = std::stoll(m[2]);
	s->bytes = std::stoll(m[3]);
	s->seconds = std::stod(m[4]);
	return true;
}

ChildResult Produce(const std::vector<std::string> &args,
		    const std::string &bootstrap = "")
{
	std::vector<std::string> argv = {
		Env("KM_PRODUCE"), "--bootstrap",
		bootstrap.empty() ? source->bootstrap() : bootstrap};
	argv.insert(argv.end(), args.begin(), args.end());
	return kmtest::run_command(argv, kTimeoutMs);
}

// Every message of a partition, read with check.crcs=true.
std::vector<Message> ReadAll(const std::string &topic, int32_t p,
			     bool read_committed = false)
{
	kmtest::ConsumeSpec cs;
	cs.topic = topic;
	cs.partition = p;
	cs.read_committed = read_committed;
	std::vector<Message> got;
	EXPECT_EQ("", kmtest::consume(source->bootstrap(), cs, &got))
		<< topic << "/" << p;
	return got;
}

// The stored batches of a partition, raw, from its leader.
std::vector<rawkafka::Bytes> RawBatches(const std::string &topic, int32_t p)
{
	std::vector<rawkafka::Bytes> out;
	std::string host;
	uint16_t port = 0;
	int32_t leader = -1;
	EXPECT_EQ("", kmtest::partition_leader(source->bootstrap(), topic, p,
					       &leader, &host, &port));
	rawkafka::Conn c;
	EXPECT_EQ("", c.connect(host, port, kTimeoutMs));
	EXPECT_EQ("", rawkafka::fetch_all(c, topic, p, 0, 10000, kTimeoutMs,
					  &out));
	return out;
}

// A parsed (CRC-checked) view of a raw batch; valid while b lives.
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

// Message o of partition p is sequence o (fresh partition) with the
// payload of (seed, p, o).
void ExpectPayloads(const std::vector<Message> &got, uint64_t seed,
		    int32_t p, size_t size, kmtest::Keys keys, int headers)
{
	for (size_t i = 0; i < got.size(); i++) {
		const Message &m = got[i];
		ASSERT_EQ((int64_t)i, m.offset);
		EXPECT_EQ(kmtest::payload_key(keys, seed, p, m.offset), m.key)
			<< "offset " << m.offset;
		EXPECT_EQ(kmtest::payload_value(seed, p, m.offset, size), m.value)
			<< "offset " << m.offset;
		EXPECT_EQ(kmtest::payload_headers(seed, p, m.offset, headers),
			  m.headers)
			<< "offset " << m.offset;
	}
}

class ProduceTool : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		if (Env("KM_MOCK_SOURCE").empty() || Env("KM_PRODUCE").empty())
			return;
		std::vector<std::string> args = {
			"--brokers", "3", "--topic", "matrix:15",
			"--topic", "misc:" + std::to_string(kMiscParts),
			"--topic", "partitioner:3", "--topic", "rr:3"};
		source = new kmtest::MockSource();
		start_error_ = source->start(Env("KM_MOCK_SOURCE"), args,
					     kTimeoutMs);
	}
	static void TearDownTestSuite()
	{
		delete source;
		source = nullptr;
	}
	void SetUp() override
	{
		if (Env("KM_MOCK_SOURCE").empty() || Env("KM_PRODUCE").empty())
			FAIL() << "KM_MOCK_SOURCE/KM_PRODUCE not set "
					"(run via meson)";
		ASSERT_EQ("", start_error_);
	}
	static std::string start_error_;
};

std::string ProduceTool::start_error_;

class ProduceMatrix : public ProduceTool,
		      public ::testing::WithParamInterface<std::tuple<int, int>> {
};

// Each mode with each codec: 30 messages to one partition.
TEST_P(ProduceMatrix, WritesCountMessagesInTheModeAndCodec)
{
	const int mode = std::get<0>(GetParam()), codec = std::get<1>(GetParam());
	const int32_t part = mode * 5 + codec;
	const bool txn = mode == 2;
	std::string why = kmtest::codec_unsupported(kCodecs[codec]);
	if (!why.empty())
		GTEST_SKIP() << "librdkafka here lacks " << kCodecs[codec]
			     << ": " << why;
	std::vector<std::string> args = {
		"--topic", kMatrix, "--partition", std::to_string(part),
		"--count", "30", "--size", "300", "--mode", kModes[mode],
		"--compression", kCodecs[codec], "--headers", "1", "--seed", "7"};
	if (txn)
		args.insert(args.end(), {"--txn-size", "10"});
	ChildResult r = Produce(args);
	ASSERT_EQ(0, r.exit_code) << r.describe();
	Summary s;
	ASSERT_TRUE(ParseSummary(r.out, &s)) << r.out;
	EXPECT_EQ(30, s.produced);
	EXPECT_EQ(0, s.failed);
	long long key_bytes = 0;
	for (int i = 0; i < 30; i++)
		key_bytes += (long long)std::to_string(i).size();
	EXPECT_EQ(30 * 300 + key_bytes, s.bytes);
	if (txn) {
		EXPECT_NE(std::string::npos,
			  r.err.find("transactions committed=3 aborted=0"))
			<< r.err;
	}

	std::vector<Message> got = ReadAll(kMatrix, part);
	ASSERT_EQ(30u, got.size());
	ExpectPayloads(got, 7, part, 300, kmtest::Keys::kSeq, 1);
	int records = 0;
	int64_t pid = -2;
	for (const rawkafka::Bytes &raw : RawBatches(kMatrix, part)) {
		View v(raw);
		ASSERT_EQ((int)raw.size(), v.rc) << km_strerror(v.rc);
		records += km_batch_records_count(&v.b);
		EXPECT_EQ(codec, km_batch_codec(&v.b));
		EXPECT_EQ(txn, km_batch_is_transactional(&v.b));
		EXPECT_FALSE(km_batch_is_control(&v.b));
		if (mode == 0) {
			EXPECT_EQ(-1, km_batch_producer_id(&v.b));
			continue;
		}
		EXPECT_GE(km_batch_producer_id(&v.b), 0);
		if (pid == -2)
			pid = km_batch_producer_id(&v.b);
		EXPECT_EQ(pid, km_batch_producer_id(&v.b)) << "one producer, one id";
	}
	EXPECT_EQ(30, records);
}

INSTANTIATE_TEST_SUITE_P(
	Modes, ProduceMatrix,
	::testing::Combine(::testing::Range(0, 3), ::testing::Range(0, 5)),
	[](const ::testing::TestParamInfo<std::tuple<int, int>> &i) {
		return std::string(kModes[std::get<0>(i.param)]) + "_" +
		       kCodecs[std::get<1>(i.param)];
	});

// The default: round robin over every partition of the topic (from
// Metadata), each partition's sequence counting from 0.
TEST_F(ProduceTool, RoundRobinOverAllPartitions)
{
	ChildResult r = Produce({"--topic", "rr", "--count", "30", "--seed",
				 "2", "--compression", "none"});
	ASSERT_EQ(0, r.exit_code) << r.describe();
	Summary s;
	ASSERT_TRUE(ParseSummary(r.out, &s)) << r.out;
	EXPECT_EQ(30, s.produced);
	for (int32_t p = 0; p < 3; p++) {
		std::vector<Message> got = ReadAll("rr", p);
		ASSERT_EQ(10u, got.size()) << "partition " << p;
		ExpectPayloads(got, 2, p, 100, kmtest::Keys::kSeq, 0);
	}
}

// --abort-every 3 with 10 transactions of 10: 3 aborted, 7 committed. The
// mock keeps the aborted batches and writes no markers, so read_committed
// still reads all 100; each stored batch lies inside one transaction.
TEST_F(ProduceTool, TransactionalAbortEvery)
{
	const std::string part = std::to_string(kAbortPart);
	ChildResult r = Produce({"--topic", "misc", "--partition", part,
				 "--count", "100", "--mode", "transactional",
				 "--txn-size", "10", "--abort-every", "3",
				 "--seed", "11"});
	ASSERT_EQ(0, r.exit_code) << r.describe();
	Summary s;
	ASSERT_TRUE(ParseSummary(r.out, &s)) << r.out;
	EXPECT_EQ(100, s.produced);
	EXPECT_EQ(0, s.failed);
	EXPECT_NE(std::string::npos,
		  r.err.find("transactions committed=7 aborted=3"))
		<< r.err;

	std::vector<Message> got = ReadAll("misc", kAbortPart, true);
	ASSERT_EQ(100u, got.size()) << "the mock filters nothing";
	ExpectPayloads(got, 11, kAbortPart, 100, kmtest::Keys::kSeq, 0);

	std::vector<rawkafka::Bytes> raw = RawBatches("misc", kAbortPart);
	EXPECT_GE(raw.size(), 10u) << "at least one batch per transaction";
	int64_t pid = -1;
	for (const rawkafka::Bytes &b : raw) {
		View v(b);
		ASSERT_EQ((int)b.size(), v.rc);
		EXPECT_TRUE(km_batch_is_transactional(&v.b));
		EXPECT_FALSE(km_batch_is_control(&v.b)) << "the mock wrote a marker";
		EXPECT_EQ(km_batch_base_offset(&v.b) / 10,
			  km_batch_last_offset(&v.b) / 10)
			<< "batch at " << km_batch_base_offset(&v.b)
			<< " spans two transactions";
		if (pid == -1)
			pid = km_batch_producer_id(&v.b);
		EXPECT_EQ(pid, km_batch_producer_id(&v.b));
	}
	EXPECT_GE(pid, 0);
}

// --partition -1: librdkafka's partitioner spreads the keyed messages; the
// payload's partition is -1 and the key is the sequence over all messages.
TEST_F(ProduceTool, PartitionerPlacesByKey)
{
	ChildResult r = Produce({"--topic", "partitioner", "--partition", "-1",
				 "--count", "60", "--seed", "5"});
	ASSERT_EQ(0, r.exit_code) << r.describe();
	std::set<long long> seqs;
	int used = 0;
	for (int32_t p = 0; p < 3; p++) {
		std::vector<Message> got = ReadAll("partitioner", p);
		used += !got.empty();
		for (const Message &m : got) {
			ASSERT_TRUE(m.key.has_value());
			long long seq = std::stoll(*m.key);
			EXPECT_TRUE(seqs.insert(seq).second) << "twice: " << seq;
			EXPECT_EQ(kmtest::payload_value(5, -1, seq, 100), m.value)
				<< "seq " << seq;
		}
	}
	EXPECT_EQ(60u, seqs.size());
	EXPECT_EQ(0, *seqs.begin());
	EXPECT_EQ(59, *seqs.rbegin());
	EXPECT_GT(used, 1) << "the partitioner used one partition only";
}

// Random keys and headers follow the seed; --keys none writes null keys;
// bytes counts keys and values.
TEST_F(ProduceTool, KeysHeadersAndSeed)
{
	ChildResult r = Produce({"--topic", "misc", "--partition",
				 std::to_string(kKeysPart),
				 "--count", "20", "--size", "50", "--keys",
				 "random", "--headers", "3", "--seed", "99"});
	ASSERT_EQ(0, r.exit_code) << r.describe();
	Summary s;
	ASSERT_TRUE(ParseSummary(r.out, &s)) << r.out;
	EXPECT_EQ(20 * (50 + 16), s.bytes);
	std::vector<Message> got = ReadAll("misc", kKeysPart);
	ASSERT_EQ(20u, got.size());
	ExpectPayloads(got, 99, kKeysPart, 50, kmtest::Keys::kRandom, 3);
	EXPECT_NE(kmtest::payload_value(98, kKeysPart, 0, 50), got[0].value)
		<< "the seed changes nothing";

	r = Produce({"--topic", "misc", "--partition",
		     std::to_string(kNoKeysPart), "--count", "10", "--size", "64",
		     "--keys", "none"});
	ASSERT_EQ(0, r.exit_code) << r.describe();
	ASSERT_TRUE(ParseSummary(r.out, &s)) << r.out;
	EXPECT_EQ(640, s.bytes);
	got = ReadAll("misc", kNoKeysPart);
	ASSERT_EQ(10u, got.size());
	ExpectPayloads(got, 0, kNoKeysPart, 64, kmtest::Keys::kNone, 0);
}

// --rate paces the sends: 11 messages at 50/s take at least 0.2 s.
TEST_F(ProduceTool, RatePacesTheSends)
{
	ChildResult r = Produce({"--topic", "misc", "--partition",
				 std::to_string(kRatePart),
				 "--count", "11", "--rate", "50"});
	ASSERT_EQ(0, r.exit_code) << r.describe();
	Summary s;
	ASSERT_TRUE(ParseSummary(r.out, &s)) << r.out;
	EXPECT_EQ(11, s.produced);
	EXPECT_GE(s.seconds, 0.2);
	EXPECT_EQ(11u, ReadAll("misc", kRatePart).size());
}

// --batch-size reaches librdkafka: 400-byte values in batches of at most
// 1000 bytes are at most two to a batch.
TEST_F(ProduceTool, BatchSizeAndLingerReachTheProducer)
{
	ChildResult r = Produce({"--topic", "misc", "--partition",
				 std::to_string(kBatchPart),
				 "--count", "20", "--size", "400", "--keys",
				 "none", "--linger-ms", "0", "--batch-size",
				 "1000"});
	ASSERT_EQ(0, r.exit_code) << r.describe();
	std::vector<rawkafka::Bytes> raw = RawBatches("misc", kBatchPart);
	int records = 0;
	for (const rawkafka::Bytes &b : raw) {
		View v(b);
		ASSERT_EQ((int)b.size(), v.rc);
		EXPECT_LE(km_batch_records_count(&v.b), 2);
		records += km_batch_records_count(&v.b);
	}
	EXPECT_EQ(20, records);
	EXPECT_GE(raw.size(), 10u);
}

// Nothing listens: every message fails, the summary says so, exit 1. With
// round robin the Metadata request is what fails.
TEST_F(ProduceTool, UndeliveredMessagesExit1)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	sockaddr_in sa = {};
	socklen_t len = sizeof(sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT_EQ(0, bind(fd, (sockaddr *)&sa, sizeof(sa)));
	ASSERT_EQ(0, getsockname(fd, (sockaddr *)&sa, &len));
	std::string dead = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
	close(fd); // bound, never listened: connections are refused

	ChildResult r = Produce({"--topic", "t", "--partition", "0", "--count",
				 "3", "--timeout-ms", "1000"},
				dead);
	EXPECT_EQ(1, r.exit_code) << r.describe();
	Summary s;
	ASSERT_TRUE(ParseSummary(r.out, &s)) << r.out;
	EXPECT_EQ(0, s.produced);
	EXPECT_EQ(3, s.failed);
	EXPECT_EQ(0, s.bytes);
	EXPECT_NE(std::string::npos, r.err.find("delivery failures")) << r.err;

	r = Produce({"--topic", "t", "--count", "3", "--timeout-ms", "1000"},
		    dead);
	EXPECT_EQ(1, r.exit_code) << r.describe();
	ASSERT_TRUE(ParseSummary(r.out, &s)) << r.out;
	EXPECT_EQ(3, s.failed);
	EXPECT_NE(std::string::npos, r.err.find("metadata for t")) << r.err;
}

struct BadArgs {
	std::vector<std::string> args;
	std::string message;
};

TEST_F(ProduceTool, BadArgumentsExit2WithAMessage)
{
	const std::string exe = Env("KM_PRODUCE");
	const std::vector<std::string> base = {"--bootstrap", "127.0.0.1:1",
					       "--topic", "t"};
	const BadArgs cases[] = {
		{{"--topic", "t"}, "--bootstrap is required"},
		{{"--bootstrap", "127.0.0.1:1"}, "--topic is required"},
		{{"--bogus", "1"}, "unknown option '--bogus'"},
		{{"stray"}, "unknown argument 'stray'"},
		{{"--count"}, "--count needs a value"},
		{{"--count", "-1"}, "--count must be an integer in 0.."},
		{{"--count", "10x"}, "--count must be an integer in 0.."},
		{{"--size", "67108865"}, "--size must be an integer in 0..67108864"},
		{{"--headers", "65"}, "--headers must be an integer in 0..64"},
		{{"--partition", "-2"}, "--partition must be -1 or a partition"},
		{{"--rate", "-1"}, "--rate must be a number"},
		{{"--rate", "fast"}, "--rate must be a number"},
		{{"--seed", "-1"}, "--seed must be an unsigned integer"},
		{{"--mode", "exactly-once"}, "--mode: 'exactly-once' is not one of"},
		{{"--compression", "brotli"}, "--compression: 'brotli' is not one of"},
		{{"--keys", "all"}, "--keys: 'all' is not one of"},
		{{"--txn-size", "10"}, "--txn-size needs --mode transactional"},
		{{"--abort-every", "2"}, "--abort-every needs --mode transactional"},
		{{"--mode", "transactional", "--txn-size", "0"},
		 "--txn-size must be an integer in 1.."},
		{{"--linger-ms", "-5"}, "--linger-ms must be an integer in 0.."},
		{{"--batch-size", "0"}, "--batch-size must be an integer in 1.."},
		{{"--topic="}, "--topic needs a non-empty value"},
	};
	for (const BadArgs &c : cases) {
		std::vector<std::string> argv = {exe};
		bool own = c.args[0] == "--topic" || c.args[0] == "--bootstrap";
		if (!own)
			argv.insert(argv.end(), base.begin(), base.end());
		argv.insert(argv.end(), c.args.begin(), c.args.end());
		ChildResult res = kmtest::run_command(argv, kTimeoutMs);
		std::string what = ::testing::PrintToString(argv);
		EXPECT_EQ(2, res.exit_code) << what << ": " << res.describe();
		EXPECT_NE(std::string::npos, res.err.find(c.message))
			<< what << ": " << res.err;
		EXPECT_EQ("", res.out) << what;
	}
	ChildResult help = kmtest::run_command({exe, "--help"}, kTimeoutMs);
	EXPECT_EQ(0, help.exit_code) << help.describe();
	EXPECT_EQ(0u, help.out.find("usage: kmirror-produce")) << help.out;
}

} // namespace
