// Goal: the kernel network backend (dataplane/net/knet.c, behind dataplane/net/net.h)
// carries TCP byte streams intact and in order with zero-copy receive buffers,
// enforces its static capacities with the documented codes, turns a consumer
// that holds buffers into backpressure without losing bytes, and reports each
// connection's end exactly once with a precise code.
// Method: real TCP over 127.0.0.1 on one io_uring (the worker's ring). A pump
// submits, waits for a CQE with a short bounded timeout (an event wait, never
// a sleep), runs the callbacks and km_net_poll(); every wait is "pump until a
// condition" under a deadline. Peers are another backend instance on the same
// ring or plain blocking POSIX sockets (on threads when they stream). Every
// case runs twice: multishot recv with a provided buffer ring (as the kernel
// allows) and the single-shot fallback.
#include <gtest/gtest.h>
#include <liburing.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/chain.h"
#include "dataplane/net/net.h"
#include "iouring_log/uring.h"

namespace {

constexpr size_t kMiB = 1024 * 1024;

// Byte i of a stream: a little-endian 32-bit counter per 4 bytes, offset by
// seed, so a lost, repeated or reordered 4-byte word is caught.
uint8_t Pat(uint64_t i, uint32_t seed)
{
	uint32_t w = (uint32_t)(i / 4) + seed;
	return (uint8_t)(w >> (8 * (i % 4)));
}

std::vector<uint8_t> Pattern(size_t n, uint32_t seed)
{
	std::vector<uint8_t> v(n);
	for (size_t i = 0; i < n; i++)
		v[i] = Pat(i, seed);
	return v;
}

// First offset in [off, off+n) whose byte breaks the pattern, or -1.
int64_t Mismatch(const uint8_t *p, size_t n, uint64_t off, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != Pat(off + i, seed))
			return (int64_t)(off + i);
	return -1;
}

// ---- plain POSIX peers ----------------------------------------------------

int PlainListen(uint16_t *port, int backlog = 16)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sockaddr_in sa{};
	socklen_t len = sizeof(sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, backlog) < 0 || getsockname(fd, (sockaddr *)&sa, &len))
		abort();
	*port = ntohs(sa.sin_port);
	return fd;
}

int PlainConnect(uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sockaddr_in sa{};
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (sockaddr *)&sa, sizeof(sa)) < 0)
		abort();
	return fd;
}

bool WriteAll(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

void SetLingerZero(int fd)
{
	linger lg{1, 0};
	ASSERT_EQ(0, setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
}

// Reads a plain socket until EOF or error on a thread, checking the pattern.
struct PlainReader {
	std::atomic<uint64_t> got{0};
	std::atomic<int64_t> bad{-1};
	std::atomic<int> end_errno{-1}; // 0: EOF, else errno
	std::atomic<bool> done{false};
	std::thread th;

	void Start(int fd, uint32_t seed, uint64_t stop_after = UINT64_MAX)
	{
		th = std::thread([this, fd, seed, stop_after] {
			std::vector<uint8_t> buf(65536);
			uint64_t off = 0;
			while (off < stop_after) {
				ssize_t r = read(fd, buf.data(), buf.size());
				if (r < 0 && errno == EINTR)
					continue;
				if (r <= 0) {
					end_errno = r == 0 ? 0 : errno;
					break;
				}
				int64_t m = Mismatch(buf.data(), (size_t)r,
						     off, seed);
				if (m >= 0 && bad < 0)
					bad = m;
				off += (uint64_t)r;
				got = off;
			}
			done = true;
		});
	}
	void Join()
	{
		if (th.joinable())
			th.join();
	}
	~PlainReader() { Join(); }
};

// ---- test side of one backend connection ----------------------------------

struct Held {
	uint32_t id;
	const uint8_t *p;
	size_t n;
	uint64_t off;
};

struct ConnOpts {
	bool keep_text = true; // append received bytes to text
	bool verify = false;   // check received bytes against Pat(seed)
	uint32_t seed = 0;
	bool echo = false;     // send each buffer back, release when sent
	bool hold_all = false; // keep every buffer (backpressure)
	size_t hold_max = 0;   // keep up to this many, then release shuffled
};

struct Conn {
	km_net *net = nullptr;
	km_net_conn *c = nullptr;
	ConnOpts o;
	int connects = 0, connect_res = INT_MIN;
	int accepts = 0;
	int closes = 0, close_reason = INT_MIN;
	bool closed_after_data_checked = true;
	std::string text;
	uint64_t rx_off = 0;
	int64_t rx_bad = -1;	   // first mismatch at arrival
	int64_t held_bad = -1;	   // first mismatch when released
	std::vector<Held> held;
	std::mt19937 rng{7};
	// sender
	const std::vector<uint8_t> *tx = nullptr;
	size_t tx_off = 0, tx_chunk = 256 * 1024;
	int tx_err = 0;
	int sent_cbs = 0, sent_errs = 0;
	int64_t sent_bytes = 0;
	std::vector<int> sent_res;

	void Release(std::vector<Held> &hs)
	{
		std::shuffle(hs.begin(), hs.end(), rng);
		std::vector<uint32_t> ids;
		for (const Held &h : hs) {
			int64_t m = o.verify ? Mismatch(h.p, h.n, h.off, o.seed)
					     : -1;
			if (m >= 0 && held_bad < 0)
				held_bad = m;
			ids.push_back(h.id);
		}
		// Half one by one (out of order), half as one burst.
		size_t half = ids.size() / 2;
		for (size_t i = 0; i < half; i++)
			km_net_release(net, &ids[i], 1);
		if (ids.size() > half)
			km_net_release(net, ids.data() + half,
				       (uint32_t)(ids.size() - half));
		hs.clear();
	}
	void ReleaseAll() { Release(held); }

	void Recv(const km_chain *d, const uint32_t *ids);
	void PumpTx();
};

Conn *Ctx(km_net_conn *c)
{
	return static_cast<Conn *>(km_net_conn_ctx(c));
}

void OnSent(km_net_conn *, void *arg, int res)
{
	Conn *s = static_cast<Conn *>(arg);
	s->sent_cbs++;
	s->sent_res.push_back(res);
	if (res > 0)
		s->sent_bytes += res;
	else
		s->sent_errs++;
	if (res > 0)
		s->PumpTx(); // refill from the callback: allowed by net.h
}

void OnEchoSent(km_net_conn *c, void *arg, int)
{
	uint32_t id = (uint32_t)(uintptr_t)arg;
	km_net_release(Ctx(c)->net, &id, 1);
}

void Conn::PumpTx()
{
	while (c != nullptr && tx != nullptr && tx_off < tx->size()) {
		size_t n = std::min(tx_chunk, tx->size() - tx_off);
		const uint8_t *p = tx->data() + tx_off;
		// Three unequal iovecs per send (one when tiny).
		iovec iov[3];
		uint32_t k = 0;
		size_t a = n / 5, b = n / 3;
		if (a == 0 || b == 0) {
			iov[k++] = {(void *)p, n};
		} else {
			iov[k++] = {(void *)p, a};
			iov[k++] = {(void *)(p + a), b};
			iov[k++] = {(void *)(p + a + b), n - a - b};
		}
		int rc = km_net_send(c, iov, k, OnSent, this);
		if (rc == -EAGAIN)
			return;
		if (rc != 0) {
			tx_err = rc;
			return;
		}
		tx_off += n;
	}
}

void Conn::Recv(const km_chain *d, const uint32_t *ids)
{
	for (uint32_t i = 0; i < d->n_iov; i++) {
		const uint8_t *p = (const uint8_t *)d->iov[i].iov_base;
		size_t n = d->iov[i].iov_len;
		if (o.keep_text)
			text.append((const char *)p, n);
		if (o.verify) {
			int64_t m = Mismatch(p, n, rx_off, o.seed);
			if (m >= 0 && rx_bad < 0)
				rx_bad = m;
		}
		if (o.echo) {
			iovec iov = {(void *)p, n};
			int rc = km_net_send(c, &iov, 1, OnEchoSent,
					     (void *)(uintptr_t)ids[i]);
			if (rc != 0) { // sized so that it cannot happen
				tx_err = rc;
				km_net_release(net, &ids[i], 1);
			}
		} else {
			held.push_back({ids[i], p, n, rx_off});
		}
		rx_off += n;
	}
	if (!o.hold_all && held.size() > o.hold_max)
		ReleaseAll();
}

struct Server {
	km_net *net = nullptr;
	km_net_listener *l = nullptr;
	ConnOpts o;
	std::deque<std::unique_ptr<Conn>> conns;
	Conn *Last() { return conns.empty() ? nullptr : conns.back().get(); }
};

void OnConnect(km_net_conn *c, int res)
{
	Conn *s = Ctx(c);
	s->connects++;
	s->connect_res = res;
	if (res != 0) {
		s->c = nullptr;
		return;
	}
	s->PumpTx();
}

void OnAccept(km_net_conn *c)
{
	Server *srv = static_cast<Server *>(km_net_conn_ctx(c));
	auto s = std::make_unique<Conn>();
	s->net = srv->net;
	s->c = c;
	s->o = srv->o;
	s->accepts = 1;
	km_net_conn_set_ctx(c, s.get());
	srv->conns.push_back(std::move(s));
}

void OnRecv(km_net_conn *c, const km_chain *d, const uint32_t *ids)
{
	Conn *s = Ctx(c);
	if (s->closes != 0)
		s->closed_after_data_checked = false; // data after on_close
	s->Recv(d, ids);
}

void OnClose(km_net_conn *c, int reason)
{
	Conn *s = Ctx(c);
	s->closes++;
	s->close_reason = reason;
	s->c = nullptr;
}

const km_net_handler kHandler = {OnConnect, OnAccept, OnRecv, OnClose};

// ---- fixture --------------------------------------------------------------

class Net : public ::testing::TestWithParam<km_net_rx_mode> {
protected:
	km_uring u{};
	bool ring_ok = false;
	std::vector<km_net *> nets;
	// Owned here, not by test bodies: callbacks may run until TearDown
	// destroys the backends.
	std::deque<std::unique_ptr<Conn>> conns;
	std::deque<std::unique_ptr<Server>> servers;

	void SetUp() override
	{
		int rc = km_uring_init(&u, 512);
		if (rc < 0)
			GTEST_SKIP() << "io_uring unavailable: " << rc;
		ring_ok = true;
	}
	void TearDown() override
	{
		for (km_net *n : nets)
			km_net_destroy(n);
		nets.clear();
		if (ring_ok)
			km_uring_exit(&u);
	}

	km_net_config Cfg()
	{
		km_net_config cfg{};
		cfg.kind = KM_NET_KERNEL;
		cfg.conns_max = 64;
		cfg.listeners_max = 2;
		cfg.rx_buf_count = 64;
		cfg.rx_buf_bytes = 16384;
		cfg.send_queue_max = 64;
		cfg.send_iov_max = 256;
		cfg.connect_timeout_ms = 5000;
		cfg.close_timeout_ms = 5000;
		cfg.rx_mode = GetParam();
		cfg.uring = &u;
		return cfg;
	}
	km_net *Make(const km_net_config &cfg)
	{
		km_net *n = nullptr;
		int rc = km_net_create(&cfg, &n);
		EXPECT_EQ(0, rc);
		if (rc != 0)
			return nullptr;
		nets.push_back(n);
		return n;
	}
	km_net *Make() { return Make(Cfg()); }

	void Pump(int wait_ms = 5)
	{
		bool busy = false;
		for (km_net *n : nets)
			busy |= km_net_wants_poll(n);
		ASSERT_GE(km_uring_submit(&u), 0);
		if (!busy && wait_ms > 0 && km_uring_busy(&u) > 0) {
			__kernel_timespec ts{0, wait_ms * 1000000LL};
			io_uring_cqe *cqe;
			(void)io_uring_wait_cqe_timeout(&u.ring, &cqe, &ts);
		}
		ASSERT_GE(km_uring_poll(&u, false), 0);
		for (km_net *n : nets)
			ASSERT_GE(km_net_poll(n), 0);
	}
	template <class P> bool Until(P pred, int timeout_ms = 60000)
	{
		auto end = std::chrono::steady_clock::now() +
			   std::chrono::milliseconds(timeout_ms);
		while (!pred()) {
			if (std::chrono::steady_clock::now() > end)
				return false;
			Pump();
			if (::testing::Test::HasFatalFailure())
				return false;
		}
		return true;
	}

	Server *Listen(km_net *n, ConnOpts o = {})
	{
		auto s = std::make_unique<Server>();
		s->net = n;
		s->o = o;
		EXPECT_EQ(0, km_net_listen(n, "127.0.0.1", 0, &kHandler,
					   s.get(), &s->l));
		EXPECT_NE(0, km_net_listener_port(s->l));
		servers.push_back(std::move(s));
		return servers.back().get();
	}
	Conn *Connect(km_net *n, uint16_t port, ConnOpts o = {},
		      int expect_rc = 0)
	{
		auto s = std::make_unique<Conn>();
		s->net = n;
		s->o = o;
		km_net_conn *c = nullptr;
		int rc = km_net_connect(n, "127.0.0.1", port, &kHandler,
					s.get(), &c);
		EXPECT_EQ(expect_rc, rc);
		s->c = rc == 0 ? c : nullptr;
		conns.push_back(std::move(s));
		return conns.back().get();
	}
	// A connected pair: client on cn, accepted side on the server.
	std::pair<Conn *, Conn *> Pair(km_net *cn, Server *srv, ConnOpts co = {})
	{
		size_t before = srv->conns.size();
		Conn *cl = Connect(cn, km_net_listener_port(srv->l), co);
		EXPECT_TRUE(Until([&] {
			return cl->connects == 1 &&
			       srv->conns.size() == before + 1;
		}));
		EXPECT_EQ(0, cl->connect_res);
		return {cl, srv->Last()};
	}
	km_net_stats Stats(km_net *n)
	{
		km_net_stats st;
		km_net_get_stats(n, &st);
		return st;
	}
	km_net_conn_stats CStats(Conn *s)
	{
		km_net_conn_stats st{};
		if (s->c != nullptr)
			km_net_conn_get_stats(s->c, &st);
		return st;
	}
};

// ---- tests ----------------------------------------------------------------

// Each side knows its peer's address: the accepted connection the client's
// (Kafka's ClientHost of a group member), the client the listener's.
TEST_P(Net, ConnectionsNameTheirPeer)
{
	km_net *sn = Make(), *cn = Make();
	Server *srv = Listen(sn);
	auto pr = Pair(cn, srv);
	ASSERT_NE(nullptr, pr.second);
	sockaddr_in a{}, b{};
	ASSERT_EQ(0, km_net_conn_peer(pr.second->c, &a));
	EXPECT_EQ(AF_INET, a.sin_family);
	EXPECT_EQ(htonl(INADDR_LOOPBACK), a.sin_addr.s_addr);
	EXPECT_NE(0, a.sin_port);
	ASSERT_EQ(0, km_net_conn_peer(pr.first->c, &b));
	EXPECT_EQ(htonl(INADDR_LOOPBACK), b.sin_addr.s_addr);
	EXPECT_EQ(km_net_listener_port(srv->l), ntohs(b.sin_port));
}

// Listener on port 0 (bound port read back), one client; messages both ways:
// the server echoes each message by copy, in order.
TEST_P(Net, ExchangeMessagesBothWays)
{
	km_net *sn = Make(), *cn = Make();
	Server *srv = Listen(sn);
	auto pr = Pair(cn, srv);
	Conn *cl = pr.first, *sv = pr.second;
	ASSERT_NE(nullptr, sv);
	std::string sent_by_client, sent_by_server;
	std::vector<std::string> keep; // bytes stay valid until callbacks
	keep.reserve(200);
	for (int i = 0; i < 50; i++) {
		keep.push_back("client message " + std::to_string(i) + ";");
		iovec iov = {(void *)keep.back().data(), keep.back().size()};
		ASSERT_EQ(0, km_net_send(cl->c, &iov, 1, OnSent, cl));
		sent_by_client += keep.back();
		keep.push_back("server reply " + std::to_string(i) + ";");
		iovec iov2 = {(void *)keep.back().data(), keep.back().size()};
		ASSERT_EQ(0, km_net_send(sv->c, &iov2, 1, OnSent, sv));
		sent_by_server += keep.back();
	}
	ASSERT_TRUE(Until([&] {
		return sv->text.size() == sent_by_client.size() &&
		       cl->text.size() == sent_by_server.size();
	}));
	EXPECT_EQ(sent_by_client, sv->text);
	EXPECT_EQ(sent_by_server, cl->text);
	EXPECT_EQ(50, cl->sent_cbs);
	EXPECT_EQ(50, sv->sent_cbs);
	EXPECT_EQ(0, cl->sent_errs);
	EXPECT_EQ((int64_t)sent_by_client.size(), cl->sent_bytes);
	EXPECT_EQ(sent_by_client.size(), CStats(sv).bytes_in);
	EXPECT_EQ(sent_by_client.size(), CStats(cl).bytes_out);
	EXPECT_EQ(0u, Stats(sn).rx_bufs_held);
	EXPECT_EQ(1u, Stats(sn).accepts);
	EXPECT_EQ(1u, Stats(cn).connects);
}

// 32 MiB each way at once, counter pattern checked at arrival and again when
// each buffer is released (a held buffer must not be reused), buffers kept in
// groups and released shuffled.
TEST_P(Net, Stream32MiBBothWaysOutOfOrderRelease)
{
	km_net_config cfg = Cfg();
	cfg.rx_buf_count = 32;
	cfg.rx_buf_bytes = 65536;
	km_net *sn = Make(cfg), *cn = Make(cfg);
	const size_t n = 32 * kMiB;
	auto up = Pattern(n, 0), down = Pattern(n, 0x55555555u);
	ConnOpts so;
	so.keep_text = false;
	so.verify = true;
	so.seed = 0;
	so.hold_max = 6;
	Server *srv = Listen(sn, so);
	ConnOpts co = so;
	co.seed = 0x55555555u;
	co.hold_max = 9;
	auto pr = Pair(cn, srv, co);
	Conn *cl = pr.first, *sv = pr.second;
	ASSERT_NE(nullptr, sv);
	cl->tx = &up;
	sv->tx = &down;
	cl->PumpTx();
	sv->PumpTx();
	ASSERT_TRUE(Until([&] {
		return sv->rx_off == n && cl->rx_off == n &&
		       cl->sent_bytes == (int64_t)n &&
		       sv->sent_bytes == (int64_t)n;
	})) << "server got " << sv->rx_off << " client got " << cl->rx_off;
	cl->ReleaseAll();
	sv->ReleaseAll();
	EXPECT_EQ(-1, sv->rx_bad);
	EXPECT_EQ(-1, cl->rx_bad);
	EXPECT_EQ(-1, sv->held_bad);
	EXPECT_EQ(-1, cl->held_bad);
	EXPECT_EQ(0, cl->tx_err);
	EXPECT_EQ(0, sv->tx_err);
	EXPECT_EQ(0, cl->sent_errs);
	EXPECT_EQ(0u, Stats(sn).rx_bufs_held);
	EXPECT_EQ(0u, Stats(cn).rx_bufs_held);
	EXPECT_EQ(n, Stats(sn).bytes_in);
	EXPECT_EQ(n, Stats(cn).bytes_in);
	// Well over 32 MiB / 64 KiB receives means buffers were recycled.
	EXPECT_GE(Stats(sn).recvs, n / 65536);
}

// conns_max accepted, the next connection is reset by the full server, and
// a client backend at its own conns_max refuses a new connect with -ENOBUFS.
// Closing everything returns every slot, and the pool can be filled again.
TEST_P(Net, ConnectionLimitThenRefusedCleanly)
{
	const uint32_t N = 24;
	km_net_config scfg = Cfg(), ccfg = Cfg();
	scfg.conns_max = N;
	ccfg.conns_max = N + 1;
	km_net *sn = Make(scfg), *cn = Make(ccfg);
	Server *srv = Listen(sn);
	uint16_t port = km_net_listener_port(srv->l);
	std::vector<Conn *> cls;
	for (uint32_t i = 0; i < N; i++)
		cls.push_back(Connect(cn, port));
	ASSERT_TRUE(Until([&] {
		return srv->conns.size() == N &&
		       std::all_of(cls.begin(), cls.end(),
				   [](Conn *c) { return c->connects == 1; });
	}));
	for (Conn *c : cls)
		ASSERT_EQ(0, c->connect_res);
	EXPECT_EQ(N, Stats(sn).conns_used);
	// Every one works: one byte each way.
	static const char one = 'x';
	for (Conn *c : cls) {
		iovec iov = {(void *)&one, 1};
		ASSERT_EQ(0, km_net_send(c->c, &iov, 1, nullptr, nullptr));
	}
	ASSERT_TRUE(Until([&] {
		return std::all_of(srv->conns.begin(), srv->conns.end(),
				   [](auto &s) { return s->text == "x"; });
	}));
	// One more: the kernel completes the handshake, the server resets it.
	Conn *extra = Connect(cn, port);
	ASSERT_TRUE(Until([&] {
		return extra->closes == 1 ||
		       (extra->connects == 1 && extra->connect_res != 0);
	}));
	int code = extra->closes == 1 ? extra->close_reason
				      : extra->connect_res;
	EXPECT_EQ(-ECONNRESET, code);
	EXPECT_EQ(1u, Stats(sn).accepts_refused);
	EXPECT_EQ(N, Stats(sn).conns_used);
	EXPECT_EQ(N, Stats(sn).accepts);
	// Client side: N open, the extra slot back; fill it (towards a plain
	// listener, so the full server sees nothing) and try one more.
	uint16_t pport;
	int plfd = PlainListen(&pport);
	Conn *fill = Connect(cn, pport);
	Connect(cn, pport, {}, -ENOBUFS);
	EXPECT_EQ(N + 1, Stats(cn).conns_used);
	km_net_abort(fill->c);
	ASSERT_TRUE(Until([&] { return fill->connects == 1; }));
	close(plfd);
	// Graceful close of all: both sides report 0 once, pools empty.
	for (Conn *c : cls)
		ASSERT_EQ(0, km_net_close(c->c));
	ASSERT_TRUE(Until([&] {
		return Stats(sn).conns_used == 0 && Stats(cn).conns_used == 0;
	}));
	for (Conn *c : cls) {
		EXPECT_EQ(1, c->closes);
		EXPECT_EQ(0, c->close_reason);
	}
	for (auto &s : srv->conns) {
		EXPECT_EQ(1, s->closes);
		EXPECT_EQ(0, s->close_reason);
	}
	EXPECT_EQ(0u, Stats(sn).rx_bufs_held);
	// The slots are reusable: N again.
	size_t before = srv->conns.size();
	std::vector<Conn *> again;
	for (uint32_t i = 0; i < N; i++)
		again.push_back(Connect(cn, port));
	ASSERT_TRUE(Until([&] { return srv->conns.size() == before + N; }));
	EXPECT_EQ(1u, Stats(sn).accepts_refused);
}

// The consumer holds every receive buffer: reception stops (nothing more
// is read, the sender's TCP window closes), then resumes when the buffers
// come back, with every byte delivered once and in order.
TEST_P(Net, HeldBuffersStallReceptionThenResume)
{
	km_net_config scfg = Cfg();
	scfg.rx_buf_count = 8;
	scfg.rx_buf_bytes = 4096;
	km_net *sn = Make(scfg), *cn = Make();
	const size_t n = 16 * kMiB;
	auto data = Pattern(n, 3);
	ConnOpts so;
	so.keep_text = false;
	so.verify = true;
	so.seed = 3;
	so.hold_all = true;
	Server *srv = Listen(sn, so);
	auto pr = Pair(cn, srv);
	Conn *cl = pr.first, *sv = pr.second;
	ASSERT_NE(nullptr, sv);
	cl->tx = &data;
	cl->PumpTx();
	ASSERT_TRUE(Until([&] {
		return Stats(sn).rx_bufs_held == 8 && Stats(sn).rx_stalls >= 1;
	}));
	uint64_t in = Stats(sn).bytes_in;
	EXPECT_EQ(8u * 4096, in);
	for (int i = 0; i < 40; i++)
		Pump();
	EXPECT_EQ(in, Stats(sn).bytes_in) << "read without a free buffer";
	EXPECT_EQ(8u, sv->held.size());
	EXPECT_LT(CStats(cl).bytes_out, n) << "sender was not held back";
	EXPECT_GE(CStats(sv).rx_stalls, 1u);
	// Release (shuffled) and let it flow.
	sv->o.hold_all = false;
	sv->ReleaseAll();
	ASSERT_TRUE(Until([&] { return sv->rx_off == n; }));
	sv->ReleaseAll();
	EXPECT_EQ(-1, sv->rx_bad);
	EXPECT_EQ(-1, sv->held_bad);
	EXPECT_EQ(n, Stats(sn).bytes_in);
	ASSERT_TRUE(Until([&] { return cl->sent_bytes == (int64_t)n; }));
	EXPECT_EQ(0u, Stats(sn).rx_bufs_held);
}

// km_net_recv_pause: a paused connection takes nothing more from the pool
// while another on the same backend is read at full speed; resumed, its
// bytes arrive whole and in order, and its peer's FIN is then seen.
TEST_P(Net, PausedConnectionIsNotReadOthersAre)
{
	km_net *sn = Make(), *cn = Make();
	const size_t n = 8 * kMiB;
	auto data = Pattern(n, 5);
	ConnOpts so;
	so.keep_text = false;
	so.verify = true;
	so.seed = 5;
	Server *srv = Listen(sn, so);
	auto a = Pair(cn, srv), b = Pair(cn, srv);
	ASSERT_NE(nullptr, a.second);
	ASSERT_NE(nullptr, b.second);
	ASSERT_EQ(0, km_net_recv_pause(a.second->c, true));
	a.first->tx = &data;
	b.first->tx = &data;
	a.first->PumpTx();
	b.first->PumpTx();
	ASSERT_TRUE(Until([&] { return b.second->rx_off == n; }));
	// Whatever reached a before the pause landed, nothing after.
	uint64_t got = a.second->rx_off;
	for (int i = 0; i < 40; i++)
		Pump();
	EXPECT_EQ(got, a.second->rx_off) << "read while paused";
	EXPECT_LT(got, n / 2);
	EXPECT_LT(CStats(a.first).bytes_out, n) << "sender not held back";
	ASSERT_EQ(0, km_net_recv_pause(a.second->c, false));
	ASSERT_TRUE(Until([&] { return a.second->rx_off == n; }));
	EXPECT_EQ(-1, a.second->rx_bad);
	EXPECT_EQ(-1, b.second->rx_bad);
	EXPECT_EQ(0, a.second->closes);
	ASSERT_TRUE(Until([&] { return a.first->sent_bytes == (int64_t)n; }));
	ASSERT_EQ(0, km_net_close(a.first->c));
	ASSERT_TRUE(Until([&] { return a.second->closes == 1; }));
	EXPECT_EQ(0, a.second->close_reason);
}

// A port with a bound socket that does not listen answers RST: on_connect
// gets -ECONNREFUSED, no on_close follows, and the slot is free again.
TEST_P(Net, ConnectToClosedPortIsRefused)
{
	km_net *cn = Make();
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sockaddr_in sa{};
	socklen_t len = sizeof(sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT_EQ(0, bind(fd, (sockaddr *)&sa, sizeof(sa)));
	ASSERT_EQ(0, getsockname(fd, (sockaddr *)&sa, &len));
	Conn *cl = Connect(cn, ntohs(sa.sin_port));
	ASSERT_TRUE(Until([&] { return cl->connects == 1; }));
	EXPECT_EQ(-ECONNREFUSED, cl->connect_res);
	for (int i = 0; i < 5; i++)
		Pump(1);
	EXPECT_EQ(0, cl->closes);
	EXPECT_EQ(1u, Stats(cn).connect_errors);
	EXPECT_EQ(0u, Stats(cn).conns_used);
	close(fd);
}

// A listener whose accept queue is full drops SYNs: connect_timeout_ms turns
// that into -ETIMEDOUT.
TEST_P(Net, ConnectTimeout)
{
	km_net_config cfg = Cfg();
	cfg.connect_timeout_ms = 300;
	km_net *cn = Make(cfg);
	uint16_t port;
	int lfd = PlainListen(&port, 0);
	int filler = PlainConnect(port); // fills the backlog of 0 (+1)
	auto t0 = std::chrono::steady_clock::now();
	Conn *cl = Connect(cn, port);
	ASSERT_TRUE(Until([&] { return cl->connects == 1; }));
	auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
		std::chrono::steady_clock::now() - t0).count();
	EXPECT_EQ(-ETIMEDOUT, cl->connect_res);
	EXPECT_GE(ms, 250);
	EXPECT_EQ(0u, Stats(cn).conns_used);
	close(filler);
	close(lfd);
}

// A plain peer writes and closes: the bytes come first, then on_close(0)
// exactly once, and the slot returns to the pool.
TEST_P(Net, PeerCloseReportedOnce)
{
	km_net *sn = Make();
	Server *srv = Listen(sn);
	int fd = PlainConnect(km_net_listener_port(srv->l));
	ASSERT_TRUE(WriteAll(fd, (const uint8_t *)"goodbye", 7));
	close(fd);
	ASSERT_TRUE(Until([&] {
		return srv->Last() != nullptr && srv->Last()->closes == 1;
	}));
	Conn *sv = srv->Last();
	for (int i = 0; i < 10; i++)
		Pump(1);
	EXPECT_EQ(1, sv->closes);
	EXPECT_EQ(0, sv->close_reason);
	EXPECT_EQ("goodbye", sv->text);
	EXPECT_TRUE(sv->closed_after_data_checked);
	EXPECT_EQ(0u, Stats(sn).conns_used);
	EXPECT_EQ(1u, Stats(sn).closes);
	EXPECT_EQ(0u, Stats(sn).resets);
}

// A plain peer closes with SO_LINGER 0 (RST): on_close(-ECONNRESET) once.
TEST_P(Net, PeerResetGivesEconnreset)
{
	km_net *sn = Make();
	Server *srv = Listen(sn);
	int fd = PlainConnect(km_net_listener_port(srv->l));
	ASSERT_TRUE(WriteAll(fd, (const uint8_t *)"r", 1));
	ASSERT_TRUE(Until([&] {
		return srv->Last() != nullptr && srv->Last()->text == "r";
	}));
	SetLingerZero(fd);
	close(fd);
	Conn *sv = srv->Last();
	ASSERT_TRUE(Until([&] { return sv->closes == 1; }));
	for (int i = 0; i < 10; i++)
		Pump(1);
	EXPECT_EQ(1, sv->closes);
	EXPECT_EQ(-ECONNRESET, sv->close_reason);
	EXPECT_EQ(1u, Stats(sn).resets);
	EXPECT_EQ(0u, Stats(sn).conns_used);
}

// Graceful close against a plain reader: queued sends are flushed before the
// FIN, later sends answer -EPIPE, the reader sees every byte then EOF, and
// on_close(0) comes after every send callback.
TEST_P(Net, GracefulCloseFlushesThenFin)
{
	km_net *cn = Make();
	uint16_t port;
	int lfd = PlainListen(&port);
	const size_t n = 3 * kMiB;
	auto data = Pattern(n, 11);
	Conn *cl = Connect(cn, port);
	ASSERT_TRUE(Until([&] { return cl->connects == 1; }));
	ASSERT_EQ(0, cl->connect_res);
	int fd = accept(lfd, nullptr, nullptr);
	ASSERT_GE(fd, 0);
	PlainReader rd;
	rd.Start(fd, 11);
	cl->tx = &data;
	cl->PumpTx();
	ASSERT_TRUE(cl->tx_off == n) << "all queued before the close";
	km_net_conn *c = cl->c;
	ASSERT_EQ(0, km_net_close(c));
	EXPECT_EQ(-EALREADY, km_net_close(c));
	iovec iov = {(void *)"late", 4};
	EXPECT_EQ(-EPIPE, km_net_send(c, &iov, 1, nullptr, nullptr));
	ASSERT_TRUE(Until([&] { return rd.done.load(); }));
	EXPECT_EQ(n, rd.got.load());
	EXPECT_EQ(-1, rd.bad.load());
	EXPECT_EQ(0, rd.end_errno.load()) << "EOF, not an error";
	close(fd); // the peer's FIN completes our close
	ASSERT_TRUE(Until([&] { return cl->closes == 1; }));
	EXPECT_EQ(0, cl->close_reason);
	EXPECT_EQ((int64_t)n, cl->sent_bytes);
	EXPECT_EQ(0, cl->sent_errs);
	EXPECT_EQ(0u, Stats(cn).conns_used);
	close(lfd);
}

// The peer never sends its FIN: the graceful close gives up after
// close_timeout_ms and resets (-ETIMEDOUT).
TEST_P(Net, GracefulCloseTimesOut)
{
	km_net_config cfg = Cfg();
	cfg.close_timeout_ms = 200;
	km_net *cn = Make(cfg);
	uint16_t port;
	int lfd = PlainListen(&port); // handshake by the kernel, no accept
	Conn *cl = Connect(cn, port);
	ASSERT_TRUE(Until([&] { return cl->connects == 1; }));
	ASSERT_EQ(0, cl->connect_res);
	ASSERT_EQ(0, km_net_close(cl->c));
	ASSERT_TRUE(Until([&] { return cl->closes == 1; }));
	EXPECT_EQ(-ETIMEDOUT, cl->close_reason);
	EXPECT_EQ(0u, Stats(cn).conns_used);
	close(lfd);
}

// km_net_abort on an open connection resets it (the plain peer reads
// ECONNRESET) and reports -ECONNABORTED; while connecting it ends the open
// with on_connect(-ECONNABORTED) and fails the queued send with -ECANCELED.
TEST_P(Net, AbortResetsPeerAndCancelsSends)
{
	km_net *cn = Make();
	uint16_t port;
	int lfd = PlainListen(&port);
	Conn *cl = Connect(cn, port);
	ASSERT_TRUE(Until([&] { return cl->connects == 1; }));
	int fd = accept(lfd, nullptr, nullptr);
	ASSERT_GE(fd, 0);
	PlainReader rd;
	rd.Start(fd, 0);
	km_net_abort(cl->c);
	ASSERT_TRUE(Until([&] { return cl->closes == 1 && rd.done.load(); }));
	EXPECT_EQ(-ECONNABORTED, cl->close_reason);
	EXPECT_EQ(ECONNRESET, rd.end_errno.load());
	close(fd);

	Conn *early = Connect(cn, port);
	iovec iov = {(void *)"queued", 6};
	ASSERT_EQ(0, km_net_send(early->c, &iov, 1, OnSent, early));
	km_net_abort(early->c);
	ASSERT_TRUE(Until([&] { return early->connects == 1; }));
	EXPECT_EQ(-ECONNABORTED, early->connect_res);
	ASSERT_EQ(1u, early->sent_res.size());
	EXPECT_EQ(-ECANCELED, early->sent_res[0]);
	for (int i = 0; i < 5; i++)
		Pump(1);
	EXPECT_EQ(0, early->closes);
	EXPECT_EQ(0u, Stats(cn).conns_used);
	close(lfd);
}

// The bounded send queue: send_queue_max sends or send_iov_max iovecs, then
// -EAGAIN until a completion frees room; oversize or empty sends -EINVAL.
TEST_P(Net, SendQueueFullGivesEagain)
{
	km_net_config ccfg = Cfg();
	ccfg.send_queue_max = 4;
	ccfg.send_iov_max = 8;
	km_net *sn = Make(), *cn = Make(ccfg);
	Server *srv = Listen(sn);
	auto pr = Pair(cn, srv);
	Conn *cl = pr.first, *sv = pr.second;
	ASSERT_NE(nullptr, sv);
	static const char msg[] = "0123456789";
	iovec one = {(void *)msg, 10};
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(0, km_net_send(cl->c, &one, 1, OnSent, cl));
	EXPECT_EQ(-EAGAIN, km_net_send(cl->c, &one, 1, OnSent, cl));
	EXPECT_EQ(4u, CStats(cl).send_queued);
	ASSERT_TRUE(Until([&] { return cl->sent_cbs == 4; }));
	iovec eight[9];
	for (auto &v : eight)
		v = one;
	ASSERT_EQ(0, km_net_send(cl->c, eight, 8, OnSent, cl));
	EXPECT_EQ(-EAGAIN, km_net_send(cl->c, &one, 1, OnSent, cl))
		<< "iovec ring full";
	EXPECT_EQ(-EINVAL, km_net_send(cl->c, eight, 9, OnSent, cl));
	iovec empty = {(void *)msg, 0};
	EXPECT_EQ(-EINVAL, km_net_send(cl->c, &empty, 1, OnSent, cl));
	EXPECT_EQ(2u, Stats(cn).send_queue_full);
	ASSERT_TRUE(Until([&] { return sv->text.size() == 120; }));
	EXPECT_EQ(std::string(120 / 10, 'x').size() * 10, sv->text.size());
	for (size_t i = 0; i < 12; i++)
		EXPECT_EQ(std::string(msg, 10), sv->text.substr(i * 10, 10));
	EXPECT_EQ(5, cl->sent_cbs);
	EXPECT_EQ(0, cl->sent_errs);
}

// One 24 MiB send into a stalled receiver: the kernel takes it in parts
// (short sends, resubmitted), the callback reports the full size once, and
// the receiver gets every byte in order.
TEST_P(Net, ShortSendsAreCompleted)
{
	km_net_config scfg = Cfg();
	scfg.rx_buf_count = 8;
	scfg.rx_buf_bytes = 4096;
	km_net *sn = Make(scfg), *cn = Make();
	const size_t n = 24 * kMiB;
	auto data = Pattern(n, 99);
	ConnOpts so;
	so.keep_text = false;
	so.verify = true;
	so.seed = 99;
	so.hold_all = true;
	Server *srv = Listen(sn, so);
	auto pr = Pair(cn, srv);
	Conn *cl = pr.first, *sv = pr.second;
	ASSERT_NE(nullptr, sv);
	cl->tx = &data;
	cl->tx_chunk = n; // one send of three iovecs
	cl->PumpTx();
	ASSERT_TRUE(Until([&] { return CStats(cl).short_sends >= 1; }));
	EXPECT_EQ(0, cl->sent_cbs);
	sv->o.hold_all = false;
	sv->ReleaseAll();
	ASSERT_TRUE(Until([&] { return cl->sent_cbs == 1 && sv->rx_off == n; }));
	ASSERT_EQ(1u, cl->sent_res.size());
	EXPECT_EQ((int)n, cl->sent_res[0]);
	EXPECT_EQ(-1, sv->rx_bad);
	EXPECT_GE(Stats(cn).short_sends, 1u);
	EXPECT_EQ(n, Stats(cn).bytes_out);
}

// Interoperability with plain blocking sockets. A plain client streams 4 MiB
// to our server, which echoes each receive buffer zero-copy (the send reads
// the receive buffer; its callback releases it); a second thread reads the
// echo. Then our client reads 4 MiB from a plain server that writes and
// closes: all bytes arrive before on_close(0).
TEST_P(Net, InteropWithPlainSockets)
{
	km_net_config scfg = Cfg();
	scfg.send_queue_max = scfg.rx_buf_count; // an echo never finds it full
	km_net *sn = Make(scfg);
	ConnOpts so;
	so.keep_text = false;
	so.echo = true;
	Server *srv = Listen(sn, so);
	const size_t n = 4 * kMiB;
	auto data = Pattern(n, 5);
	int fd = PlainConnect(km_net_listener_port(srv->l));
	PlainReader rd;
	rd.Start(fd, 5, n);
	std::thread wr([&] {
		std::mt19937 rng(1);
		size_t off = 0;
		while (off < n) {
			size_t k = std::min(n - off, (size_t)(rng() % 100000) + 1);
			if (!WriteAll(fd, data.data() + off, k))
				break;
			off += k;
		}
	});
	ASSERT_TRUE(Until([&] { return rd.done.load(); }));
	wr.join();
	rd.Join();
	EXPECT_EQ(n, rd.got.load());
	EXPECT_EQ(-1, rd.bad.load());
	close(fd);
	ASSERT_TRUE(Until([&] { return srv->Last()->closes == 1; }));
	EXPECT_EQ(0, srv->Last()->close_reason);
	EXPECT_EQ(0, srv->Last()->tx_err);
	EXPECT_EQ(0u, Stats(sn).rx_bufs_held);

	// Our client, a plain server.
	uint16_t port;
	int lfd = PlainListen(&port);
	ConnOpts co;
	co.keep_text = false;
	co.verify = true;
	co.seed = 6;
	Conn *cl = Connect(sn, port, co);
	ASSERT_TRUE(Until([&] { return cl->connects == 1; }));
	ASSERT_EQ(0, cl->connect_res);
	int sfd = accept(lfd, nullptr, nullptr);
	ASSERT_GE(sfd, 0);
	auto down = Pattern(n, 6);
	std::thread wr2([&] {
		WriteAll(sfd, down.data(), n);
		close(sfd);
	});
	ASSERT_TRUE(Until([&] { return cl->closes == 1; }));
	wr2.join();
	EXPECT_EQ(n, cl->rx_off);
	EXPECT_EQ(-1, cl->rx_bad);
	EXPECT_EQ(0, cl->close_reason);
	EXPECT_TRUE(cl->closed_after_data_checked);
	close(lfd);
}

// Destroy with live connections and a listener: everything is aborted,
// every connection reports once, nothing stays in flight on the ring.
TEST_P(Net, DestroyAbortsEverything)
{
	km_net *sn = Make(), *cn = Make();
	Server *srv = Listen(sn);
	auto pr = Pair(cn, srv);
	Conn *cl = pr.first, *sv = pr.second;
	ASSERT_NE(nullptr, sv);
	km_net_destroy(cn);
	nets.erase(std::find(nets.begin(), nets.end(), cn));
	EXPECT_EQ(1, cl->closes);
	EXPECT_EQ(-ECONNABORTED, cl->close_reason);
	ASSERT_TRUE(Until([&] { return sv->closes == 1; }));
	EXPECT_EQ(-ECONNRESET, sv->close_reason);
	km_net_unlisten(srv->l);
	km_net_destroy(sn);
	nets.clear();
	EXPECT_EQ(0u, km_uring_busy(&u));
}

INSTANTIATE_TEST_SUITE_P(Rx, Net,
			 ::testing::Values(KM_NET_RX_AUTO, KM_NET_RX_SINGLE),
			 [](const ::testing::TestParamInfo<km_net_rx_mode> &i) {
				 return std::string(i.param == KM_NET_RX_AUTO
							    ? "Auto"
							    : "SingleShot");
			 });

// ---- without a parameter ---------------------------------------------------

class NetApi : public ::testing::Test {
protected:
	km_uring u{};
	void SetUp() override
	{
		if (km_uring_init(&u, 64) < 0)
			GTEST_SKIP() << "io_uring unavailable";
	}
	void TearDown() override
	{
		if (!IsSkipped())
			km_uring_exit(&u);
	}
	km_net_config Cfg()
	{
		km_net_config c{};
		c.kind = KM_NET_KERNEL;
		c.conns_max = 4;
		c.listeners_max = 1;
		c.rx_buf_count = 8;
		c.rx_buf_bytes = 4096;
		c.send_queue_max = 4;
		c.send_iov_max = 8;
		c.uring = &u;
		return c;
	}
};

// This kernel (6.x) takes multishot recv with a provided buffer ring, and two
// backends on one ring each get their own buffer group.
TEST_F(NetApi, MultishotOnThisKernel)
{
	utsname un;
	ASSERT_EQ(0, uname(&un));
	if (atoi(un.release) < 6)
		GTEST_SKIP() << "kernel " << un.release << " predates it";
	km_net *a = nullptr, *b = nullptr;
	km_net_config cfg = Cfg();
	ASSERT_EQ(0, km_net_create(&cfg, &a));
	ASSERT_EQ(0, km_net_create(&cfg, &b));
	km_net_stats sa, sb;
	km_net_get_stats(a, &sa);
	km_net_get_stats(b, &sb);
	EXPECT_TRUE(sa.rx_multishot);
	EXPECT_TRUE(sb.rx_multishot);
	EXPECT_EQ(8u, sa.rx_bufs_total);
	km_net_destroy(a);
	km_net_destroy(b);
}

TEST_F(NetApi, BadConfigAndArguments)
{
	km_net *n = nullptr;
	km_net_config c = Cfg();
	c.conns_max = 0;
	EXPECT_EQ(-EINVAL, km_net_create(&c, &n));
	c = Cfg();
	c.rx_buf_count = 65536;
	EXPECT_EQ(-EINVAL, km_net_create(&c, &n));
	c = Cfg();
	c.rx_buf_bytes = 100;
	EXPECT_EQ(-EINVAL, km_net_create(&c, &n));
	c = Cfg();
	c.send_iov_max = 2000;
	EXPECT_EQ(-EINVAL, km_net_create(&c, &n));
	c = Cfg();
	c.uring = nullptr;
	EXPECT_EQ(-EINVAL, km_net_create(&c, &n));
	c = Cfg();
	c.kind = KM_NET_DPDK; /* no dpdk.port, no address */
	EXPECT_EQ(-EINVAL, km_net_create(&c, &n));

	c = Cfg();
	ASSERT_EQ(0, km_net_create(&c, &n));
	km_net_conn *conn = nullptr;
	km_net_listener *l = nullptr, *l2 = nullptr;
	EXPECT_EQ(-EINVAL, km_net_connect(n, "localhost", 1, &kHandler,
					  nullptr, &conn));
	EXPECT_EQ(-EINVAL, km_net_listen(n, "::1", 0, &kHandler, nullptr, &l));
	ASSERT_EQ(0, km_net_listen(n, "127.0.0.1", 0, &kHandler, nullptr, &l));
	EXPECT_EQ(-ENOBUFS, km_net_listen(n, "127.0.0.1", 0, &kHandler,
					  nullptr, &l2));
	uint16_t port = km_net_listener_port(l);
	km_net_unlisten(l);
	km_net_destroy(n);
	// The port is free again: a plain socket can take it (SO_REUSEADDR).
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sockaddr_in sa{};
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	EXPECT_EQ(0, bind(fd, (sockaddr *)&sa, sizeof(sa)));
	close(fd);
}

} // namespace
