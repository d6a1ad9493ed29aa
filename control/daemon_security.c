/* Security to the source (issue 16): the source.* keys turned into the
 * SSL_CTX and credentials every connection to the source shares - the
 * workers' fetch sessions (dataplane/net/snet.h) and the control thread's
 * requests (kclient.h). Passwords come from files only readable by the
 * daemon's user, and are never logged. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/log.h"
#include "control/daemon_pvt.h"
#include "control/kclient.h"
#include "dataplane/net/ktls.h"

/* The first line of a file that group and others cannot read: a password
 * others can read is no secret, and is refused rather than used. */
static int read_secret(const char *key, const char *path, char *out,
		       size_t cap)
{
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		KM_ERROR("security", "%s %s: %s", key, path, strerror(errno));
		return -errno;
	}
	if (fstat(fd, &st) < 0 || (st.st_mode & 077) != 0) {
		KM_ERROR("security", "%s %s: group or others may read it "
			 "(mode %04o): chmod 600 it", key, path,
			 (unsigned)(st.st_mode & 07777));
		close(fd);
		return KM_ECFGVALUE;
	}
	n = read(fd, out, cap - 1);
	close(fd);
	if (n < 0)
		return -errno;
	out[n] = '\0';
	out[strcspn(out, "\r\n")] = '\0';
	return 0;
}

static int secrets(const struct km_config *cfg, char *key_pw, char *sasl_pw,
		   size_t cap)
{
	int rc = 0;

	if (cfg->source_ssl_key_password_file[0] != '\0')
		rc = read_secret("source.ssl.key.password.file",
				 cfg->source_ssl_key_password_file, key_pw,
				 cap);
	if (rc == 0 && cfg->source_sasl_password_file[0] != '\0')
		rc = read_secret("source.sasl.password.file",
				 cfg->source_sasl_password_file, sasl_pw, cap);
	return rc;
}

/* Once at start: user-space TLS always (kmirrord has no kTLS data path),
 * and what the kernel would offer, so an operator and the bench can see
 * whether kTLS is even possible on this host. */
static void tls_choice(struct km_daemon *d)
{
	struct km_ktls_answer p;
	char user[128];

	km_ktls_user_tls(user, sizeof(user));
	if (d->cfg->net_mode == KM_CONFIG_NET_DPDK) {
		snprintf(d->source_tls, sizeof(d->source_tls), "%s on kmirror's "
			 "TCP endpoint (DPDK mode: kTLS needs kernel sockets)",
			 user);
	} else {
		(void)km_ktls_probe(&p); /* p.why says what happened */
		snprintf(d->source_tls, sizeof(d->source_tls), "%s; %s", user,
			 p.why);
	}
	KM_INFO("security", "source TLS: %s", d->source_tls);
}

static bool listeners_tls(const struct km_config *cfg)
{
	for (uint32_t i = 0; i < cfg->listeners_count; i++)
		if (cfg->listeners[i].protocol == KM_SEC_SSL ||
		    cfg->listeners[i].protocol == KM_SEC_SASL_SSL)
			return true;
	return false;
}

/* The SSL and SASL_SSL listeners' TLS (ssl.* keys). A stalled handshake
 * is bounded like an incomplete request (listener.request.timeout.ms). */
static int listener_security_init(struct km_daemon *d)
{
	const struct km_config *cfg = d->cfg;
	char key_pw[256] = "", why[512] = "";
	struct km_netsec_server_config sc = {
		.cert_location = cfg->ssl_cert,
		.key_location = cfg->ssl_key[0] ? cfg->ssl_key : NULL,
		.ca_location = cfg->ssl_ca[0] ? cfg->ssl_ca : NULL,
		.client_auth = (enum km_tls_client_auth)cfg->ssl_client_auth,
		.handshake_timeout_ms = cfg->request_timeout_ms,
	};
	int rc = 0;

	if (!listeners_tls(cfg))
		return 0;
	if (cfg->ssl_key_password_file[0] != '\0')
		rc = read_secret("ssl.key.password.file",
				 cfg->ssl_key_password_file, key_pw,
				 sizeof(key_pw));
	if (rc < 0)
		return rc;
	sc.key_password = key_pw[0] ? key_pw : NULL;
	rc = km_netsec_server_init(&d->lsn_sec, &sc, why, sizeof(why));
	memset(key_pw, 0, sizeof(key_pw));
	if (rc < 0) {
		KM_ERROR("security", "listeners' TLS: %s", why);
		return rc;
	}
	KM_INFO("security", "listeners' TLS: certificate %s, client "
		"certificates %s", cfg->ssl_cert,
		sc.client_auth == KM_TLS_CLIENT_AUTH_REQUIRED ? "required"
		: sc.client_auth == KM_TLS_CLIENT_AUTH_REQUESTED ? "requested"
								 : "not asked");
	return 0;
}

int km_daemon_security_init(struct km_daemon *d)
{
	const struct km_config *cfg = d->cfg;
	char key_pw[256] = "", sasl_pw[256] = "", why[512] = "";
	struct km_netsec_config sc = {
		.protocol = (enum km_secproto)cfg->source_security_protocol,
		.ca_location = cfg->source_ssl_ca[0] ? cfg->source_ssl_ca : NULL,
		.cert_location = cfg->source_ssl_cert[0] ? cfg->source_ssl_cert
							 : NULL,
		.key_location = cfg->source_ssl_key[0] ? cfg->source_ssl_key
						       : NULL,
		.key_password = NULL,
		.verify_host = cfg->source_ssl_verify_host,
		.mech = (enum km_sasl_mech)cfg->source_sasl_mechanism,
		.user = cfg->source_sasl_username,
		.password = sasl_pw,
	};
	int rc;

	if ((rc = listener_security_init(d)) < 0)
		return rc;
	if (sc.protocol == KM_SEC_PLAINTEXT)
		return 0;
	if ((rc = secrets(cfg, key_pw, sasl_pw, sizeof(key_pw))) < 0)
		return rc;
	sc.key_password = key_pw[0] ? key_pw : NULL;
	rc = km_netsec_init(&d->netsec, &sc, why, sizeof(why));
	memset(key_pw, 0, sizeof(key_pw));
	memset(sasl_pw, 0, sizeof(sasl_pw));
	if (rc < 0) {
		KM_ERROR("security", "source TLS: %s", why);
		return rc;
	}
	km_kclient_set_security(&d->netsec);
	if (sc.protocol == KM_SEC_SSL || sc.protocol == KM_SEC_SASL_SSL)
		tls_choice(d);
	KM_INFO("security", "source: %s%s%s%s%s%s",
		km_secproto_name(sc.protocol), sc.mech ? ", " : "",
		km_sasl_mech_name(sc.mech), sc.mech ? " as '" : "",
		sc.mech ? sc.user : "", sc.mech ? "'" : "");
	return 0;
}

void km_daemon_security_free(struct km_daemon *d)
{
	km_kclient_set_security(NULL);
	km_netsec_free(&d->netsec);
	km_netsec_free(&d->lsn_sec);
}

/* Some listener is SASL_PLAINTEXT or SASL_SSL: the workers load
 * sasl.users.file (config_check.c makes sure it is set). */
bool km_daemon_listener_sasl(const struct km_config *cfg)
{
	for (uint32_t i = 0; i < cfg->listeners_count; i++)
		if (cfg->listeners[i].protocol == KM_SEC_SASL_PLAINTEXT ||
		    cfg->listeners[i].protocol == KM_SEC_SASL_SSL)
			return true;
	return false;
}
