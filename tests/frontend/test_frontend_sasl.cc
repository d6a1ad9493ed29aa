// Goal: the front end's SASL state machine byte by byte, as Kafka's
// SaslServerAuthenticator and KafkaApis answer (issue 16): on a PLAINTEXT
// listener SaslHandshake and SaslAuthenticate get ILLEGAL_SASL_STATE; on a
// SASL_PLAINTEXT listener nothing but ApiVersions and SaslHandshake before a
// login (else the connection closes unanswered), a mechanism not enabled is
// UNSUPPORTED_SASL_MECHANISM with the enabled list and then a close, a
// SaslHandshake v0 closes, a wrong proof is SASL_AUTHENTICATION_FAILED with
// Kafka's words and a close, a right one serves Metadata, and
// re-authentication keeps the principal and mechanism.
// Method: a real front end on loopback (fe_harness) with a users file
// written through kafka/sasl_server.h; raw TCP requests encoded with the
// client codecs (kafka/sasl.h) and kmirror's own SCRAM client, answers
// decoded field by field.
#include <gtest/gtest.h>

#include <fstream>
#include <sys/stat.h>

#include "common/errors.h"
#include "fe_harness.h"
#include "fe_raw.h"
#include "kafka/sasl.h"
#include "kafka/sasl_server.h"

using namespace fetest;

namespace {

const std::vector<PartSpec> kParts = { { "sasl-t", 0, true } };

Bytes Handshake(int16_t ver, int32_t corr, const char *mech)
{
	return Req(KM_API_SASL_HANDSHAKE, ver, corr, [&](km_wire_wr *w) {
		km_sasl_handshake_req_encode(w, ver, mech);
	});
}

Bytes Authenticate(int16_t ver, int32_t corr, const uint8_t *b, int n)
{
	return Req(KM_API_SASL_AUTHENTICATE, ver, corr, [&](km_wire_wr *w) {
		km_sasl_auth_req_encode(w, ver, b, (uint32_t)n);
	});
}

Bytes Metadata(int32_t corr)
{
	return Req(KM_API_METADATA, 1, corr, [&](km_wire_wr *w) {
		km_wire_wr_array(w, false, true, -1); /* every topic */
	});
}

class Sasl : public RawFixture {
protected:
	void SetUp() override
	{
		km_sasl_users u = {};
		km_scram_cred c;
		for (auto m : { KM_SASL_SCRAM_SHA_256, KM_SASL_SCRAM_SHA_512 })
			for (const char *who : { "alice", "bob" }) {
				ASSERT_EQ(0, km_sasl_cred_make(m, who, (std::string(who) + "-pw").c_str(),
							       4096, nullptr, 0, &c));
				ASSERT_EQ(0, km_sasl_users_put(&u, &c));
			}
		char *text = km_sasl_users_format(&u);
		km_sasl_users_free(&u);
		users_ = std::string(P_tmpdir) + "/km-fe-sasl-" + std::to_string(getpid());
		std::ofstream(users_) << text;
		free(text);
		ASSERT_EQ(0, chmod(users_.c_str(), 0600));
		srv_.Sasl(users_, 1u << KM_SASL_PLAIN | 1u << KM_SASL_SCRAM_SHA_256, reauth_ms_);
		Start(kParts);
	}
	void TearDown() override
	{
		RawFixture::TearDown();
		unlink(users_.c_str());
	}
	// Handshake and SCRAM-SHA-256 as user/pw at SaslAuthenticate v1: the
	// last answer in *m.
	void Login(const char *user, const char *pw, km_sasl_auth_resp *m,
		   int32_t corr = 10)
	{
		Resp h;
		RoundTrip(Handshake(1, corr, "SCRAM-SHA-256"), KM_API_SASL_HANDSHAKE, 1, &h);
		km_sasl_handshake_resp hs;
		ASSERT_EQ(0, km_sasl_handshake_resp_decode(&h.r, 1, &hs));
		ASSERT_EQ(0, hs.error_code);
		km_sasl_client c;
		uint8_t out[512];
		int n = km_sasl_client_start(&c, KM_SASL_SCRAM_SHA_256, user, pw, nullptr,
					     out, sizeof(out));
		for (int step = 0; step < 2; step++) {
			Resp a;
			RoundTrip(Authenticate(1, corr + 1 + step, out, n),
				  KM_API_SASL_AUTHENTICATE, 1, &a);
			ASSERT_EQ(0, km_sasl_auth_resp_decode(&a.r, 1, m));
			if (m->error_code != 0)
				return;
			n = km_sasl_client_step(&c, m->auth, m->auth_len, out, sizeof(out));
			ASSERT_GE(n, 0) << c.why;
		}
	}
	std::string users_;
	int64_t reauth_ms_ = 0;
};

} // namespace

TEST_F(Sasl, NothingButApiVersionsAndHandshakeBeforeALogin)
{
	Resp v;
	RoundTrip(Req(KM_API_API_VERSIONS, 0, 1, [](km_wire_wr *) {}), KM_API_API_VERSIONS, 0, &v);
	ASSERT_TRUE(c_.Send(Metadata(2)));
	EXPECT_TRUE(c_.WaitClosed()) << "Metadata before a login was served";
	EXPECT_EQ(1u, srv_.Stats().protocol_errors);

	c_.Close();
	ASSERT_EQ("", c_.Connect(srv_.port()));
	uint8_t b[4] = { 'n', ',', ',', 'x' };
	ASSERT_TRUE(c_.Send(Authenticate(1, 3, b, 4)));
	EXPECT_TRUE(c_.WaitClosed()) << "SaslAuthenticate before SaslHandshake";

	c_.Close();
	ASSERT_EQ("", c_.Connect(srv_.port()));
	ASSERT_TRUE(c_.Send(Handshake(0, 4, "PLAIN")));
	EXPECT_TRUE(c_.WaitClosed()) << "SaslHandshake v0 (raw tokens) was taken";
}

TEST_F(Sasl, MechanismNotEnabledGetsTheListThenTheClose)
{
	Resp h;
	RoundTrip(Handshake(1, 5, "SCRAM-SHA-512"), KM_API_SASL_HANDSHAKE, 1, &h);
	km_sasl_handshake_resp hs;
	ASSERT_EQ(0, km_sasl_handshake_resp_decode(&h.r, 1, &hs));
	EXPECT_EQ(KM_KERR_UNSUPPORTED_SASL_MECHANISM, hs.error_code);
	EXPECT_STREQ("PLAIN,SCRAM-SHA-256", hs.mechanisms);
	EXPECT_TRUE(c_.WaitClosed());
	EXPECT_EQ(1u, srv_.Stats().sasl_auth_failed);
}

TEST_F(Sasl, WrongProofIsRefusedWithKafkasWordsThenClosed)
{
	km_sasl_auth_resp m;
	ASSERT_NO_FATAL_FAILURE(Login("alice", "bob-pw", &m));
	EXPECT_EQ(KM_KERR_SASL_AUTHENTICATION_FAILED, m.error_code);
	EXPECT_STREQ("Authentication failed during authentication due to invalid "
		     "credentials with SASL mechanism SCRAM-SHA-256", m.error_message);
	EXPECT_TRUE(c_.WaitClosed());
	km_frontend_stats st = srv_.Stats();
	EXPECT_EQ(1u, st.sasl_auth_failed);
	EXPECT_EQ(0u, st.sasl_auth_ok);
}

TEST_F(Sasl, LoginServesAndReauthenticationKeepsThePrincipal)
{
	km_sasl_auth_resp m;
	ASSERT_NO_FATAL_FAILURE(Login("alice", "alice-pw", &m));
	ASSERT_EQ(0, m.error_code) << m.error_message;
	EXPECT_EQ(0, m.session_lifetime_ms); /* connections.max.reauth.ms 0 */
	Resp md;
	RoundTrip(Metadata(20), KM_API_METADATA, 1, &md);
	Resp again;
	uint8_t b[1] = { 0 };
	RoundTrip(Authenticate(1, 21, b, 1), KM_API_SASL_AUTHENTICATE, 1, &again);
	ASSERT_EQ(0, km_sasl_auth_resp_decode(&again.r, 1, &m));
	EXPECT_EQ(KM_KERR_ILLEGAL_SASL_STATE, m.error_code);
	EXPECT_STREQ("SaslAuthenticate request received after successful authentication",
		     m.error_message);
	// Re-authentication as alice: fine; as bob: "Cannot change principals".
	ASSERT_NO_FATAL_FAILURE(Login("alice", "alice-pw", &m, 30));
	EXPECT_EQ(0, m.error_code) << m.error_message;
	EXPECT_EQ(1u, srv_.Stats().sasl_reauth_ok);
	ASSERT_NO_FATAL_FAILURE(Login("bob", "bob-pw", &m, 40));
	EXPECT_EQ(KM_KERR_SASL_AUTHENTICATION_FAILED, m.error_code);
	EXPECT_STREQ("Cannot change principals during re-authentication from "
		     "User:alice: User:bob", m.error_message);
	EXPECT_TRUE(c_.WaitClosed());
}

class SaslOff : public RawOn<&kParts> {};

// KafkaApis' answers on a listener without SASL.
TEST_F(SaslOff, PlaintextListenerAnswersIllegalSaslState)
{
	Resp h;
	RoundTrip(Handshake(1, 1, "PLAIN"), KM_API_SASL_HANDSHAKE, 1, &h);
	km_sasl_handshake_resp hs;
	ASSERT_EQ(0, km_sasl_handshake_resp_decode(&h.r, 1, &hs));
	EXPECT_EQ(KM_KERR_ILLEGAL_SASL_STATE, hs.error_code);
	EXPECT_STREQ("", hs.mechanisms);
	Resp a;
	uint8_t b[1] = { 0 };
	RoundTrip(Authenticate(1, 2, b, 1), KM_API_SASL_AUTHENTICATE, 1, &a);
	km_sasl_auth_resp m;
	ASSERT_EQ(0, km_sasl_auth_resp_decode(&a.r, 1, &m));
	EXPECT_EQ(KM_KERR_ILLEGAL_SASL_STATE, m.error_code);
	Resp md;
	RoundTrip(Metadata(3), KM_API_METADATA, 1, &md); /* still served */
}
