/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sock_test_ppn: several processes per node and the per-node directory (sock_test.h
 * says how to run it).
 *
 *   ppn       (pn_launch -p PPN) every process connects to every other's listener (TCP,
 *             intra-node too) and sends datagrams to every other's UDP socket; the two
 *             processes of a node bind one port: one gets it, the other EADDRINUSE
 *   reclaim   (-n 1 -p 2) a killed process's port: EADDRINUSE while it lives, then
 *             datagrams to it are dropped and another process binds it
 */
#include "sock_test.h"

/* ---- ppn: several processes per node, all to all ----------------------------------------------- */

#define PPN_BYTES 100000   /* >= the largest datagram */
#define PPN_DGRAMS 30

static unsigned ppn, nprocs, myrank;

static uint16_t ppn_tcp_port(unsigned rank)
{
	return (uint16_t)(port0 + 20 + rank % ppn);   /* the same numbers on every node */
}

static uint16_t ppn_udp_port(unsigned rank)
{
	return (uint16_t)(port0 + 30 + rank % ppn);
}

static size_t ppn_dgram_len(unsigned from, unsigned i)
{
	return i == 0 ? 0 : i == 1 ? 65507 : (size_t)((from * 7919u + i * 2311u) % 40000u);
}

static void *ppn_serve(void *arg)
{
	int l = *(int *)arg, *bad = calloc(1, sizeof(int));
	uint8_t *buf = malloc(PPN_BYTES);
	for (unsigned k = 0; k + 1 < nprocs && bad && buf; k++) {
		uint32_t from;
		int c = accept(l, NULL, NULL);
		if (c < 0 || read_full(c, &from, 4, 4) < 0 || from >= nprocs || read_full(c, buf, PPN_BYTES, 7000) < 0 ||
		    pat_check(buf, PPN_BYTES, from * 64 + myrank, 0) != (size_t)-1 || write(c, "ok", 2) != 2) {
			say("FAIL ppn: connection %u from %u", k, from);
			*bad = 1;
		}
		close(c);
	}
	free(buf);
	return bad;
}

static int ppn_case(void)
{
	unsigned node = me, local = (unsigned)t_env_long("PARANIC_LOCAL_RANK", 0);
	int l, u, dup_fd, udp_dup;
	struct sockaddr_in a;
	pthread_t th;
	void *res;
	uint8_t *buf = malloc(PPN_BYTES);
	unsigned got = 0, seq[64] = {0};
	uint64_t t0;

	ppn = (unsigned)t_env_long("PARANIC_PPN", 1);
	nprocs = (unsigned)t_env_long("PARANIC_NODES", 2) * ppn;
	myrank = node * ppn + local;
	CHECK(buf && nprocs <= 64, "setup");
	/* one port number, both processes of the node: exactly one gets it (the other
	 * EADDRINUSE); both keep what they got until every process has connected to them */
	a = node_sa(node, (uint16_t)(port0 + 19));
	dup_fd = socket(AF_INET, SOCK_STREAM, 0);
	udp_dup = socket(AF_INET, SOCK_DGRAM, 0);
	{
		int rt = bind(dup_fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? 0 : errno;
		int ru = bind(udp_dup, (struct sockaddr *)&a, sizeof(a)) == 0 ? 0 : errno;
		CHECK((rt == 0 || rt == EADDRINUSE) && (ru == 0 || ru == EADDRINUSE), "bind: %s / %s", strerror(rt),
		      strerror(ru));
		say("bind19 tcp=%s udp=%s", rt ? "EADDRINUSE" : "ok", ru ? "EADDRINUSE" : "ok");
	}
	u = socket(AF_INET, SOCK_DGRAM, 0);
	a = node_sa(node, ppn_udp_port(myrank));
	CHECK(u >= 0 && bind(u, (struct sockaddr *)&a, sizeof(a)) == 0, "UDP bind: %s", strerror(errno));
	CHECK(kind(u) == K_UDP, "kind %d", kind(u));
	l = listener(ppn_tcp_port(myrank), 0);
	CHECK(l >= 0, "listen: %s", strerror(errno));
	CHECK(pthread_create(&th, NULL, ppn_serve, &l) == 0, "thread");
	/* TCP to every other process's listener (its node, its port number), intra-node too */
	for (unsigned k = 1; k < nprocs; k++) {
		unsigned to = (myrank + k) % nprocs;
		int c = connect_to(to / ppn, ppn_tcp_port(to), 0);
		char ok[2];
		uint32_t r32 = myrank;
		CHECK(c >= 0, "connect to %u: %s", to, strerror(errno));
		pat_fill(buf, PPN_BYTES, myrank * 64 + to, 0);
		EXPECT_RC(write_full(c, &r32, 4), 0);
		EXPECT_RC(write_full(c, buf, PPN_BYTES), 0);
		EXPECT_RC(read_full(c, ok, 2, 2), 0);
		close(c);
	}
	CHECK(pthread_join(th, &res) == 0 && res && !*(int *)res, "the server thread failed");
	free(res);
	/* every other process has bound its UDP socket (it listened after): datagrams to all */
	for (unsigned i = 0; i < PPN_DGRAMS; i++)
		for (unsigned k = 1; k < nprocs; k++) {
			unsigned to = (myrank + k) % nprocs;
			struct sockaddr_in d = node_sa(to / ppn, ppn_udp_port(to));
			size_t n = ppn_dgram_len(myrank, i);
			pat_fill(buf, n, myrank * 1000 + to * 64 + i, 0);
			EXPECT_RC(sendto(u, buf, n, 0, (struct sockaddr *)&d, sizeof(d)), n);
		}
	t0 = t_now_ns();
	while (got < PPN_DGRAMS * (nprocs - 1)) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		struct pollfd p = {.fd = u, .events = POLLIN};
		ssize_t r;
		unsigned src;
		CHECK(t_now_ns() - t0 < 20000000000ull, "only %u datagrams in 20 s", got);
		if (poll(&p, 1, 1000) != 1)
			continue;
		r = recvfrom(u, buf, PPN_BYTES, 0, (struct sockaddr *)&from, &fl);
		CHECK(r >= 0, "recvfrom: %s", strerror(errno));
		src = (unsigned)sk_addr_node(&net, ntohl(from.sin_addr.s_addr), 64) * ppn +
		      (ntohs(from.sin_port) - ppn_udp_port(0));
		CHECK(src < nprocs && src != myrank, "a datagram from %s:%u", inet_ntoa(from.sin_addr),
		      ntohs(from.sin_port));
		CHECK((size_t)r == ppn_dgram_len(src, seq[src]) &&
		      pat_check(buf, (size_t)r, src * 1000 + myrank * 64 + seq[src], 0) == (size_t)-1,
		      "datagram %u of %u: %zd bytes", seq[src], src, r);
		seq[src]++;
		got++;
	}
	close(u);
	close(l);
	close(dup_fd);
	close(udp_dup);
	free(buf);
	say("ok ppn rank=%u connections=%u datagrams=%u", myrank, 2 * (nprocs - 1), got);
	return 0;
}

/* ---- reclaim: a dead process's directory entry (one node, two processes) ---------------------- */

static int reclaim_case(void)
{
	unsigned local = (unsigned)t_env_long("PARANIC_LOCAL_RANK", 0);
	struct sockaddr_in a = node_sa(me, (uint16_t)(port0 + 80));
	int u = socket(AF_INET, SOCK_DGRAM, 0), r;
	long long nobody;

	CHECK(u >= 0, "socket: %s", strerror(errno));
	if (local == 0) {   /* binds, then dies without closing */
		EXPECT_RC(bind(u, (struct sockaddr *)&a, sizeof(a)), 0);
		say("phase-bound");
		t_sleep_us(400000);
		raise(SIGKILL);
		return -1;
	}
	t_sleep_us(150000);
	r = bind(u, (struct sockaddr *)&a, sizeof(a));
	CHECK(r < 0 && errno == EADDRINUSE, "bind while the owner lives: %d %s", r, strerror(errno));
	t_sleep_us(1000000);   /* meanwhile the owner has killed itself (400 ms after its bind) */
	nobody = sock_stat("udp_nobody");
	EXPECT_RC(sendto(u, "x", 1, 0, (struct sockaddr *)&a, sizeof(a)), 1);
	CHECK(sock_stat("udp_nobody") == nobody + 1, "a dead owner's port still served");
	u = socket(AF_INET, SOCK_DGRAM, 0);
	EXPECT_RC(bind(u, (struct sockaddr *)&a, sizeof(a)), 0);
	EXPECT_RC(sendto(u, "y", 1, 0, (struct sockaddr *)&a, sizeof(a)), 1);   /* to itself */
	EXPECT_RC(recv(u, &r, sizeof(r), 0), 1);
	say("ok reclaim");
	return 0;
}

SOCK_TEST_MAIN({"ppn", ppn_case, NULL}, {"reclaim", reclaim_case, NULL})
