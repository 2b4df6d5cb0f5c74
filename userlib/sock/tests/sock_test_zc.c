/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sock_test_zc: sendfile, splice and MSG_ZEROCOPY on ParaNIC connections, which the
 * library accepts and does by copying (sock_test.h says how to run it).
 *
 *   zcopy  node 0 sends 3 MiB + 5 from a file with sendfile (the offset moved, the file
 *          position untouched), 1 MiB + 3 from it without an offset (the file position
 *          moved), 200000 bytes from a pipe with splice, and 3 sends with MSG_ZEROCOPY
 *          (SO_ZEROCOPY set): recvmsg(MSG_ERRQUEUE) reports completions 0 .. 2
 *          (SO_EE_ORIGIN_ZEROCOPY, SO_EE_CODE_ZEROCOPY_COPIED: the data was copied), poll
 *          said POLLERR before, EAGAIN after; node 1 takes the first part with splice into
 *          a pipe and reads the rest: every byte checked; the counters sendfile_bytes,
 *          splice_bytes and msg_zerocopy_copied agree
 */
#include "sock_test.h"

#include <linux/errqueue.h>
#include <sys/sendfile.h>

#define ZF_LEN ((3u << 20) + 5)
#define ZF_LEN2 ((1u << 20) + 3)
#define ZP_LEN 200000u
#define ZM_LEN 5000u
#define Z_TOTAL (ZF_LEN + ZF_LEN2 + ZP_LEN + 3 * ZM_LEN)

static uint8_t zbyte(size_t i)
{
	return (uint8_t)t_mix((uint32_t)i * 2654435761u);
}

static int zc_client(void)
{
	static uint8_t buf[ZP_LEN];
	char path[] = "/tmp/sock_test_zc.XXXXXX";
	int c = connect_to(1, (uint16_t)(port0 + 100), 0), f = mkstemp(path), p[2], one = 1;
	size_t off = 0;
	off_t o = 0;
	struct pollfd pf;
	char ctl[128];
	struct msghdr m = {.msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct sock_extended_err ee;

	CHECK(c >= 0 && f >= 0, "connect/mkstemp: %s", strerror(errno));
	unlink(path);
	for (size_t i = 0; i < ZF_LEN + ZF_LEN2; i += sizeof(buf)) {
		size_t n = ZF_LEN + ZF_LEN2 - i < sizeof(buf) ? ZF_LEN + ZF_LEN2 - i : sizeof(buf);
		for (size_t k = 0; k < n; k++)
			buf[k] = zbyte(i + k);
		EXPECT_RC(write(f, buf, n), (long)n);
	}
	EXPECT_RC(lseek(f, 0, SEEK_SET), 0);
	while ((size_t)o < ZF_LEN) {   /* with an offset: the file position stays */
		ssize_t r = sendfile(c, f, &o, ZF_LEN - (size_t)o);
		CHECK(r > 0, "sendfile: %s", strerror(errno));
	}
	CHECK(lseek(f, 0, SEEK_CUR) == 0, "sendfile with an offset moved the file position");
	EXPECT_RC(lseek(f, ZF_LEN, SEEK_SET), (long)ZF_LEN);
	for (size_t done = 0; done < ZF_LEN2;) {   /* without: it moves */
		ssize_t r = sendfile(c, f, NULL, ZF_LEN2 - done);
		CHECK(r > 0, "sendfile: %s", strerror(errno));
		done += (size_t)r;
	}
	CHECK(lseek(f, 0, SEEK_CUR) == (off_t)(ZF_LEN + ZF_LEN2), "file position");
	off = ZF_LEN + ZF_LEN2;
	CHECK(pipe(p) == 0, "pipe");
	for (size_t done = 0; done < ZP_LEN;) {
		size_t n = ZP_LEN - done < 32768 ? ZP_LEN - done : 32768;
		ssize_t r;
		for (size_t k = 0; k < n; k++)
			buf[k] = zbyte(off + done + k);
		EXPECT_RC(write(p[1], buf, n), (long)n);
		r = splice(p[0], NULL, c, NULL, n, 0);
		CHECK(r == (ssize_t)n, "splice to the socket: %zd %s", r, strerror(errno));
		done += n;
	}
	off += ZP_LEN;
	EXPECT_RC(setsockopt(c, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)), 0);
	for (int i = 0; i < 3; i++) {
		for (size_t k = 0; k < ZM_LEN; k++)
			buf[k] = zbyte(off + k);
		EXPECT_RC(send(c, buf, ZM_LEN, MSG_ZEROCOPY), (long)ZM_LEN);
		off += ZM_LEN;
	}
	pf.fd = c;
	pf.events = 0;
	EXPECT_RC(poll(&pf, 1, 1000), 1);
	CHECK(pf.revents & POLLERR, "poll: 0x%x", pf.revents);
	EXPECT_RC(recvmsg(c, &m, MSG_ERRQUEUE), 0);
	{
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		CHECK(cm && cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR, "the control message");
		memcpy(&ee, CMSG_DATA(cm), sizeof(ee));
		CHECK(ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY && ee.ee_errno == 0 && ee.ee_info == 0 && ee.ee_data == 2,
		      "completion origin %u range %u .. %u", ee.ee_origin, ee.ee_info, ee.ee_data);
		CHECK(ee.ee_code == SO_EE_CODE_ZEROCOPY_COPIED, "the completion does not say copied: code %u", ee.ee_code);
	}
	m.msg_controllen = sizeof(ctl);
	CHECK(recvmsg(c, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0 && errno == EAGAIN, "second errqueue read: %s",
	      strerror(errno));
	EXPECT_RC(shutdown(c, SHUT_WR), 0);
	EXPECT_RC(read_full(c, buf, 2, 2), 0);
	CHECK(!memcmp(buf, "ok", 2), "the server's answer");
	CHECK(sock_stat("sendfile_bytes") == (long long)(ZF_LEN + ZF_LEN2) && sock_stat("splice_bytes") == ZP_LEN &&
		      sock_stat("msg_zerocopy_copied") == 3,
	      "counters %lld %lld %lld", sock_stat("sendfile_bytes"), sock_stat("splice_bytes"),
	      sock_stat("msg_zerocopy_copied"));
	close(c);
	close(f);
	say("ok zcopy client bytes=%u", Z_TOTAL);
	return 0;
}

static int zc_server(void)
{
	static uint8_t buf[65536];
	int l = listener((uint16_t)(port0 + 100), 0), a, p[2];
	size_t got = 0, spliced = 0;
	CHECK(l >= 0, "listen: %s", strerror(errno));
	a = accept(l, NULL, NULL);
	CHECK(a >= 0 && pipe(p) == 0, "accept: %s", strerror(errno));
	while (spliced < ZF_LEN) {   /* the first part through a pipe */
		ssize_t r = splice(a, NULL, p[1], NULL, ZF_LEN - spliced, 0), n;
		CHECK(r > 0, "splice from the socket: %zd %s", r, strerror(errno));
		for (ssize_t done = 0; done < r; done += n) {
			n = read(p[0], buf, sizeof(buf) < (size_t)(r - done) ? sizeof(buf) : (size_t)(r - done));
			CHECK(n > 0, "pipe read");
			for (ssize_t k = 0; k < n; k++)
				CHECK(buf[k] == zbyte(spliced + (size_t)done + (size_t)k), "byte %zu",
				      spliced + (size_t)done + (size_t)k);
		}
		spliced += (size_t)r;
	}
	got = spliced;
	for (;;) {
		ssize_t r = read(a, buf, sizeof(buf));
		CHECK(r >= 0, "read: %s", strerror(errno));
		if (!r)
			break;
		for (ssize_t k = 0; k < r; k++)
			CHECK(buf[k] == zbyte(got + (size_t)k), "byte %zu", got + (size_t)k);
		got += (size_t)r;
	}
	CHECK(got == Z_TOTAL, "got %zu of %u", got, Z_TOTAL);
	EXPECT_RC(write(a, "ok", 2), 2);
	close(a);
	close(l);
	say("ok zcopy server bytes=%zu", got);
	return 0;
}

SOCK_TEST_MAIN({"zcopy", zc_client, zc_server})
