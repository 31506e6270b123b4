#!/usr/bin/env bash
# Build a local stand-in for python:3.11-slim: Debian bookworm (python3.11)
# made with debootstrap --variant=minbase, imported into podman/buildah storage.
#
# Used only where no registry is reachable (this project's machines and CI).
# Real users build FROM python:3.11-slim and never run this.
#
# Usage: scripts/docker/make-base.sh [IMAGE_TAG]
# Env:   ATTENTION_VIZ_DOCKER_CACHE  directory for the rootfs tarball
#                                    (default /var/cache/attention-viz)
#        DEBIAN_MIRROR               (default: the machine's apt mirror or deb.debian.org)
set -euo pipefail

BASE_PACKAGES="python3,python3-venv,ca-certificates"
# Bump when the recipe changes, so a stale cached tarball is not reused.
RECIPE_VERSION=1
TAG="${1:-localhost/attention-viz-base:bookworm-py311-v${RECIPE_VERSION}}"
CACHE_DIR="${ATTENTION_VIZ_DOCKER_CACHE:-/var/cache/attention-viz}"
TARBALL="$CACHE_DIR/base-bookworm-py311-v${RECIPE_VERSION}.tar"

log() { printf '[make-base] %s\n' "$*" >&2; }

if podman image exists "$TAG" 2>/dev/null; then
    log "image $TAG already in local storage"
    echo "$TAG"
    exit 0
fi

mkdir -p "$CACHE_DIR"
if [[ ! -s "$TARBALL" ]]; then
    mirror="${DEBIAN_MIRROR:-}"
    if [[ -z "$mirror" ]]; then
        mirror=$(grep -hoE '^URIs: *http[^ ]*/debian$' /etc/apt/sources.list.d/*.sources 2>/dev/null \
            | head -n1 | sed 's/^URIs: *//') || true
        mirror="${mirror:-http://deb.debian.org/debian}"
    fi
    rootfs=$(mktemp -d /var/tmp/attention-viz-rootfs.XXXXXX)
    trap 'rm -rf "$rootfs"' EXIT
    log "debootstrap bookworm ($BASE_PACKAGES) from $mirror into $rootfs"
    debootstrap --variant=minbase --include="$BASE_PACKAGES" bookworm "$rootfs" "$mirror" \
        > "$CACHE_DIR/debootstrap.log" 2>&1 \
        || { tail -n 30 "$CACHE_DIR/debootstrap.log" >&2; log "debootstrap failed"; exit 1; }
    # Trim what a container never needs (as the official slim images do).
    chroot "$rootfs" apt-get clean
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
        "$rootfs"/usr/share/locale/* "$rootfs"/var/log/*.log "$rootfs"/var/cache/debconf/*-old
    tar --numeric-owner -C "$rootfs" -cf "$TARBALL.part" .
    mv "$TARBALL.part" "$TARBALL"
    rm -rf "$rootfs"
    trap - EXIT
    log "cached rootfs at $TARBALL ($(du -m "$TARBALL" | cut -f1) MB)"
else
    log "using cached rootfs $TARBALL"
fi

podman import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    "$TARBALL" "$TAG" >/dev/null
log "imported $TAG"
echo "$TAG"
