/* kmirrord: `kmirrord --config FILE [--set key=value]...` (README.md,
 * "Configuration"). Exit status: 0 after a clean shutdown, 1 when the
 * daemon failed (another kmirrord holding data.dir included: the message
 * names its pid), 2 for a bad command line (with the usage) or a bad
 * configuration (the message alone: it names the file, key and value). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "control/config.h"
#include "control/daemon.h"

enum { EXIT_DAEMON = 1, EXIT_CONFIG = 2 };

static int usage(FILE *f)
{
	fprintf(f, "%s\n"
		   "Mirror Kafka partitions from a source cluster and serve them.\n"
		   "  --config FILE      Kafka-style properties (README: Configuration)\n"
		   "  --set key=value    override a key (repeatable)\n"
		   "Stop with SIGTERM or SIGINT: logs are flushed and closed cleanly.\n",
		   KM_CONFIG_USAGE);
	return f == stdout ? 0 : EXIT_CONFIG;
}

/* SIGTERM/SIGINT go to the control thread's signalfd: block them before
 * any worker thread exists so that every thread inherits the mask. */
static void block_signals(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int main(int argc, char **argv)
{
	static struct km_config_args args;
	static struct km_config cfg;
	char err[KM_CONFIG_ERR_BYTES_MAX];
	int rc;

	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return usage(stdout);
	rc = km_config_parse_args(&args, argc, (const char *const *)argv, err,
				  sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "kmirrord: %s\n", err);
		return usage(stderr);
	}
	rc = km_config_load(&cfg, args.path, args.sets, args.sets_count, err,
			    sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "kmirrord: %s\n", err);
		return EXIT_CONFIG;
	}
	block_signals();
	rc = km_daemon_run(&cfg);
	if (rc < 0)
		fprintf(stderr, "kmirrord: %s (%d)\n", km_strerror(rc), rc);
	return rc < 0 ? EXIT_DAEMON : 0;
}
