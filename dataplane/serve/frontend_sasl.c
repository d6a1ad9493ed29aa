/* SASL on kmirrord's listener (issue 16), as Kafka's
 * SaslServerAuthenticator does it: on a listener that wants SASL a client
 * may send ApiVersions and SaslHandshake, then SaslAuthenticate until the
 * exchange ends; any other request closes the connection ("Unexpected
 * Kafka request of type ... during SASL handshake"). A failed exchange is
 * answered (UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED) and
 * the connection closed after the answer. Success names the connection's
 * principal "User:<name>".
 *
 * KIP-368: with connections.max.reauth.ms the SaslAuthenticate answer (v1+)
 * gives the session's lifetime; a request other than SaslHandshake after
 * it ends closes the connection, and a SaslHandshake on an authenticated
 * connection starts a re-authentication, which must name the same
 * principal and mechanism.
 *
 * The credentials are sasl.users.file's (kafka/sasl_server.h). Each
 * worker keeps its own table and stats the file at each SaslHandshake: a
 * changed file (inode, size, mtime) is read again there, so the next
 * authentication sees it without a restart; a file that does not parse
 * is logged with its line and the table before it stays. One stat per
 * authentication costs less than handing tables across threads. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/log.h"
#include "dataplane/serve/frontend_pvt.h"
#include "kafka/sasl_server.h"

/* Header (v1: tags), error, message, the SASL bytes, lifetime, tags. */
#define SASL_RESP_BYTES (64u + 2u * KM_SASL_TEXT_BYTES + KM_SASL_MSG_BYTES_MAX)
#define USERS_FILE_BYTES_MAX (4u << 20)

struct fe_sasl {
	char path[4096];
	uint32_t mechs;			/* 1u << enum km_sasl_mech */
	char mech_list[64];		/* Kafka's comma-joined names */
	int64_t reauth_ms;
	struct km_sasl_users users;
	/* The file as last read (or refused): read again when it differs. */
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	bool seen;
};

static bool same_file(const struct fe_sasl *s, const struct stat *st)
{
	return s->seen && s->dev == st->st_dev && s->ino == st->st_ino &&
	       s->size == st->st_size &&
	       s->mtime.tv_sec == st->st_mtim.tv_sec &&
	       s->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

static int read_users(const char *path, const struct stat *st, char **out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf;
	ssize_t n;

	if (fd < 0)
		return -errno;
	if ((st->st_mode & 077) != 0 || st->st_size > USERS_FILE_BYTES_MAX) {
		close(fd);
		return KM_ECFGVALUE;
	}
	buf = malloc((size_t)st->st_size + 1);
	n = buf ? read(fd, buf, (size_t)st->st_size) : -1;
	close(fd);
	if (n < 0) {
		free(buf);
		return buf ? -errno : -ENOMEM;
	}
	buf[n] = '\0';
	*out = buf;
	return (int)n;
}

/* Read the file again if it changed. @return 0 (the table is current or
 * the old one stays) or, at start (first), the error. */
static int users_refresh(struct km_frontend *fe, bool first)
{
	struct fe_sasl *s = fe->sasl;
	struct km_sasl_users fresh = { 0 };
	char why[256] = "", *text = NULL;
	struct stat st;
	int rc;

	if (stat(s->path, &st) < 0) {
		if (first || !s->seen || s->ino != 0)
			KM_ERROR("frontend", "sasl.users.file %s: %s%s", s->path,
				 strerror(errno), first ? "" : " (the users "
				 "read before stay)");
		s->seen = true;
		s->ino = 0;
		return first ? -errno : 0;
	}
	if (same_file(s, &st))
		return 0;
	s->dev = st.st_dev, s->ino = st.st_ino, s->size = st.st_size;
	s->mtime = st.st_mtim, s->seen = true;
	rc = read_users(s->path, &st, &text);
	if (rc == KM_ECFGVALUE)
		snprintf(why, sizeof(why), "group or others may read it or it "
			 "is above 4 MiB (mode %04o): chmod 600 it",
			 (unsigned)(st.st_mode & 07777));
	else if (rc < 0)
		snprintf(why, sizeof(why), "%s", km_strerror(rc));
	else
		rc = km_sasl_users_parse(text, (size_t)rc, &fresh, why,
					 sizeof(why));
	free(text);
	if (rc < 0) {
		km_sasl_users_free(&fresh);
		fe->st.sasl_users_errors += !first;
		KM_ERROR("frontend", "sasl.users.file %s: %s%s", s->path, why,
			 first ? "" : "; the users read before stay");
		return first ? rc : 0;
	}
	km_sasl_users_free(&s->users);
	s->users = fresh;
	fe->st.sasl_users_reloads += !first;
	KM_INFO("frontend", "sasl.users.file %s: %u credentials%s", s->path,
		s->users.n, first ? "" : " (read again)");
	return 0;
}

int km_frontend_sasl_init(struct km_frontend *fe,
			  const struct km_frontend_sasl *cfg)
{
	struct fe_sasl *s;
	size_t used = 0;

	if (!cfg->required)
		return 0;
	if (cfg->users_file == NULL || cfg->users_file[0] == '\0') {
		KM_ERROR("frontend", "a SASL listener needs sasl.users.file");
		return KM_ECFGVALUE;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -ENOMEM;
	fe->sasl = s;
	snprintf(s->path, sizeof(s->path), "%s", cfg->users_file);
	s->mechs = cfg->mechanisms ? cfg->mechanisms
				   : 1u << KM_SASL_SCRAM_SHA_256 |
					     1u << KM_SASL_SCRAM_SHA_512;
	s->reauth_ms = cfg->reauth_ms;
	for (int m = KM_SASL_PLAIN; m <= KM_SASL_SCRAM_SHA_512; m++)
		if (s->mechs & (1u << m))
			used += (size_t)snprintf(s->mech_list + used,
						 sizeof(s->mech_list) - used,
						 "%s%s", used ? "," : "",
						 km_sasl_mech_name((enum km_sasl_mech)m));
	return users_refresh(fe, true);
}

void km_frontend_sasl_free(struct km_frontend *fe)
{
	if (fe->sasl == NULL)
		return;
	km_sasl_users_free(&fe->sasl->users);
	free(fe->sasl);
	fe->sasl = NULL;
}

void km_frontend_sasl_conn_open(struct fe_conn *fc, bool required)
{
	fc->auth = required && fc->fe->sasl != NULL ? FE_AUTH_HANDSHAKE
						   : FE_AUTH_NONE;
	fc->auth_reauth = false;
	fc->auth_mech = KM_SASL_NONE;
	fc->auth_version = 0;
	fc->session_end_ms = 0;
	fc->sx = NULL;
}

void km_frontend_sasl_conn_closed(struct fe_conn *fc)
{
	if (fc->sx == NULL)
		return;
	km_sasl_server_wipe(fc->sx);
	free(fc->sx);
	fc->sx = NULL;
}

int km_frontend_sasl_gate(struct fe_conn *fc, const struct km_reqhdr *h)
{
	const char *api = km_proto_api_name(h->api_key);

	switch (fc->auth) {
	case FE_AUTH_HANDSHAKE:
		if (h->api_key == KM_API_API_VERSIONS ||
		    h->api_key == KM_API_SASL_HANDSHAKE)
			return 0;
		return km_frontend_conn_fail(fc, "Unexpected Kafka request of "
					     "type %s during SASL handshake", api);
	case FE_AUTH_AUTHENTICATE:
		if (h->api_key == KM_API_SASL_AUTHENTICATE)
			return 0;
		return km_frontend_conn_fail(fc, "Unexpected Kafka request of "
					     "type %s during SASL authentication",
					     api);
	case FE_AUTH_DONE:
		if (h->api_key == KM_API_SASL_HANDSHAKE ||
		    fc->session_end_ms == 0 ||
		    km_frontend_now_ms() < fc->session_end_ms)
			return 0;
		fc->fe->st.sasl_expired++;
		return km_frontend_conn_drop(fc, "%s: its SASL session (%s) "
					     "expired (connections.max.reauth.ms)"
					     " and was not re-authenticated: "
					     "disconnecting it as Kafka does",
					     api, fc->principal);
	default:
		return 0;
	}
}

/* The answer in the slot the handler opened before the exchange moved: a
 * handler that waits for room (FE_WAIT) runs again on the same frame, and
 * must not have stepped the exchange the first time. */
static int answer(struct fe_conn *fc, const struct km_reqhdr *h, uint32_t slot,
		  int16_t err, const char *msg, const uint8_t *bytes,
		  uint32_t len, int64_t lifetime)
{
	struct km_wire_wr w;

	km_frontend_slot_begin(fc, slot, &w);
	if (h->api_key == KM_API_SASL_HANDSHAKE)
		km_sasl_handshake_resp_encode(&w, h->api_version, err,
					      msg ? msg : "");
	else
		km_sasl_auth_resp_encode(&w, h->api_version, err, msg, bytes,
					 len, lifetime);
	return km_frontend_slot_finish(fc, slot, &w, true);
}

static int refuse(struct fe_conn *fc, const struct km_reqhdr *h, uint32_t slot,
		  int16_t err, const char *msg, const char *why)
{
	int rc = answer(fc, h, slot, err, msg, NULL, 0, 0);

	fc->fe->st.sasl_auth_failed++;
	KM_WARN("frontend", "connection %u (%s, client id \"%s\"): SASL %s"
		"failed: %s; closing it after the answer", fc->id,
		fc->client_host, fc->client_id,
		fc->auth_reauth ? "re-authentication " : "", why);
	km_frontend_sasl_conn_closed(fc);
	if (rc == 0)
		km_frontend_conn_close_after(fc);
	return rc;
}

static int handshake(struct fe_conn *fc, const struct km_reqhdr *h,
		     struct km_wire_rd *r)
{
	struct fe_sasl *s = fc->fe->sasl;
	char name[64], why[256];
	enum km_sasl_mech m = KM_SASL_NONE;
	uint32_t slot;
	int rc = km_sasl_handshake_req_decode(r, h->api_version, name,
					      sizeof(name));

	if (rc < 0)
		return km_frontend_conn_fail(fc, "malformed SaslHandshake v%d "
					     "request: %s", h->api_version,
					     km_strerror(rc));
	/* v0 is followed by raw SASL tokens outside Kafka's framing, which
	 * no client sends once SaslAuthenticate is listed. */
	if (h->api_version == 0)
		return km_frontend_conn_fail(fc, "SaslHandshake v0 (raw SASL "
					     "tokens) is not served: "
					     "SaslAuthenticate is");
	if ((rc = km_frontend_slot_open(fc, h, SASL_RESP_BYTES, &slot)) != 0)
		return rc;
	/* Not a SASL listener, or re-authentication by a client that cannot
	 * (SaslAuthenticate v0): what KafkaApis answers. */
	if (fc->auth == FE_AUTH_NONE ||
	    (fc->auth == FE_AUTH_DONE && fc->auth_version < 1))
		return answer(fc, h, slot, KM_KERR_ILLEGAL_SASL_STATE, "", NULL,
			      0, 0);
	fc->auth_reauth = fc->auth == FE_AUTH_DONE;
	if (km_sasl_mech_parse(name, &m) < 0 || !(s->mechs & (1u << m))) {
		snprintf(why, sizeof(why), "mechanism \"%s\" is not enabled "
			 "(sasl.enabled.mechanisms=%s)", name, s->mech_list);
		return refuse(fc, h, slot, KM_KERR_UNSUPPORTED_SASL_MECHANISM,
			      s->mech_list, why);
	}
	if (fc->auth_reauth && m != (enum km_sasl_mech)fc->auth_mech)
		return refuse(fc, h, slot, KM_KERR_ILLEGAL_SASL_STATE, "",
			      "SASL mechanism change not allowed during "
			      "re-authentication");
	users_refresh(fc->fe, false);
	if (fc->sx == NULL && (fc->sx = malloc(sizeof(*fc->sx))) == NULL)
		return km_frontend_conn_drop(fc, "no memory for a SASL exchange");
	if ((rc = km_sasl_server_start(fc->sx, m, NULL)) < 0)
		return km_frontend_conn_drop(fc, "SASL: %s", km_strerror(rc));
	fc->auth = FE_AUTH_AUTHENTICATE;
	return answer(fc, h, slot, KM_KERR_NONE, s->mech_list, NULL, 0, 0);
}

/* The exchange succeeded: the session, Kafka's checks of a re-auth. */
static int authenticated(struct fe_conn *fc, const struct km_reqhdr *h,
			 uint32_t slot, const uint8_t *out, int n)
{
	struct fe_sasl *s = fc->fe->sasl;
	char principal[KM_FRONTEND_PRINCIPAL_BYTES], why[3 * KM_FRONTEND_PRINCIPAL_BYTES];
	int64_t life = s->reauth_ms > 0 ? s->reauth_ms : 0;

	if (snprintf(principal, sizeof(principal), "User:%s", fc->sx->user) >=
	    (int)sizeof(principal))
		return refuse(fc, h, slot, KM_KERR_SASL_AUTHENTICATION_FAILED,
			      NULL, "a user name too long for a principal");
	if (fc->auth_reauth && strcmp(principal, fc->principal) != 0) {
		if (snprintf(why, sizeof(why), "Cannot change principals during "
			     "re-authentication from %s: %s", fc->principal,
			     principal) < 0)
			why[0] = '\0';
		return refuse(fc, h, slot, KM_KERR_SASL_AUTHENTICATION_FAILED,
			      why, why);
	}
	memcpy(fc->principal, principal, sizeof(principal));
	fc->auth_mech = (int8_t)fc->sx->mech;
	fc->auth_version = h->api_version;
	fc->session_end_ms = life > 0 ? km_frontend_now_ms() + (uint64_t)life : 0;
	fc->fe->st.sasl_auth_ok++;
	fc->fe->st.sasl_reauth_ok += fc->auth_reauth;
	KM_DEBUG("frontend", "connection %u: %s %s with %s", fc->id, principal,
		 fc->auth_reauth ? "re-authenticated" : "authenticated",
		 km_sasl_mech_name(fc->sx->mech));
	fc->auth = FE_AUTH_DONE;
	fc->auth_reauth = false;
	km_frontend_sasl_conn_closed(fc);
	/* v0 has no lifetime field, and such a client cannot re-authenticate:
	 * the session still ends (KIP-368 closes its connection). */
	return answer(fc, h, slot, KM_KERR_NONE, NULL, out, (uint32_t)n, life);
}

static int authenticate(struct fe_conn *fc, const struct km_reqhdr *h,
			struct km_wire_rd *r)
{
	uint8_t in[KM_SASL_MSG_BYTES_MAX], out[KM_SASL_MSG_BYTES_MAX];
	char msg[KM_SASL_TEXT_BYTES];
	uint32_t len, slot;
	int n = km_sasl_auth_req_decode(r, h->api_version, in, sizeof(in), &len);

	if (n < 0)
		return km_frontend_conn_fail(fc, "malformed SaslAuthenticate v%d "
					     "request: %s", h->api_version,
					     km_strerror(n));
	if ((n = km_frontend_slot_open(fc, h, SASL_RESP_BYTES, &slot)) != 0)
		return n;
	if (fc->auth != FE_AUTH_AUTHENTICATE)
		return answer(fc, h, slot, KM_KERR_ILLEGAL_SASL_STATE,
			      "SaslAuthenticate request received after "
			      "successful authentication", NULL, 0, 0);
	n = km_sasl_server_step(fc->sx, &fc->fe->sasl->users, in, len, out,
				sizeof(out));
	if (n < 0) {
		char why[4 * KM_SASL_TEXT_BYTES];

		snprintf(msg, sizeof(msg), "Authentication failed during %s "
			 "due to invalid credentials with SASL mechanism %s",
			 fc->auth_reauth ? "re-authentication" : "authentication",
			 km_sasl_mech_name(fc->sx->mech));
		snprintf(why, sizeof(why), "%s %s: %s",
			 km_sasl_mech_name(fc->sx->mech),
			 fc->sx->user[0] ? fc->sx->user : "?", fc->sx->why);
		return refuse(fc, h, slot, KM_KERR_SASL_AUTHENTICATION_FAILED,
			      fc->sx->reply[0] ? fc->sx->reply : msg, why);
	}
	if (fc->sx->step == KM_SASL_SRV_DONE)
		return authenticated(fc, h, slot, out, n);
	return answer(fc, h, slot, KM_KERR_NONE, NULL, out, (uint32_t)n, 0);
}

int km_frontend_handle_sasl(struct fe_conn *fc, const struct km_reqhdr *h,
			    struct km_wire_rd *r)
{
	if (h->api_key == KM_API_SASL_HANDSHAKE)
		return handshake(fc, h, r);
	return authenticate(fc, h, r);
}
