/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: the `pn0` interface. In a job's process the node's cluster address
 * (10.77.0.<node+1>/24 by default) is an interface of the host, merged with the OS's real
 * ones, for programs that look for their addresses before they open sockets: Open MPI's
 * TCP BTL (`btl_tcp_if_include pn0` or `10.77.0.0/24`) lists them with SIOCGIFCONF and
 * asks SIOCGIFFLAGS, SIOCGIFADDR ... per name; others use getifaddrs or if_nameindex.
 *
 *   ioctl     SIOCGIFCONF (pn0 appended after the OS's interfaces), SIOCGIFFLAGS, ADDR,
 *             NETMASK, BRDADDR, DSTADDR, INDEX, HWADDR, MTU, METRIC, TXQLEN, NAME (by index);
 *             setting anything on pn0: EPERM
 *   getifaddrs, freeifaddrs   the OS's list, then pn0's AF_PACKET and AF_INET entries
 *   if_nametoindex, if_indextoname, if_nameindex   pn0 with its index
 *
 * pn0's index is one above the highest the OS has when the process first asks (it must
 * not be one of the OS's: Open MPI matches /proc/net/if_inet6's indexes too, which list
 * the OS's interfaces only: pn0 has no IPv6 address). Its MAC is locally administered,
 * 02:50:4e:00:<node>; its MTU the NIC's (the port's, else PARANIC_MTU or the default).
 * Flags: UP, RUNNING, NOARP (no broadcast or multicast: such datagrams are the OS's).
 * Outside a job (the library inactive) every call is libc's.
 */
#include "sock_api.h"

#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <linux/if_packet.h>
#include <linux/if_link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>

#define PN_IF_NAME "pn0"

static struct {
	pthread_mutex_t lock;
	int (*getifaddrs)(struct ifaddrs **);
	void (*freeifaddrs)(struct ifaddrs *);
	struct if_nameindex *(*if_nameindex)(void);
	void (*if_freenameindex)(struct if_nameindex *);
	unsigned index;
	struct ext *exts;   /* lists getifaddrs extended: what freeifaddrs frees of ours */
} I = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* pn0's entries appended to one getifaddrs list (one block, freed by freeifaddrs). */
struct ext {
	struct ext *next;
	struct ifaddrs *head;   /* the list as the program got it */
	struct ifaddrs *tail;   /* the OS's last entry (NULL: the list is all ours) */
	struct ifaddrs pkt, in;
	struct sockaddr_ll ll;
	struct sockaddr_in addr, mask;
	struct rtnl_link_stats stats;
	char name[IFNAMSIZ];
};

static void if_resolve(void)
{
	if (I.getifaddrs)
		return;
	I.freeifaddrs = (void (*)(struct ifaddrs *))dlsym(RTLD_NEXT, "freeifaddrs");
	I.if_nameindex = (struct if_nameindex * (*)(void)) dlsym(RTLD_NEXT, "if_nameindex");
	I.if_freenameindex = (void (*)(struct if_nameindex *))dlsym(RTLD_NEXT, "if_freenameindex");
	__atomic_store_n(&I.getifaddrs, (int (*)(struct ifaddrs **))dlsym(RTLD_NEXT, "getifaddrs"), __ATOMIC_RELEASE);
}

/* The interface exists in a process of a job (the library active). */
static int if_on(void)
{
	return G.active && !G.finished;
}

static unsigned if_index(void)
{
	unsigned idx;
	pthread_mutex_lock(&I.lock);
	if (!I.index) {
		struct if_nameindex *ni, *p;
		unsigned max = 0;
		if_resolve();
		if ((ni = I.if_nameindex())) {
			for (p = ni; p->if_index || p->if_name; p++)
				if (p->if_index > max)
					max = p->if_index;
			I.if_freenameindex(ni);
		}
		I.index = max + 1;
	}
	idx = I.index;
	pthread_mutex_unlock(&I.lock);
	return idx;
}

static uint32_t if_addr(void)
{
	return sk_node_addr(&G.net, G.node);
}

static int if_mtu(void)
{
	const char *e;
	if (G.port)
		return pn_mtu(pn_port_hal(G.port));
	e = getenv("PARANIC_MTU");
	return e && atoi(e) > 0 ? atoi(e) : PN_DEFAULT_MTU;
}

static void if_mac(uint8_t mac[6])
{
	mac[0] = 0x02;   /* locally administered, unicast */
	mac[1] = 0x50;   /* 'P' */
	mac[2] = 0x4e;   /* 'N' */
	mac[3] = 0;
	mac[4] = (uint8_t)(G.node >> 8);
	mac[5] = (uint8_t)G.node;
}

static void put_in(struct sockaddr *sa, uint32_t a)
{
	struct sockaddr_in in;
	memset(&in, 0, sizeof(in));
	in.sin_family = AF_INET;
	in.sin_addr.s_addr = htonl(a);
	memcpy(sa, &in, sizeof(in));
}

#define IF_FLAGS (IFF_UP | IFF_RUNNING | IFF_NOARP)

/* ---- ioctl ----------------------------------------------------------------------------------- */

static int ifconf(int fd, struct ifconf *ic)
{
	int room = ic->ifc_len, r;
	struct ifreq q;
	if (!ic->ifc_req) {   /* the size wanted */
		if ((r = REAL(ioctl)(fd, SIOCGIFCONF, ic)) < 0)
			return r;
		ic->ifc_len += (int)sizeof(struct ifreq);
		return r;
	}
	if ((r = REAL(ioctl)(fd, SIOCGIFCONF, ic)) < 0)
		return r;
	if (room - ic->ifc_len < (int)sizeof(q))
		return r;   /* full: the program asks again with more room (as with the OS's) */
	memset(&q, 0, sizeof(q));
	strcpy(q.ifr_name, PN_IF_NAME);
	put_in(&q.ifr_addr, if_addr());
	memcpy((char *)ic->ifc_buf + ic->ifc_len, &q, sizeof(q));
	ic->ifc_len += (int)sizeof(q);
	return r;
}

/* ioctl on the interface: 1 with *ret when it was pn0's (or SIOCGIFCONF), 0 to pass on. */
int sk_if_ioctl(int fd, unsigned long req, void *arg, int *ret)
{
	struct ifreq *q = arg;
	if (!if_on() || !arg)
		return 0;
	if (req == SIOCGIFCONF) {
		*ret = ifconf(fd, arg);
		return 1;
	}
	if (req == SIOCGIFNAME) {
		if (q->ifr_ifindex <= 0 || (unsigned)q->ifr_ifindex != if_index())
			return 0;
		strcpy(q->ifr_name, PN_IF_NAME);
		*ret = 0;
		return 1;
	}
	if (req < 0x8900 || req > 0x89ff || strncmp(q->ifr_name, PN_IF_NAME, IFNAMSIZ) != 0)
		return 0;
	*ret = 0;
	switch (req) {
	case SIOCGIFFLAGS:
		q->ifr_flags = IF_FLAGS;
		break;
	case SIOCGIFADDR:
	case SIOCGIFDSTADDR:
		put_in(&q->ifr_addr, if_addr());
		break;
	case SIOCGIFNETMASK:
		put_in(&q->ifr_netmask, G.net.mask);
		break;
	case SIOCGIFBRDADDR:   /* as the kernel: the network's, flag or not */
		put_in(&q->ifr_broadaddr, G.net.base | ~G.net.mask);
		break;
	case SIOCGIFINDEX:
		q->ifr_ifindex = (int)if_index();
		break;
	case SIOCGIFHWADDR:
		memset(&q->ifr_hwaddr, 0, sizeof(q->ifr_hwaddr));
		q->ifr_hwaddr.sa_family = ARPHRD_ETHER;
		if_mac((uint8_t *)q->ifr_hwaddr.sa_data);
		break;
	case SIOCGIFMTU:
		q->ifr_mtu = if_mtu();
		break;
	case SIOCGIFMETRIC:
		q->ifr_metric = 0;
		break;
	case SIOCGIFTXQLEN:
		q->ifr_qlen = 1000;
		break;
	case SIOCSIFFLAGS:
	case SIOCSIFADDR:
	case SIOCSIFNETMASK:
	case SIOCSIFBRDADDR:
	case SIOCSIFMTU:
	case SIOCSIFHWADDR:
	case SIOCSIFNAME:
		errno = EPERM;   /* pn0 is the cluster's: configured by the job, not the program */
		*ret = -1;
		break;
	default:
		errno = EOPNOTSUPP;
		*ret = -1;
	}
	return 1;
}

/* ---- getifaddrs ------------------------------------------------------------------------------ */

SK_EXPORT int getifaddrs(struct ifaddrs **out)
{
	struct ifaddrs *os = NULL, *t;
	struct ext *e;
	int r;

	if_resolve();
	if (!if_on())
		return I.getifaddrs(out);
	if ((r = I.getifaddrs(&os)) < 0)
		os = NULL;   /* the OS's failed (no netlink?): pn0 alone */
	if (!(e = calloc(1, sizeof(*e)))) {
		if (os) {
			*out = os;
			return 0;
		}
		errno = ENOMEM;
		return -1;
	}
	strcpy(e->name, PN_IF_NAME);
	e->ll.sll_family = AF_PACKET;
	e->ll.sll_ifindex = (int)if_index();
	e->ll.sll_hatype = ARPHRD_ETHER;
	e->ll.sll_halen = 6;
	if_mac(e->ll.sll_addr);
	e->stats.tx_bytes = (uint32_t)G.stat[SK_ST_TCP_TX_BYTES];
	e->stats.rx_bytes = (uint32_t)G.stat[SK_ST_TCP_RX_BYTES];
	e->stats.tx_packets = (uint32_t)G.stat[SK_ST_UDP_SENT];
	e->stats.rx_packets = (uint32_t)G.stat[SK_ST_UDP_RECV];
	put_in((struct sockaddr *)&e->addr, if_addr());
	put_in((struct sockaddr *)&e->mask, G.net.mask);
	e->pkt.ifa_name = e->in.ifa_name = e->name;
	e->pkt.ifa_flags = e->in.ifa_flags = IF_FLAGS;
	e->pkt.ifa_addr = (struct sockaddr *)&e->ll;
	e->pkt.ifa_data = &e->stats;
	e->pkt.ifa_next = &e->in;
	e->in.ifa_addr = (struct sockaddr *)&e->addr;
	e->in.ifa_netmask = (struct sockaddr *)&e->mask;
	for (t = os; t && t->ifa_next; t = t->ifa_next)
		;
	e->tail = t;
	if (t)
		t->ifa_next = &e->pkt;
	e->head = os ? os : &e->pkt;
	pthread_mutex_lock(&I.lock);
	e->next = I.exts;
	I.exts = e;
	pthread_mutex_unlock(&I.lock);
	*out = e->head;
	return 0;
}

/* glibc's list is one block freed at its head; ours is appended: cut it off first. */
SK_EXPORT void freeifaddrs(struct ifaddrs *ifa)
{
	struct ext **pp, *e = NULL;
	if_resolve();
	if (!ifa)
		return;
	pthread_mutex_lock(&I.lock);
	for (pp = &I.exts; *pp; pp = &(*pp)->next)
		if ((*pp)->head == ifa) {
			e = *pp;
			*pp = e->next;
			break;
		}
	pthread_mutex_unlock(&I.lock);
	if (!e) {
		I.freeifaddrs(ifa);
		return;
	}
	if (e->tail) {
		e->tail->ifa_next = NULL;
		I.freeifaddrs(ifa);
	}
	free(e);
}

/* ---- names and indexes ----------------------------------------------------------------------- */

SK_EXPORT unsigned int if_nametoindex(const char *name)
{
	struct ifreq q;
	int fd;
	if (if_on() && name && !strcmp(name, PN_IF_NAME))
		return if_index();
	/* as glibc: SIOCGIFINDEX on a socket (the kernel's; not through our ioctl) */
	if (!name || strlen(name) >= IFNAMSIZ) {
		errno = ENODEV;
		return 0;
	}
	if ((fd = REAL(socket)(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return 0;
	memset(&q, 0, sizeof(q));
	strcpy(q.ifr_name, name);
	if (REAL(ioctl)(fd, SIOCGIFINDEX, &q) < 0) {
		int e = errno;
		REAL(close)(fd);
		errno = e == EINVAL ? ENOSYS : e;
		return 0;
	}
	REAL(close)(fd);
	return (unsigned)q.ifr_ifindex;
}

SK_EXPORT char *if_indextoname(unsigned int index, char name[IF_NAMESIZE])
{
	struct ifreq q;
	int fd;
	if (if_on() && index && index == if_index())
		return strcpy(name, PN_IF_NAME);
	if ((fd = REAL(socket)(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return NULL;
	memset(&q, 0, sizeof(q));
	q.ifr_ifindex = (int)index;
	if (REAL(ioctl)(fd, SIOCGIFNAME, &q) < 0) {
		int e = errno;
		REAL(close)(fd);
		errno = e == ENODEV ? ENXIO : e;
		return NULL;
	}
	REAL(close)(fd);
	return strncpy(name, q.ifr_name, IFNAMSIZ);
}

/* The OS's list and pn0, in glibc's layout (names and the array malloc'ed), so that
 * glibc's if_freenameindex frees it. */
SK_EXPORT struct if_nameindex *if_nameindex(void)
{
	struct if_nameindex *os, *out;
	size_t n = 0;
	if_resolve();
	os = I.if_nameindex();
	if (!if_on() || !os)
		return os;
	while (os[n].if_index || os[n].if_name)
		n++;
	if (!(out = calloc(n + 2, sizeof(*out)))) {
		I.if_freenameindex(os);
		errno = ENOBUFS;
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		out[i].if_index = os[i].if_index;
		if (!(out[i].if_name = strdup(os[i].if_name))) {
			I.if_freenameindex(out);
			I.if_freenameindex(os);
			errno = ENOBUFS;
			return NULL;
		}
	}
	I.if_freenameindex(os);
	out[n].if_index = if_index();
	if (!(out[n].if_name = strdup(PN_IF_NAME))) {
		I.if_freenameindex(out);
		errno = ENOBUFS;
		return NULL;
	}
	return out;
}
