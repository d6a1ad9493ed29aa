// The rig behind the TCP endpoint tests: see tcp_rig.h.
#include "tcp_rig.h"

#include <algorithm>
#include <cstdlib>

namespace tcptest {

const uint8_t kOurMac[6] = { 0x02, 0, 0, 0, 0, 0x01 };
const uint8_t kPeerMac[6] = { 0x02, 0, 0, 0, 0, 0x02 };
const uint8_t kGwMac[6] = { 0x02, 0, 0, 0, 0, 0xfe };
const uint8_t kBcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

namespace {

void Put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

void Put32(uint8_t *p, uint32_t v)
{
	Put16(p, (uint16_t)(v >> 16));
	Put16(p + 2, (uint16_t)v);
}

uint16_t Get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

uint32_t Get32(const uint8_t *p)
{
	return (uint32_t)Get16(p) << 16 | Get16(p + 2);
}

uint32_t RawSum(const uint8_t *p, size_t n, uint32_t s)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	return s;
}

uint16_t Fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

uint32_t PseudoSum(uint32_t src, uint32_t dst, uint16_t len)
{
	uint8_t ph[12];

	Put32(ph, src);
	Put32(ph + 4, dst);
	ph[8] = 0;
	ph[9] = 6;
	Put16(ph + 10, len);
	return RawSum(ph, 12, 0);
}

int TxTramp(void *ctx, const iovec *iov, uint32_t n, uint32_t flags)
{
	return static_cast<Rig *>(ctx)->OnTx(iov, n, flags);
}

uint64_t NowTramp(void *ctx)
{
	return static_cast<Rig *>(ctx)->now;
}

void DeliverTramp(void *ctx, km_tcp_conn *c, const km_chain *d,
		  const uint32_t *ids)
{
	static_cast<Rig *>(ctx)->OnDeliver(c, d, ids);
}

void EventTramp(void *ctx, km_tcp_conn *c, km_tcp_event ev, int res)
{
	static_cast<Rig *>(ctx)->OnEvent(c, ev, res);
}

void BufFreeTramp(void *ctx, const uint32_t *ids, uint32_t n)
{
	static_cast<Rig *>(ctx)->OnBufFree(ids, n);
}

void AcceptTramp(void *ctx, km_tcp_conn *c)
{
	static_cast<Rig *>(ctx)->OnAccept(c);
}

uint32_t IsnTramp(void *ctx, uint32_t, uint16_t, uint32_t, uint16_t)
{
	return static_cast<Rig *>(ctx)->fixed_isn;
}

} // namespace

uint16_t OracleSum(const uint8_t *p, size_t n, uint32_t start)
{
	return (uint16_t)~Fold(RawSum(p, n, start));
}

Bytes OptMss(uint16_t mss)
{
	return { 2, 4, (uint8_t)(mss >> 8), (uint8_t)mss };
}

Bytes OptWs(uint8_t shift)
{
	return { 1, 3, 3, shift };
}

Bytes OptSackPerm()
{
	return { 1, 1, 4, 2 };
}

void FixChecksums(Bytes &f)
{
	uint8_t *ip = f.data() + 14;
	uint16_t tot = Get16(ip + 2);
	uint8_t *t = ip + 20;
	uint16_t tl = (uint16_t)(tot - 20);

	Put16(ip + 10, 0);
	Put16(ip + 10, OracleSum(ip, 20));
	Put16(t + 16, 0);
	Put16(t + 16, OracleSum(t, tl,
				PseudoSum(Get32(ip + 12), Get32(ip + 16), tl)));
}

Bytes BuildTcp(const Seg &s)
{
	Bytes o = s.opts;
	while (o.size() % 4)
		o.push_back(0);
	size_t tl = 20 + o.size() + s.data.size();
	Bytes f(14 + 20 + tl, 0);
	uint8_t *ip = f.data() + 14, *t = ip + 20;

	// Byte loops: GCC 12 -Warray-bounds misjudges memcpy into f here.
	for (int k = 0; k < 6; k++) {
		f[(size_t)k] = s.dst_mac[k];
		f[(size_t)k + 6] = s.src_mac[k];
	}
	f[12] = 0x08;
	ip[0] = 0x45;
	Put16(ip + 2, (uint16_t)(20 + tl));
	Put16(ip + 6, 0x4000);
	ip[8] = 64;
	ip[9] = 6;
	Put32(ip + 12, s.src);
	Put32(ip + 16, s.dst);
	Put16(t, s.sport);
	Put16(t + 2, s.dport);
	Put32(t + 4, s.seq);
	Put32(t + 8, s.ack);
	t[12] = (uint8_t)(((20 + o.size()) / 4) << 4);
	t[13] = s.flags;
	Put16(t + 14, s.win);
	std::copy(o.begin(), o.end(), t + 20);
	std::copy(s.data.begin(), s.data.end(), t + 20 + o.size());
	FixChecksums(f);
	return f;
}

Bytes BuildArp(uint16_t op, const uint8_t *eth_dst, const uint8_t *sha,
	       uint32_t spa, const uint8_t *tha, uint32_t tpa,
	       const uint8_t *eth_src)
{
	Bytes f(60, 0);
	uint8_t *a = f.data() + 14;

	memcpy(f.data(), eth_dst, 6);
	memcpy(f.data() + 6, eth_src ? eth_src : sha, 6);
	Put16(f.data() + 12, 0x0806);
	Put16(a, 1);
	Put16(a + 2, 0x0800);
	a[4] = 6;
	a[5] = 4;
	Put16(a + 6, op);
	memcpy(a + 8, sha, 6);
	Put32(a + 14, spa);
	memcpy(a + 18, tha, 6);
	Put32(a + 24, tpa);
	return f;
}

static void ParseTcpOpts(const uint8_t *o, size_t n, Out *out)
{
	for (size_t i = 0; i < n;) {
		if (o[i] == 0)
			break;
		if (o[i] == 1) {
			i++;
			continue;
		}
		if (i + 1 >= n || o[i + 1] < 2)
			break;
		if (o[i] == 2 && o[i + 1] == 4)
			out->mss = Get16(o + i + 2);
		if (o[i] == 3 && o[i + 1] == 3)
			out->wscale = o[i + 2];
		if (o[i] == 4 && o[i + 1] == 2)
			out->sack_perm = true;
		if (o[i] == 5 && i + o[i + 1] <= n)
			for (size_t b = i + 2; b + 8 <= i + o[i + 1]; b += 8)
				out->sack.push_back({ Get32(o + b), Get32(o + b + 4) });
		i += o[i + 1];
	}
}

static void ParseTcp(const Bytes &f, Out *o)
{
	const uint8_t *ip = f.data() + 14;
	uint16_t tot = Get16(ip + 2);
	const uint8_t *t = ip + 20;
	uint16_t tl = (uint16_t)(tot - 20);
	size_t doff = (size_t)(t[12] >> 4) * 4;
	uint32_t ph;

	EXPECT_EQ(f.size(), 14u + tot) << "no padding in frames we send";
	o->src_ip = Get32(ip + 12);
	o->dst_ip = Get32(ip + 16);
	o->df = (Get16(ip + 6) & 0x4000) != 0;
	o->ttl = ip[8];
	if (o->tx_flags & KM_TCP_TX_CSUM_IP)
		o->ip_csum_ok = Get16(ip + 10) == 0;
	else
		o->ip_csum_ok = OracleSum(ip, 20) == 0;
	ph = PseudoSum(o->src_ip, o->dst_ip, tl);
	if (o->tx_flags & KM_TCP_TX_CSUM_TCP)
		o->tcp_csum_ok = Get16(t + 16) == Fold(ph);
	else
		o->tcp_csum_ok = OracleSum(t, tl, ph) == 0;
	o->sport = Get16(t);
	o->dport = Get16(t + 2);
	o->seq = Get32(t + 4);
	o->ack = Get32(t + 8);
	o->flags = t[13];
	o->win = Get16(t + 14);
	ParseTcpOpts(t + 20, doff - 20, o);
	o->data.assign(t + doff, t + tl);
}

Out Parse(const Bytes &f, uint32_t tx_flags)
{
	Out o;

	o.raw = f;
	o.tx_flags = tx_flags;
	if (f.size() < 14)
		return o;
	memcpy(o.dst_mac, f.data(), 6);
	memcpy(o.src_mac, f.data() + 6, 6);
	o.eth_type = Get16(f.data() + 12);
	if (o.is_arp() && f.size() >= 42) {
		const uint8_t *a = f.data() + 14;
		o.arp_op = Get16(a + 6);
		memcpy(o.sha, a + 8, 6);
		o.spa = Get32(a + 14);
		memcpy(o.tha, a + 18, 6);
		o.tpa = Get32(a + 24);
	} else if (o.is_tcp() && f.size() >= 54) {
		ParseTcp(f, &o);
	}
	return o;
}

Rig::Rig(const Tweak &tweak, uint32_t buf_bytes) : buf_bytes_(buf_bytes)
{
	km_tcp_config_default(&cfg);
	memcpy(cfg.mac, kOurMac, 6);
	cfg.ip = kOurIp;
	cfg.netmask = 0xffffff00u;
	cfg.conns_max = 4;
	cfg.bufs_max = 4096;
	cfg.rcv_buf_bytes = 1u << 20;
	if (tweak)
		tweak(cfg);
	ops_ = km_tcp_ops{};
	ops_.tx = TxTramp;
	ops_.now_ms = NowTramp;
	ops_.deliver = DeliverTramp;
	ops_.event = EventTramp;
	ops_.buf_free = BufFreeTramp;
	ops_.isn = nullptr;
	ops_.accept = AcceptTramp;
	ssize_t need = km_tcp_memsize(&cfg);
	if (need < 0) {
		ADD_FAILURE() << "memsize " << need;
		return;
	}
	mem_ = aligned_alloc(64, ((size_t)need + 63) & ~(size_t)63);
	pool_.assign(cfg.bufs_max, Bytes(buf_bytes_));
	state_.assign(cfg.bufs_max, kFree);
	for (uint32_t i = cfg.bufs_max; i-- > 0;)
		free_.push_back(i);
	EXPECT_EQ(0, km_tcp_init(mem_, (size_t)need, &cfg, &ops_, this, &ep));
}

Rig::~Rig()
{
	free(mem_);
}

int Rig::OnTx(const iovec *iov, uint32_t n, uint32_t flags)
{
	Bytes f;
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *p = static_cast<const uint8_t *>(iov[i].iov_base);
		f.insert(f.end(), p, p + iov[i].iov_len);
	}
	if (tx_result == 0)
		tx.push_back(Parse(f, flags));
	return tx_result;
}

void Rig::OnDeliver(km_tcp_conn *c, const km_chain *d, const uint32_t *ids)
{
	Bytes &b = rx[c];
	deliver_calls++;
	for (uint32_t i = 0; i < d->n_iov; i++) {
		const uint8_t *p = static_cast<const uint8_t *>(d->iov[i].iov_base);
		uint32_t id = ids[i];
		EXPECT_LT(id, state_.size());
		EXPECT_EQ(kTcp, state_[id]) << "delivered a buffer not given";
		state_[id] = kUser;
		// The bytes must lie inside the buffer they are delivered with.
		EXPECT_GE(p, pool_[id].data());
		EXPECT_LE(p + d->iov[i].iov_len, pool_[id].data() + buf_bytes_);
		b.insert(b.end(), p, p + d->iov[i].iov_len);
		held.push_back(id);
	}
	if (on_deliver)
		on_deliver(c, d, ids);
	if (auto_release)
		ReleaseAll();
}

void Rig::OnEvent(km_tcp_conn *c, km_tcp_event ev, int res)
{
	events.push_back({ c, ev, res });
	if (on_event)
		on_event(events.back());
}

void Rig::OnAccept(km_tcp_conn *c)
{
	EXPECT_EQ(KM_TCP_ESTABLISHED, km_tcp_conn_state(c));
	EXPECT_EQ(nullptr, km_tcp_conn_user(c));
	accepted.push_back(c);
	if (on_accept)
		on_accept(c);
}

void Rig::OnBufFree(const uint32_t *ids, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = ids[i];
		ASSERT_LT(id, state_.size());
		EXPECT_TRUE(state_[id] == kTcp || state_[id] == kReleasing)
			<< "buffer " << id << " freed in state " << state_[id];
		state_[id] = kFree;
		free_.push_back(id);
	}
}

void Rig::Release(uint32_t id)
{
	auto it = std::find(held.begin(), held.end(), id);
	ASSERT_NE(it, held.end());
	held.erase(it);
	state_[id] = kReleasing;
	km_tcp_release(ep, &id, 1);
	EXPECT_EQ(kFree, state_[id]);
}

void Rig::ReleaseAll()
{
	std::vector<uint32_t> ids;
	ids.swap(held);
	for (uint32_t id : ids)
		state_[id] = kReleasing;
	if (!ids.empty())
		km_tcp_release(ep, ids.data(), (uint32_t)ids.size());
	for (uint32_t id : ids)
		EXPECT_EQ(kFree, state_[id]);
}

int Rig::Input(const Bytes &frame, const std::vector<size_t> &splits,
	       uint32_t rx_flags)
{
	std::vector<iovec> iov;
	std::vector<uint32_t> ids;
	size_t at = 0;

	if (splits.empty() && frame.size() > buf_bytes_) {
		std::vector<size_t> auto_splits;
		for (size_t o = buf_bytes_ - 1; o < frame.size(); o += buf_bytes_ - 1)
			auto_splits.push_back(o);
		return Input(frame, auto_splits, rx_flags);
	}
	for (size_t k = 0; k <= splits.size(); k++) {
		size_t end = k < splits.size() ? splits[k] : frame.size();
		EXPECT_LE(end - at, buf_bytes_);
		if (free_.empty()) {
			ADD_FAILURE() << "fake port out of buffers";
			return -1;
		}
		uint32_t id = free_.back();
		free_.pop_back();
		state_[id] = kTcp;
		// Place the bytes at an odd offset sometimes, to catch
		// alignment assumptions.
		size_t off = (id & 1) && end - at + 1 <= buf_bytes_ ? 1 : 0;
		std::copy(frame.begin() + (long)at, frame.begin() + (long)end,
			  pool_[id].begin() + (long)off);
		iov.push_back({ pool_[id].data() + off, end - at });
		ids.push_back(id);
		at = end;
	}
	km_chain ch = { iov.data(), (uint32_t)iov.size() };
	return km_tcp_input(ep, &ch, ids.data(), rx_flags);
}

int Rig::InputSeg(const Seg &s, uint32_t rx_flags)
{
	return Input(BuildTcp(s), {}, rx_flags);
}

Out Rig::Pop()
{
	if (tx.empty()) {
		ADD_FAILURE() << "no frame was sent";
		return Out{};
	}
	Out o = tx.front();
	tx.pop_front();
	return o;
}

size_t Rig::Clear()
{
	size_t n = tx.size();
	tx.clear();
	return n;
}

std::vector<Out> Rig::TcpOut()
{
	std::vector<Out> v;
	for (auto &o : tx)
		if (o.is_tcp())
			v.push_back(o);
	tx.clear();
	return v;
}

km_tcp_stats Rig::Stats() const
{
	km_tcp_stats s;
	km_tcp_get_stats(ep, &s);
	return s;
}

uint32_t Rig::BufsAtPort() const
{
	return (uint32_t)std::count(state_.begin(), state_.end(), kFree);
}

const std::vector<Event> Rig::EventsOf(km_tcp_conn *c) const
{
	std::vector<Event> v;
	for (auto &e : events)
		if (e.c == c)
			v.push_back(e);
	return v;
}

bool Rig::HasEvent(km_tcp_conn *c, km_tcp_event ev, int res) const
{
	for (auto &e : events)
		if (e.c == c && e.ev == ev && e.res == res)
			return true;
	return false;
}

km_tcp_conn_info Rig::Info(km_tcp_conn *c) const
{
	km_tcp_conn_info i;
	km_tcp_conn_get_info(c, &i);
	return i;
}

km_tcp_conn *Rig::Connect(Out *syn, uint32_t ip, uint16_t port,
			  const uint8_t *mac, uint32_t arp_ip)
{
	km_tcp_conn *c = nullptr;

	if (use_fixed_isn)
		ops_.isn = IsnTramp;
	EXPECT_EQ(0, km_tcp_connect(ep, ip, port, nullptr, &c));
	if (c == nullptr)
		return nullptr;
	if (arp_ip == 0)
		arp_ip = ip;
	// A first connection asks ARP; later ones find the cache.
	if (!tx.empty() && tx.front().is_arp()) {
		Out req = Pop();
		EXPECT_EQ(1, req.arp_op);
		EXPECT_EQ(arp_ip, req.tpa);
		EXPECT_EQ(0, Input(BuildArp(2, kOurMac, mac, arp_ip, kOurMac,
					    kOurIp)));
	}
	*syn = Pop();
	EXPECT_TRUE(syn->is_tcp());
	EXPECT_EQ(SYN, syn->flags);
	return c;
}

km_tcp_conn *Rig::Establish(uint32_t peer_isn, uint32_t *peer_nxt,
			    uint16_t peer_win, int peer_wscale, int peer_mss)
{
	Out syn;
	km_tcp_conn *c = Connect(&syn);
	if (c == nullptr)
		return nullptr;
	Seg s;
	s.seq = peer_isn;
	s.ack = syn.seq + 1;
	s.flags = SYN | ACK;
	s.win = peer_win;
	s.dport = syn.sport;
	if (peer_mss >= 0)
		s.opts = OptMss((uint16_t)peer_mss);
	if (peer_wscale >= 0) {
		Bytes ws = OptWs((uint8_t)peer_wscale);
		s.opts.insert(s.opts.end(), ws.begin(), ws.end());
	}
	EXPECT_EQ(0, InputSeg(s));
	BurstEnd();
	Out ack = Pop();
	EXPECT_EQ(ACK, ack.flags);
	EXPECT_EQ(peer_isn + 1, ack.ack);
	EXPECT_EQ(KM_TCP_ESTABLISHED, km_tcp_conn_state(c));
	*peer_nxt = peer_isn + 1;
	return c;
}

Seg PeerSeg(const km_tcp_conn_info &i, uint32_t seq, uint32_t ack,
	    uint8_t flags, Bytes data, uint16_t win)
{
	Seg s;
	s.seq = seq;
	s.ack = ack;
	s.flags = flags;
	s.data = std::move(data);
	s.win = win;
	s.sport = i.remote_port;
	s.dport = i.local_port;
	s.src = i.remote_ip;
	return s;
}

Bytes Pattern(size_t n, uint32_t seed, uint64_t off)
{
	Bytes b(n);
	for (size_t k = 0; k < n; k++) {
		uint64_t i = off + k;
		uint32_t w = (uint32_t)(i / 4) * 2654435761u + seed;
		b[k] = (uint8_t)(w >> (8 * (i % 4)));
	}
	return b;
}

} // namespace tcptest
