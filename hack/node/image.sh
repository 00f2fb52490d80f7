#!/usr/bin/env bash
# image.sh OUT.tar NAME:TAG ENTRYPOINT FILE... — writes a one-layer scratch
# image holding FILE... (each at /<basename>, mode kept) as an archive that
# `ctr images import` reads: an OCI image layout (oci-layout, index.json,
# blobs/sha256/…) plus the docker-archive manifest.json, so either reader
# finds the name. No registry, no daemon: tar, sha256sum and printf.
#
# The entrypoint is ENTRYPOINT (a path inside the image); the image runs as
# UID 65532 unless IMAGE_USER says otherwise (the pause and CoreDNS images
# use it too: none of them needs root), in /tmp (the one writable directory,
# where a relative --data-dir lands).
set -euo pipefail

out="$1" ref="$2" entry="$3"; shift 3
user="${IMAGE_USER:-65532:65532}"
work="$(mktemp -d "${TMPDIR:-/tmp}/concord-image.XXXXXX")"
trap 'rm -rf "${work}"' EXIT
mkdir -p "${work}/root" "${work}/blobs/sha256"
for f in "$@"; do cp -p "${f}" "${work}/root/$(basename "${f}")"; done
mkdir -p "${work}/root/tmp" && chmod 1777 "${work}/root/tmp"

# A reproducible layer: fixed owner and mtime, sorted names.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
  -C "${work}/root" -cf "${work}/layer.tar" .
layer_sha="$(sha256sum "${work}/layer.tar" | cut -d' ' -f1)"
layer_size="$(stat -c %s "${work}/layer.tar")"
mv "${work}/layer.tar" "${work}/blobs/sha256/${layer_sha}"

printf '{"architecture":"amd64","os":"linux","config":{"User":"%s","Entrypoint":["%s"],"Env":["PATH=/"],"WorkingDir":"/tmp"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created_by":"hack/node/image.sh"}]}' \
  "${user}" "${entry}" "${layer_sha}" >"${work}/config.json"
config_sha="$(sha256sum "${work}/config.json" | cut -d' ' -f1)"
config_size="$(stat -c %s "${work}/config.json")"
mv "${work}/config.json" "${work}/blobs/sha256/${config_sha}"

printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
  "${config_sha}" "${config_size}" "${layer_sha}" "${layer_size}" >"${work}/manifest"
man_sha="$(sha256sum "${work}/manifest" | cut -d' ' -f1)"
man_size="$(stat -c %s "${work}/manifest")"
mv "${work}/manifest" "${work}/blobs/sha256/${man_sha}"

printf '{"imageLayoutVersion":"1.0.0"}' >"${work}/oci-layout"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
  "${man_sha}" "${man_size}" "${ref}" "${ref##*:}" >"${work}/index.json"
printf '[{"Config":"blobs/sha256/%s","RepoTags":["%s"],"Layers":["blobs/sha256/%s"]}]' \
  "${config_sha}" "${ref}" "${layer_sha}" >"${work}/manifest.json"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
  -C "${work}" -cf "${out}" oci-layout index.json manifest.json blobs
