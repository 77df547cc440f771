/* cmd_args.c — a command's configuration from its arguments: [FILE.json]
 * key=value... over the defaults (and over a parameter file's metadata
 * config for eval). Below main.c and cmd_eval.c, which both parse so
 * (cmd.h). */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "../config/config.h"

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

int apply_config_on(struct bench_config *cfg, const json_t *base, int argc,
		    char **argv, const char *const *extra,
		    const char **extra_val, char *err, size_t errlen)
{
	/* room for the "command line: " prefix in err */
	char e[1000];
	int i = 0;

	config_defaults(cfg);
	if (base && config_apply_object(cfg, base,
					"the parameter file's "
					"metadata config",
					e, sizeof(e)) != 0) {
		snprintf(err, errlen, "%s", e);
		return -1;
	}
	/* a key given twice is refused, not last-wins (docs/configuration.md) */
	if (config_args_unique(argc, argv, e, sizeof(e)) != 0) {
		snprintf(err, errlen, "command line: %s", e);
		return -1;
	}
	if (argc > 0 && !strchr(argv[0], '=')) {
		if (!ends_with(argv[0], ".json")) {
			snprintf(err, errlen,
				 "argument '%s' is neither a FILE.json nor "
				 "key=value; see deqbench run --help",
				 argv[0]);
			return -1;
		}
		if (config_load_file(cfg, argv[0], err, errlen) != 0)
			return -1;
		i = 1;
	}
	for (; i < argc; i++) {
		int handled = 0;
		for (int x = 0; extra && extra[x]; x++) {
			size_t n = strlen(extra[x]);
			if (!strncmp(argv[i], extra[x], n) &&
			    argv[i][n] == '=') {
				extra_val[x] = argv[i] + n + 1;
				handled = 1;
			}
		}
		if (handled)
			continue;
		if (!strchr(argv[i], '=') && ends_with(argv[i], ".json")) {
			snprintf(err, errlen,
				 "%s: a config file must come first, before "
				 "key=value arguments",
				 argv[i]);
			return -1;
		}
		if (config_set_arg(cfg, argv[i], e, sizeof(e)) != 0) {
			snprintf(err, errlen, "command line: %s", e);
			return -1;
		}
	}
	return 0;
}

int parse_config_on(struct bench_config *cfg, const json_t *base, int argc,
		    char **argv, const char *const *extra,
		    const char **extra_val, char *err, size_t errlen)
{
	if (apply_config_on(cfg, base, argc, argv, extra, extra_val, err,
			    errlen) != 0)
		return -1;
	return config_finish(cfg, err, errlen);
}

int parse_config_args(struct bench_config *cfg, int argc, char **argv,
		      const char *const *extra, const char **extra_val,
		      char *err, size_t errlen)
{
	return parse_config_on(cfg, NULL, argc, argv, extra, extra_val, err,
			       errlen);
}
