/* config_input.c — what reads configuration from outside the key table:
 * JSON config and suite files (a FIFO is never waited on, a key given twice
 * in one object is refused), key=value argument lists (a key given twice is
 * refused). The key table itself and the parsing of one value live in
 * config.c. */
#include "config.h"
#include "../io/errmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

json_t *config_json_load(const char *path, const char *what, char *err,
			 size_t errlen)
{
	json_error_t je;
	json_t *root = NULL;
	struct stat st;
	char pb[256];
	const char *ps = errmsg_brief(path, pb, sizeof(pb));
	/* O_NONBLOCK: opening a FIFO must not wait for a writer */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) != 0) {
		snprintf(err, errlen,
			 "%s: cannot read the %s file (%s); check the path", ps,
			 what, strerror(errno));
		goto out;
	}
	if (S_ISDIR(st.st_mode) || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen,
			 "%s is %s; give the path of a %s file (JSON)", ps,
			 S_ISDIR(st.st_mode) ? "a directory"
					     : "not a regular file (a FIFO, "
					       "socket or device)",
			 what);
		goto out;
	}
	/* a key given twice is refused, not last-wins (docs/configuration.md) */
	root = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
	if (!root && strstr(je.text, "duplicate"))
		snprintf(err, errlen,
			 "%s:%d:%d: a key is given twice in one object (%s); "
			 "give each key once",
			 ps, je.line, je.column, je.text);
	else if (!root && je.line <= 0)
		snprintf(err, errlen,
			 "%s: cannot read the %s file (%s); check the path", ps,
			 what, je.text);
	else if (!root)
		snprintf(err, errlen,
			 "%s:%d:%d: malformed JSON: %s; fix the file", ps,
			 je.line, je.column, je.text);
out:
	if (fd >= 0)
		close(fd);
	return root;
}

int config_args_unique(int n, char *const *args, char *err, size_t errlen)
{
	for (int i = 1; i < n; i++) {
		const char *eq = strchr(args[i], '=');
		size_t k = eq ? (size_t)(eq - args[i]) : 0;
		if (!eq)
			continue;
		for (int j = 0; j < i; j++) {
			char v1[96], v2[96];
			if (strncmp(args[j], args[i], k + 1) != 0)
				continue;
			snprintf(err, errlen,
				 "%.*s is given twice (%s, then %s); give each "
				 "key once",
				 (int)(k < 60 ? k : 60), args[i],
				 errmsg_brief(args[j], v1, sizeof(v1)),
				 errmsg_brief(args[i], v2, sizeof(v2)));
			return -1;
		}
	}
	return 0;
}

int config_load_file(struct bench_config *c, const char *path, char *err,
		     size_t errlen)
{
	json_t *root = config_json_load(path, "config", err, errlen);
	if (!root)
		return -1;
	int rc = config_apply_object(c, root, path, err, errlen);
	json_decref(root);
	return rc;
}
