// Goal: kmirror-mock-source (tools/mock_source.c) is a Kafka source a shell
// can start: it prints one `bootstrap=` line (and writes it atomically to
// --ready-file), real clients (librdkafka, kcat) see the brokers, topics,
// partition counts and --leader placements it was asked for, it exits 0 on
// SIGTERM and SIGINT (and with its parent under --exit-with-parent), and a
// bad argument exits 2 with a message.
//
// Method: the built binary (path in KM_MOCK_SOURCE, set by meson) is run
// as a child through tests/support (MockSource, Child, run_command); every
// wait is on an observable event (its stdout line, its exit through a
// pidfd, a file) with a deadline.
#include <gtest/gtest.h>

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/support/kafka_peers.h"

namespace {

using kmtest::ChildResult;
using kmtest::MockSource;

const int kTimeoutMs = 20000;

std::string Exe()
{
	const char *p = getenv("KM_MOCK_SOURCE");
	return p ? p : "";
}

std::set<std::string> DirEntries(const std::string &dir)
{
	std::set<std::string> names;
	DIR *d = opendir(dir.c_str());
	if (!d)
		return names;
	while (struct dirent *e = readdir(d))
		if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
			names.insert(e->d_name);
	closedir(d);
	return names;
}

// Metadata of every topic as librdkafka sees it: brokers, partition counts,
// and each partition's leader.
struct Seen {
	std::set<int32_t> brokers;
	std::map<std::string, std::vector<int32_t>> leaders; // by partition
};

std::string Metadata(const std::string &bootstrap, Seen *seen)
{
	std::string err;
	rd_kafka_t *rk = kmtest::client_new(
		RD_KAFKA_PRODUCER, {{"bootstrap.servers", bootstrap}}, &err);
	if (!rk)
		return err;
	const struct rd_kafka_metadata *md = nullptr;
	rd_kafka_resp_err_t rerr = rd_kafka_metadata(rk, 1, nullptr, &md,
						     kTimeoutMs);
	if (rerr)
		err = std::string("metadata: ") + rd_kafka_err2str(rerr);
	for (int b = 0; !rerr && b < md->broker_cnt; b++)
		seen->brokers.insert(md->brokers[b].id);
	for (int t = 0; !rerr && t < md->topic_cnt; t++) {
		auto &l = seen->leaders[md->topics[t].topic];
		l.assign((size_t)md->topics[t].partition_cnt, -1);
		for (int p = 0; p < md->topics[t].partition_cnt; p++)
			if (md->topics[t].partitions[p].id < (int)l.size())
				l[(size_t)md->topics[t].partitions[p].id] =
					md->topics[t].partitions[p].leader;
	}
	if (md)
		rd_kafka_metadata_destroy(md);
	rd_kafka_destroy(rk);
	return err;
}

class MockSourceTool : public ::testing::Test {
protected:
	void SetUp() override
	{
		if (Exe().empty())
			FAIL() << "KM_MOCK_SOURCE not set (run via meson)";
		ASSERT_EQ("", dir_.error());
	}
	kmtest::TempDir dir_{"km-mock-source"};
};

TEST_F(MockSourceTool, ServesWhatItWasAskedForAndStopsOnSigterm)
{
	MockSource ms;
	std::string ready = dir_.file("ready");
	// The mock places leaders at random: every partition of alpha gets
	// one, so an ignored --leader passes by chance once in 3^6.
	const int32_t leaders[6] = {2, 3, 3, 1, 2, 1};
	std::vector<std::string> args = {"--brokers", "3", "--topic", "alpha:6",
					 "--topic=beta:1:2", "--ready-file",
					 ready};
	for (int p = 0; p < 6; p++) {
		std::string spec = "alpha:" + std::to_string(p) + ":" +
				   std::to_string(leaders[p]);
		if (p % 2) // both option forms
			args.push_back("--leader=" + spec);
		else
			args.insert(args.end(), {"--leader", spec});
	}
	ASSERT_EQ("", ms.start(Exe(), args, kTimeoutMs));

	// One bootstrap entry per broker, each on the loopback.
	std::regex three("127\\.0\\.0\\.1:[0-9]{1,5}(,127\\.0\\.0\\.1:[0-9]{1,5}){2}");
	EXPECT_TRUE(std::regex_match(ms.bootstrap(), three)) << ms.bootstrap();

	// The ready file (written after the line is printed) holds the same
	// line, and no temporary file is left.
	ASSERT_EQ("", kmtest::wait_for_file(ready, kTimeoutMs));
	std::string err;
	EXPECT_EQ("bootstrap=" + ms.bootstrap() + "\n",
		  kmtest::read_file(ready, &err))
		<< err;
	EXPECT_EQ(std::set<std::string>{"ready"}, DirEntries(dir_.path()));

	Seen seen;
	ASSERT_EQ("", Metadata(ms.bootstrap(), &seen));
	EXPECT_EQ((std::set<int32_t>{1, 2, 3}), seen.brokers);
	ASSERT_EQ(1u, seen.leaders.count("alpha"));
	ASSERT_EQ(1u, seen.leaders.count("beta"));
	ASSERT_EQ(6u, seen.leaders["alpha"].size());
	EXPECT_EQ(1u, seen.leaders["beta"].size());
	for (int p = 0; p < 6; p++)
		EXPECT_EQ(leaders[p], seen.leaders["alpha"][(size_t)p])
			<< "alpha/" << p;

	// kcat, another client, sees the same cluster.
	ChildResult kc = kmtest::run_command(
		{"kcat", "-b", ms.bootstrap(), "-L", "-m", "10"}, kTimeoutMs);
	ASSERT_EQ(0, kc.exit_code) << kc.describe();
	EXPECT_NE(std::string::npos, kc.out.find(" 3 brokers:")) << kc.out;
	EXPECT_NE(std::string::npos,
		  kc.out.find("topic \"alpha\" with 6 partitions"))
		<< kc.out;
	EXPECT_NE(std::string::npos,
		  kc.out.find("topic \"beta\" with 1 partitions"))
		<< kc.out;

	ChildResult res;
	ASSERT_EQ("", ms.stop(kTimeoutMs, &res));
	EXPECT_EQ(0, res.exit_code) << res.describe();
	EXPECT_FALSE(res.timed_out);
	EXPECT_EQ("", res.out) << "more than the one bootstrap line";

	// Its brokers are gone with it.
	int fd = -1;
	EXPECT_NE("", kmtest::tcp_connect(ms.host(), ms.port(), 2000, &fd));
	if (fd >= 0)
		close(fd);
}

TEST_F(MockSourceTool, DefaultsToThreeBrokersAndStopsOnSigint)
{
	MockSource ms;
	ASSERT_EQ("", ms.start(Exe(), {"--topic", "t:2"}, kTimeoutMs));
	Seen seen;
	ASSERT_EQ("", Metadata(ms.bootstrap(), &seen));
	EXPECT_EQ(3u, seen.brokers.size());
	EXPECT_EQ(2u, seen.leaders["t"].size());
	ASSERT_EQ("", ms.child().kill(SIGINT));
	ChildResult res;
	ASSERT_EQ("", ms.child().wait(kTimeoutMs, &res));
	EXPECT_EQ(0, res.exit_code) << res.describe();
}

// The mock lives as long as the process that started it: killing that
// parent (here a shell) stops it.
TEST_F(MockSourceTool, ExitWithParentStopsWhenTheParentDies)
{
	kmtest::Child sh;
	ASSERT_EQ("", sh.spawn({"sh", "-c",
				"\"$0\" --brokers 1 --exit-with-parent & "
				"echo pid=$!; wait",
				Exe()}));
	std::string line, pid_line;
	for (int i = 0; i < 2; i++) {
		ASSERT_EQ("", sh.read_line(kTimeoutMs, &line));
		if (line.compare(0, 4, "pid=") == 0)
			pid_line = line;
	}
	ASSERT_NE("", pid_line) << "no pid line";
	pid_t pid = (pid_t)atoi(pid_line.c_str() + 4);
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	ASSERT_GE(pidfd, 0) << "mock source gone before its parent";

	ASSERT_EQ("", sh.kill(SIGKILL));
	ChildResult res;
	ASSERT_EQ("", sh.wait(kTimeoutMs, &res));
	struct pollfd gone = {pidfd, POLLIN, 0};
	EXPECT_EQ(1, poll(&gone, 1, kTimeoutMs))
		<< "mock source outlived its parent";
	close(pidfd);
}

// A ready file that cannot be written: the bootstrap line still comes
// first, then it stops with exit 1 and says why.
TEST_F(MockSourceTool, UnwritableReadyFileExits1)
{
	ChildResult res = kmtest::run_command(
		{Exe(), "--brokers", "1", "--ready-file",
		 dir_.file("missing-dir/ready")},
		kTimeoutMs);
	EXPECT_EQ(1, res.exit_code) << res.describe();
	EXPECT_EQ(0u, res.out.find("bootstrap=127.0.0.1:")) << res.out;
	EXPECT_NE(std::string::npos, res.err.find("--ready-file")) << res.err;
}

struct BadArgs {
	std::vector<std::string> args;
	std::string message;
};

TEST_F(MockSourceTool, BadArgumentsExit2WithAMessage)
{
	const BadArgs cases[] = {
		{{"--bogus"}, "unknown argument '--bogus'"},
		{{"stray"}, "unknown argument 'stray'"},
		{{"--brokers"}, "--brokers needs a value"},
		{{"--brokers", "0"}, "--brokers must be 1..32"},
		{{"--brokers", "33"}, "--brokers must be 1..32"},
		{{"--brokers", "3x"}, "--brokers must be 1..32"},
		{{"--topic", "t"}, "--topic wants NAME:PARTITIONS[:RF]"},
		{{"--topic", "bad/name:1"}, "--topic wants NAME:PARTITIONS[:RF]"},
		{{"--topic", ":1"}, "--topic wants NAME:PARTITIONS[:RF]"},
		{{"--topic", "t:0"}, "PARTITIONS must be 1..1000"},
		{{"--topic", "t:1:0"}, "RF must be 1..32"},
		{{"--topic", "t:1", "--topic", "t:2"}, "topic 't' given twice"},
		{{"--brokers", "1", "--topic", "t:1:2"},
		 "replication is more than --brokers"},
		{{"--leader", "t:0"}, "--leader wants TOPIC:PARTITION:BROKER"},
		{{"--topic", "t:2", "--leader", "u:0:1"}, "no --topic of that name"},
		{{"--topic", "t:2", "--leader", "t:2:1"}, "no such partition"},
		{{"--topic", "t:2", "--leader", "t:0:4"}, "no such broker"},
		{{"--ready-file", ""}, "--ready-file needs a path"},
	};
	for (const BadArgs &c : cases) {
		std::vector<std::string> argv = {Exe()};
		argv.insert(argv.end(), c.args.begin(), c.args.end());
		ChildResult res = kmtest::run_command(argv, kTimeoutMs);
		std::string what = ::testing::PrintToString(c.args);
		EXPECT_EQ(2, res.exit_code) << what << ": " << res.describe();
		EXPECT_NE(std::string::npos, res.err.find(c.message))
			<< what << ": " << res.err;
		EXPECT_NE(std::string::npos, res.err.find("usage:")) << what;
		EXPECT_EQ("", res.out) << what;
	}
	ChildResult help = kmtest::run_command({Exe(), "--help"}, kTimeoutMs);
	EXPECT_EQ(0, help.exit_code) << help.describe();
	EXPECT_EQ(0u, help.out.find("usage: kmirror-mock-source")) << help.out;
}

} // namespace
