/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: TCP connections over ports, shared by sock_tcp_conn.c (a
 * connection's life: connect, listen, accept, close, service) and sock_tcp_io.c (its
 * data: write, read, shutdown, readiness); the socket table (sk_destroy) and the exit
 * (sk_fini) use them too. The library-wide interface (sk_connect ... sk_readiness) is in
 * sock_int.h.
 *
 * A connection is a pair of connection ids, one per side, each naming the channel and
 * tag its owner receives on. Connect sends REQ to the port the destination node's
 * directory names for the port number; the library there (whenever it is called: any
 * socket call, poll, a blocked read) answers ACK at once if a socket listens on that
 * port, queueing the new connection for accept(), as a kernel completes the handshake
 * before accept. A write is sent as DATA messages (ports: eager, or rendezvous from the
 * program's buffer); a read takes them in order, straight into the program's buffer when
 * the message fits, else through a staged copy. shutdown(SHUT_WR) sends FIN, close sends
 * CLOSE; a closed connection is kept (a zombie) and drained until the peer's FIN or
 * CLOSE has come, so that no sender ever waits for a receive that will not come.
 */
#ifndef PN_SOCK_TCP_H
#define PN_SOCK_TCP_H

#include "sock_int.h"

/* A ports error (negative) as the connection's errno (positive, sticky). */
static inline int sk_conn_err(int r)
{
	if (r == -ENOMEM)
		return ENOMEM;
	if (r == -ECONNREFUSED)
		return ECONNREFUSED;
	if (r == -EHOSTUNREACH)
		return EHOSTUNREACH;
	return ECONNRESET;
}

/* sock_tcp_conn.c */
void sk_connect_progress(struct conn *c, uint64_t now);   /* a connecting c: ACK, retries, timeout */
void sk_conn_close(struct conn *c);                        /* the program closed c (or never accepted it) */
void sk_pid_check(struct conn *c, uint64_t now);           /* a peer on this host that has exited: reset */

/* A send no connection owns (buf malloc'ed, freed when done; sk_service collects it). */
void sk_detached_send(unsigned node, unsigned ctx, int chan, uint64_t tag, void *buf, size_t len);
struct conn *sk_conn_find(uint32_t id);                    /* ours (zombies too) by id */
int sk_conn_adopt(struct conn *c);                          /* a child's copy gets a channel of its port */
void sk_conn_unlink(struct conn *c);                        /* out of G.conns, channel freed; memory kept */

/* sock_tcp_io.c */
int sk_conn_isend(struct conn *c, unsigned kind, const void *buf, size_t len, void *own);
void sk_conn_reap(struct conn *c);             /* collect c's finished sends */
void sk_conn_cancel_sends(struct conn *c);     /* withdraw c's sends that have not started */
void sk_conn_send_close(struct conn *c);       /* CLOSE to the peer of an open c */
size_t sk_conn_poll_msg(struct conn *c, void *buf, size_t cap, int *got);   /* c's next message, if any */

#endif /* PN_SOCK_TCP_H */
