#!/bin/sh
# The version of Debian's kernel that the driver is built for and the QEMU guest boots:
# the one Debian's linux-headers-amd64 depends on (never `uname -r`: this may be a
# container). Falls back to the newest /lib/modules/*/build; prints nothing if none.
v=$(dpkg-query -W -f='${Depends}' linux-headers-amd64 2>/dev/null | sed -n 's/^linux-headers-\([^ ,]*\).*/\1/p')
if [ -z "$v" ]; then
	for d in /lib/modules/*/build; do [ -e "$d/Makefile" ] && v=$(basename "$(dirname "$d")"); done
fi
echo "$v"
