/* A hostile source broker for kmirrord's end-to-end tests; see
 * fake_source.h. One thread polls the listening socket and every connection
 * (non-blocking); each answer is queued with the time it is due (now, or
 * MaxWaitMs later for a Fetch at the end of the partition) and what to do
 * after it is sent (nothing, close, or fall silent). */
#include "tests/e2e/fake_source.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>

#include "common/errors.h"
#include "common/uuid.h"
#include "kafka/batch.h"
#include "kafka/proto.h"
#include "kafka/records.h"
#include "kafka/wire.h"

namespace kmtest {

namespace {

/* Kafka's socket.request.max.bytes: a larger request is the fake's own
 * protocol error. */
constexpr uint32_t kRequestBytesMax = 100u << 20;
constexpr uint32_t kMaxTopics = 16, kMaxParts = 1024;

uint64_t mono_ms()
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint32_t load_be32(const void *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return ntohl(v);
}

void store_be32(void *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

int64_t load_be64(const std::string &s, size_t at)
{
	uint64_t v = 0;

	for (size_t i = 0; i < 8 && at + i < s.size(); i++)
		v = v << 8 | (uint8_t)s[at + i];
	return (int64_t)v;
}

uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* What happens once an answer has gone out. */
enum class Then { kNothing, kClose, kSilence };

struct Queued {
	uint64_t due_ms;
	std::string bytes;
	Then then;
};

} // namespace

struct FakeSource::Conn {
	int fd = -1;
	uint64_t id = 0, nreq = 0;
	std::string in, out;
	std::deque<Queued> queue;
	bool silent = false, close_after = false, dead = false;
};

const char *fault_name(Fault f)
{
	static const char *const names[] = {
		"none",		 "garbage",	   "huge-size",
		"negative-size", "truncate-close", "truncate-stall",
		"bad-crc",	 "wrong-correlation", "stall",
		"bad-base-offset",
	};

	return (int)f >= 0 && (int)f < (int)Fault::kCount ? names[(int)f]
							  : "?";
}

/* ---- batches ---- */

int64_t batch_base_offset(const std::string &batch)
{
	return load_be64(batch, KM_BATCH_OFF_BASE_OFFSET);
}

int64_t batch_last_offset(const std::string &batch)
{
	uint32_t delta = batch.size() >= KM_BATCH_HEADER_BYTES
				 ? load_be32(batch.data() +
					     KM_BATCH_OFF_LAST_OFFSET_DELTA)
				 : 0;

	return batch_base_offset(batch) + (int32_t)delta;
}

TopicId topic_id_of(uint8_t b)
{
	TopicId id;

	id.fill(b);
	return id;
}

std::string topic_id_text(const TopicId &id)
{
	char text[KM_UUID_CHARS + 1];

	km_uuid_encode(id.data(), text);
	return text;
}

/* The record at offset o of partition p: a mix of null and non-null keys,
 * values of varied sizes, null values, and headers with null values. */
static SourceRecord make_record(int32_t p, int64_t o, const std::string &src)
{
	SourceRecord r;
	std::string tag = src + std::to_string(p) + "/" + std::to_string(o);

	r.offset = o;
	r.timestamp = 1700000000000 + o * 10 + p;
	if (o % 7 != 3)
		r.key = "key-" + tag;
	if (o % 11 != 5)
		r.value = "value-" + tag + "-" +
			  std::string((size_t)(20 + (o * 37 + p) % 180),
				      (char)('a' + o % 26));
	if (o % 3 != 0)
		r.headers.push_back({ "h-" + tag, "hv-" + tag });
	if (o % 5 == 1)
		r.headers.push_back({ "h-null", std::nullopt });
	return r;
}

static std::string build_one(int32_t p, int64_t base,
			     const std::vector<SourceRecord> &recs)
{
	std::vector<std::vector<km_record_header_spec>> hs(recs.size());
	std::vector<km_record_spec> specs(recs.size());
	km_batch_spec b = { base, 0, 0, 7000 + p, 0, (int32_t)base };

	for (size_t i = 0; i < recs.size(); i++) {
		const SourceRecord &r = recs[i];

		for (auto &[k, v] : r.headers)
			hs[i].push_back({ k.c_str(), v ? v->data() : nullptr,
					  v ? (int32_t)v->size() : -1 });
		specs[i] = { r.key ? r.key->data() : nullptr,
			     r.key ? (int32_t)r.key->size() : -1,
			     r.value ? r.value->data() : nullptr,
			     r.value ? (int32_t)r.value->size() : -1,
			     r.timestamp, hs[i].data(),
			     (int32_t)hs[i].size() };
	}
	int size = km_records_build_size(specs.data(), (int32_t)specs.size());
	if (size <= 0)
		return "";
	std::string out((size_t)size, '\0');
	int n = km_records_build(&out[0], out.size(), &b, specs.data(),
				 (int32_t)specs.size());
	return n == size ? out : "";
}

std::vector<std::string> build_batches(int32_t partition, int batches,
				       int records,
				       std::vector<SourceRecord> *expect,
				       const std::string &tag)
{
	std::vector<std::string> out;

	for (int b = 0; b < batches; b++) {
		int64_t base = (int64_t)b * records;
		std::vector<SourceRecord> recs;

		for (int i = 0; i < records; i++)
			recs.push_back(make_record(partition, base + i, tag));
		std::string bytes = build_one(partition, base, recs);
		if (bytes.empty())
			return {};
		out.push_back(bytes);
		expect->insert(expect->end(), recs.begin(), recs.end());
	}
	return out;
}

/* ---- life cycle ---- */

FakeSource::FakeSource(FakeSourceConfig cfg)
	: cfg_(std::move(cfg)), rng_(cfg_.garbage_seed | 1),
	  by_part_fetch_(cfg_.partitions.size()),
	  by_part_lo_(cfg_.partitions.size())
{
}

FakeSource::~FakeSource()
{
	stop();
}

std::string FakeSource::start()
{
	struct sockaddr_in sa = {};
	socklen_t len = sizeof(sa);

	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) < 0)
		return std::string("pipe2: ") + strerror(errno);
	lfd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (lfd_ < 0 || bind(lfd_, (sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(lfd_, 64) < 0 ||
	    getsockname(lfd_, (sockaddr *)&sa, &len) < 0)
		return std::string("listen: ") + strerror(errno);
	port_ = ntohs(sa.sin_port);
	th_ = std::thread([this] { run(); });
	return "";
}

void FakeSource::stop()
{
	if (th_.joinable()) {
		stop_ = true;
		if (write(wake_[1], "x", 1) < 0) {
			/* the thread also polls stop_ every 100 ms */
		}
		th_.join();
	}
	for (Conn *c : live_) {
		close(c->fd);
		delete c;
	}
	live_.clear();
	for (int *fd : { &lfd_, &wake_[0], &wake_[1] })
		if (*fd >= 0) {
			close(*fd);
			*fd = -1;
		}
}

void FakeSource::set_fault_hook(FaultHook hook)
{
	std::lock_guard<std::mutex> g(mu_);
	hook_ = std::move(hook);
}

void FakeSource::change(const std::function<void(FakeSourceConfig &)> &fn)
{
	std::lock_guard<std::mutex> g(cfg_mu_);
	size_t n = cfg_.partitions.size();

	fn(cfg_);
	if (cfg_.partitions.size() != n)
		fail("change: the partition count must stay");
}

void FakeSource::replace(std::function<void(FakeSourceConfig &)> change)
{
	std::unique_lock<std::mutex> g(drop_mu_);
	uint64_t want = ++drop_asked_;

	changes_.push_back(std::move(change));
	if (write(wake_[1], "d", 1) < 0) {
		/* the thread also looks every 100 ms */
	}
	drop_cv_.wait_for(g, std::chrono::seconds(10),
			  [&] { return drop_done_ >= want || !th_.joinable(); });
}

int64_t FakeSource::end_offset(int32_t partition) const
{
	std::lock_guard<std::mutex> g(cfg_mu_);
	const auto &b = cfg_.partitions.at((size_t)partition);

	return b.empty() ? 0 : batch_last_offset(b.back()) + 1;
}

uint64_t FakeSource::requests(int16_t api_key) const
{
	return api_key >= 0 && api_key < 64 ? by_api_[api_key].load() : 0;
}

uint64_t FakeSource::fetches(int32_t partition) const
{
	return partition >= 0 && (size_t)partition < by_part_fetch_.size()
		       ? by_part_fetch_[(size_t)partition].load()
		       : 0;
}

uint64_t FakeSource::faults_applied(Fault f) const
{
	return (int)f >= 0 && (int)f < (int)Fault::kCount
		       ? faults_[(int)f].load()
		       : 0;
}

std::string FakeSource::error() const
{
	std::lock_guard<std::mutex> g(mu_);
	return err_;
}

void FakeSource::fail(const std::string &why)
{
	std::lock_guard<std::mutex> g(mu_);
	if (err_.empty())
		err_ = why;
}

/* ---- the loop ---- */

static int due_in(const std::vector<FakeSource::Conn *> &conns, uint64_t now)
{
	int t = 100; /* also the period at which stop_ is looked at */

	for (FakeSource::Conn *c : conns)
		if (!c->queue.empty()) {
			uint64_t due = c->queue.front().due_ms;
			int left = due > now ? (int)(due - now) : 0;
			t = left < t ? left : t;
		}
	return t;
}

void FakeSource::run()
{
	while (!stop_) { /* bounded by stop() */
		std::vector<struct pollfd> p = { { wake_[0], POLLIN, 0 },
						 { lfd_, POLLIN, 0 } };

		for (Conn *c : live_)
			p.push_back({ c->fd,
				      (short)(POLLIN |
					      (c->out.empty() ? 0 : POLLOUT)),
				      0 });
		if (poll(p.data(), p.size(), due_in(live_, mono_ms())) < 0 &&
		    errno != EINTR)
			return fail(std::string("poll: ") + strerror(errno));
		if (p[0].revents) {
			char buf[64];

			while (read(wake_[0], buf, sizeof(buf)) > 0) {
			}
			if (stop_)
				return;
		}
		if (drop_if_asked())
			continue; /* p[] names connections now closed */
		if (p[1].revents)
			accept_all();
		uint64_t now = mono_ms();
		for (size_t i = 0; i < live_.size() && i + 2 < p.size(); i++)
			service(live_[i], p[i + 2].revents, now);
		for (size_t i = 0; i < live_.size();) {
			if (!live_[i]->dead) {
				i++;
				continue;
			}
			close(live_[i]->fd);
			delete live_[i];
			live_.erase(live_.begin() + (long)i);
		}
	}
}

/* replace(): the new configuration, and every connection open now is
 * closed (what was queued on them is never sent). */
bool FakeSource::drop_if_asked()
{
	std::lock_guard<std::mutex> g(drop_mu_);

	if (drop_done_ == drop_asked_)
		return false;
	{
		std::lock_guard<std::mutex> c(cfg_mu_);
		size_t n = cfg_.partitions.size();

		for (auto &change : changes_)
			if (change)
				change(cfg_);
		if (cfg_.partitions.size() != n)
			fail("replace: the partition count must stay");
	}
	changes_.clear();
	for (Conn *c : live_) {
		close(c->fd);
		delete c;
	}
	live_.clear();
	drop_done_ = drop_asked_;
	drop_cv_.notify_all();
	return true;
}

void FakeSource::accept_all()
{
	for (int k = 0; k < 64; k++) {
		int fd = accept4(lfd_, nullptr, nullptr,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		int one = 1;

		if (fd < 0)
			return;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		Conn *c = new Conn;
		c->fd = fd;
		c->id = ++conns_;
		live_.push_back(c);
	}
}

/* Read what is there; false once the peer has gone. */
static bool read_in(FakeSource::Conn *c)
{
	char buf[65536];

	for (int k = 0; k < 64; k++) {
		ssize_t n = recv(c->fd, buf, sizeof(buf), 0);

		if (n > 0) {
			if (!c->silent)
				c->in.append(buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
	}
	return true;
}

/* Answers that are due go to the output buffer, in order. */
static void release_due(FakeSource::Conn *c, uint64_t now)
{
	while (!c->silent && !c->close_after && !c->queue.empty() &&
	       c->queue.front().due_ms <= now) {
		Queued q = std::move(c->queue.front());

		c->queue.pop_front();
		c->out += q.bytes;
		c->silent = q.then == Then::kSilence;
		c->close_after = q.then == Then::kClose;
	}
}

static bool write_out(FakeSource::Conn *c)
{
	while (!c->out.empty()) {
		ssize_t n = send(c->fd, c->out.data(), c->out.size(),
				 MSG_NOSIGNAL);

		if (n > 0) {
			c->out.erase(0, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
	}
	return true;
}

void FakeSource::service(Conn *c, short revents, uint64_t now)
{
	if ((revents & (POLLIN | POLLHUP | POLLERR)) && !read_in(c)) {
		c->dead = true;
		return;
	}
	while (!c->silent && c->in.size() >= 4) {
		uint32_t size = load_be32(c->in.data());

		if (size > kRequestBytesMax) {
			fail("a request of " + std::to_string(size) + " bytes");
			c->dead = true;
			return;
		}
		if (c->in.size() < 4 + (size_t)size)
			break;
		std::string frame = c->in.substr(4, size);
		c->in.erase(0, 4 + (size_t)size);
		if (!handle_request(c, frame, now)) {
			c->dead = true;
			return;
		}
	}
	if (c->silent)
		c->in.clear();
	release_due(c, now);
	if (!write_out(c) || (c->close_after && c->out.empty()))
		c->dead = true;
}

/* ---- answers ---- */

struct FakeSource::Answer {
	std::string bytes; /* the whole frame, size field included */
	int32_t wait_ms = 0;
	struct Batch {
		size_t at;    /* in bytes */
		size_t len;
		int64_t base, last;
		int32_t partition;
	};
	std::vector<Batch> batches; /* Fetch: each batch served */
	std::string error;	    /* why there is no answer */
};

namespace {

/* A response frame for (api, v, corr) whose body `body` writes. */
template <class F>
bool encode_frame(std::string *out, size_t cap, int16_t api, int16_t v,
		  int32_t corr, F body)
{
	std::vector<uint8_t> buf(cap);
	struct km_wire_wr w;

	km_wire_wr_init(&w, buf.data(), buf.size());
	if (km_proto_resp_begin(&w, api, v, corr) < 0 || body(&w) < 0 ||
	    km_wire_wr_frame_end(&w) < 0)
		return false;
	out->assign((const char *)buf.data(), w.pos);
	return true;
}

int64_t part_start(const FakeSourceConfig &cfg, int32_t p)
{
	const auto &b = cfg.partitions[(size_t)p];

	return b.empty() ? 0 : batch_base_offset(b.front());
}

int64_t part_end(const FakeSourceConfig &cfg, int32_t p)
{
	const auto &b = cfg.partitions[(size_t)p];

	return b.empty() ? 0 : batch_last_offset(b.back()) + 1;
}

bool known(const FakeSourceConfig &cfg, const struct km_wire_name &topic,
	   int32_t p)
{
	return cfg.topic == topic.s && p >= 0 &&
	       (size_t)p < cfg.partitions.size() &&
	       (cfg.hidden_from < 0 || p < cfg.hidden_from);
}

bool ans_apiversions(const FakeSourceConfig &cfg, struct km_wire_rd *r,
		     const struct km_reqhdr &h, bool unsupported,
		     std::string *out)
{
	struct km_api_range keys[] = { { KM_API_FETCH, 4, 11 },
				       { KM_API_LIST_OFFSETS, 0, 5 },
				       { KM_API_METADATA, 0,
					 cfg.metadata_max_version },
				       { KM_API_API_VERSIONS, 0, 3 } };
	struct km_apiversions_resp m = { 0, keys, 4, 4, 0 };
	struct km_apiversions_req q;
	int16_t v = unsupported ? 0 : h.api_version;

	if (unsupported) { /* Kafka: a v0 body saying so */
		m.error_code = KM_KERR_UNSUPPORTED_VERSION;
		m.keys = &keys[3];
		m.n_keys = 1;
	} else if (km_apiversions_req_decode(r, v, &q) < 0) {
		return false;
	}
	return encode_frame(out, 4096, KM_API_API_VERSIONS, v,
			    h.correlation_id, [&](struct km_wire_wr *w) {
				    return km_apiversions_resp_encode(w, v, &m);
			    });
}

/* Our topic with every partition led by us, or an unknown topic. */
void meta_topic(const FakeSourceConfig &cfg, const struct km_wire_name &name,
		std::vector<km_metadata_topic> *topics,
		std::vector<km_metadata_part> *parts,
		std::vector<int32_t> *nodes)
{
	struct km_metadata_topic t = {};

	t.name = name;
	t.first = (uint32_t)parts->size();
	/* hidden_from 0: the topic itself is gone (deleted). */
	if (cfg.topic != name.s || cfg.hidden_from == 0) {
		t.error_code = KM_KERR_UNKNOWN_TOPIC_OR_PARTITION;
		topics->push_back(t);
		return;
	}
	memcpy(t.topic_id, cfg.topic_id.data(), sizeof(t.topic_id));
	for (size_t i = 0; i < cfg.partitions.size(); i++) {
		uint32_t n = (uint32_t)nodes->size();

		if (!known(cfg, name, (int32_t)i))
			break;
		parts->push_back({ 0, (int32_t)i, cfg.node_id, n, 1, n + 1, 1, 0 });
		nodes->push_back(cfg.node_id);
		nodes->push_back(cfg.node_id);
		t.count++;
	}
	topics->push_back(t);
}

bool ans_metadata(const FakeSourceConfig &cfg, uint16_t port,
		  struct km_wire_rd *r, const struct km_reqhdr &h,
		  std::string *out)
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
		km_wire_name_set(&asked[0], cfg.topic.c_str());
		q.n_topics = 1;
	}
	for (int32_t i = 0; i < q.n_topics; i++)
		meta_topic(cfg, asked[(size_t)i], &topics, &parts, &nodes);
	b.node_id = cfg.node_id;
	km_wire_name_set(&b.host, "127.0.0.1");
	b.port = port;
	km_wire_name_set_null(&b.rack);
	m.brokers = &b;
	m.n_brokers = 1;
	km_wire_name_set(&m.cluster_id, cfg.cluster_id.c_str());
	m.controller_id = cfg.node_id;
	m.topics = topics.data();
	m.n_topics = (uint32_t)topics.size();
	m.parts = parts.data();
	m.n_parts = (uint32_t)parts.size();
	m.nodes = nodes.data();
	m.n_nodes = (uint32_t)nodes.size();
	return encode_frame(out, 8192 + parts.size() * 64, KM_API_METADATA, v,
			    h.correlation_id, [&](struct km_wire_wr *w) {
				    return km_metadata_resp_encode(w, v, &m);
			    });
}

/* Timestamp -2 is the log start; any other reads as the log end. */
bool ans_listoffsets(const FakeSourceConfig &cfg, struct km_wire_rd *r,
		     const struct km_reqhdr &h, FakeRequest *rq,
		     std::string *out)
{
	std::vector<km_proto_topic> t(kMaxTopics);
	std::vector<km_listoffsets_req_part> rp(kMaxParts);
	std::vector<km_listoffsets_resp_part> p;
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
			int32_t id = rp[j].partition;
			bool ok = known(cfg, t[i].name, id);
			int64_t off = !ok ? -1
				      : rp[j].timestamp == -2 ? part_start(cfg, id)
							      : part_end(cfg, id);

			p.push_back({ id, (int16_t)(ok ? 0 : KM_KERR_UNKNOWN_TOPIC_OR_PARTITION),
				      1, -1, off, -1 });
		}
	if (!p.empty()) {
		rq->partition = p[0].partition;
		rq->offset = rp[0].timestamp;
	}
	for (size_t j = 0; j < p.size(); j++)
		rq->parts.push_back({ p[j].partition, rp[j].timestamp, 0 });
	m.topics = t.data();
	m.n_topics = q.n_topics;
	m.parts = p.data();
	m.n_parts = (uint32_t)p.size();
	return encode_frame(out, 4096 + p.size() * 64, KM_API_LIST_OFFSETS, v,
			    h.correlation_id, [&](struct km_wire_wr *w) {
				    return km_listoffsets_resp_encode(w, v, &m);
			    });
}

/* One partition of a Fetch answer: its fields and whole batches from the
 * one holding the offset, the first always (KIP-74), then up to max_bytes
 * and max_batches. */
struct FetchPart {
	struct km_fetch_part p = {};
	std::vector<const std::string *> batches;
	size_t bytes = 0;
};

FetchPart fetch_part(const FakeSourceConfig &cfg,
		     const struct km_wire_name &topic,
		     const struct km_fetch_req_part &rp)
{
	FetchPart f;
	int32_t id = rp.partition;

	f.p.partition = id;
	f.p.high_watermark = f.p.last_stable_offset = -1;
	f.p.log_start_offset = -1;
	f.p.n_aborted = -1;
	f.p.preferred_read_replica = -1;
	if (!known(cfg, topic, id)) {
		f.p.error_code = KM_KERR_UNKNOWN_TOPIC_OR_PARTITION;
		return f;
	}
	f.p.high_watermark = f.p.last_stable_offset = part_end(cfg, id);
	f.p.log_start_offset = part_start(cfg, id);
	if (rp.fetch_offset < f.p.log_start_offset ||
	    rp.fetch_offset > f.p.high_watermark) {
		f.p.error_code = KM_KERR_OFFSET_OUT_OF_RANGE;
		return f;
	}
	for (const std::string &b : cfg.partitions[(size_t)id]) {
		if (batch_last_offset(b) < rp.fetch_offset)
			continue;
		if (!f.batches.empty() &&
		    (f.bytes + b.size() > (size_t)rp.partition_max_bytes ||
		     (cfg.max_batches_per_fetch > 0 &&
		      f.batches.size() >= (size_t)cfg.max_batches_per_fetch)))
			break;
		f.batches.push_back(&b);
		f.bytes += b.size();
	}
	return f;
}

} // namespace

static bool decode_fetch(struct km_wire_rd *r, int16_t v,
			 std::vector<km_proto_topic> *t,
			 std::vector<km_fetch_req_part> *rp,
			 struct km_fetch_req *q)
{
	/* Forgotten topics (v7+) are read and ignored: no fetch sessions. */
	std::vector<km_proto_topic> ft(kMaxTopics);
	std::vector<int32_t> fp(kMaxParts);

	t->resize(kMaxTopics);
	rp->resize(kMaxParts);
	*q = {};
	q->topics = t->data();
	q->topics_max = kMaxTopics;
	q->parts = rp->data();
	q->parts_max = kMaxParts;
	q->forgotten = ft.data();
	q->forgotten_max = kMaxTopics;
	q->forgotten_parts = fp.data();
	q->forgotten_parts_max = kMaxParts;
	return km_fetch_req_decode(r, v, q) == 0;
}

static bool ans_fetch(const FakeSourceConfig &cfg, struct km_wire_rd *r,
		      const struct km_reqhdr &h, FakeRequest *rq,
		      FakeSource::Answer *a);

bool FakeSource::answer(const std::string &frame, FakeRequest *rq, Answer *a)
{
	struct iovec iov = { (void *)frame.data(), frame.size() };
	struct km_chain ch = { &iov, 1 };
	struct km_wire_rd r;
	struct km_reqhdr h;
	bool ok = false;

	km_wire_rd_init(&r, &ch, km_chain_start(&ch), (uint32_t)frame.size(),
			&km_wire_limits_default);
	int rc = km_reqhdr_decode(&r, &h);
	bool old_apiv = rc == KM_EWIREVERSION &&
			h.api_key == KM_API_API_VERSIONS;
	std::lock_guard<std::mutex> g(cfg_mu_);

	/* Metadata above what kmirrord serves, up to what this fake offers:
	 * the codec speaks it as a client (topic ids, v10+). */
	if (rc == KM_EWIREVERSION && h.api_key == KM_API_METADATA &&
	    h.api_version <= cfg_.metadata_max_version &&
	    km_proto_client_check(h.api_key, h.api_version) == 0)
		rc = 0;
	rq->api_key = h.api_key;
	rq->api_version = h.api_version;
	rq->correlation_id = h.correlation_id;
	rq->client_id = h.client_id.len > 0 ? h.client_id.s : "";
	if (h.api_key >= 0 && h.api_key < 64)
		rq->api_count = ++by_api_[h.api_key];
	if (rc < 0 && !old_apiv)
		h.api_key = -1; /* answered by no one: the error below */
	switch (h.api_key) {
	case KM_API_API_VERSIONS:
		ok = ans_apiversions(cfg_, &r, h, old_apiv, &a->bytes);
		break;
	case KM_API_METADATA:
		ok = ans_metadata(cfg_, port_, &r, h, &a->bytes);
		break;
	case KM_API_LIST_OFFSETS:
		ok = ans_listoffsets(cfg_, &r, h, rq, &a->bytes);
		break;
	case KM_API_FETCH:
		ok = ans_fetch(cfg_, &r, h, rq, a);
		break;
	default:
		break;
	}
	if (!ok)
		a->error = "cannot answer api " + std::to_string(rq->api_key) +
			   " v" + std::to_string(rq->api_version);
	return ok;
}

/* Encode the answer and note where each batch sits in it. */
static bool enc_fetch(const struct km_reqhdr &h,
		      const std::vector<km_proto_topic> &t,
		      std::vector<FetchPart> &fp, size_t cap,
		      FakeSource::Answer *a)
{
	std::vector<std::pair<size_t, const FetchPart *>> at;

	bool ok = encode_frame(&a->bytes, cap, KM_API_FETCH, h.api_version,
			       h.correlation_id, [&](struct km_wire_wr *w) {
		struct km_proto_enc e;
		size_t k = 0;

		km_fetch_resp_enc_begin(&e, w, h.api_version, 0, 0, 0);
		for (const km_proto_topic &tp : t) {
			km_fetch_resp_enc_topic(&e, &tp.name);
			for (uint32_t j = 0; j < tp.count; j++, k++) {
				std::string rec;
				for (const std::string *b : fp[k].batches)
					rec += *b;
				km_fetch_resp_enc_partition(&e, &fp[k].p,
							    rec.data(),
							    (int32_t)rec.size());
				at.push_back({ w->pos - rec.size(), &fp[k] });
			}
		}
		return km_fetch_resp_enc_end(&e);
	});
	for (auto &[pos, f] : at)
		for (const std::string *b : f->batches) {
			a->batches.push_back({ pos, b->size(),
					       batch_base_offset(*b),
					       batch_last_offset(*b),
					       f->p.partition });
			pos += b->size();
		}
	return ok;
}

static bool ans_fetch(const FakeSourceConfig &cfg, struct km_wire_rd *r,
		      const struct km_reqhdr &h, FakeRequest *rq,
		      FakeSource::Answer *a)
{
	std::vector<km_proto_topic> t;
	std::vector<km_fetch_req_part> rp;
	std::vector<FetchPart> fp;
	struct km_fetch_req q;
	size_t cap = 4096;
	bool empty = true;

	if (!decode_fetch(r, h.api_version, &t, &rp, &q))
		return false;
	t.resize(q.n_topics);
	for (const km_proto_topic &tp : t)
		for (uint32_t j = tp.first; j < tp.first + tp.count; j++) {
			fp.push_back(fetch_part(cfg, tp.name, rp[j]));
			cap += fp.back().bytes + 512;
			empty &= fp.back().bytes == 0 &&
				 fp.back().p.error_code == 0;
		}
	if (q.n_parts > 0) {
		rq->partition = rp[0].partition;
		rq->offset = rp[0].fetch_offset;
	}
	for (uint32_t j = 0; j < q.n_parts; j++)
		rq->parts.push_back({ rp[j].partition, rp[j].fetch_offset, 0 });
	/* Nothing to send: wait as Kafka does, so a caught-up client polls
	 * at its MaxWaitMs and not in a tight loop. */
	if (empty && !fp.empty())
		a->wait_ms = q.max_wait_ms < 1000 ? q.max_wait_ms : 1000;
	return enc_fetch(h, t, fp, cap, a);
}

/* ---- faults ---- */

bool FakeSource::handle_request(Conn *c, const std::string &frame,
				uint64_t now)
{
	FakeRequest rq;
	Answer a;
	FaultHook hook;

	rq.conn = c->id;
	rq.conn_request = ++c->nreq;
	if (!answer(frame, &rq, &a)) {
		fail(a.error);
		return false;
	}
	for (FakeRequest::Part &x : rq.parts) {
		if (x.partition < 0 || (size_t)x.partition >= by_part_fetch_.size())
			continue;
		if (rq.api_key == KM_API_FETCH)
			x.count = ++by_part_fetch_[(size_t)x.partition];
		if (rq.api_key == KM_API_LIST_OFFSETS)
			x.count = ++by_part_lo_[(size_t)x.partition];
	}
	if (!rq.parts.empty())
		rq.part_count = rq.parts[0].count;
	{
		std::lock_guard<std::mutex> g(mu_);
		hook = hook_;
	}
	apply(c, hook ? hook(rq) : FaultAction(), rq, &a, now);
	return true;
}

/* Flip the last byte of the batch of `partition` (-1: any) holding
 * `offset` (-1: the first batch): inside its records, so only the CRC can
 * tell. */
static bool corrupt(FakeSource::Answer *a, int64_t offset, int32_t partition,
		    std::string *bytes)
{
	for (const auto &b : a->batches) {
		if (offset >= 0 && (offset < b.base || offset > b.last))
			continue;
		if (partition >= 0 && b.partition != partition)
			continue;
		(*bytes)[b.at + b.len - 1] ^= (char)0xff;
		return true;
	}
	return false;
}

/* Rewrite the baseOffset of that batch: outside the CRC, so it still
 * checks. */
static bool rebase(FakeSource::Answer *a, int64_t offset, int32_t partition,
		   int64_t to, std::string *bytes)
{
	for (const auto &b : a->batches) {
		if (offset >= 0 && (offset < b.base || offset > b.last))
			continue;
		if (partition >= 0 && b.partition != partition)
			continue;
		for (int i = 0; i < 8; i++)
			(*bytes)[b.at + KM_BATCH_OFF_BASE_OFFSET + (size_t)i] =
				(char)((uint64_t)to >> (56 - 8 * i));
		return true;
	}
	return false;
}

void FakeSource::apply(Conn *c, const FaultAction &act, const FakeRequest &rq,
		       Answer *a, uint64_t now)
{
	Queued q = { now + (uint64_t)a->wait_ms, a->bytes, Then::kNothing };
	bool applied = true;
	std::string head = q.bytes.substr(4, 64);
	char be[4];

	switch (act.fault) {
	case Fault::kGarbage: /* size and correlation id kept */
		q.bytes.resize(q.bytes.size() < 72 ? 72 : q.bytes.size());
		store_be32(&q.bytes[0], (uint32_t)q.bytes.size() - 4);
		for (size_t i = 8; i < q.bytes.size(); i++)
			q.bytes[i] = (char)xorshift(&rng_);
		break;
	case Fault::kHugeSize:
	case Fault::kNegativeSize:
		store_be32(be, act.fault == Fault::kHugeSize ? 0x7ffffff0u
							     : (uint32_t)-256);
		q.bytes = std::string(be, 4) + head;
		q.then = Then::kSilence;
		break;
	case Fault::kTruncateClose:
	case Fault::kTruncateStall:
		q.bytes.resize(q.bytes.size() / 2);
		q.then = act.fault == Fault::kTruncateClose ? Then::kClose
							    : Then::kSilence;
		break;
	case Fault::kBadCrc:
		applied = corrupt(a, act.crc_offset, act.crc_partition,
				  &q.bytes);
		break;
	case Fault::kBadBaseOffset:
		applied = rebase(a, act.crc_offset, act.crc_partition,
				 act.base_offset_to, &q.bytes);
		break;
	case Fault::kWrongCorrelation:
		store_be32(&q.bytes[4], (uint32_t)rq.correlation_id + 7);
		break;
	case Fault::kStall:
		q.bytes.clear();
		q.then = Then::kSilence;
		break;
	case Fault::kNone:
	case Fault::kCount:
	default:
		applied = false;
		break;
	}
	if (applied)
		faults_[(int)act.fault]++;
	c->queue.push_back(std::move(q));
}

} // namespace kmtest
