/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sock_test_epoll: epoll over sets that mix ParaNIC and OS fds (sock_test.h says how to
 * run it).
 *
 *   epoll     one epoll set: a cluster listener, its accepted connection, a UDP socket
 *             (EPOLLET), a pipe, a UDP socket on both sides; level-triggered repeats, MOD,
 *             DEL, EEXIST, a timed-out epoll_pwait
 */
#include "sock_test.h"

/* ---- epoll: ParaNIC and OS fds in one epoll set ------------------------------------------------ */

static int ep_has(const struct epoll_event *ev, int n, uint32_t tag, uint32_t bits)
{
	for (int i = 0; i < n; i++)
		if (ev[i].data.u32 == tag && (ev[i].events & bits) == bits)
			return 1;
	return 0;
}

static int epoll_server(void)
{
	int l = listener((uint16_t)(port0 + 60), 0), u = socket(AF_INET, SOCK_DGRAM, 0), ep = epoll_create1(EPOLL_CLOEXEC);
	int pfd[2], c = -1, got_tcp = 0, got_udp = 0, n, rounds = 0;
	struct sockaddr_in a = node_sa(me, (uint16_t)(port0 + 61));
	struct epoll_event ev, evs[8], ev2[8];
	char buf[16];
	uint64_t t0;

	CHECK(l >= 0 && u >= 0 && ep >= 0 && pipe(pfd) == 0, "setup: %s", strerror(errno));
	EXPECT_RC(bind(u, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK(kind(l) == K_LISTEN && kind(u) == K_UDP, "kinds %d %d", kind(l), kind(u));
	ev = (struct epoll_event){.events = EPOLLIN, .data.u32 = 1};
	EXPECT_RC(epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev), 0);
	ev = (struct epoll_event){.events = EPOLLIN | EPOLLET, .data.u32 = 2};
	EXPECT_RC(epoll_ctl(ep, EPOLL_CTL_ADD, u, &ev), 0);
	ev = (struct epoll_event){.events = EPOLLIN, .data.u32 = 3};
	EXPECT_RC(epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &ev), 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, u, &ev) < 0 && errno == EEXIST, "a second ADD: %s", strerror(errno));
	/* an OS fd in a set with ParaNIC ones: the pipe's event with its data */
	EXPECT_RC(write(pfd[1], "x", 1), 1);
	n = epoll_wait(ep, evs, 8, 5000);
	CHECK(n >= 1 && ep_has(evs, n, 3, EPOLLIN), "the pipe not reported (%d events)", n);
	EXPECT_RC(read(pfd[0], buf, 1), 1);
	while (!got_tcp || !got_udp) {
		CHECK(++rounds < 100, "the client's data did not come");
		n = epoll_wait(ep, evs, 8, 5000);
		CHECK(n > 0, "epoll_wait: %d %s", n, strerror(errno));
		CHECK(!ep_has(evs, n, 3, 0), "the drained pipe reported again");
		if (ep_has(evs, n, 1, EPOLLIN)) {
			c = accept(l, NULL, NULL);
			CHECK(c >= 0 && kind(c) == K_CONN, "accept: %s", strerror(errno));
			ev = (struct epoll_event){.events = EPOLLIN, .data.u32 = 4};
			EXPECT_RC(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev), 0);
		}
		if (ep_has(evs, n, 4, EPOLLIN) && !got_tcp) {
			/* level-triggered: reported again while unread */
			int n2 = epoll_wait(ep, ev2, 8, 0);
			CHECK(ep_has(ev2, n2, 4, EPOLLIN), "level-triggered connection not reported again");
			EXPECT_RC(read_full(c, buf, 5, 5), 0);
			CHECK(!memcmp(buf, "hello", 5), "TCP data");
			got_tcp = 1;
		}
		if (ep_has(evs, n, 2, EPOLLIN) && !got_udp) {
			/* edge-triggered: not reported again until something new comes */
			int n2 = epoll_wait(ep, ev2, 8, 100);
			CHECK(!ep_has(ev2, n2, 2, 0), "EPOLLET: the UDP socket reported twice");
			EXPECT_RC(recv(u, buf, sizeof(buf), 0), 5);
			CHECK(!memcmp(buf, "dgram", 5), "UDP data");
			got_udp = 1;
		}
	}
	/* a UDP socket on both sides (INADDR_ANY): the kernel's event (a datagram from
	 * 127.0.0.1) and the library's (one from the client over the cluster), one entry */
	{
		struct sockaddr_in wa = any_sa((uint16_t)(port0 + 62)), lo = {.sin_family = AF_INET};
		int w = socket(AF_INET, SOCK_DGRAM, 0), o = socket(AF_INET, SOCK_DGRAM, 0), seen = 0;
		CHECK(w >= 0 && o >= 0 && bind(w, (struct sockaddr *)&wa, sizeof(wa)) == 0 && kind(w) == K_UDP,
		      "wildcard UDP: %s", strerror(errno));
		ev = (struct epoll_event){.events = EPOLLIN, .data.u32 = 6};
		EXPECT_RC(epoll_ctl(ep, EPOLL_CTL_ADD, w, &ev), 0);
		lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		lo.sin_port = htons((uint16_t)(port0 + 62));
		EXPECT_RC(sendto(o, "os", 2, 0, (struct sockaddr *)&lo, sizeof(lo)), 2);
		EXPECT_RC(write(c, "w", 1), 1);   /* the client's cue to send its datagram */
		for (rounds = 0; seen != 3; rounds++) {
			ssize_t r;
			CHECK(rounds < 50, "wildcard UDP: seen %d", seen);
			n = epoll_wait(ep, evs, 8, 5000);
			if (!ep_has(evs, n, 6, EPOLLIN))
				continue;
			r = recv(w, buf, sizeof(buf), 0);
			CHECK(r == 2 && (!memcmp(buf, "os", 2) || !memcmp(buf, "cl", 2)), "wildcard UDP got %zd", r);
			seen |= buf[0] == 'o' ? 1 : 2;
		}
		close(o);
		close(w);
	}
	/* MOD to EPOLLOUT: writable; DEL; then nothing: a timed-out wait */
	ev = (struct epoll_event){.events = EPOLLOUT, .data.u32 = 5};
	EXPECT_RC(epoll_ctl(ep, EPOLL_CTL_MOD, c, &ev), 0);
	n = epoll_wait(ep, evs, 8, 1000);
	CHECK(ep_has(evs, n, 5, EPOLLOUT), "EPOLLOUT after MOD (%d events)", n);
	EXPECT_RC(write(c, "bye", 3), 3);
	EXPECT_RC(epoll_ctl(ep, EPOLL_CTL_DEL, c, NULL), 0);
	t0 = t_now_ns();
	n = epoll_pwait(ep, evs, 8, 100, NULL);
	CHECK(n == 0 && t_now_ns() - t0 >= 90000000ull, "an idle wait: %d events after %.0f ms", n,
	      (double)(t_now_ns() - t0) / 1e6);
	EXPECT_RC(read(c, buf, 1), 0);   /* the client's close */
	close(c);
	close(ep);
	close(l);
	close(u);
	close(pfd[0]);
	close(pfd[1]);
	say("ok epoll server");
	return 0;
}

static int epoll_client(void)
{
	int c = connect_to(1, (uint16_t)(port0 + 60), 0), u = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in to = node_sa(1, (uint16_t)(port0 + 61));
	char buf[4];
	CHECK(c >= 0 && u >= 0, "connect: %s", strerror(errno));
	EXPECT_RC(write(c, "hello", 5), 5);
	EXPECT_RC(sendto(u, "dgram", 5, 0, (struct sockaddr *)&to, sizeof(to)), 5);
	EXPECT_RC(read_full(c, buf, 1, 1), 0);
	to.sin_port = htons((uint16_t)(port0 + 62));
	EXPECT_RC(sendto(u, "cl", 2, 0, (struct sockaddr *)&to, sizeof(to)), 2);
	EXPECT_RC(read_full(c, buf, 3, 3), 0);
	CHECK(!memcmp(buf, "bye", 3), "reply");
	close(c);
	close(u);
	say("ok epoll client");
	return 0;
}

SOCK_TEST_MAIN({"epoll", epoll_client, epoll_server})
