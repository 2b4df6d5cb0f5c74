/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The firmware's entry (LiteX's crt0 calls main): the firmware proper is fw_main()
 * (firmware/fw_entry.c); without it the CPU idles and the NicCore is left to the host
 * (fw_state stays NONE).
 */
void fw_main(void) __attribute__((weak));
void isr(void) __attribute__((weak));
int main(void);

/* Interrupts: none enabled unless the firmware provides its own isr(). */
void isr(void)
{
}

int main(void)
{
	if (fw_main)
		fw_main();
	for (;;)
		;
}
