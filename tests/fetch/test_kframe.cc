// Goal: kframe (dataplane/net/kframe.c) reassembles response frames from
// receive buffers without copying, however the stream is cut into buffers,
// and gives a buffer back exactly once, only when no frame still needs it.
// Method: a fake km_net whose release op records buffer ids; a stream of
// frames is pushed cut at every position (and byte by byte); each frame
// must come out whole with its body, and the released ids must be exactly
// the buffers wholly before the consumed frames' end. The size of the next
// frame can be peeked before it is complete.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "common/errors.h"
#include "dataplane/net/kframe.h"

namespace {

std::multiset<uint32_t> released;

void fake_release(struct km_net *, const uint32_t *ids, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		released.insert(ids[i]);
}

km_net_ops FakeOps()
{
	km_net_ops o = {};
	o.release = fake_release;
	return o;
}

const km_net_ops fake_ops = FakeOps();

std::vector<uint8_t> Frame(const std::string &body)
{
	std::vector<uint8_t> f(4 + body.size());
	uint32_t n = (uint32_t)body.size();
	f[0] = (uint8_t)(n >> 24);
	f[1] = (uint8_t)(n >> 16);
	f[2] = (uint8_t)(n >> 8);
	f[3] = (uint8_t)n;
	std::copy(body.begin(), body.end(), f.begin() + 4);
	return f;
}

std::string Body(const km_kframe_frame *fr)
{
	std::string s(fr->body_len, '\0');
	EXPECT_EQ(fr->body_len, km_chain_copy(&fr->chain, fr->body, &s[0],
					      fr->body_len));
	return s;
}

// Push `stream` in buffers of the given sizes, consuming frames as they
// complete; returns the bodies seen.
std::vector<std::string> Feed(const std::vector<uint8_t> &stream,
			     const std::vector<size_t> &cuts, uint32_t *n_bufs)
{
	km_net net = {&fake_ops};
	static km_kframe k;
	std::vector<std::string> got;
	std::vector<std::vector<uint8_t>> bufs;
	km_kframe_init(&k, &net, 1 << 20);
	released.clear();
	size_t at = 0;
	uint32_t id = 0;
	std::vector<size_t> ends = cuts;
	ends.push_back(stream.size());
	bufs.reserve(ends.size());
	for (size_t e : ends) {
		if (e <= at)
			continue;
		bufs.emplace_back(stream.begin() + (long)at,
				  stream.begin() + (long)e);
		at = e;
		iovec iv = {bufs.back().data(), bufs.back().size()};
		km_chain ch = {&iv, 1};
		EXPECT_EQ(0, km_kframe_push(&k, &ch, &id));
		id++;
		const km_kframe_frame *fr;
		int rc;
		while ((rc = km_kframe_next(&k, &fr)) == 1) {
			got.push_back(Body(fr));
			// Held: a second next() gives nothing.
			EXPECT_EQ(0, km_kframe_next(&k, &fr));
			km_kframe_release(&k);
		}
		EXPECT_EQ(0, rc);
	}
	*n_bufs = id;
	EXPECT_EQ(0u, km_kframe_buffers(&k));
	return got;
}

TEST(KFrame, EveryCutAndByteByByte)
{
	std::vector<std::string> bodies = {"a", std::string(300, 'b'), "",
					   "hello world", std::string(70, 'z')};
	std::vector<uint8_t> stream;
	for (auto &b : bodies) {
		auto f = Frame(b);
		stream.insert(stream.end(), f.begin(), f.end());
	}
	for (size_t c1 = 0; c1 <= stream.size(); c1 += 3)
		for (size_t c2 = c1; c2 <= stream.size(); c2 += 17) {
			uint32_t n = 0;
			auto got = Feed(stream, {c1, c2}, &n);
			ASSERT_EQ(bodies, got) << c1 << " " << c2;
			// Each buffer released exactly once.
			ASSERT_EQ(n, released.size());
			for (uint32_t i = 0; i < n; i++)
				ASSERT_EQ(1u, released.count(i));
		}
	std::vector<size_t> every;
	for (size_t i = 1; i < stream.size(); i++)
		every.push_back(i);
	uint32_t n = 0;
	EXPECT_EQ(bodies, Feed(stream, every, &n));
	EXPECT_EQ(n, released.size());
}

// A buffer shared by a held frame and the next one is kept until the next
// frame is released too; buffers wholly before the held frame's end go
// back on release.
TEST(KFrame, SharedBufferKeptUntilLastFrame)
{
	km_net net = {&fake_ops};
	static km_kframe k;
	km_kframe_init(&k, &net, 1 << 20);
	released.clear();
	auto a = Frame(std::string(10, 'a')), b = Frame(std::string(10, 'b'));
	std::vector<uint8_t> s0(a.begin(), a.begin() + 8);
	std::vector<uint8_t> s1(a.begin() + 8, a.end());
	s1.insert(s1.end(), b.begin(), b.begin() + 5);
	std::vector<uint8_t> s2(b.begin() + 5, b.end());
	iovec iv[2] = {{s0.data(), s0.size()}, {s1.data(), s1.size()}};
	uint32_t ids[2] = {7, 8};
	km_chain ch = {iv, 2};
	ASSERT_EQ(0, km_kframe_push(&k, &ch, ids));
	const km_kframe_frame *fr;
	ASSERT_EQ(1, km_kframe_next(&k, &fr));
	EXPECT_EQ(std::string(10, 'a'), Body(fr));
	EXPECT_TRUE(released.empty());
	km_kframe_release(&k);
	EXPECT_EQ(std::multiset<uint32_t>({7}), released);
	ASSERT_EQ(0, km_kframe_next(&k, &fr));
	iovec iv2 = {s2.data(), s2.size()};
	uint32_t id2 = 9;
	km_chain ch2 = {&iv2, 1};
	ASSERT_EQ(0, km_kframe_push(&k, &ch2, &id2));
	ASSERT_EQ(1, km_kframe_next(&k, &fr));
	EXPECT_EQ(std::string(10, 'b'), Body(fr));
	EXPECT_EQ(std::multiset<uint32_t>({7}), released);
	km_kframe_release(&k);
	EXPECT_EQ(std::multiset<uint32_t>({7, 8, 9}), released);
}

// The size field of the next frame can be read as soon as its 4 bytes are
// in, before the frame is complete, and not while a frame is held (the
// fetcher names the size of a response that can never fit its buffers).
TEST(KFrame, PeekSizeBeforeTheFrameIsComplete)
{
	km_net net = {&fake_ops};
	static km_kframe k;
	km_kframe_init(&k, &net, 1 << 20);
	released.clear();
	auto a = Frame(std::string(10, 'a')), b = Frame(std::string(300, 'b'));
	std::vector<uint8_t> s0(a.begin(), a.end());
	s0.insert(s0.end(), b.begin(), b.begin() + 2);
	std::vector<uint8_t> s1(b.begin() + 2, b.begin() + 50);
	uint32_t size = 0;
	EXPECT_EQ(0, km_kframe_peek_size(&k, &size)) << "nothing queued";
	iovec iv = {s0.data(), 3};
	uint32_t id = 1;
	km_chain ch = {&iv, 1};
	ASSERT_EQ(0, km_kframe_push(&k, &ch, &id));
	EXPECT_EQ(0, km_kframe_peek_size(&k, &size)) << "3 bytes of 4";
	iovec iv2 = {s0.data() + 3, s0.size() - 3};
	uint32_t id2 = 2;
	km_chain ch2 = {&iv2, 1};
	ASSERT_EQ(0, km_kframe_push(&k, &ch2, &id2));
	ASSERT_EQ(1, km_kframe_peek_size(&k, &size));
	EXPECT_EQ(10u, size);
	const km_kframe_frame *fr;
	ASSERT_EQ(1, km_kframe_next(&k, &fr));
	EXPECT_EQ(0, km_kframe_peek_size(&k, &size)) << "a frame is held";
	km_kframe_release(&k);
	// b's size field straddles buffers 2 and 3; b itself is incomplete.
	iovec iv3 = {s1.data(), s1.size()};
	uint32_t id3 = 3;
	km_chain ch3 = {&iv3, 1};
	ASSERT_EQ(0, km_kframe_push(&k, &ch3, &id3));
	ASSERT_EQ(0, km_kframe_next(&k, &fr));
	ASSERT_EQ(1, km_kframe_peek_size(&k, &size));
	EXPECT_EQ(300u, size);
	km_kframe_reset(&k);
	EXPECT_EQ(std::multiset<uint32_t>({1, 2, 3}), released);
}

TEST(KFrame, HostileSizeAndResetAndRequests)
{
	km_net net = {&fake_ops};
	static km_kframe k;
	km_kframe_init(&k, &net, 1000);
	released.clear();
	auto f = Frame(std::string(2000, 'x'));
	iovec iv = {f.data(), 8};
	uint32_t id = 1;
	km_chain ch = {&iv, 1};
	ASSERT_EQ(0, km_kframe_push(&k, &ch, &id));
	const km_kframe_frame *fr;
	EXPECT_EQ(KM_EWIREFRAMEMAX, km_kframe_next(&k, &fr));
	km_kframe_reset(&k);
	EXPECT_EQ(std::multiset<uint32_t>({1}), released);

	// Requests get increasing correlation ids and a correct size prefix.
	uint8_t buf[256];
	km_wire_wr w;
	int32_t c1 = 0, c2 = 0;
	ASSERT_EQ(0, km_kframe_req_begin(&k, &w, buf, sizeof(buf),
					 KM_API_API_VERSIONS, 0, "t", &c1));
	ASSERT_EQ(0, km_kframe_req_begin(&k, &w, buf, sizeof(buf),
					 KM_API_API_VERSIONS, 0, "t", &c2));
	EXPECT_EQ(c1 + 1, c2);
	ASSERT_GT(km_wire_wr_frame_end(&w), 0);
	uint32_t size = ((uint32_t)buf[0] << 24) | ((uint32_t)buf[1] << 16) |
			((uint32_t)buf[2] << 8) | buf[3];
	EXPECT_EQ(w.pos - 4, size);
}

} // namespace

// Goal: km_kframe_compact packs the bytes after the held frame into full
// buffers and releases the emptied ones, so a peer sending in small pieces
// holds what its bytes fill; frames come out the same, a held frame's bytes
// never move, and every buffer goes back exactly once.
// Method: buffers of 64 B capacity each receive a piece of 1..9 bytes;
// compaction runs after every push, sometimes while a frame is held.
TEST(KFrame, CompactPacksSmallPiecesAndKeepsTheHeldFrame)
{
	const uint32_t cap = 64;
	std::vector<std::string> bodies;
	std::vector<uint8_t> stream;
	for (int i = 0; i < 12; i++) {
		bodies.push_back(std::string((size_t)(i * 37 % 200), (char)('a' + i)));
		auto f = Frame(bodies.back());
		stream.insert(stream.end(), f.begin(), f.end());
	}
	km_net net = {&fake_ops};
	static km_kframe k;
	km_kframe_init(&k, &net, 1 << 20);
	released.clear();
	std::vector<std::vector<uint8_t>> bufs(stream.size());
	std::vector<std::string> got;
	const km_kframe_frame *held = nullptr;
	std::string held_body;
	uint32_t id = 0, packed = 0;
	size_t at = 0;
	while (at < stream.size()) {
		size_t n = std::min<size_t>(1 + id % 9, stream.size() - at);
		bufs[id].assign(cap, 0xee);
		std::copy(stream.begin() + (long)at, stream.begin() + (long)(at + n),
			  bufs[id].begin());
		at += n;
		iovec iv = {bufs[id].data(), n};
		km_chain ch = {&iv, 1};
		ASSERT_EQ(0, km_kframe_push(&k, &ch, &id));
		id++;
		packed += km_kframe_compact(&k, cap);
		if (held != nullptr) {
			// Its bytes stayed where its views point.
			ASSERT_EQ(held_body, Body(held));
			// Release it only every third push: later bytes pile up
			// behind it meanwhile.
			if (id % 3 != 0)
				continue;
			got.push_back(held_body);
			km_kframe_release(&k);
			held = nullptr;
		}
		int rc;
		while ((rc = km_kframe_next(&k, &held)) == 1) {
			held_body = Body(held);
			if (got.size() % 2 == 0)
				break; // keep it held across pushes
			got.push_back(held_body);
			km_kframe_release(&k);
			held = nullptr;
		}
		ASSERT_GE(rc, 0);
		// Buffers held: what the bytes fill, plus, while a frame is
		// held, its own pieces (one buffer per byte at worst).
		uint64_t live = k.queued - k.head_off;
		ASSERT_LE(km_kframe_buffers(&k), live / cap + 2 +
			  (held != nullptr ? held->body_len + 5 : 0));
	}
	if (held != nullptr) {
		got.push_back(held_body);
		km_kframe_release(&k);
	}
	const km_kframe_frame *fr;
	while (km_kframe_next(&k, &fr) == 1) {
		got.push_back(Body(fr));
		km_kframe_release(&k);
	}
	EXPECT_EQ(bodies, got);
	EXPECT_EQ(0u, km_kframe_buffers(&k));
	EXPECT_GT(packed, id / 2) << "pieces of 1..9 B in 64 B buffers";
	ASSERT_EQ(id, released.size());
	for (uint32_t i = 0; i < id; i++)
		ASSERT_EQ(1u, released.count(i)) << i;
}
