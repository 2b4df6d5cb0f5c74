/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Peers that lie: a simulator and a paranicd (each a child process of this program) that
 * answer libparanic with messages the fuzz harnesses showed to be dangerous, and the
 * library calls that must refuse them with an error (never crash, never hand garbage to
 * the caller). Run by tests/fuzz/test_peers.py, one case per run:
 *   peers CASE       exit 0: refused as it must be ("ok CASE: <error>");
 *                    exit 1: accepted (what the lie would have caused is printed);
 *                    a signal: the library crashed on it.
 * Cases: sim-mtu sim-clk0 sim-trace-off sim-global-short sim-refused daemon-count
 *        daemon-strings. Messages are built from the library's own headers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon_proto.h"
#include "fake_sim.h"
#include "paranic/pn_hal.h"
#include "paranic/pn_protocol.h"
#include "paranic/pn_sim.h"
#include "pn_sim_shm.h"

static char path[108];

static int listen_on(int type)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	unlink(path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 4) < 0) {
		perror("fake peer: listen");
		exit(3);
	}
	return fd;
}

/* ---- a simulator ---------------------------------------------------------------------------- */

static void fake_sim(int lfd, const char *c)
{
	struct pn_sim_hello h;
	char cb[CMSG_SPACE(2 * sizeof(int))];
	struct iovec iov = {&h, sizeof(h)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb, .msg_controllen = sizeof(cb)};
	struct pn_sim_welcome w = fake_sim_welcome(0, 1);
	size_t bytes = fake_sim_global_bytes();
	int fd = accept(lfd, NULL, NULL), gfd = memfd_create("fake-sim-global", 0);
	struct pn_sim_global *g;

	if (fd < 0 || gfd < 0 || recvmsg(fd, &mh, 0) != (ssize_t)sizeof(h))
		exit(3);
	/* The global shm and welcome as the harness makes them (fake_sim.h) ... */
	if (ftruncate(gfd, (off_t)bytes) < 0 || (g = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, gfd, 0)) == MAP_FAILED)
		exit(3);
	fake_sim_global(g);
	/* ... and the lie. */
	if (!strcmp(c, "sim-mtu"))
		w.mtu = 4 * PN_MAX_MTU;   /* RX slots beyond the ring the client laid out */
	else if (!strcmp(c, "sim-clk0"))
		g->clk_hz = 0;            /* pn_now_ns divides by it */
	else if (!strcmp(c, "sim-trace-off"))
		g->trace_off = 0x7ffff000u;   /* pn_sim_trace reads there */
	else if (!strcmp(c, "sim-global-short"))
		w.global_bytes = 64ull << 20, g->trace_stride = 64u << 10;   /* traces past the end of the file */
	else if (!strcmp(c, "sim-refused"))
		w.status = -EBUSY;
	munmap(g, bytes);
	memset(cb, 0, sizeof(cb));
	iov = (struct iovec){&w, sizeof(w)};
	mh = (struct msghdr){.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb,
			     .msg_controllen = CMSG_SPACE(sizeof(int))};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &gfd, sizeof(int));
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof(w))
		exit(3);
	sleep(2);   /* then hang up: the client sees a dead simulator, never waits */
	exit(0);
}

static int sim_case(const char *c)
{
	pn_open_opts_t o;
	pn_hal_t *h = NULL;
	pn_sim_trace_t t;
	int r;

	setenv("PARANIC_SIM_SOCKET", path, 1);
	setenv("PARANIC_DAEMON", "off", 1);
	pn_open_opts_init(&o);
	o.backend = "sim";
	o.cluster = "fuzzpeer";
	o.node = 0;
	r = pn_open(&h, &o);
	if (r < 0) {
		printf("ok %s: pn_open: %s\n", c, strerror(-r));
		return !strcmp(c, "sim-refused") ? (r == -EBUSY ? 0 : 1) : (r == -EPROTO ? 0 : 1);
	}
	/* Accepted: use it as a program would. */
	printf("accepted: mtu %d, now %llu ns\n", pn_mtu(h), (unsigned long long)pn_now_ns(h));
	r = pn_sim_trace(h, FAKE_SIM_NODES - 1, FAKE_SIM_NCTX - 1, &t);
	printf("accepted: pn_sim_trace %d generation %llu\n", r, (unsigned long long)t.generation);
	pn_close(h);
	return 1;
}

/* ---- a paranicd ------------------------------------------------------------------------------ */

static void fake_daemon(int lfd, const char *c)
{
	struct pnd_frame f;
	pn_daemon_info_t info;
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0 || read(fd, &f, sizeof(f)) != (ssize_t)sizeof(f) || f.type != PND_STATUS)
		exit(3);
	memset(&info, 0, sizeof(info));
	info.node = 0;
	info.nodes = 3;
	snprintf(info.backend, sizeof(info.backend), "sw");
	f = (struct pnd_frame){.magic = PND_MAGIC, .type = PND_STATUS, .version = PND_PROTO_VERSION,
			       .len = sizeof(info)};
	if (!strcmp(c, "daemon-count")) {
		f.count = 3;   /* three node records ... that are not there */
	} else {   /* daemon-strings: no NUL in any string */
		memset(info.cluster, 'A', sizeof(info.cluster));
		memset(info.backend, 'B', sizeof(info.backend));
		memset(info.host, 'C', sizeof(info.host));
	}
	if (write(fd, &f, sizeof(f)) != (ssize_t)sizeof(f) || write(fd, &info, sizeof(info)) != (ssize_t)sizeof(info))
		exit(3);
	sleep(1);
	exit(0);
}

static int daemon_case(const char *c)
{
	pn_daemon_info_t info;
	pn_daemon_node_t nodes[8];
	int r;
	memset(nodes, 0x5a, sizeof(nodes));   /* what a caller's buffer may hold */
	r = pn_daemon_status(path, &info, nodes, 8);
	if (!strcmp(c, "daemon-count")) {
		if (r == -EPROTO) {
			printf("ok %s: %s (%s)\n", c, strerror(-r), pn_daemon_last_reason());
			return 0;
		}
		printf("accepted: %d nodes, node[2].node %d\n", r, r > 2 ? nodes[2].node : -1);
		return 1;
	}
	if (r < 0) {
		printf("refused: %s\n", strerror(-r));
		return 1;
	}
	if (strlen(info.cluster) < sizeof(info.cluster) && strlen(info.backend) < sizeof(info.backend) &&
	    strlen(info.host) < sizeof(info.host)) {
		printf("ok %s: strings cut at their fields' ends (%zu, %zu, %zu)\n", c, strlen(info.cluster),
		       strlen(info.backend), strlen(info.host));
		return 0;
	}
	printf("accepted: cluster string of %zu bytes in a field of %zu\n", strlen(info.cluster), sizeof(info.cluster));
	return 1;
}

int main(int argc, char **argv)
{
	const char *c = argc == 2 ? argv[1] : "";
	int sim = !strncmp(c, "sim-", 4), dmn = !strncmp(c, "daemon-", 7), lfd, r, st;
	pid_t pid;

	if (!sim && !dmn) {
		fprintf(stderr, "usage: peers sim-mtu|sim-clk0|sim-trace-off|sim-global-short|sim-refused|"
				"daemon-count|daemon-strings\n");
		return 2;
	}
	snprintf(path, sizeof(path), "/tmp/pn-fuzzpeer-%d.sock", (int)getpid());
	lfd = listen_on(sim ? SOCK_SEQPACKET : SOCK_STREAM);
	pid = fork();
	if (pid == 0) {
		if (sim)
			fake_sim(lfd, c);
		fake_daemon(lfd, c);
	}
	close(lfd);
	fflush(stdout);
	r = sim ? sim_case(c) : daemon_case(c);
	fflush(stdout);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	unlink(path);
	return r;
}
