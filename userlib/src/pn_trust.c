/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Owner and mode checks of shared segments, run directories, sockets and socket peers
 * (pn_trust.h). Every system call goes through syscall(2) where libparanic_sock.so
 * interposes the libc function (getsockopt).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pn_trust.h"

static int owner_ok(uid_t uid)
{
	return uid == geteuid() || uid == 0;
}

int pn_trust_fd(int fd, struct stat *out)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (out)
		*out = st;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (!owner_ok(st.st_uid) || (st.st_mode & 077))
		return -EACCES;
	return 0;
}

/* A name (never followed if a symbolic link) of file type `type` (S_IFDIR, S_IFSOCK),
 * owned by us or root, with none of the mode bits `deny`: 0, -errno of lstat, -ELOOP,
 * `wrong_type`, -EACCES. */
static int trust_name(const char *path, mode_t type, int wrong_type, mode_t deny)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return -errno;
	if (S_ISLNK(st.st_mode))
		return -ELOOP;
	if ((st.st_mode & S_IFMT) != type)
		return wrong_type;
	if (!owner_ok(st.st_uid) || (st.st_mode & deny))
		return -EACCES;
	return 0;
}

int pn_trust_dir(const char *path)
{
	return trust_name(path, S_IFDIR, -ENOTDIR, 022);
}

int pn_trust_socket(const char *path)
{
	return trust_name(path, S_IFSOCK, -ENOTSOCK, 0);
}

int pn_trust_peer(int fd, uid_t *uid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return -errno;
	if (uid)
		*uid = cr.uid;
	return owner_ok(cr.uid) ? 0 : -EACCES;
}
