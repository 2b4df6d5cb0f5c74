/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: host names of the cluster's nodes (docs/sockets.md, docs/pvm.md).
 *
 * All nodes of a job on sw or sim live on one machine, but programs such as PVM's pvmd
 * find their own address as gethostbyname(gethostname()) and name their peers by host
 * name. In a process of a job (PARANIC_NODE, PARANIC_NODES set) this file gives node N
 * the host name <prefix><N> (PARANIC_SOCK_HOSTNAME, default "pn-node") and makes
 * <prefix><M> resolve to node M's cluster address (sock_wire.h: PARANIC_SOCK_NET, node M
 * is base + M + 1), and that address back to the name. Interposed: gethostname, uname
 * (nodename), gethostbyname, gethostbyname2, gethostbyname_r, gethostbyname2_r,
 * gethostbyaddr, gethostbyaddr_r, getaddrinfo, getnameinfo. Any other name or address
 * goes to libc. The names do not depend on PARANIC_SOCK (a job may run over the OS's
 * sockets with PARANIC_SOCK=0 and PARANIC_SOCK_NET=127.0.0.0/24 and keep its names).
 */
#include "sock_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dlfcn.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#define NM_DEFAULT_PREFIX "pn-node"
#define NM_PREFIX_MAX 48

static struct {
	int active;
	unsigned node, nodes;
	struct sk_net net;
	char prefix[NM_PREFIX_MAX + 1];
	size_t plen;
	int (*uname)(struct utsname *);
	struct hostent *(*gethostbyname)(const char *);
	struct hostent *(*gethostbyname2)(const char *, int);
	int (*gethostbyname_r)(const char *, struct hostent *, char *, size_t, struct hostent **, int *);
	int (*gethostbyname2_r)(const char *, int, struct hostent *, char *, size_t, struct hostent **, int *);
	struct hostent *(*gethostbyaddr)(const void *, socklen_t, int);
	int (*gethostbyaddr_r)(const void *, socklen_t, int, struct hostent *, char *, size_t, struct hostent **,
			       int *);
	int (*getaddrinfo)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
	int (*getnameinfo)(const struct sockaddr *, socklen_t, char *, socklen_t, char *, socklen_t, int);
} N;
static pthread_once_t nm_once = PTHREAD_ONCE_INIT;

static int env_uint(const char *name, unsigned long lo, unsigned long hi, unsigned *out)
{
	const char *s = getenv(name);
	char *end;
	unsigned long v;
	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = (unsigned)v;
	return 0;
}

static void nm_init(void)
{
	const char *p = getenv("PARANIC_SOCK_HOSTNAME"), *net = getenv("PARANIC_SOCK_NET");

#define R(f) (*(void **)&N.f = dlsym(RTLD_NEXT, #f))
	R(uname); R(gethostbyname); R(gethostbyname2); R(gethostbyname_r); R(gethostbyname2_r);
	R(gethostbyaddr); R(gethostbyaddr_r); R(getaddrinfo); R(getnameinfo);
#undef R
	if (env_uint("PARANIC_NODES", 1, PN_MAX_NODES, &N.nodes) < 0 ||
	    env_uint("PARANIC_NODE", 0, N.nodes - 1, &N.node) < 0)
		return;   /* not a process of a job */
	if (sk_net_parse(net && *net ? net : SK_DEFAULT_NET, &N.net) < 0 || N.nodes > sk_net_capacity(&N.net))
		return;   /* sock_config.c says so on stderr */
	if (!p)
		p = NM_DEFAULT_PREFIX;
	N.plen = strlen(p);
	if (!N.plen || N.plen > NM_PREFIX_MAX)
		return;   /* empty: names off; too long: not a host name */
	for (size_t i = 0; i < N.plen; i++)
		if (!isalnum((unsigned char)p[i]) && p[i] != '-' && p[i] != '.')
			return;
	memcpy(N.prefix, p, N.plen + 1);
	N.active = 1;
}

static int nm_on(void)
{
	pthread_once(&nm_once, nm_init);
	return N.active;
}

/* The node a host name names (<prefix><M>, case-insensitive, one trailing dot allowed), or -1. */
static int name_node(const char *name)
{
	const char *d;
	char *end;
	unsigned long m;
	if (!name || strncasecmp(name, N.prefix, N.plen))
		return -1;
	d = name + N.plen;
	if (!isdigit((unsigned char)d[0]) || (d[0] == '0' && isdigit((unsigned char)d[1])))
		return -1;
	m = strtoul(d, &end, 10);
	if (*end == '.')
		end++;
	return *end || m >= N.nodes ? -1 : (int)m;
}

static int node_name(unsigned node, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s%u", N.prefix, node);
	return n < 0 || (size_t)n >= len ? -1 : n;
}

/* The node of an IPv4 address (network order) or an IPv4-mapped IPv6 address, or -1. */
static int addr_node(const void *addr, socklen_t len, int type)
{
	uint32_t a;
	if (type == AF_INET && len == 4)
		memcpy(&a, addr, 4);
	else if (type == AF_INET6 && len == 16 && IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)addr))
		memcpy(&a, (const uint8_t *)addr + 12, 4);
	else
		return -1;
	return sk_addr_node(&N.net, ntohl(a), N.nodes);
}

/* ---- host name -------------------------------------------------------------------------------- */

SK_EXPORT int uname(struct utsname *u)
{
	int r;
	nm_on();
	if (!N.uname) {
		errno = ENOSYS;
		return -1;
	}
	r = N.uname(u);
	if (r == 0 && N.active)
		node_name(N.node, u->nodename, sizeof(u->nodename));
	return r;
}

SK_EXPORT int gethostname(char *name, size_t len)
{
	char buf[NM_PREFIX_MAX + 16];
	struct utsname u;
	int n;
	if (!nm_on()) {
		if (uname(&u) < 0)
			return -1;
		n = (int)strlen(u.nodename);
		if ((size_t)n + 1 > len) {
			errno = ENAMETOOLONG;
			return -1;
		}
		memcpy(name, u.nodename, (size_t)n + 1);
		return 0;
	}
	n = node_name(N.node, buf, sizeof(buf));
	if (n < 0 || (size_t)n + 1 > len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(name, buf, (size_t)n + 1);
	return 0;
}

/* ---- hostent ---------------------------------------------------------------------------------- */

/* Lay out node's hostent in buf: h_name, no aliases, one IPv4 address. 0 or ERANGE. */
static int fill_hostent(unsigned node, struct hostent *h, char *buf, size_t buflen)
{
	struct layout {
		char *aliases[1];
		char *addrs[2];
		uint32_t addr;
		char name[NM_PREFIX_MAX + 16];
	};
	uintptr_t p = ((uintptr_t)buf + 7u) & ~(uintptr_t)7u;
	struct layout *l = (struct layout *)p;
	if (buflen < sizeof(*l) + (p - (uintptr_t)buf))
		return ERANGE;
	l->aliases[0] = NULL;
	l->addr = htonl(sk_node_addr(&N.net, node));
	l->addrs[0] = (char *)&l->addr;
	l->addrs[1] = NULL;
	node_name(node, l->name, sizeof(l->name));
	h->h_name = l->name;
	h->h_aliases = l->aliases;
	h->h_addrtype = AF_INET;
	h->h_length = 4;
	h->h_addr_list = l->addrs;
	return 0;
}

static __thread struct hostent nm_host;
static __thread char nm_hostbuf[160];

static struct hostent *static_host(unsigned node)
{
	if (fill_hostent(node, &nm_host, nm_hostbuf, sizeof(nm_hostbuf)))
		return NULL;
	h_errno = NETDB_SUCCESS;
	return &nm_host;
}

static int host_r(unsigned node, struct hostent *ret, char *buf, size_t buflen, struct hostent **result,
		  int *h_errnop)
{
	int e = fill_hostent(node, ret, buf, buflen);
	*result = e ? NULL : ret;
	if (h_errnop)
		*h_errnop = e ? NETDB_INTERNAL : NETDB_SUCCESS;
	if (e)
		errno = e;
	return e;
}

SK_EXPORT struct hostent *gethostbyname(const char *name)
{
	int m = nm_on() ? name_node(name) : -1;
	if (m >= 0)
		return static_host((unsigned)m);
	return N.gethostbyname ? N.gethostbyname(name) : NULL;
}

SK_EXPORT struct hostent *gethostbyname2(const char *name, int af)
{
	int m = nm_on() && af == AF_INET ? name_node(name) : -1;
	if (m >= 0)
		return static_host((unsigned)m);
	return N.gethostbyname2 ? N.gethostbyname2(name, af) : NULL;
}

SK_EXPORT int gethostbyname_r(const char *name, struct hostent *ret, char *buf, size_t buflen,
			      struct hostent **result, int *h_errnop)
{
	int m = nm_on() ? name_node(name) : -1;
	if (m >= 0)
		return host_r((unsigned)m, ret, buf, buflen, result, h_errnop);
	if (!N.gethostbyname_r)
		return ENOSYS;
	return N.gethostbyname_r(name, ret, buf, buflen, result, h_errnop);
}

SK_EXPORT int gethostbyname2_r(const char *name, int af, struct hostent *ret, char *buf, size_t buflen,
			       struct hostent **result, int *h_errnop)
{
	int m = nm_on() && af == AF_INET ? name_node(name) : -1;
	if (m >= 0)
		return host_r((unsigned)m, ret, buf, buflen, result, h_errnop);
	if (!N.gethostbyname2_r)
		return ENOSYS;
	return N.gethostbyname2_r(name, af, ret, buf, buflen, result, h_errnop);
}

SK_EXPORT struct hostent *gethostbyaddr(const void *addr, socklen_t len, int type)
{
	int m = nm_on() && addr ? addr_node(addr, len, type) : -1;
	if (m >= 0)
		return static_host((unsigned)m);
	return N.gethostbyaddr ? N.gethostbyaddr(addr, len, type) : NULL;
}

SK_EXPORT int gethostbyaddr_r(const void *addr, socklen_t len, int type, struct hostent *ret, char *buf,
			      size_t buflen, struct hostent **result, int *h_errnop)
{
	int m = nm_on() && addr ? addr_node(addr, len, type) : -1;
	if (m >= 0)
		return host_r((unsigned)m, ret, buf, buflen, result, h_errnop);
	if (!N.gethostbyaddr_r)
		return ENOSYS;
	return N.gethostbyaddr_r(addr, len, type, ret, buf, buflen, result, h_errnop);
}

/* ---- getaddrinfo, getnameinfo ------------------------------------------------------------------- */

/* A node's name: libc resolves the node's address as a numeric host (so services, socket
 * types, families and AI_V4MAPPED behave as libc's), and the canonical name is the node's. */
SK_EXPORT int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
			  struct addrinfo **res)
{
	struct addrinfo h = {0};
	char ip[INET_ADDRSTRLEN], name[NM_PREFIX_MAX + 16];
	struct in_addr a;
	int m = nm_on() ? name_node(node) : -1, r;

	if (!N.getaddrinfo)
		return EAI_SYSTEM;
	if (m < 0)
		return N.getaddrinfo(node, service, hints, res);
	if (hints)
		h = *hints;
	h.ai_flags |= AI_NUMERICHOST;
	h.ai_flags &= ~AI_ADDRCONFIG;   /* the cluster address is on no interface of the OS */
	a.s_addr = htonl(sk_node_addr(&N.net, (unsigned)m));
	inet_ntop(AF_INET, &a, ip, sizeof(ip));
	r = N.getaddrinfo(ip, service, &h, res);
	if (r == 0 && (h.ai_flags & AI_CANONNAME) && *res) {
		char *c;
		node_name((unsigned)m, name, sizeof(name));
		c = strdup(name);
		if (!c) {
			freeaddrinfo(*res);
			*res = NULL;
			return EAI_MEMORY;
		}
		free((*res)->ai_canonname);
		(*res)->ai_canonname = c;
	}
	return r;
}

SK_EXPORT int getnameinfo(const struct sockaddr *sa, socklen_t salen, char *host, socklen_t hostlen, char *serv,
			  socklen_t servlen, int flags)
{
	int m = -1, n, r, on = nm_on();
	if (!N.getnameinfo)
		return EAI_SYSTEM;
	if (on && sa && host && hostlen && !(flags & NI_NUMERICHOST)) {
		if (sa->sa_family == AF_INET && salen >= (socklen_t)sizeof(struct sockaddr_in))
			m = addr_node(&((const struct sockaddr_in *)sa)->sin_addr, 4, AF_INET);
		else if (sa->sa_family == AF_INET6 && salen >= (socklen_t)sizeof(struct sockaddr_in6))
			m = addr_node(&((const struct sockaddr_in6 *)sa)->sin6_addr, 16, AF_INET6);
	}
	if (m < 0)
		return N.getnameinfo(sa, salen, host, hostlen, serv, servlen, flags);
	if (serv && servlen) {
		r = N.getnameinfo(sa, salen, NULL, 0, serv, servlen, flags);
		if (r)
			return r;
	}
	n = node_name((unsigned)m, host, hostlen);
	return n < 0 ? EAI_OVERFLOW : 0;
}
