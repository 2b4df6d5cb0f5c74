/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pn_launch: start N processes of a program, one per node of a fresh sw (or other)
 * cluster (or PPN per node with -p), and collect their output line by line, prefixed
 * with the node id ("node.local" when PPN > 1).
 *
 *   pn_launch -n N [-p PPN] [-c CLUSTER] [-b BACKEND] [-t TIMEOUT_S] [-k RANK:MS:WORD]
 *             [-r MS] [--keep] -- PROGRAM ARGS...
 *
 * Children get PARANIC_NODES=N, PARANIC_NODE (the node it runs on), PARANIC_PPN,
 * PARANIC_LOCAL_RANK (0 .. PPN-1 on its node), PARANIC_RANK (node * PPN + local),
 * PARANIC_CLUSTER (default "launch-<pid>") and PARANIC_BACKEND (when -b is given).
 * The cluster's segment is removed before the start and after the end (unless --keep;
 * --attach: neither, the cluster is someone else's, e.g. its paranicds').
 *   -k RANK:MS:WORD  kill -9 process RANK (the node when PPN is 1) MS milliseconds
 *                    after it printed a line starting with WORD (a crash mid-run);
 *   -f               fail fast: when a process exits with a non-zero status, kill the
 *                    others (they may wait forever for it) and exit 1;
 *   -r MS            restart a node that was killed by a signal, once, MS ms later,
 *                    with PARANIC_RESPAWN=1 (a new process in the killed one's place).
 *   -t TIMEOUT_S     kill everything after TIMEOUT_S seconds (0..31536000; default 60;
 *                    0: no limit, for a parent that owns the job's lifetime).
 * pn_launch owns its processes: on SIGTERM, SIGINT or SIGHUP, and when its own parent
 * dies (PR_SET_PDEATHSIG), it sends SIGTERM to every process group it started, SIGKILL
 * after KILL_GRACE_MS, waits for them, removes the cluster (unless --keep/--attach) and
 * exits with 128 + the signal. Each process runs in a process group of its own, so what
 * it starts goes too.
 * Exit status: 0 when every (final) process exited 0; 124 on timeout; 128+N on signal N;
 * 1 otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "paranic/pn_hal.h"
#include "tutil.h"
#include "../sock/sock_wire.h"   /* SK_DIR_NAME_FMT */

struct child {
	pid_t pid;
	int fd;             /* read end of its stdout+stderr, -1 when closed */
	char line[8192];
	size_t used;
	int running;
	int status;
	int respawned;
	uint64_t kill_at;   /* 0: no kill scheduled */
	uint64_t respawn_at; /* 0: no restart scheduled */
};

#define MAX_TIMEOUT_S 31536000   /* a year */
#define KILL_GRACE_MS 2000       /* SIGTERM, then SIGKILL after this */

static volatile sig_atomic_t stop_sig;   /* the signal that ends the run (0: none yet) */

static void on_stop_signal(int sig)
{
	if (!stop_sig)
		stop_sig = sig;
}

static int nodes = 2, ppn = 1, nkids, timeout_s = 60, respawn, respawn_ms, keep, attach, kill_node = -1, kill_ms, fail_fast;
static const char *cluster, *backend, *kill_word;
static char **prog;
static struct child *kids;

static int start(int i, int again)
{
	int p[2];
	char v[32];
	pid_t pid;

	if (pipe(p) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		sigset_t none;
		setpgid(0, 0);   /* its own group: a kill reaches what it started too */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		snprintf(v, sizeof(v), "%d", nodes);
		setenv("PARANIC_NODES", v, 1);
		snprintf(v, sizeof(v), "%d", i / ppn);
		setenv("PARANIC_NODE", v, 1);
		snprintf(v, sizeof(v), "%d", ppn);
		setenv("PARANIC_PPN", v, 1);
		snprintf(v, sizeof(v), "%d", i % ppn);
		setenv("PARANIC_LOCAL_RANK", v, 1);
		snprintf(v, sizeof(v), "%d", i);
		setenv("PARANIC_RANK", v, 1);
		setenv("PARANIC_CLUSTER", cluster, 1);
		if (backend)
			setenv("PARANIC_BACKEND", backend, 1);
		if (again)
			setenv("PARANIC_RESPAWN", "1", 1);
		execvp(prog[0], prog);
		fprintf(stderr, "pn_launch: cannot run %s: %s\n", prog[0], strerror(errno));
		_exit(127);
	}
	close(p[1]);
	kids[i].pid = pid;
	kids[i].fd = p[0];
	kids[i].used = 0;
	kids[i].running = 1;
	kids[i].kill_at = 0;
	return 0;
}

static void emit(int i, const char *s, size_t n)
{
	if (ppn > 1)
		printf("%d.%d: %.*s\n", i / ppn, i % ppn, (int)n, s);
	else
		printf("%d: %.*s\n", i, (int)n, s);
	fflush(stdout);
	if (i == kill_node && kill_word && !kids[i].respawned && !kids[i].kill_at &&
	    n >= strlen(kill_word) && !strncmp(s, kill_word, strlen(kill_word)))
		kids[i].kill_at = t_now_ns() + (uint64_t)kill_ms * 1000000ull;
}

static void drain(int i)
{
	struct child *c = &kids[i];
	ssize_t n = read(c->fd, c->line + c->used, sizeof(c->line) - c->used);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		if (c->used)
			emit(i, c->line, c->used);
		c->used = 0;
		close(c->fd);
		c->fd = -1;
		return;
	}
	c->used += (size_t)n;
	for (;;) {
		char *nl = memchr(c->line, '\n', c->used);
		if (!nl) {
			if (c->used == sizeof(c->line)) {
				emit(i, c->line, c->used);
				c->used = 0;
			}
			return;
		}
		emit(i, c->line, (size_t)(nl - c->line));
		c->used -= (size_t)(nl - c->line) + 1;
		memmove(c->line, nl + 1, c->used);
	}
}

/* The process has ended: take what it wrote, then stop listening (something it
 * started may still hold the pipe open). */
static void drain_rest(int i)
{
	struct child *c = &kids[i];
	if (c->fd < 0)
		return;
	fcntl(c->fd, F_SETFL, O_NONBLOCK);
	for (size_t before = (size_t)-1; c->fd >= 0 && before != c->used;) {
		before = c->used;
		drain(i);
	}
	if (c->fd >= 0) {
		if (c->used)
			emit(i, c->line, c->used);
		c->used = 0;
		close(c->fd);
		c->fd = -1;
	}
}

static void kill_child(int i)
{
	kill(-kids[i].pid, SIGKILL);
	kill(kids[i].pid, SIGKILL);
}

/* A strict integer option (the whole text, in lo..hi), else usage. */
static void usage(void);
static int int_arg(const char *s, long lo, long hi)
{
	char *end;
	long v;
	errno = 0;
	v = strtol(s, &end, 10);
	if (!*s || *end || errno || v < lo || v > hi) {
		fprintf(stderr, "pn_launch: %s: expected an integer in %ld..%ld\n", s, lo, hi);
		usage();
	}
	return (int)v;
}

static void usage(void)
{
	fprintf(stderr, "usage: pn_launch -n N [-c CLUSTER] [-b BACKEND] [-t TIMEOUT_S] "
			"[-p PPN] [-k RANK:MS:WORD] [-r MS] [-f] [--keep] [--attach] -- PROGRAM ARGS...\n");
	exit(2);
}

/* The cluster's segments: the sw cluster's and the socket emulation's per-node
 * directories (a killed process leaves its node's behind). */
static void cluster_destroy(const char *cluster, int n_nodes)
{
	char name[128];
	pn_sw_cluster_destroy(cluster);
	for (int n = 0; n < n_nodes; n++) {
		snprintf(name, sizeof(name), SK_DIR_NAME_FMT, cluster, (unsigned)n);
		shm_unlink(name);
	}
}

int main(int argc, char **argv)
{
	static char cname[64];
	int i, a, rc = 0, live, start_failed = 0, stopping = 0;
	uint64_t deadline, kill_at = 0;

	for (a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--")) {
			a++;
			break;
		} else if (!strcmp(argv[a], "-n") && a + 1 < argc) {
			nodes = int_arg(argv[++a], 1, PN_MAX_NODES);
		} else if (!strcmp(argv[a], "-p") && a + 1 < argc) {
			ppn = int_arg(argv[++a], 1, PN_MAX_CONTEXTS);
		} else if (!strcmp(argv[a], "-c") && a + 1 < argc) {
			cluster = argv[++a];
		} else if (!strcmp(argv[a], "-b") && a + 1 < argc) {
			backend = argv[++a];
		} else if (!strcmp(argv[a], "-t") && a + 1 < argc) {
			timeout_s = int_arg(argv[++a], 0, MAX_TIMEOUT_S);
		} else if (!strcmp(argv[a], "-k") && a + 1 < argc) {
			static char spec[128];
			char *p, *q;
			snprintf(spec, sizeof(spec), "%s", argv[++a]);
			p = strchr(spec, ':');
			q = p ? strchr(p + 1, ':') : NULL;
			if (!p || !q)
				usage();
			*p = *q = 0;
			kill_node = atoi(spec);
			kill_ms = atoi(p + 1);
			kill_word = q + 1;
		} else if (!strcmp(argv[a], "-r") && a + 1 < argc) {
			respawn = 1;
			respawn_ms = atoi(argv[++a]);
		} else if (!strcmp(argv[a], "-f")) {
			fail_fast = 1;
		} else if (!strcmp(argv[a], "--keep")) {
			keep = 1;
		} else if (!strcmp(argv[a], "--attach")) {
			keep = attach = 1;
		} else {
			usage();
		}
	}
	if (a >= argc || nodes < 1 || nodes > PN_MAX_NODES || ppn < 1 || ppn > PN_MAX_CONTEXTS)
		usage();
	nkids = nodes * ppn;
	prog = &argv[a];
	if (!cluster) {
		snprintf(cname, sizeof(cname), "launch-%d", (int)getpid());
		cluster = cname;
	}
	signal(SIGPIPE, SIG_IGN);
	{
		/* Signals that end the run only set stop_sig; the loop below tears down. */
		struct sigaction sa;
		pid_t parent = getppid();
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_stop_signal;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
		/* Our parent's death is a SIGTERM too (and it may have died already). */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			stop_sig = SIGTERM;
	}
	if (!attach)
		cluster_destroy(cluster, nodes);   /* a fresh cluster: no state of an earlier run */

	kids = calloc((size_t)nkids, sizeof(*kids));
	if (!kids)
		return 1;
	for (i = 0; i < nkids; i++)
		kids[i].fd = -1;   /* not started (yet) */
	for (i = 0; i < nkids && !stop_sig; i++)
		if (start(i, 0) < 0) {
			perror("pn_launch: start");
			stop_sig = SIGTERM;   /* tear down the ones already started */
			start_failed = 1;
		}
	deadline = timeout_s ? t_now_ns() + (uint64_t)timeout_s * 1000000000ull : UINT64_MAX;

	for (;;) {
		struct pollfd *pf = calloc((size_t)nkids, sizeof(*pf));
		int *who = calloc((size_t)nkids, sizeof(*who));
		int np = 0, st;
		pid_t pid;

		live = 0;
		for (i = 0; i < nkids; i++) {
			if (kids[i].fd >= 0) {
				pf[np].fd = kids[i].fd;
				pf[np].events = POLLIN;
				who[np++] = i;
			}
			live += kids[i].running || kids[i].fd >= 0 || (kids[i].respawn_at && !stopping);
		}
		if (!live) {
			free(pf);
			free(who);
			break;
		}
		poll(pf, (nfds_t)np, 20);
		for (int k = 0; k < np; k++)
			if (pf[k].revents)
				drain(who[k]);
		free(pf);
		free(who);

		while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
			for (i = 0; i < nkids; i++)
				if (kids[i].pid == pid && kids[i].running)
					break;
			if (i == nkids)
				continue;
			kids[i].running = 0;
			kids[i].status = st;
			kill(-pid, SIGKILL);   /* whatever it left behind */
			drain_rest(i);
			if (WIFSIGNALED(st) && respawn && !kids[i].respawned) {
				printf("launch: %s %d killed by signal %d, respawning in %d ms\n", ppn > 1 ? "process" : "node", i, WTERMSIG(st),
				       respawn_ms);
				fflush(stdout);
				kids[i].respawned = 1;
				kids[i].respawn_at = t_now_ns() + (uint64_t)respawn_ms * 1000000ull + 1;
			} else if (WIFSIGNALED(st)) {
				printf("launch: node %d killed by signal %d\n", i, WTERMSIG(st));
			} else if (WEXITSTATUS(st)) {
				printf("launch: node %d exited with status %d\n", i, WEXITSTATUS(st));
				if (fail_fast) {
					printf("launch: fail fast, killing the others\n");
					for (int j = 0; j < nkids; j++)
						if (kids[j].running)
							kill_child(j);
				}
			}
			fflush(stdout);
		}

		uint64_t now = t_now_ns();
		if (stop_sig && !stopping) {
			/* Told to stop: every process group gets SIGTERM, SIGKILL after the grace. */
			stopping = 1;
			kill_at = now + (uint64_t)KILL_GRACE_MS * 1000000ull;
			if (!start_failed)
				printf("launch: %s, stopping every process\n", strsignal(stop_sig));
			fflush(stdout);
			for (i = 0; i < nkids; i++) {
				kids[i].respawn_at = 0;
				kids[i].kill_at = 0;
				if (kids[i].running) {
					kill(-kids[i].pid, SIGTERM);
					kill(kids[i].pid, SIGTERM);
				}
			}
		}
		if (stopping) {
			if (kill_at && now >= kill_at) {
				for (i = 0; i < nkids; i++)
					if (kids[i].running)
						kill_child(i);
				kill_at = 0;
			}
			continue;   /* until every process has ended and its output is read */
		}
		for (i = 0; i < nkids; i++)
			if (kids[i].respawn_at && now >= kids[i].respawn_at) {
				kids[i].respawn_at = 0;
				printf("launch: restarting node %d\n", i);
				fflush(stdout);
				if (start(i, 1) < 0)
					return 1;
			}
		for (i = 0; i < nkids; i++)
			if (kids[i].kill_at && kids[i].running && now >= kids[i].kill_at) {
				printf("launch: killing node %d (pid %d) with SIGKILL\n", i, (int)kids[i].pid);
				fflush(stdout);
				kill_child(i);
				kids[i].kill_at = 0;
			}
		if (now > deadline) {
			printf("launch: timeout after %d s, killing all; still running:", timeout_s);
			for (i = 0; i < nkids; i++)
				if (kids[i].running)
					printf(" %d", i);
			printf("\n");
			fflush(stdout);
			for (i = 0; i < nkids; i++)
				if (kids[i].running)
					kill_child(i);
			while (waitpid(-1, NULL, 0) > 0)
				;
			if (!keep)
				cluster_destroy(cluster, nodes);
			return 124;
		}
	}

	if (stopping) {
		if (!keep)
			cluster_destroy(cluster, nodes);
		free(kids);
		return start_failed ? 1 : 128 + stop_sig;
	}
	for (i = 0; i < nkids; i++) {
		int st = kids[i].status;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			rc = 1;
	}
	printf("launch: %s\n", rc ? "FAILED" : "all nodes exited 0");
	if (!keep)
		cluster_destroy(cluster, nodes);
	free(kids);
	return rc;
}
