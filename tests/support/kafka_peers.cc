/* Real Kafka peers for tests; see kafka_peers.h.
 * Goal: one way, shared by every suite, to start librdkafka's mock cluster
 * (in process or as kmirror-mock-source), produce with real librdkafka
 * producers and read a partition back with a checking consumer.
 * Method: librdkafka's C API; every wait bounded by the caller's timeout. */
#include "kafka_peers.h"

#include <signal.h>

#include "tools/payload.h"

namespace kmtest {

namespace {

std::string err_text(const char *what, rd_kafka_resp_err_t err)
{
	return err ? std::string(what) + ": " + rd_kafka_err2str(err) : "";
}

} // namespace

std::string conf_set_all(rd_kafka_conf_t *conf, const Props &props)
{
	char errstr[512];

	for (const auto &kv : props)
		if (rd_kafka_conf_set(conf, kv.first.c_str(),
				      kv.second.c_str(), errstr,
				      sizeof(errstr)) != RD_KAFKA_CONF_OK)
			return kv.first + "=" + kv.second + ": " + errstr;
	return "";
}

rd_kafka_t *client_new(rd_kafka_type_t type, const Props &props,
		       std::string *err,
		       const std::function<void(rd_kafka_conf_t *)> &configure)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char errstr[512];
	rd_kafka_t *rk = nullptr;

	*err = conf_set_all(conf, {{"log_level", "3"}});
	if (err->empty())
		*err = conf_set_all(conf, props);
	if (err->empty() && configure)
		configure(conf);
	if (err->empty())
		rk = rd_kafka_new(type, conf, errstr, sizeof(errstr));
	if (err->empty() && !rk)
		*err = std::string("rd_kafka_new: ") + errstr;
	if (!rk)
		rd_kafka_conf_destroy(conf);
	return rk;
}

std::string watermarks(const std::string &bootstrap, const std::string &topic,
		       int32_t partition, int64_t *low, int64_t *high,
		       int timeout_ms)
{
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_PRODUCER,
				    {{"bootstrap.servers", bootstrap}}, &err);
	rd_kafka_resp_err_t rerr;

	if (!rk)
		return err;
	rerr = rd_kafka_query_watermark_offsets(rk, topic.c_str(), partition,
						low, high, timeout_ms);
	rd_kafka_destroy(rk);
	return err_text("watermarks", rerr);
}

namespace {

/* The leader of topic/partition in md, or an error. */
std::string find_leader(const struct rd_kafka_metadata *md,
			const std::string &topic, int32_t partition,
			int32_t *broker, std::string *host, uint16_t *port)
{
	for (int t = 0; t < md->topic_cnt; t++) {
		const rd_kafka_metadata_topic_t *mt = &md->topics[t];

		if (topic != mt->topic)
			continue;
		if (mt->err)
			return err_text(("topic " + topic).c_str(), mt->err);
		for (int p = 0; p < mt->partition_cnt; p++)
			if (mt->partitions[p].id == partition)
				*broker = mt->partitions[p].leader;
	}
	for (int b = 0; b < md->broker_cnt && *broker >= 0; b++)
		if (md->brokers[b].id == *broker) {
			*host = md->brokers[b].host;
			*port = (uint16_t)md->brokers[b].port;
			return "";
		}
	return "no leader for " + topic + "/" + std::to_string(partition);
}

} // namespace

std::string partition_leader(const std::string &bootstrap,
			     const std::string &topic, int32_t partition,
			     int32_t *broker, std::string *host,
			     uint16_t *port, int timeout_ms)
{
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_PRODUCER,
				    {{"bootstrap.servers", bootstrap}}, &err);
	rd_kafka_topic_t *rkt;
	const struct rd_kafka_metadata *md = nullptr;
	rd_kafka_resp_err_t rerr;

	if (!rk)
		return err;
	rkt = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
	rerr = rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms);
	*broker = -1;
	err = rerr ? err_text("metadata", rerr)
		   : find_leader(md, topic, partition, broker, host, port);
	if (md)
		rd_kafka_metadata_destroy(md);
	rd_kafka_topic_destroy(rkt);
	rd_kafka_destroy(rk);
	return err;
}

/* ---- MockCluster ---- */

MockCluster::MockCluster(int brokers)
{
	rk_ = client_new(RD_KAFKA_PRODUCER, {}, &error_);
	if (!rk_)
		return;
	mock_ = rd_kafka_mock_cluster_new(rk_, brokers);
	if (!mock_) {
		error_ = "rd_kafka_mock_cluster_new failed";
		return;
	}
	bootstrap_ = rd_kafka_mock_cluster_bootstraps(mock_);
	if (!parse_bootstrap(bootstrap_, &host_, &port_))
		error_ = "bad bootstrap list " + bootstrap_;
}

MockCluster::~MockCluster()
{
	if (mock_)
		rd_kafka_mock_cluster_destroy(mock_);
	if (rk_)
		rd_kafka_destroy(rk_);
}

std::string MockCluster::create_topic(const std::string &name,
				      int partitions, int replication)
{
	if (!mock_)
		return "no mock cluster: " + error_;
	return err_text(("create topic " + name).c_str(),
			rd_kafka_mock_topic_create(mock_, name.c_str(),
						   partitions, replication));
}

std::string MockCluster::set_leader(const std::string &topic,
				    int32_t partition, int32_t broker)
{
	if (!mock_)
		return "no mock cluster: " + error_;
	return err_text("set leader", rd_kafka_mock_partition_set_leader(
					      mock_, topic.c_str(), partition,
					      broker));
}

void MockCluster::push_request_errors(
	int16_t api_key, const std::vector<rd_kafka_resp_err_t> &errors)
{
	if (mock_ && !errors.empty())
		rd_kafka_mock_push_request_errors_array(mock_, api_key,
							errors.size(),
							errors.data());
}

std::string MockCluster::set_broker_down(int32_t broker)
{
	if (!mock_)
		return "no mock cluster: " + error_;
	return err_text("broker down",
			rd_kafka_mock_broker_set_down(mock_, broker));
}

std::string MockCluster::set_broker_up(int32_t broker)
{
	if (!mock_)
		return "no mock cluster: " + error_;
	return err_text("broker up", rd_kafka_mock_broker_set_up(mock_, broker));
}

/* ---- MockSource ---- */

std::string MockSource::start(const std::string &exe,
			      const std::vector<std::string> &args,
			      int timeout_ms)
{
	std::vector<std::string> argv = {exe};
	std::string line, err;
	ChildResult res;

	argv.insert(argv.end(), args.begin(), args.end());
	argv.push_back("--exit-with-parent");
	err = child_.spawn(argv);
	if (err.empty())
		err = child_.read_line(timeout_ms, &line);
	if (err.empty() && line.compare(0, 10, "bootstrap=") != 0)
		err = "not a bootstrap line: '" + line + "'";
	if (err.empty())
		bootstrap_ = line.substr(10);
	if (err.empty() && !parse_bootstrap(bootstrap_, &host_, &port_))
		err = "bad bootstrap list '" + bootstrap_ + "'";
	if (!err.empty() && child_.running()) {
		child_.kill(SIGKILL);
		child_.wait(timeout_ms, &res);
	}
	return err;
}

std::string MockSource::stop(int timeout_ms, ChildResult *res)
{
	std::string err = child_.kill(SIGTERM);

	return err.empty() ? child_.wait(timeout_ms, res) : err;
}

/* ---- payloads ---- */

std::string payload_value(uint64_t seed, int32_t partition, int64_t seq,
			  size_t size)
{
	std::string v(size, '\0');

	km_payload_value(seed, partition, seq, &v[0], size);
	return v;
}

std::optional<std::string> payload_key(Keys keys, uint64_t seed,
				       int32_t partition, int64_t seq)
{
	char k[KM_PAYLOAD_TEXT_BYTES_MAX];

	if (keys == Keys::kNone)
		return std::nullopt;
	if (keys == Keys::kSeq)
		return std::string(k, (size_t)km_payload_key_seq(seq, k));
	return std::string(k, (size_t)km_payload_key_random(seed, partition,
							    seq, k));
}

std::vector<Header> payload_headers(uint64_t seed, int32_t partition,
				    int64_t seq, int n)
{
	char name[KM_PAYLOAD_TEXT_BYTES_MAX], value[KM_PAYLOAD_TEXT_BYTES_MAX];
	std::vector<Header> h;

	for (int i = 0; i < n; i++) {
		int len = km_payload_header(seed, partition, seq, i, name,
					    value);

		h.push_back({name, std::string(value, (size_t)len)});
	}
	return h;
}

} // namespace kmtest
