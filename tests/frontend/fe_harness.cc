// The front-end suite's server: see fe_harness.h.
#include "fe_harness.h"

#include <librdkafka/rdkafka.h>
#include <liburing.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <memory>

#include "common/errors.h"
#include "fe_support.h"

namespace fetest {

namespace {

const char kClusterId[] = "kmirror-frontend-test";
const int32_t kNodeId = 7;

} // namespace

uint64_t MonoMs()
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

Server::~Server()
{
	Stop();
}

size_t Server::index(const std::string &topic, int32_t partition) const
{
	for (size_t i = 0; i < specs_.size(); i++)
		if (specs_[i].topic == topic && specs_[i].partition == partition)
			return i;
	return (size_t)-1;
}

static std::string Why(const char *what, int rc)
{
	return std::string(what) + ": " + km_strerror(rc);
}

std::string Server::Open(const std::vector<PartSpec> &parts)
{
	char tmpl[] = "/tmp/km-fe-XXXXXX";
	if (mkdtemp(tmpl) == nullptr)
		return "mkdtemp failed";
	dir_ = tmpl;
	int rc = km_uring_init(&ring_, 1024);
	if (rc < 0)
		return Why("km_uring_init", rc);
	ring_up_ = true;
	km_net_config nc = {};
	nc.kind = KM_NET_KERNEL;
	nc.conns_max = 64;
	nc.listeners_max = 2;
	nc.rx_buf_count = 512;
	nc.rx_buf_bytes = 64 * 1024;
	nc.send_queue_max = 32;
	nc.send_iov_max = 80;
	nc.connect_timeout_ms = 5000;
	nc.close_timeout_ms = 500;
	nc.uring = &ring_;
	if ((rc = km_net_create(&nc, &net_)) < 0)
		return Why("km_net_create", rc);
	specs_ = parts;
	parts_ = fe_parts_new((uint32_t)parts.size(), 1000);
	if (parts_ == nullptr)
		return "fe_parts_new failed";
	for (size_t i = 0; i < parts.size(); i++) {
		km_log_config lc;
		km_log *log = nullptr;
		km_local_write *lw = nullptr;
		km_log_config_defaults(&lc, dir_.c_str(), parts[i].topic.c_str(),
				       parts[i].partition);
		lc.segment_bytes = 2 << 20; // rolls under the big messages
		lc.index_bytes_max = 64 * 1024;
		lc.prealloc_bytes = 1 << 20;
		lc.flush_interval_ms = 20;
		if (hold_durability_) {
			lc.flush_interval_ms = 3600 * 1000;
			lc.flush_bytes = 1ull << 40;
		}
		// One topic id per topic, as the daemon gives (its first
		// partition's, drawn at open).
		for (size_t j = 0; j < i; j++)
			if (parts[j].topic == parts[i].topic)
				km_log_topic_id(logs_[j], lc.topic_id);
		if ((rc = km_log_open(&log, &lc, &ring_, nullptr)) < 0)
			return Why("km_log_open", rc);
		logs_.push_back(log);
		if (parts[i].writable) {
			km_local_write_config wc = {};
			wc.log = log;
			wc.mem_bytes = 8 << 20;
			wc.pending_max = 256;
			wc.txn_coordinated = true; /* as the daemon's writers */
			wc.coordinator_only = parts[i].internal;
			if ((rc = km_local_write_create(&wc, &lw)) < 0)
				return Why("km_local_write_create", rc);
		}
		lws_.push_back(lw);
		fe_parts_set(parts_, (uint32_t)i, parts[i].topic.c_str(),
			     parts[i].partition, parts[i].writable, log, lw);
		fe_parts_set_internal(parts_, (uint32_t)i, parts[i].internal);
	}
	km_frontend_config fc = {};
	fc.net = net_;
	fc.parts = fe_parts_table(parts_);
	fc.ops = fe_parts_ops(parts_);
	fc.cluster_id = kClusterId;
	fc.node_id = kNodeId;
	fc.advertised_host = "127.0.0.1";
	fc.frame_bytes_max = 8 << 20;
	fc.conns_max = 32;
	fc.fetch_buf_bytes = 4 << 20;
	fc.fetch_bufs = 4;
	fc.send_iov_max = 80;
	fc.acls = acls_;
	fc.sasl.required = !sasl_users_.empty();
	fc.sasl.users_file = sasl_users_.c_str();
	fc.sasl.mechanisms = sasl_mechs_;
	fc.sasl.reauth_ms = sasl_reauth_ms_;
	if ((rc = km_frontend_create(&fc, &fe_)) < 0)
		return Why("km_frontend_create", rc);
	if (!sasl_users_.empty()) {
		km_frontend_listener l = {};
		snprintf(l.name, sizeof(l.name), "SASL_PLAINTEXT");
		l.protocol = KM_SEC_SASL_PLAINTEXT;
		rc = km_frontend_listen_as(fe_, &l, "127.0.0.1", 0);
	} else {
		rc = km_frontend_listen(fe_, "127.0.0.1", 0);
	}
	if (rc < 0)
		return Why("km_frontend_listen", rc);
	port_ = km_frontend_listener_port(fe_, 0);
	return "";
}

std::string Server::Start(const std::vector<PartSpec> &parts)
{
	std::string err = Open(parts);
	if (!err.empty())
		return err;
	th_ = std::thread(&Server::Loop, this);
	return "";
}

void Server::Fail(const std::string &what)
{
	std::lock_guard<std::mutex> g(mu_);
	if (loop_err_.empty())
		loop_err_ = what;
}

std::string Server::LoopError()
{
	std::lock_guard<std::mutex> g(mu_);
	return loop_err_;
}

void Server::RunTasks()
{
	// Bounded: what was queued when we looked.
	std::deque<std::function<void()> *> queued;
	{
		std::lock_guard<std::mutex> g(mu_);
		queued.swap(tasks_);
		has_tasks_ = false;
	}
	for (auto *t : queued)
		(*t)();
}

void Server::Turn()
{
	int rc = km_uring_poll(&ring_, false);
	if (rc < 0)
		Fail(Why("km_uring_poll", rc));
	if ((rc = km_net_poll(net_)) < 0)
		Fail(Why("km_net_poll", rc));
	for (km_local_write *lw : lws_)
		if (lw != nullptr)
			km_local_write_poll(lw);
	uint64_t now = MonoMs();
	for (km_log *log : logs_)
		km_log_tick(log, now);
	km_frontend_tick(fe_, now);
	RunTasks();
}

void Server::Idle()
{
	if (km_net_wants_poll(net_) || has_tasks_.load())
		return;
	if (km_uring_submit(&ring_) < 0)
		return;
	uint64_t now = MonoMs(), next = km_frontend_next_deadline_ms(fe_);
	uint64_t wait_ms = 5;
	if (next <= now)
		return;
	if (next - now < wait_ms)
		wait_ms = next - now;
	__kernel_timespec ts{0, (long long)wait_ms * 1000000LL};
	io_uring_cqe *cqe;
	(void)io_uring_wait_cqe_timeout(&ring_.ring, &cqe, &ts);
}

void Server::Drain()
{
	km_frontend_stop(fe_);
	uint64_t end = MonoMs() + 10000;
	for (;;) {
		bool idle = km_frontend_idle(fe_);
		for (km_local_write *lw : lws_)
			idle = idle && (lw == nullptr || km_local_write_pending(lw) == 0);
		if (idle)
			break;
		if (MonoMs() > end) {
			Fail("front-end did not drain within 10 s");
			break;
		}
		Turn();
		Idle();
	}
	RunTasks();
}

void Server::Loop()
{
	while (!stop_.load(std::memory_order_acquire)) {
		Turn();
		Idle();
	}
	Drain();
}

void Server::Run(const std::function<void()> &fn)
{
	if (!th_.joinable() || std::this_thread::get_id() == th_.get_id()) {
		fn();
		return;
	}
	bool done = false;
	std::function<void()> task = [&] {
		fn();
		std::lock_guard<std::mutex> g(mu_);
		done = true;
		cv_.notify_all();
	};
	std::unique_lock<std::mutex> lk(mu_);
	tasks_.push_back(&task);
	has_tasks_ = true;
	cv_.wait(lk, [&] { return done; });
}

km_frontend_stats Server::Stats()
{
	km_frontend_stats s = {};
	Run([&] { km_frontend_get_stats(fe_, &s); });
	return s;
}

km_net_stats Server::NetStats()
{
	km_net_stats s = {};
	Run([&] { km_net_get_stats(net_, &s); });
	return s;
}

int64_t Server::EndOffset(size_t i)
{
	int64_t v = -1;
	Run([&] { v = km_log_end_offset(logs_[i]); });
	return v;
}

uint64_t Server::ProduceCalls(size_t i)
{
	uint64_t v = 0;
	Run([&] { v = fe_parts_produce_calls(parts_, (uint32_t)i); });
	return v;
}

int Server::GroupSync(km_group_sync *s, int timeout_ms)
{
	// Shared: a callback that comes after the deadline still has its
	// place to write to.
	using Flag = std::shared_ptr<std::atomic<int>>;
	Flag rc = std::make_shared<std::atomic<int>>(1);
	Flag *held = new Flag(rc);
	int sub = 0;
	Run([&] {
		sub = km_frontend_group_sync(
			fe_, s,
			[](void *arg, int r) {
				Flag *p = static_cast<Flag *>(arg);
				(*p)->store(r);
				delete p;
			},
			held);
	});
	if (sub < 0) {
		delete held; // done will not run
		return sub;
	}
	uint64_t end = MonoMs() + (uint64_t)timeout_ms;
	while (rc->load() == 1 && MonoMs() < end)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	return rc->load() == 1 ? -ETIMEDOUT : rc->load();
}

void Server::SetError(size_t i, int err)
{
	Run([&] { fe_parts_set_error(parts_, (uint32_t)i, err); });
}

void Server::Stop()
{
	if (th_.joinable()) {
		stop_.store(true, std::memory_order_release);
		th_.join();
	}
	// The loop's thread is gone: this thread owns everything now.
	if (net_ != nullptr)
		km_net_destroy(net_); // on_close callbacks still find fe_
	net_ = nullptr;
	km_frontend_destroy(fe_);
	fe_ = nullptr;
	for (km_log *log : logs_) {
		int rc = km_log_close(log);
		if (rc < 0)
			Fail(Why("km_log_close", rc));
	}
	logs_.clear();
	for (km_local_write *lw : lws_)
		km_local_write_destroy(lw);
	lws_.clear();
	fe_parts_free(parts_);
	parts_ = nullptr;
	if (ring_up_)
		km_uring_exit(&ring_);
	ring_up_ = false;
	if (!dir_.empty() && system(("rm -rf " + dir_).c_str()) != 0)
		Fail("rm -rf " + dir_ + " failed");
	dir_.clear();
}

// ---- clients ----

static rd_kafka_conf_t *MakeConf(const std::string &bootstrap,
				 const Props &props, std::string *err)
{
	char errstr[512];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	Props all = {{"bootstrap.servers", bootstrap}, {"log_level", "3"}};
	all.insert(all.end(), props.begin(), props.end());
	for (const auto &p : all)
		if (rd_kafka_conf_set(conf, p.first.c_str(), p.second.c_str(),
				      errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
			*err = p.first + ": " + errstr;
			rd_kafka_conf_destroy(conf);
			return nullptr;
		}
	return conf;
}

static void OnDelivery(rd_kafka_t *, const rd_kafka_message_t *m, void *)
{
	Msg *x = static_cast<Msg *>(m->_private);
	x->err = m->err;
	x->partition = m->partition;
	x->offset = m->offset;
	x->delivered = true;
}

Producer::~Producer()
{
	if (rk != nullptr)
		rd_kafka_destroy(static_cast<rd_kafka_t *>(rk));
}

std::string Producer::Create(const std::string &bootstrap, const Props &extra)
{
	std::string err;
	char errstr[512];
	rd_kafka_conf_t *conf = MakeConf(bootstrap, extra, &err);
	if (conf == nullptr)
		return err;
	rd_kafka_conf_set_dr_msg_cb(conf, OnDelivery);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (rk == nullptr) {
		rd_kafka_conf_destroy(conf);
		return errstr;
	}
	return "";
}

static rd_kafka_resp_err_t ProduceOne(rd_kafka_t *rk, const std::string &topic,
				      Msg *m)
{
	rd_kafka_headers_t *hdrs = nullptr;
	if (!m->headers.empty()) {
		hdrs = rd_kafka_headers_new(m->headers.size());
		for (const auto &h : m->headers)
			rd_kafka_header_add(hdrs, h.name.data(),
					    (ssize_t)h.name.size(),
					    h.null ? nullptr : h.value.data(),
					    h.null ? 0 : (ssize_t)h.value.size());
	}
	rd_kafka_resp_err_t e = rd_kafka_producev(
		rk, RD_KAFKA_V_TOPIC(topic.c_str()),
		RD_KAFKA_V_PARTITION(m->partition),
		RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
		RD_KAFKA_V_KEY(m->key_null ? nullptr : m->key.data(),
			       m->key_null ? 0 : m->key.size()),
		RD_KAFKA_V_VALUE(m->value_null ? nullptr : (void *)m->value.data(),
				 m->value_null ? 0 : m->value.size()),
		RD_KAFKA_V_TIMESTAMP(m->timestamp),
		RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_OPAQUE(m),
		RD_KAFKA_V_END);
	if (e != RD_KAFKA_RESP_ERR_NO_ERROR && hdrs != nullptr)
		rd_kafka_headers_destroy(hdrs);
	return e;
}

std::string Producer::Send(const std::string &topic, std::vector<Msg> *msgs,
			   int timeout_ms)
{
	rd_kafka_t *k = static_cast<rd_kafka_t *>(rk);
	for (Msg &m : *msgs) {
		m.delivered = false;
		rd_kafka_resp_err_t e = ProduceOne(k, topic, &m);
		while (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
			rd_kafka_poll(k, 10);
			e = ProduceOne(k, topic, &m);
		}
		if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
			return std::string("producev: ") + rd_kafka_err2str(e);
	}
	if (rd_kafka_flush(k, timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR)
		return "flush timed out";
	for (const Msg &m : *msgs)
		if (!m.delivered)
			return "a message has no delivery report";
	return "";
}

Consumer::~Consumer()
{
	Stop();
}

std::string Consumer::Start(const std::string &bootstrap,
			    const std::string &topic,
			    const std::vector<int32_t> &partitions,
			    int64_t offset, const Props &extra)
{
	std::string err;
	char errstr[512];
	Props props = {{"check.crcs", "true"},
		       {"enable.partition.eof", "true"},
		       {"fetch.wait.max.ms", "100"},
		       {"client.id", "fe-test-consumer"}};
	props.insert(props.end(), extra.begin(), extra.end());
	rd_kafka_conf_t *conf = MakeConf(bootstrap, props, &err);
	if (conf == nullptr)
		return err;
	rd_kafka_t *k = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr,
				     sizeof(errstr));
	if (k == nullptr) {
		rd_kafka_conf_destroy(conf);
		return errstr;
	}
	rk = k;
	rkt = rd_kafka_topic_new(k, topic.c_str(), nullptr);
	queue = rd_kafka_queue_new(k);
	for (int32_t p : partitions) {
		if (rd_kafka_consume_start_queue(
			    static_cast<rd_kafka_topic_t *>(rkt), p, offset,
			    static_cast<rd_kafka_queue_t *>(queue)) < 0)
			return std::string("consume_start: ") +
			       rd_kafka_err2str(rd_kafka_last_error());
		parts.push_back(p);
	}
	return "";
}

static Msg FromKafka(const rd_kafka_message_t *m)
{
	Msg x;
	rd_kafka_headers_t *hdrs = nullptr;
	rd_kafka_timestamp_type_t tt;

	x.partition = m->partition;
	x.offset = m->offset;
	x.key_null = m->key == nullptr;
	if (m->key != nullptr)
		x.key.assign(static_cast<const char *>(m->key), m->key_len);
	x.value_null = m->payload == nullptr;
	if (m->payload != nullptr)
		x.value.assign(static_cast<const char *>(m->payload), m->len);
	x.timestamp = rd_kafka_message_timestamp(m, &tt);
	if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
		const char *name;
		const void *val;
		size_t size;
		for (size_t i = 0; rd_kafka_header_get_all(hdrs, i, &name, &val,
							   &size) ==
				   RD_KAFKA_RESP_ERR_NO_ERROR;
		     i++)
			x.headers.push_back(
				{name, val == nullptr,
				 val ? std::string(static_cast<const char *>(val),
						   size)
				     : std::string()});
	}
	return x;
}

bool Consumer::PollUntil(const std::function<bool()> &done, int timeout_ms)
{
	uint64_t end = MonoMs() + (uint64_t)timeout_ms;
	rd_kafka_queue_t *q = static_cast<rd_kafka_queue_t *>(queue);

	while (!done()) {
		if (MonoMs() > end)
			return false;
		rd_kafka_message_t *m = rd_kafka_consume_queue(q, 50);
		if (m == nullptr)
			continue;
		if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
			eofs.push_back({m->partition, m->offset});
		else if (m->err)
			errors.push_back(rd_kafka_message_errstr(m));
		else
			msgs.push_back(FromKafka(m));
		rd_kafka_message_destroy(m);
	}
	return true;
}

int64_t Consumer::Eof(int32_t partition) const
{
	int64_t at = -1;
	for (const auto &e : eofs)
		if (e.first == partition)
			at = e.second;
	return at;
}

void Consumer::Stop()
{
	for (int32_t p : parts)
		rd_kafka_consume_stop(static_cast<rd_kafka_topic_t *>(rkt), p);
	parts.clear();
	if (queue != nullptr)
		rd_kafka_queue_destroy(static_cast<rd_kafka_queue_t *>(queue));
	if (rkt != nullptr)
		rd_kafka_topic_destroy(static_cast<rd_kafka_topic_t *>(rkt));
	if (rk != nullptr)
		rd_kafka_destroy(static_cast<rd_kafka_t *>(rk));
	queue = rkt = rk = nullptr;
}

std::string RandomBytes(size_t n, uint64_t seed)
{
	std::string s(n, '\0');
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		s[i] = (char)(x >> 24);
	}
	return s;
}

std::string Shell(const std::string &cmd, int *status)
{
	std::string out;
	char buf[4096];
	FILE *f = popen(cmd.c_str(), "r");
	if (f == nullptr) {
		*status = -1;
		return out;
	}
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		out.append(buf, n);
	*status = pclose(f);
	return out;
}

void Server::FailMarkers(size_t i, uint32_t n)
{
	Run([&] { fe_parts_fail_markers(parts_, (uint32_t)i, n); });
}

uint64_t Server::MarkerCalls(size_t i)
{
	uint64_t v = 0;
	Run([&] { v = fe_parts_marker_calls(parts_, (uint32_t)i); });
	return v;
}

} // namespace fetest
