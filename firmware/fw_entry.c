// SPDX-License-Identifier: BSD-2-Clause
/* The firmware's entry: bring the NIC up and keep it up (docs/firmware.md). */
#include "core/fw.h"
#include "hw_soc.h"

static struct fw fw;

int fw_main(void);

int fw_main(void)
{
	fw_init(&fw, &fw_hw_soc);
	for (;;)
		fw_poll(&fw);
}
