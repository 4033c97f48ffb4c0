#!/usr/bin/env bash
# Make sure the programs the contrib tests start are installed: Redis, MariaDB, an SSH server and client,
# openssl (for the FTPS test certificate), a Java runtime (for Spark), iproute2 (the multi-host test's
# network namespaces), Podman with a static busybox (the docker_runner tests' engine and image), and
# Azurite (the Azure Storage emulator, from npm).
#
#   scripts/ensure-test-services.sh      # called by `make test` before the suite
#
# Idempotent: installs only what is missing, with apt-get, when we are root. Otherwise it says what is
# missing and exits 0: those tests then skip locally (and fail under CI, which must have them). The tests
# start their own servers on free loopback ports in temporary folders; nothing is started here.
set -euo pipefail

say() { echo "ensure-test-services: $*"; }

# program (as the tests look for it) and the Debian package that brings it
NEEDED=(
    "redis-server redis-server"
    "mariadbd mariadb-server"
    "mariadb-install-db mariadb-server"
    "sshd openssh-server"
    "ssh openssh-client"
    "ssh-keygen openssh-client"
    "openssl openssl"
    "java openjdk-17-jre-headless"
    "ip iproute2"
    "podman podman"
    "busybox busybox-static"
    "unshare util-linux"
)

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }

# Azurite comes from the npm registry, not Debian (Luigi's own CI runs it too).
AZURITE_VERSION=3.35.0
if ! have azurite-blob; then
    if [ "$(id -u)" -eq 0 ] && command -v npm >/dev/null 2>&1; then
        say "installing azurite@$AZURITE_VERSION with npm"
        npm install -g --silent --no-fund --no-audit "azurite@$AZURITE_VERSION" >/dev/null
    else
        say "missing: azurite (npm install -g azurite@$AZURITE_VERSION; its tests will skip)"
    fi
fi

missing=()
for entry in "${NEEDED[@]}"; do
    read -r program package <<<"$entry"
    if ! have "$program"; then missing+=("$package"); fi
done
if [ "${#missing[@]}" -eq 0 ]; then
    say "all present"
    exit 0
fi
packages=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "missing: $packages(install them with apt-get; their tests will skip)"
    exit 0
fi
say "installing $packages with apt-get"
apt-get update -qq
# The packages' own services are not started: policy-rc.d refuses them in containers, and the tests
# start private servers of their own.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages >/dev/null
say "installed $packages"
