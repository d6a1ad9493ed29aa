/* Consumer groups end to end (issue 7), with real librdkafka consumers:
 * groups on kmirrord itself (split, rebalance on join, takeover after a
 * killed member's session timeout, nothing lost, committed offsets across
 * kill -9), and offsets synced from the source so that an application that
 * fails over keeps its group.id and resumes exactly at its next uncommitted
 * offset; after a stop the group's offsets belong to kmirrord. A stop
 * syncs once more, so that a commit made just before it is not lost, and
 * gives a source that does not answer a bounded time. */
#include <dirent.h>
#include <jansson.h>
#include <string.h>
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

const int kParts = 4;
const int64_t kPerPart = 60;

/* Every delivery to the members of a group, in the order the test saw
 * them, with the outcome of its synchronous commit. */
struct Delivery {
	std::string member;
	int32_t partition;
	int64_t offset;
	rd_kafka_resp_err_t commit;
};
using Journal = std::vector<Delivery>;

/* One member of a group: subscribe, poll, commit each message it took. */
class Member {
public:
	Member(const std::string &bootstrap, const std::string &group,
	       const std::string &topic, Journal *journal = nullptr,
	       std::string name = "")
		: journal_(journal), name_(std::move(name))
	{
		Props p = { { "bootstrap.servers", bootstrap },
			    { "group.id", group },
			    { "enable.auto.commit", "false" },
			    { "auto.offset.reset", "earliest" },
			    { "session.timeout.ms", "6000" },
			    { "heartbeat.interval.ms", "500" },
			    { "check.crcs", "true" } };
		rk_ = client_new(RD_KAFKA_CONSUMER, p, &err_);
		if (rk_ == nullptr)
			return;
		rd_kafka_poll_set_consumer(rk_);
		rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
		rd_kafka_topic_partition_list_add(l, topic.c_str(), RD_KAFKA_PARTITION_UA);
		if (rd_kafka_subscribe(rk_, l) != 0)
			err_ = "subscribe failed";
		rd_kafka_topic_partition_list_destroy(l);
	}
	~Member()
	{
		if (rk_ == nullptr)
			return;
		rd_kafka_consumer_close(rk_);
		rd_kafka_destroy(rk_);
	}
	const std::string &error() const { return err_; }

	/* Poll once; a message is recorded and committed (sync), and the
	 * commit's outcome journaled. */
	void poll(int ms)
	{
		rd_kafka_message_t *m = rd_kafka_consumer_poll(rk_, ms);
		if (m == nullptr)
			return;
		if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
			got.push_back({ m->partition, m->offset });
			rd_kafka_resp_err_t e = rd_kafka_commit_message(rk_, m, 0);
			if (journal_ != nullptr)
				journal_->push_back({ name_, m->partition, m->offset, e });
		} else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
			errors.push_back(rd_kafka_message_errstr(m));
		}
		rd_kafka_message_destroy(m);
	}
	size_t assigned()
	{
		rd_kafka_topic_partition_list_t *l = nullptr;
		size_t n = 0;
		if (rd_kafka_assignment(rk_, &l) == 0 && l != nullptr) {
			n = (size_t)l->cnt;
			rd_kafka_topic_partition_list_destroy(l);
		}
		return n;
	}
	/* Gone without LeaveGroup: the coordinator finds out by the session
	 * timeout, as with a killed process. */
	void vanish()
	{
		rd_kafka_destroy_flags(rk_, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
		rk_ = nullptr;
	}

	std::vector<std::pair<int32_t, int64_t>> got;
	std::vector<std::string> errors;

private:
	Journal *journal_;
	std::string name_;
	rd_kafka_t *rk_ = nullptr;
	std::string err_;
};

/* Kafka's promise to a group that commits each message synchronously
 * before taking the next: a partition that moves resumes at its committed
 * offset, so an offset comes again only if its commit had not landed when
 * the partition moved. That is a commit that failed (REBALANCE_IN_PROGRESS,
 * ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID once the group moved on), or the
 * one commit still in flight when the new owner fetched its position (the
 * old owner's client rejoins with it outstanding, and OffsetFetch shows a
 * commit once it is durable, as Kafka's pending commits). So a delivery of
 * an offset seen before must not be below the highest offset committed
 * (acknowledged) for its partition before it, less that one. @return the
 * deliveries that break it, "" if none. */
std::string redelivered_below_commit(const Journal &j)
{
	std::map<int32_t, int64_t> acked; /* next offset, per partition */
	std::set<std::pair<int32_t, int64_t>> seen;
	std::string bad;

	for (const Delivery &d : j) {
		auto key = std::make_pair(d.partition, d.offset);
		auto a = acked.find(d.partition);
		if (!seen.insert(key).second && a != acked.end() &&
		    d.offset < a->second - 1)
			bad += " p" + std::to_string(d.partition) + "@" +
			       std::to_string(d.offset) + " to " + d.member +
			       " after commit " + std::to_string(a->second) + ";";
		if (d.commit == RD_KAFKA_RESP_ERR_NO_ERROR &&
		    (a == acked.end() || a->second < d.offset + 1))
			acked[d.partition] = d.offset + 1;
	}
	return bad;
}

/* "member p@offset: error" of the commits that failed. */
std::string failed_commits(const Journal &j)
{
	std::string out;
	for (const Delivery &d : j)
		if (d.commit != RD_KAFKA_RESP_ERR_NO_ERROR)
			out += " " + d.member + " p" + std::to_string(d.partition) +
			       "@" + std::to_string(d.offset) + ": " +
			       rd_kafka_err2name(d.commit) + ";";
	return out;
}

/* The group's committed offsets on a cluster, per partition. */
std::map<int32_t, int64_t> committed(const std::string &bootstrap,
				     const std::string &group,
				     const std::string &topic, int parts)
{
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_CONSUMER,
				    { { "bootstrap.servers", bootstrap },
				      { "group.id", group } },
				    &err);
	std::map<int32_t, int64_t> out;
	if (rk == nullptr)
		return out;
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(parts);
	for (int p = 0; p < parts; p++)
		rd_kafka_topic_partition_list_add(l, topic.c_str(), p);
	if (rd_kafka_committed(rk, l, 10000) == 0)
		for (int i = 0; i < l->cnt; i++)
			out[l->elems[i].partition] = l->elems[i].offset;
	rd_kafka_topic_partition_list_destroy(l);
	rd_kafka_destroy(rk);
	return out;
}

/* Commit explicit offsets for a group (no membership: a simple commit). */
std::string commit_offsets(const std::string &bootstrap, const std::string &group,
			   const std::string &topic,
			   const std::map<int32_t, int64_t> &offs)
{
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_CONSUMER,
				    { { "bootstrap.servers", bootstrap },
				      { "group.id", group } },
				    &err);
	if (rk == nullptr)
		return err;
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(4);
	for (auto &[p, o] : offs)
		rd_kafka_topic_partition_list_add(l, topic.c_str(), p)->offset = o;
	rd_kafka_resp_err_t e = rd_kafka_commit(rk, l, 0);
	rd_kafka_topic_partition_list_destroy(l);
	rd_kafka_destroy(rk);
	return e ? std::string("commit: ") + rd_kafka_err2str(e) : "";
}

/* A group as librdkafka's rd_kafka_list_groups sees it (ListGroups, then
 * DescribeGroups): "state/protocol_type/members", or "" if not listed. */
std::string listed(const std::string &bootstrap, const std::string &group)
{
	std::string err, out;
	rd_kafka_t *rk = client_new(RD_KAFKA_PRODUCER,
				    { { "bootstrap.servers", bootstrap } }, &err);
	const struct rd_kafka_group_list *gl = nullptr;
	if (rk == nullptr)
		return "client: " + err;
	rd_kafka_resp_err_t e = rd_kafka_list_groups(rk, nullptr, &gl, 10000);
	if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
		out = std::string("list_groups: ") + rd_kafka_err2str(e);
	for (int i = 0; gl != nullptr && i < gl->group_cnt; i++) {
		const rd_kafka_group_info &g = gl->groups[i];
		if (group == g.group)
			out = std::string(g.state) + "/" + g.protocol_type + "/" +
			      std::to_string(g.member_cnt);
	}
	if (gl != nullptr)
		rd_kafka_group_list_destroy(gl);
	rd_kafka_destroy(rk);
	return out;
}

/* The "groups" row of `kmirrorctl status --json` for group and partition
 * ("topic:N"): its "sync" text and "synced_ms_ago"; "" and -1 if none. */
void sync_row(const Daemon &d, const std::string &group, const std::string &part,
	      std::string *sync, int64_t *ago)
{
	ChildResult r;
	*sync = "";
	*ago = -1;
	if (ctl(d, { "status", "--json" }, &r) != "")
		return;
	json_t *root = json_loads(r.out.c_str(), 0, nullptr);
	json_t *rows = json_object_get(root, "groups");
	for (size_t i = 0; i < json_array_size(rows); i++) {
		json_t *row = json_array_get(rows, i);
		const char *g = json_string_value(json_object_get(row, "group"));
		const char *p = json_string_value(json_object_get(row, "partition"));
		const char *s = json_string_value(json_object_get(row, "sync"));
		if (g && p && s && group == g && part == p) {
			*sync = s;
			*ago = json_integer_value(json_object_get(row, "synced_ms_ago"));
		}
	}
	json_decref(root);
}

void produce_all(const std::string &bootstrap, const std::string &topic)
{
	for (int p = 0; p < kParts; p++) {
		ProduceSpec ps;
		ps.topic = topic;
		ps.partition = p;
		ps.count = kPerPart;
		ps.seed = 5;
		ProduceResult pr;
		ASSERT_EQ("", produce(bootstrap, ps, &pr));
		ASSERT_EQ(kPerPart, pr.delivered);
	}
}

/* Poll every member until pred holds. */
template <class F>
bool poll_members(std::vector<Member *> ms, F pred, int timeout_ms)
{
	int64_t end = now_ms() + timeout_ms;
	while (now_ms() < end) {
		for (Member *m : ms)
			m->poll(20);
		if (pred())
			return true;
	}
	return false;
}

class Groups : public ::testing::Test {
protected:
	void SetUp() override { ASSERT_EQ("", dir_.error()); }
	TempDir dir_{ "km-groups" };
};

/* Two members split the partitions, a third joins and the partitions are
 * spread again, one vanishes and after its session timeout the others take
 * its partitions; every offset is seen, and one seen again only where
 * Kafka allows it: its commit had not landed when its partition moved
 * (redelivered_below_commit). Then kill -9 and restart: the committed
 * offsets are all there. */
TEST_F(Groups, MembersSplitRebalanceTakeOverAndOffsetsSurviveKill9)
{
	Daemon d(dir_.path(), { "local.topics=g:" + std::to_string(kParts),
				"group.initial.rebalance.delay.ms=0" });
	ASSERT_EQ("", d.start());
	produce_all(d.bootstrap(), "g");

	Journal j;
	Member a(d.bootstrap(), "app", "g", &j, "a"), b(d.bootstrap(), "app", "g", &j, "b");
	ASSERT_EQ("", a.error());
	ASSERT_EQ("", b.error());
	ASSERT_TRUE(poll_members({ &a, &b }, [&] {
		return a.assigned() == 2 && b.assigned() == 2;
	}, 30000)) << a.assigned() << "+" << b.assigned();

	auto c = std::make_unique<Member>(d.bootstrap(), "app", "g", &j, "c");
	ASSERT_TRUE(poll_members({ &a, &b, c.get() }, [&] {
		return a.assigned() + b.assigned() + c->assigned() == kParts &&
		       a.assigned() && b.assigned() && c->assigned();
	}, 30000)) << a.assigned() << "+" << b.assigned() << "+" << c->assigned();
	/* Let c take (and commit) some of its partition, then vanish. */
	ASSERT_TRUE(poll_members({ &a, &b, c.get() }, [&] { return c->got.size() >= 5; },
				 20000)) << "c took " << c->got.size() << " messages";
	auto c_got = c->got;
	c->vanish();
	ASSERT_TRUE(poll_members({ &a, &b }, [&] {
		return a.assigned() + b.assigned() == kParts;
	}, 30000)) << "no takeover after the session timeout";

	std::set<std::pair<int32_t, int64_t>> seen;
	auto total = [&] {
		seen.clear();
		for (auto *v : { &a.got, &b.got, &c_got })
			seen.insert(v->begin(), v->end());
		return seen.size();
	};
	ASSERT_TRUE(poll_members({ &a, &b }, [&] {
		return total() == (size_t)(kParts * kPerPart);
	}, 30000)) << total() << " of " << kParts * kPerPart << " offsets seen";
	EXPECT_TRUE(a.errors.empty() && b.errors.empty())
		<< (a.errors.empty() ? b.errors[0] : a.errors[0]);
	EXPECT_EQ("", redelivered_below_commit(j))
		<< "failed commits:" << failed_commits(j);
	RecordProperty("deliveries", (int)j.size());
	RecordProperty("failed_commits", failed_commits(j));

	std::map<int32_t, int64_t> want;
	for (int p = 0; p < kParts; p++)
		want[p] = kPerPart;
	EXPECT_EQ(want, committed(d.bootstrap(), "app", "g", kParts));
	ASSERT_EQ("", d.kill9());
	ASSERT_EQ("", d.start());
	EXPECT_EQ(want, committed(d.bootstrap(), "app", "g", kParts))
		<< "committed offsets lost across kill -9";
}

/* A group that consumed part of a topic on the source resumes on kmirrord
 * at exactly its next uncommitted offsets, two members splitting the
 * partitions. After a stop, the source's commits no longer overwrite
 * what the group commits on kmirrord. */
TEST_F(Groups, OffsetsSyncedFromTheSourceThenOwnedAfterStop)
{
	MockCluster mock{ 1 };
	ASSERT_EQ("", mock.error());
	ASSERT_EQ("", mock.create_topic("s", kParts));
	produce_all(mock.bootstrap(), "s");
	std::map<int32_t, int64_t> src = { { 0, 7 }, { 1, 19 }, { 2, 33 }, { 3, 0 } };
	ASSERT_EQ("", commit_offsets(mock.bootstrap(), "app", "s", src));

	Daemon d(dir_.path(), { "source.bootstrap.servers=" + mock.bootstrap(),
				"topics=s", "groups=app",
				"group.sync.interval.ms=200",
				"group.initial.rebalance.delay.ms=0" });
	ASSERT_EQ("", d.start());
	ASSERT_TRUE(poll_until([&] {
		return committed(d.bootstrap(), "app", "s", kParts) == src;
	}, 30000)) << "offsets not synced";
	ChildResult st;
	ASSERT_EQ("", ctl(d, { "status" }, &st));
	EXPECT_NE(std::string::npos, st.out.find("app")) << st.out;
	/* Known by its offsets only: an Empty group to Kafka's tools. */
	EXPECT_EQ("Empty//0", listed(d.bootstrap(), "app"));

	{
		Member a(d.bootstrap(), "app", "s"), b(d.bootstrap(), "app", "s");
		std::map<int32_t, int64_t> first;
		ASSERT_TRUE(poll_members({ &a, &b }, [&] {
			for (auto *m : { &a, &b })
				for (auto &x : m->got)
					first.emplace(x.first, x.second);
			return first.size() == (size_t)kParts;
		}, 30000)) << first.size() << " partitions started";
		EXPECT_EQ(src, first) << "the first message of each partition "
					 "must be the next uncommitted offset";
		EXPECT_GT(a.got.size(), 0u);
		EXPECT_GT(b.got.size(), 0u) << "two members split the partitions";
		EXPECT_EQ("Stable/consumer/2", listed(d.bootstrap(), "app"));

		/* Failover of the topic while the group consumes: it goes on
		 * with what is written here after the stop (the barrier is at
		 * kPerPart). */
		ChildResult r;
		ASSERT_EQ("", ctl(d, { "stop", "s" }, &r)) << r.out << r.err;
		ProduceSpec ps;
		ps.topic = "s";
		ps.count = 10;
		ProduceResult pr;
		ASSERT_EQ("", produce(d.bootstrap(), ps, &pr));
		ASSERT_TRUE(poll_members({ &a, &b }, [&] {
			for (auto *m : { &a, &b })
				for (auto &x : m->got)
					if (x.first == 0 && x.second == kPerPart + 10)
						return true;
			return false;
		}, 30000)) << "the group did not consume across the stop";
	}
	ASSERT_EQ("", commit_offsets(d.bootstrap(), "app", "s", { { 0, 50 } }));
	int64_t t55 = now_ms();
	ASSERT_EQ("", commit_offsets(mock.bootstrap(), "app", "s", { { 0, 55 } }));
	/* 55 would be ahead of 50, and the group is empty, so only the end of
	 * the sync keeps it. Proof that no sync read it: kmirrord says the partition
	 * stopped and its last sync is older than the source's 55 and than five
	 * sync intervals (a running sync refreshes it every interval). */
	std::string sync;
	int64_t ago = -1;
	ASSERT_TRUE(poll_until([&] {
		sync_row(d, "app", "s:0", &sync, &ago);
		return sync == "stopped" && ago >= 1000 &&
		       ago > now_ms() - t55;
	}, 20000)) << "sync \"" << sync << "\", last " << ago << " ms ago";
	EXPECT_EQ(50, committed(d.bootstrap(), "app", "s", kParts)[0])
		<< "the sync overwrote a commit made after the stop";
}

/* A member of group on the source: joins, takes its assignment of every
 * partition, commits offs as the offsets it has processed (a member's
 * commit, with its generation), and leaves. @return "" or what failed. */
std::string commit_as_member(const std::string &bootstrap, const std::string &group,
			     const std::string &topic,
			     const std::map<int32_t, int64_t> &offs)
{
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_CONSUMER,
				    { { "bootstrap.servers", bootstrap },
				      { "group.id", group },
				      { "enable.auto.commit", "false" },
				      { "auto.offset.reset", "earliest" },
				      { "session.timeout.ms", "6000" } },
				    &err);
	if (rk == nullptr)
		return err;
	rd_kafka_poll_set_consumer(rk);
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(l, topic.c_str(), RD_KAFKA_PARTITION_UA);
	rd_kafka_subscribe(rk, l);
	rd_kafka_topic_partition_list_destroy(l);
	int64_t end = now_ms() + 30000;
	size_t assigned = 0;
	while (assigned < offs.size() && now_ms() < end) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 50);
		if (m != nullptr)
			rd_kafka_message_destroy(m);
		rd_kafka_topic_partition_list_t *a = nullptr;
		if (rd_kafka_assignment(rk, &a) == 0 && a != nullptr) {
			assigned = (size_t)a->cnt;
			rd_kafka_topic_partition_list_destroy(a);
		}
	}
	rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR__TIMED_OUT;
	if (assigned == offs.size()) {
		l = rd_kafka_topic_partition_list_new((int)offs.size());
		for (auto &[p, o] : offs)
			rd_kafka_topic_partition_list_add(l, topic.c_str(), p)->offset = o;
		e = rd_kafka_commit(rk, l, 0);
		rd_kafka_topic_partition_list_destroy(l);
	}
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	return e ? std::string("member commit: ") + rd_kafka_err2str(e) : "";
}

/* `kmirrorctl stop ARGS --json`: the reply (its last line), or NULL; the
 * time it took in *ms. */
json_t *stop_json(const Daemon &d, const std::vector<std::string> &args,
		  int64_t *ms, std::string *err)
{
	std::vector<std::string> argv = { "stop", "--json" };
	argv.insert(argv.end(), args.begin(), args.end());
	ChildResult r;
	int64_t t0 = now_ms();
	*err = ctl(d, argv, &r);
	*ms = now_ms() - t0;
	size_t end = r.out.find_last_not_of('\n');
	size_t at = end == std::string::npos ? 0 : r.out.rfind('\n', end);
	std::string last = r.out.substr(at == std::string::npos ? 0 : at + 1);
	if (!err->empty())
		*err += r.out;
	return json_loads(last.c_str(), 0, nullptr);
}

/* The stop's "groups" rows of group: partition number -> (field, value). */
std::map<int32_t, std::map<std::string, int64_t>> stop_rows(json_t *reply,
							    const std::string &group)
{
	std::map<int32_t, std::map<std::string, int64_t>> out;
	size_t i;
	json_t *row;
	json_array_foreach(json_object_get(reply, "groups"), i, row) {
		const char *g = json_string_value(json_object_get(row, "group"));
		const char *p = json_string_value(json_object_get(row, "partition"));
		const char *colon = p ? strchr(p, ':') : nullptr;
		if (g == nullptr || group != g || colon == nullptr)
			continue;
		for (const char *k : { "source_offset", "offset", "previous" })
			out[atoi(colon + 1)][k] =
				json_integer_value(json_object_get(row, k));
	}
	return out;
}

/* A group commits on the source right before the stop, long before the
 * next periodic sync (group.sync.interval.ms is 10 minutes: only the
 * round at start-up, when nothing was committed yet, ran). The stop's
 * last sync carries the commits: its reply shows each partition stored
 * from nothing, and a consumer of the same group on kmirrord starts every
 * partition at exactly the offset the source's group committed. */
TEST_F(Groups, StopSyncsOffsetsCommittedJustBefore)
{
	MockCluster mock{ 1 };
	ASSERT_EQ("", mock.error());
	ASSERT_EQ("", mock.create_topic("s", kParts));
	produce_all(mock.bootstrap(), "s");

	Daemon d(dir_.path(), { "source.bootstrap.servers=" + mock.bootstrap(),
				"topics=s", "groups=app",
				"group.sync.interval.ms=600000",
				"group.initial.rebalance.delay.ms=0" });
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", d.wait_status([](const std::map<std::string, PartStatus> &st) {
		for (int p = 0; p < kParts; p++) {
			auto it = st.find("s:" + std::to_string(p));
			if (it == st.end() || it->second.hw != kPerPart)
				return false;
		}
		return true;
	}, 30000));
	/* The start-up round has run (a row for the group) and found nothing,
	 * which its row says rather than "synced". */
	ChildResult st;
	ASSERT_EQ("", ctl(d, { "status", "--json" }, &st));
	ASSERT_NE(std::string::npos, st.out.find("\"app\"")) << st.out;
	EXPECT_NE(std::string::npos, st.out.find("no offsets on the source")) << st.out;
	ASSERT_TRUE(committed(d.bootstrap(), "app", "s", kParts).count(0) == 0 ||
		    committed(d.bootstrap(), "app", "s", kParts)[0] < 0);

	std::map<int32_t, int64_t> src = { { 0, 7 }, { 1, 19 }, { 2, 33 }, { 3, 41 } };
	ASSERT_EQ("", commit_as_member(mock.bootstrap(), "app", "s", src));
	int64_t committed_at = now_ms();
	ASSERT_EQ(src, committed(mock.bootstrap(), "app", "s", kParts));

	int64_t ms, began = now_ms() - committed_at;
	std::string err;
	json_t *reply = stop_json(d, { "s" }, &ms, &err);
	ASSERT_EQ("", err);
	ASSERT_NE(nullptr, reply);
	printf("stop began %lld ms after the commit, took %lld ms: %s\n",
	       (long long)began, (long long)ms,
	       json_string_value(json_object_get(reply, "group_sync")));
	auto rows = stop_rows(reply, "app");
	EXPECT_EQ(src.size(), rows.size())
		<< "the stop's reply must have a row per partition of the group: "
		<< json_string_value(json_object_get(reply, "group_sync"));
	for (auto &[p, o] : src) {
		EXPECT_EQ(o, rows[p]["source_offset"]) << "partition " << p;
		EXPECT_EQ(o, rows[p]["offset"]) << "partition " << p;
		EXPECT_EQ(-1, rows[p]["previous"])
			<< "partition " << p << ": a periodic sync carried it";
	}
	json_decref(reply);

	Member m(d.bootstrap(), "app", "s");
	ASSERT_EQ("", m.error());
	std::map<int32_t, int64_t> first;
	ASSERT_TRUE(poll_members({ &m }, [&] {
		for (auto &x : m.got)
			first.emplace(x.first, x.second);
		return first.size() == (size_t)kParts;
	}, 30000)) << first.size() << " partitions started";
	EXPECT_EQ(src, first) << "the first offset of each partition on kmirrord "
				 "must be the one the source's group committed";
}

/* The source takes 30 s to answer anything when the stop comes: the last
 * sync of three groups gives up at group.sync.stop.timeout.ms (1 s) in
 * all, the stop completes, its reply says the sync failed and why, and
 * the partitions take writes. */
TEST_F(Groups, StopBoundsTheLastSyncWhenTheSourceDoesNotAnswer)
{
	MockCluster mock{ 1 };
	ASSERT_EQ("", mock.error());
	ASSERT_EQ("", mock.create_topic("s", kParts));
	produce_all(mock.bootstrap(), "s");
	Daemon d(dir_.path(), { "source.bootstrap.servers=" + mock.bootstrap(),
				"topics=s", "groups=app,app2,app3",
				"group.sync.interval.ms=600000",
				"group.sync.stop.timeout.ms=1000" });
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", d.wait_status([](const std::map<std::string, PartStatus> &st) {
		for (int p = 0; p < kParts; p++) {
			auto it = st.find("s:" + std::to_string(p));
			if (it == st.end() || it->second.hw != kPerPart)
				return false;
		}
		return true;
	}, 30000));
	ASSERT_EQ(RD_KAFKA_RESP_ERR_NO_ERROR,
		  rd_kafka_mock_broker_set_rtt(mock.handle(), 1, 30000));

	int64_t ms;
	std::string err;
	json_t *reply = stop_json(d, { "s" }, &ms, &err);
	ASSERT_EQ("", err);
	ASSERT_NE(nullptr, reply);
	const char *line = json_string_value(json_object_get(reply, "group_sync"));
	ASSERT_NE(nullptr, line);
	printf("stop took %lld ms: %s\n", (long long)ms, line);
	EXPECT_LT(ms, 2500) << "the stop waited for the source: " << line;
	EXPECT_NE(std::string::npos, std::string(line).find("failed for 3 of 3 groups"))
		<< line;
	EXPECT_NE(std::string::npos, std::string(line).find("timed out")) << line;
	size_t i;
	json_t *row;
	int failed_rows = 0;
	json_array_foreach(json_object_get(reply, "groups"), i, row)
		failed_rows += strstr(json_string_value(json_object_get(row, "sync")) ?: "",
				      "timed out") != nullptr;
	EXPECT_EQ(3, failed_rows);
	json_decref(reply);

	std::map<std::string, PartStatus> ps;
	ASSERT_EQ("", d.status(&ps));
	EXPECT_EQ("STOPPED", ps["s:0"].state);
	ProduceSpec w;
	w.topic = "s";
	w.partition = 0;
	w.count = 5;
	ProduceResult pr;
	ASSERT_EQ("", produce(d.bootstrap(), w, &pr));
	EXPECT_EQ(5, pr.delivered) << "the stopped partition takes writes";
}

/* The truncate cut removes an open transaction (the mock writes no
 * markers: 30 transactional records after 50 plain ones stay open on the
 * mirror), after a periodic sync took the group to 70, past the cut. The
 * stop brings it down to the cut (50, the barrier), so that a consumer of
 * the group on kmirrord reads the first record written here after the
 * stop (51) rather than skipping to 70. */
TEST_F(Groups, StopBringsAnOffsetPastTheCutDownToIt)
{
	MockCluster mock{ 1 };
	ASSERT_EQ("", mock.error());
	ASSERT_EQ("", mock.create_topic("x", 1));
	ProduceSpec plain;
	plain.topic = "x";
	plain.partition = 0;
	plain.count = 50;
	ASSERT_EQ("", produce(mock.bootstrap(), plain));
	ProduceSpec txn = plain;
	txn.count = 30;
	txn.first_seq = 50;
	txn.mode = ProducerMode::kTransactional;
	txn.txn_size = 10;
	txn.transactional_id = "groups-txn";
	ASSERT_EQ("", produce(mock.bootstrap(), txn));
	ASSERT_EQ("", commit_offsets(mock.bootstrap(), "app", "x", { { 0, 70 } }));

	Daemon d(dir_.path(), { "source.bootstrap.servers=" + mock.bootstrap(),
				"topics=x", "groups=app",
				"group.sync.interval.ms=200",
				"group.initial.rebalance.delay.ms=0" });
	ASSERT_EQ("", d.start());
	ASSERT_TRUE(poll_until([&] {
		return committed(d.bootstrap(), "app", "x", 1)[0] == 70;
	}, 30000)) << "the periodic sync did not store 70";

	int64_t ms;
	std::string err;
	json_t *reply = stop_json(d, { "x" }, &ms, &err);
	ASSERT_EQ("", err);
	ASSERT_NE(nullptr, reply);
	char *dumped = json_dumps(reply, 0);
	std::string text = dumped ? dumped : "";
	free(dumped);
	EXPECT_NE(std::string::npos, text.find("\"barrier_offset\": 50")) << text;
	auto rows = stop_rows(reply, "app");
	EXPECT_EQ(70, rows[0]["source_offset"]) << text;
	EXPECT_EQ(70, rows[0]["previous"]) << text;
	EXPECT_EQ(50, rows[0]["offset"]) << text;
	json_decref(reply);
	EXPECT_EQ(50, committed(d.bootstrap(), "app", "x", 1)[0]);

	ProduceSpec local;
	local.topic = "x";
	local.partition = 0;
	local.count = 25;
	ProduceResult pr;
	ASSERT_EQ("", produce(d.bootstrap(), local, &pr));
	ASSERT_EQ(25, pr.delivered);
	Member m(d.bootstrap(), "app", "x");
	ASSERT_EQ("", m.error());
	ASSERT_TRUE(poll_members({ &m }, [&] { return !m.got.empty(); }, 30000));
	EXPECT_EQ(51, m.got[0].second)
		<< "the group must start at the first record written after the stop";
}

/* Base offsets of the .log segments in a partition directory. */
std::vector<int64_t> segments(const std::string &dir)
{
	std::vector<int64_t> v;
	DIR *d = opendir(dir.c_str());
	struct dirent *e;
	while (d != nullptr && (e = readdir(d)) != nullptr) {
		std::string n = e->d_name;
		if (n.size() == 24 && n.compare(20, 4, ".log") == 0)
			v.push_back(std::stoll(n.substr(0, 20)));
	}
	if (d != nullptr)
		closedir(d);
	std::sort(v.begin(), v.end());
	return v;
}

/* Many commits: the offsets partition is compacted (whole old segments
 * deleted once the live commits are copied past them) and what a restart
 * rebuilds is still the last commit of every partition. */
TEST_F(Groups, CommittedOffsetsAreCompacted)
{
	Daemon d(dir_.path(), { "local.topics=c:" + std::to_string(kParts),
				"segment.bytes=65536" });
	ASSERT_EQ("", d.start());
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_CONSUMER,
				    { { "bootstrap.servers", d.bootstrap() },
				      { "group.id", "busy" } },
				    &err);
	ASSERT_NE(nullptr, rk) << err;
	const int rounds = 3200; /* x 4 partitions: over 10000 records */
	for (int i = 1; i <= rounds; i++) {
		rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(kParts);
		for (int p = 0; p < kParts; p++)
			rd_kafka_topic_partition_list_add(l, "c", p)->offset = i * 10 + p;
		ASSERT_EQ(RD_KAFKA_RESP_ERR_NO_ERROR, rd_kafka_commit(rk, l, i % 50 != 0))
			<< "round " << i;
		rd_kafka_topic_partition_list_destroy(l);
	}
	rd_kafka_destroy(rk);
	std::map<int32_t, int64_t> want;
	for (int p = 0; p < kParts; p++)
		want[p] = rounds * 10 + p;
	ASSERT_EQ(want, committed(d.bootstrap(), "busy", "c", kParts));
	std::string dir = d.data_dir() + "/__consumer_offsets-0";
	ASSERT_TRUE(poll_until([&] {
		auto s = segments(dir);
		return !s.empty() && s.front() > 0;
	}, 20000)) << "no segment of __consumer_offsets-0 was deleted";
	ASSERT_EQ("", d.kill9());
	ASSERT_EQ("", d.start());
	EXPECT_EQ(want, committed(d.bootstrap(), "busy", "c", kParts))
		<< "compaction lost commits";
}

} // namespace
