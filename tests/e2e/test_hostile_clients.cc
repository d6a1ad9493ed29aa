/* Hostile clients of kmirrord's Kafka listener (issue 21, case 1): a
 * request too large to hold, many connections each holding half of a legal
 * one, and a large request sent in small pieces. The listener must refuse
 * or time them out, go on answering other clients, and mirroring (on the
 * same single worker) must go on meanwhile.
 *
 * The source is librdkafka's mock cluster; the attackers are raw TCP
 * sockets; the innocent client is librdkafka (Metadata/ListOffsets through
 * watermarks()); figures come from `kmirrorctl status --json` ("listener"). */
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <thread>

#include <gtest/gtest.h>

#include "common/crc32c.h"
#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/fake_source.h"
#include "tests/support/blocking_io.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

const char *kTopic = "hc";

void put16(std::vector<uint8_t> &b, int v)
{
	b.push_back((uint8_t)(v >> 8));
	b.push_back((uint8_t)v);
}

void put32(std::vector<uint8_t> &b, int64_t v)
{
	for (int s = 24; s >= 0; s -= 8)
		b.push_back((uint8_t)(v >> s));
}

void put_str(std::vector<uint8_t> &b, const std::string &s)
{
	put16(b, (int)s.size());
	b.insert(b.end(), s.begin(), s.end());
}

/* A whole Produce v3 frame for topic-0 whose records are `records`. */
std::vector<uint8_t> produce_frame(int32_t corr, const std::string &topic,
				   const std::string &records, int acks = -1)
{
	std::vector<uint8_t> b;
	put32(b, 0); /* size, set below */
	put16(b, 0); /* Produce */
	put16(b, 3);
	put32(b, corr);
	put_str(b, "hostile");
	put16(b, -1); /* transactional_id: null */
	put16(b, acks);
	put32(b, 30000);
	put32(b, 1);
	put_str(b, topic);
	put32(b, 1);
	put32(b, 0);
	put32(b, (int64_t)records.size());
	b.insert(b.end(), records.begin(), records.end());
	uint32_t n = (uint32_t)(b.size() - 4);
	b[0] = (uint8_t)(n >> 24);
	b[1] = (uint8_t)(n >> 16);
	b[2] = (uint8_t)(n >> 8);
	b[3] = (uint8_t)n;
	return b;
}

/* Set the big-endian int of `len` bytes at off in a batch. */
void set_be(std::string &b, size_t off, size_t len, int64_t v)
{
	for (size_t i = 0; i < len; i++)
		b[off + i] = (char)(uint8_t)(v >> (8 * (len - 1 - i)));
}

/* A one-record batch as a plain producer sends it (no producer id), its
 * header fields then set by `lie`, and its CRC made right again: only
 * the batch's own consistency can tell. */
std::string lying_batch(const std::function<void(std::string &)> &lie)
{
	std::vector<SourceRecord> expect;
	auto bs = build_batches(0, 1, 1, &expect);
	if (bs.empty())
		return "";
	std::string b = bs[0];
	set_be(b, 43, 8, -1); /* producerId */
	set_be(b, 51, 2, -1); /* producerEpoch */
	set_be(b, 53, 4, -1); /* baseSequence */
	lie(b);
	set_be(b, 17, 4, km_crc32c_update(0, b.data() + 21, b.size() - 21));
	return b;
}

/* A whole Produce v3 frame for kTopic-0 whose records are `bytes` bytes
 * (not a valid batch: the partition is mirrored, so kmirrord refuses it
 * with POLICY_VIOLATION before it reads them). */
std::vector<uint8_t> produce_frame(int32_t corr, size_t bytes)
{
	return produce_frame(corr, kTopic, std::string(bytes, '\x5a'), 1);
}

/* A connected socket, non-blocking, TCP_NODELAY. */
int raw_connect(uint16_t port)
{
	int fd = -1;
	if (tcp_connect("127.0.0.1", port, 5000, &fd) != "")
		return -1;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

/* Has the server closed fd (EOF or reset)? Waits at most ms. */
bool closed_by_server(int fd, int ms)
{
	auto end = deadline_in(ms);
	uint8_t junk[4096];
	for (;;) {
		pollfd p = {fd, POLLIN | POLLRDHUP, 0};
		int left = ms_left(end);
		if (poll(&p, 1, left) <= 0)
			return false;
		ssize_t n = recv(fd, junk, sizeof(junk), 0);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
		if (n < 0 && errno != EAGAIN)
			return true;
		if (left == 0)
			return false;
	}
}

/* Writes each socket's bytes as far as it takes them, round robin, until
 * told to stop: attackers that push what they can and never finish. */
class Pusher {
public:
	void add(int fd, std::vector<uint8_t> bytes)
	{
		socks_.push_back({fd, std::move(bytes), 0});
	}
	void start()
	{
		th_ = std::thread([this] { run(); });
	}
	void stop()
	{
		stop_ = true;
		if (th_.joinable())
			th_.join();
	}
	~Pusher()
	{
		stop();
		for (auto &s : socks_)
			close(s.fd);
	}
	std::vector<int> fds() const
	{
		std::vector<int> v;
		for (auto &s : socks_)
			v.push_back(s.fd);
		return v;
	}

private:
	struct Sock {
		int fd;
		std::vector<uint8_t> b;
		size_t off;
	};
	void run()
	{
		while (!stop_) {
			std::vector<pollfd> p;
			for (auto &s : socks_)
				if (s.off < s.b.size())
					p.push_back({s.fd, POLLOUT, 0});
			if (p.empty())
				return;
			if (poll(p.data(), p.size(), 50) <= 0)
				continue;
			for (auto &s : socks_) {
				if (s.off >= s.b.size())
					continue;
				ssize_t n = send(s.fd, s.b.data() + s.off,
						 s.b.size() - s.off,
						 MSG_NOSIGNAL | MSG_DONTWAIT);
				if (n > 0)
					s.off += (size_t)n;
				else if (n < 0 && errno != EAGAIN)
					s.off = s.b.size(); /* closed on us */
			}
		}
	}
	std::vector<Sock> socks_;
	std::atomic<bool> stop_{false};
	std::thread th_;
};

class HostileClients : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ("", mock_.error());
		ASSERT_EQ("", mock_.create_topic(kTopic, 1));
		ASSERT_EQ("", dir_.error());
		ASSERT_EQ("", more_at_source(200));
	}

	void start(int request_timeout_ms, std::vector<std::string> more = {})
	{
		std::vector<std::string> sets = {
			"source.bootstrap.servers=" + mock_.bootstrap(),
			std::string("topics=") + kTopic, "workers=1",
			"listener.request.timeout.ms=" +
				std::to_string(request_timeout_ms) };
		sets.insert(sets.end(), more.begin(), more.end());
		d_ = std::make_unique<Daemon>(dir_.path(), sets);
		ASSERT_EQ("", d_->start());
		ASSERT_EQ("", caught_up());
	}

	std::string more_at_source(int64_t n)
	{
		ProduceSpec s;
		s.topic = kTopic;
		s.partition = 0;
		s.count = n;
		s.seed = (uint64_t)++seed_;
		return produce(mock_.bootstrap(), s);
	}

	std::string caught_up()
	{
		int64_t lo = -1, hi = -1;
		if (auto e = watermarks(mock_.bootstrap(), kTopic, 0, &lo, &hi);
		    e != "")
			return e;
		std::string key = std::string(kTopic) + ":0";
		return d_->wait_status(
			[&](const std::map<std::string, PartStatus> &st) {
				auto it = st.find(key);
				return it != st.end() && it->second.hw == hi;
			},
			60000);
	}

	/* Mirroring goes on: new source records reach our high watermark. */
	void expect_mirroring()
	{
		ASSERT_EQ("", more_at_source(100));
		ASSERT_EQ("", caught_up());
	}

	/* An innocent client is answered, with our high watermark. */
	void expect_listener_answers()
	{
		int64_t lo = -1, hi = -1;
		ASSERT_EQ("", watermarks(d_->bootstrap(), kTopic, 0, &lo, &hi,
					 10000));
		EXPECT_GT(hi, 0);
	}

	int64_t listener(const char *key)
	{
		return status_figure(*d_, "listener", key);
	}

	/* Until the published listener figure satisfies pred. */
	template <class F> bool listener_until(const char *key, F pred,
					      int ms = 30000)
	{
		return poll_until([&] { return pred(listener(key)); }, ms);
	}

	MockCluster mock_{1};
	TempDir dir_{"km-hc"};
	std::unique_ptr<Daemon> d_;
	int seed_ = 0;
};

/* A size the listener can never hold is refused as soon as the size is
 * read, whatever follows; not left to the request timeout. */
TEST_F(HostileClients, OversizedRequestIsRefusedAtOnce)
{
	start(600000);
	const int64_t sizes[] = {70000000, 12 << 20, (100 << 20) + 1,
				 0x7ffffff0};
	int64_t errs = listener("protocol_errors");
	ASSERT_GE(errs, 0);
	for (int64_t size : sizes) {
		int fd = raw_connect(d_->port());
		ASSERT_GE(fd, 0);
		std::vector<uint8_t> b;
		put32(b, size);
		b.resize(64 << 10, 0x11);
		(void)send(fd, b.data(), b.size(), MSG_NOSIGNAL);
		EXPECT_TRUE(closed_by_server(fd, 20000)) << size;
		close(fd);
		errs++;
		EXPECT_TRUE(listener_until("protocol_errors",
					   [&](int64_t v) { return v == errs; }))
			<< size;
		expect_listener_answers();
	}
	EXPECT_EQ(0, listener("request_timeouts"));
	expect_mirroring();
}

/* Many connections each send half of a request the listener may hold and
 * stop: the budget admits a few, the rest wait paused; the listener keeps
 * answering, mirroring goes on, and every one of them is closed by the
 * request timeout, after which nothing is charged any more. */
class HalfRequests : public HostileClients,
		     public ::testing::WithParamInterface<std::pair<int, int>> {
};

TEST_P(HalfRequests, TimeOutWhileListenerAndMirroringGoOn)
{
	const int conns = GetParam().first;
	const int size = GetParam().second;
	start(3000);
	Pusher pusher;
	for (int i = 0; i < conns; i++) {
		int fd = raw_connect(d_->port());
		ASSERT_GE(fd, 0) << i;
		auto f = produce_frame(i + 1, (size_t)size);
		f.resize(f.size() / 2);
		pusher.add(fd, std::move(f));
	}
	pusher.start();
	ASSERT_TRUE(listener_until("clients",
				   [&](int64_t v) { return v >= conns; }));
	/* While they hold what they could. */
	expect_listener_answers();
	expect_mirroring();
	expect_listener_answers();
	for (int fd : pusher.fds())
		EXPECT_TRUE(closed_by_server(fd, 120000));
	EXPECT_TRUE(listener_until("request_timeouts",
				   [&](int64_t v) { return v == conns; }))
		<< listener("request_timeouts");
	EXPECT_TRUE(listener_until("rx_bufs_charged",
				   [](int64_t v) { return v == 0; }));
	EXPECT_EQ(0, listener("protocol_errors"));
	EXPECT_LE(listener("rx_bufs_held"), 0);
	expect_listener_answers();
	expect_mirroring();
}

INSTANTIATE_TEST_SUITE_P(
	Sizes, HalfRequests,
	::testing::Values(std::make_pair(17, 10000000),
			  std::make_pair(40, 4 << 20),
			  std::make_pair(8, 11 << 20)),
	[](const auto &pi) {
		return std::to_string(pi.param.first) + "x" +
		       std::to_string(pi.param.second);
	});

/* A large request sent in 100-byte pieces is packed into full buffers as
 * it comes, so it completes and is answered (POLICY_VIOLATION: the
 * partition is mirrored) instead of holding a buffer per piece. */
TEST_F(HostileClients, SlowSenderIsPackedAndAnswered)
{
	start(60000);
	int fd = raw_connect(d_->port());
	ASSERT_GE(fd, 0);
	auto f = produce_frame(77, 300 << 10);
	for (size_t off = 0; off < f.size();) {
		size_t n = std::min<size_t>(100, f.size() - off);
		pollfd p = {fd, POLLOUT, 0};
		ASSERT_EQ(1, poll(&p, 1, 10000));
		ssize_t w = send(fd, f.data() + off, n, MSG_NOSIGNAL);
		ASSERT_GT(w, 0) << "closed at " << off;
		off += (size_t)w;
		/* Pacing, not synchronisation: pieces reach the listener one
		 * by one; the assertions below hold either way. */
		if (off % 3000 < 100)
			usleep(1000);
	}
	uint8_t hdr[8];
	ASSERT_EQ("", io_all(fd, hdr, sizeof(hdr), false, deadline_in(30000)));
	uint32_t len = (uint32_t)hdr[0] << 24 | hdr[1] << 16 | hdr[2] << 8 | hdr[3];
	int32_t corr = (int32_t)((uint32_t)hdr[4] << 24 | hdr[5] << 16 |
				 hdr[6] << 8 | hdr[7]);
	EXPECT_EQ(77, corr);
	std::vector<uint8_t> body(len - 4);
	ASSERT_EQ("", io_all(fd, body.data(), body.size(), false,
			     deadline_in(30000)));
	/* topics[1]: name, partitions[1]: index, error_code. */
	size_t at = 4 + 2 + strlen(kTopic) + 4 + 4;
	ASSERT_GT(body.size(), at + 2);
	EXPECT_EQ(44, body[at] << 8 | body[at + 1]) << "POLICY_VIOLATION";
	close(fd);
	EXPECT_GT(listener("rx_compactions"), 0);
	EXPECT_EQ(0, listener("protocol_errors"));
	expect_mirroring();
}

/* Issue 21 case 2 against kmirrord itself: batches with a valid CRC whose
 * header disagrees with their one record are INVALID_RECORD (87) on a
 * writable partition, the log end does not move and no segment is made
 * (twenty lastOffsetDelta=2^31-1 once moved it to 42949672960), and a
 * correct batch right after on the same connection is appended at 0. */
TEST_F(HostileClients, LyingBatchHeadersAreRefusedAndTheLogEndHolds)
{
	start(60000, { "local.topics=lt:1" });
	std::vector<std::string> lies;
	for (int64_t d : { 1LL, 1000LL, 2147483647LL })
		lies.push_back(lying_batch(
			[d](std::string &b) { set_be(b, 23, 4, d); }));
	for (int64_t n : { 0LL, 2LL, 3LL })
		lies.push_back(lying_batch(
			[n](std::string &b) { set_be(b, 57, 4, n); }));
	for (int i = 0; i < 20; i++)
		lies.push_back(lying_batch([](std::string &b) {
			set_be(b, 23, 4, 2147483647LL);
		}));
	int fd = raw_connect(d_->port());
	ASSERT_GE(fd, 0);
	auto answer = [&](int32_t corr, const std::string &batch) {
		auto f = produce_frame(corr, "lt", batch);
		EXPECT_EQ("", io_all(fd, f.data(), f.size(), true,
				     deadline_in(10000)));
		uint8_t hdr[8];
		EXPECT_EQ("", io_all(fd, hdr, 8, false, deadline_in(30000)));
		uint32_t len = (uint32_t)hdr[0] << 24 | hdr[1] << 16 |
			       hdr[2] << 8 | hdr[3];
		std::vector<uint8_t> body(len - 4);
		EXPECT_EQ("", io_all(fd, body.data(), body.size(), false,
				     deadline_in(30000)));
		EXPECT_EQ(corr, (int32_t)((uint32_t)hdr[4] << 24 | hdr[5] << 16 |
					  hdr[6] << 8 | hdr[7]));
		size_t at = 4 + 2 + 2 + 4 + 4;
		return body.size() > at + 2 ? body[at] << 8 | body[at + 1] : -1;
	};
	for (size_t i = 0; i < lies.size(); i++) {
		ASSERT_FALSE(lies[i].empty());
		EXPECT_EQ(87, answer((int32_t)i + 1, lies[i])) << "lie " << i;
	}
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d_->status(&st));
	EXPECT_EQ(0, st["lt:0"].leo);
	int logs = 0;
	for (const Dumped &b : [&] {
		     std::string tail;
		     return dump_batches(dir_.path() + "/lt-0", &tail);
	     }())
		logs += b.valid;
	EXPECT_EQ(0, logs) << "nothing of the lies is in the log";
	EXPECT_EQ(0, answer(100, lying_batch([](std::string &) {})));
	ASSERT_EQ("", d_->wait_status(
			      [](const std::map<std::string, PartStatus> &s) {
				      auto it = s.find("lt:0");
				      return it != s.end() && it->second.hw == 1;
			      },
			      30000));
	close(fd);
	expect_mirroring();
}

} // namespace
