/* The producing and consuming half of kafka_peers.h: real librdkafka
 * clients with deterministic payloads, every wait bounded by the spec's
 * timeout. */
#include "kafka_peers.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>

namespace kmtest {

namespace {

struct DeliveryStats {
	int64_t delivered = 0, failed = 0;
	std::string first_error;
};

void on_delivery(rd_kafka_t *, const rd_kafka_message_t *m, void *opaque)
{
	DeliveryStats *st = (DeliveryStats *)opaque;

	if (!m->err)
		st->delivered++;
	else if (st->failed++ == 0)
		st->first_error = rd_kafka_err2str(m->err);
}

std::string take_error(rd_kafka_error_t *error, const char *what)
{
	std::string s;

	if (!error)
		return "";
	s = std::string(what) + ": " + rd_kafka_error_string(error);
	rd_kafka_error_destroy(error);
	return s;
}

std::string flush(rd_kafka_t *rk, int timeout_ms)
{
	rd_kafka_resp_err_t err = rd_kafka_flush(rk, timeout_ms);

	return err ? "flush: " + std::string(rd_kafka_err2str(err)) : "";
}

Props producer_props(const std::string &bootstrap, const ProduceSpec &s)
{
	Props p = {
		{"bootstrap.servers", bootstrap},
		{"compression.codec", s.compression},
		{"message.timeout.ms", std::to_string(s.timeout_ms)},
	};

	if (s.mode == ProducerMode::kPlain) {
		p.push_back({"enable.idempotence", "false"});
		p.push_back({"acks", "1"});
	} else if (s.mode == ProducerMode::kIdempotent) {
		p.push_back({"enable.idempotence", "true"});
	} else {
		p.push_back({"transactional.id", s.transactional_id});
		p.push_back({"transaction.timeout.ms",
			     std::to_string(s.timeout_ms)});
	}
	p.insert(p.end(), s.conf.begin(), s.conf.end());
	return p;
}

rd_kafka_t *producer_new(const std::string &bootstrap, const ProduceSpec &s,
			 DeliveryStats *st, std::string *err)
{
	return client_new(RD_KAFKA_PRODUCER, producer_props(bootstrap, s), err,
			  [st](rd_kafka_conf_t *conf) {
				  rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
				  rd_kafka_conf_set_opaque(conf, st);
			  });
}

/* Enqueue message seq, serving delivery reports while the queue is full. */
std::string send_one(rd_kafka_t *rk, const ProduceSpec &s, int64_t seq,
		     Clock::time_point deadline)
{
	size_t size = s.value_size_of ? s.value_size_of(seq) : s.value_size;
	std::string value = payload_value(s.seed, s.partition, seq, size);
	std::optional<std::string> key =
		payload_key(s.keys, s.seed, s.partition, seq);
	/* The macros take plain expressions, not conditionals. */
	const void *kp = key ? key->data() : nullptr;
	size_t klen = key ? key->size() : 0;
	rd_kafka_resp_err_t err;

	for (;;) { /* bounded by the deadline */
		rd_kafka_headers_t *h = nullptr;

		if (s.headers > 0)
			h = rd_kafka_headers_new((size_t)s.headers);
		for (const Header &x :
		     payload_headers(s.seed, s.partition, seq, s.headers))
			rd_kafka_header_add(h, x.first.c_str(), -1,
					    x.second->data(),
					    (ssize_t)x.second->size());
		err = rd_kafka_producev(
			rk, RD_KAFKA_V_TOPIC(s.topic.c_str()),
			RD_KAFKA_V_PARTITION(s.partition),
			RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			RD_KAFKA_V_KEY(kp, klen),
			RD_KAFKA_V_VALUE(&value[0], value.size()),
			RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
		if (err && h)
			rd_kafka_headers_destroy(h);
		if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL || ms_left(deadline) == 0)
			break;
		rd_kafka_poll(rk, 10);
	}
	return err ? "producev: " + std::string(rd_kafka_err2str(err)) : "";
}

/* Commit transaction number txn (from 1), or flush and abort it. */
std::string end_txn(rd_kafka_t *rk, const ProduceSpec &s, int64_t txn,
		    ProduceResult *res)
{
	std::string err;

	if (s.abort_every == 0 || txn % s.abort_every != 0) {
		res->committed++;
		return take_error(rd_kafka_commit_transaction(rk, s.timeout_ms),
				  "commit_transaction");
	}
	res->aborted++;
	err = flush(rk, s.timeout_ms);
	return err.empty() ? take_error(rd_kafka_abort_transaction(
						rk, s.timeout_ms),
					"abort_transaction")
			   : err;
}

std::string send_all(rd_kafka_t *rk, const ProduceSpec &s, ProduceResult *res)
{
	Clock::time_point deadline = deadline_in(s.timeout_ms);
	bool txn = s.mode == ProducerMode::kTransactional;
	int64_t per_txn = s.txn_size > 0 ? s.txn_size : s.count;
	std::string err;
	int64_t i;

	if (txn)
		err = take_error(rd_kafka_init_transactions(rk, s.timeout_ms),
				 "init_transactions");
	for (i = 0; i < s.count && err.empty(); i++) {
		if (txn && i % per_txn == 0)
			err = take_error(rd_kafka_begin_transaction(rk),
					 "begin_transaction");
		if (err.empty())
			err = send_one(rk, s, s.first_seq + i, deadline);
		if (err.empty() && s.flush_every > 0 &&
		    (i + 1) % s.flush_every == 0)
			err = flush(rk, ms_left(deadline));
		if (err.empty() && txn && (i + 1) % per_txn == 0)
			err = end_txn(rk, s, (i + 1) / per_txn, res);
	}
	if (err.empty() && txn && i % per_txn != 0)
		err = end_txn(rk, s, i / per_txn + 1, res);
	return err;
}

} // namespace

std::string produce(const std::string &bootstrap, const ProduceSpec &spec,
		    ProduceResult *result)
{
	DeliveryStats st;
	ProduceResult res;
	std::string err;
	rd_kafka_t *rk = producer_new(bootstrap, spec, &st, &err);

	if (!rk)
		return err;
	err = send_all(rk, spec, &res);
	if (err.empty())
		err = flush(rk, spec.timeout_ms);
	rd_kafka_destroy(rk);
	res.delivered = st.delivered;
	res.failed = spec.count - st.delivered;
	res.first_error = st.first_error;
	if (err.empty() && res.failed != 0)
		err = "delivery reports: " + std::to_string(st.delivered) +
		      " of " + std::to_string(spec.count) + " delivered (" +
		      st.first_error + ")";
	if (result)
		*result = res;
	return err;
}

std::string codec_unsupported(const std::string &codec)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	std::string why = conf_set_all(conf, {{"compression.codec", codec}});

	rd_kafka_conf_destroy(conf);
	return why;
}

/* ---- consuming ---- */

namespace {

Message convert(const rd_kafka_message_t *m)
{
	Message c;
	rd_kafka_headers_t *hdrs = nullptr;
	const char *name;
	const void *val;
	size_t size;

	c.partition = m->partition;
	c.offset = m->offset;
	if (m->key)
		c.key = std::string((const char *)m->key, m->key_len);
	if (m->payload)
		c.value = std::string((const char *)m->payload, m->len);
	c.timestamp = rd_kafka_message_timestamp(m, &c.timestamp_type);
	if (rd_kafka_message_headers(m, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR)
		return c;
	for (size_t i = 0; rd_kafka_header_get_all(hdrs, i, &name, &val,
						   &size) ==
			   RD_KAFKA_RESP_ERR_NO_ERROR;
	     i++)
		c.headers.push_back(
			{name, val ? std::optional<std::string>(std::string(
					     (const char *)val, size))
				   : std::nullopt});
	return c;
}

rd_kafka_t *consumer_new(const std::string &bootstrap, const ConsumeSpec &s,
			 std::string *err)
{
	static std::atomic<int> group_no;
	Props p = {
		{"bootstrap.servers", bootstrap},
		{"group.id", "kmtest-" + std::to_string(getpid()) + "-" +
				     std::to_string(group_no++)},
		{"check.crcs", s.check_crcs ? "true" : "false"},
		{"isolation.level",
		 s.read_committed ? "read_committed" : "read_uncommitted"},
		{"enable.auto.commit", "false"},
		{"enable.partition.eof", "true"},
		{"auto.offset.reset", "error"},
		/* The mock waits out all of MaxWaitMs at the high watermark. */
		{"fetch.wait.max.ms", "10"},
		{"session.timeout.ms", "6000"},
		{"heartbeat.interval.ms", "500"},
	};
	rd_kafka_t *rk;

	p.insert(p.end(), s.conf.begin(), s.conf.end());
	rk = client_new(RD_KAFKA_CONSUMER, p, err);
	if (rk)
		rd_kafka_poll_set_consumer(rk);
	return rk;
}

std::string assign(rd_kafka_t *rk, const ConsumeSpec &s)
{
	rd_kafka_topic_partition_list_t *parts =
		rd_kafka_topic_partition_list_new(1);
	rd_kafka_resp_err_t err;

	rd_kafka_topic_partition_list_add(parts, s.topic.c_str(), s.partition)
		->offset = s.from;
	err = rd_kafka_assign(rk, parts);
	rd_kafka_topic_partition_list_destroy(parts);
	return err ? "assign: " + std::string(rd_kafka_err2str(err)) : "";
}

std::string error_text(const rd_kafka_message_t *m)
{
	return std::string(m->rkt ? rd_kafka_topic_name(m->rkt) : "-") + " [" +
	       std::to_string(m->partition) + "] " + rd_kafka_err2name(m->err) +
	       ": " + rd_kafka_message_errstr(m);
}

/* Poll until offset `to` is reached (a message at to - 1, or the end of
 * the partition at or past `to`), the first error, or the deadline. */
std::string poll_range(rd_kafka_t *rk, const ConsumeSpec &s, int64_t to,
		       Clock::time_point deadline, std::vector<Message> *out)
{
	for (;;) { /* bounded by the deadline */
		int left = ms_left(deadline);
		rd_kafka_message_t *m =
			left ? rd_kafka_consumer_poll(rk, std::min(left, 100))
			     : nullptr;
		bool done = false;
		std::string err;

		if (!left)
			return "consumed up to offset " +
			       std::to_string(out->empty() ? s.from - 1
							   : out->back().offset) +
			       ", not to " + std::to_string(to) + ", in time";
		if (!m)
			continue;
		if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
			done = m->offset >= to;
		else if (m->err)
			err = error_text(m);
		else if (m->offset < to)
			out->push_back(convert(m));
		done = done || (!m->err && m->offset >= to - 1);
		rd_kafka_message_destroy(m);
		if (done || !err.empty())
			return err;
	}
}

} // namespace

std::string consume(const std::string &bootstrap, const ConsumeSpec &spec,
		    std::vector<Message> *out)
{
	Clock::time_point deadline = deadline_in(spec.timeout_ms);
	std::string err;
	rd_kafka_t *rk = consumer_new(bootstrap, spec, &err);
	int64_t low = 0, to = spec.to;
	rd_kafka_resp_err_t rerr = RD_KAFKA_RESP_ERR_NO_ERROR;

	if (!rk)
		return err;
	if (to < 0)
		rerr = rd_kafka_query_watermark_offsets(
			rk, spec.topic.c_str(), spec.partition, &low, &to,
			ms_left(deadline));
	if (rerr)
		err = "watermarks: " + std::string(rd_kafka_err2str(rerr));
	if (err.empty() && spec.from < to)
		err = assign(rk, spec);
	if (err.empty() && spec.from < to)
		err = poll_range(rk, spec, to, deadline, out);
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	return err;
}

} // namespace kmtest
