// Goal: the consumer-group coordinator (dataplane/group/group*.c) follows Kafka's
// classic group protocol on the coordinator side: JoinGroup delayed until
// every member rejoined or the rebalance timeout passed, MEMBER_ID_REQUIRED
// (KIP-394), protocol vote, leader election, SyncGroup waiting for the
// leader, heartbeats and OffsetCommit checks with Kafka's error codes,
// LeaveGroup, session timeouts, the initial rebalance delay, static
// membership (KIP-345), cancellation of tickets, limits, describe / list.
// Method: pure logic with a simulated clock; callbacks record every answer
// by ticket, and each test asserts what a Kafka broker would answer. A
// randomized run drives many simulated clients against three groups with
// random clock steps and checks the invariants after every step (one
// leader, generation monotonic, every ticket answered at most once and, at
// the end, exactly once unless cancelled). Cancelled tickets are freed
// heap objects the callback dereferences, so ASan (the san build) proves no
// callback fires on one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "dataplane/group/group.h"

namespace {

struct Answer {
	bool join = false;
	int16_t err = -1;
	int32_t gen = -1;
	std::string protocol, leader, member_id, assignment;
	std::vector<std::string> ids, instances, metas;
};

struct Proto {
	std::string name, meta;
};

struct Harness {
	km_group *g = nullptr;
	km_group_config cfg;
	uint64_t now = 1000000;
	// Tickets are heap ints holding 42 that every callback reads: a
	// callback on a freed ticket is a use-after-free ASan reports.
	std::vector<std::unique_ptr<int>> tickets;
	std::map<uintptr_t, std::vector<Answer>> answers;
	std::vector<uintptr_t> fresh; // answered since the last look

	uintptr_t ticket()
	{
		tickets.push_back(std::make_unique<int>(42));
		return (uintptr_t)tickets.back().get();
	}

	void record(void *ticket, const Answer &a)
	{
		EXPECT_EQ(42, *static_cast<int *>(ticket));
		answers[(uintptr_t)ticket].push_back(a);
		fresh.push_back((uintptr_t)ticket);
	}

	static void on_join(void *arg, void *ticket,
			    const km_group_join_result *r)
	{
		Answer a;

		a.join = true;
		a.err = r->error;
		a.gen = r->generation;
		a.protocol = r->protocol;
		a.leader = r->leader_id;
		a.member_id = r->member_id;
		for (uint32_t i = 0; i < r->n_members; i++) {
			const km_group_member_view &v = r->members[i];

			a.ids.push_back(v.member_id);
			a.instances.push_back(v.instance_id ? v.instance_id : "");
			a.metas.push_back(std::string(
				(const char *)v.metadata, v.metadata_len));
		}
		static_cast<Harness *>(arg)->record(ticket, a);
	}

	static void on_sync(void *arg, void *ticket, int16_t err,
			    const uint8_t *assignment, uint32_t len)
	{
		Answer a;

		a.err = err;
		a.assignment = std::string((const char *)assignment, len);
		static_cast<Harness *>(arg)->record(ticket, a);
	}

	explicit Harness(uint32_t delay_ms = 0, uint32_t groups = 16,
			 uint32_t members = 64)
	{
		km_group_config_default(&cfg);
		cfg.initial_rebalance_delay_ms = delay_ms;
		cfg.groups_max = groups;
		cfg.members_max = members;
		cfg.on_join = on_join;
		cfg.on_sync = on_sync;
		cfg.cb_arg = this;
		EXPECT_EQ(0, km_group_create(&cfg, &g));
	}
	~Harness()
	{
		EXPECT_EQ(0, km_group_verify(g));
		km_group_destroy(g);
	}

	uintptr_t join(const std::string &grp, const std::string &member,
		       const std::vector<Proto> &protos = {{"range", "m"}},
		       int16_t version = 3, const char *instance = nullptr,
		       int32_t session = 10000, int32_t rebalance = 30000,
		       const char *ptype = "consumer")
	{
		std::vector<km_group_protocol> p;
		km_group_join_req r = {};
		uintptr_t t = ticket();

		for (const Proto &x : protos)
			p.push_back({x.name.c_str(),
				     (const uint8_t *)x.meta.data(),
				     (uint32_t)x.meta.size()});
		r.group_id = grp.c_str();
		r.member_id = member.c_str();
		r.instance_id = instance;
		r.client_id = "client";
		r.client_host = "/10.0.0.1";
		r.session_timeout_ms = session;
		r.rebalance_timeout_ms = rebalance;
		r.protocol_type = ptype;
		r.protocols = p.data();
		r.n_protocols = (uint32_t)p.size();
		r.version = version;
		EXPECT_EQ(0, km_group_join(g, &r, (void *)t, now));
		EXPECT_EQ(0, km_group_verify(g));
		return t;
	}

	uintptr_t sync(const std::string &grp, const std::string &member,
		       int32_t gen,
		       const std::map<std::string, std::string> &assign = {},
		       const char *instance = nullptr)
	{
		std::vector<km_group_assignment> a;
		km_group_sync_req r = {};
		uintptr_t t = ticket();

		for (const auto &kv : assign)
			a.push_back({kv.first.c_str(),
				     (const uint8_t *)kv.second.data(),
				     (uint32_t)kv.second.size()});
		r.group_id = grp.c_str();
		r.member_id = member.c_str();
		r.instance_id = instance;
		r.generation = gen;
		r.assignments = a.data();
		r.n_assignments = (uint32_t)a.size();
		EXPECT_EQ(0, km_group_sync(g, &r, (void *)t, now));
		EXPECT_EQ(0, km_group_verify(g));
		return t;
	}

	int16_t hb(const std::string &grp, const std::string &member,
		   int32_t gen, const char *instance = nullptr)
	{
		return km_group_heartbeat(g, grp.c_str(), member.c_str(),
					  instance, gen, now);
	}

	int16_t commit(const std::string &grp, const std::string &member,
		       int32_t gen, const char *instance = nullptr)
	{
		return km_group_commit_check(g, grp.c_str(), member.c_str(),
					     instance, gen, now);
	}

	int16_t txn(const std::string &grp, const std::string &member,
		    int32_t gen, const char *instance = nullptr)
	{
		return km_group_txn_commit_check(g, grp.c_str(), member.c_str(),
						 instance, gen);
	}

	int16_t leave(const std::string &grp, const std::string &member,
		      const char *instance = nullptr)
	{
		km_group_leave_member m = {member.c_str(), instance};
		int16_t err = -1;

		EXPECT_EQ(0, km_group_leave(g, grp.c_str(), &m, 1, &err, now));
		return err;
	}

	void advance(uint64_t ms)
	{
		now += ms;
		km_group_tick(g, now);
		EXPECT_EQ(0, km_group_verify(g));
	}

	bool answered(uintptr_t t) const { return answers.count(t) != 0; }
	const Answer &ans(uintptr_t t)
	{
		EXPECT_EQ(1u, answers[t].size()) << "ticket " << t;
		if (answers[t].empty())
			answers[t].push_back(Answer());
		return answers[t][0];
	}

	km_group_description describe(const std::string &grp,
				      std::vector<km_group_member_view> *m =
					      nullptr)
	{
		km_group_description d;
		std::vector<km_group_member_view> v(64);
		int n = km_group_describe(g, grp.c_str(), &d, v.data(), 64);

		EXPECT_GE(n, 0);
		v.resize((size_t)n);
		if (m)
			*m = v;
		return d;
	}

	// A new member via MEMBER_ID_REQUIRED (v4+): its id.
	std::string new_id(const std::string &grp)
	{
		uintptr_t t = join(grp, "", {{"range", "m"}}, 5);
		const Answer &a = ans(t);

		EXPECT_EQ(KM_GROUP_ERR_MEMBER_ID_REQUIRED, a.err);
		return a.member_id;
	}
};

// One member through join -> sync -> Stable; returns its member id.
std::string one_stable(Harness &h, const std::string &grp,
		       const std::string &assign = "A")
{
	std::string id = h.new_id(grp);
	uintptr_t j = h.join(grp, id, {{"range", "m-" + id}}, 5);
	const Answer &a = h.ans(j);

	EXPECT_EQ(KM_GROUP_ERR_NONE, a.err);
	uintptr_t s = h.sync(grp, id, a.gen, {{id, assign}});
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.ans(s).err);
	return id;
}

TEST(Group, OneMemberJoinSyncStable)
{
	Harness h;
	std::string id = h.new_id("g");

	EXPECT_EQ(0u, id.rfind("client-", 0)) << id;
	EXPECT_EQ(7u + 22u, id.size());
	EXPECT_EQ(KM_GROUP_EMPTY, h.describe("g").state);
	EXPECT_TRUE(km_group_is_active(h.g, "g")); // pending member

	uintptr_t j = h.join("g", id, {{"range", "meta"}}, 5);
	const Answer &a = h.ans(j);
	EXPECT_EQ(KM_GROUP_ERR_NONE, a.err);
	EXPECT_EQ(1, a.gen);
	EXPECT_EQ("range", a.protocol);
	EXPECT_EQ(id, a.leader);
	EXPECT_EQ(id, a.member_id);
	ASSERT_EQ(1u, a.ids.size());
	EXPECT_EQ(id, a.ids[0]);
	EXPECT_EQ("meta", a.metas[0]);
	EXPECT_EQ(KM_GROUP_COMPLETING_REBALANCE, h.describe("g").state);

	uintptr_t s = h.sync("g", id, 1, {{id, "assign-bytes"}});
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.ans(s).err);
	EXPECT_EQ("assign-bytes", h.ans(s).assignment);
	EXPECT_EQ(KM_GROUP_STABLE, h.describe("g").state);
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.hb("g", id, 1));
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.commit("g", id, 1));

	// A sync when Stable answers at once with the stored assignment.
	uintptr_t s2 = h.sync("g", id, 1);
	EXPECT_EQ("assign-bytes", h.ans(s2).assignment);
}

TEST(Group, MemberIdRequiredOnlyFromV4)
{
	Harness h;
	uintptr_t t3 = h.join("g", "", {{"range", "m"}}, 3);

	EXPECT_EQ(KM_GROUP_ERR_NONE, h.ans(t3).err); // v3: admitted at once
	EXPECT_EQ(1, h.ans(t3).gen);

	std::string id = h.new_id("h");
	EXPECT_EQ(KM_GROUP_EMPTY, h.describe("h").state);
	EXPECT_EQ(0u, h.describe("h").n_members);
	uintptr_t j = h.join("h", id, {{"range", "m"}}, 5);
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.ans(j).err);
	EXPECT_EQ(id, h.ans(j).member_id);

	// A pending id expires after the session timeout.
	std::string late = h.new_id("p");
	h.advance(10000);
	uintptr_t j2 = h.join("p", late, {{"range", "m"}}, 5);
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID, h.ans(j2).err);
}

// A Stable at gen 1 with assignment "a"; B joins; both in gen 2.
struct Two {
	std::string a, b;
	int32_t gen = 0;
};

Two two_stable(Harness &h)
{
	Two t;

	t.a = one_stable(h, "g", "a1");
	t.b = h.new_id("g");
	uintptr_t jb = h.join("g", t.b, {{"range", "meta-b"}}, 5);
	EXPECT_FALSE(h.answered(jb)); // waits for A to rejoin
	EXPECT_EQ(KM_GROUP_PREPARING_REBALANCE, h.describe("g").state);
	EXPECT_EQ(KM_GROUP_ERR_REBALANCE_IN_PROGRESS, h.hb("g", t.a, 1));
	uintptr_t ja = h.join("g", t.a, {{"range", "meta-a"}}, 5);
	const Answer &aa = h.ans(ja);
	const Answer &ab = h.ans(jb);
	EXPECT_EQ(2, aa.gen);
	EXPECT_EQ(2, ab.gen);
	EXPECT_EQ(t.a, aa.leader);
	EXPECT_EQ(t.a, ab.leader);
	EXPECT_EQ(2u, aa.ids.size()); // the leader gets both metadata
	EXPECT_EQ(0u, ab.ids.size());
	std::map<std::string, std::string> got;
	for (size_t i = 0; i < aa.ids.size(); i++)
		got[aa.ids[i]] = aa.metas[i];
	EXPECT_EQ("meta-a", got[t.a]);
	EXPECT_EQ("meta-b", got[t.b]);

	uintptr_t sb = h.sync("g", t.b, 2);
	EXPECT_FALSE(h.answered(sb)); // waits for the leader's sync
	uintptr_t sa = h.sync("g", t.a, 2, {{t.a, "pa"}, {t.b, "pb"}});
	EXPECT_EQ("pa", h.ans(sa).assignment);
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.ans(sb).err);
	EXPECT_EQ("pb", h.ans(sb).assignment);
	EXPECT_EQ(KM_GROUP_STABLE, h.describe("g").state);
	t.gen = 2;
	return t;
}

TEST(Group, TwoMembersJoinWaitsForAllAndSyncWaitsForLeader)
{
	Harness h;
	Two t = two_stable(h);

	EXPECT_EQ(KM_GROUP_ERR_NONE, h.hb("g", t.a, 2));
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.hb("g", t.b, 2));
}

TEST(Group, ThirdMemberTriggersRebalanceWithNewAssignment)
{
	Harness h;
	Two t = two_stable(h);
	std::string c = h.new_id("g");
	uintptr_t jc = h.join("g", c, {{"range", "mc"}}, 5);

	EXPECT_FALSE(h.answered(jc));
	EXPECT_EQ(KM_GROUP_ERR_REBALANCE_IN_PROGRESS, h.hb("g", t.a, 2));
	EXPECT_EQ(KM_GROUP_ERR_REBALANCE_IN_PROGRESS, h.hb("g", t.b, 2));
	// A commit is still allowed while preparing (Kafka).
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.commit("g", t.b, 2));
	uintptr_t ja = h.join("g", t.a, {{"range", "ma"}}, 5);
	EXPECT_FALSE(h.answered(ja));
	uintptr_t jb = h.join("g", t.b, {{"range", "mb"}}, 5);
	for (uintptr_t j : {ja, jb, jc}) {
		EXPECT_EQ(KM_GROUP_ERR_NONE, h.ans(j).err);
		EXPECT_EQ(3, h.ans(j).gen);
		EXPECT_EQ(t.a, h.ans(j).leader);
	}
	EXPECT_EQ(3u, h.ans(ja).ids.size());
	// Stale generation now.
	EXPECT_EQ(KM_GROUP_ERR_ILLEGAL_GENERATION, h.hb("g", t.b, 2));
	uintptr_t sc = h.sync("g", c, 3);
	uintptr_t sb = h.sync("g", t.b, 3);
	// The leader leaves B out: B gets an empty assignment; a stranger
	// named by the leader is ignored.
	uintptr_t sa = h.sync("g", t.a, 3,
			      {{t.a, "x"}, {c, "z"}, {"stranger", "?"}});
	EXPECT_EQ("x", h.ans(sa).assignment);
	EXPECT_EQ("", h.ans(sb).assignment);
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.ans(sb).err);
	EXPECT_EQ("z", h.ans(sc).assignment);
	EXPECT_EQ(3u, h.describe("g").n_members);
}

// Assignment buffers are kept across generations: a later generation's
// assignments, shorter, longer or empty, are what the members get and what
// describe shows, never bytes of an earlier one; an aborted generation's
// assignments are gone though their room is kept.
TEST(Group, AssignmentsOfEachGenerationAreItsOwn)
{
	Harness h;
	Two t = two_stable(h); // gen 2: "pa", "pb"
	const std::vector<std::pair<std::string, std::string>> gens = {
		{ "a-much-longer-assignment", "" }, { "s", "bb" }, { "", "" },
		{ std::string(3000, 'q'), "r" },
	};
	int32_t gen = t.gen;
	for (const auto &g : gens) {
		uintptr_t ja = h.join("g", t.a, {{"range", "x" + g.first}}, 5);
		uintptr_t jb = h.join("g", t.b, {{"range", "y" + g.second}}, 5);
		gen = h.ans(ja).gen;
		ASSERT_EQ(gen, h.ans(jb).gen);
		uintptr_t sb = h.sync("g", t.b, gen);
		uintptr_t sa = h.sync("g", t.a, gen,
				      {{t.a, g.first}, {t.b, g.second}});
		EXPECT_EQ(g.first, h.ans(sa).assignment);
		EXPECT_EQ(g.second, h.ans(sb).assignment);
		std::vector<km_group_member_view> v;
		h.describe("g", &v);
		ASSERT_EQ(2u, v.size());
		for (const km_group_member_view &m : v) {
			const std::string &want = m.member_id == t.a ? g.first
								     : g.second;
			EXPECT_EQ(want, std::string((const char *)m.assignment,
						    m.assignment_len));
			EXPECT_EQ(want.empty(), m.assignment == nullptr);
		}
	}
	// A new generation whose assignment a third member aborts: the
	// assignments are dropped.
	uintptr_t ja = h.join("g", t.a, {{"range", "ma"}}, 5);
	uintptr_t jb = h.join("g", t.b, {{"range", "mb"}}, 5);
	ASSERT_EQ(gen + 1, h.ans(ja).gen);
	ASSERT_EQ(gen + 1, h.ans(jb).gen);
	ASSERT_EQ(KM_GROUP_COMPLETING_REBALANCE, h.describe("g").state);
	std::string c = h.new_id("g");
	uintptr_t jc = h.join("g", c, {{"range", "mc"}}, 5);
	EXPECT_FALSE(h.answered(jc));
	std::vector<km_group_member_view> v;
	h.describe("g", &v);
	ASSERT_EQ(3u, v.size());
	for (const km_group_member_view &m : v) {
		EXPECT_EQ(0u, m.assignment_len) << m.member_id;
		EXPECT_EQ(nullptr, m.assignment) << m.member_id;
	}
	// A group's slot, reclaimed for a new id, starts clean.
	for (const std::string &id : {t.a, t.b, c})
		EXPECT_EQ(KM_GROUP_ERR_NONE, h.leave("g", id));
	EXPECT_EQ(KM_GROUP_EMPTY, h.describe("g").state);
}

TEST(Group, MemberNotRejoiningWithinRebalanceTimeoutIsDropped)
{
	Harness h;
	Two t = two_stable(h);
	std::string c = h.new_id("g");
	uintptr_t jc = h.join("g", c, {{"range", "mc"}}, 5, nullptr, 10000,
			      20000);
	uintptr_t ja = h.join("g", t.a, {{"range", "ma"}}, 5);

	// B keeps heartbeating but never rejoins: its session does not
	// save it. The rebalance timeout is the largest, 30 s (A, B).
	for (int i = 0; i < 9; i++) {
		h.advance(3000);
		EXPECT_EQ(KM_GROUP_ERR_REBALANCE_IN_PROGRESS,
			  h.hb("g", t.b, 2));
	}
	EXPECT_FALSE(h.answered(ja));
	EXPECT_EQ(h.now + 3000, km_group_next_deadline_ms(h.g));
	h.advance(3000);
	EXPECT_EQ(3, h.ans(ja).gen);
	EXPECT_EQ(3, h.ans(jc).gen);
	EXPECT_EQ(2u, h.ans(ja).ids.size());
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID, h.hb("g", t.b, 3));
	EXPECT_EQ(2u, h.describe("g").n_members);
}

TEST(Group, LeaderNotRejoiningHandsOverLeadership)
{
	Harness h;
	Two t = two_stable(h);
	uintptr_t jb = h.join("g", t.b, {{"range", "mb2"}}, 5);

	EXPECT_FALSE(h.answered(jb));
	h.advance(30000);
	EXPECT_EQ(3, h.ans(jb).gen);
	EXPECT_EQ(t.b, h.ans(jb).leader);
	EXPECT_EQ(1u, h.ans(jb).ids.size());
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID, h.hb("g", t.a, 2));
}

TEST(Group, SessionTimeoutRemovesSilentMember)
{
	Harness h;
	Two t = two_stable(h);

	for (int i = 0; i < 3; i++) {
		h.advance(3000);
		EXPECT_EQ(KM_GROUP_ERR_NONE, h.hb("g", t.b, 2));
	}
	EXPECT_EQ(KM_GROUP_STABLE, h.describe("g").state);
	h.advance(1000); // A silent for 10 s: gone
	EXPECT_EQ(KM_GROUP_PREPARING_REBALANCE, h.describe("g").state);
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID, h.hb("g", t.a, 2));
	EXPECT_EQ(KM_GROUP_ERR_REBALANCE_IN_PROGRESS, h.hb("g", t.b, 2));
	uintptr_t jb = h.join("g", t.b, {{"range", "mb"}}, 5);
	EXPECT_EQ(3, h.ans(jb).gen);
	EXPECT_EQ(t.b, h.ans(jb).leader); // leadership passed on
	EXPECT_EQ(1u, h.ans(jb).ids.size());
}

TEST(Group, SessionNotExpiredWhileSyncWaitsOrAfterCancelItIs)
{
	Harness h;
	Two t = two_stable(h);
	uintptr_t ja = h.join("g", t.a, {{"range", "ma2"}}, 5);
	uintptr_t jb = h.join("g", t.b, {{"range", "mb2"}}, 5);

	EXPECT_EQ(3, h.ans(ja).gen);
	EXPECT_EQ(3, h.ans(jb).gen);
	uintptr_t sb = h.sync("g", t.b, 3);
	h.advance(9000);
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.hb("g", t.a, 3)); // Kafka 2.6+
	h.advance(9000);
	EXPECT_FALSE(h.answered(sb)); // B waits for its sync, kept alive
	EXPECT_EQ(2u, h.describe("g").n_members);
	EXPECT_EQ(1u, km_group_cancel(h.g, (void *)sb));
	h.advance(10000); // both silent now: both go, the group empties
	EXPECT_EQ(KM_GROUP_EMPTY, h.describe("g").state);
	EXPECT_FALSE(h.answered(sb));
	EXPECT_FALSE(km_group_is_active(h.g, "g"));
}

TEST(Group, LeaveRebalancesThenEmpties)
{
	Harness h;
	Two t = two_stable(h);

	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID, h.leave("g", "nobody"));
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.leave("g", t.b));
	EXPECT_EQ(KM_GROUP_PREPARING_REBALANCE, h.describe("g").state);
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID, h.hb("g", t.b, 2));
	uintptr_t ja = h.join("g", t.a, {{"range", "ma"}}, 5);
	EXPECT_EQ(3, h.ans(ja).gen);
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.leave("g", t.a));
	km_group_description d = h.describe("g");
	EXPECT_EQ(KM_GROUP_EMPTY, d.state);
	EXPECT_EQ(4, d.generation); // Kafka bumps into the empty generation
	EXPECT_EQ(0u, d.n_members);
	EXPECT_FALSE(km_group_is_active(h.g, "g"));
	int16_t err = -1;
	km_group_leave_member m = {"x", nullptr};
	EXPECT_EQ(KM_GROUP_ERR_NONE,
		  km_group_leave(h.g, "nope", &m, 1, &err, h.now));
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID, err);
	EXPECT_EQ(KM_GROUP_ERR_INVALID_GROUP_ID,
		  km_group_leave(h.g, "", &m, 1, &err, h.now));
}

TEST(Group, LeaveOfWaitingJoinAnswersUnknownMember)
{
	Harness h;
	Two t = two_stable(h);
	uintptr_t ja = h.join("g", t.a, {{"range", "ma"}}, 5);

	EXPECT_FALSE(h.answered(ja));
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.leave("g", t.a));
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID, h.ans(ja).err);
	uintptr_t jb = h.join("g", t.b, {{"range", "mb"}}, 5);
	EXPECT_EQ(3, h.ans(jb).gen);
}

TEST(Group, StaleHeartbeatsSyncsAndCommits)
{
	Harness h;
	Two t = two_stable(h);

	EXPECT_EQ(KM_GROUP_ERR_ILLEGAL_GENERATION, h.hb("g", t.a, 1));
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID, h.hb("g", "ghost", 2));
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID, h.hb("nogroup", t.a, 2));
	EXPECT_EQ(KM_GROUP_ERR_INVALID_GROUP_ID, h.hb("", t.a, 2));
	EXPECT_EQ(KM_GROUP_ERR_ILLEGAL_GENERATION, h.commit("g", t.a, 1));
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID, h.commit("g", "ghost", 2));
	EXPECT_EQ(KM_GROUP_ERR_ILLEGAL_GENERATION,
		  h.commit("nogroup", "x", 3));
	EXPECT_EQ(KM_GROUP_ERR_ILLEGAL_GENERATION,
		  h.ans(h.sync("g", t.b, 1)).err);
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID,
		  h.ans(h.sync("g", "ghost", 2)).err);
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID,
		  h.ans(h.sync("nogroup", t.a, 2)).err);
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID,
		  h.ans(h.join("g", "ghost")).err);
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID,
		  h.ans(h.join("nogroup", "ghost")).err);
	// Preparing: sync is REBALANCE_IN_PROGRESS.
	h.join("g", t.a, {{"range", "changed"}}, 5);
	EXPECT_EQ(KM_GROUP_ERR_REBALANCE_IN_PROGRESS,
		  h.ans(h.sync("g", t.b, 2)).err);
}

TEST(Group, CommitDuringCompletingRebalanceAndWaitingSyncsAborted)
{
	Harness h;
	Two t = two_stable(h);
	uintptr_t ja = h.join("g", t.a, {{"range", "ma2"}}, 5);
	uintptr_t jb = h.join("g", t.b, {{"range", "mb2"}}, 5);

	EXPECT_EQ(3, h.ans(jb).gen);
	EXPECT_EQ(3, h.ans(ja).gen);
	EXPECT_EQ(KM_GROUP_ERR_REBALANCE_IN_PROGRESS, h.commit("g", t.b, 3));
	uintptr_t sb = h.sync("g", t.b, 3);
	// A newcomer starts a rebalance: the waiting sync is told to rejoin.
	uintptr_t jc = h.join("g", "", {{"range", "mc"}}, 3);
	EXPECT_EQ(KM_GROUP_ERR_REBALANCE_IN_PROGRESS, h.ans(sb).err);
	EXPECT_FALSE(h.answered(jc));
}

TEST(Group, SimpleCommitOnlyWithoutMembers)
{
	Harness h;

	EXPECT_EQ(KM_GROUP_ERR_NONE, h.commit("solo", "", -1));
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.commit("", "", -1));
	std::string id = one_stable(h, "g");
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID, h.commit("g", "", -1));
	EXPECT_EQ(KM_GROUP_ERR_ILLEGAL_GENERATION, h.commit("g", id, -1));
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.leave("g", id));
	EXPECT_EQ(KM_GROUP_EMPTY, h.describe("g").state);
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.commit("g", "", -1));
}

// TxnOffsetCommit v3+ (issue 20): Kafka's transactional validation
// (ClassicGroup.validateOffsetCommit with isTransactional) - a stale
// generation is ILLEGAL_GENERATION, an unknown member UNKNOWN_MEMBER_ID, a
// replaced static member FENCED_INSTANCE_ID, as OffsetCommit; but a request
// naming no member is taken from a group with members (OffsetCommit:
// UNKNOWN_MEMBER_ID), and CompletingRebalance is no error (OffsetCommit:
// REBALANCE_IN_PROGRESS).
TEST(Group, TxnOffsetCommitValidation)
{
	Harness h;
	Two t = two_stable(h);

	EXPECT_EQ(KM_GROUP_ERR_NONE, h.txn("g", t.a, 2));
	EXPECT_EQ(KM_GROUP_ERR_ILLEGAL_GENERATION, h.txn("g", t.a, 1));
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID, h.txn("g", "ghost", 2));
	EXPECT_EQ(KM_GROUP_ERR_ILLEGAL_GENERATION, h.txn("nogroup", "x", 3));
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.txn("nogroup", "", -1));
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID, h.commit("g", "", -1));
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.txn("g", "", -1));
	EXPECT_EQ(KM_GROUP_ERR_ILLEGAL_GENERATION, h.txn("g", t.a, -1));
	h.join("g", t.a, {{"range", "ma2"}}, 5);
	h.join("g", t.b, {{"range", "mb2"}}, 5);
	EXPECT_EQ(KM_GROUP_ERR_REBALANCE_IN_PROGRESS, h.commit("g", t.b, 3));
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.txn("g", t.b, 3));

	const Answer a = h.ans(h.join("s", "", {{"range", "ma"}}, 5, "inst-a"));
	h.sync("s", a.member_id, a.gen, {{a.member_id, "pa"}}, "inst-a");
	const Answer n = h.ans(h.join("s", "", {{"range", "ma"}}, 5, "inst-a"));
	ASSERT_NE(a.member_id, n.member_id);
	EXPECT_EQ(KM_GROUP_ERR_FENCED_INSTANCE_ID,
		  h.txn("s", a.member_id, a.gen, "inst-a"));
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.txn("s", n.member_id, n.gen, "inst-a"));
}

TEST(Group, CommitRefreshesSession)
{
	Harness h;
	std::string id = one_stable(h, "g");

	for (int i = 0; i < 5; i++) {
		h.advance(8000);
		EXPECT_EQ(KM_GROUP_ERR_NONE, h.commit("g", id, 1));
	}
	EXPECT_EQ(1u, h.describe("g").n_members);
	h.advance(10000);
	EXPECT_EQ(0u, h.describe("g").n_members);
}

TEST(Group, ProtocolVote)
{
	Harness h(0);
	// v3 joins: no pending ids. A alone gets its first choice; B and C
	// join, A rejoins with the same metadata, and only rr is common.
	uintptr_t j1 = h.join("g", "", {{"range", "1"}, {"rr", "1"}});
	std::string a = h.ans(j1).member_id;
	EXPECT_EQ("range", h.ans(j1).protocol);
	uintptr_t j2 = h.join("g", "", {{"rr", "2"}, {"range", "2"}});
	uintptr_t j3 = h.join("g", "", {{"rr", "3"}, {"sticky", "3"}});
	EXPECT_FALSE(h.answered(j2));
	uintptr_t j1b = h.join("g", a, {{"range", "1"}, {"rr", "1"}});
	for (uintptr_t j : {j1b, j2, j3}) {
		EXPECT_EQ(2, h.ans(j).gen);
		EXPECT_EQ("rr", h.ans(j).protocol);
	}
	EXPECT_EQ(3u, h.ans(j1b).ids.size());
	EXPECT_EQ("1", h.ans(j1b).metas[0]); // rr's metadata
	// Inconsistent protocols: nothing in common with everyone.
	uintptr_t bad = h.join("g", "", {{"sticky", "4"}});
	EXPECT_EQ(KM_GROUP_ERR_INCONSISTENT_GROUP_PROTOCOL, h.ans(bad).err);
	uintptr_t badt = h.join("g", "", {{"rr", "4"}}, 3, nullptr, 10000,
				30000, "connect");
	EXPECT_EQ(KM_GROUP_ERR_INCONSISTENT_GROUP_PROTOCOL, h.ans(badt).err);
	uintptr_t none = h.join("x", "", {});
	EXPECT_EQ(KM_GROUP_ERR_INCONSISTENT_GROUP_PROTOCOL, h.ans(none).err);
	uintptr_t notype = h.join("x", "", {{"rr", ""}}, 3, nullptr, 10000,
				  30000, "");
	EXPECT_EQ(KM_GROUP_ERR_INCONSISTENT_GROUP_PROTOCOL, h.ans(notype).err);
}

// Votes counted one member at a time with the initial delay collecting
// everyone into one generation.
TEST(Group, ProtocolVoteMajorityAndTie)
{
	Harness h(1000);
	uintptr_t a = h.join("g", "", {{"range", "1"}, {"rr", "1"}});
	uintptr_t b = h.join("g", "", {{"rr", "2"}, {"range", "2"}});
	uintptr_t c = h.join("g", "", {{"rr", "3"}, {"range", "3"}});
	h.advance(1000);
	h.advance(1000);
	EXPECT_EQ("rr", h.ans(a).protocol); // 2 votes to 1
	EXPECT_EQ("rr", h.ans(b).protocol);
	EXPECT_EQ("rr", h.ans(c).protocol);
	std::vector<std::string> metas = h.ans(a).metas;
	ASSERT_EQ(3u, metas.size());
	EXPECT_EQ("1", metas[0]); // the chosen protocol's metadata
	EXPECT_EQ("2", metas[1]);

	Harness t(1000);
	uintptr_t x = t.join("g", "", {{"range", "1"}, {"rr", "1"}});
	uintptr_t y = t.join("g", "", {{"rr", "2"}, {"range", "2"}});
	t.advance(1000);
	t.advance(1000);
	EXPECT_EQ("range", t.ans(x).protocol); // tie: first member's order
	EXPECT_EQ("range", t.ans(y).protocol);
}

TEST(Group, InitialDelayCollectsAndExtendsUpToRebalanceTimeout)
{
	Harness h(3000);
	uint64_t t0 = h.now;
	uintptr_t a = h.join("g", "", {{"range", "a"}}, 3, nullptr, 10000,
			     10000);

	EXPECT_FALSE(h.answered(a)); // all joined, but the delay holds
	EXPECT_EQ(t0 + 3000, km_group_next_deadline_ms(h.g));
	h.advance(1000);
	uintptr_t b = h.join("g", "", {{"range", "b"}}, 3, nullptr, 10000,
			     10000);
	h.advance(1999);
	EXPECT_FALSE(h.answered(a));
	h.advance(1); // t0+3000: B came in, one more delay
	EXPECT_FALSE(h.answered(a));
	h.advance(1000);
	uintptr_t c = h.join("g", "", {{"range", "c"}}, 3, nullptr, 10000,
			     10000);
	h.advance(2000); // t0+6000: C came in, one more
	EXPECT_FALSE(h.answered(a));
	h.advance(1000);
	uintptr_t d = h.join("g", "", {{"range", "d"}}, 3, nullptr, 10000,
			     10000);
	h.advance(2000); // t0+9000: D came in; only 1000 ms remain
	EXPECT_FALSE(h.answered(a));
	h.advance(500);
	uintptr_t e = h.join("g", "", {{"range", "e"}}, 3, nullptr, 10000,
			     10000);
	h.advance(499);
	EXPECT_FALSE(h.answered(a));
	h.advance(1); // t0+10000: the rebalance timeout is used up
	for (uintptr_t j : {a, b, c, d, e})
		EXPECT_EQ(1, h.ans(j).gen);
	EXPECT_EQ(t0 + 10000, h.now);
	EXPECT_EQ(5u, h.ans(a).ids.size());

	// A lone member waits exactly the delay.
	uintptr_t s = h.join("solo", "");
	h.advance(2999);
	EXPECT_FALSE(h.answered(s));
	h.advance(1);
	EXPECT_EQ(1, h.ans(s).gen);
}

TEST(Group, StaticMemberReplacementFencesOldId)
{
	Harness h;
	uintptr_t ja = h.join("g", "", {{"range", "ma"}}, 5, "inst-a");
	const Answer a = h.ans(ja);

	EXPECT_EQ(KM_GROUP_ERR_NONE, a.err); // no MEMBER_ID_REQUIRED
	EXPECT_EQ(0u, a.member_id.rfind("inst-a-", 0));
	std::string b = h.new_id("g");
	uintptr_t jb = h.join("g", b, {{"range", "mb"}, {"rr", "mb"}}, 5);
	uintptr_t ja2 = h.join("g", a.member_id, {{"range", "ma"}}, 5,
			       "inst-a");
	EXPECT_EQ(2, h.ans(jb).gen);
	EXPECT_EQ(2, h.ans(ja2).gen);
	EXPECT_EQ(a.member_id, h.ans(ja2).leader);
	ASSERT_EQ(2u, h.ans(ja2).ids.size());
	EXPECT_EQ("inst-a", h.ans(ja2).instances[0]);
	EXPECT_EQ("", h.ans(ja2).instances[1]);
	h.sync("g", a.member_id, 2, {{a.member_id, "pa"}, {b, "pb"}},
	       "inst-a");
	h.sync("g", b, 2);
	EXPECT_EQ(KM_GROUP_STABLE, h.describe("g").state);

	// The instance restarts: new member id, no rebalance.
	uintptr_t jn = h.join("g", "", {{"range", "ma"}}, 5, "inst-a");
	const Answer n = h.ans(jn);
	EXPECT_EQ(KM_GROUP_ERR_NONE, n.err);
	EXPECT_NE(a.member_id, n.member_id);
	EXPECT_EQ(2, n.gen);
	EXPECT_EQ(a.member_id, n.leader); // the leader as it was
	EXPECT_EQ(0u, n.ids.size());
	EXPECT_EQ(KM_GROUP_STABLE, h.describe("g").state);
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.hb("g", b, 2));
	EXPECT_EQ("pa", h.ans(h.sync("g", n.member_id, 2, {}, "inst-a"))
				.assignment);
	// The old id is fenced with its instance id, unknown without.
	EXPECT_EQ(KM_GROUP_ERR_FENCED_INSTANCE_ID,
		  h.hb("g", a.member_id, 2, "inst-a"));
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID, h.hb("g", a.member_id, 2));
	EXPECT_EQ(KM_GROUP_ERR_FENCED_INSTANCE_ID,
		  h.commit("g", a.member_id, 2, "inst-a"));
	EXPECT_EQ(KM_GROUP_ERR_FENCED_INSTANCE_ID,
		  h.ans(h.sync("g", a.member_id, 2, {}, "inst-a")).err);
	EXPECT_EQ(KM_GROUP_ERR_FENCED_INSTANCE_ID,
		  h.ans(h.join("g", a.member_id, {{"range", "ma"}}, 5,
			       "inst-a")).err);
	EXPECT_EQ(KM_GROUP_ERR_FENCED_INSTANCE_ID,
		  h.leave("g", a.member_id, "inst-a"));
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.hb("g", n.member_id, 2, "inst-a"));
	EXPECT_EQ(2u, h.describe("g").n_members);
	EXPECT_EQ(n.member_id, h.describe("g").leader_id);

	// A restart with the same protocol but new metadata: no rebalance.
	uintptr_t jm = h.join("g", "", {{"range", "other"}}, 5, "inst-a");
	EXPECT_EQ(2, h.ans(jm).gen);
	EXPECT_EQ(KM_GROUP_STABLE, h.describe("g").state);
	// A restart that the vote would switch to rr (a 1-1 tie, the first
	// member's order): a rebalance.
	uintptr_t jx = h.join("g", "", {{"rr", "x"}, {"range", "mx"}}, 5,
			      "inst-a");
	EXPECT_FALSE(h.answered(jx));
	EXPECT_EQ(KM_GROUP_PREPARING_REBALANCE, h.describe("g").state);
	// Leave by instance id alone (v3).
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.leave("g", "", "inst-a"));
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID, h.ans(jx).err);
}

TEST(Group, StaticMemberReplacedWhileWaitingIsFencedAndStaysAfterTimeout)
{
	Harness h;
	// A: static, session 30 s; everyone's rebalance timeout is 8 s.
	auto join_a = [&](const std::string &id) {
		return h.join("g", id, {{"range", "ma"}}, 5, "inst-a", 30000,
			      8000);
	};
	auto join_b = [&](const std::string &id, const std::string &meta) {
		return h.join("g", id, {{"range", meta}}, 5, nullptr, 10000,
			      8000);
	};
	std::string a = h.ans(join_a("")).member_id;
	std::string b = h.new_id("g");
	uintptr_t jb = join_b(b, "mb");
	uintptr_t ja2 = join_a(a);
	EXPECT_EQ(2, h.ans(ja2).gen);
	EXPECT_EQ(2, h.ans(jb).gen);
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.ans(h.sync("g", a, 2, {}, "inst-a")).err);

	// The leader rejoins (a rebalance); B has not rejoined yet when the
	// instance restarts: the waiting join of the old id is fenced.
	uintptr_t ja3 = join_a(a);
	EXPECT_FALSE(h.answered(ja3));
	uintptr_t jn = join_a("");
	EXPECT_EQ(KM_GROUP_ERR_FENCED_INSTANCE_ID, h.ans(ja3).err);
	EXPECT_FALSE(h.answered(jn));
	uintptr_t jb2 = join_b(b, "mb");
	EXPECT_EQ(3, h.ans(jn).gen);
	EXPECT_EQ(3, h.ans(jb2).gen);
	std::string n = h.ans(jn).member_id;
	EXPECT_EQ(n, h.ans(jn).leader); // the leadership moved with the slot

	// B's waiting sync is aborted by B's own metadata change; the static
	// member does not rejoin in time and stays; B leads generation 4.
	uintptr_t s1 = h.sync("g", b, 3);
	uintptr_t jb3 = join_b(b, "mb3");
	EXPECT_EQ(KM_GROUP_ERR_REBALANCE_IN_PROGRESS, h.ans(s1).err);
	h.advance(8000);
	EXPECT_EQ(4, h.ans(jb3).gen);
	EXPECT_EQ(b, h.ans(jb3).leader);
	EXPECT_EQ(2u, h.ans(jb3).ids.size());
	EXPECT_EQ(KM_GROUP_COMPLETING_REBALANCE, h.describe("g").state);
	for (int i = 0; i < 6; i++) {
		h.advance(5000);
		h.hb("g", b, 4);
	}
	std::vector<km_group_member_view> v;
	h.describe("g", &v); // its session ran out
	ASSERT_EQ(1u, v.size());
	EXPECT_EQ(b, std::string(v[0].member_id));
}

TEST(Group, CancelledTicketsGetNoCallback)
{
	Harness h;
	Two t = two_stable(h);
	std::vector<km_group_protocol> p = {{"range", nullptr, 0}};
	km_group_join_req r = {};
	r.group_id = "g";
	r.member_id = t.b.c_str();
	r.client_id = "c";
	r.session_timeout_ms = 10000;
	r.rebalance_timeout_ms = 30000;
	r.protocol_type = "consumer";
	r.protocols = p.data();
	r.n_protocols = 1;
	r.version = 5;
	int *tb = new int(42); // freed below: a callback on it is a UAF
	ASSERT_EQ(0, km_group_join(h.g, &r, tb, h.now));
	EXPECT_EQ(1u, km_group_cancel(h.g, tb));
	EXPECT_EQ(0u, km_group_cancel(h.g, tb));
	delete tb;
	uintptr_t ja = h.join("g", t.a, {{"range", "ma"}}, 5);
	EXPECT_EQ(3, h.ans(ja).gen); // B's withdrawn join still counted
	EXPECT_EQ(2u, h.ans(ja).ids.size());
	EXPECT_EQ(2u, h.describe("g").n_members);

	km_group_sync_req s = {};
	s.group_id = "g";
	s.member_id = t.b.c_str();
	s.generation = 3;
	int *sb = new int(42);
	ASSERT_EQ(0, km_group_sync(h.g, &s, sb, h.now));
	EXPECT_EQ(1u, km_group_cancel(h.g, sb));
	delete sb;
	uintptr_t sa = h.sync("g", t.a, 3, {{t.a, "x"}, {t.b, "y"}});
	EXPECT_EQ("x", h.ans(sa).assignment);
	EXPECT_EQ(KM_GROUP_STABLE, h.describe("g").state);
	// B (its session not refreshed by a sync answer) times out later.
	h.advance(5000);
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.hb("g", t.a, 3));
	h.advance(5000);
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID, h.hb("g", t.b, 3));
	for (auto &kv : h.answers)
		EXPECT_EQ(1u, kv.second.size()) << kv.first;
}

TEST(Group, DuplicateJoinAnswersTheOlderTicket)
{
	Harness h;
	Two t = two_stable(h);
	uintptr_t j1 = h.join("g", t.b, {{"range", "b1"}}, 5);
	uintptr_t j2 = h.join("g", t.b, {{"range", "b2"}}, 5);

	EXPECT_EQ(KM_GROUP_ERR_REBALANCE_IN_PROGRESS, h.ans(j1).err);
	EXPECT_FALSE(h.answered(j2));
	uintptr_t ja = h.join("g", t.a, {{"range", "a"}}, 5);
	EXPECT_EQ(3, h.ans(j2).gen);
	EXPECT_EQ(3, h.ans(ja).gen);
}

TEST(Group, RejoinWithSameMetadataDuringCompletingOrStable)
{
	Harness h;
	Two t = two_stable(h);
	// Stable follower, same metadata: the current generation at once.
	uintptr_t jb = h.join("g", t.b, {{"range", "meta-b"}}, 5);
	EXPECT_EQ(2, h.ans(jb).gen);
	EXPECT_EQ(KM_GROUP_STABLE, h.describe("g").state);
	// The leader's rejoin always rebalances.
	uintptr_t ja = h.join("g", t.a, {{"range", "meta-a"}}, 5);
	EXPECT_FALSE(h.answered(ja));
	uintptr_t jb2 = h.join("g", t.b, {{"range", "meta-b"}}, 5);
	EXPECT_EQ(3, h.ans(jb2).gen);
	// Completing, same metadata: answered again, leader with members.
	uintptr_t ja3 = h.join("g", t.a, {{"range", "meta-a"}}, 5);
	EXPECT_EQ(3, h.ans(ja3).gen);
	EXPECT_EQ(2u, h.ans(ja3).ids.size());
	EXPECT_EQ(KM_GROUP_COMPLETING_REBALANCE, h.describe("g").state);
}

TEST(Group, LimitsAndValidation)
{
	Harness h(0, 2, 2);
	std::string g255(255, 'g'), g256(256, 'g');

	EXPECT_EQ(KM_GROUP_ERR_NONE, h.ans(h.join(g255, "")).err);
	EXPECT_EQ(KM_GROUP_ERR_INVALID_GROUP_ID, h.ans(h.join(g256, "")).err);
	EXPECT_EQ(KM_GROUP_ERR_INVALID_GROUP_ID, h.ans(h.join("", "")).err);
	EXPECT_EQ(KM_GROUP_ERR_UNKNOWN_MEMBER_ID,
		  h.ans(h.join(g255, std::string(256, 'm'))).err);
	EXPECT_EQ(KM_GROUP_ERR_INVALID_SESSION_TIMEOUT,
		  h.ans(h.join("s", "", {{"range", ""}}, 3, nullptr, 5999)).err);
	EXPECT_EQ(KM_GROUP_ERR_INVALID_SESSION_TIMEOUT,
		  h.ans(h.join("s", "", {{"range", ""}}, 3, nullptr, 1800001))
			  .err);
	EXPECT_EQ(KM_GROUP_ERR_INVALID_REQUEST,
		  h.ans(h.join("s", "", {{std::string(256, 'p'), ""}})).err);
	EXPECT_EQ(KM_GROUP_ERR_INVALID_REQUEST,
		  h.ans(h.join("s", "", {{"range", std::string((1 << 20) + 1,
							     'x')}}))
			  .err);
	EXPECT_EQ(KM_GROUP_ERR_INVALID_REQUEST,
		  h.ans(h.join("s", "", {{"range", ""}}, 5, "")).err);
	EXPECT_EQ(KM_GROUP_ERR_NONE,
		  h.ans(h.join("s", "", {{"range", std::string(1 << 20, 'x')}}))
			  .err);
	// Two groups: a third is refused while both have members.
	EXPECT_EQ(KM_GROUP_ERR_COORDINATOR_NOT_AVAILABLE,
		  h.ans(h.join("third", "")).err);
	// Two members (pending ids count): the third gets MAX_SIZE.
	std::string p = h.new_id("s");
	EXPECT_EQ(KM_GROUP_ERR_GROUP_MAX_SIZE_REACHED,
		  h.ans(h.join("s", "", {{"range", ""}}, 5)).err);
	EXPECT_EQ(KM_GROUP_ERR_GROUP_MAX_SIZE_REACHED,
		  h.ans(h.join("s", "", {{"range", ""}}, 5, "inst")).err);
	uintptr_t jp = h.join("s", p, {{"range", ""}}, 5); // pending: admitted
	EXPECT_FALSE(h.answered(jp));
	// An Empty group's slot is taken for a new group.
	std::vector<km_group_member_view> v;
	h.describe(g255, &v);
	ASSERT_EQ(1u, v.size());
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.leave(g255, v[0].member_id));
	EXPECT_EQ(KM_GROUP_EMPTY, h.describe(g255).state);
	EXPECT_EQ(KM_GROUP_ERR_NONE, h.ans(h.join("third", "")).err);
	EXPECT_EQ(KM_GROUP_DEAD, h.describe(g255).state);

	km_group_config bad;
	km_group *g = nullptr;
	km_group_config_default(&bad);
	EXPECT_EQ(-EINVAL, km_group_create(&bad, &g)); // no callbacks
	bad.on_join = Harness::on_join;
	bad.on_sync = Harness::on_sync;
	bad.groups_max = 0;
	EXPECT_EQ(-EINVAL, km_group_create(&bad, &g));
}

TEST(Group, DescribeListDelete)
{
	Harness h;
	Two t = two_stable(h);
	std::vector<km_group_member_view> v;
	km_group_description d = h.describe("g", &v);

	EXPECT_EQ(KM_GROUP_STABLE, d.state);
	EXPECT_STREQ("Stable", d.state_name);
	EXPECT_STREQ("consumer", d.protocol_type);
	EXPECT_STREQ("range", d.protocol);
	EXPECT_EQ(t.a, d.leader_id);
	EXPECT_EQ(2, d.generation);
	ASSERT_EQ(2u, v.size());
	EXPECT_EQ(t.a, v[0].member_id);
	EXPECT_EQ(nullptr, v[0].instance_id);
	EXPECT_STREQ("client", v[0].client_id);
	EXPECT_STREQ("/10.0.0.1", v[0].client_host);
	EXPECT_EQ("meta-a", std::string((const char *)v[0].metadata,
					v[0].metadata_len));
	EXPECT_EQ("pb", std::string((const char *)v[1].assignment,
				    v[1].assignment_len));

	h.join("h", "", {{"range", "m"}}, 5); // h: Empty with a pending id
	h.join("x", "", {{"range", "m"}}, 3);  // x: CompletingRebalance
	h.join("g", t.a, {{"range", "new"}}, 5); // g: PreparingRebalance
	std::vector<km_group_overview> o(8);
	ASSERT_EQ(3u, km_group_list(h.g, o.data(), 8));
	std::map<std::string, std::string> st;
	for (int i = 0; i < 3; i++) {
		st[o[i].group_id] = o[i].state;
		EXPECT_STREQ(std::string(o[i].group_id) == "h" ? "" :
			     "consumer", o[i].protocol_type);
	}
	EXPECT_EQ("PreparingRebalance", st["g"]);
	EXPECT_EQ("Empty", st["h"]);
	EXPECT_EQ("CompletingRebalance", st["x"]);
	EXPECT_EQ(3u, km_group_list(h.g, o.data(), 1)); // count, 1 written
	EXPECT_STREQ("", h.describe("g").protocol);    // not while preparing
	EXPECT_EQ(KM_GROUP_DEAD, h.describe("nope").state);
	EXPECT_STREQ("Dead", h.describe("nope").state_name);
	// every string of a Dead group's description is set: the front-end
	// encodes them as they are (NULL crashed kmirrord)
	EXPECT_STREQ("", h.describe("nope").protocol);
	EXPECT_STREQ("", h.describe("nope").protocol_type);
	EXPECT_STREQ("", h.describe("nope").leader_id);
	EXPECT_STREQ("Dead", km_group_state_name(KM_GROUP_DEAD));

	EXPECT_EQ(KM_GROUP_ERR_NON_EMPTY_GROUP, km_group_delete(h.g, "g"));
	EXPECT_EQ(KM_GROUP_ERR_NON_EMPTY_GROUP, km_group_delete(h.g, "h"));
	EXPECT_EQ(KM_GROUP_ERR_GROUP_ID_NOT_FOUND,
		  km_group_delete(h.g, "nope"));
	h.advance(10000); // h's pending id expires; g and x lose members
	h.advance(30000);
	h.advance(10000);
	EXPECT_EQ(KM_GROUP_EMPTY, h.describe("h").state);
	EXPECT_EQ(KM_GROUP_ERR_NONE, km_group_delete(h.g, "h"));
	EXPECT_EQ(KM_GROUP_DEAD, h.describe("h").state);
	EXPECT_EQ(UINT64_MAX, km_group_next_deadline_ms(h.g));
}

// ---- randomized --------------------------------------------------------

struct Client {
	int grp = 0;
	std::string id;
	const char *instance = nullptr;
	int32_t gen = -1;
	std::string leader;
	uintptr_t join_t = 0, sync_t = 0;
	std::vector<std::string> members; // as leader
};

struct Sim {
	Harness h{500};
	std::mt19937 rng;
	std::vector<Client> cl;
	std::set<uintptr_t> outstanding, cancelled;
	std::map<uintptr_t, size_t> owner;
	std::map<std::string, int32_t> last_gen;
	// What the run went through, so a run that never got anywhere fails.
	std::map<std::string, uint64_t> seen;
	const char *groups[3] = {"g0", "g1", "g2"};
	const char *insts[4] = {"i0", "i1", "i2", "i3"};

	explicit Sim(uint32_t seed) : rng(seed), cl(14)
	{
		for (size_t i = 0; i < cl.size(); i++) {
			cl[i].grp = (int)(i % 3);
			if (i < 4)
				cl[i].instance = insts[i];
		}
	}

	uint32_t pick(uint32_t n) { return rng() % n; }

	// Apply answers that arrived since the last step to the clients.
	void absorb()
	{
		std::vector<uintptr_t> f;

		f.swap(h.fresh);
		for (uintptr_t t : f) {
			ASSERT_EQ(1u, h.answers[t].size()) << "twice: " << t;
			ASSERT_TRUE(outstanding.count(t)) << t;
			ASSERT_FALSE(cancelled.count(t));
			outstanding.erase(t);
			Client &c = cl[owner[t]];
			const Answer &a = h.answers[t][0];
			seen[std::string(a.join ? "join" : "sync") + "-" +
			     std::to_string(a.err)]++;
			if (!a.join && !a.assignment.empty())
				seen["assignment"]++;
			if (a.join)
				absorb_join(c, t, a);
			else if (c.sync_t == t)
				c.sync_t = 0;
		}
	}

	void absorb_join(Client &c, uintptr_t t, const Answer &a)
	{
		if (c.join_t == t)
			c.join_t = 0;
		if (a.err == KM_GROUP_ERR_MEMBER_ID_REQUIRED) {
			c.id = a.member_id;
		} else if (a.err == KM_GROUP_ERR_NONE) {
			c.id = a.member_id;
			c.gen = a.gen;
			c.leader = a.leader;
			c.members = a.ids;
			if (a.leader == a.member_id && !a.ids.empty()) {
				bool self = false;
				for (auto &m : a.ids)
					self |= m == a.member_id;
				EXPECT_TRUE(self);
			}
		} else if (a.err == KM_GROUP_ERR_UNKNOWN_MEMBER_ID ||
			   a.err == KM_GROUP_ERR_FENCED_INSTANCE_ID) {
			c.id.clear();
			c.gen = -1;
		}
	}

	uintptr_t take(uintptr_t t, size_t who)
	{
		outstanding.insert(t);
		owner[t] = who;
		return t;
	}

	void step()
	{
		size_t who = pick((uint32_t)cl.size());
		Client &c = cl[who];
		const char *g = groups[c.grp];
		uint32_t op = pick(100);

		if (op < 25) {
			std::vector<Proto> p = {{"range", "m" + c.id}};
			if (pick(4) == 0)
				p.insert(p.begin(), {"rr", "r"});
			c.join_t = take(h.join(g, c.id, p, 5, c.instance, 6000 +
					       pick(6000), 8000 + pick(8000)),
					who);
		} else if (op < 45 && c.gen > 0) {
			std::map<std::string, std::string> asg;
			for (auto &m : c.members)
				if (pick(3))
					asg[m] = "a" + m;
			c.sync_t = take(h.sync(g, c.id, c.gen, asg, c.instance),
					who);
		} else if (op < 70) {
			h.hb(g, c.id, c.gen, c.instance);
			h.commit(g, c.id, c.gen, c.instance);
		} else if (op < 75 && !c.id.empty()) {
			h.leave(g, pick(2) ? c.id : "", c.instance);
		} else if (op < 80 && !outstanding.empty()) {
			auto it = outstanding.begin();
			std::advance(it, pick((uint32_t)outstanding.size()));
			uintptr_t t = *it;
			if (!h.answered(t)) {
				EXPECT_GE(km_group_cancel(h.g, (void *)t), 1u);
				cancelled.insert(t);
				seen["cancel"]++;
				outstanding.erase(t);
			}
		} else {
			h.advance(pick(4) == 0 ? pick(20000) : pick(2000));
		}
		absorb();
		check();
	}

	void check()
	{
		ASSERT_EQ(0, km_group_verify(h.g));
		for (const char *g : groups) {
			std::vector<km_group_member_view> v;
			km_group_description d = h.describe(g, &v);
			auto lg = last_gen.find(g);

			if (lg != last_gen.end()) {
				EXPECT_GE(d.generation, lg->second) << g;
			}
			if (d.state != KM_GROUP_DEAD)
				last_gen[g] = d.generation;
			seen[d.state_name]++;
			if (d.state == KM_GROUP_STABLE ||
			    d.state == KM_GROUP_COMPLETING_REBALANCE) {
				int leaders = 0;
				for (auto &m : v)
					leaders += d.leader_id ==
						   std::string(m.member_id);
				EXPECT_EQ(1, leaders) << g;
			}
			if (d.state == KM_GROUP_EMPTY) {
				EXPECT_EQ(0u, v.size());
			}
		}
	}
};

TEST(Group, RandomizedInvariants)
{
	std::map<std::string, uint64_t> seen;

	for (uint32_t seed = 1; seed <= 20; seed++) {
		Sim s(seed);

		for (int i = 0; i < 3000 && !testing::Test::HasFailure(); i++)
			s.step();
		// Quiet: every ticket is answered once time runs out.
		for (int i = 0; i < 200 && (!s.outstanding.empty() ||
					    km_group_next_deadline_ms(s.h.g) !=
						    UINT64_MAX); i++) {
			s.h.advance(60000);
			s.absorb();
		}
		EXPECT_TRUE(s.outstanding.empty()) << "seed " << seed;
		ASSERT_FALSE(testing::Test::HasFailure()) << "seed " << seed;
		EXPECT_EQ(UINT64_MAX, km_group_next_deadline_ms(s.h.g));
		for (auto &kv : s.seen)
			seen[kv.first] += kv.second;
		seen["generation"] = std::max(seen["generation"],
					      (uint64_t)s.last_gen["g0"]);
	}
	for (auto &kv : seen)
		printf("%s=%llu ", kv.first.c_str(),
		       (unsigned long long)kv.second);
	printf("\n");
	for (const char *k : {"Stable", "CompletingRebalance",
			      "PreparingRebalance", "Empty", "cancel",
			      "assignment", "join-0", "join-79", "join-82",
			      "join-25", "join-27", "sync-0", "sync-27",
			      "sync-22"})
		EXPECT_GT(seen[k], 0u) << k;
	EXPECT_GT(seen["generation"], 10u);
}

} // namespace
