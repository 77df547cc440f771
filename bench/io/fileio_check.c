/* fileio_check.c — fileio_check_replace: what replacing an output would
 * find wrong, found before the work that makes it (see fileio.h). */
#include "fileio.h"

#include "errmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_BUF 4096

static int is_safetensors(const unsigned char *head, size_t n, long long size)
{
	uint64_t hl = 0;
	if (n < 9)
		return 0;
	for (int i = 7; i >= 0; i--)
		hl = hl << 8 | head[i];
	return hl >= 2 && hl <= (uint64_t)size - 8 && head[8] == '{';
}

const struct fileio_kind fileio_kind_safetensors = {"a safetensors file",
						    is_safetensors};

/* PATH_MAX for the whole of path, NAME_MAX for each component. shown:
 * path as messages show it. */
static int check_lengths(const char *path, const char *shown, char *err,
			 size_t errlen)
{
	size_t len = strlen(path);
	if (len >= PATH_MAX) {
		errmsg_set(err, errlen,
			   "%s: name too long (%zu bytes, at most %d); give a "
			   "shorter path",
			   shown, len, PATH_MAX - 1);
		return -1;
	}
	for (const char *p = path; *p;) {
		size_t c = strcspn(p, "/");
		if (c > NAME_MAX) {
			errmsg_set(err, errlen,
				   "%s: name too long (%zu bytes in one "
				   "component, at most %d); give a shorter "
				   "name",
				   shown, c, NAME_MAX);
			return -1;
		}
		p += c + (p[c] == '/');
	}
	return 0;
}

/* The directory part of path into dir ("." for a bare name). */
static void dir_of(const char *path, char *dir, size_t n)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(dir, n, ".");
	else
		snprintf(dir, n, "%.*s",
			 slash == path ? 1 : (int)(slash - path), path);
}

/* The existing regular file target (st): of kind (when non-empty), not
 * immutable or append-only, replaceable by this user in its directory
 * (the sticky bit lets only the file's or the directory's owner, or root,
 * rename over it). */
static int check_existing(const char *target, const struct stat *st,
			  const struct fileio_kind *kind, const char *shown,
			  char *err, size_t errlen)
{
	unsigned char head[256];
	char dir[PATH_BUF], db[160], e[600];
	struct stat ds;
	int fd = fileio_open_read(target, e, sizeof(e)), flags = 0;
	ssize_t n = 0;
	if (fd < 0 && kind && st->st_size > 0) {
		errmsg_set(err, errlen,
			   "%s exists and cannot be read to tell whether it "
			   "is %s (%s); give a new path",
			   shown, kind->name, strerror(errno));
		return -1;
	}
	if (fd >= 0) {
		n = pread(fd, head, sizeof(head), 0);
		if (ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0)
			flags = 0; /* a file system without the flags */
		close(fd);
	}
	if (kind && st->st_size > 0 &&
	    (n <= 0 || !kind->is(head, (size_t)n, (long long)st->st_size))) {
		errmsg_set(err, errlen,
			   "%s exists and is not %s; it would be replaced "
			   "whole, so give a new path (or remove the file "
			   "first)",
			   shown, kind->name);
		return -1;
	}
	if (flags & (FS_IMMUTABLE_FL | FS_APPEND_FL)) {
		const int imm = flags & FS_IMMUTABLE_FL;
		errmsg_set(err, errlen,
			   "%s is %s (chattr %s), so it cannot be replaced; "
			   "chattr %s it or choose another path",
			   shown, imm ? "immutable" : "append-only",
			   imm ? "+i" : "+a", imm ? "-i" : "-a");
		return -1;
	}
	dir_of(target, dir, sizeof(dir));
	if (stat(dir, &ds) == 0 && (ds.st_mode & S_ISVTX) && geteuid() != 0 &&
	    st->st_uid != geteuid() && ds.st_uid != geteuid()) {
		errmsg_set(err, errlen,
			   "%s belongs to uid %ld in the sticky directory %s "
			   "(mode %04o), where only its owner may replace "
			   "it; choose another path",
			   shown, (long)st->st_uid,
			   errmsg_brief(dir, db, sizeof(db)),
			   (unsigned)(ds.st_mode & 07777));
		return -1;
	}
	return 0;
}

/* Creates and removes target's temporary file (fileio_tmp_path), after
 * removing stale ones: the directory exists and takes a new file. */
static int probe_tmp(const char *target, const char *shown, char *err,
		     size_t errlen)
{
	char tmp[PATH_BUF + 300], dir[PATH_BUF], db[160];
	int fd, e;
	fileio_remove_stale_tmp(target);
	fileio_tmp_path(target, tmp, sizeof(tmp));
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  0600);
	if (fd >= 0) {
		close(fd);
		unlink(tmp);
		return 0;
	}
	e = errno;
	dir_of(target, dir, sizeof(dir));
	if (e == ENOENT || e == ENOTDIR)
		errmsg_set(err, errlen,
			   "%s: directory %s does not exist; create it "
			   "(mkdir -p) or choose another path",
			   shown, errmsg_brief(dir, db, sizeof(db)));
	else
		errmsg_set(err, errlen,
			   "%s: cannot create a file in directory %s (%s); "
			   "choose a writable directory",
			   shown, errmsg_brief(dir, db, sizeof(db)),
			   strerror(e));
	return -1;
}

int fileio_check_replace(const char *path, const struct fileio_kind *kind,
			 char *err, size_t errlen)
{
	char target[PATH_BUF], pb[200], e[900];
	const char *shown = errmsg_brief(path, pb, sizeof(pb));
	size_t len = strlen(path);
	struct stat st;
	if (!len || path[len - 1] == '/') {
		errmsg_set(err, errlen,
			   "%s ends in '/', so it names a directory; give "
			   "the path of a file",
			   shown);
		return -1;
	}
	if (check_lengths(path, shown, err, errlen) != 0)
		return -1;
	if (fileio_replace_target(path, target, sizeof(target), e, sizeof(e)) !=
	    0) {
		errmsg_set(err, errlen, "%s", e);
		return -1;
	}
	if (check_lengths(target, shown, err, errlen) != 0)
		return -1;
	if (stat(target, &st) == 0 &&
	    check_existing(target, &st, kind, shown, err, errlen) != 0)
		return -1;
	return probe_tmp(target, shown, err, errlen);
}
