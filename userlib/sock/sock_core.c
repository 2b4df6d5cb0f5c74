/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: state, configuration, the port, and TCP connections over ports.
 *
 * A process of a job (PARANIC_NODE and PARANIC_NODES set) opens, on first need, one
 * port on any free context of its node (or PARANIC_SOCK_CTX); the ports it binds go into
 * its node's directory (sock_dir.c), which tells connectors the context. A connection is
 * a pair of connection ids, one per side, each naming the channel and tag its owner
 * receives on. Connect sends REQ to the port the destination node's directory names for
 * the port number; the library there (whenever it is called: any socket call,
 * poll, a blocked read) answers ACK at once if a socket listens on that port, queueing
 * the new connection for accept(), as a kernel completes the handshake before accept.
 * A write is sent as DATA messages (ports: eager, or rendezvous from the program's
 * buffer); a read takes them in order, straight into the program's buffer when the
 * message fits, else through a staged copy. shutdown(SHUT_WR) sends FIN, close sends
 * CLOSE; a closed connection is kept (a zombie) and drained until the peer's FIN or
 * CLOSE has come, so that no sender ever waits for a receive that will not come.
 */
#include "sock_int.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
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

static void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vwarn(fmt, ap);
	va_end(ap);
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

/* ---- configuration ----------------------------------------------------------------------- */

static int env_long(const char *name, long dflt, long lo, long hi, long *out)
{
	const char *s = getenv(name);
	char *end;
	long v;
	*out = dflt;
	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || *end || v < lo || v > hi) {
		warn("bad %s=%s (%ld .. %ld); the socket layer is off", name, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

static void read_boot_id(void)
{
	char s[64] = {0};
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	unsigned n = 0;
	if (fd < 0)
		return;
	if (REAL(read)(fd, s, sizeof(s) - 1) > 0) {
		for (const char *p = s; *p && n < 32; p++) {
			int v = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
			if (v < 0)
				continue;
			G.boot[n / 2] |= (uint8_t)(n % 2 ? v : v << 4);
			n++;
		}
	}
	REAL(close)(fd);
}

static void sk_config(void)
{
	const char *v = getenv("PARANIC_SOCK"), *net;
	long node, nodes, x;

	if (v && !strcmp(v, "0"))
		return;
	if (!getenv("PARANIC_NODE") || !getenv("PARANIC_NODES"))
		return;   /* not a process of a job: everything goes to the OS */
	if (env_long("PARANIC_NODE", 0, 0, PN_MAX_NODES - 1, &node) < 0 ||
	    env_long("PARANIC_NODES", 1, 1, PN_MAX_NODES, &nodes) < 0 || node >= nodes)
		return;
	net = getenv("PARANIC_SOCK_NET");
	if (!net || !*net)
		net = SK_DEFAULT_NET;
	if (sk_net_parse(net, &G.net) < 0) {
		warn("bad PARANIC_SOCK_NET=%s (a.b.c.d/len); the socket layer is off", net);
		return;
	}
	if ((uint32_t)nodes > sk_net_capacity(&G.net)) {
		warn("PARANIC_SOCK_NET=%s cannot address %ld nodes; the socket layer is off", net, nodes);
		return;
	}
	G.node = (unsigned)node;
	G.nodes = (unsigned)nodes;
	G.my_addr = sk_node_addr(&G.net, G.node);
	if (env_long("PARANIC_SOCK_CTX", -1, 0, PN_MAX_CONTEXTS - 1, &x) < 0)
		return;
	G.ctx_fixed = x >= 0;
	G.ctx = x >= 0 ? (unsigned)x : 0;
	if (env_long("PARANIC_SOCK_CONNECT_WAIT_MS", 0, 0, 86400000, &x) < 0)
		return;
	G.connect_wait_ns = (uint64_t)x * 1000000ull;
	if (env_long("PARANIC_SOCK_CONNECT_TIMEOUT_MS", 60000, 1, 86400000, &x) < 0)
		return;
	G.connect_timeout_ns = (uint64_t)x * 1000000ull;
	if (env_long("PARANIC_SOCK_LINGER_MS", 10000, 0, 86400000, &x) < 0)
		return;
	G.linger_ns = (uint64_t)x * 1000000ull;
	if (env_long("PARANIC_SOCK_SNDBUF", 4l << 20, 1, 1l << 30, &x) < 0)
		return;
	G.sndbuf = (size_t)x;
	if (env_long("PARANIC_SOCK_RCVBUF", 4l << 20, 1, 1l << 30, &x) < 0)
		return;
	G.rcvbuf = (size_t)x;
	if (env_long("PARANIC_SOCK_DEBUG", 0, 0, 9, &x) < 0)
		return;
	G.debug = (int)x;
	read_boot_id();
	G.next_eport = 32768u + (uint32_t)getpid() % 16384u;
	G.gen = (uint32_t)getpid() * 2654435761u;
	G.next_chan = 1;
	G.active = 1;
}

/* The child of a fork must not use the parent's port (a context belongs to one
 * process): the sockets it inherited that only the port served (connections, cluster
 * listeners) are stale, every call on them fails with EBADF; the ones the OS serves too
 * (a wildcard listener, a UDP socket bound to INADDR_ANY) become the OS's sockets in the
 * child. An inherited UDP socket on the cluster only (bound to the node's address) is
 * shared: the child's first use opens its own port and takes the socket's directory
 * entry over (sk_udp_claim, sock_udp.c). Its new sockets open a port of its own (any free
 * context) on first need. The parent's connections, requests and directory entries stay
 * the parent's: the child forgets them (their memory is left alone). */
static void sk_atfork_child(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	G.lock = fresh;
	sk_in = 0;
	if (!G.active)
		return;
	for (int fd = 0; fd < SK_MAX_FD; fd++) {
		struct sock *s = G.fds[fd];
		if (!s)
			continue;
		if (s->type == SK_CAND) {
			s->dir = 0;   /* a port it bound is the parent's entry */
		} else if (s->os) {
			G.fds[fd] = NULL;   /* an OS socket only, from now on */
		} else if (s->type != SK_UDP) {
			s->stale = 1;
			s->dir = 0;
		}
	}
	sk_udp_fork(1);   /* (G.udps: the inherited UDP sockets on the cluster only) */
	G.port = NULL;
	G.n_ifd = 0;   /* the parent's port's fds: the child may close its copies */
	G.open_failed = 0;
	G.conns = NULL;
	G.listeners = NULL;
	G.dh = G.uh = NULL;
	G.uinflight = 0;
	G.dir_used = 0;
	memset(G.chan_used, 0, sizeof(G.chan_used));
	memset(G.stat, 0, sizeof(G.stat));
	G.next_eport = 32768u + (uint32_t)getpid() % 16384u;
	G.gen = (uint32_t)getpid() * 2654435761u;
}

/* The parent of a fork: its UDP sockets on the cluster are shared with the child now. */
static void sk_atfork_parent(void)
{
	int locked = !sk_in;
	if (!G.active)
		return;
	if (locked)
		sk_enter();
	sk_udp_fork(0);
	if (locked)
		sk_leave();
}

static void sk_fini(void);

__attribute__((constructor)) static void sk_init(void)
{
	sk_resolve();
	sk_config();
	pthread_atfork(NULL, sk_atfork_parent, sk_atfork_child);
	if (G.debug && G.active)
		warn("node %u of %u, address %u.%u.%u.%u, context %d (-1: any free one)", G.node, G.nodes,
		     G.my_addr >> 24, (G.my_addr >> 16) & 255, (G.my_addr >> 8) & 255, G.my_addr & 255,
		     G.ctx_fixed ? (int)G.ctx : -1);
}

__attribute__((destructor)) static void sk_destructor(void)
{
	sk_fini();
}

/* The process's open fds (below SK_MAX_FD) as a bit set, from /proc/self/fd. */
static uint64_t fds_before[SK_MAX_FD / 64], fds_after[SK_MAX_FD / 64];

static int fd_scan(uint64_t *bits)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	memset(bits, 0, SK_MAX_FD / 8);
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		long fd = strtol(e->d_name, NULL, 10);
		if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && fd >= 0 && fd < SK_MAX_FD && fd != dirfd(d))
			bits[fd / 64] |= 1ull << (fd % 64);
	}
	closedir(d);
	return 0;
}

pn_port_t *sk_port(void)
{
	pn_port_opts_t o;
	const char *b;
	int r, scanned;

	if (G.port)
		return G.port;
	if (!G.active || G.open_failed || G.finished)
		return NULL;
	pn_port_opts_init(&o);
	o.hal.ctx = G.ctx_fixed ? (int)G.ctx : PN_CTX_ANY;
	scanned = fd_scan(fds_before) == 0;
	r = pn_port_open(&G.port, &o);
	if (r < 0) {
		G.port = NULL;
		G.open_failed = 1;
		if (G.ctx_fixed)
			warn("cannot open the port at node %u context %u: %s; using the OS's sockets only", G.node,
			     G.ctx, pn_strerror(r));
		else
			warn("cannot open a port at node %u: %s; using the OS's sockets only", G.node, pn_strerror(r));
		return NULL;
	}
	G.ctx = (unsigned)pn_port_ctx(G.port);
	/* The fds the port opened (sim: the simulator's socket and the memory; pci: the
	 * device; the daemon's connection) must outlive a program that closes every fd it
	 * does not know (pvmd does when it starts): the program's close of them is ignored. */
	if (scanned && fd_scan(fds_after) == 0) {
		int n = 0;
		for (int w = 0; w < SK_MAX_FD / 64; w++)
			for (uint64_t x = fds_after[w] & ~fds_before[w]; x && n < SK_MAX_IFD; x &= x - 1)
				G.ifd[n++] = w * 64 + __builtin_ctzll(x);
		__atomic_store_n(&G.n_ifd, n, __ATOMIC_RELEASE);
	}
	b = pn_backend_name(pn_port_hal(G.port));
	G.local_pids = b && (!strcmp(b, "sw") || !strcmp(b, "sim"));
	if (G.debug)
		warn("port open at node %d context %d (%s), %d fds of its own", pn_port_node(G.port),
		     pn_port_ctx(G.port), b, G.n_ifd);
	return G.port;
}

/* For benchmarks (pn_sockbench finds it with dlsym): the time base of the socket port's
 * backend, pn_now_ns (wall clock on sw, simulated time on sim), so that a plain socket
 * program can time the hardware path on the simulator; 0 while this process has no
 * port open (before its first cluster socket, or outside a job). */
SK_EXPORT uint64_t pn_sock_now_ns(void)
{
	uint64_t t = 0;
	sk_enter();
	if (G.port)
		t = pn_now_ns(pn_port_hal(G.port));
	sk_leave();
	return t;
}

/* ---- socket table --------------------------------------------------------------------------- */

struct sock *sk_new(int type, int family)
{
	struct sock *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->type = type;
	s->family = family;
	s->sndbuf = 16384;
	s->rcvbuf = 131072;
	return s;
}

struct sock *sk_get(int fd)
{
	struct sock *s;
	if (fd < 0 || fd >= SK_MAX_FD)
		return NULL;
	s = G.fds[fd];
	if (s)
		s->refs++;
	return s;
}

void sk_put(struct sock *s)
{
	if (s && --s->refs == 0)
		sk_destroy(s);
}

void sk_set_fd(int fd, struct sock *s)
{
	struct sock *old;
	if (fd < 0 || fd >= SK_MAX_FD)
		return;
	old = G.fds[fd];
	if (s)
		s->refs++;
	__atomic_store_n(&G.fds[fd], s, __ATOMIC_RELEASE);
	sk_put(old);
}

void sk_untrack(int fd)
{
	sk_set_fd(fd, NULL);
}

/* The node of a cluster address (and the address, port), -1 for any other address;
 * *any: the wildcard address (INADDR_ANY, in6addr_any). */
int sk_cluster_addr(const struct sockaddr *sa, socklen_t len, uint32_t *addr, uint16_t *port, int *any)
{
	uint32_t a;
	*any = 0;
	if (!sa)
		return -1;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		a = ntohl(in->sin_addr.s_addr);
		*port = ntohs(in->sin_port);
	} else if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		*port = ntohs(in6->sin6_port);
		if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr)) {
			*any = 1;
			*addr = 0;
			return -1;
		}
		if (!IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
			return -1;
		memcpy(&a, &in6->sin6_addr.s6_addr[12], 4);
		a = ntohl(a);
	} else {
		return -1;
	}
	*addr = a;
	if (a == INADDR_ANY) {
		*any = 1;
		return -1;
	}
	return G.active ? sk_addr_node(&G.net, a, G.nodes) : -1;
}

int sk_fill_addr(int family, uint32_t addr, uint16_t port, struct sockaddr *sa, socklen_t *len)
{
	union {
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
	} u;
	socklen_t n;
	memset(&u, 0, sizeof(u));
	if (family == AF_INET6) {
		u.in6.sin6_family = AF_INET6;
		u.in6.sin6_port = htons(port);
		u.in6.sin6_addr.s6_addr[10] = 0xff;
		u.in6.sin6_addr.s6_addr[11] = 0xff;
		addr = htonl(addr);
		memcpy(&u.in6.sin6_addr.s6_addr[12], &addr, 4);
		n = sizeof(u.in6);
	} else {
		u.in.sin_family = AF_INET;
		u.in.sin_port = htons(port);
		u.in.sin_addr.s_addr = htonl(addr);
		n = sizeof(u.in);
	}
	if (!sa || !len)
		return sa || len ? -EFAULT : 0;
	memcpy(sa, &u, *len < n ? *len : n);
	*len = n;
	return 0;
}

/* Put an eventfd in place of the OS socket at fd (same number, same close-on-exec). */
int sk_placeholder(int fd)
{
	int fl = REAL(fcntl)(fd, F_GETFD), e, r;
	if (fl < 0)
		return -errno;
	e = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (e < 0)
		return -errno;
	r = REAL(dup3)(e, fd, (fl & FD_CLOEXEC) ? O_CLOEXEC : 0);
	int err = errno;
	REAL(close)(e);
	return r < 0 ? -err : 0;
}

uint16_t sk_ephemeral_port(void)
{
	for (unsigned i = 0; i < 16384; i++) {
		uint16_t p = (uint16_t)(32768u + (G.next_eport++ % 16384u));
		if (!sk_listener_for(p, G.my_addr))
			return p;
	}
	return 0;
}

/* SO_REUSEADDR or SO_REUSEPORT set on s (remembered options). */
static int sk_reuse(const struct sock *s)
{
	for (int i = 0; i < s->nopts; i++)
		if (s->opts[i].level == SOL_SOCKET && (s->opts[i].name == SO_REUSEADDR || s->opts[i].name == SO_REUSEPORT) &&
		    s->opts[i].val[0])
			return 1;
	return 0;
}

/* Put s's port number in the node's directory (port 0: the first free ephemeral one),
 * remembered in lport. A port this process has already: EADDRINUSE, but for UDP sockets
 * with SO_REUSEADDR/SO_REUSEPORT, which share it (as Linux lets them; iperf3 -u binds its
 * next listener while the connected one is still open). */
int sk_register(struct sock *s, unsigned proto, uint16_t port)
{
	int r = -EADDRINUSE;
	if (!sk_port())
		return -EADDRNOTAVAIL;
	if (port) {
		r = sk_dir_add(proto, port, G.ctx);
		if (r == 1)
			r = proto == SK_PROTO_UDP && sk_reuse(s) ? 0 : -EADDRINUSE;
	} else {
		for (unsigned i = 0; i < 16384 && r == -EADDRINUSE; i++) {
			port = (uint16_t)(32768u + (G.next_eport++ % 16384u));
			if (proto == SK_PROTO_TCP && sk_listener_for(port, G.my_addr))
				continue;
			r = sk_dir_add(proto, port, G.ctx);
			if (r == 1)
				r = -EADDRINUSE;
		}
	}
	if (r < 0)
		return r;
	G.dir_used = 1;
	s->dir = proto;
	s->lport = port;
	return 0;
}

struct sock *sk_listener_for(uint16_t port, uint32_t addr)
{
	for (struct sock *l = G.listeners; l; l = l->lnext)
		if (l->lport == port && (l->laddr == 0 || l->laddr == addr))
			return l;
	return NULL;
}

/* ---- connections ------------------------------------------------------------------------------ */

static int map_err(int r)
{
	if (r == -ENOMEM)
		return ENOMEM;
	if (r == -ECONNREFUSED)
		return ECONNREFUSED;
	if (r == -EHOSTUNREACH)
		return EHOSTUNREACH;
	return ECONNRESET;
}

static struct conn *conn_new(void)
{
	struct conn *c;
	uint32_t ch = 0;
	for (unsigned i = 0; i < 65535; i++) {
		uint32_t x = G.next_chan;
		G.next_chan = x >= 65535 ? 1 : x + 1;
		if (!(G.chan_used[x / 64] & (1ull << (x % 64)))) {
			ch = x;
			break;
		}
	}
	if (!ch || !(c = calloc(1, sizeof(*c))))
		return NULL;
	G.chan_used[ch / 64] |= 1ull << (ch % 64);
	G.gen++;
	c->chan = (uint16_t)ch;
	c->id = (G.gen << 16) | ch;
	c->next = G.conns;
	if (G.conns)
		G.conns->prev = c;
	G.conns = c;
	return c;
}

static void stage_free(struct conn *c)
{
	while (c->sh) {
		struct chunk *k = c->sh;
		c->sh = k->next;
		free(k);
	}
	c->stl = NULL;
	c->sbytes = 0;
}

static void conn_free(struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		G.conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	G.chan_used[c->chan / 64] &= ~(1ull << (c->chan % 64));
	stage_free(c);
	free(c);
}

/* Send a message of the connection (DATA, FIN, CLOSE); own: a buffer freed when done. */
static int conn_isend(struct conn *c, unsigned kind, const void *buf, size_t len, void *own)
{
	struct psend *ps = malloc(sizeof(*ps));
	int r;
	if (!ps) {
		free(own);
		return -ENOMEM;
	}
	r = pn_port_isend(G.port, c->peer_node, c->peer_ctx, (int)(c->peer_id & 0xffff), SK_TAG(kind, c->peer_id),
			  buf, len, &ps->req);
	if (r < 0) {
		free(own);
		free(ps);
		return r;
	}
	ps->next = NULL;
	ps->len = len;
	ps->own = own;
	if (c->pt)
		c->pt->next = ps;
	else
		c->ph = ps;
	c->pt = ps;
	c->pbytes += len;
	return 0;
}

/* Collect finished sends (in order: they complete in order). */
static void conn_reap(struct conn *c)
{
	while (c->ph && G.port) {
		struct psend *ps = c->ph;
		int r = pn_port_test(G.port, &ps->req, NULL);
		if (r == 0)
			break;
		if (r < 0 && !c->error)
			c->error = map_err(r);
		c->ph = ps->next;
		if (!c->ph)
			c->pt = NULL;
		c->pbytes -= ps->len;
		free(ps->own);
		free(ps);
	}
}

/* Withdraw sends that have not started (after an error); started ones end by ports'
 * liveness. */
static void conn_cancel_sends(struct conn *c)
{
	struct psend **pp = &c->ph, *last = NULL;
	while (*pp) {
		struct psend *ps = *pp;
		if (pn_port_cancel(G.port, &ps->req) == 0) {
			*pp = ps->next;
			c->pbytes -= ps->len;
			free(ps->own);
			free(ps);
			continue;
		}
		last = ps;
		pp = &ps->next;
	}
	c->pt = last;
}


static void detached_send(unsigned node, unsigned ctx, int chan, uint64_t tag, void *buf, size_t len)
{
	struct psend *ps = malloc(sizeof(*ps));
	if (!ps || pn_port_isend(G.port, node, ctx, chan, tag, buf, len, &ps->req) < 0) {
		free(ps);
		free(buf);
		return;
	}
	ps->own = buf;
	ps->len = len;
	ps->next = G.dh;
	G.dh = ps;
}

static void detached_reap(void)
{
	for (struct psend **pp = &G.dh; *pp;) {
		struct psend *ps = *pp;
		if (pn_port_test(G.port, &ps->req, NULL) == 0) {
			pp = &ps->next;
			continue;
		}
		*pp = ps->next;
		free(ps->own);
		free(ps);
	}
}

/* A pid of 0 (no owner recorded) counts as alive here. */
static int pid_alive(int32_t pid)
{
	return pid <= 0 || pn_pid_alive((uint32_t)pid);
}

/* A peer on this host whose process is gone: the connection is reset, SK_DEAD_GRACE_NS
 * after its death was first seen. The grace is for data the peer sent before it exited
 * and that is still on the way (its sends completed when its NIC had read the data: on
 * sim the packets may still be in the simulated network for a while); it arrives and
 * is read, then the peer's CLOSE ends the connection normally. */
void sk_pid_check(struct conn *c, uint64_t now)
{
	if (!c->pid_ok || c->error || c->state != CS_OPEN || now < c->live_at)
		return;
	c->live_at = now + (G.finished ? SK_LIVE_NS / 100 : SK_LIVE_NS);
	if (pid_alive(c->peer_pid)) {
		c->dead_at = 0;
		return;
	}
	if (!c->dead_at)
		c->dead_at = now;
	if (now - c->dead_at >= SK_DEAD_GRACE_NS || G.finished) {
		c->error = ECONNRESET;
		if (G.debug)
			warn("connection %08x: peer process %d is gone", c->id, (int)c->peer_pid);
	}
}

static void conn_opened(struct conn *c, uint32_t peer_id, int32_t pid, const uint8_t *boot, uint64_t now)
{
	c->state = CS_OPEN;
	c->peer_id = peer_id;
	c->peer_pid = pid;
	c->pid_ok = G.local_pids && !memcmp(boot, G.boot, sizeof(G.boot));
	c->live_at = now + SK_LIVE_NS;
	G.stat[SK_ST_TCP_OPENED]++;
	if (c->peer_node != G.node)
		G.stat[SK_ST_TCP_REMOTE]++;
}

/* The next message of c, if one has arrived: data that fits buf (cap) goes there (its
 * length is returned), longer data is staged; FIN/CLOSE set eof. *got: something was
 * taken. Receive errors set c->error. */
static size_t conn_poll_msg(struct conn *c, void *buf, size_t cap, int *got)
{
	pn_port_status_t st;
	struct chunk *k;
	int r;

	*got = 0;
	r = pn_port_recv(G.port, (int)c->peer_node, (int)c->peer_ctx, c->chan, c->id, SK_LOW_MASK, buf, cap, &st, 0);
	if (r == -ETIMEDOUT)
		return 0;
	if (r == -EMSGSIZE) {
		if (!(k = malloc(sizeof(*k) + st.len))) {
			c->error = ENOMEM;
			return 0;
		}
		r = pn_port_recv(G.port, (int)c->peer_node, (int)c->peer_ctx, c->chan, c->id, SK_LOW_MASK, k->data,
				 st.len, &st, 0);
		if (r < 0) {
			free(k);
			if (r != -ETIMEDOUT)
				c->error = map_err(r);
			return 0;
		}
		*got = 1;
		k->len = (size_t)r;
		k->off = 0;
		k->next = NULL;
		if (c->stl)
			c->stl->next = k;
		else
			c->sh = k;
		c->stl = k;
		c->sbytes += k->len;
		return 0;
	}
	if (r < 0) {
		c->error = map_err(r);
		return 0;
	}
	*got = 1;
	switch (SK_TAG_KIND(st.tag)) {
	case SK_T_DATA:
		return (size_t)r;
	case SK_T_CLOSE:
		c->peer_closed = c->got_close = 1;
		/* fall through */
	case SK_T_FIN:
		c->eof = 1;
		break;
	}
	return 0;
}

static int conn_probe(struct conn *c, pn_port_status_t *st)
{
	return pn_port_probe(G.port, (int)c->peer_node, (int)c->peer_ctx, c->chan, c->id, SK_LOW_MASK, st);
}

static int conn_peer_closed(struct conn *c)
{
	if (!c->peer_closed && pn_port_probe(G.port, (int)c->peer_node, (int)c->peer_ctx, c->chan,
					     SK_TAG(SK_T_CLOSE, c->id), SK_ALL_MASK, NULL) == 1)
		c->peer_closed = 1;
	return c->peer_closed;
}

/* Send REQ to the process whose port listens on (node, rport): the node's directory
 * names its context. Nobody there: -ECONNREFUSED. */
static int connect_send(struct conn *c)
{
	unsigned ctx;
	int r;
	if (sk_dir_lookup(c->peer_node, SK_PROTO_TCP, c->rport, &ctx, NULL) < 0)
		return -ECONNREFUSED;
	if (c->ack_req && ctx != c->peer_ctx && pn_port_cancel(G.port, &c->ack_req) < 0)
		return -EBUSY;
	c->peer_ctx = ctx;
	r = pn_port_isend(G.port, c->peer_node, c->peer_ctx, SK_CHAN_CTL, SK_TAG(SK_T_REQ, c->rport), &c->req,
			      sizeof(c->req), &c->req_send);
	if (r < 0)
		return r;
	if (!c->ack_req)
		r = pn_port_irecv(G.port, (int)c->peer_node, (int)c->peer_ctx, SK_CHAN_CTL, SK_TAG(SK_T_ACK, c->req_id),
				  SK_ALL_MASK, &c->ack, sizeof(c->ack), &c->ack_req);
	return r;
}

static void conn_fail(struct conn *c, int err)
{
	if (c->ack_req)
		pn_port_cancel(G.port, &c->ack_req);   /* if matched, it completes and is collected later */
	c->state = CS_FAILED;
	c->error = err;
	if (c->sk)
		c->sk->so_error = err;
}

static void conn_send_close(struct conn *c)
{
	if (c->state == CS_OPEN && !c->error && G.port)
		conn_isend(c, SK_T_CLOSE, NULL, 0, NULL);
}

/* The REQ's send: a port that never answered (no process there yet) refuses. */
static void ctl_reap(struct conn *c, uint64_t now)
{
	if (c->req_send && G.port) {
		int r = pn_port_test(G.port, &c->req_send, NULL);
		if (r < 0 && c->state == CS_CONNECTING) {
			if (r == -ECONNREFUSED && !c->closed && now - c->t0 < G.connect_wait_ns)
				c->retry_at = now + SK_RETRY_NS;
			else
				conn_fail(c, map_err(r));
		}
	}
}

static void connect_progress(struct conn *c, uint64_t now)
{
	pn_port_status_t st;
	int r;

	ctl_reap(c, now);
	if (c->ack_req) {
		r = pn_port_test(G.port, &c->ack_req, &st);
		if (r == 1 && c->state == CS_CONNECTING) {
			if (c->ack.magic != SK_WIRE_MAGIC) {
				conn_fail(c, EPROTO);
			} else if (c->ack.status == 0) {
				conn_opened(c, c->ack.conn, c->ack.pid, c->ack.boot, now);
				if (c->closed)
					conn_send_close(c);
			} else if (c->ack.status == ECONNREFUSED && !c->closed && now - c->t0 < G.connect_wait_ns) {
				c->retry_at = now + SK_RETRY_NS;   /* PARANIC_SOCK_CONNECT_WAIT_MS: try again */
			} else {
				conn_fail(c, c->ack.status > 0 ? c->ack.status : ECONNREFUSED);
			}
		} else if (r < 0 && c->state == CS_CONNECTING) {
			conn_fail(c, map_err(r));
		}
	}
	if (c->state != CS_CONNECTING)
		return;
	if (c->retry_at) {
		if (c->closed) {
			conn_fail(c, ECONNREFUSED);
			return;
		}
		if (now >= c->retry_at && !c->req_send) {
			c->retry_at = 0;
			if ((r = connect_send(c)) == -ECONNREFUSED && now - c->t0 < G.connect_wait_ns) {
				c->retry_at = now + SK_RETRY_NS;
			} else if (r < 0) {
				conn_fail(c, r == -EBUSY ? ECONNREFUSED : map_err(r));
				return;
			}
		}
	}
	if (now - c->t0 >= G.connect_timeout_ns)
		conn_fail(c, ETIMEDOUT);
}

int sk_connect(struct sock *s, uint32_t addr, uint16_t port, int node)
{
	struct conn *c;
	int r;

	if (!sk_port())
		return -ENETUNREACH;
	if (!(c = conn_new()))
		return -ENOBUFS;
	c->peer_node = (unsigned)node;
	c->raddr = addr;
	c->rport = port;
	c->laddr = G.my_addr;
	c->lport = s->lport ? s->lport : sk_ephemeral_port();
	c->req_id = ++G.next_req;
	c->req.magic = SK_WIRE_MAGIC;
	c->req.version = SK_WIRE_VERSION;
	c->req.req_id = c->req_id;
	c->req.conn = c->id;
	c->req.src_addr = c->laddr;
	c->req.dst_addr = addr;
	c->req.src_port = c->lport;
	c->req.dst_port = port;
	c->req.pid = (int32_t)getpid();
	memcpy(c->req.boot, G.boot, sizeof(G.boot));
	c->t0 = pn_monotonic_ns();
	c->state = CS_CONNECTING;
	s->type = SK_CONN;
	s->c = c;
	s->laddr = c->laddr;
	s->lport = c->lport;
	s->os = 0;
	c->sk = s;
	if ((r = connect_send(c)) == -ECONNREFUSED && G.connect_wait_ns)
		c->retry_at = c->t0 + SK_RETRY_NS;   /* PARANIC_SOCK_CONNECT_WAIT_MS: nobody there yet */
	else if (r < 0)
		conn_fail(c, map_err(r));
	return 0;
}

int sk_connect_wait(struct sock *s)
{
	struct conn *c = s->c;
	struct pn_backoff b = {0};
	while (c->state == CS_CONNECTING && G.port) {
		sk_service(0);
		connect_progress(c, pn_monotonic_ns());
		if (c->state != CS_CONNECTING)
			break;
		sk_pause(&b);
	}
	if (c->state == CS_OPEN)
		return 0;
	s->so_error = 0;
	return -(c->error ? c->error : ENOTSUP);
}

int sk_listen(struct sock *s)
{
	if (!sk_port())
		return -ENETDOWN;
	if (s->type == SK_LISTEN)
		return 0;
	if (sk_listener_for(s->lport, s->os ? 0 : s->laddr))
		return -EADDRINUSE;
	if (s->os)
		s->laddr = 0;   /* the wildcard: every address of this node */
	s->type = SK_LISTEN;
	s->lnext = G.listeners;
	G.listeners = s;
	return 0;
}

static void handle_req(unsigned node, unsigned ctx, const struct sk_req *rq, uint64_t now)
{
	struct sk_ack *ack = calloc(1, sizeof(*ack));
	struct sock *l;
	struct conn *c = NULL;

	if (!ack)
		return;
	ack->magic = SK_WIRE_MAGIC;
	ack->req_id = rq->req_id;
	ack->pid = (int32_t)getpid();
	memcpy(ack->boot, G.boot, sizeof(G.boot));
	l = sk_listener_for(rq->dst_port, rq->dst_addr);
	if (!l || rq->dst_addr != G.my_addr)
		ack->status = ECONNREFUSED;
	else if (!(c = conn_new()))
		ack->status = ENOBUFS;
	if (c) {
		c->peer_node = node;
		c->peer_ctx = ctx;
		c->laddr = G.my_addr;
		c->lport = rq->dst_port;
		c->raddr = rq->src_addr;
		c->rport = rq->src_port;
		conn_opened(c, rq->conn, rq->pid, rq->boot, now);
		if (l->qt)
			l->qt->qnext = c;
		else
			l->qh = c;
		l->qt = c;
		ack->conn = c->id;
	}
	if (G.debug > 1)
		warn("REQ from node %u ctx %u for port %u: %s", node, ctx, rq->dst_port, c ? "accepted" : "refused");
	detached_send(node, ctx, SK_CHAN_CTL, SK_TAG(SK_T_ACK, rq->req_id), ack, sizeof(*ack));
}

static int conn_done(const struct conn *c)
{
	return c->closed && (c->state == CS_FAILED || c->got_close || c->error) && !c->ph && !c->req_send && !c->ack_req;
}

/* A closed connection: finish its sends, discard what still comes until the peer's
 * FIN/CLOSE, then free it. */
static void zombie_progress(struct conn *c, uint64_t now)
{
	conn_reap(c);
	ctl_reap(c, now);
	if (c->state == CS_CONNECTING)
		connect_progress(c, now);
	if (c->state == CS_OPEN && !c->got_close && !c->error) {
		for (int i = 0; i < 64 && !c->got_close && !c->error; i++) {
			int got;
			conn_poll_msg(c, NULL, 0, &got);
			stage_free(c);
			if (!got)
				break;
		}
	}
	sk_pid_check(c, now);
	if (c->error && c->ph)
		conn_cancel_sends(c);
	if (c->ack_req && c->state == CS_FAILED)
		pn_port_test(G.port, &c->ack_req, NULL);
	if (conn_done(c))
		conn_free(c);
}

/* The program closed c (or never accepted it). */
static void conn_close(struct conn *c)
{
	c->sk = NULL;
	c->closed = 1;
	stage_free(c);
	if (!G.port) {   /* after fork or exit: nothing to tell */
		conn_free(c);
		return;
	}
	if (c->state == CS_OPEN && !c->error)
		conn_send_close(c);
	zombie_progress(c, pn_monotonic_ns());
}

void sk_service(int force)
{
	uint64_t now;
	if (!G.port)
		return;
	now = pn_monotonic_ns();
	if (!force && now - G.last_service < SK_SERVICE_NS)
		return;
	G.last_service = now;
	for (int i = 0; i < 256; i++) {
		struct sk_req rq;
		pn_port_status_t st;
		int r = pn_port_recv(G.port, PN_PORT_ANY, PN_PORT_ANY, SK_CHAN_CTL, SK_TAG(SK_T_REQ, 0), SK_KIND_MASK, &rq,
				     sizeof(rq), &st, 0);
		if (r == -EMSGSIZE) {   /* not ours: take it out of the way */
			void *junk = malloc(st.len);
			if (junk)
				pn_port_recv(G.port, st.src_node, st.src_ctx, SK_CHAN_CTL, st.tag, SK_ALL_MASK, junk, st.len,
					     NULL, 0);
			free(junk);
			continue;
		}
		if (r < 0)
			break;
		if ((size_t)r != sizeof(rq) || rq.magic != SK_WIRE_MAGIC || rq.version != SK_WIRE_VERSION)
			continue;
		handle_req((unsigned)st.src_node, (unsigned)st.src_ctx, &rq, now);
	}
	/* An ACK nobody waits for (its connect gave up): out of the way. Every connect posts
	 * its receive before its REQ can be answered, so a waiting ACK is a stray. */
	for (int i = 0; i < 64; i++) {
		struct sk_ack ack;
		if (pn_port_recv(G.port, PN_PORT_ANY, PN_PORT_ANY, SK_CHAN_CTL, SK_TAG(SK_T_ACK, 0), SK_KIND_MASK, &ack,
				 sizeof(ack), NULL, 0) == -ETIMEDOUT)
			break;
	}
	if (G.dh)
		detached_reap();
	sk_udp_pull();
	if (G.uh)
		sk_udp_reap();
	for (struct conn *c = G.conns, *nx; c; c = nx) {
		nx = c->next;
		if (c->closed) {
			zombie_progress(c, now);
			continue;
		}
		if (c->state == CS_CONNECTING || c->req_send || c->ack_req)
			connect_progress(c, now);
		sk_pid_check(c, now);
	}
}

/* ---- accept ------------------------------------------------------------------------------------ */

int sk_accept(struct sock *s, int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
	struct pn_backoff b = {0};
	int nb;

	for (;;) {
		sk_service(1);   /* answers connection requests: what accept waits for */
		if (s->qh) {
			struct conn *c = s->qh;
			struct sock *ns;
			int e = eventfd(0, EFD_NONBLOCK | ((flags & SOCK_CLOEXEC) ? EFD_CLOEXEC : 0));
			if (e < 0)
				return -errno;
			if (e >= SK_MAX_FD || !(ns = sk_new(SK_CONN, s->family))) {
				REAL(close)(e);
				return -EMFILE;
			}
			s->qh = c->qnext;
			if (!s->qh)
				s->qt = NULL;
			c->qnext = NULL;
			ns->nonblock = !!(flags & SOCK_NONBLOCK);
			ns->laddr = c->laddr;
			ns->lport = c->lport;
			ns->sndbuf = s->sndbuf;
			ns->rcvbuf = s->rcvbuf;
			ns->c = c;
			c->sk = ns;
			sk_set_fd(e, ns);
			sk_fill_addr(s->family, c->raddr, c->rport, sa, len);
			return e;
		}
		if (s->os) {
			int fl = REAL(fcntl)(fd, F_GETFL);
			struct pollfd p = {.fd = fd, .events = POLLIN};
			nb = fl >= 0 && (fl & O_NONBLOCK);
			if (nb || REAL(poll)(&p, 1, 0) > 0) {
				int r = REAL(accept4)(fd, sa, len, flags);
				if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
					return r < 0 ? -errno : r;
			}
		} else {
			nb = s->nonblock;
		}
		if (nb)
			return -EAGAIN;
		if (!G.port)
			return -EINVAL;
		sk_pause(&b);
	}
}

/* ---- write ---------------------------------------------------------------------------------- */

/* A blocked write lets data of other connections in (into staged copies, up to the
 * receive buffer), so that two programs writing to each other before reading never
 * wait for each other's reads (what the kernel's socket buffers do). */
static void drain_incoming(void)
{
	for (struct conn *c = G.conns; c; c = c->next) {
		int got;
		if (!c->sk || c->closed || c->state != CS_OPEN || c->reading || c->eof || c->error ||
		    c->sbytes >= G.rcvbuf)
			continue;
		conn_poll_msg(c, NULL, 0, &got);
	}
}

static int wait_open(struct sock *s, int nb)
{
	struct conn *c = s->c;
	if (c->state == CS_CONNECTING) {
		if (nb) {
			connect_progress(c, pn_monotonic_ns());
			if (c->state == CS_CONNECTING)
				return -EAGAIN;
		}
		return sk_connect_wait(s);
	}
	if (c->state == CS_FAILED)
		return -(c->error ? c->error : ENOTCONN);
	return 0;
}

ssize_t sk_write(struct sock *s, const void *buf, size_t len, int flags, int *sigpipe)
{
	struct conn *c;
	int nb = s->nonblock || (flags & MSG_DONTWAIT), r;
	size_t off, piece;

	if (s->type != SK_CONN)
		return -ENOTCONN;
	if (!G.port)
		return -ENOTSUP;
	c = s->c;
	if ((r = wait_open(s, nb)) < 0)
		return r;
	conn_reap(c);
	if (c->wr_shut || conn_peer_closed(c)) {
		if (!(flags & MSG_NOSIGNAL))
			*sigpipe = 1;
		return -EPIPE;
	}
	if (c->error)
		return -c->error;
	if (!len)
		return 0;
	if (nb) {
		size_t room = G.sndbuf > c->pbytes ? G.sndbuf - c->pbytes : 0, n;
		if (!room) {
			sk_service(0);
			conn_reap(c);
			room = G.sndbuf > c->pbytes ? G.sndbuf - c->pbytes : 0;
			if (!room)
				return -EAGAIN;
		}
		n = len < room ? len : room;
		for (off = 0; off < n; off += piece) {
			void *own;
			piece = n - off < SK_MSG_MAX ? n - off : SK_MSG_MAX;
			if (!(own = malloc(piece)))
				return off ? (ssize_t)off : -ENOBUFS;
			memcpy(own, (const uint8_t *)buf + off, piece);
			if ((r = conn_isend(c, SK_T_DATA, own, piece, own)) < 0)
				return off ? (ssize_t)off : -map_err(r);
		}
		conn_reap(c);
		return (ssize_t)n;
	}
	/* blocking: from the program's buffer, returning when the peer has all of it */
	for (off = 0; off < len; off += piece) {
		piece = len - off < SK_MSG_MAX ? len - off : SK_MSG_MAX;
		if ((r = conn_isend(c, SK_T_DATA, (const uint8_t *)buf + off, piece, NULL)) < 0) {
			if (!off)
				return -map_err(r);
			len = off;   /* what was posted goes; report that */
			break;
		}
	}
	{
		struct pn_backoff b = {0};
		uint64_t t0 = pn_monotonic_ns();
		for (;;) {
			uint64_t now;
			conn_reap(c);
			if (!c->ph)
				break;
			if (c->error)
				conn_cancel_sends(c);
			if (!c->ph)
				break;
			sk_service(0);
			now = pn_monotonic_ns();
			sk_pid_check(c, now);
			if (now - t0 > SK_DRAIN_AFTER_NS)
				drain_incoming();
			sk_pause(&b);
			if (!G.port)   /* the process is exiting under us: ports freed the requests */
				return -ENOTSUP;
		}
	}
	if (c->error) {
		if (c->peer_closed || conn_peer_closed(c)) {
			if (!(flags & MSG_NOSIGNAL))
				*sigpipe = 1;
			return -EPIPE;
		}
		return -c->error;
	}
	return (ssize_t)len;
}

ssize_t sk_writev(struct sock *s, const struct iovec *iov, int n, int flags, int *sigpipe)
{
	size_t total = 0, done = 0;
	if (n < 0 || n > IOV_MAX)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		if (iov[i].iov_len > SSIZE_MAX - total)
			return -EINVAL;
		total += iov[i].iov_len;
	}
	if (total <= 65536) {
		uint8_t *g = malloc(total ? total : 1);
		ssize_t r;
		if (!g)
			return -ENOBUFS;
		for (int i = 0; i < n; i++) {
			if (iov[i].iov_len)
				memcpy(g + done, iov[i].iov_base, iov[i].iov_len);
			done += iov[i].iov_len;
		}
		r = sk_write(s, g, total, flags, sigpipe);
		free(g);
		return r;
	}
	for (int i = 0; i < n; i++) {
		ssize_t r;
		if (!iov[i].iov_len)
			continue;
		r = sk_write(s, iov[i].iov_base, iov[i].iov_len, flags, sigpipe);
		if (r < 0)
			return done ? (ssize_t)done : r;
		done += (size_t)r;
		if ((size_t)r < iov[i].iov_len)
			break;
	}
	return (ssize_t)done;
}

/* ---- read ----------------------------------------------------------------------------------- */

static size_t stage_copy(struct conn *c, uint8_t *dst, size_t len, int peek)
{
	size_t n = 0;
	for (struct chunk *k = c->sh; k && n < len;) {
		size_t m = k->len - k->off;
		if (m > len - n)
			m = len - n;
		memcpy(dst + n, k->data + k->off, m);
		n += m;
		if (peek) {
			k = k->next;
			continue;
		}
		k->off += m;
		c->sbytes -= m;
		if (k->off == k->len) {
			c->sh = k->next;
			if (!c->sh)
				c->stl = NULL;
			free(k);
			k = c->sh;
		}
	}
	return n;
}

/* Wait for the next message with a receive posted into the program's buffer (one copy
 * from the NIC's ring). Returns the bytes placed there; FIN/CLOSE set eof; a message
 * longer than cap stays queued (the caller stages it). */
static size_t read_posted(struct conn *c, uint8_t *buf, size_t cap)
{
	pn_port_req_t *rq;
	pn_port_status_t st;
	struct pn_backoff b = {0};
	int r = pn_port_irecv(G.port, (int)c->peer_node, (int)c->peer_ctx, c->chan, c->id, SK_LOW_MASK, buf, cap, &rq);
	if (r < 0) {
		c->error = map_err(r);
		return 0;
	}
	c->reading = 1;
	for (;;) {
		r = pn_port_test(G.port, &rq, &st);
		if (r == 1) {
			c->reading = 0;
			switch (SK_TAG_KIND(st.tag)) {
			case SK_T_DATA:
				return st.len;
			case SK_T_CLOSE:
				c->peer_closed = c->got_close = 1;
				/* fall through */
			case SK_T_FIN:
				c->eof = 1;
			}
			return 0;
		}
		if (r < 0) {
			c->reading = 0;
			if (r != -EMSGSIZE)
				c->error = map_err(r);
			return 0;
		}
		sk_service(0);
		sk_pid_check(c, pn_monotonic_ns());
		if (c->error && pn_port_cancel(G.port, &rq) == 0) {
			c->reading = 0;
			return 0;
		}
		sk_pause(&b);
		if (!G.port) {   /* the process is exiting under us */
			c->reading = 0;
			return 0;
		}
	}
}

ssize_t sk_read(struct sock *s, void *buf, size_t len, int flags)
{
	struct conn *c;
	int peek = !!(flags & MSG_PEEK), waitall = (flags & MSG_WAITALL) && !peek;
	int nb = s->nonblock || (flags & MSG_DONTWAIT), r;
	uint8_t *dst = buf;
	size_t total = 0;
	struct pn_backoff b = {0};

	if (s->type != SK_CONN)
		return -ENOTCONN;
	if (!G.port)
		return -ENOTSUP;
	c = s->c;
	if ((r = wait_open(s, nb)) < 0)
		return r;
	if (c->rd_shut || !len)
		return 0;
	for (;;) {
		int got;
		size_t n;
		if (c->sbytes) {
			total += stage_copy(c, dst + total, len - total, peek);
			if (peek || total == len || !waitall)
				return (ssize_t)total;
		}
		if (c->eof)
			return (ssize_t)total;
		n = conn_poll_msg(c, peek ? NULL : dst + total, peek ? 0 : len - total, &got);
		if (got) {
			total += n;
			if (total && (total == len || !waitall))
				return (ssize_t)total;
			pn_backoff_reset(&b);
			continue;
		}
		if (c->error)
			return total ? (ssize_t)total : -c->error;
		if (nb)
			return total ? (ssize_t)total : -EAGAIN;
		if (!peek && !c->reading) {
			n = read_posted(c, dst + total, len - total);
			total += n;
			if (total && (total == len || !waitall))
				return (ssize_t)total;
			if (!G.port)
				return total ? (ssize_t)total : -ENOTSUP;
			continue;
		}
		sk_service(0);
		sk_pid_check(c, pn_monotonic_ns());
		sk_pause(&b);
		if (!G.port)
			return total ? (ssize_t)total : -ENOTSUP;
	}
}

ssize_t sk_readv(struct sock *s, const struct iovec *iov, int n, int flags)
{
	size_t done = 0;
	if (n < 0 || n > IOV_MAX)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		ssize_t r;
		if (!iov[i].iov_len)
			continue;
		r = sk_read(s, iov[i].iov_base, iov[i].iov_len, flags);
		if (r < 0)
			return done ? (ssize_t)done : r;
		done += (size_t)r;
		if ((size_t)r < iov[i].iov_len || (flags & MSG_PEEK))
			break;
		if (!(flags & MSG_WAITALL))
			flags |= MSG_DONTWAIT;   /* the rest only if it is there already */
	}
	return (ssize_t)done;
}

size_t sk_available(struct sock *s)
{
	pn_port_status_t st;
	size_t n;
	if (s->type != SK_CONN || !G.port || s->c->state != CS_OPEN)
		return 0;
	n = s->c->sbytes;
	if (conn_probe(s->c, &st) == 1 && SK_TAG_KIND(st.tag) == SK_T_DATA)
		n += st.len;
	return n;
}

int sk_shutdown(struct sock *s, int how)
{
	struct conn *c;
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return -EINVAL;
	if (s->type != SK_CONN || s->c->state != CS_OPEN)
		return -ENOTCONN;
	if (!G.port)
		return -ENOTSUP;
	c = s->c;
	if (how != SHUT_WR)
		c->rd_shut = 1;
	if (how != SHUT_RD && !c->wr_shut) {
		c->wr_shut = 1;
		if (!c->error)
			conn_isend(c, SK_T_FIN, NULL, 0, NULL);
	}
	return 0;
}

short sk_readiness(struct sock *s, short events)
{
	short rev = 0;
	struct conn *c;
	pn_port_status_t st;

	if (s->stale)
		return POLLERR | POLLHUP;
	switch (s->type) {
	case SK_UDP:
		return sk_udp_readiness(s, events);
	case SK_LISTEN:
		return s->qh ? (short)(events & (POLLIN | POLLRDNORM)) : 0;
	case SK_BOUND:
		return (short)(POLLHUP | (events & POLLOUT));
	case SK_CONN:
		break;
	default:
		return 0;
	}
	if (!G.port)
		return POLLERR | POLLHUP;
	c = s->c;
	if (c->state == CS_CONNECTING)
		connect_progress(c, pn_monotonic_ns());
	if (c->state == CS_CONNECTING)
		return 0;
	if (c->state == CS_FAILED)
		return (short)(POLLERR | POLLHUP | (events & (POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM)));
	conn_reap(c);
	if (events & (POLLIN | POLLRDNORM | POLLRDHUP)) {
		int readable = c->sbytes || c->eof || c->rd_shut || c->error;
		if (!readable && !c->reading && conn_probe(c, &st) == 1) {
			readable = 1;
			if (SK_TAG_KIND(st.tag) != SK_T_DATA)
				rev |= (short)(events & POLLRDHUP);
		}
		if (readable)
			rev |= (short)(events & (POLLIN | POLLRDNORM));
		if (c->eof)
			rev |= (short)(events & POLLRDHUP);
	}
	if ((events & (POLLOUT | POLLWRNORM)) && (c->error || c->wr_shut || c->peer_closed || c->pbytes < G.sndbuf))
		rev |= (short)(events & (POLLOUT | POLLWRNORM));
	if (c->error)
		rev |= POLLERR | POLLHUP;
	else if (c->eof && (c->wr_shut || c->peer_closed))
		rev |= POLLHUP;
	return rev;
}

/* ---- close, exit ---------------------------------------------------------------------------- */

void sk_destroy(struct sock *s)
{
	if (s->stale) {   /* the parent's: nothing of it is ours */
		free(s);
		return;
	}
	if (s->dir && s->type != SK_UDP)
		sk_dir_del(s->dir, s->lport);
	switch (s->type) {
	case SK_UDP:
		sk_udp_destroy(s);
		break;
	case SK_LISTEN:
		for (struct sock **pp = &G.listeners; *pp; pp = &(*pp)->lnext)
			if (*pp == s) {
				*pp = s->lnext;
				break;
			}
		while (s->qh) {
			struct conn *c = s->qh;
			s->qh = c->qnext;
			conn_close(c);
		}
		break;
	case SK_CONN:
		if (s->c)
			conn_close(s->c);
		break;
	}
	free(s);
}

/* At exit: tell every peer (CLOSE after the data), let the sends in flight finish (at
 * most PARANIC_SOCK_LINGER_MS), close the port. */
static void sk_fini(void)
{
	struct pn_backoff b = {0};
	uint64_t t0;

	/* sk_in still set: this thread left the library by longjmp from a signal handler
	 * (iperf3 does on SIGINT) and holds the lock; another thread may hold it for ever
	 * for the same reason: then give up after a second rather than hang the exit. */
	if (!sk_in) {
		t0 = pn_monotonic_ns();
		while (pthread_mutex_trylock(&G.lock) != 0) {
			if (pn_monotonic_ns() - t0 > 1000000000ull)
				return;
			pn_backoff_step(&b);
		}
		sk_in = 1;
	}
	if (G.dir_used)
		sk_dir_fini();
	if (!G.port) {
		G.finished = 1;
		sk_leave();
		return;
	}
	for (struct conn *c = G.conns; c; c = c->next)
		if (!c->closed && c->state == CS_OPEN && !c->error) {
			conn_send_close(c);
			c->wr_shut = 1;
		}
	t0 = pn_monotonic_ns();
	G.finished = 1;   /* no new port; peers' pids checked every millisecond */
	for (;;) {
		int pending = G.dh != NULL || G.uh != NULL;
		uint64_t now = pn_monotonic_ns();
		sk_service(1);
		for (struct conn *c = G.conns; c; c = c->next) {
			sk_pid_check(c, now);   /* a peer that has exited takes nothing more */
			conn_reap(c);
			if (c->error && c->ph)
				conn_cancel_sends(c);
			pending |= c->ph != NULL;
		}
		if (!pending || pn_monotonic_ns() - t0 >= G.linger_ns)
			break;
		sk_pause(&b);
	}
	G.finished = 1;
	if (G.debug) {
		unsigned open_ = 0, zombies = 0;
		for (struct conn *c = G.conns; c; c = c->next)
			c->closed ? zombies++ : open_++;
		warn("exit: %u connections open, %u closed ones still draining; counters: tcp_opened %llu tcp_remote %llu "
		     "udp_sent %llu udp_recv %llu udp_taken %llu", open_, zombies,
		     (unsigned long long)G.stat[SK_ST_TCP_OPENED], (unsigned long long)G.stat[SK_ST_TCP_REMOTE],
		     (unsigned long long)G.stat[SK_ST_UDP_SENT], (unsigned long long)G.stat[SK_ST_UDP_RECV],
		     (unsigned long long)G.stat[SK_ST_UDP_TAKEN]);
	}
	__atomic_store_n(&G.n_ifd, 0, __ATOMIC_RELEASE);
	pn_port_close(G.port);
	G.port = NULL;
	sk_leave();
}
