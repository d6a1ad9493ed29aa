// Goal: the bookkeeping of KIP-227 fetch sessions to the source
// (dataplane/fetch/fsess_inc.c), request by request, as Kafka's
// FetchSessionHandler keeps it: the first Fetch is full with epoch 0; the
// answer's session id makes the next one incremental with epoch 1, writing
// only partitions new to the session or whose offset or MaxBytes moved;
// members not asked and partitions that left go into ForgottenTopicsData;
// 70 forgets the id, 71 closes it (the next Fetch is full with it); a
// broker answering session id 0 gets full Fetches; a version change makes
// the next Fetch full.
// Method: a session over caller memory with four members of one topic,
// asked as fsess_req.c asks them (asked[], ask_slot, inflight_offset,
// stats.max_bytes, parts in asked order); km_fsess_inc_build() on a
// km_fetch_req shaped like enc_fetch's, then the answer calls. No network.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "dataplane/fetch/fsess.h"
// fetcher_pvt.h has no C++ guard of its own (fsess.h, first, has).
extern "C" {
#include "dataplane/fetch/fetcher_pvt.h"
}

namespace {

class FsessInc : public ::testing::Test {
protected:
	void SetUp() override
	{
		scratch_.reset(new km_fetcher_scratch());
		pool_.cfg.scratch = scratch_.get();
		s_.reset(new km_fsess());
		s_->pool = &pool_;
		s_->inflight_ver = 12;
		for (int i = 0; i < 4; i++) {
			f_.emplace_back(new km_fetcher());
			km_fetcher *f = f_.back().get();
			snprintf(f->cfg.topic, sizeof(f->cfg.topic), "t");
			f->cfg.partition = i;
			f->ask_slot = -1;
			f->inflight_offset = 100 * i;
			f->stats.max_bytes = 1 << 20;
			f->sess = s_.get();
			f->next = i > 0 ? f_[i - 1].get() : nullptr;
		}
		for (int i = 0; i < 4; i++) {
			f_[i]->prev = i < 3 ? f_[i + 1].get() : nullptr;
			km_fsess_member_in(s_.get(), f_[i].get());
		}
		s_->members = f_[3].get(); // 3, 2, 1, 0
		s_->tail = f_[0].get();
		s_->n_members = 4;
	}

	// An event moved partition p's line (records came, it backs off): on
	// the dirty list, as km_fetcher_touch puts it.
	void Touch(int p) { km_fsess_dirty_add(s_.get(), f_[p].get()); }

	// A Fetch asking partitions `ask` (in this order), as enc_fetch lays
	// it out; returns what the broker would get.
	// As enc_fetch does, an incremental Fetch looks at the dirty list
	// only: of `ask` (the members ready), those on it; a full one at
	// every member ready.
	km_fetch_req Build(const std::vector<int> &ask, int16_t version = 12)
	{
		s_->v_fetch = version;
		bool inc = km_fsess_inc_possible(s_.get());
		std::vector<int> sel;
		for (int p : ask)
			if (!inc || f_[p]->dirty)
				sel.push_back(p);
		km_fetch_req m = {};
		if (Select(sel, version, inc, &m) != 0)
			Select(ask, version, false, &m);
		return m;
	}

	int Select(const std::vector<int> &ask, int16_t version, bool inc,
		   km_fetch_req *out)
	{
		km_fetcher_scratch *sc = scratch_.get();
		for (auto &f : f_)
			f->ask_slot = -1;
		s_->n_asked = 0;
		for (int p : ask) {
			km_fetcher *f = f_[p].get();
			f->ask_slot = (int32_t)s_->n_asked;
			s_->asked[s_->n_asked] = f;
			sc->fetch_parts[s_->n_asked] = { p, -1, f->inflight_offset, -1,
							 f->stats.max_bytes, -1 };
			s_->n_asked++;
		}
		km_wire_name_set(&sc->req_topics[0].name, "t");
		sc->req_topics[0].first = 0;
		sc->req_topics[0].count = s_->n_asked;
		km_fetch_req m = {};
		m.topics = sc->req_topics;
		m.n_topics = m.topics_max = ask.empty() ? 0 : 1;
		m.parts = sc->fetch_parts;
		m.n_parts = m.parts_max = s_->n_asked;
		m.topic_ids = sc->req_topic_ids;
		s_->inflight_ver = version;
		int rc = km_fsess_inc_build(s_.get(), &m, version, inc);
		*out = m;
		return rc;
	}

	static std::vector<int32_t> Written(const km_fetch_req &m)
	{
		std::vector<int32_t> out;
		for (uint32_t i = 0; i < m.n_parts; i++)
			out.push_back(m.parts[i].partition);
		return out;
	}
	static std::vector<int32_t> Forgotten(const km_fetch_req &m)
	{
		std::vector<int32_t> out;
		for (uint32_t i = 0; i < m.n_forgotten_parts; i++)
			out.push_back(m.forgotten_parts[i]);
		return out;
	}

	km_fsess_pool pool_ = {};
	std::unique_ptr<km_fetcher_scratch> scratch_;
	std::unique_ptr<km_fsess> s_;
	std::vector<std::unique_ptr<km_fetcher>> f_;
};

using V = std::vector<int32_t>;

TEST_F(FsessInc, FullThenOnlyWhatChanged)
{
	km_fetch_req m = Build({ 0, 1, 2, 3 });
	EXPECT_EQ(0, m.session_id);
	EXPECT_EQ(0, m.session_epoch) << "epoch 0 asks for a session";
	EXPECT_EQ(V({ 0, 1, 2, 3 }), Written(m));
	km_fsess_inc_answered(s_.get(), 77);

	m = Build({ 0, 1, 2, 3 });
	EXPECT_EQ(77, m.session_id);
	EXPECT_EQ(1, m.session_epoch);
	EXPECT_TRUE(Written(m).empty()) << "nothing moved";
	EXPECT_EQ(0u, m.n_topics) << "no topic without a partition";
	EXPECT_TRUE(Forgotten(m).empty());
	km_fsess_inc_answered(s_.get(), 77);

	f_[2]->inflight_offset += 5;  // records came
	f_[3]->stats.max_bytes = 4096; // MaxBytes moved
	Touch(2);
	Touch(3);
	m = Build({ 0, 1, 2, 3 });
	EXPECT_EQ(2, m.session_epoch);
	EXPECT_EQ(V({ 2, 3 }), Written(m));
	EXPECT_EQ(205, m.parts[0].fetch_offset);
	EXPECT_EQ(4096, m.parts[1].partition_max_bytes);
	km_fsess_inc_answered(s_.get(), 77);
	EXPECT_EQ(2u, s_->stats.fetch_incremental);
	EXPECT_EQ(1u, s_->stats.fetch_full);
}

TEST_F(FsessInc, NotAskedAndLeftAreForgotten)
{
	Build({ 0, 1, 2, 3 });
	km_fsess_inc_answered(s_.get(), 9);
	Touch(1);
	km_fetch_req m = Build({ 0, 2, 3 }); // 1 backs off
	EXPECT_EQ(V({ 1 }), Forgotten(m));
	EXPECT_TRUE(Written(m).empty());
	EXPECT_FALSE(f_[1]->fs_in);
	km_fsess_inc_answered(s_.get(), 9);

	m = Build({ 0, 1, 2, 3 }); // 1 is back: written again, whole
	EXPECT_EQ(V({ 1 }), Written(m));
	EXPECT_TRUE(Forgotten(m).empty());
	km_fsess_inc_answered(s_.get(), 9);

	// 3 leaves the session (stopped, moved): forgotten by name.
	km_fsess_inc_leave(s_.get(), f_[3].get());
	km_fsess_member_out(s_.get(), f_[3].get());
	s_->n_members = 3; // unlinked, as unlink_member does
	f_[3]->next = nullptr;
	s_->members = f_[2].get();
	f_[2]->prev = nullptr;
	m = Build({ 0, 1, 2 });
	EXPECT_EQ(V({ 3 }), Forgotten(m));
	ASSERT_EQ(1u, m.n_forgotten);
	EXPECT_STREQ("t", m.forgotten[0].name.s);
	EXPECT_EQ(3, m.session_epoch);
}

TEST_F(FsessInc, SessionErrorsStartOver)
{
	Build({ 0, 1 });
	km_fsess_inc_answered(s_.get(), 5);
	Build({ 0, 1 });
	// INVALID_FETCH_SESSION_EPOCH: the next Fetch closes 5 and opens one.
	ASSERT_TRUE(km_fsess_inc_session_error(KM_KERR_INVALID_FETCH_SESSION_EPOCH));
	km_fsess_inc_error(s_.get(), KM_KERR_INVALID_FETCH_SESSION_EPOCH);
	km_fetch_req m = Build({ 0, 1 });
	EXPECT_EQ(5, m.session_id);
	EXPECT_EQ(0, m.session_epoch);
	EXPECT_EQ(V({ 0, 1 }), Written(m)) << "a full Fetch names everything";
	km_fsess_inc_answered(s_.get(), 6);
	Build({ 0, 1 });
	// FETCH_SESSION_ID_NOT_FOUND: the id is forgotten.
	km_fsess_inc_error(s_.get(), KM_KERR_FETCH_SESSION_ID_NOT_FOUND);
	m = Build({ 0, 1 });
	EXPECT_EQ(0, m.session_id);
	EXPECT_EQ(0, m.session_epoch);
	EXPECT_EQ(2u, s_->stats.fetch_session_errors);
	EXPECT_FALSE(km_fsess_inc_session_error(KM_KERR_NOT_LEADER_OR_FOLLOWER));
}

TEST_F(FsessInc, NoSlotMeansFullFetches)
{
	for (int i = 0; i < 3; i++) {
		km_fetch_req m = Build({ 0, 1, 2 });
		EXPECT_EQ(0, m.session_epoch);
		EXPECT_EQ(3u, m.n_parts);
		km_fsess_inc_answered(s_.get(), 0); // no session given
	}
	EXPECT_EQ(3u, s_->stats.fetch_sessionless);
	EXPECT_EQ(0u, s_->stats.fetch_incremental);
}

TEST_F(FsessInc, AnotherVersionIsFull)
{
	Build({ 0, 1 }, 13);
	km_fsess_inc_answered(s_.get(), 8);
	km_fetch_req m = Build({ 0, 1 }, 12); // topic ids dropped
	EXPECT_EQ(8, m.session_id);
	EXPECT_EQ(0, m.session_epoch);
	EXPECT_EQ(2u, m.n_parts);
}

} // namespace

/* A Fetch built but never handed to the connection (its send queue full,
 * or KIP-368 re-authentication under way: snet answers -EAGAIN) left the
 * broker's session at the offsets before it. Before the fix the next
 * Fetch was incremental and left partition 2 out (its offset "already
 * sent"), so the broker went on serving it from 200 while we wanted 205:
 * kafka-tls's re-authentication case failed the partition once ("the
 * source sent 1200..1200 (wholly below it) 5 times in a row"). */
TEST_F(FsessInc, UnsentFetchMakesTheNextFull)
{
	Build({ 0, 1, 2, 3 });
	km_fsess_inc_answered(s_.get(), 77);
	f_[2]->inflight_offset += 5;
	Touch(2);
	km_fetch_req m = Build({ 0, 1, 2, 3 });
	ASSERT_EQ(V({ 2 }), Written(m));
	km_fsess_inc_unsent(s_.get());
	EXPECT_EQ(0u, s_->stats.fetch_incremental) << "not sent, not counted";
	EXPECT_EQ(1u, s_->stats.fetch_full);

	m = Build({ 0, 1, 2, 3 });
	EXPECT_EQ(77, m.session_id) << "closes the broker's session";
	EXPECT_EQ(0, m.session_epoch) << "and opens another: a full Fetch";
	EXPECT_EQ(V({ 0, 1, 2, 3 }), Written(m));
	EXPECT_EQ(205, m.parts[2].fetch_offset);
	km_fsess_inc_answered(s_.get(), 78);

	m = Build({ 0, 1, 2, 3 });
	EXPECT_EQ(78, m.session_id);
	EXPECT_EQ(1, m.session_epoch);
	EXPECT_TRUE(Written(m).empty());
}
