// Shared by the wire tests: byte builders, chains split at chosen points,
// canonical dumps of every decoded message, and the server/client decode
// paths (frame -> header -> body) the tests drive.
//
// Dumps are the tests' notion of "decodes identically": every field a
// decoder fills, records included (as hex), printed in a fixed order.
#ifndef KM_TESTS_WIRE_UTIL_H
#define KM_TESTS_WIRE_UTIL_H

#include <sys/uio.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/chain.h"
#include "common/errors.h"
#include "kafka/proto.h"
#include "kafka/wire.h"

namespace wt {

using Bytes = std::vector<uint8_t>;

// Big-endian byte builder for hand-written frames.
struct B {
	Bytes b;

	B &u8(uint8_t v) { b.push_back(v); return *this; }
	B &i16(int16_t v) { return be((uint16_t)v, 2); }
	B &i32(int32_t v) { return be((uint32_t)v, 4); }
	B &i64(int64_t v) { return be((uint64_t)v, 8); }
	B &raw(const std::string &s)
	{
		b.insert(b.end(), s.begin(), s.end());
		return *this;
	}
	B &raw(const Bytes &v)
	{
		b.insert(b.end(), v.begin(), v.end());
		return *this;
	}
	B &str(const std::string &s) { return i16((int16_t)s.size()).raw(s); }
	B &uvar(uint32_t v)
	{
		while (v >= 0x80) {
			b.push_back((uint8_t)(v | 0x80));
			v >>= 7;
		}
		b.push_back((uint8_t)v);
		return *this;
	}
	B &cstr(const std::string &s) { return uvar((uint32_t)s.size() + 1).raw(s); }
	// Prefix the bytes built so far with their int32 size.
	Bytes frame() const
	{
		B f;
		f.i32((int32_t)b.size()).raw(b);
		return f.b;
	}

private:
	B &be(uint64_t v, int n)
	{
		for (int i = n - 1; i >= 0; i--)
			b.push_back((uint8_t)(v >> (8 * i)));
		return *this;
	}
};

// A chain whose segments are separate heap blocks, so ASan sees any read
// that strays past a segment.
class Chain {
public:
	Chain(const Bytes &bytes, std::vector<size_t> cuts)
	{
		size_t prev = 0;
		cuts.push_back(bytes.size());
		for (size_t cut : cuts) {
			if (cut < prev || cut > bytes.size())
				continue;
			segs_.emplace_back(new uint8_t[cut - prev + 1]);
			if (cut > prev)
				memcpy(segs_.back().get(), bytes.data() + prev,
				       cut - prev);
			iov_.push_back({segs_.back().get(), cut - prev});
			prev = cut;
		}
		ch_.iov = iov_.data();
		ch_.n_iov = (uint32_t)iov_.size();
	}
	// One byte per segment.
	static Chain Bytewise(const Bytes &bytes)
	{
		std::vector<size_t> cuts;
		for (size_t i = 1; i < bytes.size(); i++)
			cuts.push_back(i);
		return Chain(bytes, cuts);
	}
	const km_chain *get() const { return &ch_; }

private:
	std::vector<std::unique_ptr<uint8_t[]>> segs_;
	std::vector<iovec> iov_;
	km_chain ch_;
};

inline km_wire_name Name(const char *s)
{
	km_wire_name n;
	if (s == nullptr)
		km_wire_name_set_null(&n);
	else
		km_wire_name_set(&n, s);
	return n;
}

std::string Hex(const uint8_t *p, size_t n);
std::string Err(int rc);
std::string DumpName(const km_wire_name &n);
std::string DumpSpan(const km_chain *c, const km_wire_span &s);

// Message dumps (every field, whatever the version).
std::string Dump(const km_reqhdr &h);
std::string Dump(const km_apiversions_req &m);
std::string Dump(const km_apiversions_resp &m);
std::string Dump(const km_metadata_req &m);
std::string Dump(const km_metadata_resp &m);
std::string Dump(const km_listoffsets_req &m);
std::string Dump(const km_listoffsets_resp &m);
std::string Dump(const km_fetch_req &m);
std::string Dump(const km_produce_resp &m);
std::string Dump(const km_initpid_req &m);
std::string Dump(const km_initpid_resp &m);
std::string Dump(const km_dconfigs_req &m);
std::string Dump(const km_dconfigs_resp &m);
std::string Dump(const km_dcluster_req &m);
std::string Dump(const km_dcluster_resp &m);
std::string Dump(const km_fetch_part &p, const km_chain *c);

// Streaming decodes, dumped as they go.
std::string DumpFetchResp(km_wire_rd *r, int16_t version);
std::string DumpProduceReq(km_wire_rd *r, int16_t version);

// Capacities the test decoders use.
constexpr uint32_t kCap = 64;

// Body decoders into owned storage, dumped; "ERR <name>" on failure.
std::string DecodeRequestBody(km_wire_rd *r, int16_t key, int16_t version);
std::string DecodeResponseBody(km_wire_rd *r, int16_t key, int16_t version);

// The server path: frame, request header, body. Returns the dump, or
// "NEED" when the chain holds no whole frame, or "ERR <name>".
std::string ServerDecode(const km_chain *c,
			 const km_wire_limits *lim = &km_wire_limits_default);

// The client path for a response to (key, version).
std::string ClientDecode(const km_chain *c, int16_t key, int16_t version,
			 const km_wire_limits *lim = &km_wire_limits_default);

// Decode a frame whose size prefix is replaced by len (a cut frame): the
// body reader sees only len bytes. Returns the error code, or 0.
int DecodeCut(const Bytes &frame, uint32_t len, bool request, int16_t key,
	      int16_t version);

} // namespace wt

#endif
