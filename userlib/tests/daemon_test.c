/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranicd test program (tests/userlib/test_daemon.py), one process per node under
 * pn_launch --attach on a cluster whose daemons run:
 *
 *   daemon_test open          pn_open(NULL): "open rc=R ctx=C err=TEXT reason=TEXT"
 *   daemon_test hold FILE     open a context, check the daemon lists this process
 *                             (pn_daemon_procs, pn_daemon_jobs), "ok hold ...", then
 *                             keep it until FILE exists
 *   daemon_test crash         node 0 receives 16 MiB by rendezvous from node 1; node 1
 *                             prints "midway" once 1 MiB ($DAEMON_TEST_MIDWAY) is out and stops (pn_launch -k
 *                             kills it): node 0's receive must end with -ECONNRESET
 *                             (PEER-DEAD), then a new context on node 1 must be the dead
 *                             one's: "ok crash ..." and "ok reclaim ..."
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paranic/pn_daemon.h"
#include "paranic/pn_ports.h"
#include "tutil.h"

#define BIG (16u << 20)

static int do_open(void)
{
	pn_hal_t *h = NULL;
	int r = pn_open(&h, NULL);
	say("open rc=%d ctx=%d err=%s reason=%s", r, r == 0 ? pn_ctx_id(h) : -1, pn_strerror(r),
	    pn_daemon_last_reason());
	if (r == 0)
		pn_close(h);
	return 0;
}

static int do_hold(const char *file)
{
	pn_hal_t *h = NULL;
	pn_daemon_proc_t procs[PN_MAX_CONTEXTS];
	pn_daemon_job_t jobs[PN_DAEMON_MAX_JOBS];
	const char *job = getenv("PARANIC_JOB");
	int r, n, found = 0, jfound = 0;

	t_case = "hold";
	EXPECT_RC(pn_open(&h, NULL), 0);
	n = pn_daemon_procs(NULL, procs, PN_MAX_CONTEXTS);
	CHECK(n >= 1, "pn_daemon_procs: %d", n);
	for (int i = 0; i < n && i < PN_MAX_CONTEXTS; i++)
		if (procs[i].pid == (uint32_t)getpid() && procs[i].ctx == pn_ctx_id(h) &&
		    procs[i].node == pn_node_id(h) && procs[i].uid == (uint32_t)getuid() &&
		    !strcmp(procs[i].job, job ? job : "") && procs[i].abi == PN_ABI_VERSION)
			found++;
	CHECK(found == 1, "this process (pid %d ctx %d) listed %d times", (int)getpid(), pn_ctx_id(h), found);
	r = pn_daemon_jobs(NULL, jobs, PN_DAEMON_MAX_JOBS);
	CHECK(r >= 0, "pn_daemon_jobs: %d", r);
	for (int i = 0; i < r && i < PN_DAEMON_MAX_JOBS; i++)
		if (job && !strcmp(jobs[i].id, job) && jobs[i].procs >= 1)
			jfound++;
	CHECK(!job || jfound == 1, "job %s not listed with its processes", job);
	pn_barrier(h);
	say("ok hold node=%d ctx=%d pid=%d procs=%d", pn_node_id(h), pn_ctx_id(h), (int)getpid(), n);
	for (int i = 0; i < 3000 && access(file, F_OK) != 0; i++)
		t_sleep_us(10000);
	pn_close(h);
	return 0;
}

static int do_crash(void)
{
	pn_port_t *p = NULL;
	pn_port_req_t *req = NULL;
	pn_port_status_t st;
	char *buf = malloc(BIG);
	int node, r;

	t_case = "crash";
	CHECK(buf != NULL, "malloc");
	EXPECT_RC(pn_port_open(&p, NULL), 0);
	node = pn_port_node(p);
	CHECK(pn_port_ctx(p) == 1, "port on context %d, the test wants 1", pn_port_ctx(p));
	if (node == 0)
		EXPECT_RC(pn_port_irecv(p, 1, 1, 5, 0, 0, buf, BIG, &req), 0);
	EXPECT_RC(pn_port_barrier(p), 0);
	if (node == 1) {
		pn_status_t hs;
		memset(buf, 0x5a, BIG);
		EXPECT_RC(pn_port_isend(p, 0, 1, 5, 7, buf, BIG, &req), 0);
		for (;;) {
			pn_port_progress(p);
			pn_status(pn_port_hal(p), &hs);
			if (hs.sent_bytes >= (uint64_t)t_env_long("DAEMON_TEST_MIDWAY", 1 << 20))
				break;
		}
		say("midway sent=%llu", (unsigned long long)hs.sent_bytes);
		for (;;)
			pause();   /* killed here by pn_launch -k */
	}
	if (node == 0) {
		uint64_t t0 = t_now_ns();
		pn_hal_t *h = NULL;
		pn_open_opts_t o;
		r = pn_port_wait(p, &req, &st, 120ll * 1000000000ll);
		CHECK(r == -ECONNRESET, "receive ended with %d (%s), not -ECONNRESET", r, pn_strerror(r));
		say("ok crash rc=%d after_ms=%llu", r, (unsigned long long)((t_now_ns() - t0) / 1000000u));
		t_case = "reclaim";
		pn_open_opts_init(&o);
		o.node = 1;
		EXPECT_RC(pn_open(&h, &o), 0);
		say("ok reclaim node=%d ctx=%d", pn_node_id(h), pn_ctx_id(h));
		pn_close(h);
	}
	pn_port_close(p);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	int r;
	if (argc < 2)
		return 2;
	if (!strcmp(argv[1], "open"))
		r = do_open();
	else if (!strcmp(argv[1], "hold") && argc > 2)
		r = do_hold(argv[2]);
	else if (!strcmp(argv[1], "crash"))
		r = do_crash();
	else
		return 2;
	if (r == 0 && !t_failures)
		say("PASS");
	return r == 0 && !t_failures ? 0 : 1;
}
