/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: sendfile, splice and MSG_ZEROCOPY on ParaNIC connections, accepted
 * and done by copying through a buffer (a copying fallback: nothing is shared with the
 * NIC; docs/sockets.md, "sendfile, splice, MSG_ZEROCOPY"):
 *
 *   sendfile, sendfile64   from a file to a ParaNIC connection: read (pread at *offset)
 *                          and written as write() would; the file's offset moves by what
 *                          was sent (iperf3 -Z sends its buffer file this way)
 *   splice                 between a pipe (or file) and a ParaNIC connection: what is taken
 *                          from the pipe is all written (a non-blocking socket may wait for
 *                          room: taken data cannot go back); from the connection at most
 *                          the pipe's free room is read
 *   MSG_ZEROCOPY           with SO_ZEROCOPY set, each send is an ordinary (copying) send
 *                          numbered as the kernel numbers MSG_ZEROCOPY sends; its
 *                          completion is queued at once and says the data was copied
 *                          (SO_EE_CODE_ZEROCOPY_COPIED); recvmsg(MSG_ERRQUEUE)
 *                          returns the range (sock_extended_err, SO_EE_ORIGIN_ZEROCOPY),
 *                          poll reports POLLERR while one is queued
 *
 * Everything else (both ends the OS's) is the kernel's.
 */
#include "sock_api.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <string.h>
#include <linux/errqueue.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <unistd.h>

#define ZC_CHUNK (1u << 20)

static ssize_t (*real_sendfile)(int, int, off_t *, size_t);
static ssize_t (*real_splice)(int, loff_t *, int, loff_t *, size_t, unsigned);

static void zc_resolve(void)
{
	if (!real_sendfile) {
		*(void **)&real_splice = dlsym(RTLD_NEXT, "splice");
		*(void **)&real_sendfile = dlsym(RTLD_NEXT, "sendfile");
	}
}

/* A connection of ours at fd (taken over if shared over fork), with a reference; NULL
 * for anything else. Called under the lock. */
static struct sock *conn_at(int fd)
{
	struct sock *s = sk_get(fd);
	sk_use(s);
	if (s && paranic(s) && !s->dgram && (s->type == SK_CONN || s->stale))
		return s;
	sk_put(s);
	return NULL;
}

/* Write all of buf to s (blocking, whatever O_NONBLOCK says): the data was taken from
 * somewhere it cannot go back to. */
static ssize_t write_all(struct sock *s, const uint8_t *buf, size_t len)
{
	int nb = s->nonblock, sigpipe = 0;
	size_t done = 0;
	s->nonblock = 0;
	while (done < len) {
		ssize_t r = sk_write(s, buf + done, len - done, MSG_NOSIGNAL, &sigpipe);
		if (r < 0) {
			s->nonblock = nb;
			return done ? (ssize_t)done : r;
		}
		done += (size_t)r;
	}
	s->nonblock = nb;
	return (ssize_t)done;
}

SK_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	struct sock *s;
	uint8_t *buf;
	size_t done = 0;
	ssize_t r = 0;
	int sigpipe = 0;

	zc_resolve();
	if (!sk_peek(out_fd))
		return real_sendfile(out_fd, in_fd, offset, count);
	sk_enter();
	if (!(s = conn_at(out_fd))) {
		sk_leave();
		return real_sendfile(out_fd, in_fd, offset, count);
	}
	if (s->stale) {
		r = -EBADF;
	} else if (!(buf = malloc(count < ZC_CHUNK ? (count ? count : 1) : ZC_CHUNK))) {
		r = -ENOMEM;
	} else {
		while (done < count) {
			size_t want = count - done < ZC_CHUNK ? count - done : ZC_CHUNK;
			ssize_t n = offset ? pread(in_fd, buf, want, *offset + (off_t)done) : read(in_fd, buf, want);
			ssize_t w;
			if (n <= 0) {
				if (n < 0 && !done)
					r = -errno;
				break;
			}
			w = sk_write(s, buf, (size_t)n, 0, &sigpipe);
			if (w < 0) {
				if (!offset)
					lseek(in_fd, -n, SEEK_CUR);   /* nothing of it went */
				if (!done)
					r = w;
				break;
			}
			if (w < n && !offset)
				lseek(in_fd, -(n - w), SEEK_CUR);   /* the rest is still the file's */
			done += (size_t)w;
			G.stat[SK_ST_TCP_TX_BYTES] += (uint64_t)w;
			G.stat[SK_ST_SENDFILE_BYTES] += (uint64_t)w;
			if (w < n)
				break;   /* non-blocking socket full */
		}
		free(buf);
		if (offset)
			*offset += (off_t)done;
	}
	sk_put(s);
	sk_leave();
	if (sigpipe)
		raise(SIGPIPE);
	if (done)
		return (ssize_t)done;
	return fail_ss(r);
}

SK_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off_t *offset, size_t count)
{
	return sendfile(out_fd, in_fd, offset, count);
}

/* Free room in the pipe fd (its size less what is in it); the whole len if fd is no pipe. */
static size_t pipe_room(int fd, size_t len)
{
	int sz = REAL(fcntl)(fd, F_GETPIPE_SZ), in = 0;
	if (sz <= 0)
		return len;
	if (REAL(ioctl)(fd, FIONREAD, &in) < 0)
		in = 0;
	return sz > in ? (size_t)(sz - in) : 0;
}

SK_EXPORT ssize_t splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len, unsigned int flags)
{
	struct sock *si = NULL, *so = NULL;
	uint8_t *buf = NULL;
	ssize_t r;

	zc_resolve();
	if (!sk_peek(fd_in) && !sk_peek(fd_out))
		return real_splice(fd_in, off_in, fd_out, off_out, len, flags);
	sk_enter();
	si = conn_at(fd_in);
	so = conn_at(fd_out);
	if (!si && !so) {
		sk_leave();
		return real_splice(fd_in, off_in, fd_out, off_out, len, flags);
	}
	if ((si && si->stale) || (so && so->stale)) {
		r = -EBADF;
		goto out;
	}
	if (si && so) {
		r = -EINVAL;   /* as the kernel: one end must be a pipe */
		goto out;
	}
	if (len > ZC_CHUNK)
		len = ZC_CHUNK;
	if (!(buf = malloc(len ? len : 1))) {
		r = -ENOMEM;
	} else if (so) {   /* pipe (or file) -> connection */
		ssize_t n = off_in ? pread(fd_in, buf, len, *off_in) : REAL(read)(fd_in, buf, len);
		if (n < 0) {
			r = -errno;
		} else if (n == 0) {
			r = 0;
		} else {
			r = write_all(so, buf, (size_t)n);
			if (r > 0) {
				if (off_in)
					*off_in += r;
				G.stat[SK_ST_TCP_TX_BYTES] += (uint64_t)r;
				G.stat[SK_ST_SPLICE_BYTES] += (uint64_t)r;
			}
		}
	} else {   /* connection -> pipe (or file): no more than the pipe takes */
		size_t room = pipe_room(fd_out, len), n;
		int nb = si->nonblock;
		if (!room) {
			r = -EAGAIN;
			goto out;
		}
		if (flags & SPLICE_F_NONBLOCK)
			si->nonblock = 1;
		r = sk_read(si, buf, room < len ? room : len, 0);
		si->nonblock = nb;
		if (r > 0) {
			n = (size_t)r;
			for (size_t done = 0; done < n;) {
				ssize_t w = off_out ? pwrite(fd_out, buf + done, n - done, *off_out + (off_t)done)
						    : REAL(write)(fd_out, buf + done, n - done);
				if (w < 0) {
					if (errno == EINTR || errno == EAGAIN)
						continue;   /* the room was there: it comes */
					r = done ? (ssize_t)done : -errno;
					break;
				}
				done += (size_t)w;
			}
			if (r > 0) {
				if (off_out)
					*off_out += r;
				G.stat[SK_ST_TCP_RX_BYTES] += (uint64_t)r;
				G.stat[SK_ST_SPLICE_BYTES] += (uint64_t)r;
			}
		}
	}
out:
	free(buf);
	sk_put(si);
	sk_put(so);
	sk_leave();
	return fail_ss(r);
}

/* ---- MSG_ZEROCOPY ------------------------------------------------------------------------------- */

static int zc_enabled(const struct sock *s)
{
	for (int i = 0; i < s->nopts; i++)
		if (s->opts[i].level == SOL_SOCKET && s->opts[i].name == SO_ZEROCOPY)
			return s->opts[i].val[0] != 0;
	return 0;
}

void sk_zc_sent(struct sock *s, int flags)
{
	if (!(flags & MSG_ZEROCOPY) || !zc_enabled(s))
		return;   /* as Linux: the flag without SO_ZEROCOPY is an ordinary send */
	s->zc_next++;
	G.stat[SK_ST_ZC_COPIED]++;
}

/* recvmsg(MSG_ERRQUEUE): the MSG_ZEROCOPY completions (all "copied") not reported yet, as
 * one range. */
ssize_t sk_zc_errqueue(struct sock *s, struct msghdr *msg)
{
	struct sock_extended_err ee = {0};
	struct cmsghdr *cm;
	size_t need = CMSG_SPACE(sizeof(ee));

	if (s->zc_done == s->zc_next)
		return -EAGAIN;
	if (!msg->msg_control || msg->msg_controllen < need) {
		msg->msg_flags = MSG_CTRUNC | MSG_ERRQUEUE;
		msg->msg_controllen = 0;
		return 0;
	}
	ee.ee_origin = SO_EE_ORIGIN_ZEROCOPY;
	ee.ee_code = SO_EE_CODE_ZEROCOPY_COPIED;   /* the data was copied: nothing pinned */
	ee.ee_info = s->zc_done;
	ee.ee_data = s->zc_next - 1;
	cm = CMSG_FIRSTHDR(msg);
	cm->cmsg_level = s->family == AF_INET6 ? SOL_IPV6 : SOL_IP;
	cm->cmsg_type = s->family == AF_INET6 ? IPV6_RECVERR : IP_RECVERR;
	cm->cmsg_len = CMSG_LEN(sizeof(ee));
	memcpy(CMSG_DATA(cm), &ee, sizeof(ee));
	msg->msg_controllen = need;
	msg->msg_flags = MSG_ERRQUEUE;
	msg->msg_namelen = 0;
	s->zc_done = s->zc_next;
	return 0;
}
