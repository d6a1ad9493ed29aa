/* bench-fast-source: a source broker that does not bound the mirror
 * (bench workers, issue 18). kmirrord serves every client from one worker,
 * so as the source it feeds a mirror at what one thread can send, about the
 * rate one mirror worker takes: a mirror with two workers cannot show that
 * it scales. This broker serves each connection on a thread of its own, so
 * a mirror's two workers (a connection each) are fed by two threads.
 *
 * It serves the partitions a kmirrord source wrote (DATA_DIR/TOPIC-P, one
 * segment each, mapped and read in at start) to kmirror's fetch sessions:
 * ApiVersions v0-3, Metadata v0-4 (itself the only broker, leader of every
 * partition), ListOffsets v0-5 (-2: 0, else the end) and Fetch v4-11 (whole
 * batches from the one holding the offset, up to PartitionMaxBytes; no fetch
 * sessions: SessionId 0; at the end, an empty answer after MaxWaitMs),
 * the records sent from the mapped segments with writev. The codecs are
 * kmirror's own (kafka/proto.h), as tests/e2e/fake_source.cc's.
 *
 * usage: bench-fast-source DATA_DIR TOPIC[,TOPIC...] PORT_FILE
 *   prints nothing; writes the port it listens on (127.0.0.1) to PORT_FILE
 *   once it serves, and runs until killed. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <climits>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/errors.h"
#include "kafka/proto.h"
#include "kafka/wire.h"

namespace {

constexpr uint32_t kMaxTopics = 64, kMaxParts = 4096;
constexpr uint32_t kRequestBytesMax = 100u << 20;
constexpr int32_t kBatchHeader = 61; /* RecordBatch v2 up to the records */

struct Batch {
	int64_t base, last;
	size_t pos, len;
};

struct Part {
	const uint8_t *log = nullptr; /* the segment, in memory */
	std::vector<Batch> batches;
	int64_t end = 0;
};

/* "topic" -> its partitions, filled once before any thread serves. */
std::map<std::string, std::vector<Part>> g_topics;
uint16_t g_port;

int64_t be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return (int64_t)v;
}

int32_t be32(const uint8_t *p)
{
	return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
			 (uint32_t)p[2] << 8 | p[3]);
}

/* A segment's batches up to its logical end (kmirrord reserves the .log
 * ahead in steps: zeros follow the last batch). */
bool load_part(const std::string &file, Part *p)
{
	int fd = open(file.c_str(), O_RDONLY);
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0)
		return false;
	void *m = st.st_size > 0 ? mmap(nullptr, (size_t)st.st_size, PROT_READ,
					MAP_PRIVATE | MAP_POPULATE, fd, 0)
				 : nullptr;
	close(fd);
	if (m == MAP_FAILED)
		return false;
	p->log = (const uint8_t *)m;
	for (size_t pos = 0; pos + kBatchHeader <= (size_t)st.st_size;) {
		int32_t len = be32(p->log + pos + 8);
		if (len < kBatchHeader - 12 || pos + 12 + (size_t)len > (size_t)st.st_size)
			break;
		int64_t base = be64(p->log + pos);
		int32_t delta = be32(p->log + pos + 23);
		p->batches.push_back({ base, base + delta, pos, 12 + (size_t)len });
		pos += 12 + (size_t)len;
	}
	p->end = p->batches.empty() ? 0 : p->batches.back().last + 1;
	return true;
}

bool load(const std::string &dir, const std::string &topics)
{
	size_t from = 0;
	while (from <= topics.size()) {
		size_t comma = topics.find(',', from);
		std::string t = topics.substr(from, comma == std::string::npos
							    ? std::string::npos
							    : comma - from);
		std::vector<Part> &parts = g_topics[t];
		for (int p = 0;; p++) {
			std::string d = dir + "/" + t + "-" + std::to_string(p);
			struct stat st;
			if (stat(d.c_str(), &st) < 0)
				break;
			parts.emplace_back();
			if (!load_part(d + "/00000000000000000000.log", &parts.back())) {
				fprintf(stderr, "bench-fast-source: %s: %s\n", d.c_str(),
					strerror(errno));
				return false;
			}
		}
		if (parts.empty()) {
			fprintf(stderr, "bench-fast-source: no %s-0 in %s\n", t.c_str(),
				dir.c_str());
			return false;
		}
		if (comma == std::string::npos)
			break;
		from = comma + 1;
	}
	return true;
}

const Part *find(const struct km_wire_name &topic, int32_t p)
{
	auto it = g_topics.find(std::string(topic.s, topic.len));
	if (it == g_topics.end() || p < 0 || (size_t)p >= it->second.size())
		return nullptr;
	return &it->second[(size_t)p];
}

/* ---- answers: a response frame in buf (written from offset 0) ---- */

bool ans_apiversions(struct km_wire_wr *w, struct km_wire_rd *r,
		     const struct km_reqhdr &h, bool old)
{
	struct km_api_range keys[] = { { KM_API_FETCH, 4, 11 },
				       { KM_API_LIST_OFFSETS, 0, 5 },
				       { KM_API_METADATA, 0, 4 },
				       { KM_API_API_VERSIONS, 0, 3 } };
	struct km_apiversions_resp m = { 0, keys, 4, 4, 0 };
	struct km_apiversions_req q;
	int16_t v = old ? 0 : h.api_version;

	if (old) { /* Kafka: a v0 body saying so */
		m.error_code = KM_KERR_UNSUPPORTED_VERSION;
		m.keys = &keys[3];
		m.n_keys = 1;
	} else if (km_apiversions_req_decode(r, v, &q) < 0) {
		return false;
	}
	return km_proto_resp_begin(w, KM_API_API_VERSIONS, v, h.correlation_id) == 0 &&
	       km_apiversions_resp_encode(w, v, &m) == 0;
}

bool ans_metadata(struct km_wire_wr *w, struct km_wire_rd *r,
		  const struct km_reqhdr &h)
{
	std::vector<km_wire_name> asked(kMaxTopics);
	struct km_metadata_req q = { asked.data(), kMaxTopics, 0, true, nullptr };
	std::vector<km_metadata_topic> topics;
	std::vector<km_metadata_part> parts;
	std::vector<int32_t> nodes;
	struct km_metadata_broker b = {};
	struct km_metadata_resp m = {};
	int16_t v = h.api_version;

	if (km_metadata_req_decode(r, v, &q) < 0)
		return false;
	if (q.n_topics < 0) {
		q.n_topics = 0;
		for (auto &kv : g_topics)
			if ((uint32_t)q.n_topics < kMaxTopics)
				km_wire_name_set(&asked[(size_t)q.n_topics++], kv.first.c_str());
	}
	for (int32_t i = 0; i < q.n_topics; i++) {
		struct km_metadata_topic t = {};
		auto it = g_topics.find(std::string(asked[(size_t)i].s, asked[(size_t)i].len));
		t.name = asked[(size_t)i];
		t.first = (uint32_t)parts.size();
		if (it == g_topics.end())
			t.error_code = KM_KERR_UNKNOWN_TOPIC_OR_PARTITION;
		else
			for (size_t p = 0; p < it->second.size(); p++, t.count++) {
				uint32_t n = (uint32_t)nodes.size();
				parts.push_back({ 0, (int32_t)p, 1, n, 1, n + 1, 1, 0 });
				nodes.push_back(1);
				nodes.push_back(1);
			}
		topics.push_back(t);
	}
	b.node_id = 1;
	km_wire_name_set(&b.host, "127.0.0.1");
	b.port = g_port;
	km_wire_name_set_null(&b.rack);
	m.brokers = &b;
	m.n_brokers = 1;
	km_wire_name_set(&m.cluster_id, "bench-fast-source");
	m.controller_id = 1;
	m.topics = topics.data();
	m.n_topics = (uint32_t)topics.size();
	m.parts = parts.data();
	m.n_parts = (uint32_t)parts.size();
	m.nodes = nodes.data();
	m.n_nodes = (uint32_t)nodes.size();
	return km_proto_resp_begin(w, KM_API_METADATA, v, h.correlation_id) == 0 &&
	       km_metadata_resp_encode(w, v, &m) == 0;
}

bool ans_listoffsets(struct km_wire_wr *w, struct km_wire_rd *r,
		     const struct km_reqhdr &h)
{
	std::vector<km_proto_topic> t(kMaxTopics);
	std::vector<km_listoffsets_req_part> rp(kMaxParts);
	std::vector<km_listoffsets_resp_part> out;
	struct km_listoffsets_req q = {};
	struct km_listoffsets_resp m = {};
	int16_t v = h.api_version;

	q.topics = t.data();
	q.topics_max = kMaxTopics;
	q.parts = rp.data();
	q.parts_max = kMaxParts;
	if (km_listoffsets_req_decode(r, v, &q) < 0)
		return false;
	for (uint32_t i = 0; i < q.n_topics; i++)
		for (uint32_t j = t[i].first; j < t[i].first + t[i].count; j++) {
			const Part *p = find(t[i].name, rp[j].partition);
			int64_t off = p == nullptr ? -1 : rp[j].timestamp == -2 ? 0 : p->end;
			out.push_back({ rp[j].partition,
					(int16_t)(p ? 0 : KM_KERR_UNKNOWN_TOPIC_OR_PARTITION),
					1, -1, off, -1 });
		}
	m.topics = t.data();
	m.n_topics = q.n_topics;
	m.parts = out.data();
	m.n_parts = (uint32_t)out.size();
	return km_proto_resp_begin(w, KM_API_LIST_OFFSETS, v, h.correlation_id) == 0 &&
	       km_listoffsets_resp_encode(w, v, &m) == 0;
}

/* One partition of a Fetch answer: whole batches from the one holding the
 * offset, within PartitionMaxBytes and what is left of MaxBytes; the first
 * batch of the answer's first partition with any goes even if larger
 * (KIP-74), *first says whether that one is still to come. */
void fetch_part(const struct km_wire_name &topic, const km_fetch_req_part &rp,
		int32_t *budget, bool *first, struct km_fetch_part *fp,
		const uint8_t **rec, size_t *len)
{
	const Part *p = find(topic, rp.partition);

	*fp = {};
	fp->partition = rp.partition;
	fp->high_watermark = fp->last_stable_offset = p ? p->end : -1;
	fp->log_start_offset = p ? 0 : -1;
	fp->n_aborted = -1;
	fp->preferred_read_replica = -1;
	*rec = nullptr;
	*len = 0;
	if (p == nullptr) {
		fp->error_code = KM_KERR_UNKNOWN_TOPIC_OR_PARTITION;
		return;
	}
	if (rp.fetch_offset < 0 || rp.fetch_offset > p->end) {
		fp->error_code = KM_KERR_OFFSET_OUT_OF_RANGE;
		return;
	}
	size_t lo = 0, hi = p->batches.size(); /* first batch with last >= offset */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (p->batches[mid].last < rp.fetch_offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t max = (size_t)(rp.partition_max_bytes < *budget ? rp.partition_max_bytes
							      : *budget);
	for (size_t i = lo; i < p->batches.size(); i++) {
		if ((*len > 0 || !*first) && *len + p->batches[i].len > max)
			break;
		if (*len == 0)
			*rec = p->log + p->batches[i].pos;
		*len += p->batches[i].len;
	}
	*budget -= (int32_t)(*len < (size_t)*budget ? *len : (size_t)*budget);
	*first = *first && *len == 0;
}

/* The records stay in the mapped segments: each partition's is a gap of
 * the writer that *ext names, sent with writev (no copy here). */
bool ans_fetch(struct km_wire_wr *w, struct km_wire_rd *r,
	       const struct km_reqhdr &h, int *wait_ms,
	       std::vector<struct iovec> *ext)
{
	std::vector<km_proto_topic> t(kMaxTopics), ft(kMaxTopics);
	std::vector<km_fetch_req_part> rp(kMaxParts);
	std::vector<int32_t> fpart(kMaxParts);
	struct km_fetch_req q = {};
	struct km_proto_enc e;
	size_t sent = 0;

	q.topics = t.data();
	q.topics_max = kMaxTopics;
	q.parts = rp.data();
	q.parts_max = kMaxParts;
	q.forgotten = ft.data();
	q.forgotten_max = kMaxTopics;
	q.forgotten_parts = fpart.data();
	q.forgotten_parts_max = kMaxParts;
	if (km_fetch_req_decode(r, h.api_version, &q) < 0)
		return false;
	int32_t budget = q.max_bytes > 0 ? q.max_bytes : INT32_MAX;
	bool first = true;
	if (km_proto_resp_begin(w, KM_API_FETCH, h.api_version, h.correlation_id) < 0 ||
	    km_fetch_resp_enc_begin(&e, w, h.api_version, 0, 0, 0) < 0)
		return false;
	for (uint32_t i = 0; i < q.n_topics; i++) {
		km_fetch_resp_enc_topic(&e, &t[i].name);
		for (uint32_t j = t[i].first; j < t[i].first + t[i].count; j++) {
			struct km_fetch_part fp;
			const uint8_t *rec;
			size_t len;
			fetch_part(t[i].name, rp[j], &budget, &first, &fp, &rec, &len);
			km_fetch_resp_enc_partition(&e, &fp, len > 0 ? nullptr : rec,
						    (int32_t)len);
			if (len > 0)
				ext->push_back({ (void *)rec, len });
			sent += len;
		}
	}
	*wait_ms = sent == 0 ? (q.max_wait_ms < 500 ? q.max_wait_ms : 500) : 0;
	return km_fetch_resp_enc_end(&e) == 0;
}

bool read_full(int fd, void *buf, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t k = read(fd, (char *)buf + got, n - got);
		if (k <= 0)
			return false;
		got += (size_t)k;
	}
	return true;
}

/* The answer: the writer's bytes with the records between them. */
bool send_answer(int fd, const struct km_wire_wr *w,
		 const std::vector<struct iovec> &ext)
{
	std::vector<struct iovec> v(2 * ext.size() + 1);
	int n = km_wire_wr_iovec(w, ext.data(), (uint32_t)ext.size(), v.data(),
				 (uint32_t)v.size());
	size_t at = 0;

	if (n < 0)
		return false;
	while (at < (size_t)n) {
		int cnt = n - (int)at < IOV_MAX ? n - (int)at : IOV_MAX;
		ssize_t k = writev(fd, &v[at], cnt);
		if (k <= 0)
			return false;
		for (; at < (size_t)n && (size_t)k >= v[at].iov_len; at++)
			k -= (ssize_t)v[at].iov_len;
		if (at < (size_t)n) { /* a partial iovec: the rest of it next */
			v[at].iov_base = (char *)v[at].iov_base + k;
			v[at].iov_len -= (size_t)k;
		}
	}
	return true;
}

/* One connection, blocking, until the peer closes it or errs. */
void serve(int fd)
{
	std::vector<uint8_t> in, out(1u << 20);
	std::vector<struct km_wire_gap> gaps(kMaxParts);
	std::vector<struct iovec> ext;

	for (;;) {
		uint8_t len4[4];
		if (!read_full(fd, len4, 4))
			break;
		uint32_t n = (uint32_t)be32(len4);
		if (n > kRequestBytesMax)
			break;
		in.resize(n);
		if (!read_full(fd, in.data(), n))
			break;
		struct iovec iov = { in.data(), n };
		struct km_chain ch = { &iov, 1 };
		struct km_wire_rd r;
		struct km_wire_wr w;
		struct km_reqhdr h;
		int wait_ms = 0;
		bool ok = false;

		km_wire_rd_init(&r, &ch, km_chain_start(&ch), n, &km_wire_limits_default);
		int rc = km_reqhdr_decode(&r, &h);
		km_wire_wr_init(&w, out.data(), out.size());
		km_wire_wr_set_gaps(&w, gaps.data(), (uint32_t)gaps.size());
		ext.clear();
		if (rc == 0 || (rc == KM_EWIREVERSION && h.api_key == KM_API_API_VERSIONS))
			switch (h.api_key) {
			case KM_API_API_VERSIONS:
				ok = ans_apiversions(&w, &r, h, rc != 0);
				break;
			case KM_API_METADATA:
				ok = ans_metadata(&w, &r, h);
				break;
			case KM_API_LIST_OFFSETS:
				ok = ans_listoffsets(&w, &r, h);
				break;
			case KM_API_FETCH:
				ok = ans_fetch(&w, &r, h, &wait_ms, &ext);
				break;
			default:
				break;
			}
		if (!ok || km_wire_wr_frame_end(&w) < 0) {
			fprintf(stderr, "bench-fast-source: cannot answer api %d v%d\n",
				h.api_key, h.api_version);
			break;
		}
		if (wait_ms > 0)
			std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
		if (!send_answer(fd, &w, ext))
			break;
	}
	close(fd);
}

} // namespace

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: bench-fast-source DATA_DIR TOPIC[,TOPIC...] "
				"PORT_FILE\n");
		return 2;
	}
	if (!load(argv[1], argv[2]))
		return 1;
	struct sockaddr_in a = {};
	socklen_t alen = sizeof(a);
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 64) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &alen) < 0) {
		perror("bench-fast-source: listen");
		return 1;
	}
	g_port = ntohs(a.sin_port);
	std::string tmp = std::string(argv[3]) + ".tmp";
	FILE *f = fopen(tmp.c_str(), "w");
	if (f == nullptr || fprintf(f, "%u\n", g_port) < 0 || fclose(f) != 0 ||
	    rename(tmp.c_str(), argv[3]) < 0) {
		perror("bench-fast-source: port file");
		return 1;
	}
	for (;;) {
		int fd = accept(lfd, nullptr, nullptr);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			perror("bench-fast-source: accept");
			return 1;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		std::thread(serve, fd).detach();
	}
}
