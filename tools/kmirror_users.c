/* kmirror-users: the credentials file kmirrord's SASL listener reads
 * (sasl.users.file), as Kafka's kafka-configs --alter --add-config
 * 'SCRAM-SHA-256=[...]' stores SCRAM credentials: a salt, an iteration
 * count and the derived StoredKey and ServerKey, never the password.
 *
 *   kmirror-users add FILE NAME [--mechanism M] [--iterations N]
 *   kmirror-users remove FILE NAME
 *   kmirror-users list FILE [NAME]
 *
 * The password comes from standard input (not echoed on a terminal,
 * asked twice there). The file is replaced atomically (a temporary file
 * beside it, fsync, rename, the directory fsync'd), mode 0600: kmirrord
 * re-reads it at the next authentication. Exit 0 done, 1 failed (the
 * file, a user not there), 2 usage. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "common/errors.h"
#include "kafka/sasl_server.h"

#define FILE_BYTES_MAX (4u << 20)

static int usage(void)
{
	fprintf(stderr,
		"usage: kmirror-users add FILE NAME [--mechanism SCRAM-SHA-256|"
		"SCRAM-SHA-512] [--iterations N]\n"
		"       kmirror-users remove FILE NAME\n"
		"       kmirror-users list FILE [NAME]\n"
		"add reads the password from standard input; without "
		"--mechanism it stores both SCRAM\nmechanisms (PLAIN logins are "
		"checked against either). --iterations: 4096 (Kafka's\n"
		"default and minimum) to 16777216.\n");
	return 2;
}

/* The file's users; a missing file is an empty table when may_miss. */
static int load(const char *path, bool may_miss, struct km_sasl_users *u)
{
	char why[256] = "", *buf;
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0 && errno == ENOENT && may_miss)
		return 0;
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "kmirror-users: %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (st.st_size > FILE_BYTES_MAX || (buf = malloc((size_t)st.st_size + 1)) == NULL) {
		fprintf(stderr, "kmirror-users: %s: larger than 4 MiB\n", path);
		close(fd);
		return -1;
	}
	n = read(fd, buf, (size_t)st.st_size);
	close(fd);
	rc = n < 0 ? -errno : km_sasl_users_parse(buf, (size_t)n, u, why, sizeof(why));
	OPENSSL_cleanse(buf, (size_t)st.st_size);
	free(buf);
	if (rc < 0) {
		fprintf(stderr, "kmirror-users: %s: %s\n", path,
			why[0] ? why : km_strerror(rc));
		return -1;
	}
	if ((st.st_mode & 077) != 0)
		fprintf(stderr, "kmirror-users: %s: mode %04o, kmirrord refuses "
			"it: rewritten 0600 on change\n", path,
			(unsigned)(st.st_mode & 07777));
	return 0;
}

static int fsync_dir(const char *path)
{
	char *copy = strdup(path);
	int fd = copy ? open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	int rc = fd >= 0 && fsync(fd) == 0 ? 0 : -1;

	if (fd >= 0)
		close(fd);
	free(copy);
	return rc;
}

/* Temp file beside it, fsync, rename over it, fsync the directory. */
static int save(const char *path, const struct km_sasl_users *u)
{
	char tmp[4200];
	char *text = km_sasl_users_format(u);
	size_t len = text ? strlen(text) : 0;
	int fd = -1, ok = 0;

	if (text == NULL || snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path,
				     (long)getpid()) >= (int)sizeof(tmp)) {
		fprintf(stderr, "kmirror-users: %s: no memory or path too long\n", path);
		free(text);
		return -1;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ok = fd >= 0 && write(fd, text, len) == (ssize_t)len && fsync(fd) == 0;
	if (fd >= 0 && close(fd) != 0)
		ok = 0;
	ok = ok && rename(tmp, path) == 0 && fsync_dir(path) == 0;
	if (!ok) {
		fprintf(stderr, "kmirror-users: writing %s: %s\n", path,
			strerror(errno));
		unlink(tmp);
	}
	OPENSSL_cleanse(text, len);
	free(text);
	return ok ? 0 : -1;
}

/* One line of standard input, the echo off on a terminal. */
static int read_line(const char *prompt, char *out, size_t cap)
{
	struct termios old, quiet;
	bool tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &old) == 0;
	bool got;

	if (tty) {
		fprintf(stderr, "%s", prompt);
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
	}
	got = fgets(out, (int)cap, stdin) != NULL;
	if (tty) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
		fprintf(stderr, "\n");
	}
	if (!got)
		return -1;
	out[strcspn(out, "\r\n")] = '\0';
	return 0;
}

static int read_password(const char *name, char *pw, size_t cap)
{
	char again[KM_SASL_TEXT_BYTES], prompt[KM_SASL_TEXT_BYTES + 32];
	int rc = 0;

	snprintf(prompt, sizeof(prompt), "Password for %.200s: ", name);
	if (read_line(prompt, pw, cap) < 0 || pw[0] == '\0') {
		fprintf(stderr, "kmirror-users: no password on standard input\n");
		return -1;
	}
	if (isatty(STDIN_FILENO)) {
		if (read_line("Again: ", again, sizeof(again)) < 0 ||
		    strcmp(again, pw) != 0) {
			fprintf(stderr, "kmirror-users: the passwords differ\n");
			rc = -1;
		}
		OPENSSL_cleanse(again, sizeof(again));
	}
	return rc;
}

static int add_user(const char *path, const char *name, enum km_sasl_mech only,
		    int32_t iterations)
{
	struct km_sasl_users u = { 0 };
	struct km_scram_cred c;
	char pw[KM_SASL_TEXT_BYTES];
	int rc = load(path, true, &u);

	if (rc == 0 && (rc = read_password(name, pw, sizeof(pw))) == 0) {
		for (int m = KM_SASL_SCRAM_SHA_256; rc == 0 && m <= KM_SASL_SCRAM_SHA_512; m++) {
			if (only != KM_SASL_NONE && m != (int)only)
				continue;
			rc = km_sasl_cred_make((enum km_sasl_mech)m, name, pw,
						iterations, NULL, 0, &c);
			if (rc == 0)
				rc = km_sasl_users_put(&u, &c);
			OPENSSL_cleanse(&c, sizeof(c));
		}
		if (rc < 0)
			fprintf(stderr, "kmirror-users: %s: %s\n", name,
				rc == KM_ECFGVALUE ? "a name with a space or "
				"control character, or longer than 255 bytes"
						   : km_strerror(rc));
		OPENSSL_cleanse(pw, sizeof(pw));
	}
	if (rc == 0)
		rc = save(path, &u);
	km_sasl_users_free(&u);
	return rc == 0 ? 0 : 1;
}

static int remove_user(const char *path, const char *name)
{
	struct km_sasl_users u = { 0 };
	int rc = load(path, false, &u);

	if (rc == 0 && km_sasl_users_remove(&u, name) == 0) {
		fprintf(stderr, "kmirror-users: no user %s in %s\n", name, path);
		rc = -1;
	}
	if (rc == 0)
		rc = save(path, &u);
	km_sasl_users_free(&u);
	return rc == 0 ? 0 : 1;
}

static int list_users(const char *path, const char *name)
{
	struct km_sasl_users u = { 0 };
	int rc = load(path, false, &u);

	for (uint32_t i = 0; rc == 0 && i < u.n; i++)
		if (name == NULL || strcmp(name, u.v[i].user) == 0)
			printf("%s %s iterations=%d\n", u.v[i].user,
			       km_sasl_mech_name(u.v[i].mech),
			       (int)u.v[i].iterations);
	km_sasl_users_free(&u);
	return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	enum km_sasl_mech mech = KM_SASL_NONE;
	long iterations = KM_SCRAM_ITERATIONS_MIN;
	char *end;

	if (argc < 3)
		return usage();
	for (int i = 4; i < argc; i++) {
		if (strcmp(argv[i], "--mechanism") == 0 && i + 1 < argc &&
		    strcmp(argv[1], "add") == 0) {
			if (km_sasl_mech_parse(argv[++i], &mech) < 0 ||
			    mech == KM_SASL_PLAIN)
				return usage();
		} else if (strcmp(argv[i], "--iterations") == 0 && i + 1 < argc &&
			   strcmp(argv[1], "add") == 0) {
			iterations = strtol(argv[++i], &end, 10);
			if (*end != '\0' || iterations < KM_SCRAM_ITERATIONS_MIN ||
			    iterations > KM_SCRAM_ITERATIONS_MAX)
				return usage();
		} else
			return usage();
	}
	if (strcmp(argv[1], "add") == 0 && argc >= 4)
		return add_user(argv[2], argv[3], mech, (int32_t)iterations);
	if (strcmp(argv[1], "remove") == 0 && argc == 4)
		return remove_user(argv[2], argv[3]);
	if (strcmp(argv[1], "list") == 0 && argc <= 4)
		return list_users(argv[2], argc == 4 ? argv[3] : NULL);
	return usage();
}
