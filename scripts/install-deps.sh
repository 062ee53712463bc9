#!/usr/bin/env bash
# Installs the Debian packages that libra's build and tests need. Idempotent: packages that are
# already installed are left alone and nothing is fetched. Works as root or through sudo.
set -euo pipefail

# Package -> why we need it.
packages=(
  "build-essential:C++20 compiler (g++) and make"
  "cmake:build system (3.25+)"
  "ninja-build:fast parallel builds"
  "pkg-config:locating libraries"
  "git:records the source revision in every run"
  "libcli11-dev:command-line parsing (CLI11)"
  "libtomlplusplus-dev:recipe parsing (toml++)"
  "libsqlite3-dev:the results database (SQLite)"
  "sqlite3:inspecting results databases from the shell"
  "libcurl4-openssl-dev:HTTP clients for rollout engines (libcurl)"
  "libgtest-dev:unit tests (GoogleTest)"
  "libgmock-dev:unit tests (GoogleMock)"
  "openssh-client:the cluster backend's ssh launcher"
  "openssh-server:the ssh launcher's tests run a private sshd on localhost"
  "python3-torch:the CPU rollout and training workers (workers/), PyTorch on CPU"
  "librsvg2-bin:tests render every plot to PNG (rsvg-convert) and check its layout"
  "fonts-dejavu-core:the font those renders use, so that the layout checks are the same everywhere"
  "zlib1g-dev:tests decode the PNG renders"
  "python3-protobuf:tests decode libra's TensorBoard event files with an independent protobuf reader"
  "zsh:tests check the zsh completion script (libra completion zsh)"
  "slurm-client:the Slurm launcher (srun, salloc, squeue, scancel, scontrol)"
  "slurmctld:the Slurm launcher's tests run a one-node Slurm on this machine"
  "slurmd:the Slurm launcher's tests run a one-node Slurm on this machine"
  "munge:authentication between the Slurm commands and daemons of those tests"
)

missing=()
for entry in "${packages[@]}"; do
  name=${entry%%:*}
  if ! dpkg-query -W -f='${Status}' "$name" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$name")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages are already installed"
  exit 0
fi

echo "install-deps: installing ${#missing[@]} package(s):"
for entry in "${packages[@]}"; do
  name=${entry%%:*}
  for m in "${missing[@]}"; do
    [ "$m" = "$name" ] && printf '  %-24s %s\n' "$name" "${entry#*:}"
  done
done

if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "install-deps: error: not root and sudo is not available; install as root:" >&2
  echo "  apt-get install -y ${missing[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# Installing starts no service: libra's tests start the daemons they need (sshd, Slurm, munge) in
# folders of their own, and Slurm's packaged services fail to start without a configuration,
# which would fail the install on a machine without a policy-rc.d (containers usually have one).
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# install-deps.sh: no service starts during the install\nexit 101\n' |
    "${sudo[@]}" tee "$policy" >/dev/null
  "${sudo[@]}" chmod 755 "$policy"
  trap '"${sudo[@]}" rm -f "$policy"' EXIT
fi
if ! "${sudo[@]}" apt-get update -q; then
  echo "install-deps: error: 'apt-get update' failed (is a Debian mirror reachable?)" >&2
  exit 1
fi
if ! "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; then
  echo "install-deps: error: 'apt-get install ${missing[*]}' failed; see apt's message above" >&2
  exit 1
fi
echo "install-deps: done"
