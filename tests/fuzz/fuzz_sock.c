/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The socket emulation's wire structures (sock_wire.h, used by sock_tcp_conn.c and
 * sock_tcp_fork.c): sk_parse_req, sk_parse_ack and sk_parse_move on a received message (a
 * heap block of exactly its length), and sk_net_parse on a network string.
 *
 * Input: [which][message bytes ...].
 */
#include "fuzz.h"
#include "sock_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *d = data;
	size_t n = size;
	unsigned which = (unsigned)fuzz_take(&d, &n, 1) % 4;
	uint8_t *buf = fuzz_dup(d, n);

	if (which == 0) {
		struct sk_req r;
		if (sk_parse_req(buf, n, &r) == 0)
			FUZZ_ASSERT(n == sizeof(r) && r.magic == SK_WIRE_MAGIC && sk_conn_id_ok(r.conn));
	} else if (which == 1) {
		struct sk_ack a;
		if (sk_parse_ack(buf, n, &a) == 0)
			FUZZ_ASSERT(n == sizeof(a) && a.status >= 0 && (a.status || sk_conn_id_ok(a.conn)));
	} else if (which == 2) {
		struct sk_move m;
		if (sk_parse_move(buf, n, &m) == 0)
			FUZZ_ASSERT(n == sizeof(m) && (m.conn & 0xffff) != SK_CHAN_CTL);
	} else {
		char *s = malloc(n + 1);
		struct sk_net net;
		FUZZ_ASSERT(s);
		if (n)
			memcpy(s, buf, n);
		s[n] = 0;
		if (sk_net_parse(s, &net) == 0) {
			FUZZ_ASSERT((net.base & ~net.mask) == 0);
			FUZZ_ASSERT(sk_net_capacity(&net) >= 2);
			FUZZ_ASSERT(sk_addr_node(&net, sk_node_addr(&net, 0), 1) == 0);
		}
		free(s);
	}
	free(buf);
	return 0;
}
