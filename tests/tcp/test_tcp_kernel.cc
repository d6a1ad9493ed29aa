// Goal: the TCP endpoint interoperates with a real, independent TCP: the
// Linux kernel's. It resolves the kernel's MAC by ARP, connects, sends a
// request, and receives 64 MiB with random loss, reordering and
// duplication injected in both directions, byte for byte; a consumer that
// holds its buffers closes the window on the kernel and reopens it; the
// kernel's RST and a refused connect are reported with the right codes.
// Method: a TAP device in a private network namespace (unshare on a
// dedicated thread, so the rest of the process keeps its network); the
// kernel side is an ordinary listening socket on the TAP's address, served
// by a thread. The test thread pumps frames between the TAP fd and
// km_tcp_input()/ops->tx, with a real monotonic clock, under a deadline.
// Skips (saying why) without CAP_SYS_ADMIN/CAP_NET_ADMIN or /dev/net/tun.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/net/tcp/tcp.h"
#include "tcp_rig.h"

using namespace tcptest;

namespace {

constexpr uint32_t kKernIp = IP(10, 77, 0, 1);
constexpr uint32_t kMyIp = IP(10, 77, 0, 2);
constexpr uint16_t kPort = 9099;
constexpr uint32_t kBufBytes = 2048;

uint64_t MonoMs()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

// Loss, duplication and reordering of one direction, from a seeded RNG.
struct Impair {
	double loss = 0, dup = 0, reorder = 0;
	std::mt19937 rng{ 1 };
	bool Chance(double p)
	{
		return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < p;
	}
};

// The kernel's end: accept one connection, read the request, answer.
struct Server {
	int lfd = -1;
	std::thread th;
	std::atomic<bool> request_ok{ false };
	std::atomic<uint64_t> sent{ 0 };
	std::atomic<int> cfd{ -1 };
	// Unblock a server stuck sending to a peer that stopped reading.
	void Abort()
	{
		int fd = cfd.load();
		if (fd >= 0)
			shutdown(fd, SHUT_RDWR);
	}
	void Start(size_t req_len, uint64_t total, uint32_t seed, bool reset)
	{
		th = std::thread(&Server::Run, this, req_len, total, seed, reset);
	}
	void Run(size_t req_len, uint64_t total, uint32_t seed, bool reset);
	void Join()
	{
		if (th.joinable())
			th.join();
	}
};

void Server::Run(size_t req_len, uint64_t total, uint32_t seed, bool reset)
{
	pollfd p = { lfd, POLLIN, 0 };
	if (poll(&p, 1, 20000) != 1)
		return;
	int fd = accept(lfd, nullptr, nullptr);
	if (fd < 0)
		return;
	cfd = fd;
	Bytes req(req_len);
	size_t got = 0;
	while (got < req_len) {
		ssize_t n = recv(fd, req.data() + got, req_len - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	request_ok = got == req_len && req == Pattern(req_len, 99);
	for (uint64_t off = 0; off < total;) {
		size_t n = (size_t)std::min<uint64_t>(256 * 1024, total - off);
		Bytes chunk = Pattern(n, seed, off);
		size_t w = 0;
		while (w < n) {
			ssize_t k = send(fd, chunk.data() + w, n - w, MSG_NOSIGNAL);
			if (k <= 0) {
				close(fd);
				return;
			}
			w += (size_t)k;
		}
		off += n;
		sent = off;
	}
	if (reset) {
		linger lg = { 1, 0 };
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	close(fd);
}

class KernelLink {
public:
	// Runs in the namespace thread. Empty string: ready; else why not.
	std::string Setup(const Rig::Tweak &tweak);
	~KernelLink();
	// Pump frames until done() or the deadline; false on timeout.
	bool Pump(const std::function<bool()> &done, uint64_t deadline_ms);
	void Input(uint8_t *frame, size_t len);
	int Tx(const iovec *iov, uint32_t n);

	int tap = -1;
	km_tcp_ep *ep = nullptr;
	km_tcp_config cfg;
	Impair in, out;	// kernel -> us, us -> kernel
	std::vector<Bytes> pool;
	std::vector<uint32_t> free_ids;
	std::vector<uint32_t> held;
	std::deque<std::pair<Bytes, int>> delayed;
	std::function<void(km_tcp_conn *, const km_chain *, const uint32_t *)> deliver;
	std::vector<Event> events;
	std::function<void()> tick;	// once per pump turn
	uint64_t zero_windows_sent = 0;

private:
	void InjectDelayed(bool all);
	void *mem_ = nullptr;
	km_tcp_ops ops_{};
};

int TxT(void *ctx, const iovec *iov, uint32_t n, uint32_t)
{
	return static_cast<KernelLink *>(ctx)->Tx(iov, n);
}

uint64_t NowT(void *)
{
	return MonoMs();
}

void DeliverT(void *ctx, km_tcp_conn *c, const km_chain *d, const uint32_t *ids)
{
	auto *k = static_cast<KernelLink *>(ctx);
	for (uint32_t i = 0; i < d->n_iov; i++)
		k->held.push_back(ids[i]);
	if (k->deliver)
		k->deliver(c, d, ids);
}

void EventT(void *ctx, km_tcp_conn *c, km_tcp_event ev, int res)
{
	static_cast<KernelLink *>(ctx)->events.push_back({ c, ev, res });
}

void FreeT(void *ctx, const uint32_t *ids, uint32_t n)
{
	auto *k = static_cast<KernelLink *>(ctx);
	for (uint32_t i = 0; i < n; i++)
		k->free_ids.push_back(ids[i]);
}

bool SetIfAddr(int s, const char *name, unsigned long req, uint32_t addr)
{
	ifreq ifr{};
	strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
	auto *sin = reinterpret_cast<sockaddr_in *>(&ifr.ifr_addr);
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(addr);
	return ioctl(s, req, &ifr) == 0;
}

std::string KernelLink::Setup(const Rig::Tweak &tweak)
{
	if (unshare(CLONE_NEWNET) != 0)
		return std::string("cannot create a network namespace: ") + strerror(errno);
	tap = open("/dev/net/tun", O_RDWR | O_NONBLOCK);
	if (tap < 0)
		return std::string("no /dev/net/tun: ") + strerror(errno);
	ifreq ifr{};
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	strncpy(ifr.ifr_name, "kmtcp0", IFNAMSIZ - 1);
	if (ioctl(tap, TUNSETIFF, &ifr) != 0)
		return std::string("TUNSETIFF: ") + strerror(errno);
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	bool ok = SetIfAddr(s, "kmtcp0", SIOCSIFADDR, kKernIp) &&
		  SetIfAddr(s, "kmtcp0", SIOCSIFNETMASK, 0xffffff00u);
	ifreq fl{};
	strncpy(fl.ifr_name, "kmtcp0", IFNAMSIZ - 1);
	ok = ok && ioctl(s, SIOCGIFFLAGS, &fl) == 0;
	fl.ifr_flags |= IFF_UP | IFF_RUNNING;
	ok = ok && ioctl(s, SIOCSIFFLAGS, &fl) == 0;
	close(s);
	if (!ok)
		return std::string("configuring the TAP: ") + strerror(errno);

	km_tcp_config_default(&cfg);
	memcpy(cfg.mac, kOurMac, 6);
	cfg.ip = kMyIp;
	cfg.conns_max = 4;
	cfg.bufs_max = 8192;
	cfg.rcv_buf_bytes = 4u << 20;
	cfg.ooo_max = 512;
	cfg.isn_secret = 0x5eed;
	if (tweak)
		tweak(cfg);
	pool.assign(cfg.bufs_max, Bytes(kBufBytes));
	for (uint32_t i = cfg.bufs_max; i-- > 0;)
		free_ids.push_back(i);
	ops_.tx = TxT;
	ops_.now_ms = NowT;
	ops_.deliver = DeliverT;
	ops_.event = EventT;
	ops_.buf_free = FreeT;
	ssize_t need = km_tcp_memsize(&cfg);
	if (need < 0)
		return "memsize";
	mem_ = aligned_alloc(64, ((size_t)need + 63) & ~(size_t)63);
	if (km_tcp_init(mem_, (size_t)need, &cfg, &ops_, this, &ep) != 0)
		return "init";
	return "";
}

KernelLink::~KernelLink()
{
	if (tap >= 0)
		close(tap);
	free(mem_);
}

int KernelLink::Tx(const iovec *iov, uint32_t n)
{
	uint8_t f[kBufBytes * 8];
	size_t len = 0;
	for (uint32_t i = 0; i < n; i++) {
		memcpy(f + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	if (len >= 54 && f[12] == 0x08 && f[13] == 0x00 && f[34 + 14] == 0 &&
	    f[34 + 15] == 0 && (f[34 + 13] & 0x04) == 0)
		zero_windows_sent++;
	if (out.Chance(out.loss))
		return 0;
	int copies = out.Chance(out.dup) ? 2 : 1;
	for (int k = 0; k < copies; k++)
		if (write(tap, f, len) != (ssize_t)len)
			return -errno;
	return 0;
}

void KernelLink::Input(uint8_t *frame, size_t len)
{
	if (free_ids.empty()) {
		ADD_FAILURE() << "pool empty";
		return;
	}
	uint32_t id = free_ids.back();
	free_ids.pop_back();
	memcpy(pool[id].data(), frame, len);
	iovec v = { pool[id].data(), len };
	km_chain ch = { &v, 1 };
	km_tcp_input(ep, &ch, &id, 0);
}

void KernelLink::InjectDelayed(bool all)
{
	for (auto it = delayed.begin(); it != delayed.end();) {
		if (all || --it->second <= 0) {
			Input(it->first.data(), it->first.size());
			it = delayed.erase(it);
		} else {
			++it;
		}
	}
}

bool KernelLink::Pump(const std::function<bool()> &done, uint64_t deadline_ms)
{
	uint8_t f[kBufBytes];
	while (!done()) {
		uint64_t now = MonoMs();
		if (now >= deadline_ms)
			return false;
		uint64_t next = km_tcp_next_timer_ms(ep);
		int wait = next <= now ? 0 : (int)std::min<uint64_t>(next - now, 5);
		pollfd p = { tap, POLLIN, 0 };
		int pr = poll(&p, 1, wait);
		int n = 0;
		for (; pr > 0 && n < 32; n++) {
			ssize_t len = read(tap, f, sizeof(f));
			if (len <= 0)
				break;
			if (in.Chance(in.loss))
				continue;
			if (in.Chance(in.reorder)) {
				delayed.push_back({ Bytes(f, f + len), 1 + (int)(in.rng() % 4) });
				continue;
			}
			Input(f, (size_t)len);
			if (in.Chance(in.dup))
				Input(f, (size_t)len);
			InjectDelayed(false);
		}
		if (n == 0)
			InjectDelayed(true);
		km_tcp_input_burst_end(ep);
		km_tcp_poll(ep);
		if (tick)
			tick();
	}
	return true;
}

// Run body in a thread that owns a fresh network namespace.
void InNamespace(const Rig::Tweak &tweak,
		 const std::function<void(KernelLink &)> &body, std::string *skip)
{
	std::thread t([&] {
		KernelLink k;
		*skip = k.Setup(tweak);
		if (skip->empty())
			body(k);
	});
	t.join();
}

int Listen(uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(kKernIp);
	if (bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0 ||
	    listen(fd, 4) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

// Stream checker: every delivered byte against the pattern.
struct Checker {
	uint32_t seed;
	uint64_t off = 0;
	bool ok = true;
	void Check(const km_chain *d)
	{
		for (uint32_t i = 0; i < d->n_iov; i++) {
			size_t n = d->iov[i].iov_len;
			Bytes want = Pattern(n, seed, off);
			if (memcmp(want.data(), d->iov[i].iov_base, n) != 0)
				ok = false;
			off += n;
		}
	}
};

bool HasEv(const KernelLink &k, km_tcp_event ev, int res)
{
	for (auto &e : k.events)
		if (e.ev == ev && e.res == res)
			return true;
	return false;
}

// What the endpoint saw, for a transfer that did not finish.
void DumpState(KernelLink &k, km_tcp_conn *c)
{
	km_tcp_stats st;
	km_tcp_conn_info ci;
	km_tcp_get_stats(k.ep, &st);
	km_tcp_conn_get_info(c, &ci);
	fprintf(stderr, "frames in %lu out %lu, ooo %lu, dup bytes %lu, state %s, "
		"rcv_wnd %u, held %u, ooo pieces %u\n",
		(unsigned long)st.frames_in, (unsigned long)st.frames_out,
		(unsigned long)st.tcp.ooo_segs, (unsigned long)st.tcp.dup_bytes,
		km_tcp_state_name(ci.state), ci.rcv_wnd, ci.rx_held, ci.ooo_pieces);
	for (int d = 0; d < KM_TCP_DROP_COUNT; d++)
		if (st.tcp.drops[d])
			fprintf(stderr, "  drop %s: %lu\n",
				km_tcp_drop_name((km_tcp_drop)d),
				(unsigned long)st.tcp.drops[d]);
}

// Connect, send the 100-byte request, receive total bytes, close.
void Transfer(KernelLink &k, uint64_t total, uint32_t seed,
	      uint64_t hold_bytes, km_tcp_conn **out_c)
{
	int lfd = Listen(kPort);
	ASSERT_GE(lfd, 0) << strerror(errno);
	Server srv;
	srv.lfd = lfd;
	srv.Start(100, total, seed, false);
	Checker chk{ seed };
	uint64_t held_bytes = 0, last_ms = 0;
	auto release = [&] {
		std::vector<uint32_t> ids;
		ids.swap(k.held);
		km_tcp_release(k.ep, ids.data(), (uint32_t)ids.size());
		held_bytes = 0;
	};
	k.deliver = [&](km_tcp_conn *, const km_chain *d, const uint32_t *) {
		chk.Check(d);
		for (uint32_t i = 0; i < d->n_iov; i++)
			held_bytes += d->iov[i].iov_len;
		last_ms = MonoMs();
		if (held_bytes >= hold_bytes)
			release();
	};
	// A slow consumer: it keeps everything until hold_bytes or until
	// nothing came for 20 ms (the window is shut), then lets go.
	k.tick = [&] {
		if (held_bytes > 0 && MonoMs() >= last_ms + 20)
			release();
	};
	km_tcp_conn *c = nullptr;
	ASSERT_EQ(0, km_tcp_connect(k.ep, kKernIp, kPort, nullptr, &c));
	*out_c = c;
	Bytes req = Pattern(100, 99);
	iovec v = { req.data(), req.size() };
	ASSERT_EQ(100, km_tcp_send(c, &v, 1));
	uint64_t deadline = MonoMs() + 25000;
	bool fin = k.Pump([&] { return HasEv(k, KM_TCP_EV_PEER_FIN, 0); }, deadline);
	EXPECT_TRUE(fin) << "received " << chk.off << " of " << total;
	EXPECT_EQ(0, km_tcp_close(c));
	EXPECT_TRUE(k.Pump([&] { return HasEv(k, KM_TCP_EV_CLOSED, 0); }, deadline));
	if (!fin)
		DumpState(k, c);
	srv.Abort();
	srv.Join();
	close(lfd);
	EXPECT_TRUE(srv.request_ok) << "the kernel got our request intact";
	EXPECT_EQ(total, chk.off);
	EXPECT_TRUE(chk.ok) << "content differs";
	release();
	k.tick = nullptr;
	k.deliver = nullptr;
	km_tcp_poll(k.ep);
	EXPECT_EQ(k.cfg.bufs_max, k.free_ids.size()) << "every buffer came back";
}

TEST(TcpKernel, Receive64MiBWithLossReorderingDuplication)
{
	std::string skip;
	km_tcp_stats st{};
	InNamespace(nullptr, [&](KernelLink &k) {
		k.in.loss = 0.003;
		k.in.dup = 0.003;
		k.in.reorder = 0.01;
		k.out.loss = 0.01;
		k.out.dup = 0.003;
		k.in.rng.seed(42);
		k.out.rng.seed(43);
		km_tcp_conn *c;
		Transfer(k, 64ull << 20, 7, 0, &c);
		km_tcp_get_stats(k.ep, &st);
	}, &skip);
	if (!skip.empty())
		GTEST_SKIP() << skip;
	EXPECT_GT(st.tcp.ooo_segs, 0u) << "reordering reached the queue";
	EXPECT_GT(st.tcp.dup_bytes, 0u) << "duplicates were trimmed";
	EXPECT_GE(st.arp_replies_out + st.arp_requests_out, 1u);
	EXPECT_EQ(1u, st.conns_opened);
	EXPECT_EQ(1u, st.conns_closed);
}

TEST(TcpKernel, SlowConsumerClosesAndReopensTheWindow)
{
	std::string skip;
	uint64_t zero = 0;
	InNamespace([](km_tcp_config &c) { c.rcv_buf_bytes = 1u << 20; },
		    [&](KernelLink &k) {
		km_tcp_conn *c;
		// Hold the whole window before releasing: it shuts, the
		// kernel probes, our release reopens it.
		Transfer(k, 16ull << 20, 8, 2u << 20, &c);
		zero = k.zero_windows_sent;
	}, &skip);
	if (!skip.empty())
		GTEST_SKIP() << skip;
	EXPECT_GT(zero, 0u) << "the window never closed";
}

TEST(TcpKernel, RefusedAndReset)
{
	std::string skip;
	InNamespace(nullptr, [&](KernelLink &k) {
		// Nobody listens on kPort + 1: the kernel answers RST.
		km_tcp_conn *c = nullptr;
		ASSERT_EQ(0, km_tcp_connect(k.ep, kKernIp, kPort + 1, nullptr, &c));
		uint64_t deadline = MonoMs() + 10000;
		EXPECT_TRUE(k.Pump([&] { return !k.events.empty(); }, deadline));
		ASSERT_FALSE(k.events.empty());
		EXPECT_EQ(KM_TCP_EV_CONNECTED, k.events[0].ev);
		EXPECT_EQ(-ECONNREFUSED, k.events[0].res);
		// A server that closes with SO_LINGER 0 resets us.
		int lfd = Listen(kPort);
		ASSERT_GE(lfd, 0);
		Server srv;
		srv.lfd = lfd;
		srv.Start(100, 4096, 3, true);
		k.deliver = [&](km_tcp_conn *, const km_chain *, const uint32_t *) {
			std::vector<uint32_t> ids;
			ids.swap(k.held);
			km_tcp_release(k.ep, ids.data(), (uint32_t)ids.size());
		};
		ASSERT_EQ(0, km_tcp_connect(k.ep, kKernIp, kPort, nullptr, &c));
		Bytes req = Pattern(100, 99);
		iovec v = { req.data(), req.size() };
		ASSERT_EQ(100, km_tcp_send(c, &v, 1));
		EXPECT_TRUE(k.Pump([&] { return HasEv(k, KM_TCP_EV_CLOSED, -ECONNRESET); },
				   deadline));
		srv.Join();
		close(lfd);
		EXPECT_TRUE(srv.request_ok);
	}, &skip);
	if (!skip.empty())
		GTEST_SKIP() << skip;
}

} // namespace
