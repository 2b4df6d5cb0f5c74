/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sock_test_if: the pn0 interface and addresses beyond the job (sock_test.h says how to
 * run it).
 *
 *   iface      each node: SIOCGIFCONF lists pn0 with the node's address after the OS's
 *              interfaces (lo among them), a buffer one entry short leaves it out and
 *              the size query counts it; SIOCGIFFLAGS (UP, RUNNING), ADDR, NETMASK,
 *              BRDADDR, INDEX (= if_nametoindex, not one of the OS's), NAME by index,
 *              HWADDR (02:50:4e:00:<node>), MTU; setting the MTU: EPERM; getifaddrs
 *              has pn0's AF_INET (address, netmask) and AF_PACKET (index) entries beside
 *              lo's, freeifaddrs of two lists; if_indextoname, if_nameindex;
 *              /proc/net/if_inet6 is readable and does not name pn0
 *   iface_off  outside a job (no PARANIC_NODE): no pn0 anywhere
 *   beyond     a TCP connect (blocking and not) to a cluster address beyond the job's
 *              nodes and the network's last host: EHOSTUNREACH at once; UDP sendto,
 *              sendmsg, connect, also from a socket bound to 127.0.0.1: EHOSTUNREACH
 *              (a kernel UDP send to a routed address would succeed); counted
 *              ("beyond"); a connection to the other node still works
 */
#include "sock_test.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <linux/if_packet.h>

static int ifr_call(int fd, unsigned long req, struct ifreq *q, const char *name)
{
	memset(q, 0, sizeof(*q));
	strcpy(q->ifr_name, name);
	return ioctl(fd, req, q);
}

static uint32_t in_of(const struct sockaddr *sa)
{
	return ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
}

static int has_pn0(struct ifreq *v, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(v[i].ifr_name, "pn0"))
			return i;
	return -1;
}

static int iface(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0), n, k, os = 0, lo = 0;
	struct ifreq v[64], q;
	struct ifconf ic = {.ifc_len = sizeof(v), .ifc_req = v};
	uint32_t me_a = sk_node_addr(&net, me);
	unsigned idx;
	char name[IF_NAMESIZE];
	struct ifaddrs *ia, *ib;
	struct if_nameindex *ni;
	FILE *f;

	CHECK(fd >= 0, "socket: %s", strerror(errno));
	EXPECT_RC(ioctl(fd, SIOCGIFCONF, &ic), 0);
	n = ic.ifc_len / (int)sizeof(struct ifreq);
	k = has_pn0(v, n);
	CHECK(k == n - 1 && n >= 2, "pn0 is entry %d of %d", k, n);
	CHECK(in_of(&v[k].ifr_addr) == me_a, "pn0's address in SIOCGIFCONF");
	for (int i = 0; i < n - 1; i++)
		lo |= !strcmp(v[i].ifr_name, "lo");
	CHECK(lo, "lo is listed too");
	os = n - 1;
	/* room for the OS's entries only: pn0 is left out, the program asks again */
	ic.ifc_len = os * (int)sizeof(struct ifreq);
	ic.ifc_req = v;
	EXPECT_RC(ioctl(fd, SIOCGIFCONF, &ic), 0);
	CHECK(has_pn0(v, ic.ifc_len / (int)sizeof(struct ifreq)) < 0, "pn0 in a full buffer");
	ic.ifc_req = NULL;
	ic.ifc_len = 0;
	EXPECT_RC(ioctl(fd, SIOCGIFCONF, &ic), 0);
	CHECK(ic.ifc_len == (os + 1) * (int)sizeof(struct ifreq), "the size asked: %d", ic.ifc_len);

	EXPECT_RC(ifr_call(fd, SIOCGIFFLAGS, &q, "pn0"), 0);
	CHECK((q.ifr_flags & (IFF_UP | IFF_RUNNING)) == (IFF_UP | IFF_RUNNING) && !(q.ifr_flags & IFF_LOOPBACK),
	      "flags 0x%x", q.ifr_flags);
	EXPECT_RC(ifr_call(fd, SIOCGIFADDR, &q, "pn0"), 0);
	CHECK(q.ifr_addr.sa_family == AF_INET && in_of(&q.ifr_addr) == me_a, "SIOCGIFADDR");
	EXPECT_RC(ifr_call(fd, SIOCGIFNETMASK, &q, "pn0"), 0);
	CHECK(in_of(&q.ifr_netmask) == net.mask, "netmask %08x", in_of(&q.ifr_netmask));
	EXPECT_RC(ifr_call(fd, SIOCGIFBRDADDR, &q, "pn0"), 0);
	CHECK(in_of(&q.ifr_broadaddr) == (net.base | ~net.mask), "broadcast");
	EXPECT_RC(ifr_call(fd, SIOCGIFINDEX, &q, "pn0"), 0);
	idx = (unsigned)q.ifr_ifindex;
	CHECK(idx > 0 && idx == if_nametoindex("pn0"), "index %u / %u", idx, if_nametoindex("pn0"));
	CHECK(if_nametoindex("lo") > 0 && if_nametoindex("lo") != idx, "lo's index %u", if_nametoindex("lo"));
	memset(&q, 0, sizeof(q));
	q.ifr_ifindex = (int)idx;
	EXPECT_RC(ioctl(fd, SIOCGIFNAME, &q), 0);
	CHECK(!strcmp(q.ifr_name, "pn0"), "SIOCGIFNAME %s", q.ifr_name);
	CHECK(if_indextoname(idx, name) && !strcmp(name, "pn0"), "if_indextoname");
	EXPECT_RC(ifr_call(fd, SIOCGIFHWADDR, &q, "pn0"), 0);
	{
		const uint8_t *m = (const uint8_t *)q.ifr_hwaddr.sa_data;
		CHECK(q.ifr_hwaddr.sa_family == ARPHRD_ETHER && m[0] == 2 && m[1] == 0x50 && m[2] == 0x4e &&
			      m[5] == (uint8_t)me,
		      "hwaddr %02x:%02x:%02x:..:%02x", m[0], m[1], m[2], m[5]);
	}
	EXPECT_RC(ifr_call(fd, SIOCGIFMTU, &q, "pn0"), 0);
	CHECK(q.ifr_mtu >= 64, "mtu %d", q.ifr_mtu);
	ifr_call(fd, SIOCGIFMTU, &q, "pn0");
	q.ifr_mtu = 9000;
	CHECK(ioctl(fd, SIOCSIFMTU, &q) < 0 && errno == EPERM, "SIOCSIFMTU: %s", strerror(errno));
	CHECK(ifr_call(fd, SIOCGIFFLAGS, &q, "lo") == 0 && (q.ifr_flags & IFF_LOOPBACK), "lo's flags (the OS's)");

	EXPECT_RC(getifaddrs(&ia), 0);
	EXPECT_RC(getifaddrs(&ib), 0);
	{
		int in4 = 0, pkt = 0, los = 0;
		for (struct ifaddrs *a = ia; a; a = a->ifa_next) {
			if (!a->ifa_addr)
				continue;
			los |= !strcmp(a->ifa_name, "lo");
			if (strcmp(a->ifa_name, "pn0"))
				continue;
			if (a->ifa_addr->sa_family == AF_INET)
				in4 = in_of(a->ifa_addr) == me_a && in_of(a->ifa_netmask) == net.mask &&
				      (a->ifa_flags & IFF_UP);
			if (a->ifa_addr->sa_family == AF_PACKET)
				pkt = ((struct sockaddr_ll *)a->ifa_addr)->sll_ifindex == (int)idx;
		}
		CHECK(in4 && pkt && los, "getifaddrs: pn0 inet %d packet %d, lo %d", in4, pkt, los);
	}
	freeifaddrs(ia);
	freeifaddrs(ib);
	CHECK((ni = if_nameindex()) != NULL, "if_nameindex");
	{
		int seen = 0;
		for (struct if_nameindex *p = ni; p->if_index; p++)
			seen |= p->if_index == idx && !strcmp(p->if_name, "pn0");
		if_freenameindex(ni);
		CHECK(seen, "if_nameindex has pn0");
	}
	if ((f = fopen("/proc/net/if_inet6", "r"))) {   /* IPv6 may be off: then there is no file */
		char line[256];
		while (fgets(line, sizeof(line), f))
			CHECK(!strstr(line, "pn0"), "if_inet6 names pn0");
		fclose(f);
	}
	close(fd);
	say("ok iface node %u index %u interfaces %d", me, idx, n);
	return 0;
}

static int iface_off(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct ifreq v[64], q;
	struct ifconf ic = {.ifc_len = sizeof(v), .ifc_req = v};
	struct ifaddrs *ia;
	CHECK(fd >= 0, "socket");
	EXPECT_RC(ioctl(fd, SIOCGIFCONF, &ic), 0);
	CHECK(has_pn0(v, ic.ifc_len / (int)sizeof(struct ifreq)) < 0, "pn0 outside a job");
	CHECK(ifr_call(fd, SIOCGIFFLAGS, &q, "pn0") < 0 && errno == ENODEV, "SIOCGIFFLAGS pn0: %s", strerror(errno));
	CHECK(if_nametoindex("pn0") == 0, "if_nametoindex");
	EXPECT_RC(getifaddrs(&ia), 0);
	for (struct ifaddrs *a = ia; a; a = a->ifa_next)
		CHECK(strcmp(a->ifa_name, "pn0"), "getifaddrs has pn0");
	freeifaddrs(ia);
	close(fd);
	say("ok iface_off");
	return 0;
}

static int beyond(void)
{
	unsigned nodes = (unsigned)t_env_long("PARANIC_NODES", 2);
	struct sockaddr_in far = node_sa(nodes, 80), last = node_sa(0, 7);
	struct sockaddr_in lo = {.sin_family = AF_INET};
	struct iovec v = {"x", 1};
	struct msghdr m = {.msg_name = &far, .msg_namelen = sizeof(far), .msg_iov = &v, .msg_iovlen = 1};
	int t, u, o, c;
	uint64_t t0;
	long long before = sock_stat ? sock_stat("beyond") : -1;

	last.sin_addr.s_addr = htonl((net.base | ~net.mask) - 1);   /* the network's last host */
	lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	t0 = t_now_ns();
	t = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(connect(t, (struct sockaddr *)&far, sizeof(far)) < 0 && errno == EHOSTUNREACH, "connect: %s",
	      strerror(errno));
	close(t);
	t = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	CHECK(connect(t, (struct sockaddr *)&last, sizeof(last)) < 0 && errno == EHOSTUNREACH,
	      "non-blocking connect to the last host: %s", strerror(errno));
	close(t);
	CHECK(t_now_ns() - t0 < 1000000000ull, "connects took %llu ms", (unsigned long long)(t_now_ns() - t0) / 1000000);
	u = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(sendto(u, "x", 1, 0, (struct sockaddr *)&far, sizeof(far)) < 0 && errno == EHOSTUNREACH, "sendto: %s",
	      strerror(errno));
	CHECK(sendmsg(u, &m, 0) < 0 && errno == EHOSTUNREACH, "sendmsg: %s", strerror(errno));
	CHECK(connect(u, (struct sockaddr *)&far, sizeof(far)) < 0 && errno == EHOSTUNREACH, "UDP connect: %s",
	      strerror(errno));
	o = socket(AF_INET, SOCK_DGRAM, 0);
	EXPECT_RC(bind(o, (struct sockaddr *)&lo, sizeof(lo)), 0);   /* the OS's socket from now on */
	CHECK(kind(o) == K_OS, "kind %d", kind(o));
	CHECK(sendto(o, "x", 1, 0, (struct sockaddr *)&far, sizeof(far)) < 0 && errno == EHOSTUNREACH,
	      "sendto from an OS socket: %s", strerror(errno));
	CHECK(sock_stat && sock_stat("beyond") - before == 6, "counted %lld", sock_stat ? sock_stat("beyond") - before : -1);
	close(u);
	close(o);
	/* the job's nodes are still reachable */
	if (me == 1) {
		int l = listener((uint16_t)(port0 + 90), 0), a;
		char b;
		CHECK(l >= 0, "listen: %s", strerror(errno));
		a = accept(l, NULL, NULL);
		CHECK(a >= 0 && read_full(a, &b, 1, 1) == 0 && write(a, "B", 1) == 1, "serve");
		close(a);
		close(l);
	} else {
		char b;
		c = connect_to(1, (uint16_t)(port0 + 90), 0);
		CHECK(c >= 0 && write(c, "b", 1) == 1 && read_full(c, &b, 1, 1) == 0 && b == 'B', "the other node: %s",
		      strerror(errno));
		close(c);
	}
	say("ok beyond");
	return 0;
}

SOCK_TEST_MAIN({"iface", iface, NULL}, {"iface_off", iface_off, NULL}, {"beyond", beyond, NULL})
