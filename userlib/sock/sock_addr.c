/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: addresses and port numbers. Which node a socket address names
 * (the cluster's addresses, sock_wire.h), the address a call reports back, and the port
 * numbers a process's sockets take in its node's directory (sk_register; ephemeral ones
 * for an unbound socket).
 */
#include "sock_int.h"

#include <string.h>

/* The node of a cluster address (and the address, port), SK_BEYOND for a host address
 * of the cluster's network that names no node of the job, -1 for any other address;
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
	if (!G.active)
		return -1;
	{
		int node = sk_addr_node(&G.net, a, G.nodes);
		uint32_t h = a - G.net.base;
		if (node < 0 && (a & G.net.mask) == G.net.base && h >= 1 && h <= sk_net_capacity(&G.net))
			return SK_BEYOND;
		return node;
	}
}

/* A connect or send to sa must fail with EHOSTUNREACH: a host address of the cluster's
 * network beyond the job's nodes (it must never reach the OS's default route). */
int sk_beyond(const struct sockaddr *sa, socklen_t len)
{
	uint32_t a;
	uint16_t port;
	int any;
	return G.active && sa && sk_cluster_addr(sa, len, &a, &port, &any) == SK_BEYOND;
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

uint16_t sk_ephemeral_port(void)
{
	for (unsigned i = 0; i < 16384; i++) {
		uint16_t p = (uint16_t)(32768u + (G.next_eport++ % 16384u));
		if (!sk_listener_for(p, G.my_addr))
			return p;
	}
	return 0;
}

/* IPV6_V6ONLY set on s (remembered options): a wildcard bind is then the OS's only. */
int sk_v6only(const struct sock *s)
{
	for (int i = 0; i < s->nopts; i++)
		if (s->opts[i].level == IPPROTO_IPV6 && s->opts[i].name == IPV6_V6ONLY)
			return s->opts[i].val[0] != 0;
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
