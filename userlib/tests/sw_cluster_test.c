/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sw_cluster_test: what only the sw backend has (one process, plus forked children):
 * cluster segments (creation, attach, shape checks, stale ones, destroy), context
 * claims (any/given, busy, reclaim from a dead owner), the environment, and a dead
 * receiver (packets dropped and counted, the sender never wedged).
 *
 *   sw_cluster_test CLUSTER_PREFIX
 *
 * Prints "ok NAME ..." per check group, "PASS" at the end; exit 0 only on success.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "paranic/pn_hal.h"
#include "tutil.h"

static char cl[96], cl2[96];

static pn_open_opts_t opts(const char *cluster, int node, int nodes, int ctx)
{
	pn_open_opts_t o;
	pn_open_opts_init(&o);
	o.backend = "sw";
	o.cluster = cluster;
	o.node = node;
	o.nodes = nodes;
	o.ctx = ctx;
	return o;
}

static int test_contexts(void)
{
	pn_hal_t *a, *b, *c, *d;
	pn_open_opts_t o = opts(cl, 1, 2, PN_CTX_ANY);
	t_case = "contexts";

	EXPECT_RC(pn_open(&a, &o), 0);
	EXPECT_RC(pn_ctx_id(a), 1);            /* ANY: lowest free, context 0 last */
	EXPECT_RC(pn_open(&b, &o), 0);
	EXPECT_RC(pn_ctx_id(b), 2);
	EXPECT_RC(pn_node_id(b), 1);
	EXPECT_RC(pn_num_nodes(b), 2);
	EXPECT_RC(pn_num_ctx(b), PN_DEFAULT_CONTEXTS);
	EXPECT_RC(pn_mtu(b), PN_DEFAULT_MTU);
	o.ctx = 2;
	EXPECT_RC(pn_open(&c, &o), -EBUSY);    /* taken by a live owner (us) */
	o.ctx = 0;
	EXPECT_RC(pn_open(&c, &o), 0);
	EXPECT_RC(pn_ctx_id(c), 0);
	EXPECT_RC(pn_close(b), 0);
	o.ctx = PN_CTX_ANY;
	EXPECT_RC(pn_open(&d, &o), 0);
	EXPECT_RC(pn_ctx_id(d), 2);            /* freed by close, reused */
	o.ctx = PN_DEFAULT_CONTEXTS;           /* beyond the cluster's contexts */
	EXPECT_RC(pn_open(&b, &o), -EINVAL);
	o.ctx = 3;
	o.node = 2;                            /* beyond the cluster's nodes */
	EXPECT_RC(pn_open(&b, &o), -EINVAL);
	pn_close(a);
	pn_close(c);
	pn_close(d);
	say("ok contexts any/given/busy/reuse");
	return 0;
}

/* A child opens a context and dies without closing it: the context is reclaimed,
 * even before the parent reaps the child (a zombie counts as dead). */
static int test_reclaim(void)
{
	pn_hal_t *a;
	pn_open_opts_t o = opts(cl, 0, 2, 5);
	int p[2], st;
	char ch;
	pid_t pid;
	t_case = "reclaim";

	CHECK(pipe(p) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		pn_hal_t *x;
		if (pn_open(&x, &o) == 0 && write(p[1], "y", 1) == 1)
			_exit(0);   /* no pn_close */
		_exit(1);
	}
	CHECK(read(p[0], &ch, 1) == 1, "child did not open");
	t_sleep_us(20000);
	EXPECT_RC(pn_open(&a, &o), 0);   /* child is a zombie now */
	EXPECT_RC(pn_ctx_id(a), 5);
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
	pn_close(a);
	close(p[0]);
	close(p[1]);
	say("ok reclaim a dead owner's context is taken over");
	return 0;
}

/* A receiver killed with a full ring: the sender's packets are dropped and counted,
 * the sender never waits forever. */
static int test_dead_receiver(void)
{
	pn_hal_t *s, *r;
	pn_status_t st0, st;
	pn_open_opts_t o = opts(cl, 0, 2, 3);
	int p[2];
	char ch;
	pid_t pid;
	const unsigned K = 300;
	uint64_t v = 0, t0;
	t_case = "dead_receiver";

	CHECK(pipe(p) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		pn_hal_t *x;
		pn_open_opts_t oc = opts(cl, 1, 2, 4);
		if (pn_open(&x, &oc) == 0 && write(p[1], "y", 1) == 1)
			pause();
		_exit(1);
	}
	CHECK(read(p[0], &ch, 1) == 1, "child did not open");
	EXPECT_RC(pn_open(&s, &o), 0);
	o.node = 1;
	o.ctx = 6;
	EXPECT_RC(pn_open(&r, &o), 0);       /* node 1's counters, from another context */
	EXPECT_RC(pn_status(r, &st0), 0);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	t0 = t_now_ns();
	for (unsigned k = 0; k < K; k++)
		EXPECT_RC(pn_send_pio(s, 1, 4, k, &v, 8), 0);
	EXPECT_RC(pn_tx_wait(s), 0);
	EXPECT_RC(pn_status(r, &st), 0);
	CHECK(st.node_dropped - st0.node_dropped == K - PN_SW_DEFAULT_RX_SLOTS,
	      "node 1 dropped %llu packets, expected %u", (unsigned long long)(st.node_dropped - st0.node_dropped),
	      K - PN_SW_DEFAULT_RX_SLOTS);
	/* A closed context drops at once (nothing waits). */
	EXPECT_RC(pn_send_pio(s, 1, 9, 0, &v, 8), 0);
	EXPECT_RC(pn_tx_wait(s), 0);
	EXPECT_RC(pn_status(r, &st0), 0);
	CHECK(st0.node_dropped == st.node_dropped + 1, "closed context: dropped %llu",
	      (unsigned long long)(st0.node_dropped - st.node_dropped));
	pn_close(s);
	pn_close(r);
	say("ok dead_receiver %u packets into a dead 256-slot ring: 256 queued, %u dropped, %.1f ms", K,
	    K - PN_SW_DEFAULT_RX_SLOTS, (t_now_ns() - t0) / 1e6);
	return 0;
}

static int test_shapes(void)
{
	pn_hal_t *a, *b;
	pn_open_opts_t o = opts(cl2, 0, 3, PN_CTX_ANY);
	pn_status_t st;
	t_case = "shapes";

	pn_sw_cluster_destroy(cl2);
	o.mtu = 2048;
	o.rx_slots = 16;
	o.contexts = 4;
	EXPECT_RC(pn_open(&a, &o), 0);
	EXPECT_RC(pn_mtu(a), 2048);
	EXPECT_RC(pn_pio_max(a), 2048 - 16);   /* the window, not the MTU, limits PIO */
	EXPECT_RC(pn_num_ctx(a), 4);
	EXPECT_RC(pn_status(a, &st), 0);
	CHECK(st.rx_slots == 16, "rx_slots %u", st.rx_slots);
	/* Another process (here: handle) attaching without a shape gets the cluster's. */
	pn_open_opts_t o2 = opts(cl2, 2, 0, PN_CTX_ANY);
	EXPECT_RC(pn_open(&b, &o2), 0);
	EXPECT_RC(pn_num_nodes(b), 3);
	EXPECT_RC(pn_mtu(b), 2048);
	pn_close(b);
	/* A different shape while the cluster is in use: refused. */
	o2.nodes = 5;
	EXPECT_RC(pn_open(&b, &o2), -EBUSY);
	o2.nodes = 0;
	o2.mtu = 1024;
	EXPECT_RC(pn_open(&b, &o2), -EBUSY);
	pn_close(a);
	/* Unused: replaced by the new shape. */
	o2.mtu = 0;
	o2.nodes = 5;
	o2.node = 4;
	EXPECT_RC(pn_open(&b, &o2), 0);
	EXPECT_RC(pn_num_nodes(b), 5);
	EXPECT_RC(pn_mtu(b), PN_DEFAULT_MTU);
	pn_close(b);
	/* Bad shapes. */
	pn_open_opts_t o3 = opts("shape-bad", 0, 1, PN_CTX_ANY);
	o3.mtu = 1004;   /* not a multiple of 8 */
	EXPECT_RC(pn_open(&b, &o3), -EINVAL);
	o3.mtu = 0;
	o3.rx_slots = 100;   /* not a power of two */
	EXPECT_RC(pn_open(&b, &o3), -EINVAL);
	o3.rx_slots = 0;
	o3.contexts = 65;
	EXPECT_RC(pn_open(&b, &o3), -EINVAL);
	EXPECT_RC(pn_sw_cluster_destroy(cl2), 0);
	EXPECT_RC(pn_sw_cluster_destroy(cl2), -ENOENT);
	EXPECT_RC(pn_sw_cluster_destroy("no/slash"), -EINVAL);
	EXPECT_RC(pn_sw_cluster_destroy(NULL), -EINVAL);
	say("ok shapes create/attach/mismatch/replace/destroy");
	return 0;
}

static int test_environment(void)
{
	pn_hal_t *a;
	t_case = "environment";

	setenv("PARANIC_BACKEND", "sw", 1);
	setenv("PARANIC_CLUSTER", cl, 1);
	setenv("PARANIC_NODES", "2", 1);
	setenv("PARANIC_NODE", "1", 1);
	setenv("PARANIC_CTX", "7", 1);
	EXPECT_RC(pn_open(&a, NULL), 0);
	EXPECT_RC(pn_node_id(a), 1);
	EXPECT_RC(pn_ctx_id(a), 7);
	EXPECT_RC(pn_backend_name(a)[0], 's');
	pn_close(a);
	setenv("PARANIC_NODE", "one", 1);
	EXPECT_RC(pn_open(&a, NULL), -EINVAL);
	setenv("PARANIC_NODE", "1", 1);
	setenv("PARANIC_BACKEND", "pci-not-built", 1);
	EXPECT_RC(pn_open(&a, NULL), -ENOENT);
	setenv("PARANIC_BACKEND", "sw", 1);
	setenv("PARANIC_PIO_THRESHOLD", "-4", 1);
	EXPECT_RC(pn_open(&a, NULL), -EINVAL);
	unsetenv("PARANIC_PIO_THRESHOLD");
	unsetenv("PARANIC_CTX");
	say("ok environment PARANIC_BACKEND/CLUSTER/NODE/NODES/CTX, bad values refused");
	return 0;
}

int main(int argc, char **argv)
{
	const char *pre = argc > 1 ? argv[1] : "swtest";
	int (*tests[])(void) = {test_contexts, test_reclaim, test_dead_receiver, test_shapes, test_environment};

	snprintf(cl, sizeof(cl), "%s-a", pre);
	snprintf(cl2, sizeof(cl2), "%s-b", pre);
	pn_sw_cluster_destroy(cl);
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
		if (tests[i]() < 0)
			break;
	pn_sw_cluster_destroy(cl);
	pn_sw_cluster_destroy(cl2);
	say(t_failures ? "FAILED" : "PASS");
	return t_failures ? 1 : 0;
}
