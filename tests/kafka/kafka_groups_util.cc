/* Kafka's group tools as the kafka suites drive them (kafka_groups_util.h). */
#include "tests/kafka/kafka_groups_util.h"

#include <jansson.h>
#include <string.h>

#include <sstream>

namespace kmtest {

const char *const kVerifiable = "org.apache.kafka.tools.VerifiableConsumer";
const char *const kGroupCmd = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";

/* One JSON event line into *c. */
void take_event(const std::string &line, Consumed *c)
{
	json_t *j = json_loads(line.c_str(), 0, nullptr);
	const char *name = json_string_value(json_object_get(j, "name"));
	size_t i;
	json_t *p;

	if (name == nullptr) {
		json_decref(j);
		return;
	}
	if (strcmp(name, "partitions_assigned") == 0)
		c->assigned = true;
	if (strcmp(name, "records_consumed") == 0)
		json_array_foreach(json_object_get(j, "partitions"), i, p) {
			int part = (int)json_integer_value(json_object_get(p, "partition"));
			int64_t lo = json_integer_value(json_object_get(p, "minOffset"));
			int64_t hi = json_integer_value(json_object_get(p, "maxOffset"));
			int64_t n = json_integer_value(json_object_get(p, "count"));
			if (!c->first.count(part) || lo < c->first[part])
				c->first[part] = lo;
			if (!c->last.count(part) || hi > c->last[part])
				c->last[part] = hi;
			c->count[part] += n;
			c->total += n;
		}
	if (strcmp(name, "offsets_committed") == 0 &&
	    json_is_true(json_object_get(j, "success")))
		c->commit_ms = json_integer_value(json_object_get(j, "timestamp"));
	if (strcmp(name, "offsets_committed") == 0 &&
	    json_is_true(json_object_get(j, "success")))
		json_array_foreach(json_object_get(j, "offsets"), i, p)
			c->committed[(int)json_integer_value(json_object_get(p, "partition"))] =
				json_integer_value(json_object_get(p, "offset"));
	json_decref(j);
}

std::vector<std::string> verifiable_args(const std::string &bootstrap,
					 const std::string &topic,
					 const std::string &group,
					 const std::string &protocol, int64_t max)
{
	std::vector<std::string> a = { "--bootstrap-server", bootstrap, "--topic",
				       topic, "--group-id", group,
				       "--group-protocol", protocol,
				       "--reset-policy", "earliest" };
	if (max > 0) {
		a.push_back("--max-messages");
		a.push_back(std::to_string(max));
	}
	return a;
}

/* kafka-verifiable-consumer until it has read max records (and committed
 * them, which it does after each poll). */
std::string verifiable_consume(const std::string &bootstrap,
			       const std::string &topic, const std::string &group,
			       const std::string &protocol, int64_t max,
			       Consumed *c)
{
	ChildResult r = kafka_tool(kVerifiable,
				   verifiable_args(bootstrap, topic, group, protocol, max),
				   120000);
	std::istringstream in(r.out);
	std::string line;

	*c = Consumed();
	while (std::getline(in, line))
		take_event(line, c);
	if (r.exit_code != 0)
		return "kafka-verifiable-consumer: " + r.describe() + "\n" + r.out;
	if (c->total != max)
		return "kafka-verifiable-consumer read " + std::to_string(c->total) +
		       " records, not " + std::to_string(max) + ":\n" + r.out + r.err;
	return "";
}

int64_t num_or_none(const std::string &s)
{
	return s == "-" ? -1 : std::stoll(s);
}

std::string group_cmd(const std::string &bootstrap,
		      const std::vector<std::string> &args, ChildResult *r)
{
	std::vector<std::string> a = { "--bootstrap-server", bootstrap };
	a.insert(a.end(), args.begin(), args.end());
	*r = kafka_tool(kGroupCmd, a, 120000);
	return r->exit_code == 0 ? "" : "kafka-consumer-groups: " + r->describe() +
						"\n" + r->out;
}

/* kafka-consumer-groups --describe --group: partition -> row of topic. */
std::string describe(const std::string &bootstrap, const std::string &group,
		     const std::string &topic, std::map<int, Row> *rows,
		     std::string *text)
{
	ChildResult r;
	std::string why = group_cmd(bootstrap, { "--describe", "--group", group }, &r);
	std::istringstream in(r.out);
	std::string line;

	rows->clear();
	if (text)
		*text = r.out;
	while (std::getline(in, line)) {
		std::istringstream f(line);
		std::string g, t, p, cur, end, lag, member;
		if (!(f >> g >> t >> p >> cur >> end >> lag >> member) || g != group ||
		    t != topic)
			continue;
		(*rows)[std::stoi(p)] = { num_or_none(cur), num_or_none(end),
					  num_or_none(lag), member };
	}
	return why;
}

} // namespace kmtest
