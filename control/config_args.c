/* kmirrord's command line: `--config FILE` and `--set key=value`, each also
 * as `--flag=value`; see config.h. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/errors.h"
#include "control/config_pvt.h"

/* 1: argv[*i] is flag, *out its value (after '=' or the next argument,
 * which *i then skips); 0: some other argument; -1: flag without value. */
static int arg_value(int argc, const char *const *argv, int *i,
		     const char *flag, const char **out)
{
	size_t n = strlen(flag);
	const char *a = argv[*i];

	if (strncmp(a, flag, n) != 0)
		return 0;
	if (a[n] == '=') {
		*out = a + n + 1;
		return 1;
	}
	if (a[n] != '\0')
		return 0;
	if (*i + 1 >= argc)
		return -1;
	*out = argv[++*i];
	return 1;
}

/* needs_value: the flag was the last argument. */
static int bad_arg(const char *arg, bool needs_value, char *err,
		   size_t err_len)
{
	char shown[400];

	km_config_show(shown, sizeof(shown), arg);
	if (needs_value)
		km_config_errf(err, err_len, "%s needs a value", shown);
	else if (arg[0] != '-' && strchr(arg, '=') != NULL)
		/* Settings are not positional, whatever other daemons do. */
		km_config_errf(err, err_len,
			       "%s is not an option (a setting is --set %s)",
			       shown, shown);
	else
		km_config_errf(err, err_len, "%s is not an option", shown);
	return KM_ECFGSYNTAX;
}

int km_config_parse_args(struct km_config_args *args, int argc,
			 const char *const *argv, char *err, size_t err_len)
{
	const char *v = NULL;
	int m;

	args->path = NULL;
	args->sets_count = 0;
	km_config_errf(err, err_len, "%s", "");
	for (int i = 1; i < argc; i++) {
		if ((m = arg_value(argc, argv, &i, "--config", &v)) > 0) {
			args->path = v;
		} else if (m == 0 && (m = arg_value(argc, argv, &i, "--set", &v)) > 0) {
			if (args->sets_count == KM_CONFIG_SETS_MAX) {
				km_config_errf(err, err_len, "more than %u --set flags",
					       KM_CONFIG_SETS_MAX);
				return KM_ECFGSYNTAX;
			}
			args->sets[args->sets_count++] = v;
		} else {
			return bad_arg(argv[i], m < 0, err, err_len);
		}
	}
	if (args->path == NULL && args->sets_count == 0) {
		km_config_errf(err, err_len,
			       "no configuration: pass --config FILE (or --set key=value settings); data.dir is required");
		return KM_ECFGMISSING;
	}
	return 0;
}

int km_config_load_args(struct km_config *cfg, int argc,
			const char *const *argv, char *err, size_t err_len)
{
	struct km_config_args args;
	int rc = km_config_parse_args(&args, argc, argv, err, err_len);

	if (rc < 0)
		return rc;
	return km_config_load(cfg, args.path, args.sets, args.sets_count, err,
			      err_len);
}
