/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Trust checks for the files other processes could have made: shared-memory segments,
 * UNIX sockets, run directories and the peers behind sockets (docs/reliability.md,
 * "Shared segments, sockets and run directories").
 *
 * The rule: a file we did not create ourselves (O_EXCL, mkdir) is used only when it is
 * owned by our effective uid or by root, and no one else can write it (and, for a
 * segment of private data, read it). Symbolic links are never followed. The checks
 * look at the open descriptor (fstat) or at the name (lstat), never at a name they
 * then open again.
 */
#ifndef PN_TRUST_H
#define PN_TRUST_H

#include <sys/stat.h>
#include <sys/types.h>

#pragma GCC visibility push(default)

/* An open shared-memory segment (or plain file) of private data: a regular file owned
 * by us or root, mode without any group/other bit. 0, -EACCES (owner, mode) or
 * -EINVAL (not a regular file); *st filled when st != NULL. */
int pn_trust_fd(int fd, struct stat *st);

/* A directory path we are about to put sockets into or connect through: it exists,
 * is not a symbolic link, is a directory owned by us or root and writable by nobody
 * else. 0, -ENOENT (missing), -EACCES, -ENOTDIR, -ELOOP (a symlink). */
int pn_trust_dir(const char *path);

/* A socket file: not a symlink, a socket owned by us or root. Same errors. */
int pn_trust_socket(const char *path);

/* The process at the other end of a connected UNIX socket runs as us or root (SO_PEERCRED).
 * 0 or -EACCES; *uid (if not NULL) is the peer's uid. */
int pn_trust_peer(int fd, uid_t *uid);

#pragma GCC visibility pop

#endif /* PN_TRUST_H */
