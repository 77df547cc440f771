/* fileio.c — appending, replacing and temporary files (see fileio.h). */
#include "fileio.h"

#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_BUF 4096

/* mkdir -p of the directory part of path. *made gets the length of the
 * shortest directory prefix this call created (0 when none), also when it
 * fails part way, so the caller can remove what was made. */
static int mkdirs(const char *path, size_t *made, char *err, size_t errlen)
{
	char buf[PATH_BUF];
	size_t n = strlen(path);
	*made = 0;
	if (n >= sizeof(buf)) {
		char pb[160];
		snprintf(err, errlen, "%s: path too long",
			 config_brief(path, pb, sizeof(pb)));
		return -1;
	}
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0777) == 0) {
			if (!*made)
				*made = (size_t)(p - buf);
		} else if (errno != EEXIST) {
			char pb[160], db[160];
			snprintf(
			    err, errlen, "%s: cannot create directory %s (%s)",
			    config_brief(path, pb, sizeof(pb)),
			    config_brief(buf, db, sizeof(db)), strerror(errno));
			return -1;
		}
		*p = '/';
	}
	return 0;
}

/* Removes the directories of path's directory part from the deepest up to
 * the prefix of length made (what mkdirs created); stops at the first one
 * that is not empty. */
static void rmdirs(const char *path, size_t made)
{
	char buf[PATH_BUF];
	char *p;
	if (!made || strlen(path) >= sizeof(buf))
		return;
	memcpy(buf, path, strlen(path) + 1);
	while ((p = strrchr(buf, '/')) && (size_t)(p - buf) >= made) {
		*p = 0;
		if (rmdir(buf) != 0)
			break;
	}
}

int fileio_make_parents(const char *path, char *err, size_t errlen)
{
	size_t made;
	return mkdirs(path, &made, err, errlen);
}

/* "PATH: cannot open for appending (reason)", with a plain word for a FIFO
 * nobody reads (ENXIO under O_NONBLOCK). */
static void open_error(const char *path, int e, char *err, size_t errlen)
{
	char pb[256];
	snprintf(err, errlen, "%s: cannot open for appending (%s)",
		 config_brief(path, pb, sizeof(pb)),
		 e == ENXIO ? "a FIFO with no reader" : strerror(e));
}

int fileio_probe_append(const char *path, char *err, size_t errlen)
{
	const int fl = O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC;
	size_t made = 0;
	int fd = -1, created = 0, rc = 0;

	if (mkdirs(path, &made, err, errlen) != 0) {
		rmdirs(path, made);
		return -1;
	}
	/* twice: another process may create the file between the two opens */
	for (int tries = 0; fd < 0 && tries < 2; tries++) {
		fd = open(path, fl);
		if (fd < 0 && errno == ENOENT) {
			fd = open(path, fl | O_CREAT | O_EXCL, 0644);
			created = fd >= 0;
		}
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0) {
		open_error(path, errno, err, errlen);
		rc = -1;
	} else {
		close(fd);
	}
	if (created)
		unlink(path);
	rmdirs(path, made);
	return rc;
}

/* Writes buf[0..n) to fd, retrying short writes; returns the bytes written
 * and leaves errno set when fewer than n. */
static size_t write_all(int fd, const void *buf, size_t n)
{
	size_t off = 0;
	while (off < n) {
		ssize_t w = write(fd, (const char *)buf + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = ENOSPC;
			break;
		}
		off += (size_t)w;
	}
	return off;
}

int fileio_append(const char *path, const void *buf, size_t n, int nofollow,
		  char *err, size_t errlen)
{
	struct stat st;
	off_t old = -1;
	size_t done;
	int e = 0, fd;

	fd = open(path,
		  O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC |
		      (nofollow ? O_NOFOLLOW : 0),
		  0644);
	if (fd < 0) {
		open_error(path, errno, err, errlen);
		return -1;
	}
	/* O_NONBLOCK only kept the open from waiting for a FIFO reader */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	while (flock(fd, LOCK_EX) != 0 && errno == EINTR)
		;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		old = st.st_size;
	done = write_all(fd, buf, n);
	if (done < n)
		e = errno;
	else if (old >= 0 && fsync(fd) != 0)
		e = errno; /* NFS and friends report write errors here */
	if (e) {
		const char *left = "a partial line may remain at its end";
		if (old >= 0 && ftruncate(fd, old) == 0)
			left = "the file is unchanged";
		else if (done == 0)
			left = "nothing was written";
		snprintf(err, errlen, "%s: cannot append (%s); %s", path,
			 strerror(e), left);
	}
	close(fd);
	return e ? -1 : 0;
}

const char *fileio_rescue_path(char *buf, size_t n)
{
	const char *t = getenv("TMPDIR");
	snprintf(buf, n, "%s/deqbench-unsaved-%ld.jsonl", t && *t ? t : "/tmp",
		 (long)getuid());
	return buf;
}

static const char *type_name(mode_t m)
{
	return S_ISFIFO(m)   ? "FIFO (named pipe)"
	       : S_ISCHR(m)  ? "character device"
	       : S_ISBLK(m)  ? "block device"
	       : S_ISSOCK(m) ? "socket"
	       : S_ISDIR(m)  ? "directory"
			     : "special file";
}

static int copy_path(char *dst, size_t n, const char *src, char *err,
		     size_t errlen)
{
	if (strlen(src) >= n) {
		snprintf(err, errlen, "%s: path too long", src);
		return -1;
	}
	memcpy(dst, src, strlen(src) + 1);
	return 0;
}

/* Target of the symbolic link path, which must be a regular file. */
static int link_target(const char *path, char *target, size_t n, char *err,
		       size_t errlen)
{
	char *real = realpath(path, NULL);
	struct stat st;
	int rc = -1;
	if (!real || stat(real, &st) != 0)
		snprintf(err, errlen,
			 "%s is a symbolic link that does not resolve (%s); "
			 "point it at a regular file or give another path",
			 path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		snprintf(err, errlen,
			 "%s is a symbolic link to %s, a %s, not a regular "
			 "file; give a new path or a regular file",
			 path, real, type_name(st.st_mode));
	else
		rc = copy_path(target, n, real, err, errlen);
	free(real);
	return rc;
}

int fileio_replace_target(const char *path, char *target, size_t n, char *err,
			  size_t errlen)
{
	struct stat st;
	if (lstat(path, &st) != 0 || S_ISREG(st.st_mode))
		return copy_path(target, n, path, err, errlen);
	if (S_ISLNK(st.st_mode))
		return link_target(path, target, n, err, errlen);
	snprintf(err, errlen,
		 "%s is a %s, not a regular file; outputs are written to a "
		 "temporary file and renamed into place, so give a new path "
		 "or a regular file",
		 path, type_name(st.st_mode));
	return -1;
}

/* This host's name as it appears in temporary names: letters, digits, '-',
 * '_' and '.', others replaced by '_'. */
static void host_tag(char *buf, size_t n)
{
	if (gethostname(buf, n) != 0 || !buf[0])
		snprintf(buf, n, "localhost");
	buf[n - 1] = 0;
	for (char *p = buf; *p; p++)
		if (!(*p >= 'a' && *p <= 'z') && !(*p >= 'A' && *p <= 'Z') &&
		    !(*p >= '0' && *p <= '9') && *p != '-' && *p != '.')
			*p = '_';
}

/* Whether SUFFIX, the part of a name after "BASE.tmp", names a temporary
 * file of a process of this host that no longer runs: "" (older
 * versions), ".PID" or ".HOST.PID". */
static int stale_suffix(const char *suffix, const char *host)
{
	const char *dot, *pid_s;
	char *end;
	long pid;
	if (!*suffix)
		return 1;
	if (*suffix != '.')
		return 0;
	dot = strrchr(suffix + 1, '.');
	pid_s = dot ? dot + 1 : suffix + 1;
	if (dot && ((size_t)(dot - suffix - 1) != strlen(host) ||
		    strncmp(suffix + 1, host, strlen(host))))
		return 0; /* another host's, or not ours at all */
	errno = 0;
	pid = strtol(pid_s, &end, 10);
	if (!*pid_s || *end || errno || pid <= 0 || pid > INT_MAX)
		return 0;
	if (pid == (long)getpid())
		return 1; /* an earlier process that had our number */
	return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int fileio_remove_stale_tmp(const char *path)
{
	char dir[PATH_BUF], host[256], prefix[PATH_BUF];
	const char *slash = strrchr(path, '/'), *base;
	struct dirent *de;
	DIR *d;
	int removed = 0;

	if (strlen(path) >= sizeof(dir) - 8)
		return 0;
	if (slash) {
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path + 1),
			 path);
		base = slash + 1;
	} else {
		snprintf(dir, sizeof(dir), ".");
		base = path;
	}
	snprintf(prefix, sizeof(prefix), "%s.tmp", base);
	host_tag(host, sizeof(host));
	if (!*base || !(d = opendir(dir)))
		return 0;
	while ((de = readdir(d))) {
		struct stat st;
		size_t pl = strlen(prefix);
		if (strncmp(de->d_name, prefix, pl) ||
		    !stale_suffix(de->d_name + pl, host))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ==
			0 &&
		    S_ISREG(st.st_mode) &&
		    unlinkat(dirfd(d), de->d_name, 0) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}

int fileio_replace(const char *path, const struct iovec *iov, int niov,
		   char *err, size_t errlen)
{
	char target[PATH_BUF], tmp[PATH_BUF + 300], host[256];
	int fd, e = 0;

	if (fileio_replace_target(path, target, sizeof(target), err, errlen))
		return -1;
	fileio_remove_stale_tmp(target);
	host_tag(host, sizeof(host));
	snprintf(tmp, sizeof(tmp), "%s.tmp.%s.%ld", target, host,
		 (long)getpid());
	/* O_EXCL: our own stale name was removed above; never truncate a file
	 * someone else put there */
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  0666);
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot create %s (%s)", path, tmp,
			 strerror(errno));
		return -1;
	}
	for (int i = 0; i < niov && !e; i++)
		if (write_all(fd, iov[i].iov_base, iov[i].iov_len) <
		    iov[i].iov_len)
			e = errno;
	if (!e && fsync(fd) != 0)
		e = errno;
	if (close(fd) != 0 && !e)
		e = errno;
	if (!e && rename(tmp, target) != 0)
		e = errno;
	if (e) {
		unlink(tmp);
		snprintf(err, errlen, "%s: write failed (%s)", path,
			 strerror(e));
		return -1;
	}
	return 0;
}
