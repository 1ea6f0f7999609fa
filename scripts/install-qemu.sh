#!/usr/bin/env bash
# Installs Debian's qemu-user for scripts/check-cpu-levels.sh: x86 processors
# this machine may exceed, emulated. QEMU 7.2 (Debian 12's own package)
# emulates the AVX2 gathers with index register xmm4/ymm4 wrongly, so on
# Debian 12 the package comes from bookworm-backports (10.0). Does nothing
# when a qemu-x86_64 of version 8 or later is present.
set -euo pipefail
major() { qemu-x86_64 --version 2>/dev/null | sed -n 's/^qemu-x86_64 version \([0-9]*\).*/\1/p' | head -1; }
v=$(major || true)
if [ -n "$v" ] && [ "$v" -ge 8 ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
if [ "$codename" = bookworm ]; then
    if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
        # The mirror the machine already uses for bookworm (deb822 or
        # one-line sources).
        uri=$(awk '/^URIs:/ {u = $2} /^Suites:/ {for (i = 2; i <= NF; i++) if ($i == "bookworm") {print u; exit}}' \
                  /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
        if [ -z "$uri" ]; then
            uri=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
        fi
        [ -n "$uri" ] || { echo "install-qemu: no bookworm mirror in the apt sources" >&2; exit 1; }
        echo "deb $uri bookworm-backports main" | $SUDO tee /etc/apt/sources.list.d/bookworm-backports.list >/dev/null
    fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends -t bookworm-backports qemu-user
else
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends qemu-user
fi
v=$(major || true)
echo "qemu-x86_64 ${v:-missing}" >&2
[ -n "$v" ] && [ "$v" -ge 8 ]
