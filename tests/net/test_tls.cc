// Goal: the TLS layer to a source (dataplane/net/secconn.h) and the secured
// backend over io_uring sockets (dataplane/net/snet.h) carry bytes intact
// both ways, refuse a certificate a CA did not sign or that names another
// host with KM_ETLS and OpenSSL's reason, and keep net.h's contract
// (on_connect once, sends' callbacks with their totals, every receive
// buffer handed back, on_close once); that a close from either, and from
// the control thread's client (control/kclient.h), ends the session with
// close_notify (the server reads SSL_ERROR_ZERO_RETURN); and that an
// encrypted client key loads with its password only.
// Method: a CA and a server certificate for localhost and 127.0.0.1 made
// with the openssl tool; an OpenSSL server (SSL_accept) either on memory
// BIOs, bytes pumped by hand between it and a km_secconn, or on a thread
// over a loopback socket echoing what it reads, with a km_snet over a
// kernel km_net on one io_uring driven by a pump that waits for
// completions (never sleeps) under a deadline.
#include <gtest/gtest.h>
#include <liburing.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/errors.h"
#include "control/kclient.h"
#include "dataplane/net/ktls.h"
#include "dataplane/net/net.h"
#include "dataplane/net/secconn.h"
#include "dataplane/net/snet.h"
#include "iouring_log/uring.h"

namespace {

std::string g_dir; // the certificates

bool Sh(const std::string &cmd)
{
	return system((cmd + " >/dev/null 2>&1").c_str()) == 0;
}

class Certs : public ::testing::Environment {
public:
	void SetUp() override
	{
		// The echo server's own close_notify may meet a closed socket.
		signal(SIGPIPE, SIG_IGN);
		char tmpl[] = "/tmp/km-tls-unit-XXXXXX";
		ASSERT_NE(nullptr, mkdtemp(tmpl));
		g_dir = tmpl;
		std::string d = g_dir;
		for (const char *ca : { "ca", "other" })
			ASSERT_TRUE(Sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout " +
				       d + "/" + ca + ".key -out " + d + "/" + ca +
				       ".pem -subj /CN=" + ca + " -days 2"));
		FILE *f = fopen((d + "/srv.ext").c_str(), "w");
		ASSERT_NE(nullptr, f);
		fputs("subjectAltName=DNS:localhost,IP:127.0.0.1\n", f);
		fclose(f);
		ASSERT_TRUE(Sh("openssl req -newkey rsa:2048 -nodes -keyout " + d +
			       "/srv.key -out " + d + "/srv.csr -subj /CN=srv"));
		ASSERT_TRUE(Sh("openssl x509 -req -in " + d + "/srv.csr -CA " + d +
			       "/ca.pem -CAkey " + d + "/ca.key -CAcreateserial -out " +
			       d + "/srv.pem -days 2 -extfile " + d + "/srv.ext"));
		// A client certificate whose key is encrypted (AES-256, pass "kpw").
		ASSERT_TRUE(Sh("openssl req -newkey rsa:2048 -passout pass:kpw -keyout " +
			       d + "/cli.key -out " + d + "/cli.csr -subj /CN=cli"));
		ASSERT_TRUE(Sh("openssl x509 -req -in " + d + "/cli.csr -CA " + d +
			       "/ca.pem -CAkey " + d + "/ca.key -CAcreateserial -out " +
			       d + "/cli.pem -days 2"));
	}
	void TearDown() override { Sh("rm -rf " + g_dir); }
};

const auto *g_env = ::testing::AddGlobalTestEnvironment(new Certs);

SSL_CTX *ServerCtx()
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	EXPECT_EQ(1, SSL_CTX_use_certificate_file(ctx, (g_dir + "/srv.pem").c_str(),
						  SSL_FILETYPE_PEM));
	EXPECT_EQ(1, SSL_CTX_use_PrivateKey_file(ctx, (g_dir + "/srv.key").c_str(),
						 SSL_FILETYPE_PEM));
	return ctx;
}

struct Sec {
	km_netsec sec{};
	explicit Sec(const std::string &ca, bool verify_host = true)
	{
		km_netsec_config c{};
		char why[256];
		c.protocol = KM_SEC_SSL;
		c.ca_location = ca.c_str();
		c.verify_host = verify_host;
		EXPECT_EQ(0, km_netsec_init(&sec, &c, why, sizeof(why))) << why;
	}
	~Sec() { km_netsec_free(&sec); }
};

// A server SSL on memory BIOs and a km_secconn, bytes moved between them.
struct MemPair {
	SSL_CTX *sctx = ServerCtx();
	SSL *srv = SSL_new(sctx);
	BIO *sin = BIO_new(BIO_s_mem()), *sout = BIO_new(BIO_s_mem());
	km_secconn *sc = nullptr;

	MemPair(const km_netsec *s, const char *host)
	{
		BIO_set_mem_eof_return(sin, -1);
		SSL_set_bio(srv, sin, sout);
		SSL_set_accept_state(srv);
		EXPECT_EQ(0, km_secconn_new(s, host, &sc));
	}
	~MemPair()
	{
		km_secconn_free(sc);
		SSL_free(srv);
		SSL_CTX_free(sctx);
	}
	// Move everything pending both ways once; true if anything moved.
	bool Move()
	{
		uint8_t buf[65536];
		bool moved = false;
		size_t n;
		while ((n = km_secconn_output(sc, buf, sizeof(buf))) > 0) {
			BIO_write(sin, buf, (int)n);
			moved = true;
		}
		int r;
		while ((r = BIO_read(sout, buf, sizeof(buf))) > 0) {
			EXPECT_EQ(0, km_secconn_input(sc, buf, (size_t)r));
			moved = true;
		}
		return moved;
	}
	// The handshake to its end: km_secconn_advance's last answer.
	int Handshake()
	{
		int rc = 1;
		for (int i = 0; i < 50 && rc == 1; i++) {
			rc = km_secconn_advance(sc, 0);
			SSL_do_handshake(srv);
			Move();
		}
		return rc;
	}
};

std::vector<uint8_t> Pattern(size_t n, uint8_t seed)
{
	std::vector<uint8_t> v(n);
	for (size_t i = 0; i < n; i++)
		v[i] = (uint8_t)(i * 31 + seed + i / 251);
	return v;
}

} // namespace

TEST(SecConn, HandshakeThenBytesBothWays)
{
	Sec s(g_dir + "/ca.pem");
	MemPair p(&s.sec, "127.0.0.1");
	ASSERT_EQ(0, p.Handshake()) << km_secconn_why(p.sc);
	auto up = Pattern(1 << 20, 1), down = Pattern(1 << 20, 2);
	std::vector<uint8_t> got_up, got_down;
	for (size_t off = 0; off < up.size(); off += 7000)
		ASSERT_EQ(0, km_secconn_write(p.sc, up.data() + off,
					      std::min<size_t>(7000, up.size() - off)));
	ASSERT_GT(SSL_write(p.srv, down.data(), (int)down.size()), 0);
	uint8_t buf[16384];
	while (p.Move() || got_up.size() < up.size() || got_down.size() < down.size()) {
		int n;
		while ((n = SSL_read(p.srv, buf, sizeof(buf))) > 0)
			got_up.insert(got_up.end(), buf, buf + n);
		while ((n = km_secconn_read(p.sc, buf, sizeof(buf))) > 0)
			got_down.insert(got_down.end(), buf, buf + n);
		ASSERT_GE(n, 0) << km_secconn_why(p.sc);
		if (got_up.size() >= up.size() && got_down.size() >= down.size())
			break;
	}
	EXPECT_TRUE(up == got_up);
	EXPECT_TRUE(down == got_down);
	// The peer's close_notify ends the stream.
	SSL_shutdown(p.srv);
	p.Move();
	EXPECT_EQ(-ECONNRESET, km_secconn_read(p.sc, buf, sizeof(buf)));
}

// Our close_notify reaches the peer as a clean end of the session, once.
TEST(SecConn, CloseNotifyEndsTheSessionCleanly)
{
	Sec s(g_dir + "/ca.pem");
	MemPair p(&s.sec, "127.0.0.1");
	ASSERT_EQ(0, p.Handshake()) << km_secconn_why(p.sc);
	EXPECT_EQ(1, km_secconn_close_notify(p.sc));
	EXPECT_EQ(0, km_secconn_close_notify(p.sc)) << "sent twice";
	EXPECT_TRUE(p.Move());
	uint8_t buf[64];
	int n = SSL_read(p.srv, buf, sizeof(buf));
	EXPECT_EQ(0, n);
	EXPECT_EQ(SSL_ERROR_ZERO_RETURN, SSL_get_error(p.srv, n));
	// Before the handshake ended there is no session to close.
	MemPair early(&s.sec, "127.0.0.1");
	EXPECT_EQ(0, km_secconn_close_notify(early.sc));
}

// Mutual TLS with an encrypted client key (source.ssl.key.password.file):
// the password decrypts it and the server, which requires a certificate,
// sees ours; without the password or with a wrong one the key does not
// load (KM_ETLS naming the certificate), never a prompt on a terminal.
TEST(SecConn, EncryptedClientKeyNeedsItsPassword)
{
	for (const char *pw : { (const char *)nullptr, "wrong" }) {
		km_netsec_config c{};
		km_netsec bad{};
		char why[512] = "";
		std::string ca = g_dir + "/ca.pem", cert = g_dir + "/cli.pem",
			    key = g_dir + "/cli.key";
		c.protocol = KM_SEC_SSL;
		c.ca_location = ca.c_str();
		c.cert_location = cert.c_str();
		c.key_location = key.c_str();
		c.key_password = pw;
		EXPECT_EQ(KM_ETLS, km_netsec_init(&bad, &c, why, sizeof(why)))
			<< (pw ? pw : "(none)");
		EXPECT_NE(std::string::npos,
			  std::string(why).find("cannot load certificate '" + cert))
			<< why;
	}
	km_netsec_config c{};
	km_netsec sec{};
	char why[512] = "";
	std::string ca = g_dir + "/ca.pem", cert = g_dir + "/cli.pem",
		    key = g_dir + "/cli.key";
	c.protocol = KM_SEC_SSL;
	c.ca_location = ca.c_str();
	c.cert_location = cert.c_str();
	c.key_location = key.c_str();
	c.key_password = "kpw";
	c.verify_host = true;
	ASSERT_EQ(0, km_netsec_init(&sec, &c, why, sizeof(why))) << why;
	{
		MemPair p(&sec, "127.0.0.1");
		ASSERT_EQ(1, SSL_CTX_load_verify_locations(p.sctx, ca.c_str(), nullptr));
		SSL_set_verify(p.srv, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
			       nullptr);
		ASSERT_EQ(0, p.Handshake()) << km_secconn_why(p.sc);
		// TLS 1.3: the server takes our certificate after we are done.
		ASSERT_EQ(1, SSL_do_handshake(p.srv));
		X509 *peer = SSL_get1_peer_certificate(p.srv);
		ASSERT_NE(nullptr, peer);
		char cn[64] = "";
		X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName,
					  cn, sizeof(cn));
		EXPECT_STREQ("cli", cn);
		X509_free(peer);
	}
	km_netsec_free(&sec);
}

TEST(SecConn, CaThatDidNotSignIsRefused)
{
	Sec s(g_dir + "/other.pem");
	MemPair p(&s.sec, "127.0.0.1");
	EXPECT_EQ(KM_ETLS, p.Handshake());
	EXPECT_NE(std::string::npos, std::string(km_secconn_why(p.sc))
					     .find("unable to get local issuer certificate"))
		<< km_secconn_why(p.sc);
}

TEST(SecConn, CertificateMustNameTheHost)
{
	Sec s(g_dir + "/ca.pem");
	for (const char *ok : { "127.0.0.1", "localhost" }) {
		MemPair p(&s.sec, ok);
		EXPECT_EQ(0, p.Handshake()) << ok << ": " << km_secconn_why(p.sc);
	}
	MemPair ip(&s.sec, "127.0.0.2");
	EXPECT_EQ(KM_ETLS, ip.Handshake());
	EXPECT_NE(std::string::npos,
		  std::string(km_secconn_why(ip.sc)).find("IP address mismatch"))
		<< km_secconn_why(ip.sc);
	MemPair dns(&s.sec, "other.example");
	EXPECT_EQ(KM_ETLS, dns.Handshake());
	EXPECT_NE(std::string::npos,
		  std::string(km_secconn_why(dns.sc)).find("hostname mismatch"))
		<< km_secconn_why(dns.sc);
	// ssl.endpoint.identification.algorithm= (empty): not checked.
	Sec loose(g_dir + "/ca.pem", false);
	MemPair any(&loose.sec, "other.example");
	EXPECT_EQ(0, any.Handshake()) << km_secconn_why(any.sc);
}

namespace {

// One TLS connection accepted on a thread, echoing what it reads.
struct EchoServer {
	SSL_CTX *ctx = ServerCtx();
	int lfd = -1;
	uint16_t port = 0;
	// SSL_get_error of the read that ended the stream: ZERO_RETURN for
	// the client's close_notify; -1 until then.
	std::atomic<int> end_error{ -1 };
	std::thread th;

	EchoServer()
	{
		sockaddr_in sa{};
		socklen_t len = sizeof(sa);
		lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		sa.sin_family = AF_INET;
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (bind(lfd, (sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 4) < 0 ||
		    getsockname(lfd, (sockaddr *)&sa, &len) < 0)
			abort();
		port = ntohs(sa.sin_port);
		th = std::thread([this] { Serve(); });
	}
	void Serve()
	{
		int fd = accept(lfd, nullptr, nullptr);
		if (fd < 0)
			return;
		SSL *s = SSL_new(ctx);
		SSL_set_fd(s, fd);
		if (SSL_accept(s) == 1) {
			char buf[16384];
			int n;
			while ((n = SSL_read(s, buf, sizeof(buf))) > 0)
				if (SSL_write(s, buf, n) != n)
					break;
			end_error = SSL_get_error(s, n);
			SSL_shutdown(s);
		}
		SSL_free(s);
		close(fd);
	}
	~EchoServer()
	{
		shutdown(lfd, SHUT_RDWR);
		th.join();
		close(lfd);
		SSL_CTX_free(ctx);
	}
};

struct Conn {
	int connected = 1; // on_connect's result; 1: not yet
	int closes = 0, close_reason = 1;
	std::string why;
	std::vector<uint8_t> got;
	int64_t sent = 0;
	km_net *net = nullptr;
	bool hold = false;	// keep the buffers (backpressure)
	std::vector<uint32_t> held;
};

void OnConnect(km_net_conn *c, int res)
{
	auto *k = (Conn *)km_net_conn_ctx(c);
	k->connected = res;
	if (res < 0)
		k->why = km_snet_conn_why(c);
}

void OnRecv(km_net_conn *c, const km_chain *d, const uint32_t *ids)
{
	auto *k = (Conn *)km_net_conn_ctx(c);
	for (uint32_t i = 0; i < d->n_iov; i++) {
		auto *p = (const uint8_t *)d->iov[i].iov_base;
		k->got.insert(k->got.end(), p, p + d->iov[i].iov_len);
		if (k->hold)
			k->held.push_back(ids[i]);
	}
	if (!k->hold)
		km_net_release(k->net, ids, d->n_iov);
}

void OnClose(km_net_conn *c, int reason)
{
	auto *k = (Conn *)km_net_conn_ctx(c);
	k->closes++;
	k->close_reason = reason;
}

void OnSent(km_net_conn *c, void *arg, int res)
{
	(void)arg;
	auto *k = (Conn *)km_net_conn_ctx(c);
	if (res > 0)
		k->sent += res;
}

const km_net_handler kHandler = { OnConnect, nullptr, OnRecv, OnClose };

class Snet : public ::testing::Test {
protected:
	km_uring u{};
	km_net *sn = nullptr;

	void Make(const km_netsec *sec)
	{
		ASSERT_EQ(0, km_uring_init(&u, 256));
		km_net_config cfg{};
		cfg.kind = KM_NET_KERNEL;
		cfg.conns_max = 8;
		cfg.rx_buf_count = 16;
		cfg.rx_buf_bytes = 4096;
		cfg.send_queue_max = 16;
		cfg.send_iov_max = 64;
		cfg.connect_timeout_ms = 5000;
		cfg.close_timeout_ms = 5000;
		cfg.uring = &u;
		km_net *inner = nullptr;
		ASSERT_EQ(0, km_net_create(&cfg, &inner));
		ASSERT_EQ(0, km_snet_create(inner, &cfg, sec, &sn));
		ASSERT_TRUE(km_snet_is(sn));
	}
	void TearDown() override
	{
		if (sn != nullptr)
			km_net_destroy(sn);
		km_uring_exit(&u);
	}
	void Pump()
	{
		ASSERT_GE(km_uring_submit(&u), 0);
		if (!km_net_wants_poll(sn) && km_uring_busy(&u) > 0) {
			__kernel_timespec ts{ 0, 5000000 };
			io_uring_cqe *cqe;
			(void)io_uring_wait_cqe_timeout(&u.ring, &cqe, &ts);
		}
		ASSERT_GE(km_uring_poll(&u, false), 0);
		ASSERT_GE(km_net_poll(sn), 0);
	}
	template <class P> bool Until(P pred)
	{
		auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
		while (!pred() && std::chrono::steady_clock::now() < end) {
			Pump();
			if (::testing::Test::HasFatalFailure())
				return false;
		}
		return pred();
	}
	km_net_conn *Open(Conn *k, uint16_t port)
	{
		km_net_conn *c = nullptr;
		k->net = sn;
		EXPECT_EQ(0, km_net_connect(sn, "127.0.0.1", port, &kHandler, k, &c));
		km_snet_conn_set_host(c, "127.0.0.1");
		return c;
	}
};

} // namespace

// 1 MiB in 32 KiB sends echoed back through the TLS server: the same bytes,
// each send's callback with its total, one close. The consumer holds every
// buffer until the pool (16 of 4 KiB) is empty: reception stops (counted
// as stalls) and resumes once they are back, no byte lost.
TEST_F(Snet, EchoesThroughTlsOverIoUring)
{
	Sec s(g_dir + "/ca.pem");
	EchoServer srv;
	ASSERT_NO_FATAL_FAILURE(Make(&s.sec));
	Conn k;
	k.hold = true;
	km_net_conn *c = Open(&k, srv.port);
	ASSERT_TRUE(Until([&] { return k.connected != 1; }));
	ASSERT_EQ(0, k.connected) << k.why;
	auto data = Pattern(1 << 20, 7);
	size_t off = 0;
	ASSERT_TRUE(Until([&] {
		if (k.held.size() == 16) {
			km_net_release(sn, k.held.data(), 16);
			k.held.clear();
		}
		while (off < data.size()) {
			iovec v{ data.data() + off, 32768 };
			int rc = km_net_send(c, &v, 1, OnSent, nullptr);
			if (rc == -EAGAIN)
				break;
			EXPECT_EQ(0, rc);
			off += 32768;
		}
		return k.got.size() >= data.size();
	}));
	EXPECT_TRUE(data == k.got);
	EXPECT_EQ((int64_t)data.size(), k.sent);
	km_net_stats st{};
	km_net_get_stats(sn, &st);
	EXPECT_EQ(k.held.size(), st.rx_bufs_held);
	EXPECT_GT(st.rx_stalls, 0u);
	km_net_release(sn, k.held.data(), (uint32_t)k.held.size());
	km_net_get_stats(sn, &st);
	EXPECT_EQ(0u, st.rx_bufs_held);
	EXPECT_EQ(16u, st.rx_bufs_total);
	EXPECT_EQ(0, km_net_close(c));
	ASSERT_TRUE(Until([&] { return k.closes > 0; }));
	EXPECT_EQ(1, k.closes);
	// The close sent close_notify before the FIN: a clean TLS end.
	ASSERT_TRUE(Until([&] { return srv.end_error != -1; }));
	EXPECT_EQ(SSL_ERROR_ZERO_RETURN, srv.end_error.load());
}

// A CA that did not sign: on_connect(KM_ETLS) once, naming the broker and
// OpenSSL's reason; no on_close.
TEST_F(Snet, RefusedCertificateFailsTheConnect)
{
	Sec s(g_dir + "/other.pem");
	EchoServer srv;
	ASSERT_NO_FATAL_FAILURE(Make(&s.sec));
	Conn k;
	Open(&k, srv.port);
	ASSERT_TRUE(Until([&] { return k.connected != 1; }));
	EXPECT_EQ(KM_ETLS, k.connected);
	EXPECT_NE(std::string::npos,
		  k.why.find("broker 127.0.0.1:" + std::to_string(srv.port)))
		<< k.why;
	EXPECT_NE(std::string::npos, k.why.find("certificate verify failed")) << k.why;
	for (int i = 0; i < 20; i++)
		Pump();
	EXPECT_EQ(0, k.closes);
}

// The control thread's blocking client (control/kclient.h) over TLS: its
// close sends close_notify before the FIN, as the fetch sessions' do.
TEST(KClient, CloseSendsCloseNotify)
{
	Sec s(g_dir + "/ca.pem");
	EchoServer srv;
	km_config_addr a{};
	km_kclient c{};
	snprintf(a.host, sizeof(a.host), "127.0.0.1");
	a.port = srv.port;
	km_kclient_set_security(&s.sec);
	ASSERT_EQ(0, km_kclient_open(&c, &a, 10000)) << c.why;
	km_kclient_close(&c);
	km_kclient_set_security(nullptr);
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	while (srv.end_error == -1 && std::chrono::steady_clock::now() < end)
		std::this_thread::sleep_for(std::chrono::milliseconds(2));
	EXPECT_EQ(SSL_ERROR_ZERO_RETURN, srv.end_error.load());
}

// The kTLS probe says what the kernel's own list says: once the probe tried
// to attach the tls ULP (which loads its module if the kernel has one),
// /proc/sys/net/ipv4/tcp_available_ulp names "tls" exactly when the probe
// found it; without it the reason is ENOENT's, in the words the log, status
// and bench print.
TEST(Ktls, ProbeAgreesWithTheKernelsUlpList)
{
	km_ktls_answer p;
	ASSERT_EQ(0, km_ktls_probe(&p)) << p.why;
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_ulp", "r");
	ASSERT_NE(nullptr, f);
	char line[256] = "";
	ASSERT_NE(nullptr, fgets(line, sizeof(line), f));
	fclose(f);
	std::string ulps = std::string(" ") + line;
	ulps.erase(ulps.find_last_not_of(" \n") + 1);
	ulps += " ";
	bool listed = ulps.find(" tls ") != std::string::npos;
	EXPECT_EQ(listed, p.ulp) << "tcp_available_ulp: " << line << "probe: " << p.why;
	if (!p.ulp) {
		EXPECT_FALSE(p.rx);
		if (p.err == ENOENT) {
			EXPECT_STREQ("kTLS unavailable: kernel lacks the tls ULP (ENOENT)",
				     p.why);
		}
	} else if (p.rx) {
		EXPECT_STREQ("kTLS available (tls ULP, TLS_RX), not used: kmirrord "
			     "has no kTLS data path", p.why);
	}
	fprintf(stderr, "kTLS probe: %s (tcp_available_ulp: %s)\n", p.why,
		ulps.c_str());
}
