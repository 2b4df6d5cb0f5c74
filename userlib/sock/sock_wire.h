/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The socket emulation's cluster addressing and its wire format over ports
 * (docs/sockets.md), private to libparanic_sock.so and read by its test program.
 *
 * Addressing. PARANIC_SOCK_NET (default SK_DEFAULT_NET) is an IPv4 network a.b.c.d/len;
 * node i of the job is the host address base + i + 1. Every process of a node has its
 * own socket port (any free context); the node's directory (SK_DIR_NAME_FMT, sock_dir.c)
 * says which context serves a (protocol, port number). An IPv4-mapped IPv6 address
 * (::ffff:a.b.c.d) is the same address.
 *
 * Wire format. Everything is a ports message between the socket layers' ports; the
 * 64-bit ports tag is kind << 56 | low 32 bits:
 *
 *   kind   channel        low 32 bits         payload
 *   REQ    SK_CHAN_CTL    destination port    struct sk_req   (connect)
 *   ACK    SK_CHAN_CTL    the REQ's req_id    struct sk_ack   (accepted, or refused)
 *   DATA   receiver's     receiver's conn id  stream bytes (1 .. SK_MSG_MAX)
 *   FIN    connection     receiver's conn id  none: the sender writes no more
 *   CLOSE  channel        receiver's conn id  none: the sender closed (writes no more, reads no more)
 *   DGRAM  SK_CHAN_CTL    src port << 16 | dst port   one UDP datagram (0 .. SK_UDP_MAX bytes)
 *   PAUSE  SK_CHAN_CTL    receiver's conn id  struct sk_move: the sender forks; write nothing more
 *   PAUSED connection     receiver's conn id  none: the answer, after every DATA sent before it
 *   RESUME SK_CHAN_CTL    receiver's conn id  struct sk_move: the connection goes on with the sender's
 *                                             port (its node, context) and conn id
 *
 * A datagram's source address is the sender's node (stamped by its NIC), its source
 * port the tag's upper half.
 *
 * A connection id is (generation << 16) | channel, the channel its owner receives the
 * connection's messages on (1 .. 65535); the generation tells reuses of a channel apart.
 * Messages of one connection are matched in the order they were sent (ports' order).
 */
#ifndef PN_SOCK_WIRE_H
#define PN_SOCK_WIRE_H

#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SK_DEFAULT_NET "10.77.0.0/24"
/* The per-node directory of ports (protocol, port number -> context, pid): a shared
 * memory segment named from the cluster (PARANIC_CLUSTER) and the node. */
#define SK_DIR_NAME_FMT "/paranic-%s.sock.%u"
#define SK_PROTO_TCP 6
#define SK_PROTO_UDP 17
#define SK_UDP_MAX 65507          /* the largest UDP payload over IPv4 */

#define SK_WIRE_MAGIC 0x4b534e50u /* "PNSK" */
#define SK_WIRE_VERSION 1u
#define SK_CHAN_CTL 0             /* connection requests and answers */
#define SK_MSG_MAX (1u << 20)     /* a write is sent as messages of at most this many bytes */

enum sk_kind {
	SK_T_REQ = 1, SK_T_ACK = 2, SK_T_DATA = 3, SK_T_FIN = 4, SK_T_CLOSE = 5, SK_T_DGRAM = 6,
	SK_T_PAUSE = 7, SK_T_PAUSED = 8, SK_T_RESUME = 9
};

#define SK_KIND_SHIFT 56
#define SK_TAG(kind, low) (((uint64_t)(kind) << SK_KIND_SHIFT) | (uint64_t)(uint32_t)(low))
#define SK_TAG_KIND(tag) ((unsigned)((tag) >> SK_KIND_SHIFT))
#define SK_KIND_MASK (0xffull << SK_KIND_SHIFT)
#define SK_LOW_MASK 0xffffffffull
#define SK_ALL_MASK (~0ull)
#define SK_DGRAM_TAG(sport, dport) SK_TAG(SK_T_DGRAM, ((uint32_t)(sport) << 16) | (uint16_t)(dport))

/* Connection request, client -> the listening node's socket layer (little-endian, as
 * every ParaNIC wire structure). */
struct sk_req {
	uint32_t magic, version;
	uint32_t req_id;      /* the ACK's tag */
	uint32_t conn;        /* the client's connection id: where the server sends */
	uint32_t src_addr, dst_addr;   /* IPv4, host order */
	uint16_t src_port, dst_port;
	int32_t pid;          /* liveness on one host (sw, sim) */
	uint8_t boot[16];     /* the host's boot id: pids are comparable only on one host */
};

/* Answer to a REQ. */
struct sk_ack {
	uint32_t magic;
	uint32_t req_id;
	int32_t status;       /* 0: accepted; else a positive errno (ECONNREFUSED) */
	uint32_t conn;        /* the server's connection id */
	int32_t pid;
	uint8_t boot[16];
};

/* PAUSE and RESUME of a connection shared over fork (docs/sockets.md, "fork"). */
struct sk_move {
	uint32_t magic;
	uint32_t conn;        /* the sender's connection id (PAUSED goes there; RESUME: the new one) */
	int32_t pid;          /* RESUME: the process that goes on with the connection */
	uint8_t boot[16];
};

/* ---- parsing what arrives (another process wrote it; tests/fuzz/fuzz_sock.c fuzzes these) ----
 * Each takes a received message of n bytes: 0 with the structure in *out, or -1. */

/* A connection id names a channel 1 .. 65535 (channel 0 is SK_CHAN_CTL). */
static inline int sk_conn_id_ok(uint32_t id)
{
	return (id & 0xffff) != SK_CHAN_CTL;
}

static inline int sk_parse_req(const void *buf, size_t n, struct sk_req *out)
{
	if (!buf || n != sizeof(*out))
		return -1;
	memcpy(out, buf, sizeof(*out));
	return out->magic == SK_WIRE_MAGIC && out->version == SK_WIRE_VERSION && sk_conn_id_ok(out->conn) ? 0 : -1;
}

/* An ACK: accepted (status 0, with a connection id) or refused (a positive errno). */
static inline int sk_parse_ack(const void *buf, size_t n, struct sk_ack *out)
{
	if (!buf || n != sizeof(*out))
		return -1;
	memcpy(out, buf, sizeof(*out));
	if (out->magic != SK_WIRE_MAGIC || out->status < 0 || out->status > 4095)
		return -1;
	return out->status || sk_conn_id_ok(out->conn) ? 0 : -1;
}

static inline int sk_parse_move(const void *buf, size_t n, struct sk_move *out)
{
	if (!buf || n != sizeof(*out))
		return -1;
	memcpy(out, buf, sizeof(*out));
	return out->magic == SK_WIRE_MAGIC && sk_conn_id_ok(out->conn) ? 0 : -1;
}

struct sk_net {
	uint32_t base, mask;  /* host order */
};

/* Parse "a.b.c.d/len" (8 <= len <= 30, host bits zero). 0 or -1. */
static inline int sk_net_parse(const char *s, struct sk_net *n)
{
	char ip[32];
	const char *slash = s ? strchr(s, '/') : NULL;
	struct in_addr a;
	char *end;
	long len;

	if (!slash || (size_t)(slash - s) >= sizeof(ip))
		return -1;
	memcpy(ip, s, (size_t)(slash - s));
	ip[slash - s] = 0;
	len = strtol(slash + 1, &end, 10);
	if (*end || len < 8 || len > 30 || inet_pton(AF_INET, ip, &a) != 1)
		return -1;
	n->mask = ~0u << (32 - len);
	n->base = ntohl(a.s_addr);
	return (n->base & ~n->mask) ? -1 : 0;
}

/* How many nodes the network can address. */
static inline uint32_t sk_net_capacity(const struct sk_net *n)
{
	return ~n->mask - 1;   /* host parts 1 .. size - 2 (not the broadcast address) */
}

static inline uint32_t sk_node_addr(const struct sk_net *n, unsigned node)
{
	return n->base + node + 1;
}

/* The node an address belongs to, or -1. */
static inline int sk_addr_node(const struct sk_net *n, uint32_t addr, unsigned nodes)
{
	uint32_t h;
	if ((addr & n->mask) != n->base)
		return -1;
	h = addr - n->base;
	return h >= 1 && h <= nodes ? (int)(h - 1) : -1;
}

#endif /* PN_SOCK_WIRE_H */
