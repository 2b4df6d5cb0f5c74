/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so internals: the socket table, connections over ports, the real
 * libc functions. docs/sockets.md describes the design.
 *
 *   sock_state.c     the state (G), its lock, the real libc functions, warnings
 *   sock_config.c    configuration from the environment; the constructor
 *   sock_fork.c      the fork handlers: what the child inherits, what the parent shares
 *   sock_port.c      the process's port: opened on first need, closed at exit
 *   sock_table.c     the socket table (fd -> struct sock), placeholders, sk_destroy
 *   sock_addr.c      cluster addresses, port numbers, sockets' directory entries
 *   sock_tcp_conn.c  TCP connections: connect, listen, accept, close; sk_service (sock_tcp.h)
 *   sock_tcp_io.c    TCP data: write, read, shutdown, readiness (sock_tcp.h)
 *   sock_tcp_fork.c  TCP connections shared over fork: PAUSE, takeover, RESUME
 *   sock_if.c        the pn0 interface (SIOCGIF*, getifaddrs, if_nameindex ...)
 *   sock_api_zc.c    sendfile, splice, MSG_ZEROCOPY on ParaNIC connections
 *   sock_udp.c       UDP datagrams over ports (SK_UDP)
 *   sock_api.h       what the interposed calls share (the sock_api_*.c files)
 *   sock_api_open.c  socket, bind, listen, connect, accept, getsockname, getpeername
 *   sock_api_io.c    read, write, recv, send ... recvmsg, sendmsg, shutdown
 *   sock_api_opts.c  getsockopt, setsockopt
 *   sock_api_fd.c    close, dup, dup2, dup3, fcntl, ioctl
 *   sock_api_pn.c    the library's own exports (pn_sock_fd_kind, pn_sock_stat, pn_sock_now_ns)
 *   sock_poll.c      poll, ppoll, select, pselect over mixed sets
 *   sock_epoll.c     epoll over mixed sets
 *   sock_dir.c       the per-node directory: (protocol, port number) -> context, pid
 *   sock_names.c     host names of the job's nodes (gethostname, gethostbyname ...)
 *
 * Locking: one mutex (G.lock) around everything that touches the state or the port;
 * blocking calls release it while they back off. A thread-local flag (sk_in) is set
 * while the library holds the lock: libc calls made from inside (libparanic's own
 * open/mmap/close, the sim backend's socket) then pass straight through.
 */
#ifndef PN_SOCK_INT_H
#define PN_SOCK_INT_H

#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <time.h>

#include "hal_backend.h"     /* pn_backoff, pn_monotonic_ns */
#include "paranic/pn_ports.h"
#include "sock_wire.h"

#define SK_EXPORT __attribute__((visibility("default")))
#define SK_MAX_FD 65536      /* fds at or above are never ParaNIC sockets */
#define SK_MAX_OPTS 16
#define SK_MAX_IFD 8         /* fds the port's backend holds (sk_internal_fd) */
#define SK_SERVICE_NS 50000ull        /* service() at most this often in busy loops */
#define SK_LIVE_NS 100000000ull       /* peer pid checked this often */
#define SK_DEAD_GRACE_NS 400000000ull /* a dead peer's connection is reset this long after */
#define SK_DRAIN_AFTER_NS 200000ull   /* a blocked write pulls incoming data after this */
#define SK_RETRY_NS 20000000ull       /* a refused connect is retried this often (connect wait) */

/* The libc functions underneath (dlsym(RTLD_NEXT)). */
struct sk_real {
	int (*socket)(int, int, int);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	int (*close)(int);
	int (*shutdown)(int, int);
	int (*getsockname)(int, struct sockaddr *, socklen_t *);
	int (*getpeername)(int, struct sockaddr *, socklen_t *);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*fcntl)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*epoll_create)(int);
	int (*epoll_create1)(int);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
};
extern struct sk_real sk_real;
void sk_resolve(void);
#define REAL(f) (__builtin_expect(sk_real.f != NULL, 1) ? sk_real.f : (sk_resolve(), sk_real.f))

enum sk_type {
	SK_CAND = 1,   /* an OS TCP socket not (yet) bound or connected to the cluster */
	SK_BOUND,      /* bound to this node's cluster address: placeholder fd */
	SK_LISTEN,     /* listening: on the cluster, and on the OS too when os (bound to any) */
	SK_CONN,       /* a ParaNIC connection: placeholder fd */
	SK_UDP,        /* a UDP socket on the cluster (os: the OS socket serves the rest) */
};
enum { CS_CONNECTING = 1, CS_OPEN, CS_FAILED };

struct sk_opt {
	int level, name;
	socklen_t len;
	uint8_t val[16];
};

/* Data that arrived for a connection and waits for the program (taken in order). */
struct chunk {
	struct chunk *next;
	size_t len, off;
	uint8_t data[];
};

/* A send in flight (own: a copy the library frees when done). */
struct psend {
	struct psend *next;
	pn_port_req_t *req;
	size_t len;
	void *own;
};

struct conn;

/* A datagram waiting in a UDP socket's receive queue. */
struct dgram {
	struct dgram *next;
	size_t len;
	uint32_t addr;         /* source (host order) */
	uint16_t port;
	uint8_t data[];
};

struct sock {
	int refs;              /* fds referring to it + calls in progress */
	int type, family, nonblock;
	int dgram;             /* a SOCK_DGRAM (UDP) socket */
	int stale;             /* inherited over fork from the parent's port: EBADF */
	int adopt;             /* SK_UDP on the cluster inherited over fork: the first use takes it over */
	int shared;            /* SK_UDP that another process may use too (fork): each use claims the port */
	int dslot;             /* where its directory entry was last seen (a hint) */
	unsigned dir;          /* its port is in the node's directory (SK_PROTO_*) */
	int os;                /* the fd is a real OS socket (SK_CAND, an OS-backed SK_LISTEN) */
	int bound_any;         /* SK_CAND bound by the OS to the wildcard address */
	uint32_t laddr;        /* cluster address (host order) for SK_BOUND/SK_LISTEN/SK_CONN */
	uint16_t lport;
	int so_error;
	uint32_t zc_next, zc_done;   /* MSG_ZEROCOPY sends counted, completions reported (sock_api_zc.c) */
	int sndbuf, rcvbuf;    /* what SO_SNDBUF/SO_RCVBUF report */
	int nopts;
	struct sk_opt opts[SK_MAX_OPTS];
	/* SK_LISTEN */
	struct sock *lnext;    /* G.listeners */
	struct conn *qh, *qt;  /* connections accepted by the protocol, not yet by accept() */
	/* SK_CONN */
	struct conn *c;
	/* SK_UDP */
	struct sock *unext;    /* G.udps */
	struct dgram *qh_d, *qt_d;
	size_t qbytes;
	uint32_t paddr;        /* default peer (connect): cluster when peer_node >= 0 */
	uint16_t pport;
	int peer_set, peer_node;
};

struct conn {
	struct conn *next, *prev;   /* G.conns */
	struct conn *qnext;         /* a listener's queue */
	struct sock *sk;            /* owner; NULL while queued and after close */
	uint32_t id;                /* ours: (generation << 16) | chan */
	uint16_t chan;
	int state, error;           /* error: positive errno, sticky (reset, refused ...) */
	uint32_t peer_id;
	unsigned peer_node, peer_ctx;
	int32_t peer_pid;
	int pid_ok;                 /* peer_pid is on this host */
	uint32_t laddr, raddr;
	uint16_t lport, rport;
	uint8_t eof;                /* the peer's FIN or CLOSE was read */
	uint8_t peer_closed;        /* the peer's CLOSE was seen: writes get EPIPE */
	uint8_t got_close;          /* ... and taken: nothing more comes on this connection */
	uint8_t wr_shut, rd_shut;
	uint8_t closed;             /* the program closed it: drained until the peer's FIN */
	uint8_t reading;            /* a read has a receive posted into the program's buffer */
	struct chunk *sh, *stl;
	size_t sbytes;
	struct psend *ph, *pt;
	size_t pbytes;
	/* connecting */
	uint32_t req_id;
	pn_port_req_t *req_send, *ack_req;
	struct sk_req req;
	struct sk_ack ack;
	uint64_t t0, retry_at, live_at;
	uint64_t dead_at;           /* when the peer's process was first seen gone (0: alive) */
	/* shared over fork (sock_tcp_fork.c) */
	uint8_t paused;             /* the peer forks: write nothing until its RESUME */
	uint8_t pause_acked;        /* our PAUSE was answered (PAUSED came) */
	uint8_t pausing;            /* our PAUSE is out: its PAUSED ends it (resumed at once if no fork shares c) */
	uint8_t defer_fin, defer_close;   /* FIN / CLOSE for after the peer's RESUME */
	uint32_t moves;             /* the peer moved (RESUME): a receive posted from its old port is withdrawn */
	struct sk_fslot *fs;        /* shared with other processes since a fork: who takes it */
	int32_t home_pid;           /* the process whose port c's channel belongs to */
};

/* The counters (pn_sock_stat's names, the exit line): X(enum, name). */
#define SK_STATS(X)                                                                            \
	X(SK_ST_UDP_SENT, "udp_sent") X(SK_ST_UDP_RECV, "udp_recv") X(SK_ST_UDP_NOBODY, "udp_nobody") \
	X(SK_ST_UDP_UNBOUND, "udp_unbound") X(SK_ST_UDP_FULL, "udp_full")                        \
	X(SK_ST_UDP_FAILED, "udp_failed") X(SK_ST_UDP_TAKEN, "udp_taken")                         \
	X(SK_ST_TCP_OPENED, "tcp_opened") X(SK_ST_TCP_REMOTE, "tcp_remote")                       \
	X(SK_ST_TCP_TX_BYTES, "tcp_tx_bytes") X(SK_ST_TCP_RX_BYTES, "tcp_rx_bytes")               \
	X(SK_ST_OS_CLUSTER, "os_cluster") X(SK_ST_BEYOND, "beyond")                               \
	X(SK_ST_SENDFILE_BYTES, "sendfile_bytes") X(SK_ST_SPLICE_BYTES, "splice_bytes")           \
	X(SK_ST_ZC_COPIED, "msg_zerocopy_copied") X(SK_ST_FORK_PAUSED, "fork_paused")                   \
	X(SK_ST_FORK_MOVED, "fork_moved") X(SK_ST_FORK_STALE, "fork_stale")
#define SK_ST_ENUM(e, n) e,
enum { SK_STATS(SK_ST_ENUM) SK_ST_N };
#undef SK_ST_ENUM

struct sk_ep;

struct sk_global {
	pthread_mutex_t lock;
	int active;                 /* a job's process (PARANIC_NODE/NODES set) and the config is valid */
	int open_failed, finished;
	int ctx_fixed;              /* PARANIC_SOCK_CTX given: that context, else any free one */
	int dir_used;               /* this process added directory entries */
	pn_port_t *port;
	int local_pids;
	uint8_t boot[16];
	unsigned node, nodes, ctx;
	struct sk_net net;
	uint32_t my_addr;
	uint64_t connect_wait_ns, connect_timeout_ns, linger_ns;
	uint64_t fork_wait_ns;      /* PARANIC_SOCK_FORK_WAIT_MS: how long a fork waits for its peers' PAUSED */
	int forking;                /* in the fork's prepare handler: PAUSED answers our PAUSE */
	size_t sndbuf, rcvbuf;
	int debug;
	int stats;                  /* PARANIC_SOCK_STATS: the counters on stderr at exit */
	struct conn *conns;
	struct sock *listeners;
	struct psend *dh;           /* detached sends (ACKs) */
	struct sock *udps;          /* UDP sockets with a port on the cluster */
	struct psend *uh;           /* datagrams in flight */
	size_t uinflight;
	uint64_t stat[SK_ST_N];     /* SK_ST_* */
	struct sk_ep *eps;          /* epoll instances with entries of ours */
	int ifd[SK_MAX_IFD];        /* the port's own fds (backend socket, memory, device): kept open */
	int n_ifd;
	uint64_t chan_used[1024];
	uint32_t next_chan, gen;
	uint32_t next_req;
	uint32_t next_eport;
	uint64_t last_service;
	uint8_t *scratch;
	struct sock *fds[SK_MAX_FD];
};
extern struct sk_global G;
extern __thread int sk_in __attribute__((tls_model("initial-exec")));

/* the lock and warnings (sock_state.c) */
void sk_enter(void);
void sk_leave(void);
/* Release the lock and back off (spin, yield, sleep), take it again. */
void sk_pause(struct pn_backoff *b);
void sk_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));   /* "paranic_sock[pid]: ..." on stderr */

/* The counters as one line ("name value ..."; sock_api_pn.c) on stderr, under the lock. */
void sk_stats_print(const char *when);

/* MSG_ZEROCOPY on a connection, accepted by copying (sock_api_zc.c): a send done,
 * recvmsg(MSG_ERRQUEUE) */
void sk_zc_sent(struct sock *s, int flags);
ssize_t sk_zc_errqueue(struct sock *s, struct msghdr *msg);

/* the pn0 interface (sock_if.c): an ioctl on it (1: answered in *ret, 0: the OS's) */
int sk_if_ioctl(int fd, unsigned long req, void *arg, int *ret);

/* fork (sock_fork.c), registered by the constructor (sock_config.c) */
void sk_atfork_prepare(void);
void sk_atfork_parent(void);
void sk_atfork_child(void);

/* TCP connections shared over fork (sock_tcp_fork.c) */
void sk_tcp_fork_prepare(void);           /* pause the open connections (the peers answer) */
void sk_tcp_fork_child(void);             /* the child holds the paused ones too */
int sk_tcp_claim(struct sock *s);         /* first use after a fork: take c over; 0, or -EBADF (another has it) */
int sk_tcp_release(struct sock *s);       /* the fd's last close: 1 done (nothing more to send), 0 close as usual */
void sk_tcp_fork_ctl(uint64_t now);       /* PAUSE / RESUME from peers (sk_service) */
void sk_tcp_fork_exit(void);              /* at exit: let go of the shared ones */
void sk_tcp_paused_msg(struct conn *c);   /* PAUSED came on c */

/* the socket table (sock_table.c). sk_peek: lock-free hint (NULL inside the library);
 * sk_get under the lock: the socket with a reference the caller drops with sk_put. */
static inline struct sock *sk_peek(int fd)
{
	if (sk_in || fd < 0 || fd >= SK_MAX_FD)
		return NULL;
	return __atomic_load_n(&G.fds[fd], __ATOMIC_ACQUIRE);
}
struct sock *sk_get(int fd);
void sk_put(struct sock *s);
void sk_set_fd(int fd, struct sock *s);   /* s NULL: forget; else the fd refers to s (ref taken) */
struct sock *sk_new(int type, int family);
void sk_untrack(int fd);                  /* an SK_CAND becomes a plain OS socket */
int sk_placeholder(int fd);
void sk_destroy(struct sock *s);

/* the port (sock_port.c) */
pn_port_t *sk_port(void);
/* fd is one the socket port's backend holds (the simulator's socket, the device, the
 * daemon connection): the program's close() of it is ignored (daemons close every fd). */
static inline int sk_internal_fd(int fd)
{
	int n = __atomic_load_n(&G.n_ifd, __ATOMIC_ACQUIRE);
	for (int i = 0; i < n; i++)
		if (G.ifd[i] == fd)
			return 1;
	return 0;
}

/* addresses and port numbers (sock_addr.c) */
#define SK_BEYOND (-2)   /* sk_cluster_addr: the cluster's network, but no node of the job */
int sk_cluster_addr(const struct sockaddr *sa, socklen_t len, uint32_t *addr, uint16_t *port, int *any);
int sk_beyond(const struct sockaddr *sa, socklen_t len);
int sk_fill_addr(int family, uint32_t addr, uint16_t port, struct sockaddr *sa, socklen_t *len);
uint16_t sk_ephemeral_port(void);
int sk_v6only(const struct sock *s);   /* IPV6_V6ONLY set (remembered options) */
int sk_register(struct sock *s, unsigned proto, uint16_t port);   /* port 0: an ephemeral one */

/* TCP (sock_tcp_conn.c, sock_tcp_io.c; what only they share: sock_tcp.h) */
int sk_connect(struct sock *s, uint32_t addr, uint16_t port, int node);   /* 0 or -errno */
int sk_connect_wait(struct sock *s);
int sk_listen(struct sock *s);
struct sock *sk_listener_for(uint16_t port, uint32_t addr);
int sk_accept(struct sock *s, int fd, struct sockaddr *sa, socklen_t *len, int flags);
void sk_service(int force);   /* answer REQs, move connections and the UDP queues on */
ssize_t sk_write(struct sock *s, const void *buf, size_t len, int flags, int *sigpipe);
ssize_t sk_writev(struct sock *s, const struct iovec *iov, int n, int flags, int *sigpipe);
ssize_t sk_read(struct sock *s, void *buf, size_t len, int flags);
ssize_t sk_readv(struct sock *s, const struct iovec *iov, int n, int flags);
int sk_shutdown(struct sock *s, int how);
size_t sk_available(struct sock *s);
short sk_readiness(struct sock *s, short events);

/* the per-node directory (sock_dir.c) */
int sk_dir_add(unsigned proto, uint16_t port, unsigned ctx);   /* 0, -EADDRINUSE */
void sk_dir_del(unsigned proto, uint16_t port);
int sk_dir_lookup(unsigned node, unsigned proto, uint16_t port, unsigned *ctx, int32_t *pid);   /* 0, -ECONNREFUSED */
void sk_dir_fini(void);
int sk_dir_claim(unsigned proto, uint16_t port, unsigned ctx, int *slot);   /* 1 taken over, 0 ours, -errno */

/* UDP (sock_udp.c) */
int sk_udp_bind(struct sock *s, int fd, const struct sockaddr *sa, socklen_t len);
int sk_udp_connect(struct sock *s, int fd, const struct sockaddr *sa, socklen_t len, int *to_os);
int sk_udp_wants(struct sock *s, const struct sockaddr *to, socklen_t tolen);
ssize_t sk_udp_sendmsg(struct sock *s, int fd, const struct msghdr *msg, int flags);
ssize_t sk_udp_recvmsg(struct sock *s, int fd, struct msghdr *msg, int flags);
short sk_udp_readiness(struct sock *s, short events);
void sk_udp_pull(void);
void sk_udp_reap(void);
void sk_udp_destroy(struct sock *s);
int sk_udp_claim(struct sock *s, int use);
void sk_udp_fork(int child);
int sk_udp_peername(struct sock *s, int fd, struct sockaddr *sa, socklen_t *len);
size_t sk_udp_next_len(struct sock *s);

/* epoll (sock_epoll.c): forget fd in every epoll instance (it was closed) */
void sk_ep_forget(int fd);
void sk_ep_close(int epfd);

/* poll (sock_poll.c) */
int sk_poll_ns(struct pollfd *fds, nfds_t n, int64_t timeout_ns);

#endif /* PN_SOCK_INT_H */
