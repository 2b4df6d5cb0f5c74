/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: the process-wide state (G, sock_int.h), the lock around it, the
 * libc functions underneath (dlsym(RTLD_NEXT)) and the library's warnings on stderr.
 * Every other file of the library works on this state under this lock.
 */
#include "sock_int.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

struct sk_real sk_real;
struct sk_global G = {.lock = PTHREAD_MUTEX_INITIALIZER};
__thread int sk_in __attribute__((tls_model("initial-exec")));

void sk_resolve(void)
{
#define R(f)                                                \
	do {                                                \
		if (!sk_real.f)                             \
			*(void **)&sk_real.f = dlsym(RTLD_NEXT, #f); \
	} while (0)
	R(socket); R(bind); R(listen); R(accept); R(accept4); R(connect);
	R(read); R(write); R(readv); R(writev); R(recv); R(send); R(recvfrom); R(sendto);
	R(recvmsg); R(sendmsg); R(close); R(shutdown); R(getsockname); R(getpeername);
	R(getsockopt); R(setsockopt); R(fcntl); R(ioctl); R(poll); R(ppoll); R(select);
	R(pselect); R(dup); R(dup2); R(dup3);
	R(epoll_create); R(epoll_create1); R(epoll_ctl); R(epoll_wait); R(epoll_pwait);
#undef R
}

static void vwarn(const char *fmt, va_list ap)
{
	char buf[512];
	int n = snprintf(buf, sizeof(buf), "paranic_sock[%d]: ", (int)getpid());
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (REAL(write)(2, buf, (size_t)n) < 0)
		return;
}

void sk_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vwarn(fmt, ap);
	va_end(ap);
}

void sk_enter(void)
{
	pthread_mutex_lock(&G.lock);
	sk_in = 1;
}

void sk_leave(void)
{
	sk_in = 0;
	pthread_mutex_unlock(&G.lock);
}

void sk_pause(struct pn_backoff *b)
{
	sk_leave();
	pn_backoff_step(b);
	sk_enter();
}
