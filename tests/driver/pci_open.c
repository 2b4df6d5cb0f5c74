// SPDX-License-Identifier: BSD-2-Clause
/* pn_open through the environment (PARANIC_BACKEND=pci ...): prints the return code.
 * Also pins the ABI's structure sizes: changing one must bump PARANIC_ABI_VERSION. */
#include <stdio.h>

#include "paranic/pn_hal.h"
#include "uapi/paranic.h"

_Static_assert(sizeof(struct paranic_info) == 112, "ABI: paranic_info");
_Static_assert(sizeof(struct paranic_node) == 16, "ABI: paranic_node");
_Static_assert(sizeof(struct paranic_routes) == 16, "ABI: paranic_routes");
_Static_assert(sizeof(struct paranic_mem) == 40, "ABI: paranic_mem");
_Static_assert(sizeof(struct paranic_barrier) == 24, "ABI: paranic_barrier");
_Static_assert(sizeof(struct paranic_send) == 24, "ABI: paranic_send");
_Static_assert(sizeof(struct paranic_doorbell) == 8, "ABI: paranic_doorbell");
_Static_assert(PARANIC_ABI_VERSION == 1, "ABI version: update the sizes above with it");

int main(void)
{
	pn_hal_t *h = NULL;
	int r = pn_open(&h, NULL);

	printf("%d %s\n", r, r < 0 ? pn_strerror(r) : pn_backend_name(h));
	if (r == 0)
		pn_close(h);
	return 0;
}
