/* SPDX-License-Identifier: BSD-2-Clause */
/* The firmware core's hardware access on the SoC (hw_soc.c). */
#ifndef PN_FW_HW_SOC_H
#define PN_FW_HW_SOC_H

#include "core/fw.h"

/* SoC bus origin of the NicCore (paranic.hw.soc.PARANIC_ORIGIN; the build passes it). */
#ifndef PARANIC_ORIGIN
#error "PARANIC_ORIGIN must come from the build (paranic.hw.soc.PARANIC_ORIGIN)"
#endif

extern const struct fw_hw fw_hw_soc;

#endif
