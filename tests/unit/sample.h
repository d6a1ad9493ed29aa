// Shared by the unit tests: sample batches built with kmirror's builder and
// helpers to lay bytes out as multi-segment chains.
#ifndef KM_TESTS_SAMPLE_H
#define KM_TESTS_SAMPLE_H

#include <sys/uio.h>

#include <string>
#include <vector>

#include "common/chain.h"
#include "kafka/records.h"

namespace sample {

// A data batch of n records with keys, values and one header each.
inline std::vector<uint8_t> DataBatch(int64_t base_offset, int64_t pid,
				      int n, int value_bytes = 20)
{
	std::vector<std::string> keys, values;
	std::vector<km_record_spec> recs(n);
	static const char kHdrVal[] = "v";
	static const km_record_header_spec hdr = {"h", kHdrVal, 1};
	for (int i = 0; i < n; i++) {
		keys.push_back("key-" + std::to_string(i));
		values.push_back(std::string(value_bytes, (char)('a' + i % 26)));
	}
	for (int i = 0; i < n; i++) {
		recs[i].key = keys[i].data();
		recs[i].key_len = (int32_t)keys[i].size();
		recs[i].value = values[i].data();
		recs[i].value_len = (int32_t)values[i].size();
		recs[i].timestamp = 1700000000000 + i;
		recs[i].headers = &hdr;
		recs[i].header_count = 1;
	}
	km_batch_spec spec = {base_offset, 3, 0, pid, 0, pid < 0 ? -1 : 0};
	std::vector<uint8_t> out(km_records_build_size(recs.data(), n));
	int rc = km_records_build(out.data(), out.size(), &spec, recs.data(), n);
	if (rc != (int)out.size())
		abort();
	return out;
}

// The bytes of buf split into segments at the given cut points (ascending).
struct Chain {
	std::vector<iovec> iov;
	km_chain chain;

	Chain(std::vector<uint8_t> &buf, std::vector<size_t> cuts)
	{
		size_t prev = 0;
		cuts.push_back(buf.size());
		for (size_t c : cuts) {
			iov.push_back({buf.data() + prev, c - prev});
			prev = c;
		}
		chain = {iov.data(), (uint32_t)iov.size()};
	}
};

} // namespace sample

#endif
