/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: configuration from the environment (docs/sockets.md, "Use"), read
 * once by the library's constructor. Outside a job (PARANIC_NODE or PARANIC_NODES unset),
 * with PARANIC_SOCK=0 or with a bad value the library stays off (G.active 0) and every
 * call goes to libc.
 */
#include "sock_int.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
		sk_warn("bad %s=%s (%ld .. %ld); the socket layer is off", name, s, lo, hi);
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
		sk_warn("bad PARANIC_SOCK_NET=%s (a.b.c.d/len); the socket layer is off", net);
		return;
	}
	if ((uint32_t)nodes > sk_net_capacity(&G.net)) {
		sk_warn("PARANIC_SOCK_NET=%s cannot address %ld nodes; the socket layer is off", net, nodes);
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
	if (env_long("PARANIC_SOCK_FORK_WAIT_MS", 2000, 0, 86400000, &x) < 0)
		return;
	G.fork_wait_ns = (uint64_t)x * 1000000ull;
	if (env_long("PARANIC_SOCK_SNDBUF", 4l << 20, 1, 1l << 30, &x) < 0)
		return;
	G.sndbuf = (size_t)x;
	if (env_long("PARANIC_SOCK_RCVBUF", 4l << 20, 1, 1l << 30, &x) < 0)
		return;
	G.rcvbuf = (size_t)x;
	if (env_long("PARANIC_SOCK_DEBUG", 0, 0, 9, &x) < 0)
		return;
	G.debug = (int)x;
	if (env_long("PARANIC_SOCK_STATS", 0, 0, 1, &x) < 0)
		return;
	G.stats = (int)x;
	read_boot_id();
	G.next_eport = 32768u + (uint32_t)getpid() % 16384u;
	G.gen = (uint32_t)getpid() * 2654435761u;
	G.next_chan = 1;
	G.active = 1;
}

__attribute__((constructor)) static void sk_init(void)
{
	sk_resolve();
	sk_config();
	pthread_atfork(sk_atfork_prepare, sk_atfork_parent, sk_atfork_child);
	if (G.debug && G.active)
		sk_warn("node %u of %u, address %u.%u.%u.%u, context %d (-1: any free one)", G.node, G.nodes,
			G.my_addr >> 24, (G.my_addr >> 16) & 255, (G.my_addr >> 8) & 255, G.my_addr & 255,
			G.ctx_fixed ? (int)G.ctx : -1);
}
