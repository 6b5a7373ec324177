#!/usr/bin/env bash
# Build a minimal Debian image from Debian's own packages (debootstrap --variant=minbase) and
# `docker import` it.  Used when the base image (debian:<suite>-slim) is neither present locally nor
# pullable, e.g. on machines that reach the Debian mirror but no container registry.
#
# usage: scripts/build-rootfs-image.sh TAG [SUITE] [MIRROR]
#   MIRROR defaults to the first URI of the host's Debian sources (so a local mirror is reused),
#   else http://deb.debian.org/debian.  Needs root (debootstrap chroots); uses sudo when not root.
set -euo pipefail

tag=${1:?usage: $0 TAG [SUITE] [MIRROR]}
suite=${2:-bookworm}
mirror=${3:-}
if [[ -z $mirror ]]; then
  mirror=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  mirror=${mirror:-http://deb.debian.org/debian}
fi
sudo=""; [[ $(id -u) -eq 0 ]] || sudo="sudo"
command -v debootstrap >/dev/null || { echo "debootstrap missing: apt-get install debootstrap" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/rootfs.XXXXXX")
trap '$sudo rm -rf "$work"' EXIT
rootfs=$work/rootfs

echo "debootstrap --variant=minbase $suite from $mirror" >&2
$sudo debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }

# Same trimming as Debian's official -slim images: no docs/man/locales in later apt installs, no
# package caches, no recommends.  Keeps every child layer small.
$sudo tee "$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" >/dev/null <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
CFG
$sudo tee "$rootfs/etc/apt/apt.conf.d/docker-slim" >/dev/null <<'CFG'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Retries "5";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CFG
# debootstrap writes only "<suite> main"; add updates and security like the host.
security=${mirror%/debian}/debian-security
$sudo tee "$rootfs/etc/apt/sources.list" >/dev/null <<SRC
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security $suite-security main
SRC
$sudo rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
  "$rootfs"/usr/share/doc/*/[!c]* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
  "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/* "$rootfs"/tmp/* "$rootfs"/root/.bash_history
$sudo truncate -s 0 "$rootfs/etc/machine-id" 2>/dev/null || true
# resolv.conf and hosts are bind-mounted by Docker at run time; the host's copies must not leak in.
$sudo rm -f "$rootfs/etc/resolv.conf" "$rootfs/etc/hostname"

debian_version=$(cat "$rootfs/etc/debian_version")
$sudo tar --numeric-owner --xattrs -C "$rootfs" -c . | docker import \
  --change 'CMD ["bash"]' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change "LABEL io.horovod.rootfs.source=debootstrap-minbase io.horovod.rootfs.suite=$suite io.horovod.rootfs.debian_version=$debian_version" \
  --message "debootstrap --variant=minbase $suite $mirror" - "$tag" >/dev/null
echo "built $tag (Debian $debian_version, $(docker image inspect -f '{{.Size}}' "$tag") bytes)" >&2
